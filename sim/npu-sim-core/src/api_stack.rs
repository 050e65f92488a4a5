//! Per-thread nesting of exported-API calls.
use std::cell::RefCell;

use crate::truth;

const NAME_CAP: usize = 64;

struct Stack {
    depth: u32,
    outer_name: [u8; NAME_CAP],
    outer_len: usize,
    outer_enter_ns: u64,
}

thread_local! {
    static STACK: RefCell<Stack> =
        const { RefCell::new(Stack { depth: 0, outer_name: [0; NAME_CAP], outer_len: 0, outer_enter_ns: 0 }) };
}

/// An exported function `name` was entered at `enter_ns`; returns its nesting depth (0 = outermost).
// SAFETY: the C caller's contract: `name` points to `len` readable bytes (a function name).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_sim_api_enter(name: *const u8, len: usize, enter_ns: u64) -> u32 {
    STACK
        .try_with(|s| {
            let mut s = s.borrow_mut();
            if s.depth == 0 {
                let n = len.min(NAME_CAP);
                // SAFETY: the caller passes a valid (pointer, length) string.
                let src = unsafe { std::slice::from_raw_parts(name, n) };
                s.outer_name[..n].copy_from_slice(src);
                s.outer_len = n;
                s.outer_enter_ns = enter_ns;
            }
            s.depth += 1;
            s.depth - 1
        })
        .unwrap_or(0)
}

/// The call entered last returns; `line` is its complete `api` ground-truth line.
// SAFETY: the C caller's contract: `line` points to `len` readable bytes of whole JSON lines.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_sim_api_exit(line: *const u8, len: usize) {
    let _ = STACK.try_with(|s| {
        let mut s = s.borrow_mut();
        s.depth = s.depth.saturating_sub(1);
    });
    // SAFETY: forwarded from the caller.
    unsafe { truth::npu_sim_truth_write(line, len) };
}

/// Copies the name of this thread's outermost API call in progress into `buf` and its entry
/// time into `*enter_ns`; returns the name's length, 0 when no API call is in progress.
// SAFETY: the C caller's contract: `buf` has `cap` writable bytes and `enter_ns` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_sim_outermost_api(
    buf: *mut u8,
    cap: usize,
    enter_ns: *mut u64,
) -> usize {
    STACK
        .try_with(|s| {
            let s = s.borrow();
            if s.depth == 0 || buf.is_null() || enter_ns.is_null() {
                return 0;
            }
            let n = s.outer_len.min(cap);
            // SAFETY: the caller provides `cap` writable bytes and a writable `enter_ns`.
            unsafe {
                std::ptr::copy_nonoverlapping(s.outer_name.as_ptr(), buf, n);
                *enter_ns = s.outer_enter_ns;
            }
            n
        })
        .unwrap_or(0)
}
