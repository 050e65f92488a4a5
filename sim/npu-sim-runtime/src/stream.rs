//! Streams: per-stream 16-bit task ids, submission through `halSqTaskSend` on the calling
//! thread, and completion as the STARS runtime learns it (RT `stars_engine.cc`
//! `TaskReclaimByStm` / `ProcLogicCqUntilEmpty` / `SyncTask`, `stream.cc` `StarsWaitForTask`):
//! finished tasks are reclaimed from the SQ head (`halSqCqQuery`), and the few tasks that write
//! a completion entry (event records, the synchronize record, failures) are read from the
//! stream's logic CQ with `halCqReportRecv`, always on the API thread that asks.
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use npu_sim_common::abi::{
    self, CQE_SIZE, Chip, Cqe, HalReportRecvInfo, HalSqCqQueryInfo, HalTaskSendInfo, MAX_TASK_ID,
    RT_SYNC_TASK_FLAG, Sqe, TASK_ID_ANY, TASK_ID_MODULUS, annot, flip, kind,
};

use npu_sim_common::env::chip;

use crate::hal::Hal;

/// Reclaim polls `Stream::synchronize` makes before it sends its record task and waits for its
/// CQE (RT `RT_QUERY_TIMES_THRESHOLD`, the online non-fast-sync bound).
const SYNC_POLLS: u32 = 10;
/// CQEs asked for per reclaim receive (RT `RT_MILAN_MAX_QUERY_CQE_NUM`).
const RECLAIM_CQES: usize = 32;
/// Every this many tasks a submission also reclaims (RT `TASK_QUERY_INTERVAL_NUM`-style flow
/// control), so streams nobody synchronizes do not pile up bookkeeping.
const RECYCLE_INTERVAL: u64 = 64;
/// How long one blocking receive of the synchronize path waits (ms) before it re-reads the SQ
/// head.
const SYNC_WAIT_MS: i32 = 100;

/// A task handed to the device and not yet reclaimed.
struct Inflight {
    pos: u32,
    /// The low 16 bits of the header's task id: what the task's CQE carries.
    hw_task: u16,
    seq: u64,
    /// The task writes a CQE the runtime must see before reclaiming it (RT `isCqeNeedConcern`).
    concern: bool,
    cqe_seen: bool,
    event: Option<(Arc<dyn RecordDone>, u64)>,
    /// Host memory the task reads from, freed once the task is reclaimed.
    _keep: Option<Box<[u8]>>,
}

struct State {
    last_task_id: u16,
    /// How often the task ids wrapped (RT `Stream::taskIdFlipNum_`).
    flip: u16,
    submitted: u64,
    completed: u64,
    inflight: VecDeque<Inflight>,
    /// First error reported since the last synchronize.
    sticky_error: i32,
    /// Bound to a model: (model id, the SQEs captured so far) instead of sending them.
    capture: Option<(u32, Vec<Sqe>)>,
}

pub(crate) struct Stream {
    pub dev: u32,
    /// The device-wide stream id the driver allocated.
    pub id: u16,
    /// The driver's SQ and CQ of the stream.
    pub sq_id: u32,
    pub hw_cq_id: u32,
    /// The stream's logic CQ.
    pub cq_id: u32,
    depth: u32,
    state: Mutex<State>,
    /// The runtime's StreamSyncLock: one reclaim or synchronize of the stream at a time.
    sync: Mutex<()>,
}

/// The ids of a submitted task.
#[derive(Clone, Copy, Default)]
pub(crate) struct TaskIds {
    /// What rtGetTaskIdAndStreamID reports (RT `GET_THREAD_TASKID_AND_STREAMID` stores
    /// `GetFlipTaskId`): `(flip << 16) | task id` on 910B, the task serial number on 950.
    pub prof_id: u32,
    /// The device-wide stream id.
    pub stream: u32,
    /// The task id its SQE header carries (the ground truth's `task`): the 16-bit task id on
    /// 910B, the task serial number on 950.
    pub task: u32,
}

