//! Device tasks, joined in the kernel: `halSqTaskSend` is called on the API thread inside
//! the API call that produced the task, so its SQE headers are keyed (process, device,
//! stream, task) to the outermost call in flight; `halCqReportRecv` returns CQEs on the
//! runtime's report thread, each of which finds its submission by the same key.
//! Field offsets and sizes come from the catalog's layout description of the chip (`LAYOUT`):
//! a STARS v2 header has a 32-bit task id and no stream id (its stream mask is 0: the stream
//! is 0 on both sides), and its CQE only the task id's low 16 bits (the key keeps those).
//! Sizes and absent fields are masks, not branches. Batches are walked by `bpf_loop`
//! callbacks ([`for_each`]), one SQE or CQE per round.
use core::ffi::c_void;

use tracer_common::{
    DeviceLayout, DropKind, FRAME_UNRECORDED, MAX_ARGS, MAX_CQES, MAX_FILL_SQES, MAX_SQES,
    PendingTask, RecordHeader, RecordKind, SQE_TYPE_MASK, TASK_FILLED, TASK_UNRECORDED,
    TaskComplete, TaskInfo, TaskKey, TaskSubmit,
};

use crate::maps::{
    CQE_BATCH, CqeBatch, EVENTS, LAYOUT, SQE_BATCH, SqeBatch, TASKS, THREADS, count_drop, for_each,
    read, submit_flags, window_open,
};

#[inline(always)]
fn layout() -> Option<&'static DeviceLayout> {
    LAYOUT.get(0)
}

/// The outermost traced call in flight on `tid` (0 when none) and whether it is recorded
/// (when none, whether process `tgid`'s capture window is open). Frame 1 keeps the last
/// outermost call after it returned: only a depth of one or more makes it current.
#[inline(always)]
fn outermost_call(tgid: u32, tid: u32) -> (u64, bool) {
    THREADS
        .get_ptr(tid)
        // SAFETY: map value pointer valid for this program run.
        .and_then(|state| unsafe {
            if (*state).depth == 0 {
                return None;
            }
            (*state)
                .frames
                .get(1)
                .map(|f| (f.correlation_id, f.flags & FRAME_UNRECORDED == 0))
        })
        .unwrap_or_else(|| (0, window_open(tgid)))
}

/// `halSqTaskSend(uint32_t devId, struct halTaskSendInfo *info)` at ENTER.
#[inline(always)]
pub(crate) fn on_sq_send(args: &[u64; MAX_ARGS], tgid: u32, tid: u32, ts_ns: u64) {
    let Some(l) = layout() else { return };
    let (device_id, info) = (args[0] as u32, args[1]);
    let (Some(sqes), Some(count)) = (
        read::<u64>(info, l.send_sqe_addr),
        read::<u32>(info, l.send_sqe_num),
    ) else {
        count_drop(DropKind::SendInfoRead);
        return;
    };
    let sq_id = read::<u32>(info, l.send_sq_id).unwrap_or(0);
    let sent = Sqes {
        device_id,
        sq_id,
        sqes,
        count: count.min(MAX_SQES),
        flags: 0,
    };
    on_sqes(&sent, tgid, tid, ts_ns);
}

/// `halStreamTaskFill(uint32_t dev_id, uint32_t stream_id, void *stream_mem, void *task_info,
/// uint32_t task_cnt)` at ENTER: the SQEs of a model stream, loaded to run later.
#[inline(always)]
pub(crate) fn on_stream_fill(args: &[u64; MAX_ARGS], tgid: u32, tid: u32, ts_ns: u64) {
    let filled = Sqes {
        device_id: args[0] as u32,
        sq_id: args[1] as u32,
        sqes: args[3],
        count: (args[4] as u32).min(MAX_FILL_SQES),
        flags: TASK_FILLED,
    };
    on_sqes(&filled, tgid, tid, ts_ns);
}

/// SQEs handed to the driver.
struct Sqes {
    device_id: u32,
    sq_id: u32,
    sqes: u64,
    count: u32,
    flags: u8,
}

