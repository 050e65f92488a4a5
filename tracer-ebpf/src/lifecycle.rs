//! Thread lifecycle: drop per-thread state when a thread exits (so a process killed
//! mid-call leaves nothing stale, and the agent learns its open calls are incomplete),
//! and follow forks of traced processes in record mode.
use aya_ebpf::{helpers::bpf_ktime_get_ns, macros::tracepoint, programs::TracePointContext};
use tracer_common::{DropKind, RecordHeader, RecordKind};

use crate::maps::{
    CAPTURE, EVENTS, TARGETS, THREADS, config, count_drop, current_ids, submit_flags,
};

#[tracepoint]
pub(crate) fn sched_process_exit(_ctx: TracePointContext) -> u32 {
    let (tgid, tid) = current_ids();
    // Thread ids are never target keys except a process's main thread.
    let _ = TARGETS.remove(tid);
    let _ = CAPTURE.remove(tid);
    if THREADS.remove(tid).is_err() {
        return 0;
    }
    // SAFETY: a helper without arguments that only reads the clock.
    let ts_ns = unsafe { bpf_ktime_get_ns() };
    let header = RecordHeader::new(RecordKind::ThreadExit, 0, 0, tgid, tid, ts_ns);
    if EVENTS
        .output::<RecordHeader>(header, submit_flags())
        .is_err()
    {
        count_drop(DropKind::ThreadExit);
    }
    0
}

#[tracepoint]
pub(crate) fn sched_process_fork(ctx: TracePointContext) -> u32 {
    let cfg = config();
    if cfg.follow_children == 0 {
        return 0;
    }
    let (tgid, _) = current_ids();
    if TARGETS.get_ptr(tgid).is_none() {
        return 0;
    }
    // SAFETY: the offset comes from this tracepoint's format file.
    if let Ok(child) = unsafe { ctx.read_at::<u32>(cfg.fork_child_pid_offset as usize) } {
        // Threads of a target share its tgid; only new processes need an entry, but a
        // thread's tid entry is harmless and removed when the thread exits.
        let _ = TARGETS.insert(child, 1, 0);
    }
    0
}
