//! Device resource ids, as the real driver hands them out to every process using a device:
//! stream ids (`halResourceIdAlloc(DRV_STREAM_ID)`), model ids (`DRV_MODEL_ID`), SQ and CQ ids
//! (`halSqCqAllocate(DRV_NORMAL_TYPE)`) and logic CQ ids (`halSqCqAllocate(DRV_LOGIC_TYPE)`).
//! The ids of one device are shared by all processes of a simulated host through
//! `/dev/shm/npu-sim-u<uid>-<host>-res-v1-dev<d>` (like the profiling channels), so two processes
//! on one device never get the same stream or SQ id.
//!
//! Each id has an owner pid (0: free). An id whose owner died is free again, as the kernel
//! driver frees a process's ids when its descriptor closes.
//!
//! Policies (the simulator's; the kernel-side allocators are not in the published sources):
//! stream, CQ, logic CQ and model ids are the lowest free ones; SQ ids are handed out next-fit
//! from a cursor starting at `SQ_FIRST`, so SQ ids differ from stream ids.
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::config;

/// Stream ids a device has (msPTI keeps stream ids modulo 2048).
pub(crate) const STREAM_IDS: u32 = 2048;
pub(crate) const SQ_IDS: u32 = 2048;
pub(crate) const CQ_IDS: u32 = 2048;
pub(crate) const LOGIC_CQ_IDS: u32 = 2048;
pub(crate) const MODEL_IDS: u32 = 1024;
/// The first SQ id handed out: lower ones are left to the driver's own queues.
const SQ_FIRST: u32 = 8;

/// An id space of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Stream,
    Sq,
    Cq,
    LogicCq,
    Model,
}

impl Kind {
    fn range(self) -> (usize, u32) {
        // (offset of the owner array in u32 words, number of ids)
        let mut off = 16;
        for k in [Kind::Stream, Kind::Sq, Kind::Cq, Kind::LogicCq, Kind::Model] {
            let n = k.count();
            if k == self {
                return (off, n);
            }
            off += n as usize;
        }
        unreachable!("every kind is listed")
    }

    fn count(self) -> u32 {
        match self {
            Kind::Stream => STREAM_IDS,
            Kind::Sq => SQ_IDS,
            Kind::Cq => CQ_IDS,
            Kind::LogicCq => LOGIC_CQ_IDS,
            Kind::Model => MODEL_IDS,
        }
    }
}

/// Words of the file: a 16-word header (word 0: the SQ cursor), then the owner arrays.
const WORDS: usize = 16 + (STREAM_IDS + SQ_IDS + CQ_IDS + LOGIC_CQ_IDS + MODEL_IDS) as usize;
const FILE_BYTES: usize = WORDS * 4;

pub(crate) struct Ids {
    base: *mut AtomicU32,
    fd: libc::c_int,
    local: Mutex<()>,
}

// SAFETY: `base` maps FILE_BYTES for the life of the process and is only accessed through
// atomics, under the lock.
unsafe impl Send for Ids {}
// SAFETY: as above.
unsafe impl Sync for Ids {}

/// The id file of device `dev` on this simulated host; `None` if /dev/shm is unusable.
pub(crate) fn of(dev: u32) -> Option<&'static Ids> {
    static IDS: OnceLock<Vec<OnceLock<Option<Ids>>>> = OnceLock::new();
    let cfg = config::get();
    let slots = IDS.get_or_init(|| (0..cfg.device_count).map(|_| OnceLock::new()).collect());
    slots
        .get(dev as usize)?
        .get_or_init(|| Ids::open(&cfg.host, cfg.chip_tag(), dev))
        .as_ref()
}

fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks whether the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl Ids {
    fn open(host: &str, chip: &str, dev: u32) -> Option<Ids> {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let name = CString::new(format!("/npu-sim-u{uid}-{host}-res-v1-{chip}-dev{dev}")).ok()?;
        // SAFETY: shm_open of a NUL-terminated name; then size (under flock, so creators agree)
        // and map the file; every call gets valid arguments.
        unsafe {
            let fd = libc::shm_open(name.as_ptr(), libc::O_RDWR | libc::O_CREAT, 0o600);
            if fd < 0 {
                return None;
            }
            libc::flock(fd, libc::LOCK_EX);
            let mut st: libc::stat = std::mem::zeroed();
            let mut ok = libc::fstat(fd, &mut st) == 0;
            if ok && (st.st_size as usize) < FILE_BYTES {
                ok = libc::ftruncate(fd, FILE_BYTES as libc::off_t) == 0;
            }
            libc::flock(fd, libc::LOCK_UN);
            let p = if ok {
                libc::mmap(
                    std::ptr::null_mut(),
                    FILE_BYTES,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            } else {
                libc::MAP_FAILED
            };
            if p == libc::MAP_FAILED {
                libc::close(fd);
                return None;
            }
            Some(Ids {
                base: p.cast(),
                fd,
                local: Mutex::new(()),
            })
        }
    }

    fn word(&self, i: usize) -> &AtomicU32 {
        assert!(i < WORDS);
        // SAFETY: i < WORDS, inside the mapping; u32 words are 4-aligned in a page-aligned map.
        unsafe { &*self.base.add(i) }
    }

    fn lock(&self) -> Held<'_> {
        let guard = self.local.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: flock on our own descriptor; retried if a signal interrupts it.
        while unsafe { libc::flock(self.fd, libc::LOCK_EX) } != 0 {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        Held {
            ids: self,
            _guard: guard,
        }
    }

    /// A free id of `kind`, now owned by `pid`; `None` when all are taken.
    pub(crate) fn alloc(&self, kind: Kind, pid: u32) -> Option<u32> {
        let _held = self.lock();
        let (off, n) = kind.range();
        let free = |id: u32| {
            let owner = self.word(off + id as usize).load(Ordering::Relaxed);
            owner == 0 || (owner != pid && !alive(owner))
        };
        let id = if kind == Kind::Sq {
            let cursor = self.word(0);
            let start = cursor.load(Ordering::Relaxed).clamp(SQ_FIRST, n - 1);
            let span = n - SQ_FIRST;
            let found = (0..span)
                .map(|i| SQ_FIRST + (start - SQ_FIRST + i) % span)
                .find(|&id| free(id))?;
            cursor.store(found + 1, Ordering::Relaxed);
            found
        } else {
            (0..n).find(|&id| free(id))?
        };
        self.word(off + id as usize).store(pid, Ordering::Relaxed);
        Some(id)
    }

    /// Frees id `id` of `kind` if `pid` owns it; false otherwise.
    pub(crate) fn free(&self, kind: Kind, id: u32, pid: u32) -> bool {
        let _held = self.lock();
        let (off, n) = kind.range();
        if id >= n {
            return false;
        }
        let w = self.word(off + id as usize);
        if w.load(Ordering::Relaxed) != pid {
            return false;
        }
        w.store(0, Ordering::Relaxed);
        true
    }
}

/// The file while its lock is held.
struct Held<'a> {
    ids: &'a Ids,
    _guard: MutexGuard<'a, ()>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // SAFETY: releasing the flock taken in `Ids::lock`.
        unsafe { libc::flock(self.ids.fd, libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_do_not_overlap() {
        let mut end = 16;
        for k in [Kind::Stream, Kind::Sq, Kind::Cq, Kind::LogicCq, Kind::Model] {
            let (off, n) = k.range();
            assert_eq!(off, end);
            end += n as usize;
        }
        assert_eq!(end, WORDS);
    }
}
