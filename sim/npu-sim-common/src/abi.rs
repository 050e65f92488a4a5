//! C ABI shared by the libraries: error codes, enums and struct layouts from the CANN headers
//! (see `shared/reference/cann_abi.h`), plus the simulator's own SQE payload and CQE layout
//! (documented in `docs/simulator.md`).
use std::ffi::c_void;

// ---- runtime / ACL error codes (rt_error_codes.h, acl_base.h) ----
pub const ACL_SUCCESS: i32 = 0;
pub const ACL_ERROR_INVALID_PARAM: i32 = 100000;
pub const ACL_ERROR_UNINITIALIZE: i32 = 100001;
pub const ACL_ERROR_REPEAT_INITIALIZE: i32 = 100002;
pub const ACL_ERROR_REPEAT_FINALIZE: i32 = 100037;
pub const ACL_ERROR_RT_PARAM_INVALID: i32 = 107000;
pub const ACL_ERROR_RT_INVALID_DEVICEID: i32 = 107001;
pub const ACL_ERROR_RT_CONTEXT_NULL: i32 = 107002;
pub const ACL_ERROR_RT_INVALID_MEMORY_TYPE: i32 = 107016;
pub const ACL_ERROR_RT_INVALID_HANDLE: i32 = 107017;
pub const ACL_ERROR_RT_RESOURCE_ALLOC_FAIL: i32 = 207005;
pub const ACL_ERROR_RT_NO_STREAM_RESOURCE: i32 = 207008;
pub const ACL_ERROR_RT_TASK_TIMEOUT: i32 = 107020;
pub const ACL_ERROR_RT_MEMORY_ALLOCATION: i32 = 207001;
pub const ACL_ERROR_RT_INTERNAL_ERROR: i32 = 507000;
pub const ACL_ERROR_RT_AICORE_EXCEPTION: i32 = 507015;

// ---- driver error codes (ascend_hal_error.h) ----
pub const DRV_ERROR_NONE: i32 = 0;
pub const DRV_ERROR_INVALID_DEVICE: i32 = 2;
pub const DRV_ERROR_INVALID_VALUE: i32 = 3;
pub const DRV_ERROR_INNER_ERR: i32 = 7;
pub const DRV_ERROR_NO_RESOURCES: i32 = 14;
pub const DRV_ERROR_WAIT_TIMEOUT: i32 = 16;
pub const DRV_ERROR_STATUS_FAIL: i32 = 30;
pub const DRV_ERROR_MEMORY_OPT_FAIL: i32 = 58;
pub const DRV_ERROR_SQID_FULL: i32 = 60;
pub const DRV_ERROR_NOT_SUPPORT: i32 = 0xfffe;

// ---- HCCL (hccl_types.h) ----
pub const HCCL_SUCCESS: i32 = 0;
pub const HCCL_E_PARA: i32 = 1;
pub const HCCL_E_PTR: i32 = 2;
pub const HCCL_E_MEMORY: i32 = 3;
pub const HCCL_E_INTERNAL: i32 = 4;
pub const HCCL_E_NOT_SUPPORT: i32 = 5;
pub const HCCL_E_SYSCALL: i32 = 8;
pub const HCCL_E_TIMEOUT: i32 = 9;
pub const HCCL_E_RUNTIME: i32 = 15;

// ---- halGetDeviceInfo ----
pub const MODULE_TYPE_SYSTEM: i32 = 0;
pub const INFO_TYPE_VERSION: i32 = 1;
pub const INFO_TYPE_SYS_COUNT: i32 = 13;
pub const INFO_TYPE_DEV_OSC_FREQUE: i32 = 25;

// ---- rtMemcpyKind_t ----
pub const RT_MEMCPY_HOST_TO_HOST: u32 = 0;
pub const RT_MEMCPY_HOST_TO_DEVICE: u32 = 1;
pub const RT_MEMCPY_DEVICE_TO_HOST: u32 = 2;
pub const RT_MEMCPY_DEVICE_TO_DEVICE: u32 = 3;
pub const RT_MEMCPY_HOST_TO_DEVICE_EX: u32 = 6;
pub const RT_MEMCPY_DEVICE_TO_HOST_EX: u32 = 7;
pub const RT_MEMCPY_DEFAULT: u32 = 8;

