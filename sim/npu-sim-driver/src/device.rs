//! One simulated device of this process: its submission queues, the workers ("cores") that
//! execute queued tasks, and the logic completion queues read by `halCqReportRecv`.
//!
//! Scheduling: an SQ is "ready" when it has queued tasks and none executing. Workers take ready
//! SQs in FIFO order and run that SQ's head task, so each SQ runs in order, different SQs run
//! concurrently, and at most `NPU_SIM_CORES` tasks run at once. An event-wait task whose event
//! has not been recorded parks its SQ without holding a core.
//!
//! Completion as on STARS: an SQ's head is the position of its oldest unfinished task and moves
//! past a task when the task ends (the runtime reclaims finished tasks by reading it). A task
//! writes a CQE only when its SQE's `wrCqe` bit asks for one, or when it failed; the CQE goes to
//! the logic CQ of the task's stream, before the head moves.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use npu_sim_common::abi::{
    self, CQE_FLAG_ERROR_BIT, CQE_FLAG_MATCH, Chip, Cqe, RT_SYNC_TASK_FLAG, STARS_FUNC_TYPE_BEGIN,
    STARS_FUNC_TYPE_END, Sqe, pl,
};
use npu_sim_common::time::monotonic_ns;

use crate::config::{self, Config};
use crate::exec;
use crate::prof::emit;
use crate::task::{Outcome, Task, is_event_record, is_event_wait};
use crate::truth;

/// The sqeType of a timed CQE of an event record (DRV stars_v1/trs_stars_cq.h).
const TRS_STARS_CQE_RECORD: u8 = 4;

/// CQEs a logic CQ holds; more are dropped, as the real logic CQ drops when full.
const LOGIC_CQ_DEPTH: usize = 1024;

#[derive(Default)]
struct Sq {
    /// The stream the SQ was allocated for (`halSqCqAllocate` `info[0]`).
    stream: u16,
    queue: VecDeque<Task>,
    busy: bool,
    /// Position of the oldest unfinished task (ring index below the depth).
    head: u32,
    /// Position the next SQE is written to.
    tail: u32,
    /// Set when a task of this SQ wrote a CQE; cleared by a DRV_SQCQ_PROP_SQ_CQE_STATUS query.
    cqe_status: bool,
}

struct Parked {
    task: Task,
    since_ns: u64,
    event: u32,
    generation: u64,
}

#[derive(Default)]
struct State {
    sqs: HashMap<u32, Sq>,
    ready: VecDeque<u32>,
    /// Logic CQ id -> its CQEs, oldest first.
    cqs: HashMap<u32, VecDeque<Cqe>>,
    /// Stream id -> the logic CQ its CQEs go to.
    stream_cq: HashMap<u16, u32>,
    /// Model stream id -> (its SQ, the SQEs `halStreamTaskFill` loaded).
    filled: HashMap<u16, (u32, Arc<Vec<Sqe>>)>,
    /// Event id -> latest record generation that completed.
    events: HashMap<u32, u64>,
    parked: Vec<Parked>,
}

pub(crate) struct Device {
    pub id: u32,
    pub cfg: &'static Config,
    state: Mutex<State>,
    work: Condvar,
    space: Condvar,
    cq_ready: Condvar,
}

/// The device `id`, started on first use; `None` if the host has no such device.
pub(crate) fn get(id: u32) -> Option<&'static Device> {
    static DEVICES: OnceLock<Vec<OnceLock<&'static Device>>> = OnceLock::new();
    let cfg = config::get();
    let slots = DEVICES.get_or_init(|| (0..cfg.device_count).map(|_| OnceLock::new()).collect());
    Some(
        *slots
            .get(id as usize)?
            .get_or_init(|| Device::start(id, cfg)),
    )
}

/// Why a receive returned nothing.
pub(crate) enum RecvError {
    Timeout,
    /// No such logic CQ in this process.
    NoCq,
}

