//! A device task as the device model passes it around: the queued SQE with where it came from,
//! and the outcome of executing it. Shared by the scheduler (`device`), the executor (`exec`)
//! and the ground truth (`truth`), none of which needs the others for it.
use std::ffi::{CStr, c_char};
use std::sync::Arc;

use npu_sim_common::abi::{self, Chip, Sqe, kind};

/// A queued task and where it came from.
pub(crate) struct Task {
    pub sqe: Sqe,
    /// The task's stream: the header's on v100 (flag bits cleared), the SQ's on v2.
    pub stream: u16,
    /// The header's task id (16 bits on v100, 32 on v2).
    pub task_id: u32,
    /// The header's stream id carried RT_SYNC_TASK_FLAG.
    pub sync_flag: bool,
    /// The model whose execution replays this task (graph tasks filled by halStreamTaskFill).
    pub model: Option<u16>,
    pub sq_id: u32,
    /// Position of the SQE in its SQ.
    pub pos: u32,
    pub submit_ns: u64,
    /// Submitting thread.
    pub tid: u32,
    /// Outermost API call in progress on the submitting thread: (name, enter_ns).
    pub api: Option<Arc<(String, u64)>>,
}

pub(crate) struct Outcome {
    /// CQE error code (0 = success).
    pub status: u32,
    pub error_type: u8,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Outcome {
    pub(crate) fn ok(start_ns: u64, end_ns: u64) -> Outcome {
        Outcome {
            status: 0,
            error_type: abi::CQE_ERROR_TYPE_NONE,
            start_ns,
            end_ns,
        }
    }
}

/// The NUL-terminated name an SQE points to at `off` ("" if none).
pub(crate) fn name_of(sqe: &Sqe, off: usize) -> String {
    let p = sqe.u64_at(off) as *const c_char;
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the runtime and libhccl only put pointers to immortal C strings in SQEs.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// An event wait (EVENT_WAIT on v100, NOTIFY_WAIT on v2).
pub(crate) fn is_event_wait(chip: Chip, sqe: &Sqe) -> bool {
    sqe.kind() == kind::EVENT && sqe.ty() == chip.event_wait_type()
}

/// An event record, including the record stream synchronize sends (a place holder).
pub(crate) fn is_event_record(chip: Chip, sqe: &Sqe) -> bool {
    sqe.kind() == kind::EVENT && sqe.ty() != chip.event_wait_type()
}
