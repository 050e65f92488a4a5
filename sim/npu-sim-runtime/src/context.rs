//! Devices as the runtime sees them: reference counts from rtSetDevice/rtDeviceReset, the
//! thread's current device and each device's streams. No thread of the runtime's own waits for
//! completions: synchronizing threads reclaim (see `stream`).
use std::cell::Cell;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use npu_sim_common::abi;

use crate::event::Event;
use crate::hal::Hal;
use crate::stream::Stream;

/// Default stream of every device.
pub(crate) const DEFAULT_STREAM_ID: u16 = 0;

#[derive(Default)]
struct DevState {
    refs: u32,
    streams: HashMap<u16, Arc<Stream>>,
    free_ids: BTreeSet<u16>,
    next_id: u16,
}

struct DevCtx {
    state: Mutex<DevState>,
}

fn devices() -> &'static [DevCtx] {
    static D: OnceLock<Vec<DevCtx>> = OnceLock::new();
    D.get_or_init(|| {
        (0..npu_sim_common::env::device_count())
            .map(|_| DevCtx {
                state: Mutex::new(DevState::default()),
            })
            .collect()
    })
}

fn dev_state(dev: u32) -> MutexGuard<'static, DevState> {
    devices()[dev as usize]
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

thread_local! {
    static CURRENT: Cell<Option<u32>> = const { Cell::new(None) };
}
/// Device set last by any thread: threads that never set one use it (-1: none).
static PROCESS_DEVICE: AtomicI64 = AtomicI64::new(-1);

pub(crate) fn device_count() -> u32 {
    devices().len() as u32
}

/// The calling thread's device, or ACL_ERROR_RT_CONTEXT_NULL if none was set.
pub(crate) fn current_device() -> Result<u32, i32> {
    if let Some(d) = CURRENT.with(Cell::get) {
        return Ok(d);
    }
    u32::try_from(PROCESS_DEVICE.load(Ordering::Relaxed))
        .map_err(|_| abi::ACL_ERROR_RT_CONTEXT_NULL)
}

fn check_device(dev: i32) -> Result<u32, i32> {
    u32::try_from(dev)
        .ok()
        .filter(|d| *d < device_count())
        .ok_or(abi::ACL_ERROR_RT_INVALID_DEVICEID)
}

pub(crate) fn set_device(dev: i32) -> Result<(), i32> {
    let dev = check_device(dev)?;
    let mut st = dev_state(dev);
    if st.refs == 0 {
        // Opening a device: check the driver sees it (and learn its clock, as CANN does).
        let mut khz = 0i64;
        // SAFETY: valid out-pointer.
        let rc = unsafe {
            (Hal::get().halGetDeviceInfo)(
                dev,
                abi::MODULE_TYPE_SYSTEM,
                abi::INFO_TYPE_DEV_OSC_FREQUE,
                &mut khz,
            )
        };
        if rc != abi::DRV_ERROR_NONE {
            return Err(abi::ACL_ERROR_RT_INVALID_DEVICEID);
        }
        st.streams.insert(
            DEFAULT_STREAM_ID,
            Stream::new(
                dev,
                DEFAULT_STREAM_ID,
                u32::from(DEFAULT_STREAM_ID),
                u32::from(DEFAULT_STREAM_ID),
            ),
        );
        st.next_id = DEFAULT_STREAM_ID + 1;
    }
    st.refs += 1;
    CURRENT.with(|c| c.set(Some(dev)));
    PROCESS_DEVICE.store(i64::from(dev), Ordering::Relaxed);
    Ok(())
}

/// Drops one reference; the last one drains and destroys the device's streams. Returns the destroyed streams, whose application handles the caller must
/// invalidate (handles are not this module's business).
pub(crate) fn reset_device(dev: i32) -> Result<Vec<Arc<Stream>>, i32> {
    let dev = check_device(dev)?;
    let streams: Vec<Arc<Stream>> = {
        let mut st = dev_state(dev);
        if st.refs == 0 {
            return Ok(Vec::new());
        }
        st.refs -= 1;
        if st.refs > 0 {
            return Ok(Vec::new());
        }
        st.streams.values().cloned().collect()
    };
    for s in &streams {
        s.synchronize();
    }
    let mut st = dev_state(dev);
    st.streams.clear();
    st.free_ids.clear();
    drop(st);
    CURRENT.with(|c| {
        if c.get() == Some(dev) {
            c.set(None);
        }
    });
    let _ =
        PROCESS_DEVICE.compare_exchange(i64::from(dev), -1, Ordering::Relaxed, Ordering::Relaxed);
    Ok(streams)
}

/// The default stream of the current device.
pub(crate) fn default_stream() -> Result<Arc<Stream>, i32> {
    let dev = current_device()?;
    dev_state(dev)
        .streams
        .get(&DEFAULT_STREAM_ID)
        .cloned()
        .ok_or(abi::ACL_ERROR_RT_CONTEXT_NULL)
}

/// A new stream on the current device, with the lowest free id.
pub(crate) fn create_stream() -> Result<Arc<Stream>, i32> {
    let dev = current_device()?;
    let mut st = dev_state(dev);
    if st.refs == 0 {
        return Err(abi::ACL_ERROR_RT_CONTEXT_NULL);
    }
    let id = match st.free_ids.pop_first() {
        Some(id) => id,
        None => {
            let id = st.next_id;
            st.next_id = st
                .next_id
                .checked_add(1)
                .ok_or(abi::ACL_ERROR_RT_MEMORY_ALLOCATION)?;
            id
        }
    };
    let s = Stream::new(dev, id, u32::from(id), u32::from(id));
    st.streams.insert(id, s.clone());
    Ok(s)
}

pub(crate) fn destroy_stream(s: &Arc<Stream>) {
    s.synchronize();
    let mut st = dev_state(s.dev);
    if st.streams.remove(&s.id).is_some() {
        st.free_ids.insert(s.id);
    }
}

/// All streams of the current device (rtDeviceSynchronize).
pub(crate) fn streams_of_current() -> Result<Vec<Arc<Stream>>, i32> {
    let dev = current_device()?;
    Ok(dev_state(dev).streams.values().cloned().collect())
}

/// Process-wide event ids.
pub(crate) fn new_event() -> Arc<Event> {
    static NEXT: AtomicI64 = AtomicI64::new(1);
    Arc::new(Event::new(NEXT.fetch_add(1, Ordering::Relaxed) as u32))
}
