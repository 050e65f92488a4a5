//! One simulated device of this process: its submission queues (one per runtime stream), the
//! workers ("cores") that execute queued tasks, and the completion queue read by
//! `halCqReportRecv`.
//!
//! Scheduling: an SQ is "ready" when it has queued tasks and none executing. Workers take ready
//! SQs in FIFO order and run that SQ's head task, so each SQ runs in order, different SQs run
//! concurrently, and at most `NPU_SIM_CORES` tasks run at once. An event-wait task whose event
//! has not been recorded parks its SQ without holding a core.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use npu_sim_common::abi::{
    Cqe, STARS_FUNC_TYPE_BEGIN, STARS_FUNC_TYPE_END, Sqe, sqe_off, sqe_type,
};
use npu_sim_common::time::monotonic_ns;

use crate::config::{self, Config};
use crate::exec;
use crate::prof::emit;
use crate::task::{Outcome, Task};
use crate::truth;

#[derive(Default)]
struct Sq {
    queue: VecDeque<Task>,
    busy: bool,
    head: u16,
    tail: u16,
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
    cq: VecDeque<Cqe>,
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

    /// Queues `sqes` on SQ `sq_id`; returns the SQ position of the first one, or `None` if the
    /// SQ stayed full for `timeout` (infinite when `None`).
    pub(crate) fn submit(
        &self,
        sq_id: u32,
        sqes: &[Sqe],
        timeout: Option<Duration>,
        tid: u32,
    ) -> Option<u32> {
        let api = npu_sim_common::core::outermost_api().map(Arc::new);
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.lock();
        let mut first_pos = None;
        for sqe in sqes {
            while st
                .sqs
                .get(&sq_id)
                .is_some_and(|sq| sq.queue.len() >= self.cfg.sq_depth)
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
            let task = Task {
                sqe: *sqe,
                sq_id,
                submit_ns: monotonic_ns(),
                tid,
                api: api.clone(),
            };
            let sq = st.sqs.entry(sq_id).or_default();
            first_pos.get_or_insert(u32::from(sq.tail));
            sq.tail = sq.tail.wrapping_add(1);
            sq.queue.push_back(task);
            if !sq.busy && sq.queue.len() == 1 {
                st.ready.push_back(sq_id);
                self.work.notify_one();
            }
        }
        first_pos
    }

    /// Takes up to `max` CQEs, waiting up to `timeout` (infinite when `None`) for the first.
    pub(crate) fn receive(&self, max: usize, timeout: Option<Duration>) -> Vec<Cqe> {
        let mut st = self.lock();
        if st.cq.is_empty() {
            st = match timeout {
                None => self
                    .cq_ready
                    .wait_while(st, |s| s.cq.is_empty())
                    .unwrap_or_else(|e| e.into_inner()),
                Some(t) => {
                    self.cq_ready
                        .wait_timeout_while(st, t, |s| s.cq.is_empty())
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
        let n = max.min(st.cq.len());
        st.cq.drain(..n).collect()
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
                sq.head = sq.head.wrapping_add(1);
                if task.sqe.ty() == sqe_type::EVENT_WAIT {
                    let event = task.sqe.u32_at(sqe_off::EVENT_ID);
                    let generation = task.sqe.u64_at(sqe_off::EVENT_GEN);
                    if st.events.get(&event).copied().unwrap_or(0) < generation {
                        // The wait begins now; it ends when its event is recorded.
                        let since_ns = emit::stamp(self.id, self.cfg, &task, STARS_FUNC_TYPE_BEGIN);
                        st.parked.push(Parked {
                            task,
                            since_ns,
                            event,
                            generation,
                        });
                        self.space.notify_all();
                        continue;
                    }
                }
                task
            };
            self.space.notify_all();
            let outcome = exec::run(self.id, self.cfg, &task);
            self.complete(task, outcome);
        }
    }

    /// Reports a finished task: ground truth first (so it is written before anyone can be woken
    /// by the CQE), then the CQE, then the SQ is free for its next task.
    fn complete(&self, task: Task, outcome: Outcome) {
        let mut done = vec![(task, outcome)];
        while let Some((task, outcome)) = done.pop() {
            truth::task_line(self.id, self.cfg, &task, &outcome);
            let clock = &self.cfg.clock;
            let mut st = self.lock();
            let sq_head = st.sqs.get(&task.sq_id).map_or(0, |sq| sq.head);
            st.cq.push_back(Cqe {
                stream_id: task.sqe.stream_id(),
                task_id: task.sqe.task_id(),
                error_code: outcome.status,
                error_type: outcome.error_type,
                sqe_type: task.sqe.ty(),
                sq_id: task.sq_id as u16,
                sq_head,
                flags: 0,
                timestamp: clock.cnt_at(outcome.end_ns),
                start_timestamp: clock.cnt_at(outcome.start_ns),
            });
            if let Some(sq) = st.sqs.get_mut(&task.sq_id) {
                sq.busy = false;
                if !sq.queue.is_empty() {
                    st.ready.push_back(task.sq_id);
                    self.work.notify_one();
                }
            }
            if task.sqe.ty() == sqe_type::EVENT_RECORD {
                let event = task.sqe.u32_at(sqe_off::EVENT_ID);
                let generation = task.sqe.u64_at(sqe_off::EVENT_GEN);
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
            self.cq_ready.notify_all();
        }
    }
}

/// Lets the cores' sleeps end within about a microsecond of the modelled duration.
fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}
