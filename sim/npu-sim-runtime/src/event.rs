//! Events: each record is a device task (SQE type 4) with a generation number; waits on the
//! device (type 5) and on the host wait for the generation recorded last.
use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Default)]
struct State {
    recorded: u64,
    done: u64,
    /// Device syscnt of the latest completed record.
    timestamp: u64,
}

pub(crate) struct Event {
    pub id: u32,
    state: Mutex<State>,
    cv: Condvar,
}

impl Event {
    pub(crate) fn new(id: u32) -> Event {
        Event {
            id,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a new record; returns its generation.
    pub(crate) fn next_record(&self) -> u64 {
        let mut st = self.lock();
        st.recorded += 1;
        st.recorded
    }

    /// Takes back a record whose task could not be submitted.
    pub(crate) fn cancel_record(&self, generation: u64) {
        let mut st = self.lock();
        if st.recorded == generation {
            st.recorded -= 1;
        }
    }

    /// The generation recorded last (0: never recorded).
    pub(crate) fn recorded(&self) -> u64 {
        self.lock().recorded
    }

    pub(crate) fn complete(&self, generation: u64, timestamp: u64) {
        let mut st = self.lock();
        if generation > st.done {
            st.done = generation;
            st.timestamp = timestamp;
        }
        self.cv.notify_all();
    }

    /// Waits until the latest record has completed.
    pub(crate) fn synchronize(&self) {
        let st = self.lock();
        let target = st.recorded;
        drop(
            self.cv
                .wait_while(st, |s| s.done < target)
                .unwrap_or_else(|e| e.into_inner()),
        );
    }
}