// ---- rtDevBinary_t magics ----
pub const RT_DEV_BINARY_MAGIC_PLAIN: u32 = 0xabce_ed50;
pub const RT_DEV_BINARY_MAGIC_PLAIN_AICPU: u32 = 0xabce_ed51;
pub const RT_DEV_BINARY_MAGIC_PLAIN_AIVEC: u32 = 0xabce_ed52;
pub const RT_DEV_BINARY_MAGIC_ELF: u32 = 0x4355_4245;
pub const RT_DEV_BINARY_MAGIC_ELF_AICPU: u32 = 0x4141_5243;
pub const RT_DEV_BINARY_MAGIC_ELF_AIVEC: u32 = 0x4141_5246;
pub const RT_DEV_BINARY_MAGIC_ELF_AICUBE: u32 = 0x4149_4343;

/// `rtDevBinary_t`.
#[repr(C)]
pub struct RtDevBinary {
    pub magic: u32,
    pub version: u32,
    pub data: *const c_void,
    pub length: u64,
}

/// `rtArgsEx_t` (graphengine layout; only `args` and `argsSize` are read, which sit at the
/// same offsets in both published layouts).
#[repr(C)]
pub struct RtArgsEx {
    pub args: *mut c_void,
    pub host_input_info_ptr: *mut c_void,
    pub args_size: u32,
    pub tiling_addr_offset: u16,
    pub tiling_data_offset: u16,
    pub host_input_info_num: u16,
    pub has_tiling: u8,
    pub is_no_need_h2d_copy: u8,
    pub reserved: [u8; 4],
}

/// `struct halTaskSendInfo`.
#[repr(C)]
pub struct HalTaskSendInfo {
    pub type_: i32,
    pub ts_id: u32,
    pub sq_id: u32,
    pub timeout: i32,
    pub sqe_addr: *mut u8,
    pub sqe_num: u32,
    pub pos: u32,
    pub res: [u32; 8],
}

/// `struct halReportRecvInfo`.
#[repr(C)]
pub struct HalReportRecvInfo {
    pub type_: i32,
    pub ts_id: u32,
    pub cq_id: u32,
    pub timeout: i32,
    pub cqe_addr: *mut u8,
    pub cqe_num: u32,
    pub report_cqe_num: u32,
    pub stream_id: u32,
    pub task_id: u32,
    pub res: [u32; 8],
}

/// `struct halSqCqInputInfo` (pkg_inc/hal_pkg/trs_pkg.h): `info[0]` carries the stream id.
#[repr(C)]
pub struct HalSqCqInputInfo {
    pub type_: i32,
    pub ts_id: u32,
    pub sqe_size: u32,
    pub cqe_size: u32,
    pub sqe_depth: u32,
    pub cqe_depth: u32,
    pub grp_id: u32,
    pub flag: u32,
    pub cq_id: u32,
    pub sq_id: u32,
    pub info: [u32; 5],
    pub ext_info_len: u32,
    pub ext_info: *mut c_void,
    pub res: [u32; 5],
}

/// `struct halSqCqOutputInfo` (pkg_inc/ascend_hal_define.h).
#[repr(C)]
#[derive(Default)]
pub struct HalSqCqOutputInfo {
    pub sq_id: u32,
    pub cq_id: u32,
    pub queue_vaddr: u64,
    pub flag: u32,
    pub res: [u32; 5],
}

/// `struct halSqCqFreeInfo` (pkg_inc/hal_pkg/trs_pkg.h).
#[repr(C)]
#[derive(Default)]
pub struct HalSqCqFreeInfo {
    pub type_: i32,
    pub ts_id: u32,
    pub sq_id: u32,
    pub cq_id: u32,
    pub flag: u32,
    pub res: [u32; 8],
}

/// `drvIdType_t` (pkg_inc/hal_pkg/trs_pkg.h).
pub const DRV_STREAM_ID: i32 = 0;
pub const DRV_EVENT_ID: i32 = 1;
pub const DRV_MODEL_ID: i32 = 2;

/// `struct halResourceIdInputInfo` (pkg_inc/hal_pkg/trs_pkg.h).
#[repr(C)]
#[derive(Default)]
pub struct HalResourceIdInputInfo {
    pub type_: i32,
    pub ts_id: u32,
    pub resource_id: u32,
    pub res: [u32; 8],
}

/// `struct halResourceIdOutputInfo`.
#[repr(C)]
#[derive(Default)]
pub struct HalResourceIdOutputInfo {
    pub resource_id: u32,
    pub res: [u32; 8],
}

