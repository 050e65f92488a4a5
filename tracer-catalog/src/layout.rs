//! Layout descriptions of the driver and device structures the BPF programs and the agent
//! read, as data, one per chip: the agent asks the driver which chip it drives
//! (`halGetDeviceInfo(INFO_TYPE_VERSION)`) and uses that chip's [`ChipLayout`]. A chip or a
//! CANN release whose structures differ supplies other values.
use tracer_common::DeviceLayout;
use tracer_schema::vocab::{KernelType, SyncKind};

use crate::model::TaskKind;

/// Everything the tracer reads on one chip's device path.
#[derive(Debug, PartialEq, Eq)]
pub struct ChipLayout {
    /// The chip as `session.json` names it.
    pub name: &'static str,
    /// The task scheduler generation, for messages.
    pub stars: &'static str,
    /// The chip ids the driver reports for it: bits 8-15 of `halGetDeviceInfo(dev,
    /// MODULE_TYPE_SYSTEM, INFO_TYPE_VERSION)` (msPTI `PlatformType`, Ascend/mspti
    /// `csrc/common/context_manager.h`).
    pub chip_ids: &'static [u32],
    /// The driver's task structures, SQE header and CQE (the BPF map `LAYOUT`).
    pub device: DeviceLayout,
    /// One profiling-channel record.
    pub soc_log: SocLogLayout,
    /// The `sample_period` the profiling channel is started with (msPTI's value).
    pub soc_log_period_ms: u32,
    /// What each SQE type is; types not listed have no table (maintenance and other
    /// bookkeeping tasks).
    pub sqe_kinds: &'static [(u8, SqeKind)],
    /// The SQE type of a model-execute task: a COND task with the sub type
    /// `CONDS_SUB_TYPE_MODEL_EXEC`; the model's loaded tasks run while it runs.
    pub model_execute_sqe: u8,
    /// The SQE types a completion entry reports when it carries a device timestamp (the
    /// task's end): the driver stamps only event records and place holders and rewrites
    /// their type to `TRS_STARS_CQE_RECORED` (4) or `TRS_STARS_CQE_HOLDER` (3).
    pub cqe_timestamped: &'static [u8],
}

/// What a task of an SQE type is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqeKind {
    /// A kernel, on this compute unit (`Unknown` when the type does not say).
    Kernel(KernelType),
    /// A DMA copy (also a memset, when its call says so).
    Memcpy,
    /// A synchronization or bookkeeping task of the `sync` table.
    Sync(SyncKind),
}

impl ChipLayout {
    fn sqe_kind(&self, sqe_type: u8) -> Option<SqeKind> {
        self.sqe_kinds
            .iter()
            .find(|(ty, _)| *ty == sqe_type)
            .map(|&(_, kind)| kind)
    }

    /// What a task's SQE type says it is: the task kind, used when the API call that
    /// submitted it is unknown, and the compute unit of kernels.
    pub fn sqe_task_kind(&self, sqe_type: u8) -> Option<(TaskKind, KernelType)> {
        Some(match self.sqe_kind(sqe_type)? {
            SqeKind::Kernel(unit) => (TaskKind::Kernel, unit),
            SqeKind::Memcpy => (TaskKind::Memcpy, KernelType::Unknown),
            SqeKind::Sync(_) => (TaskKind::Sync, KernelType::Unknown),
        })
    }

    /// What a synchronization task does, from its SQE type.
    pub fn sqe_sync_kind(&self, sqe_type: u8) -> SyncKind {
        match self.sqe_kind(sqe_type) {
            Some(SqeKind::Sync(kind)) => kind,
            _ => SyncKind::Unknown,
        }
    }

    /// Whether a completion entry of this (CQE-reported) SQE type carries the task's end.
    pub fn cqe_has_timestamp(&self, sqe_type: u8) -> bool {
        self.cqe_timestamped.contains(&sqe_type)
    }

