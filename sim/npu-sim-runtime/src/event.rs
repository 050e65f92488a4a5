//! Events: each record is a device task (an event-record SQE that writes a CQE with the device
//! time, as records of events with RT_EVENT_TIME_LINE do) with a generation number; waits on the
//! device and on the host wait for the generation recorded last.
use std::sync::{Arc, Mutex, MutexGuard};

use crate::stream::{RecordDone, Stream};

#[derive(Default)]
struct State {
    recorded: u64,
    done: u64,
    /// Device syscnt of the latest completed record (its CQE's timestamp).
    timestamp: u64,
    /// The stream and task sequence of the latest record.
    last: Option<(Arc<Stream>, u64)>,
}

pub(crate) struct Event {
    pub id: u32,
    state: Mutex<State>,
}

/// How long one wait of `Event::synchronize` blocks in the driver (ms) before it reclaims again.
const WAIT_MS: i32 = 1;

impl Event {
    pub(crate) fn new(id: u32) -> Event {
        Event {
            id,
            state: Mutex::new(State::default()),
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

    /// The record of `generation` was sent as task `seq` of `stream`.
    pub(crate) fn sent(&self, generation: u64, stream: Arc<Stream>, seq: u64) {
        let mut st = self.lock();
        if st.recorded == generation {
            st.last = Some((stream, seq));
        }
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

    /// Waits until the latest record has completed, reclaiming its stream on this thread.
    pub(crate) fn synchronize(&self) {
        let (target, last) = {
            let st = self.lock();
            (st.recorded, st.last.clone())
        };
        let Some((stream, seq)) = last else {
            return;
        };
        while self.lock().done < target && !stream.is_done(seq) {
            stream.reclaim_or_wait(WAIT_MS);
        }
    }
}

impl RecordDone for Event {
    fn complete(&self, generation: u64, timestamp: u64) {
        let mut st = self.lock();
        if generation > st.done {
            st.done = generation;
            st.timestamp = timestamp;
        }
    }
}