/// `drvSqCqType_t` (pkg_inc/hal_pkg/trs_pkg.h).
pub const DRV_NORMAL_TYPE: i32 = 0;
pub const DRV_LOGIC_TYPE: i32 = 2;

/// `drvSqCqPropType_t` values the simulator answers (pkg_inc/hal_pkg/trs_pkg.h).
pub const DRV_SQCQ_PROP_SQ_STATUS: i32 = 0;
pub const DRV_SQCQ_PROP_SQ_HEAD: i32 = 1;
pub const DRV_SQCQ_PROP_SQ_TAIL: i32 = 2;
/// "read clear": whether the SQ produced a CQE since the last query.
pub const DRV_SQCQ_PROP_SQ_CQE_STATUS: i32 = 4;
pub const DRV_SQCQ_PROP_SQ_DEPTH: i32 = 7;

/// `struct halSqCqQueryInfo` (pkg_inc/hal_pkg/trs_pkg.h): `value[0]` is the answer.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct HalSqCqQueryInfo {
    pub type_: i32,
    pub ts_id: u32,
    pub sq_id: u32,
    pub cq_id: u32,
    pub prop: i32,
    pub value: [u32; 8],
}

/// The simulated chip (`NPU_SIM_CHIP`): it decides the SQE header, the SQE type numbers and the
/// profiling record format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chip {
    /// Atlas A2/A3 (910B, 910_93): STARS v100.
    Ascend910B,
    /// Ascend 950 ("David"): STARS v2.
    Ascend950,
}

impl Chip {
    pub fn tag(self) -> &'static str {
        match self {
            Chip::Ascend910B => "910B",
            Chip::Ascend950 => "950",
        }
    }
    /// The chip id `halGetDeviceInfo(INFO_TYPE_VERSION)` reports in bits 8-15 (msPTI
    /// `PlatformType`: CHIP_910B = 5, CHIP_V6 = 15).
    pub fn chip_id(self) -> u32 {
        match self {
            Chip::Ascend910B => 5,
            Chip::Ascend950 => 15,
        }
    }
}

/// `halCqReportRecv` `task_id` meaning "any task" (runtime `MAX_UINT16_NUM`).
pub const TASK_ID_ANY: u32 = 0xFFFF;
/// Task ids run 0..=65534: `(last + 1) % 0xFFFF` (RT task_submit.cc), so 0xFFFF never names a
/// task.
pub const TASK_ID_MODULUS: u32 = 0xFFFF;
/// Bit 15 of the SQE header's stream id: "a synchronous API waits for this task's CQE"
/// (RT `stars_base.hpp` RT_SYNC_TASK_FLAG); the driver turns it into the CQE's match flag.
pub const RT_SYNC_TASK_FLAG: u16 = 0x8000;

/// SQE types of STARS v100 (910B/910_93): RT `src/runtime/core/inc/sqe/v100/stars_sqe.hpp`
/// `rtStarsSqeType`.
pub mod v100 {
    /// FFTS: AI Core and AI Vector kernels alike.
    pub const FFTS: u8 = 0;
    pub const AICPU: u8 = 1;
    pub const PLACE_HOLDER: u8 = 3;
    pub const EVENT_RECORD: u8 = 4;
    pub const EVENT_WAIT: u8 = 5;
    pub const NOTIFY_RECORD: u8 = 6;
    pub const NOTIFY_WAIT: u8 = 7;
    pub const WRITE_VALUE: u8 = 8;
    pub const SDMA: u8 = 11;
    pub const COND: u8 = 20;
}

/// SQE types of STARS v2 (950, "David"): RT `src/runtime/core/inc/sqe/v200_base/stars_david.hpp`
/// `rtDavidSqeType`.
pub mod v200 {
    pub const AIC: u8 = 0;
    pub const AIV: u8 = 1;
    pub const PLACE_HOLDER: u8 = 3;
    pub const AICPU_H: u8 = 4;
    pub const AICPU_D: u8 = 5;
    pub const NOTIFY_RECORD: u8 = 6;
    pub const NOTIFY_WAIT: u8 = 7;
    pub const WRITE_VALUE: u8 = 8;
    pub const SDMA: u8 = 11;
    pub const COND: u8 = 20;
}

