//! Layout descriptions of the driver and device structures the BPF programs and the agent
//! read, as data: a CANN release whose structures differ supplies other values.
use tracer_common::DeviceLayout;
use tracer_schema::vocab::{KernelType, SyncKind};

use crate::model::TaskKind;

/// Layout description of the driver's task interface (`ascend_hal_base.h`: struct
/// halTaskSendInfo, struct halReportRecvInfo; `rtStarsSqeHeader_t`, RT
/// `pkg_inc/runtime/rt_external_stars_define.h`), of the 32-byte logic CQE (`rtCqReport_t`,
/// RT `src/runtime/core/inc/task/task_info_base.hpp`, = the kernel's `trs_logic_cqe`, DRV
/// `src/sdk_driver/trsdrv/trs/inc/trs_core.h`: streamId@0 taskId@2 errorCode@4 errorType@8
/// sqeType@9 sqId@10 sqHead@12 flags@14, a u64 @16 that holds a device syscnt only for the
/// SQE types [`cqe_has_timestamp`] names), and of function handles: hicann/runtime's `class
/// Kernel` keeps `std::string name_` at +24 (data pointer, length at +32); runtimes since
/// 2026-04 hand out an `rtInnerObject { uint64_t magic = "FUNC"; void *object; }` wrapping it,
/// older ones the `Kernel*` itself (real-device-path.md section 4). Both are told apart by
/// the magic. Stream id fields may carry flags above the id (`RT_SYNC_TASK_FLAG` 0x8000);
/// the profiling channel keeps ids modulo 2048, so both sides keep the low 11 bits. A CANN
/// release whose structures differ supplies its own.
pub const DEVICE_LAYOUT: DeviceLayout = DeviceLayout {
    send_sqe_addr: 16,
    send_sqe_num: 24,
    send_sq_id: 8,
    sqe_size: 64,
    sqe_type: 0,
    sqe_block_dim: 2,
    sqe_stream: 4,
    sqe_task: 6,
    sqe_wr_cqe_byte: 1,
    sqe_wr_cqe_mask: 1 << 6,
    recv_cqe_addr: 16,
    recv_report_num: 28,
    cqe_size: 32,
    cqe_stream: 0,
    cqe_task: 2,
    cqe_status: 4,
    cqe_sqe_type: 9,
    cqe_end_cnt: 16,
    stream_mask: 0x07ff,
    handle_magic_offset: 0,
    handle_object_offset: 8,
    handle_name_ptr: 24,
    handle_name_len: 32,
    soc_log_channel: SOC_LOG_CHANNEL as u16,
    handle_wrapper_magic: 0x4655_4E43,
};

/// The driver's profiling channel that carries a begin and an end record per device task on
/// Atlas A2/A3 (STARS): `CHANNEL_STARS_SOC_LOG_BUFFER` (hicann/driver
/// `pkg_inc/ascend_hal_base.h`), the one msPTI and msprof read kernel times from.
pub const SOC_LOG_CHANNEL: u32 = 50;

/// Layout description of one profiling-channel record, `StarsSocLog` (Ascend/mspti
/// `csrc/activity/ascend/channel/channel_data.h`, `#pragma pack(4)`, 64 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocLogLayout {
    pub record_size: usize,
    /// u16 whose low 6 bits are the function type (0 begin, 1 end).
    pub func_type: usize,
    /// u16 stream and task id fields, in the encoded forms [`soc_log_ids`] decodes.
    pub stream_id: usize,
    pub task_id: usize,
    /// u64 device system counter.
    pub timestamp: usize,
}

/// `StarsSocLog` as msPTI declares it.
pub const SOC_LOG: SocLogLayout = SocLogLayout {
    record_size: 64,
    func_type: 0,
    stream_id: 4,
    task_id: 6,
    timestamp: 8,
};

/// `funcType` of a task's begin and end records (0x22/0x23 are FFTS+ subtasks).
pub const SOC_FUNC_BEGIN: u8 = 0;
pub const SOC_FUNC_END: u8 = 1;

/// The (stream, task) a record's id fields stand for, decoded as msPTI does
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

/// What a task's SQE type says it is, numbered as STARS v100 (910B/910_93) numbers them (RT
/// `src/runtime/core/inc/sqe/v100/stars_sqe.hpp`): the task kind, used when the API call
/// that submitted it is unknown, and the compute unit of kernels. 0 is the FFTS task that
/// runs both AI Core and AI Vector kernels; 3 a place holder (the record stream synchronize
/// waits for, the runtime's flip task); 11 SDMA (copies, and memsets made of copies).
pub fn sqe_task_kind(sqe_type: u8) -> Option<(TaskKind, KernelType)> {
    match sqe_type {
        0 => Some((TaskKind::Kernel, KernelType::AiCore)),
        1 => Some((TaskKind::Kernel, KernelType::AiCpu)),
        3..=8 | MODEL_EXECUTE_SQE => Some((TaskKind::Sync, KernelType::Unknown)),
        11 => Some((TaskKind::Memcpy, KernelType::Unknown)),
        _ => None,
    }
}

/// The SQE type of a model-execute task: a COND task (STARS v100 type 20) with the sub type
/// `CONDS_SUB_TYPE_MODEL_EXEC` (RT `model_execute_task_v100.cc`); the model's loaded tasks
/// run while it runs.
pub const MODEL_EXECUTE_SQE: u8 = 20;

/// Whether a completion entry of a task of this SQE type carries a device timestamp (its
/// end): the driver stamps only event records and place holders, and rewrites their SQE
/// type to 4 or 3 (DRV `stars_v1/trs_stars_cq.c` `trs_stars_cqe_to_logic_cqe`).
pub fn cqe_has_timestamp(sqe_type: u8) -> bool {
    matches!(sqe_type, 3 | 4)
}

/// What a synchronization task does, from its SQE type (STARS v100: 4/5 event record/wait,
/// 6/7 notify record/wait, RT `src/runtime/core/inc/sqe/v100/stars_sqe.hpp`).
pub fn sqe_sync_kind(sqe_type: u8) -> SyncKind {
    match sqe_type {
        4 => SyncKind::EventRecord,
        5 => SyncKind::EventWait,
        6 => SyncKind::NotifyRecord,
        7 => SyncKind::NotifyWait,
        3 => SyncKind::PlaceHolder,
        8 => SyncKind::WriteValue,
        MODEL_EXECUTE_SQE => SyncKind::ModelExecute,
        _ => SyncKind::Unknown,
    }
}
