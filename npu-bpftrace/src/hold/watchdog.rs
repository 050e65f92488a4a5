//! The held processes' guarantee: a helper process that continues every process still held
//! when the agent ends in any way (SIGKILL included), and any held longer than the bound.
//!
//! It is forked from the agent with the `HELD` and `HOLD_CONFIG` maps and the read end of a
//! pipe whose write end only the agent holds: the pipe's end of file is the agent's end.
//! Then it turns holding off first (the programs may stay attached a while as the dying
//! agent's descriptors close) and continues every hold. A hold past the bound means the
//! agent is not answering (stopped, or stuck in a long attach): holding is turned off too,
//! so that no more processes wait for it; the agent turns it on again when it answers.
//! Forked from a multi-threaded process, it makes only async-signal-safe calls (raw system
//! calls, no allocation).
use std::{
    io,
    os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd},
    time::Duration,
};

use tracer_common::{Held, HoldConfig, MAX_HELD};

use super::{StopState, stop_state};
use crate::caps;

/// The helper's name (`comm`).
const COMM: &[u8] = b"npu-bpf-holds";
/// How often the helper looks for holds past the bound.
const PERIOD_MS: i32 = 100;

/// The agent's end of the helper's pipe: dropping it (or exiting) makes the helper continue
/// every held process and exit.
pub(crate) struct Watchdog {
    _write_end: OwnedFd,
}

/// Starts the helper over the `HELD` map `held` and the `HOLD_CONFIG` map `config`; it
/// continues processes held longer than `limit`. It keeps only `CAP_BPF` (to read and
/// update the maps) and `CAP_KILL` (to continue other users' processes), when the agent has
/// them.
pub(crate) fn spawn(
    held: BorrowedFd<'_>,
    config: BorrowedFd<'_>,
    limit: Duration,
) -> io::Result<Watchdog> {
    let mut pipe = [0; 2];
    // SAFETY: valid pointer to two ints.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let [read_end, write_end] = pipe;
    let keep = ((1u64 << caps::CAP_BPF) | (1 << caps::CAP_KILL)) & caps::effective();
    let limit_ns = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX);
    let maps = Maps {
        held: held.as_raw_fd(),
        config: config.as_raw_fd(),
    };
    // SAFETY: between fork and _exit the children make only async-signal-safe calls.
    unsafe {
        let child = libc::fork();
        if child == 0 {
            if libc::fork() == 0 {
                let _ = caps::set(keep);
                helper(read_end, maps, limit_ns);
            }
            libc::_exit(0);
        }
        libc::close(read_end);
        if child < 0 {
            let err = io::Error::last_os_error();
            libc::close(write_end);
            return Err(err);
        }
        libc::waitpid(child, std::ptr::null_mut(), 0);
        Ok(Watchdog {
            _write_end: OwnedFd::from_raw_fd(write_end),
        })
    }
}

/// The descriptors of the two maps the helper uses.
#[derive(Clone, Copy)]
pub(super) struct Maps {
    pub held: RawFd,
    pub config: RawFd,
}

/// The helper's life: keeps only its three descriptors, continues holds past the bound
/// every [`PERIOD_MS`], and every hold once the agent is gone.
///
/// # Safety
/// Called in a child forked from a multi-threaded process: nothing here allocates.
unsafe fn helper(read_end: RawFd, maps: Maps, limit_ns: u64) -> ! {
    // SAFETY: async-signal-safe system calls on descriptors of this process only.
    unsafe {
        let mut name = [0u8; 16];
        name[..COMM.len()].copy_from_slice(COMM);
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
        // Nothing but the pipe and the maps: not the agent's output, nor the probes' links
        // (which would keep the programs attached, and holding, after the agent's end).
        keep_only([read_end, maps.held, maps.config]);
        loop {
            let mut poll = libc::pollfd {
                fd: read_end,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut poll, 1, PERIOD_MS) > 0 {
                // End of file (or an error): the agent is gone.
                stop_holding(maps);
                libc::_exit(0);
            }
            if release(maps.held, limit_ns) > 0 {
                set_enabled(maps.config, false);
            }
        }
    }
}

/// Turns holding off and continues every hold. A program that read the switch just before
/// may still hold one process: the second pass, after any program run has ended, gets it.
pub(super) fn stop_holding(maps: Maps) {
    set_enabled(maps.config, false);
    release(maps.held, 0);
    // SAFETY: a plain sleep; a BPF program run lasts microseconds.
    unsafe { libc::usleep(20_000) };
    release(maps.held, 0);
}

/// Closes every descriptor but `keep`.
fn keep_only(mut keep: [RawFd; 3]) {
    keep.sort_unstable();
    let mut first = 0;
    for fd in keep {
        close_range(first, fd - 1);
        first = fd + 1;
    }
    close_range(first, i32::MAX);
}

fn close_range(first: RawFd, last: RawFd) {
    if first <= last && first >= 0 {
        // SAFETY: closes descriptors of this process only.
        unsafe { libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32) };
    }
}