/// What a task does, whatever its SQE type on the chip: the runtime puts it in the SQE's
/// annotation byte ([`annot::KIND`]) and the device and the ground truth go by it.
pub mod kind {
    pub const KERNEL: u8 = 1;
    pub const MEMCPY: u8 = 2;
    pub const MEMSET: u8 = 3;
    pub const HCCL: u8 = 4;
    pub const EVENT: u8 = 5;
    pub const FLIP: u8 = 6;
    pub const MODEL: u8 = 7;
}

/// Kernel engines (`pl::KERNEL_ENGINE`).
pub mod engine {
    pub const AIC: u32 = 0;
    pub const AIV: u32 = 1;
    pub const AICPU: u32 = 2;
}

/// SQE types by role on `chip`.
impl Chip {
    pub fn kernel_type(self, eng: u32) -> u8 {
        match (self, eng) {
            (Chip::Ascend910B, engine::AICPU) => v100::AICPU,
            (Chip::Ascend910B, _) => v100::FFTS,
            (Chip::Ascend950, engine::AICPU) => v200::AICPU_D,
            (Chip::Ascend950, engine::AIV) => v200::AIV,
            (Chip::Ascend950, _) => v200::AIC,
        }
    }
    /// An event record: EVENT_RECORD on v100, NOTIFY_RECORD on v2 (RT
    /// `david_event_task_v200_base.cc`).
    pub fn event_record_type(self) -> u8 {
        match self {
            Chip::Ascend910B => v100::EVENT_RECORD,
            Chip::Ascend950 => v200::NOTIFY_RECORD,
        }
    }
    pub fn event_wait_type(self) -> u8 {
        match self {
            Chip::Ascend910B => v100::EVENT_WAIT,
            Chip::Ascend950 => v200::NOTIFY_WAIT,
        }
    }
}

pub const SQE_SIZE: usize = 64;
pub const CQE_SIZE: usize = 32;

/// Byte offsets of the simulator's SQE payload (bytes 8..48 of `commandCustom`), by what the
/// task does. Real SQEs lay these bytes out otherwise (only the place holders' flip fields and
/// the model-execute fields follow the real layout).
pub mod pl {
    // kernels
    pub const KERNEL_PC: usize = 8; // u64 stub address / function handle
    pub const KERNEL_ARGS: usize = 16; // u64 host args pointer
    pub const KERNEL_ARGS_SIZE: usize = 24; // u32
    pub const KERNEL_ENGINE: usize = 28; // u32 engine::*
    // SDMA
    pub const COPY_SRC: usize = 8; // u64 (op 2: the device function)
    pub const COPY_DST: usize = 16; // u64 (op 2: its context)
    pub const COPY_BYTES: usize = 24; // u64
    pub const COPY_KIND: usize = 32; // u32 rtMemcpyKind_t, DEFAULT resolved
    pub const SDMA_OP: usize = 36; // u32 SDMA_OP_*
    pub const FILL_VALUE: usize = 40; // u32, SDMA_OP_FILL: the byte value
    // event record / wait
    pub const EVENT_ID: usize = 8; // u32
    pub const EVENT_GEN: usize = 16; // u64 record generation (0: none)
    // notify record / wait (HCCL)
    pub const NOTIFY_ID: usize = 8; // u32
    pub const CALL_FN: usize = 16; // u64 device function `extern "C" fn(ctx: u64) -> u32`
    pub const CALL_CTX: usize = 24; // u64
    /// u32 on HCCL tasks (notify and SDMA): the task's index within its collective.
    pub const HCCL_STEP: usize = 44;
    // model execute (COND, RT `ConstructSqeForModelExecuteTask`)
    pub const COND_SUB_TYPE: usize = 8; // u8 CONDS_SUB_TYPE_MODEL_EXEC = 1
    pub const MODEL_ID: usize = 12; // u16
    pub const MODEL_STREAM: usize = 16; // u32 the model stream whose tasks the device runs
}

/// `pl::SDMA_OP` values.
pub const SDMA_OP_COPY: u32 = 0;
/// A memset task (950: RT_STARS_MEMCPY_ASYNC_OP_KIND_MEMSET).
pub const SDMA_OP_FILL: u32 = 1;
/// A collective's data movement: `pl::CALL_FN(pl::CALL_CTX)` on the device.
pub const SDMA_OP_CALL: u32 = 2;
/// `CONDS_SUB_TYPE_MODEL_EXEC` (RT stars_base.hpp).
pub const CONDS_SUB_TYPE_MODEL_EXEC: u8 = 1;