/// Hands each SQE of `sent` to the agent ([`sqe_at`], one per round).
#[inline(always)]
fn on_sqes(sent: &Sqes, tgid: u32, tid: u32, ts_ns: u64) {
    let (correlation_id, recorded) = outermost_call(tgid, tid);
    // A model's loaded tasks are recorded whenever they are loaded: they run each time the
    // model executes, and each run is recorded or not with its execution.
    let task_flags = if recorded || sent.flags == TASK_FILLED {
        sent.flags
    } else {
        sent.flags | TASK_UNRECORDED
    };
    let Some(slot) = SQE_BATCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: a per-CPU map value, ours for this program run.
    unsafe {
        *slot = SqeBatch {
            device_id: sent.device_id,
            sq_id: sent.sq_id,
            sqes: sent.sqes,
            count: sent.count,
            fill: sent.flags,
            task_flags,
            correlation_id,
            tgid,
            tid,
            ts_ns,
            task: PendingTask::default(),
            key: TaskKey::default(),
        };
    }
    for_each(MAX_FILL_SQES, sqe_at);
}

/// `bpf_loop` callback: reads SQE `index` of [`SQE_BATCH`] and hands its task to the
/// agent; a task that writes a completion entry also waits for it in `TASKS`. 1 stops.
#[expect(
    clippy::needless_borrows_for_generic_args,
    reason = "TASKS.insert gets pointers into SQE_BATCH: by value, key and task would be copied to the BPF stack, which has no room left"
)]
extern "C" fn sqe_at(index: u32, _ctx: *mut c_void) -> i64 {
    let (Some(l), Some(b)) = (layout(), SQE_BATCH.get_ptr_mut(0)) else {
        return 1;
    };
    // SAFETY: a per-CPU map value, written by this program run before the loop.
    let b = unsafe { &mut *b };
    if index >= b.count || index >= MAX_FILL_SQES {
        return 1;
    }
    let sqe = b
        .sqes
        .wrapping_add(u64::from(index) * u64::from(l.sqe_size));
    let (Some(ty), Some(block_dim), Some(stream_id), Some(task_id)) = (
        read::<u8>(sqe, l.sqe_type),
        read::<u16>(sqe, l.sqe_block_dim),
        read::<u16>(sqe, l.sqe_stream),
        read::<u32>(sqe, l.sqe_task),
    ) else {
        count_drop(DropKind::SqeRead);
        return 1;
    };
    let (stream_id, task_id) = (stream_id & l.sqe_stream_mask, task_id & l.sqe_task_mask());
    b.task = PendingTask {
        info: TaskInfo {
            correlation_id: b.correlation_id,
            submit_ns: b.ts_ns,
            tid: b.tid,
            block_dim,
            sqe_type: ty & SQE_TYPE_MASK,
            flags: b.task_flags,
        },
        task_id,
        _pad: 0,
    };
    let wr_cqe = read::<u8>(sqe, l.sqe_wr_cqe_byte)
        .is_some_and(|byte| u16::from(byte) & l.sqe_wr_cqe_mask != 0);
    // Only a task that writes a completion entry waits for one (not a model's task
    // loaded to run later). Replaces a stale entry left by a task id that wrapped.
    b.key = TaskKey::new(b.tgid, b.device_id, stream_id, task_id & l.task_key_mask());
    if wr_cqe && b.fill & TASK_FILLED == 0 && TASKS.insert(&b.key, &b.task, 0).is_err() {
        count_drop(DropKind::TaskMapFull);
    }
    emit_submit(b, stream_id);
    0
}

/// Hands a submission to the agent, which joins it with the device's profiling-channel
/// records (they name no process).
#[inline(always)]
fn emit_submit(b: &SqeBatch, stream_id: u16) {
    let pending = &b.task;
    let Some(mut entry) = EVENTS.reserve::<TaskSubmit>(0) else {
        count_drop(DropKind::TaskSubmit);
        return;
    };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring-buffer memory of the right size; every field
    // is written, padding included, before it is submitted.
    unsafe {
        (*rec).header = RecordHeader::new(
            RecordKind::TaskSubmit,
            0,
            0,
            b.tgid,
            pending.info.tid,
            b.ts_ns,
        );
        (*rec).info = pending.info;
        (*rec).device_id = b.device_id;
        (*rec).sq_id = b.sq_id;
        (*rec).task_id = pending.task_id;
        (*rec).stream_id = stream_id;
        (*rec)._pad = 0;
    }
    entry.submit(submit_flags());
}

