//! Streams: per-stream 16-bit task ids, submission through `halSqTaskSend` on the calling
//! thread, and completion bookkeeping fed by the device's report thread.
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use npu_sim_common::abi::{self, Cqe, HalTaskSendInfo, Sqe};

use crate::event::Event;
use crate::hal::Hal;

/// A task handed to the device and not yet completed.
struct Inflight {
    task_id: u16,
    seq: u64,
    event: Option<(Arc<Event>, u64)>,
}

struct State {
    next_task_id: u16,
    submitted: u64,
    completed: u64,
    inflight: VecDeque<Inflight>,
    /// First error reported since the last synchronize.
    sticky_error: i32,
    /// Errors of individual tasks, for synchronous APIs waiting on exactly one task.
    failed: HashMap<u64, i32>,
}

pub(crate) struct Stream {
    pub dev: u32,
    pub id: u16,
    state: Mutex<State>,
    done: Condvar,
}

thread_local! {
    /// (task id, stream id) of this thread's last submitted task (rtGetTaskIdAndStreamID).
    pub static LAST_TASK: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// First task id of every stream (`NPU_SIM_TASK_ID_START`, default 0), so a test can reach the
/// 16-bit wrap quickly.
fn first_task_id() -> u16 {
    static F: OnceLock<u16> = OnceLock::new();
    *F.get_or_init(|| npu_sim_common::env::parse("NPU_SIM_TASK_ID_START", 0u16))
}

impl Stream {
    pub(crate) fn new(dev: u32, id: u16) -> Arc<Stream> {
        Arc::new(Stream {
            dev,
            id,
            state: Mutex::new(State {
                next_task_id: first_task_id(),
                submitted: 0,
                completed: 0,
                inflight: VecDeque::new(),
                sticky_error: 0,
                failed: HashMap::new(),
            }),
            done: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stamps `sqe` with this stream's id and next task id and sends it to the device, on the
    /// calling thread. Returns the task's sequence number on this stream.
    pub(crate) fn submit(
        &self,
        sqe: &mut Sqe,
        event: Option<(Arc<Event>, u64)>,
    ) -> Result<u64, i32> {
        let mut st = self.lock();
        let task_id = st.next_task_id;
        sqe.set_ids(self.id, task_id);
        let seq = st.submitted + 1;
        st.inflight.push_back(Inflight {
            task_id,
            seq,
            event,
        });
        let mut info = HalTaskSendInfo {
            type_: 0,
            ts_id: 0,
            sq_id: u32::from(self.id),
            timeout: 0,
            sqe_addr: sqe.0.as_mut_ptr(),
            sqe_num: 1,
            pos: 0,
            res: [0; 8],
        };
        // SAFETY: `info` points to one valid SQE for the duration of the call.
        let rc = unsafe { (Hal::get().halSqTaskSend)(self.dev, &mut info) };
        if rc != abi::DRV_ERROR_NONE {
            st.inflight.pop_back();
            return Err(abi::ACL_ERROR_RT_INTERNAL_ERROR);
        }
        st.next_task_id = task_id.wrapping_add(1);
        st.submitted = seq;
        LAST_TASK.with(|l| l.set((u32::from(task_id), u32::from(self.id))));
        Ok(seq)
    }

    /// Called by the report thread for each CQE of this stream (they arrive in task order).
    pub(crate) fn complete(&self, cqe: &Cqe) {
        let mut st = self.lock();
        let Some(done) = st.inflight.pop_front() else {
            eprintln!(
                "npu-sim: stream {} got a CQE with no task in flight",
                self.id
            );
            return;
        };
        let task_id = cqe.task_id;
        if done.task_id != task_id {
            eprintln!(
                "npu-sim: stream {}: CQE for task {task_id}, expected {}",
                self.id, done.task_id
            );
        }
        st.completed = done.seq;
        let code = cqe.error_code as i32;
        if code != 0 {
            st.failed.insert(done.seq, code);
            if st.sticky_error == 0 {
                st.sticky_error = code;
            }
        }
        drop(st);
        if let Some((event, generation)) = done.event {
            event.complete(generation, cqe.timestamp);
        }
        self.done.notify_all();
    }

    /// Waits for task `seq` of this stream; returns its error code.
    pub(crate) fn wait_task(&self, seq: u64) -> i32 {
        let mut st = self
            .done
            .wait_while(self.lock(), |s| s.completed < seq)
            .unwrap_or_else(|e| e.into_inner());
        match st.failed.remove(&seq) {
            Some(code) => {
                if st.sticky_error == code {
                    st.sticky_error = 0;
                }
                code
            }
            None => 0,
        }
    }

    /// Waits for everything submitted so far; returns the first error since the last sync.
    pub(crate) fn synchronize(&self) -> i32 {
        let target = self.lock().submitted;
        let mut st = self
            .done
            .wait_while(self.lock(), |s| s.completed < target)
            .unwrap_or_else(|e| e.into_inner());
        st.failed.retain(|seq, _| *seq > target);
        std::mem::take(&mut st.sticky_error)
    }
}