thread_local! {
    /// The ids of this thread's last submitted task.
    pub static LAST_TASK: Cell<TaskIds> = const {
        Cell::new(TaskIds { prof_id: 0, stream: 0, task: 0 })
    };
}

/// The task id before the first one of every stream: `NPU_SIM_TASK_ID_START` (default 0) is the
/// first id, so a test can reach the wrap quickly.
fn initial_last_task_id() -> u16 {
    static F: OnceLock<u16> = OnceLock::new();
    *F.get_or_init(|| {
        let first = npu_sim_common::env::parse("NPU_SIM_TASK_ID_START", 0u16).min(0xFFFE);
        if first == 0 { 0xFFFF } else { first - 1 }
    })
}

/// Whether the runtime's task-track profiling is on (`NPU_SIM_TRACK_PROF`, default 1): real
/// runtimes send flip tasks only then (RT `Stream::IsNeedSendFlipTask`), i.e. under msprof or
/// msPTI, the profilers that read channel 50.
fn track_prof() -> bool {
    static T: OnceLock<bool> = OnceLock::new();
    *T.get_or_init(|| npu_sim_common::env::parse("NPU_SIM_TRACK_PROF", 1u32) != 0)
}

/// The next task serial number of this process (v2 headers; RT `Runtime::AllocTaskSn`:
/// a process-wide counter, `& 0x7FFFFFFF`). The counter starts at `NPU_SIM_TASK_SN_START`
/// (default 0), so a test can reach ids above 16 bits and the 31-bit wrap quickly.
fn next_task_sn() -> u32 {
    static START: OnceLock<u32> = OnceLock::new();
    static SN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let start = *START.get_or_init(|| npu_sim_common::env::parse("NPU_SIM_TASK_SN_START", 0u32));
    start.wrapping_add(SN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) & 0x7FFF_FFFF
}

/// The task id after `last`: `(last + 1) % 0xFFFF`, 0 after "none" (RT task_submit.cc).
pub(crate) fn next_task_id(last: u16) -> u16 {
    if last == 0xFFFF {
        0
    } else {
        ((u32::from(last) + 1) % TASK_ID_MODULUS) as u16
    }
}

/// Who learns that a record task completed: an event, for the record of one generation.
pub(crate) trait RecordDone: Send + Sync {
    /// Record `generation` completed at device time `timestamp` (0: unknown).
    fn complete(&self, generation: u64, timestamp: u64);
}

/// What a submission asks for beyond the SQE.
#[derive(Default)]
pub(crate) struct Submit {
    pub event: Option<(Arc<dyn RecordDone>, u64)>,
    /// Set `wrCqe` and keep the task until its CQE is seen.
    pub concern: bool,
    /// Set RT_SYNC_TASK_FLAG in the header's stream id.
    pub sync_flag: bool,
    pub keep: Option<Box<[u8]>>,
}

fn hal_err(_rc: i32) -> i32 {
    abi::ACL_ERROR_RT_INTERNAL_ERROR
}