    /// The bits of a task id that both an SQE header and a completion entry carry: a
    /// completion's task id names a submission by these.
    pub fn task_key_mask(&self) -> u32 {
        self.device.task_key_mask()
    }
}

/// The driver's profiling channel that carries a begin and an end record per device task
/// (STARS, both generations): `CHANNEL_STARS_SOC_LOG_BUFFER` (hicann/driver
/// `pkg_inc/ascend_hal_base.h`), the one msPTI and msprof read kernel times from (msPTI
/// `dev_prof_task.cpp` `kindToChannel_map_`, the same for CHIP_910B and CHIP_V6).
pub const SOC_LOG_CHANNEL: u32 = 50;

/// The driver's task interface (`ascend_hal_base.h`: struct halTaskSendInfo, struct
/// halReportRecvInfo), the logic CQE and function handles, which both STARS generations
/// share: the 32-byte logic CQE is `rtCqReport_t` / `rtLogicCqReport_t` (RT
/// `src/runtime/core/inc/task/task_info_base.hpp`) = the kernel's `trs_logic_cqe` (DRV
/// `src/sdk_driver/trsdrv/trs/inc/trs_core.h`): streamId@0 taskId@2 (u16) errorCode@4
/// errorType@8 sqeType@9 sqId@10 sqHead@12 flags@14, a u64 @16 that holds a device syscnt
/// only for the SQE types `cqe_timestamped` names. Function handles: hicann/runtime's `class
/// Kernel` keeps `std::string name_` at +24 (data pointer, length at +32); runtimes since
/// 2026-04 hand out an `rtInnerObject { uint64_t magic = "FUNC"; void *object; }` wrapping
/// it, older ones the `Kernel*` itself (real-device-path.md section 4), told apart by the
/// magic.
const COMMON: DeviceLayout = DeviceLayout {
    send_sqe_addr: 16,
    send_sqe_num: 24,
    send_sq_id: 8,
    sqe_size: 64,
    sqe_type: 0,
    sqe_block_dim: 2,
    sqe_stream: 0,
    sqe_task: 0,
    sqe_wr_cqe_byte: 1,
    sqe_wr_cqe_mask: 0,
    recv_cqe_addr: 16,
    recv_report_num: 28,
    cqe_size: 32,
    cqe_stream: 0,
    cqe_task: 2,
    cqe_status: 4,
    cqe_sqe_type: 9,
    cqe_end_cnt: 16,
    sqe_stream_mask: 0,
    cqe_stream_mask: 0x07ff,
    handle_magic_offset: 0,
    handle_object_offset: 8,
    handle_name_ptr: 24,
    handle_name_len: 32,
    soc_log_channel: SOC_LOG_CHANNEL as u16,
    sqe_task_size: 2,
    cqe_task_size: 2,
    _pad: 0,
    handle_wrapper_magic: 0x4655_4E43,
};