impl Device {
    fn start(id: u32, cfg: &'static Config) -> &'static Device {
        let dev: &'static Device = Box::leak(Box::new(Device {
            id,
            cfg,
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            space: Condvar::new(),
            cq_ready: Condvar::new(),
        }));
        truth::clock_line(id, cfg);
        for core in 0..cfg.cores {
            std::thread::Builder::new()
                .name(format!("npu-sim-dev{id}-core{core}"))
                .spawn(move || dev.worker())
                .expect("spawning a device core thread");
        }
        dev
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn depth(&self) -> u32 {
        self.cfg.sq_depth
    }

    /// A normal SQ `sq_id` for stream `stream` (`halSqCqAllocate`).
    pub(crate) fn add_sq(&self, sq_id: u32, stream: u16) {
        self.lock().sqs.insert(
            sq_id,
            Sq {
                stream,
                ..Sq::default()
            },
        );
    }

    /// `halStreamTaskFill`: `sqes` are the tasks of model stream `stream`, run by each
    /// model-execute task naming it. False if this process has no SQ for the stream.
    pub(crate) fn fill(&self, stream: u16, sqes: Vec<Sqe>) -> bool {
        let mut st = self.lock();
        let Some((&sq, _)) = st.sqs.iter().find(|(_, q)| q.stream == stream) else {
            return false;
        };
        st.filled.insert(stream, (sq, Arc::new(sqes)));
        true
    }

    /// Runs a model-execute task: the filled tasks of its model stream, in order, each timed
    /// and reported like any task (begin/end records, a truth line attributed to the execute
    /// task's API call and the model); the execute task ends after the last, or with the
    /// first failure.
    fn run_model(&self, task: &Task) -> Outcome {
        let stream = task.sqe.u32_at(pl::MODEL_STREAM) as u16;
        let model = task.sqe.u16_at(pl::MODEL_ID);
        let start_ns = emit::stamp(self.id, self.cfg, task, STARS_FUNC_TYPE_BEGIN);
        let filled = self.lock().filled.get(&stream).cloned();
        let mut status = match filled {
            Some(_) => 0,
            None => abi::ACL_ERROR_RT_INTERNAL_ERROR as u32,
        };
        if let Some((sq, sqes)) = filled {
            for (pos, sqe) in sqes.iter().enumerate() {
                let (s, task_id, sync_flag) = header_ids(self.cfg.chip, sqe, stream);
                let t = Task {
                    sqe: *sqe,
                    stream: s,
                    task_id,
                    sync_flag,
                    model: Some(model),
                    sq_id: sq,
                    pos: pos as u32,
                    submit_ns: task.submit_ns,
                    tid: task.tid,
                    api: task.api.clone(),
                };
                let out = exec::run(self.id, self.cfg, &t);
                truth::task_line(self.id, self.cfg, &t, &out, false);
                if out.status != 0 {
                    status = out.status;
                    break;
                }
            }
        }
        exec::finish(self.id, self.cfg, task, start_ns, monotonic_ns(), status)
    }

    /// Removes SQ `sq_id` (`halSqCqFree`); false if unknown.
    pub(crate) fn remove_sq(&self, sq_id: u32) -> bool {
        let mut st = self.lock();
        st.ready.retain(|&s| s != sq_id);
        let removed = st.sqs.remove(&sq_id);
        if let Some(q) = &removed {
            st.filled.remove(&q.stream);
        }
        removed.is_some()
    }

    /// Logic CQ `cq_id` receives the CQEs of stream `stream`.
    pub(crate) fn add_logic_cq(&self, cq_id: u32, stream: u16) {
        let mut st = self.lock();
        st.cqs.insert(cq_id, VecDeque::new());
        st.stream_cq.insert(stream, cq_id);
    }

    /// Removes logic CQ `cq_id`; false if unknown.
    pub(crate) fn remove_logic_cq(&self, cq_id: u32) -> bool {
        let mut st = self.lock();
        st.stream_cq.retain(|_, c| *c != cq_id);
        let known = st.cqs.remove(&cq_id).is_some();
        drop(st);
        self.cq_ready.notify_all();
        known
    }

    /// Queues `sqes` on SQ `sq_id`; returns the SQ position of the first one, `None` if the
    /// SQ stayed full for `timeout` (infinite when `None`), or `Some(Err)` for an SQ this
    /// process does not have. A ring of `depth` positions holds at most `depth - 1` unfinished
    /// tasks.
    pub(crate) fn submit(
        &self,
        sq_id: u32,
        sqes: &[Sqe],
        timeout: Option<Duration>,
        tid: u32,
    ) -> Option<Result<u32, ()>> {
        let api = npu_sim_common::core::outermost_api().map(Arc::new);
        let deadline = timeout.map(|t| Instant::now() + t);
        let depth = self.depth();
        let mut st = self.lock();
        if !st.sqs.contains_key(&sq_id) {
            return Some(Err(()));
        }
        let mut first_pos = None;
        for sqe in sqes {
            while st
                .sqs
                .get(&sq_id)
                .is_some_and(|sq| (sq.tail + 1) % depth == sq.head)
            {
                st = match deadline {
                    None => self.space.wait(st).unwrap_or_else(|e| e.into_inner()),
                    Some(d) => {
                        let left = d.checked_duration_since(Instant::now())?;
                        self.space
                            .wait_timeout(st, left)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                };
            }
            let Some(sq) = st.sqs.get_mut(&sq_id) else {
                return Some(Err(()));
            };
            let pos = sq.tail;
            first_pos.get_or_insert(pos);
            sq.tail = (sq.tail + 1) % depth;
            let (stream, task_id, sync_flag) = header_ids(self.cfg.chip, sqe, sq.stream);
            sq.queue.push_back(Task {
                stream,
                task_id,
                sync_flag,
                model: None,
                sqe: *sqe,
                sq_id,
                pos,
                submit_ns: monotonic_ns(),
                tid,
                api: api.clone(),
            });
            if !sq.busy && sq.queue.len() == 1 {
                st.ready.push_back(sq_id);
                self.work.notify_one();
            }
        }
        first_pos.map(Ok)
    }

    /// `halSqCqQuery` of a normal SQ's property `prop`; `None` for an unknown SQ or property.
    pub(crate) fn query_sq(&self, sq_id: u32, prop: i32) -> Option<u32> {
        let mut st = self.lock();
        let depth = self.depth();
        let sq = st.sqs.get_mut(&sq_id)?;
        match prop {
            abi::DRV_SQCQ_PROP_SQ_HEAD => Some(sq.head),
            abi::DRV_SQCQ_PROP_SQ_TAIL => Some(sq.tail),
            abi::DRV_SQCQ_PROP_SQ_STATUS => Some(1),
            abi::DRV_SQCQ_PROP_SQ_DEPTH => Some(depth),
            abi::DRV_SQCQ_PROP_SQ_CQE_STATUS => Some(u32::from(std::mem::take(&mut sq.cqe_status))),
            _ => None,
        }
    }

    /// Takes CQEs from logic CQ `cq_id` as the driver's version-1 receive does
    /// (`trs_logic_cq_get_match_copy_range`, DRV trs_logic_cq.c): the first run of ordinary
    /// CQEs (up to `max`), skipping match CQEs (those of synchronously awaited tasks) that are
    /// not for (`stream_id`, `task_id`); a match CQE that is for them ends the run and is
    /// included. Waits up to `timeout` (infinite when `None`) while the CQ is empty; with a zero
    /// timeout an empty CQ returns at once with nothing.
    pub(crate) fn receive(
        &self,
        cq_id: u32,
        stream_id: u32,
        task_id: u32,
        max: usize,
        timeout: Option<Duration>,
    ) -> Result<Vec<Cqe>, RecvError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.lock();
        loop {
            let Some(cq) = st.cqs.get_mut(&cq_id) else {
                return Err(RecvError::NoCq);
            };
            let (start, n) = match_copy_range(cq, stream_id, task_id, max);
            // Nothing for this receiver (an empty CQ, or only other waiters' match CQEs): wait.
            if n > 0 {
                return Ok(cq.drain(start..start + n).collect());
            }
            st = match deadline {
                None => self.cq_ready.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let Some(left) = d.checked_duration_since(Instant::now()) else {
                        return if timeout == Some(Duration::ZERO) {
                            Ok(Vec::new())
                        } else {
                            Err(RecvError::Timeout)
                        };
                    };
                    self.cq_ready
                        .wait_timeout(st, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    fn worker(&'static self) {
        set_timer_slack_ns(1000);
        loop {
            let task = {
                let mut st = self
                    .work
                    .wait_while(self.lock(), |s| s.ready.is_empty())
                    .unwrap_or_else(|e| e.into_inner());
                let Some(sq_id) = st.ready.pop_front() else {
                    continue;
                };
                let Some(sq) = st.sqs.get_mut(&sq_id) else {
                    continue;
                };
                let Some(task) = sq.queue.pop_front() else {
                    continue;
                };
                sq.busy = true;
                if is_event_wait(self.cfg.chip, &task.sqe) {
                    let event = task.sqe.u32_at(pl::EVENT_ID);
                    let generation = task.sqe.u64_at(pl::EVENT_GEN);
                    if st.events.get(&event).copied().unwrap_or(0) < generation {
                        // The wait begins now; it ends when its event is recorded.
                        let since_ns = emit::stamp(self.id, self.cfg, &task, STARS_FUNC_TYPE_BEGIN);
                        st.parked.push(Parked {
                            task,
                            since_ns,
                            event,
                            generation,
                        });
                        continue;
                    }
                }
                task
            };
            let outcome = if task.sqe.kind() == abi::kind::MODEL {
                self.run_model(&task)
            } else {
                exec::run(self.id, self.cfg, &task)
            };
            self.complete(task, outcome);
        }
    }

    /// Reports a finished task: ground truth first (so it is written before anyone can see the
    /// task finished), then its CQE if it writes one, then the SQ head moves past it.
    fn complete(&self, task: Task, outcome: Outcome) {
        let mut done = vec![(task, outcome)];
        while let Some((task, outcome)) = done.pop() {
            let writes_cqe = task.sqe.wr_cqe(self.cfg.chip) || outcome.status != 0;
            truth::task_line(self.id, self.cfg, &task, &outcome, writes_cqe);
            let depth = self.depth();
            let mut st = self.lock();
            let head = (task.pos + 1) % depth;
            if writes_cqe {
                let cqe = self.cqe_of(&task, &outcome, head);
                let cq_id = st.stream_cq.get(&task.stream).copied();
                if let Some(cq) = cq_id.and_then(|c| st.cqs.get_mut(&c))
                    && cq.len() < LOGIC_CQ_DEPTH
                {
                    cq.push_back(cqe);
                }
                if let Some(sq) = st.sqs.get_mut(&task.sq_id) {
                    sq.cqe_status = true;
                }
            }
            if let Some(sq) = st.sqs.get_mut(&task.sq_id) {
                sq.head = head;
                sq.busy = false;
                if !sq.queue.is_empty() {
                    st.ready.push_back(task.sq_id);
                    self.work.notify_one();
                }
            }
            if is_event_record(self.cfg.chip, &task.sqe) && task.sqe.u64_at(pl::EVENT_GEN) != 0 {
                let event = task.sqe.u32_at(pl::EVENT_ID);
                let generation = task.sqe.u64_at(pl::EVENT_GEN);
                let done_gen = st.events.entry(event).or_insert(0);
                *done_gen = (*done_gen).max(generation);
                let done_gen = *done_gen;
                let mut i = 0;
                while i < st.parked.len() {
                    if st.parked[i].event == event && st.parked[i].generation <= done_gen {
                        let p = st.parked.swap_remove(i);
                        let end_ns = emit::stamp(self.id, self.cfg, &p.task, STARS_FUNC_TYPE_END);
                        done.push((p.task, Outcome::ok(p.since_ns, end_ns)));
                    } else {
                        i += 1;
                    }
                }
            }
            drop(st);
            self.space.notify_all();
            if writes_cqe {
                self.cq_ready.notify_all();
            }
        }
    }

    /// The logic CQE of a finished task (`trs_stars_cqe_to_logic_cqe`, DRV
    /// stars_v1/trs_stars_cq.c): a timestamp only for event records and place holders that
    /// did not fail, whose type then reads 4 or 3; the SQE index otherwise.
    fn cqe_of(&self, task: &Task, out: &Outcome, head: u32) -> Cqe {
        let ty = task.sqe.ty();
        let holder = ty == abi::v100::PLACE_HOLDER;
        let record = is_event_record(self.cfg.chip, &task.sqe) && !holder;
        let timed = out.status == 0 && (record || holder);
        let mut flags = 0;
        if task.sync_flag {
            flags |= CQE_FLAG_MATCH;
        }
        if out.status != 0 {
            flags |= CQE_FLAG_ERROR_BIT;
        }
        Cqe {
            stream_id: task.stream,
            task_id: task.task_id as u16,
            error_code: out.status,
            error_type: out.error_type,
            // TRS_STARS_CQE_RECORED / TRS_STARS_CQE_HOLDER when the entry carries a time.
            sqe_type: match (timed, record) {
                (true, true) => TRS_STARS_CQE_RECORD,
                (true, false) => abi::v100::PLACE_HOLDER,
                _ => ty,
            },
            sq_id: task.sq_id as u16,
            sq_head: head as u16,
            flags,
            u1: if timed {
                self.cfg.clock.cnt_at(out.end_ns)
            } else {
                u64::from(task.pos)
            },
            u2: 0,
        }
    }
}

/// (stream, task id, sync flag) of an SQE queued on an SQ of stream `sq_stream`: v100 headers
/// name the stream (bit 15 is RT_SYNC_TASK_FLAG); v2 headers do not, so the SQ's stream counts.
pub(crate) fn header_ids(chip: Chip, sqe: &Sqe, sq_stream: u16) -> (u16, u32, bool) {
    let task = sqe.header_task_id(chip);
    match sqe.header_stream_field(chip) {
        Some(f) => (f & !RT_SYNC_TASK_FLAG, task, f & RT_SYNC_TASK_FLAG != 0),
        None => (sq_stream, task, false),
    }
}

/// (start, count) of the CQEs a version-1 receive returns from `cq`.
fn match_copy_range(
    cq: &VecDeque<Cqe>,
    stream_id: u32,
    task_id: u32,
    max: usize,
) -> (usize, usize) {
    let (mut start, mut n) = (0, 0);
    for (i, c) in cq.iter().enumerate() {
        if c.flags & CQE_FLAG_MATCH != 0 {
            if u32::from(c.stream_id) == stream_id && u32::from(c.task_id) == task_id {
                if n == 0 {
                    start = i;
                }
                n += 1;
                break;
            }
            if n != 0 {
                break;
            }
        } else {
            if n == 0 {
                start = i;
            }
            n += 1;
        }
        if n >= max {
            break;
        }
    }
    (start, n)
}

/// Lets the cores' sleeps end within about a microsecond of the modelled duration.
fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cqe(task: u16, matched: bool) -> Cqe {
        Cqe {
            stream_id: 3,
            task_id: task,
            flags: if matched { CQE_FLAG_MATCH } else { 0 },
            ..Cqe::default()
        }
    }

    #[test]
    fn match_cqes_go_only_to_their_waiter() {
        let q: VecDeque<Cqe> = [cqe(1, false), cqe(2, true), cqe(3, false)].into();
        // Any task: the normal run before the match CQE.
        assert_eq!(match_copy_range(&q, 3, 0xFFFF, 32), (0, 1));
        // The awaited task: the normal ones before it, then it.
        assert_eq!(match_copy_range(&q, 3, 2, 32), (0, 2));
        assert_eq!(match_copy_range(&q, 3, 2, 1), (0, 1));
        // A match CQE at the front that is not ours is skipped.
        let q: VecDeque<Cqe> = [cqe(2, true), cqe(3, false), cqe(4, false)].into();
        assert_eq!(match_copy_range(&q, 3, 0xFFFF, 32), (1, 2));
        assert_eq!(match_copy_range(&q, 3, 9, 32), (1, 2));
    }
}