impl Stream {
    pub(crate) fn new(dev: u32, id: u16, sq_id: u32, hw_cq_id: u32, cq_id: u32) -> Arc<Stream> {
        let depth = query(dev, sq_id, abi::DRV_SQCQ_PROP_SQ_DEPTH)
            .unwrap_or(1024)
            .max(2);
        Arc::new(Stream {
            dev,
            id,
            sq_id,
            hw_cq_id,
            cq_id,
            depth,
            state: Mutex::new(State {
                last_task_id: initial_last_task_id(),
                flip: 0,
                submitted: 0,
                completed: 0,
                inflight: VecDeque::new(),
                sticky_error: 0,
                capture: None,
            }),
            sync: Mutex::new(()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sync_lock(&self) -> MutexGuard<'_, ()> {
        self.sync.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stamps `sqe` with this stream's id and next task id and sends it to the device, on the
    /// calling thread. Returns the task's sequence number on this stream and its task id.
    pub(crate) fn submit(&self, sqe: &mut Sqe, opts: Submit) -> Result<(u64, u32), i32> {
        let r = self.send(sqe, opts)?;
        if r.0 != 0 && r.0 % RECYCLE_INTERVAL == 0 {
            self.reclaim();
        }
        Ok(r)
    }

    fn send(&self, sqe: &mut Sqe, opts: Submit) -> Result<(u64, u32), i32> {
        let chip = chip();
        let mut st = self.lock();
        let (seq, hw_task) = self.send_locked(&mut st, sqe, opts)?;
        let task_id = st.last_task_id;
        let prof_id = match chip {
            Chip::Ascend910B => (u32::from(st.flip) << 16) | u32::from(task_id),
            Chip::Ascend950 => hw_task,
        };
        if task_id == MAX_TASK_ID && chip == Chip::Ascend910B && st.capture.is_none() {
            // RT UpdateFlipNum: the task with the largest id bumps the stream's flip count;
            // with task-track profiling on, AllocAndSendFlipTask then tells the device.
            st.flip = st.flip.wrapping_add(1);
            if track_prof() {
                let mut f = Sqe::new(abi::v100::PLACE_HOLDER, kind::FLIP, 0);
                f.0[1] |= flip::PRE_P;
                f.set_u16(flip::TASK_TYPE_OFF, flip::TS_TASK_TYPE_FLIP)
                    .set_u16(flip::FLIP_NUM_OFF, st.flip)
                    .set_u16(flip::SUB_TYPE_OFF, 0);
                f.set_u32(flip::STREAM_OFF, u32::from(self.id));
                self.send_locked(&mut st, &mut f, Submit::default())?;
            }
        }
        LAST_TASK.with(|l| {
            l.set(TaskIds {
                prof_id,
                stream: u32::from(self.id),
                task: hw_task,
            })
        });
        Ok((seq, hw_task))
    }

    /// Sends one SQE; returns its sequence number on this stream and the task id its header
    /// carries (v100: the stream's 16-bit id; v2: the process's 31-bit task serial number,
    /// RT `Runtime::AllocTaskSn`).
    fn send_locked(&self, st: &mut State, sqe: &mut Sqe, opts: Submit) -> Result<(u64, u32), i32> {
        let chip = chip();
        let task_id = next_task_id(st.last_task_id);
        let hw_task = match chip {
            Chip::Ascend910B => u32::from(task_id),
            Chip::Ascend950 => next_task_sn(),
        };
        let field = if opts.sync_flag && chip == Chip::Ascend910B {
            self.id | RT_SYNC_TASK_FLAG
        } else {
            self.id
        };
        sqe.set_header_ids(chip, field, hw_task);
        sqe.set_wr_cqe(chip, opts.concern);
        sqe.set_u16(annot::FLIP, st.flip);
        if let Some((_, captured)) = &mut st.capture {
            // A model stream: the SQE goes to the model's buffer, not to the device (RT
            // AllocTaskAndSendStars with IsSoftwareSqEnable: memcpy into GetSqeBuffer()).
            captured.push(*sqe);
            st.last_task_id = task_id;
            return Ok((0, hw_task));
        }
        let mut info = HalTaskSendInfo {
            type_: abi::DRV_NORMAL_TYPE,
            ts_id: 0,
            sq_id: self.sq_id,
            timeout: 0,
            sqe_addr: sqe.0.as_mut_ptr(),
            sqe_num: 1,
            pos: 0,
            res: [0; 8],
        };
        // SAFETY: `info` points to one valid SQE for the duration of the call.
        let rc = unsafe { (Hal::get().halSqTaskSend)(self.dev, &mut info) };
        if rc != abi::DRV_ERROR_NONE {
            return Err(hal_err(rc));
        }
        st.last_task_id = task_id;
        st.submitted += 1;
        let seq = st.submitted;
        st.inflight.push_back(Inflight {
            pos: info.pos,
            hw_task: hw_task as u16,
            seq,
            concern: opts.concern,
            cqe_seen: false,
            event: opts.event,
            _keep: opts.keep,
        });
        Ok((seq, hw_task))
    }

    /// Binds the stream to model `model_id`: tasks are captured from now on. False if it is
    /// bound already or has tasks in flight.
    pub(crate) fn bind_model(&self, model_id: u32) -> bool {
        let mut st = self.lock();
        if st.capture.is_some() || !st.inflight.is_empty() {
            return false;
        }
        st.capture = Some((model_id, Vec::new()));
        true
    }

    pub(crate) fn unbind_model(&self) {
        self.lock().capture = None;
    }

    /// The SQEs captured for the model so far.
    pub(crate) fn captured(&self) -> Vec<Sqe> {
        self.lock()
            .capture
            .as_ref()
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// Reclaims what the device finished (RT `TaskReclaimByStm`).
    pub(crate) fn reclaim(&self) {
        let _g = self.sync_lock();
        self.reclaim_locked();
    }

    /// Reads the SQ head; if a task's CQE is awaited or the SQ says it wrote one, drains the
    /// logic CQ; then reclaims the tasks before the head.
    fn reclaim_locked(&self) {
        let Some(head) = query(self.dev, self.sq_id, abi::DRV_SQCQ_PROP_SQ_HEAD) else {
            return;
        };
        let awaited = self
            .lock()
            .inflight
            .iter()
            .any(|t| t.concern && !t.cqe_seen);
        if awaited || query(self.dev, self.sq_id, abi::DRV_SQCQ_PROP_SQ_CQE_STATUS) == Some(1) {
            self.proc_cq_until_empty();
        }
        self.finish_by_head(head);
    }

    /// Receives (without waiting) until the logic CQ has nothing for this stream.
    fn proc_cq_until_empty(&self) {
        loop {
            let cqes = self.receive(TASK_ID_ANY, RECLAIM_CQES, 0);
            if cqes.is_empty() {
                return;
            }
            for c in &cqes {
                self.on_cqe(c);
            }
        }
    }

    /// One `halCqReportRecv` of this stream's logic CQ; empty on timeout or error.
    fn receive(&self, task_id: u32, max: usize, timeout_ms: i32) -> Vec<Cqe> {
        let mut buf = vec![0u8; max * CQE_SIZE];
        let mut info = HalReportRecvInfo {
            type_: abi::DRV_LOGIC_TYPE,
            ts_id: 0,
            cq_id: self.cq_id,
            timeout: timeout_ms,
            cqe_addr: buf.as_mut_ptr(),
            cqe_num: max as u32,
            report_cqe_num: max as u32,
            stream_id: u32::from(self.id),
            task_id,
            res: [0; 8],
        };
        // SAFETY: `info` describes a buffer of `max` CQEs.
        let rc = unsafe { (Hal::get().halCqReportRecv)(self.dev, &mut info) };
        if rc != abi::DRV_ERROR_NONE {
            return Vec::new();
        }
        (0..(info.report_cqe_num as usize).min(max))
            .map(|i| {
                // SAFETY: the driver wrote report_cqe_num CQEs into `buf`; read unaligned.
                unsafe { std::ptr::read_unaligned(buf.as_ptr().add(i * CQE_SIZE).cast::<Cqe>()) }
            })
            .collect()
    }

    /// Applies one CQE: errors become the stream's error, event records get their time.
    fn on_cqe(&self, cqe: &Cqe) {
        let mut st = self.lock();
        let Some(t) = st.inflight.iter_mut().find(|t| t.hw_task == cqe.task_id) else {
            return;
        };
        t.cqe_seen = true;
        let event = t.event.clone();
        let code = cqe.error_code as i32;
        if code != 0 && st.sticky_error == 0 {
            st.sticky_error = code;
        }
        drop(st);
        if let Some((event, generation)) = event
            && code == 0
        {
            // TRS_STARS_CQE_RECORED: the entry carries the record's device time.
            let timed = cqe.sqe_type == 4;
            event.complete(generation, if timed { cqe.u1 } else { 0 });
        }
    }

    /// Reclaims the tasks before SQ position `head`, in order, stopping at a task whose awaited
    /// CQE has not been seen (RT: "Task delay recycle until CQE received").
    fn finish_by_head(&self, head: u32) {
        let mut st = self.lock();
        let Some(front) = st.inflight.front() else {
            return;
        };
        let finished = ((head + self.depth - front.pos) % self.depth) as usize;
        let mut events = Vec::new();
        for _ in 0..finished.min(st.inflight.len()) {
            if st
                .inflight
                .front()
                .is_some_and(|t| t.concern && !t.cqe_seen)
            {
                break;
            }
            let Some(t) = st.inflight.pop_front() else {
                break;
            };
            st.completed = t.seq;
            if let Some(e) = t.event {
                events.push(e);
            }
        }
        drop(st);
        for (event, generation) in events {
            event.complete(generation, 0);
        }
    }

    /// Whether task `seq` of this stream was reclaimed.
    pub(crate) fn is_done(&self, seq: u64) -> bool {
        self.lock().completed >= seq
    }

    /// Reclaims, then waits up to `timeout_ms` for a CQE of this stream and applies it.
    pub(crate) fn reclaim_or_wait(&self, timeout_ms: i32) {
        let _g = self.sync_lock();
        self.reclaim_locked();
        for c in self.receive(TASK_ID_ANY, RECLAIM_CQES, timeout_ms) {
            self.on_cqe(&c);
        }
    }

    /// Waits for everything submitted so far (RT `StarsWaitForTask`): a few reclaim polls; if
    /// the stream is still busy, a record task whose CQE the caller waits for (place holder,
    /// `wrCqe` set, RT_SYNC_TASK_FLAG in the stream id), received with `halCqReportRecv`
    /// blocking in the driver. Returns the first error since the last synchronize.
    pub(crate) fn synchronize(&self) -> i32 {
        let _g = self.sync_lock();
        let target = self.lock().submitted;
        for _ in 0..SYNC_POLLS {
            self.reclaim_locked();
            if self.lock().completed >= target {
                return std::mem::take(&mut self.lock().sticky_error);
            }
        }
        let mut sqe = Sqe::new(abi::v100::PLACE_HOLDER, kind::EVENT, 0);
        let sent = self.send(
            &mut sqe,
            Submit {
                concern: true,
                sync_flag: true,
                ..Submit::default()
            },
        );
        let Ok((seq, hw_task)) = sent else {
            return sent.err().unwrap_or(abi::ACL_ERROR_RT_INTERNAL_ERROR);
        };
        // The CQE carries the low 16 bits of the header's task id; on v2 it has no match flag
        // (DRV stars_v2/trs_stars_v2_cq.c), so it is an ordinary CQE.
        let record = hw_task & 0xFFFF;
        loop {
            let cqes = self.receive(record, 1, SYNC_WAIT_MS);
            let mut matched = false;
            for c in &cqes {
                self.on_cqe(c);
                matched |= u32::from(c.task_id) == record;
            }
            if cqes.is_empty() {
                self.reclaim_locked();
            }
            if matched || self.lock().completed >= seq {
                break;
            }
        }
        self.reclaim_locked();
        std::mem::take(&mut self.lock().sticky_error)
    }
}

/// A normal SQ's property through `halSqCqQuery`.
fn query(dev: u32, sq_id: u32, prop: i32) -> Option<u32> {
    let mut info = HalSqCqQueryInfo {
        type_: abi::DRV_NORMAL_TYPE,
        sq_id,
        prop,
        ..HalSqCqQueryInfo::default()
    };
    // SAFETY: valid in/out struct.
    let rc = unsafe { (Hal::get().halSqCqQuery)(dev, &mut info) };
    (rc == abi::DRV_ERROR_NONE).then_some(info.value[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_wrap_at_65535() {
        assert_eq!(next_task_id(0xFFFF), 0);
        assert_eq!(next_task_id(0), 1);
        assert_eq!(next_task_id(65533), 65534);
        assert_eq!(next_task_id(65534), 0);
    }
}