/// `halCqReportRecv(uint32_t devId, struct halReportRecvInfo *info)` at EXIT, with the
/// arguments saved at ENTER.
#[inline(always)]
pub(crate) fn on_cq_recv(info: u64, device_id: u32, tgid: u32, tid: u32, ts_ns: u64) {
    let Some(l) = layout() else { return };
    let (Some(cqes), Some(count)) = (
        read::<u64>(info, l.recv_cqe_addr),
        read::<u32>(info, l.recv_report_num),
    ) else {
        count_drop(DropKind::RecvInfoRead);
        return;
    };
    let Some(slot) = CQE_BATCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: a per-CPU map value, ours for this program run.
    unsafe {
        *slot = CqeBatch {
            cqes,
            count,
            device_id,
            tgid,
            tid,
            ts_ns,
        };
    }
    for_each(MAX_CQES, cqe_at);
}

/// `bpf_loop` callback: joins CQE `index` of [`CQE_BATCH`] to its submission. 1 stops.
extern "C" fn cqe_at(index: u32, _ctx: *mut c_void) -> i64 {
    let (Some(l), Some(b)) = (layout(), CQE_BATCH.get_ptr(0)) else {
        return 1;
    };
    // SAFETY: a per-CPU map value, written by this program run before the loop.
    let b = unsafe { &*b };
    if index >= b.count || index >= MAX_CQES {
        return 1;
    }
    let cqe = b
        .cqes
        .wrapping_add(u64::from(index) * u64::from(l.cqe_size));
    emit_completion(l, cqe, b.device_id, b.tgid, b.tid, b.ts_ns);
    0
}

#[inline(always)]
fn emit_completion(l: &DeviceLayout, cqe: u64, device_id: u32, tgid: u32, tid: u32, ts_ns: u64) {
    let (Some(stream_id), Some(task_id)) =
        (read::<u16>(cqe, l.cqe_stream), read::<u32>(cqe, l.cqe_task))
    else {
        count_drop(DropKind::CqeRead);
        return;
    };
    let (stream_id, task_id) = (stream_id & l.cqe_stream_mask, task_id & l.cqe_task_mask());
    let key = TaskKey::new(tgid, device_id, stream_id, task_id & l.task_key_mask());
    // A task submitted outside a capture window is dropped here, deliberately: not counted.
    // One whose submission was never seen (before tracing began) counts as recorded when
    // the process's window is open.
    let recorded = match TASKS.get_ptr(key) {
        // SAFETY: map value pointer valid for this program run.
        Some(pending) => unsafe { (*pending).info.flags & TASK_UNRECORDED == 0 },
        None => window_open(tgid),
    };
    if !recorded {
        let _ = TASKS.remove(key);
        return;
    }
    let Some(mut entry) = EVENTS.reserve::<TaskComplete>(0) else {
        count_drop(DropKind::TaskComplete);
        let _ = TASKS.remove(key);
        return;
    };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring-buffer memory of the right size; every field
    // is written, padding included, before it is submitted. The `TASKS` value pointer is
    // valid for this program run and read before its entry is removed.
    unsafe {
        (*rec).header = RecordHeader::new(RecordKind::TaskComplete, 0, 0, tgid, tid, ts_ns);
        match TASKS.get_ptr(key) {
            Some(pending) => {
                (*rec).info = (*pending).info;
                (*rec).task_id = (*pending).task_id;
            }
            None => {
                (*rec).info = TaskInfo::default();
                (*rec).task_id = task_id;
            }
        }
        (*rec).start_cnt = 0;
        (*rec).end_cnt = read::<u64>(cqe, l.cqe_end_cnt).unwrap_or(0);
        (*rec).device_id = device_id;
        (*rec).status = read::<u32>(cqe, l.cqe_status).unwrap_or(0);
        (*rec).stream_id = stream_id;
        (*rec).sqe_type = read::<u8>(cqe, l.cqe_sqe_type).unwrap_or(0);
        (*rec)._pad = 0;
    }
    let _ = TASKS.remove(key);
    entry.submit(submit_flags());
}
