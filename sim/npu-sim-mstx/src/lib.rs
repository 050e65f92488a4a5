//! `libms_tools_ext.so`: mstx markers and ranges (host-side only: no device marker tasks).
//! Range ids are process-wide and start at 1 (0 is MSTX_INVALID_ID, returned on failure).
#![allow(clippy::missing_safety_doc)]

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use npu_sim_common::json::Obj;
use npu_sim_common::trace::api;

const LIB: &str = "libms_tools_ext.so";

static NEXT_RANGE: AtomicU64 = AtomicU64::new(1);

/// Live domains: handle -> name. A handle is a distinct heap address, never dereferenced.
static DOMAINS: LazyLock<Mutex<HashMap<usize, CString>>> = LazyLock::new(Mutex::default);

fn domain_name(handle: *mut c_void) -> Option<CString> {
    DOMAINS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(handle as usize))
        .cloned()
}

fn domain_args(a: &mut Obj, handle: *mut c_void) {
    a.u64("domain", handle as u64);
    if let Some(n) = domain_name(handle) {
        a.str("domain_name", &n.to_string_lossy());
    }
}

fn new_range(message: *const c_char) -> u64 {
    if message.is_null() {
        0
    } else {
        NEXT_RANGE.fetch_add(1, Ordering::Relaxed)
    }
}

// SAFETY: the C caller's contract: `stream` is null or valid for what the prototype says it points
// to; `message` is null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mstxMarkA(message: *const c_char, stream: *mut c_void) {
    api(
        LIB,
        "mstxMarkA",
        || {},
        // SAFETY: `message` is null or a NUL-terminated string, per the prototype.
        |a| unsafe {
            a.cstr("message", message).u64("stream", stream as u64);
        },
    )
}

// SAFETY: the C caller's contract: `stream` is null or valid for what the prototype says it points
// to; `message` is null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mstxRangeStartA(message: *const c_char, stream: *mut c_void) -> u64 {
    api(
        LIB,
        "mstxRangeStartA",
        || new_range(message),
        // SAFETY: `message` is null or a NUL-terminated string, per the prototype.
        |a| unsafe {
            a.cstr("message", message).u64("stream", stream as u64);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn mstxRangeEnd(id: u64) {
    api(
        LIB,
        "mstxRangeEnd",
        || {},
        |a| {
            a.u64("id", id);
        },
    )
}

// SAFETY: the C caller's contract: `name` is null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mstxDomainCreateA(name: *const c_char) -> *mut c_void {
    api(
        LIB,
        "mstxDomainCreateA",
        || {
            if name.is_null() {
                return std::ptr::null_mut();
            }
            // SAFETY: non-null, NUL-terminated by contract.
            let n = unsafe { CStr::from_ptr(name) }.to_owned();
            let handle = Box::into_raw(Box::new(0u8)) as usize;
            DOMAINS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(handle, n);
            handle as *mut c_void
        },
        // SAFETY: `name` is null or a NUL-terminated string, per the prototype.
        |a| unsafe {
            a.cstr("name", name);
        },
    )
}

// SAFETY: the C caller's contract: `handle` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mstxDomainDestroy(handle: *mut c_void) {
    api(
        LIB,
        "mstxDomainDestroy",
        || {
            if DOMAINS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&(handle as usize))
                .is_some()
            {
                // SAFETY: the handle was created by Box::into_raw in mstxDomainCreateA, once.
                drop(unsafe { Box::from_raw(handle as *mut u8) });
            }
        },
        |a| {
            a.u64("domain", handle as u64);
        },
    )
}

// SAFETY: the C caller's contract: `handle`, `stream` are null or valid for what the prototype
// says it points to; `message` is null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mstxDomainMarkA(
    handle: *mut c_void,
    message: *const c_char,
    stream: *mut c_void,
) {
    api(
        LIB,
        "mstxDomainMarkA",
        || {},
        |a| {
            domain_args(a, handle);
            // SAFETY: `message` is null or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("message", message).u64("stream", stream as u64) };
        },
    )
}

// SAFETY: the C caller's contract: `handle`, `stream` are null or valid for what the prototype
// says it points to; `message` is null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mstxDomainRangeStartA(
    handle: *mut c_void,
    message: *const c_char,
    stream: *mut c_void,
) -> u64 {
    api(
        LIB,
        "mstxDomainRangeStartA",
        || {
            if domain_name(handle).is_some() {
                new_range(message)
            } else {
                0
            }
        },
        |a| {
            domain_args(a, handle);
            // SAFETY: `message` is null or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("message", message).u64("stream", stream as u64) };
        },
    )
}

// SAFETY: the C caller's contract: `handle` is null or valid for what the prototype says it points
// to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mstxDomainRangeEnd(handle: *mut c_void, id: u64) {
    api(
        LIB,
        "mstxDomainRangeEnd",
        || {},
        |a| {
            domain_args(a, handle);
            a.u64("id", id);
        },
    )
}