/// Continues the processes of the holds in `HELD` that are at least `min_age_ns` old;
/// returns how many holds it ended.
pub(super) fn release(held_fd: RawFd, min_age_ns: u64) -> usize {
    let mut keys = [0u32; MAX_HELD as usize];
    let count = held_keys(held_fd, &mut keys);
    // Allocation-free: safe in this forked child.
    let now = crate::session::clock_ns(libc::CLOCK_MONOTONIC);
    let mut ended = 0;
    for &tid in &keys[..count] {
        let Some(held) = lookup(held_fd, tid) else {
            continue;
        };
        if now.saturating_sub(held.ts_ns) >= min_age_ns && delete(held_fd, tid) {
            continue_process(held.tgid);
            ended += 1;
        }
    }
    ended
}

/// Sets `HOLD_CONFIG.enabled` (the rest of the configuration stays).
pub(super) fn set_enabled(config_fd: RawFd, enabled: bool) {
    let key = 0u32;
    let mut config = HoldConfig::default();
    if bpf(
        BPF_MAP_LOOKUP_ELEM,
        config_fd,
        (&raw const key) as u64,
        (&raw mut config) as u64,
    ) {
        config.enabled = u8::from(enabled);
        bpf(
            BPF_MAP_UPDATE_ELEM,
            config_fd,
            (&raw const key) as u64,
            (&raw const config) as u64,
        );
    }
}

/// Continues process `tgid` unless it is stopped with another stop pending: someone else
/// asked it to stop while it was held ([`stop_state`]). Returns whether it was continued.
pub(super) fn continue_process(tgid: u32) -> bool {
    let mut buf = [0u8; 4096];
    let state = read_status(tgid, &mut buf).map_or(StopState::default(), stop_state);
    if state.stopped && state.stop_pending {
        return false;
    }
    // SAFETY: kill(2) with a plain pid; ESRCH when it has exited.
    unsafe { libc::kill(tgid as i32, libc::SIGCONT) == 0 }
}

/// `/proc/TGID/status` into `buf`, without allocating.
fn read_status(tgid: u32, buf: &mut [u8]) -> Option<&[u8]> {
    let mut path = [0u8; 32];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let at = prefix.len() + write_decimal(tgid, &mut path[prefix.len()..]);
    let suffix = b"/status\0";
    path[at..at + suffix.len()].copy_from_slice(suffix);
    // SAFETY: a NUL-terminated path; read(2) into a buffer of the given length.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let mut len = 0;
        while len < buf.len() {
            let n = libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len);
            if n <= 0 {
                break;
            }
            len += n as usize;
        }
        libc::close(fd);
        Some(&buf[..len])
    }
}

/// Writes `n` in decimal at the start of `out`; returns the number of digits.
fn write_decimal(mut n: u32, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 10];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        out[i] = digits[len - 1 - i];
    }
    len
}

/// `union bpf_attr` for the map element commands.
#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

const BPF_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_MAP_UPDATE_ELEM: i32 = 2;
const BPF_MAP_DELETE_ELEM: i32 = 3;
const BPF_MAP_GET_NEXT_KEY: i32 = 4;

fn bpf(cmd: i32, map_fd: RawFd, key: u64, value: u64) -> bool {
    let mut attr = MapElemAttr {
        map_fd: map_fd as u32,
        _pad: 0,
        key,
        value,
        flags: 0,
    };
    // SAFETY: bpf(2) with an attribute of the size given; the kernel reads the key and
    // writes at most one value or key through the pointers, which point at live locals of
    // the callers.
    unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (&raw mut attr).cast::<libc::c_void>(),
            size_of::<MapElemAttr>() as u32,
        ) == 0
    }
}

/// The keys of `HELD` (at most `keys.len()`); returns how many.
pub(super) fn held_keys(map_fd: RawFd, keys: &mut [u32]) -> usize {
    let mut count = 0;
    let mut next = 0u32;
    // A null key asks for the first.
    let mut key_ptr = 0u64;
    while count < keys.len()
        && bpf(
            BPF_MAP_GET_NEXT_KEY,
            map_fd,
            key_ptr,
            (&raw mut next) as u64,
        )
    {
        keys[count] = next;
        key_ptr = (&raw const keys[count]) as u64;
        count += 1;
    }
    count
}

pub(super) fn lookup(map_fd: RawFd, tid: u32) -> Option<Held> {
    let mut value = Held::default();
    bpf(
        BPF_MAP_LOOKUP_ELEM,
        map_fd,
        (&raw const tid) as u64,
        (&raw mut value) as u64,
    )
    .then_some(value)
}

/// Deletes the hold of `tid`; true when this call deleted it (and so must continue it).
pub(super) fn delete(map_fd: RawFd, tid: u32) -> bool {
    bpf(BPF_MAP_DELETE_ELEM, map_fd, (&raw const tid) as u64, 0)
}

#[cfg(test)]
mod tests {
    use super::write_decimal;

    #[test]
    fn writes_decimals() {
        let mut out = [0u8; 10];
        assert_eq!(write_decimal(0, &mut out), 1);
        assert_eq!(&out[..1], b"0");
        assert_eq!(write_decimal(4_294_967_295, &mut out), 10);
        assert_eq!(&out, b"4294967295");
    }
}