/// The simulator's annotation bytes of every SQE, for the device model and the ground truth
/// (real SQEs use these bytes for other fields).
pub mod annot {
    /// u64: pointer to a NUL-terminated name (kernel, collective), or 0.
    pub const NAME: usize = 48;
    /// u8: `kind::*`.
    pub const KIND: usize = 56;
    /// u16: the stream's flip count when the task got its id (RT `TaskInfo::flipNum`): its
    /// profiling task id is `(flip << 16) | taskId`.
    pub const FLIP: usize = 58;
    /// u32: kind-specific: MEMSET value, HCCL rank count, MODEL model id.
    pub const AUX: usize = 60;
}

/// The place-holder SQE of a flip task (RT stream_task_v100.cc `ConstructSqeForFlipTask`):
/// header `task_type` (bytes 2-3) = TS_TASK_TYPE_FLIP, `pre_p` = 1, and `RtFlipTaskTag` at 16.
pub mod flip {
    pub const TASK_TYPE_OFF: usize = 2; // u16 task_type (where other SQEs have blockDim)
    pub const TS_TASK_TYPE_FLIP: u16 = 98;
    pub const FLIP_NUM_OFF: usize = 16; // u16 flipNumReport
    pub const SUB_TYPE_OFF: usize = 18; // u16 subType (0: the current stream)
    pub const STREAM_OFF: usize = 20; // u32 streamId
    /// `pre_p` = 1: bits 2-3 of header byte 1.
    pub const PRE_P: u8 = 1 << 2;
}

/// The largest task id; the task after it is 0 and bumps the stream's flip count
/// (RT `Stream::SetMaxTaskId`: `MAX_UINT16_NUM - 1`).
pub const MAX_TASK_ID: u16 = 0xFFFE;

/// One 64-byte SQE: `rtStarsSqeHeader_t` then `commandCustom`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub struct Sqe(pub [u8; SQE_SIZE]);

impl Default for Sqe {
    fn default() -> Self {
        Sqe([0; SQE_SIZE])
    }
}

/// Bit of header byte 1 that is `wrCqe`: v100 `rtStarsSqeHeader_t` (ie:2, preP:2, postP:2,
/// wrCqe:1) and v2 `rtDavidStarsSqeHeader_t` (ie:1, preP:1, postP:1, wrCqe:1, ...).
fn wr_cqe_bit(chip: Chip) -> u8 {
    match chip {
        Chip::Ascend910B => 1 << 6,
        Chip::Ascend950 => 1 << 3,
    }
}

impl Sqe {
    /// An SQE of `ty` doing `kind` that asks for no completion entry (`wrCqe` = 0), as
    /// ordinary tasks do.
    pub fn new(ty: u8, kind: u8, block_dim: u16) -> Sqe {
        let mut s = Sqe::default();
        s.0[0] = ty & 0x3f;
        s.0[2..4].copy_from_slice(&block_dim.to_le_bytes());
        s.0[annot::KIND] = kind;
        s
    }
    pub fn kind(&self) -> u8 {
        self.0[annot::KIND]
    }
    pub fn ty(&self) -> u8 {
        self.0[0] & 0x3f
    }
    /// The header's `wrCqe` bit: the task writes a CQE when it ends.
    pub fn wr_cqe(&self, chip: Chip) -> bool {
        self.0[1] & wr_cqe_bit(chip) != 0
    }
    pub fn set_wr_cqe(&mut self, chip: Chip, on: bool) -> &mut Self {
        if on {
            self.0[1] |= wr_cqe_bit(chip);
        } else {
            self.0[1] &= !wr_cqe_bit(chip);
        }
        self
    }
    /// Writes the header's ids: v100 has u16 `rtStreamId` (flag bits included) @4 and u16
    /// `taskId` @6; v2 has no stream id and a u32 `taskId` @4.
    pub fn set_header_ids(&mut self, chip: Chip, stream_field: u16, task_id: u32) {
        match chip {
            Chip::Ascend910B => self.set_ids(stream_field, task_id as u16),
            Chip::Ascend950 => {
                self.set_u32(4, task_id);
            }
        }
    }
    /// The header's task id on `chip`.
    pub fn header_task_id(&self, chip: Chip) -> u32 {
        match chip {
            Chip::Ascend910B => self.task_id().into(),
            Chip::Ascend950 => self.u32_at(4),
        }
    }
    /// The header's stream id field (flag bits included); v2 headers have none.
    pub fn header_stream_field(&self, chip: Chip) -> Option<u16> {
        (chip == Chip::Ascend910B).then(|| self.stream_field())
    }
    pub fn block_dim(&self) -> u16 {
        self.u16_at(2)
    }
    /// The header's stream id field, flag bits included.
    pub fn stream_field(&self) -> u16 {
        self.u16_at(4)
    }
    /// The stream id without flag bits.
    pub fn stream_id(&self) -> u16 {
        self.stream_field() & !RT_SYNC_TASK_FLAG
    }
    pub fn task_id(&self) -> u16 {
        self.u16_at(6)
    }
    pub fn set_ids(&mut self, stream_field: u16, task_id: u16) {
        self.0[4..6].copy_from_slice(&stream_field.to_le_bytes());
        self.0[6..8].copy_from_slice(&task_id.to_le_bytes());
    }
    pub fn u16_at(&self, off: usize) -> u16 {
        u16::from_le_bytes([self.0[off], self.0[off + 1]])
    }
    pub fn u32_at(&self, off: usize) -> u32 {
        let mut b = [0; 4];
        b.copy_from_slice(&self.0[off..off + 4]);
        u32::from_le_bytes(b)
    }
    pub fn u64_at(&self, off: usize) -> u64 {
        let mut b = [0; 8];
        b.copy_from_slice(&self.0[off..off + 8]);
        u64::from_le_bytes(b)
    }
    pub fn set_u16(&mut self, off: usize, v: u16) -> &mut Self {
        self.0[off..off + 2].copy_from_slice(&v.to_le_bytes());
        self
    }
    pub fn set_u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_le_bytes());
        self
    }
    pub fn set_u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_le_bytes());
        self
    }
}

