//! Host clocks and thread ids.
use std::cell::Cell;

/// CLOCK_MONOTONIC in nanoseconds (the time base of the ground truth).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid clock id and out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

thread_local! {
    static TID: Cell<u32> = const { Cell::new(0) };
}

/// The kernel thread id of the caller (cached per thread).
pub fn tid() -> u32 {
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no preconditions.
            t.set(unsafe { libc::gettid() } as u32);
        }
        t.get()
    })
}

/// The process id.
pub fn pid() -> u32 {
    std::process::id()
}
