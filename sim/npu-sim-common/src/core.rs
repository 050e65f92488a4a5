//! Client side of `libnpu_sim_core.so`, the one library that owns process-wide simulator state:
//! the ground-truth file and the per-thread stack of API calls in progress.
use std::sync::OnceLock;

crate::import_table! {
    pub struct Core from "libnpu_sim_core.so" {
        fn npu_sim_truth_enabled() -> bool;
        fn npu_sim_api_enter(name: *const u8, len: usize, enter_ns: u64) -> u32;
        fn npu_sim_api_exit(line: *const u8, len: usize);
        fn npu_sim_outermost_api(buf: *mut u8, cap: usize, enter_ns: *mut u64) -> usize;
        fn npu_sim_truth_write(line: *const u8, len: usize);
        fn npu_sim_truth_flush();
    }
}

/// The core library when ground truth is being recorded (`NPU_SIM_TRUTH` set), else `None`.
pub fn truth() -> Option<&'static Core> {
    static T: OnceLock<Option<&'static Core>> = OnceLock::new();
    *T.get_or_init(|| {
        let core = Core::get();
        // SAFETY: no arguments.
        unsafe { (core.npu_sim_truth_enabled)() }.then_some(core)
    })
}

/// Appends whole JSON lines to the ground truth (no-op when it is off).
pub fn write_truth(lines: &str) {
    if let Some(core) = truth() {
        // SAFETY: pointer and length of a live string.
        unsafe { (core.npu_sim_truth_write)(lines.as_ptr(), lines.len()) };
    }
}

/// Writes buffered ground truth to the file now.
pub fn flush_truth() {
    if let Some(core) = truth() {
        // SAFETY: no arguments.
        unsafe { (core.npu_sim_truth_flush)() };
    }
}

/// The outermost API call in progress on this thread: (function name, enter_ns).
pub fn outermost_api() -> Option<(String, u64)> {
    let core = truth()?;
    let mut buf = [0u8; 64];
    let mut enter = 0u64;
    // SAFETY: valid buffer and out-pointer.
    let n = unsafe { (core.npu_sim_outermost_api)(buf.as_mut_ptr(), buf.len(), &mut enter) };
    (n > 0).then(|| {
        (
            String::from_utf8_lossy(&buf[..n.min(buf.len())]).into_owned(),
            enter,
        )
    })
}