/// The 32-byte logic CQE: the runtime's `rtCqReport_t` (RT
/// `src/runtime/core/inc/task/task_info_base.hpp`) == the driver's `struct trs_logic_cqe` (DRV
/// `src/sdk_driver/trsdrv/trs/inc/trs_core.h`), natural alignment, little-endian.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Cqe {
    /// Stream id without the RT_SYNC_TASK_FLAG bit (`& 0x7fff`).
    pub stream_id: u16,
    pub task_id: u16,
    pub error_code: u32,
    pub error_type: u8,
    /// The SQE's type; rewritten to 4 (record) or 3 (place holder) when `u1` is a timestamp.
    pub sqe_type: u8,
    /// The driver's SQ id.
    pub sq_id: u16,
    /// The SQ head after the task.
    pub sq_head: u16,
    /// `CQE_FLAG_*` bits.
    pub flags: u16,
    /// Device syscnt when the task ended, for event-record and place-holder entries without an
    /// error; otherwise the SQE's index in its SQ.
    pub u1: u64,
    /// Reserved (the driver's internal enqueue time).
    pub u2: u64,
}

const _: () = assert!(std::mem::size_of::<Cqe>() == CQE_SIZE);
const _: () = assert!(std::mem::offset_of!(Cqe, u1) == 16);
const _: () = assert!(std::mem::size_of::<HalTaskSendInfo>() == 64);
const _: () = assert!(std::mem::size_of::<HalReportRecvInfo>() == 72);
const _: () = assert!(std::mem::size_of::<HalSqCqQueryInfo>() == 52);
const _: () = assert!(std::mem::size_of::<HalSqCqInputInfo>() == 96);
const _: () = assert!(std::mem::offset_of!(HalSqCqInputInfo, ext_info) == 64);
const _: () = assert!(std::mem::size_of::<HalSqCqOutputInfo>() == 40);
const _: () = assert!(std::mem::size_of::<HalSqCqFreeInfo>() == 52);
const _: () = assert!(std::mem::size_of::<HalResourceIdInputInfo>() == 44);
const _: () = assert!(std::mem::size_of::<HalResourceIdOutputInfo>() == 36);
const _: () = assert!(std::mem::size_of::<RtArgsEx>() == 32);

/// `Cqe::flags` bits (`trs_logic_cqe`: match_flag:1, drop_flag:1, error_bit:1, acc_error:1,
/// next_task_vld:1, notify_attached:1).
pub const CQE_FLAG_MATCH: u16 = 1 << 0;
pub const CQE_FLAG_ERROR_BIT: u16 = 1 << 2;

