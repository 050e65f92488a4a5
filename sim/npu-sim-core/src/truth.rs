//! The ground-truth file `$NPU_SIM_TRUTH/truth-<pid>.jsonl`. Lines are buffered and written
//! with whole-line `write(2)`s on an `O_APPEND` descriptor: when the buffer grows past
//! [`FLUSH_BYTES`], when it is older than [`FLUSH_AGE_NS`], on `npu_sim_truth_flush`
//! (aclFinalize, rtDeviceReset) and at process exit.
use std::ffi::CString;
use std::sync::{Mutex, OnceLock};

use npu_sim_common::time::monotonic_ns;

const FLUSH_BYTES: usize = 64 * 1024;
const FLUSH_AGE_NS: u64 = 200_000_000;

struct Truth {
    fd: i32,
    buf: Mutex<Buf>,
}

struct Buf {
    data: Vec<u8>,
    since_ns: u64,
}

fn truth() -> Option<&'static Truth> {
    static T: OnceLock<Option<Truth>> = OnceLock::new();
    T.get_or_init(open).as_ref()
}

fn open() -> Option<Truth> {
    let dir = npu_sim_common::env::string("NPU_SIM_TRUTH")?;
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("npu-sim: NPU_SIM_TRUTH={dir}: {e}; ground truth disabled");
        return None;
    }
    let path = format!("{dir}/truth-{}.jsonl", std::process::id());
    let cpath = CString::new(path.clone()).ok()?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC;
    // SAFETY: NUL-terminated path.
    let fd = unsafe { libc::open(cpath.as_ptr(), flags, 0o644) };
    if fd < 0 {
        eprintln!(
            "npu-sim: cannot open {path}: {}",
            std::io::Error::last_os_error()
        );
        return None;
    }
    // SAFETY: registering a plain extern "C" function.
    unsafe { libc::atexit(flush_at_exit) };
    Some(Truth {
        fd,
        buf: Mutex::new(Buf {
            data: Vec::with_capacity(FLUSH_BYTES * 2),
            since_ns: 0,
        }),
    })
}

extern "C" fn flush_at_exit() {
    npu_sim_truth_flush();
}

fn write_all(fd: i32, mut data: &[u8]) {
    while !data.is_empty() {
        // SAFETY: valid buffer of `data.len()` bytes.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            eprintln!(
                "npu-sim: writing ground truth: {}",
                std::io::Error::last_os_error()
            );
            return;
        }
        data = &data[n as usize..];
    }
}

/// Whether `NPU_SIM_TRUTH` is set (and its file could be opened).
#[unsafe(no_mangle)]
pub extern "C" fn npu_sim_truth_enabled() -> bool {
    truth().is_some()
}

/// Appends complete lines.
// SAFETY: the C caller's contract: `line` points to `len` readable bytes of whole JSON lines.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_sim_truth_write(line: *const u8, len: usize) {
    let Some(t) = truth() else { return };
    if line.is_null() {
        return;
    }
    // SAFETY: the caller passes a valid (pointer, length) buffer.
    let bytes = unsafe { std::slice::from_raw_parts(line, len) };
    let mut b = t.buf.lock().unwrap_or_else(|e| e.into_inner());
    let now = monotonic_ns();
    if b.data.is_empty() {
        b.since_ns = now;
    }
    b.data.extend_from_slice(bytes);
    if b.data.len() >= FLUSH_BYTES || now.saturating_sub(b.since_ns) >= FLUSH_AGE_NS {
        write_all(t.fd, &b.data);
        b.data.clear();
    }
}

/// Writes everything buffered so far.
#[unsafe(no_mangle)]
pub extern "C" fn npu_sim_truth_flush() {
    let Some(t) = truth() else { return };
    let mut b = t.buf.lock().unwrap_or_else(|e| e.into_inner());
    write_all(t.fd, &b.data);
    b.data.clear();
}
