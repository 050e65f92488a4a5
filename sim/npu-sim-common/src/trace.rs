//! The wrapper every exported CANN function runs in: fault injection, then, when ground truth is
//! on, an `api` line with the entry/exit times, return value and arguments.
use std::cell::RefCell;
use std::ffi::c_void;

use crate::json::Obj;
use crate::time::{monotonic_ns, pid, tid};
use crate::{core, faults};

/// A return type of an exported function.
pub trait Ret: Copy {
    /// The value returned for an injected error `code`.
    fn from_code(code: i32) -> Self;
    fn write(&self, o: &mut Obj);
}

impl Ret for i32 {
    fn from_code(code: i32) -> Self {
        code
    }
    fn write(&self, o: &mut Obj) {
        o.i64("ret", i64::from(*self));
    }
}

/// `mstxRangeId`: 0 means failure.
impl Ret for u64 {
    fn from_code(_: i32) -> Self {
        0
    }
    fn write(&self, o: &mut Obj) {
        o.u64("ret", *self);
    }
}

impl Ret for () {
    fn from_code(_: i32) -> Self {}
    fn write(&self, o: &mut Obj) {
        o.null("ret");
    }
}

/// Handles: NULL means failure.
impl Ret for *mut c_void {
    fn from_code(_: i32) -> Self {
        std::ptr::null_mut()
    }
    fn write(&self, o: &mut Obj) {
        o.u64("ret", *self as u64);
    }
}

thread_local! {
    static LINE: RefCell<String> = RefCell::new(String::with_capacity(512));
}

/// Runs the exported function `name` of `lib`: `body` does the work, `args` writes the
/// arguments (by their header names) after it, so out-parameters can be recorded too.
pub fn api<R: Ret>(
    lib: &'static str,
    name: &'static str,
    body: impl FnOnce() -> R,
    args: impl FnOnce(&mut Obj),
) -> R {
    let Some(core) = core::truth() else {
        return faults::check(name).map_or_else(body, R::from_code);
    };
    let enter_ns = monotonic_ns();
    // SAFETY: pointer and length of a static string.
    let depth = unsafe { (core.npu_sim_api_enter)(name.as_ptr(), name.len(), enter_ns) };
    let ret = faults::check(name).map_or_else(body, R::from_code);
    let exit_ns = monotonic_ns();
    let write = |line: &mut String| {
        line.clear();
        let mut o = Obj::begin(line);
        o.str("type", "api").str("lib", lib).str("fn", name);
        o.u64("pid", pid().into())
            .u64("tid", tid().into())
            .u64("depth", depth.into());
        o.u64("enter_ns", enter_ns).u64("exit_ns", exit_ns);
        ret.write(&mut o);
        o.obj("args", args);
        o.end();
        line.push('\n');
        // SAFETY: pointer and length of a live string.
        unsafe { (core.npu_sim_api_exit)(line.as_ptr(), line.len()) };
    };
    // During thread teardown the thread-local buffer may be gone: use a fresh one.
    let mut write = Some(write);
    let used_tls = LINE
        .try_with(|l| (write.take().expect("called once"))(&mut l.borrow_mut()))
        .is_ok();
    if let (false, Some(w)) = (used_tls, write) {
        w(&mut String::new());
    }
    ret
}

/// Reads an out-parameter pointer (`*pp`) for the ground truth; 0 when `pp` is null.
///
/// # Safety
/// `pp` is null or points to a readable pointer.
// SAFETY: unsafe because callers must pass null or a readable pointer-to-pointer (see # Safety).
pub unsafe fn out_ptr<T>(pp: *const *mut T) -> u64 {
    if pp.is_null() {
        0
    } else {
        // SAFETY: caller guarantees `pp` is readable.
        unsafe { *pp as u64 }
    }
}