/// CQE `error_type` values.
pub const CQE_ERROR_TYPE_NONE: u8 = 0;
pub const CQE_ERROR_TYPE_EXCEPTION: u8 = 1;

// ---- profiling channels (driver pkg_inc/ascend_hal_base.h; msPTI channel_data.h, inject_base.h) ----
// (Prototypes, PROF_CHANNEL_STARS_SOC_LOG and StarsSocLog agree with shared/reference/cann_abi.h
// section 6.)
/// Return codes of the `prof_*` functions that are not `drvError_t` values.
pub const PROF_ERROR: i32 = -1;
pub const PROF_STOPPED_ALREADY: i32 = -4;
/// Device ids the profiling API accepts (`DEV_NUM`).
pub const PROF_DEV_NUM: u32 = 64;
pub const PROF_CHANNEL_NUM_MAX: usize = 160;
pub const PROF_CHANNEL_NAME_LEN: usize = 32;
/// Bytes of `user_data` the driver forwards to the device (`PROF_USER_DATA_LEN`).
pub const PROF_USER_DATA_LEN: u32 = 128;
/// Sampling period bounds in ms (`PROF_PERIOD_MIN` / `PROF_PERIOD_MAX`, prof_ioctl.h).
pub const PROF_PERIOD_MIN_MS: u32 = 10;
pub const PROF_PERIOD_MAX_MS: u32 = 10_000;
/// `CHANNEL_STARS_SOC_LOG_BUFFER`: STARS task begin/end log (910B, 310B).
pub const PROF_CHANNEL_STARS_SOC_LOG: u32 = 50;
/// `TS_PROFILE_COMMAND_TYPE_PROFILING_ENABLE`, the "on" value of a StarsSocLogConfig switch.
pub const TS_PROFILE_ENABLE: u32 = 1;
/// `funcType` of a StarsSocLog record.
pub const STARS_FUNC_TYPE_BEGIN: u8 = 0;
pub const STARS_FUNC_TYPE_END: u8 = 1;

/// `struct prof_poll_info`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ProfPollInfo {
    pub device_id: u32,
    pub channel_id: u32,
}

/// `struct channel_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ChannelInfo {
    pub channel_name: [u8; PROF_CHANNEL_NAME_LEN],
    pub channel_type: u32,
    pub channel_id: u32,
}

/// `channel_list_t` (`prof_drv_get_channels`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ChannelList {
    pub chip_type: u32,
    pub channel_num: u32,
    pub channel: [ChannelInfo; PROF_CHANNEL_NUM_MAX],
}

/// `struct prof_start_para` (`ProfStartParaT` in msPTI).
#[repr(C)]
pub struct ProfStartPara {
    /// `PROF_CHANNEL_TYPE`: 0 TS, 1 peripheral.
    pub channel_type: i32,
    pub sample_period: u32,
    pub real_time: u32,
    pub user_data: *mut c_void,
    pub user_data_size: u32,
}

/// `StarsSocLogConfigT`: the `user_data` of a channel-50 start; 1 enables, 2 disables.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct StarsSocLogConfig {
    pub acsq_task: u32,
    pub acc_pmu: u32,
    pub cdqm_reg: u32,
    pub dvpp_vpc_block: u32,
    pub dvpp_jpegd_block: u32,
    pub dvpp_jpede_block: u32,
    pub ffts_thread_task: u32,
    pub ffts_block: u32,
    pub sdma_dmu: u32,
    pub tag: u32,
    pub block_shink_flag: u32,
}

pub const STARS_SOC_LOG_SIZE: usize = 64;

/// `StarsSocLog`: one 64-byte task begin/end record of channel 50 (`#pragma pack(4)`).
/// Bitfields are little-endian, first field in the lowest bits: `word0` is
/// funcType:6 | cnt:4 | taskType:6, and `acc` is accId:6 | acsqId:10.
#[repr(C, packed(4))]
#[derive(Clone, Copy, Default, Debug)]
pub struct StarsSocLog {
    pub word0: u16,
    pub resv0: u16,
    /// Raw stream id field: may carry task id bits (see [`StarsSocLog::ids`]).
    pub stream_id: u16,
    /// Raw task id field.
    pub task_id: u16,
    /// Device syscnt.
    pub timestamp: u64,
    pub resv1: u16,
    pub acc: u16,
    pub resv2: [u32; 11],
}