/// Atlas A2/A3 (910B, 910_93): STARS v100.
///
/// The SQE header is the packed 8-byte `rtStarsSqeHeader_t` (RT
/// `pkg_inc/runtime/rt_external_stars_define.h`): type:6 @0, wrCqe bit 6 of byte 1,
/// blockDim @2, u16 rtStreamId @4 (bit 15 `RT_SYNC_TASK_FLAG` on the record stream
/// synchronize sends), u16 taskId @6, per stream `(last + 1) % 0xFFFF`. Stream ids keep their
/// low 11 bits on both sides (the flag above, and the channel keeps ids modulo 2048). Channel
/// records are 64-byte `StarsSocLog` with msPTI's id encodings; SQE types are `rtStarsSqeType`
/// (RT `src/runtime/core/inc/sqe/v100/stars_sqe.hpp`).
pub static CHIP_910B: ChipLayout = ChipLayout {
    name: "910B",
    stars: "STARS v100",
    chip_ids: &[5],
    device: DeviceLayout {
        sqe_stream: 4,
        sqe_stream_mask: 0x07ff,
        sqe_task: 6,
        sqe_wr_cqe_mask: 1 << 6,
        ..COMMON
    },
    soc_log: SocLogLayout {
        record_size: 64,
        func_type: 0,
        ids: SocLogIds::Encoded {
            stream_id: 4,
            task_id: 6,
        },
        timestamp: 8,
    },
    soc_log_period_ms: 20,
    // 0 is the FFTS task that runs both AI Core and AI Vector kernels; 3 a place holder (the
    // record stream synchronize waits for, the runtime's flip task); 11 SDMA (copies, and
    // memsets made of copies).
    sqe_kinds: &[
        (0, SqeKind::Kernel(KernelType::AiCore)),
        (1, SqeKind::Kernel(KernelType::AiCpu)),
        (3, SqeKind::Sync(SyncKind::PlaceHolder)),
        (4, SqeKind::Sync(SyncKind::EventRecord)),
        (5, SqeKind::Sync(SyncKind::EventWait)),
        (6, SqeKind::Sync(SyncKind::NotifyRecord)),
        (7, SqeKind::Sync(SyncKind::NotifyWait)),
        (8, SqeKind::Sync(SyncKind::WriteValue)),
        (11, SqeKind::Memcpy),
        (20, SqeKind::Sync(SyncKind::ModelExecute)),
    ],
    // RT `model_execute_task_v100.cc`.
    model_execute_sqe: 20,
    // DRV `stars_v1/trs_stars_cq.c` `trs_stars_cqe_to_logic_cqe`.
    cqe_timestamped: &[3, 4],
};

/// Ascend 950 ("David"): STARS v2.
///
/// The SQE header is the packed 8-byte `rtDavidStarsSqeHeader_t` (RT
/// `src/runtime/core/inc/sqe/v200_base/starsv2_base.hpp`): type:6 @0, wrCqe bit 3 of byte 1
/// (ie:1, preP:1, postP:1, wrCqe:1, ...), blockDim @2, a u32 taskId @4 and no stream id. The
/// task id is the process's task serial number (RT `Runtime::AllocTaskSn`, `& 0x7FFFFFFF`),
/// unique across its streams. The hardware CQE (DRV `stars_v2/trs_stars_v2_cq.h`
/// `rt_stars_cqe_t`) and the logic CQE carry a u16 task id, the serial number's low 16 bits
/// (inferred: a 16-bit field), and the stream the driver finds from the SQ: completions are
/// joined by (process, device, task id & 0xffff), the stream being 0 on both sides. Channel
/// records are 32-byte `StarsSocLogV6` (msPTI `TransSocLogV6`: no stream, the 32-bit task id
/// as it is; msPTI's join key ignores the stream on CHIP_V6, `ContextManager::EncodeDstKey`).
/// SQE types are `rtDavidSqeType` (RT `src/runtime/core/inc/sqe/v200_base/stars_david.hpp`).
pub static CHIP_950: ChipLayout = ChipLayout {
    name: "950",
    stars: "STARS v2",
    chip_ids: &[15],
    // No stream in the header (mask 0: the stream is 0), and the CQE's, which the driver
    // finds from the SQ, is not joined on.
    device: DeviceLayout {
        sqe_stream_mask: 0,
        sqe_task: 4,
        sqe_task_size: 4,
        sqe_wr_cqe_mask: 1 << 3,
        cqe_stream_mask: 0,
        ..COMMON
    },
    soc_log: SocLogLayout {
        record_size: 32,
        func_type: 0,
        ids: SocLogIds::Task32 { task_id: 4 },
        timestamp: 8,
    },
    // msPTI `DevProfTaskStars::StartTask`: 0 on CHIP_V6.
    soc_log_period_ms: 0,
    // Events are notify records and waits on v2 (RT `david_event_task_v200_base.cc`): the
    // SQE type cannot tell an event from a notify, and says notify.
    sqe_kinds: &[
        (0, SqeKind::Kernel(KernelType::AiCore)),
        (1, SqeKind::Kernel(KernelType::AiVector)),
        (2, SqeKind::Kernel(KernelType::Unknown)),
        (3, SqeKind::Sync(SyncKind::PlaceHolder)),
        (4, SqeKind::Kernel(KernelType::AiCpu)),
        (5, SqeKind::Kernel(KernelType::AiCpu)),
        (6, SqeKind::Sync(SyncKind::NotifyRecord)),
        (7, SqeKind::Sync(SyncKind::NotifyWait)),
        (8, SqeKind::Sync(SyncKind::WriteValue)),
        (9, SqeKind::Memcpy),
        (10, SqeKind::Memcpy),
        (11, SqeKind::Memcpy),
        (20, SqeKind::Sync(SyncKind::ModelExecute)),
    ],
    model_execute_sqe: 20,
    // DRV `stars_v2/trs_stars_v2_cq.c` `trs_stars_v2_cqe_to_logic_cqe`.
    cqe_timestamped: &[3, 4],
};

