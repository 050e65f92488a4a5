//! Capabilities: what the agent needs, and giving up the rest once the probes are attached.
//!
//! Loading and attaching needs `CAP_BPF` and `CAP_PERFMON` (and `CAP_DAC_READ_SEARCH` to read
//! the tracepoints' ids in a tracefs of mode 0700). After the first attach the agent keeps
//! only what the rest of the session uses (see [`KEPT`]) and drops every other capability
//! from the effective, permitted and inheritable sets of all its threads, and the ambient
//! set.
use std::{
    io,
    sync::atomic::{AtomicU64, Ordering},
};

use anyhow::{Result, bail};

/// Capability numbers (`linux/capability.h`).
pub const CAP_KILL: u32 = 5;
pub const CAP_SYS_PTRACE: u32 = 19;
pub const CAP_PERFMON: u32 = 38;
pub const CAP_BPF: u32 = 39;

/// What is kept to the end of a session, and why:
/// - `CAP_BPF`: every bpf(2) call needs it while `kernel.unprivileged_bpf_disabled` is set
///   (the default): reading the loss counters and pending tasks, silencing the probes,
///   attaching to libraries that processes map later;
/// - `CAP_PERFMON`: attaching those later probes (perf-event uprobes, uprobe_multi links);
/// - `CAP_SYS_PTRACE`, when held: reading `/proc/PID/maps` and `/proc/PID/root` of processes
///   of other users, or with capabilities the agent has given up (any root process), to find
///   the libraries they map later;
/// - `CAP_KILL`, when held: continuing a held process of another user (see `hold`) once
///   its library is attached.
pub const KEPT: [u32; 4] = [CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, CAP_KILL];

/// The effective capability set of this process, as a bit mask.
pub fn effective() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0)
}

/// Fails with the exact capabilities to grant unless this process may load BPF programs.
pub fn ensure_privileged() -> Result<()> {
    let needed = (1u64 << CAP_PERFMON) | (1u64 << CAP_BPF);
    if effective() & needed == needed {
        return Ok(());
    }
    bail!(
        "loading BPF programs needs root, or the CAP_BPF and CAP_PERFMON capabilities \
         (and CAP_DAC_READ_SEARCH where tracefs is mode 0700); try sudo"
    )
}

/// Keeps only the capabilities of [`KEPT`] this process holds: the others leave the
/// effective, permitted and inheritable sets of every thread, and the ambient set is
/// emptied, so neither this process nor anything it starts can use them again.
///
/// Capabilities belong to threads, and the pipeline's threads already run: each is asked,
/// by a signal whose handler calls capset(2), to drop them itself (as glibc does for
/// setuid). Threads started afterwards inherit the reduced sets.
pub fn drop_unneeded() -> io::Result<()> {
    let keep = KEPT.iter().fold(0u64, |m, &c| m | 1 << c) & effective();
    KEEP.store(keep, Ordering::SeqCst);
    let signo = libc::SIGRTMIN() + 4;
    // SAFETY: a zeroed sigaction is valid; the handler only makes async-signal-safe calls.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_drop_signal as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        if libc::sigaction(signo, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    set(keep)?;
    clear_ambient_for_child();
    // SAFETY: getpid/gettid have no preconditions.
    let (pid, me) = unsafe { (libc::getpid(), libc::gettid()) };
    for tid in threads().into_iter().filter(|&t| t != me) {
        // SAFETY: tgkill(2) of a thread of this process (ESRCH if it has just exited).
        unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signo) };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let left = threads()
            .into_iter()
            .filter(|&t| thread_effective(t).is_some_and(|caps| caps & !keep != 0))
            .count();
        if left == 0 {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "{left} threads still hold capabilities beyond CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, \
                 CAP_KILL"
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The capabilities every thread keeps (for the signal handler).
static KEEP: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_drop_signal(_: libc::c_int) {
    // SAFETY: errno is thread-local; saved and restored around the handler's syscalls.
    let errno = unsafe { *libc::__errno_location() };
    let _ = set(KEEP.load(Ordering::SeqCst));
    clear_ambient_for_child();
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// The thread ids of this process.
fn threads() -> Vec<i32> {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// The effective set of thread `tid` of this process (None once it has exited).
fn thread_effective(tid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// capset(2) of the calling thread with `mask` as the effective and permitted sets and an
/// empty inheritable set. Async-signal-safe (a forked helper calls it).
pub(crate) fn set(mask: u64) -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [0, 1].map(|half| {
        let bits = (mask >> (32 * half)) as u32;
        Data {
            effective: bits,
            permitted: bits,
            inheritable: 0,
        }
    });
    // SAFETY: a version-3 header and two data structs, as capset(2) expects; the kernel
    // reads them only (and may write the header's version, which is ours).
    let r = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// For a command the agent starts: no ambient capabilities, so it runs with the user's own
/// privileges and not with the agent's. Async-signal-safe (for `pre_exec`).
pub fn clear_ambient_for_child() {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
}