/// Stream id field flags (msPTI stars_common.h): bit 12 "task id high bits here", bit 13
/// "stream and task low 12 bits swapped".
pub const SOC_LOG_STREAM_BIT12: u16 = 0x1000;
pub const SOC_LOG_STREAM_BIT13: u16 = 0x2000;

impl StarsSocLog {
    pub fn func_type(&self) -> u8 {
        (self.word0 & 0x3f) as u8
    }
    pub fn task_type(&self) -> u8 {
        (self.word0 >> 10) as u8
    }
    pub fn acsq_id(&self) -> u16 {
        self.acc >> 6
    }
    /// (stream id, task id) as msPTI decodes them (`StarsCommon::GetStreamId/GetTaskId`, the
    /// non-expanded stream mode): bit 12 of the stream field means the task id's top 3 bits
    /// are the stream field's bits 13-15; bit 13 means the low 12 bits of both are swapped.
    pub fn ids(&self) -> (u16, u16) {
        let (s, t) = (self.stream_id, self.task_id);
        if s & SOC_LOG_STREAM_BIT12 != 0 {
            (s % 2048, (t & 0x1fff) | (s & 0xe000))
        } else if s & SOC_LOG_STREAM_BIT13 != 0 {
            ((t & 0x0fff) % 2048, (s & 0x0fff) | (t & 0xf000))
        } else {
            (s % 2048, t)
        }
    }
    pub fn to_bytes(&self) -> [u8; STARS_SOC_LOG_SIZE] {
        // SAFETY: StarsSocLog is 64 bytes of plain integers with no padding (asserted below).
        unsafe { std::mem::transmute::<StarsSocLog, [u8; STARS_SOC_LOG_SIZE]>(*self) }
    }
    pub fn from_bytes(b: &[u8; STARS_SOC_LOG_SIZE]) -> StarsSocLog {
        // SAFETY: every bit pattern is a valid StarsSocLog (plain integers, no padding).
        unsafe { std::mem::transmute::<[u8; STARS_SOC_LOG_SIZE], StarsSocLog>(*b) }
    }
}

const _: () = assert!(std::mem::size_of::<StarsSocLog>() == STARS_SOC_LOG_SIZE);

pub const STARS_SOC_LOG_V6_SIZE: usize = 32;

/// `StarsSocLogV6`: the 32-byte channel-50 record of 950 (msPTI channel_data.h, `#pragma
/// pack(4)`; `SocLogConvert` picks it for CHIP_V6): no stream id, a 32-bit task id.
#[repr(C, packed(4))]
#[derive(Clone, Copy, Default, Debug)]
pub struct StarsSocLogV6 {
    /// funcType:6 | cnt:4 | taskType:6
    pub word0: u16,
    pub resv0: u16,
    pub task_id: u32,
    /// Device syscnt.
    pub timestamp: u64,
    pub resv1: u16,
    /// accId:6 | acsqId:10
    pub acc: u16,
    pub resv2: [u32; 3],
}

const _: () = assert!(std::mem::size_of::<StarsSocLogV6>() == STARS_SOC_LOG_V6_SIZE);

impl StarsSocLogV6 {
    pub fn func_type(&self) -> u8 {
        (self.word0 & 0x3f) as u8
    }
    pub fn task_type(&self) -> u8 {
        (self.word0 >> 10) as u8
    }
    pub fn acsq_id(&self) -> u16 {
        self.acc >> 6
    }
    pub fn to_bytes(&self) -> [u8; STARS_SOC_LOG_V6_SIZE] {
        // SAFETY: 32 bytes of plain integers with no padding (asserted above).
        unsafe { std::mem::transmute::<StarsSocLogV6, [u8; STARS_SOC_LOG_V6_SIZE]>(*self) }
    }
    pub fn from_bytes(b: &[u8; STARS_SOC_LOG_V6_SIZE]) -> StarsSocLogV6 {
        // SAFETY: every bit pattern is a valid StarsSocLogV6.
        unsafe { std::mem::transmute::<[u8; STARS_SOC_LOG_V6_SIZE], StarsSocLogV6>(*b) }
    }
}
const _: () = assert!(std::mem::size_of::<StarsSocLogConfig>() == 44);
const _: () = assert!(std::mem::size_of::<ProfStartPara>() == 32);
const _: () = assert!(std::mem::size_of::<ChannelList>() == 8 + 40 * PROF_CHANNEL_NUM_MAX);
const _: () = assert!(std::mem::size_of::<ProfPollInfo>() == 8);