/// The chips whose device path the tracer knows.
pub static CHIPS: [&ChipLayout; 2] = [&CHIP_910B, &CHIP_950];

/// The chip an unknown chip id is read as.
pub static DEFAULT_CHIP: &ChipLayout = &CHIP_910B;

/// The chip id in a `halGetDeviceInfo(INFO_TYPE_VERSION)` value: bits 8-15 (msPTI
/// `GetChipTypeImpl`).
pub fn chip_id_of_version(version: i64) -> u32 {
    ((version as u64 >> 8) & 0xff) as u32
}

/// The layout of chip id `chip_id`, if the tracer knows it.
pub fn chip_by_id(chip_id: u32) -> Option<&'static ChipLayout> {
    CHIPS
        .iter()
        .copied()
        .find(|chip| chip.chip_ids.contains(&chip_id))
}

/// Layout description of one profiling-channel record (Ascend/mspti
/// `csrc/activity/ascend/channel/channel_data.h`, `#pragma pack(4)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocLogLayout {
    pub record_size: usize,
    /// u16 whose low 6 bits are the function type (0 begin, 1 end).
    pub func_type: usize,
    /// Where the stream and task ids are, and how they are encoded.
    pub ids: SocLogIds,
    /// u64 device system counter.
    pub timestamp: usize,
}

/// The ids of a profiling-channel record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocLogIds {
    /// `StarsSocLog`: u16 stream and task id fields, in the encoded forms [`soc_log_ids`]
    /// decodes.
    Encoded { stream_id: usize, task_id: usize },
    /// `StarsSocLogV6`: a u32 task id and no stream (read as stream 0).
    Task32 { task_id: usize },
}

/// `funcType` of a task's begin and end records (0x22/0x23 are FFTS+ subtasks).
pub const SOC_FUNC_BEGIN: u8 = 0;
pub const SOC_FUNC_END: u8 = 1;

/// The (stream, task) a `StarsSocLog` record's id fields stand for, decoded as msPTI does
/// (`StarsCommon::GetStreamId` / `GetTaskId`, `csrc/activity/ascend/channel/stars_common.cpp`):
/// the stream is kept modulo 2048; bit 12 of the stream field carries the task's top three
/// bits in bits 13-15; bit 13 swaps the low 12 bits of the two fields.
pub const fn soc_log_ids(stream_field: u16, task_field: u16) -> (u16, u16) {
    const BIT12: u16 = 1 << 12;
    const BIT13: u16 = 1 << 13;
    if stream_field & BIT12 != 0 {
        (
            stream_field % 2048,
            (task_field & 0x1fff) | (stream_field & 0xe000),
        )
    } else if stream_field & BIT13 != 0 {
        (
            (task_field & 0x0fff) % 2048,
            (stream_field & 0x0fff) | (task_field & 0xf000),
        )
    } else {
        (stream_field % 2048, task_field)
    }
}

