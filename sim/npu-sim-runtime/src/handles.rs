//! Opaque handles given to applications (`rtStream_t`, `rtEvent_t`). A handle is only ever
//! looked up here, never dereferenced, so a stale or forged one yields an error, not a crash.
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use npu_sim_common::abi;

use crate::context;
use crate::event::Event;
use crate::stream::Stream;

static STREAMS: Mutex<Option<HashMap<usize, Arc<Stream>>>> = Mutex::new(None);
static EVENTS: Mutex<Option<HashMap<usize, Arc<Event>>>> = Mutex::new(None);

fn with<T, R>(
    m: &Mutex<Option<HashMap<usize, Arc<T>>>>,
    f: impl FnOnce(&mut HashMap<usize, Arc<T>>) -> R,
) -> R {
    f(m.lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new))
}

pub(crate) fn add_stream(s: Arc<Stream>) -> *mut c_void {
    let h = Arc::as_ptr(&s) as usize;
    with(&STREAMS, |m| m.insert(h, s));
    h as *mut c_void
}

/// The stream behind `h`; NULL means the current device's default stream.
pub(crate) fn stream(h: *mut c_void) -> Result<Arc<Stream>, i32> {
    if h.is_null() {
        return context::default_stream();
    }
    with(&STREAMS, |m| m.get(&(h as usize)).cloned()).ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)
}

pub(crate) fn remove_stream(h: *mut c_void) -> Option<Arc<Stream>> {
    with(&STREAMS, |m| m.remove(&(h as usize)))
}

pub(crate) fn forget_stream(s: &Arc<Stream>) {
    with(&STREAMS, |m| m.remove(&(Arc::as_ptr(s) as usize)));
}

pub(crate) fn add_event(e: Arc<Event>) -> *mut c_void {
    let h = Arc::as_ptr(&e) as usize;
    with(&EVENTS, |m| m.insert(h, e));
    h as *mut c_void
}

pub(crate) fn event(h: *mut c_void) -> Result<Arc<Event>, i32> {
    with(&EVENTS, |m| m.get(&(h as usize)).cloned()).ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)
}

pub(crate) fn remove_event(h: *mut c_void) -> Option<Arc<Event>> {
    with(&EVENTS, |m| m.remove(&(h as usize)))
}