/// Device error codes a completion can carry, with their `acl_base_rt.h` names.
pub const DEVICE_ERRORS: &[(u32, &str)] = &[
    (507_015, "ACL_ERROR_RT_AICORE_EXCEPTION"),
    (507_000, "ACL_ERROR_RT_INTERNAL_ERROR"),
    (107_020, "ACL_ERROR_RT_TASK_TIMEOUT"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chips_are_told_apart_by_their_ids() {
        assert_eq!(chip_id_of_version(5 << 8), 5);
        assert_eq!(chip_id_of_version((15 << 8) | 0x3), 15);
        assert_eq!(chip_by_id(5), Some(&CHIP_910B));
        assert_eq!(chip_by_id(15), Some(&CHIP_950));
        assert_eq!(chip_by_id(42), None);
        for (i, a) in CHIPS.iter().enumerate() {
            for b in &CHIPS[i + 1..] {
                assert!(a.chip_ids.iter().all(|id| !b.chip_ids.contains(id)));
            }
        }
    }

    #[test]
    fn layouts_describe_what_each_header_has() {
        let v100 = &CHIP_910B.device;
        assert_eq!((v100.sqe_stream, v100.sqe_stream_mask), (4, 0x07ff));
        assert_eq!((v100.sqe_task, v100.sqe_task_mask()), (6, 0xffff));
        assert_eq!(v100.task_key_mask(), 0xffff);
        let v2 = &CHIP_950.device;
        assert_eq!(v2.sqe_stream_mask, 0, "no stream id");
        assert_eq!((v2.sqe_task, v2.sqe_task_mask()), (4, u32::MAX));
        assert_eq!((v2.cqe_stream_mask, v2.cqe_task_mask()), (0, 0xffff));
        assert_eq!(v2.task_key_mask(), 0xffff, "the CQE keeps 16 bits");
        for chip in CHIPS {
            let d = &chip.device;
            assert_ne!(d.sqe_wr_cqe_mask, 0, "{}", chip.name);
            // Task ids are read as u32, stream ids as u16, within their structure.
            assert!(d.sqe_task + 4 <= d.sqe_size && d.cqe_task + 4 <= d.cqe_size);
            assert!(d.sqe_stream + 2 <= d.sqe_size && d.cqe_stream + 2 <= d.cqe_size);
            assert!([2, 4].contains(&d.sqe_task_size) && [2, 4].contains(&d.cqe_task_size));
            assert!(chip.sqe_task_kind(chip.model_execute_sqe).is_some());
            assert_eq!(
                chip.sqe_sync_kind(chip.model_execute_sqe),
                SyncKind::ModelExecute
            );
        }
    }

    #[test]
    fn sqe_types_mean_what_the_chip_numbers_them() {
        let kind = |chip: &ChipLayout, ty| chip.sqe_task_kind(ty).map(|(k, _)| k);
        let unit = |chip: &ChipLayout, ty| chip.sqe_task_kind(ty).map(|(_, u)| u);
        assert_eq!(unit(&CHIP_910B, 1), Some(KernelType::AiCpu));
        assert_eq!(CHIP_910B.sqe_sync_kind(4), SyncKind::EventRecord);
        assert_eq!(unit(&CHIP_950, 1), Some(KernelType::AiVector));
        assert_eq!(unit(&CHIP_950, 5), Some(KernelType::AiCpu));
        assert_eq!(kind(&CHIP_950, 4), Some(TaskKind::Kernel), "AICPU_H");
        assert_eq!(CHIP_950.sqe_sync_kind(6), SyncKind::NotifyRecord);
        assert_eq!(CHIP_950.sqe_sync_kind(7), SyncKind::NotifyWait);
        for chip in CHIPS {
            assert_eq!(kind(chip, 11), Some(TaskKind::Memcpy));
            assert_eq!(chip.sqe_sync_kind(3), SyncKind::PlaceHolder);
            assert!(chip.cqe_has_timestamp(4) && !chip.cqe_has_timestamp(0));
        }
    }
}
