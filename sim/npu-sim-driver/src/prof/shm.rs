//! One profiling channel of one device, shared by every process of the simulated host through a
//! file in /dev/shm. The real channel lives in the kernel and on the device, so every process
//! using the device feeds it and only one owns it; a shared mapping gives the simulator the
//! same host-wide view (the HCCL communicators use the same mechanism).
//!
//! Layout: a 4 KiB header of atomics, then the record slots (64-byte `StarsSocLog` on 910B,
//! 32-byte `StarsSocLogV6` on 950: one record size per file), then one u64 per
//! slot: the host CLOCK_MONOTONIC time the record was produced, which decides when it becomes
//! readable. All-zero is a valid idle state, so whoever creates the file needs no initialization
//! beyond `ftruncate`.
//!
//! Mutual exclusion: `flock` on the file (released by the kernel if a process dies holding it),
//! plus a process-local mutex because `flock` does not exclude threads sharing one descriptor.
use std::ffi::CStr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

const HEADER_BYTES: usize = 4096;
/// Bytes of record slots: the real driver's channel buffer is 4 MiB including a 4 KiB head
/// (`prof_buff_init`, src/ascend_hal/dmc/prof/adapt/prof_buff.c).
const RECORD_BYTES: usize = (4 << 20) - HEADER_BYTES;
/// The smallest record (`StarsSocLogV6`) sizes the times array.
const MIN_RECORD: usize = 32;
const RECORDS_OFF: usize = HEADER_BYTES;
const TIMES_OFF: usize = RECORDS_OFF + RECORD_BYTES;
const FILE_BYTES: usize = TIMES_OFF + RECORD_BYTES / MIN_RECORD * 8;

/// The shared state. Every field is only changed under the lock; `logging` is also read
/// without it, as a fast "is anyone profiling" check on every task.
#[repr(C)]
struct Header {
    /// Process that started the channel (0: nobody).
    owner_pid: AtomicU32,
    /// 1 while task begin/end records are produced (started with `acsq_task` on).
    logging: AtomicU32,
    /// Buffer capacity in records, fixed for a session.
    cap: AtomicU64,
    /// Records become readable at multiples of this after `start_ns`.
    period_ns: AtomicU64,
    start_ns: AtomicU64,
    /// Records stored this session (the ring's write count).
    tail: AtomicU64,
    /// Bytes read this session (reads may end inside a record).
    head_bytes: AtomicU64,
    /// Records before this index were made readable by `halProfDataFlush`.
    flushed: AtomicU64,
    /// Records the device produced this session, stored or not.
    produced: AtomicU64,
    /// Records dropped because the buffer was full.
    lost: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER_BYTES);

/// Counters of the current (or last) session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Stats {
    pub produced: u64,
    pub lost: u64,
    /// Records read completely.
    pub read: u64,
}

/// How a session starts.
pub(super) struct Session {
    pub owner_pid: u32,
    pub logging: bool,
    pub cap_records: u64,
    pub period_ns: u64,
    pub start_ns: u64,
}

pub(super) struct SharedChannel {
    base: *mut u8,
    /// Bytes per record.
    rec: usize,
    fd: libc::c_int,
    local: Mutex<()>,
}

// SAFETY: `base` maps FILE_BYTES for the life of the process (never unmapped) and all access to
// it goes through atomics or byte copies made under the channel lock.
unsafe impl Send for SharedChannel {}
// SAFETY: as above; shared references only use atomics or take the lock before copying bytes.
unsafe impl Sync for SharedChannel {}

impl SharedChannel {
    /// Maps (creating it if needed) the channel file `name` (`/...`, as for `shm_open`).
    pub(super) fn open(name: &CStr, rec: usize) -> Option<SharedChannel> {
        // SAFETY: plain shm_open of a NUL-terminated name.
        let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR | libc::O_CREAT, 0o600) };
        if fd < 0 {
            return None;
        }
        let base = grow_and_map(fd);
        if base.is_none() {
            // SAFETY: closing the descriptor opened above.
            unsafe { libc::close(fd) };
        }
        Some(SharedChannel {
            base: base?,
            rec: rec.clamp(MIN_RECORD, RECORD_BYTES),
            fd,
            local: Mutex::new(()),
        })
    }

    /// Records the buffer can hold at most.
    pub(super) fn max_records(&self) -> u64 {
        (RECORD_BYTES / self.rec) as u64
    }

    /// Bytes per record.
    pub(super) fn record_size(&self) -> usize {
        self.rec
    }

    fn header(&self) -> &Header {
        // SAFETY: the header sits at offset 0 of the mapping, page-aligned, and is all atomics.
        unsafe { &*self.base.cast::<Header>() }
    }

    /// Whether devices should produce records now (no lock; re-checked under it).
    pub(super) fn logging(&self) -> bool {
        self.header().logging.load(Ordering::Acquire) != 0
    }

    /// Takes the host-wide channel lock.
    pub(super) fn lock(&self) -> Locked<'_> {
        let guard = self.local.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: flock on our own open descriptor; retried if a signal interrupts it.
        while unsafe { libc::flock(self.fd, libc::LOCK_EX) } != 0 {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        Locked {
            ch: self,
            _guard: guard,
        }
    }
}

/// Sizes the channel file (under its lock, so two processes creating it agree) and maps it.
fn grow_and_map(fd: libc::c_int) -> Option<*mut u8> {
    // SAFETY: flock/fstat/ftruncate/mmap on a descriptor we own, with valid out-pointers.
    unsafe {
        libc::flock(fd, libc::LOCK_EX);
        let mut st: libc::stat = std::mem::zeroed();
        let mut ok = libc::fstat(fd, &mut st) == 0;
        if ok && (st.st_size as usize) < FILE_BYTES {
            ok = libc::ftruncate(fd, FILE_BYTES as libc::off_t) == 0;
        }
        libc::flock(fd, libc::LOCK_UN);
        if !ok {
            return None;
        }
        let p = libc::mmap(
            std::ptr::null_mut(),
            FILE_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        );
        (p != libc::MAP_FAILED).then(|| p.cast::<u8>())
    }
}

/// The channel while its lock is held.
pub(super) struct Locked<'a> {
    ch: &'a SharedChannel,
    _guard: MutexGuard<'a, ()>,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // SAFETY: releasing the flock taken in `SharedChannel::lock`.
        unsafe { libc::flock(self.ch.fd, libc::LOCK_UN) };
    }
}

impl Locked<'_> {
    fn h(&self) -> &Header {
        self.ch.header()
    }

    fn get(v: &AtomicU64) -> u64 {
        v.load(Ordering::Relaxed)
    }

    pub(super) fn owner(&self) -> u32 {
        self.h().owner_pid.load(Ordering::Relaxed)
    }

    pub(super) fn logging(&self) -> bool {
        self.ch.logging()
    }

    /// Begins a session: an empty buffer of `s.cap_records` records, counters zeroed.
    pub(super) fn start(&self, s: &Session) {
        let h = self.h();
        for v in [&h.tail, &h.head_bytes, &h.flushed, &h.produced, &h.lost] {
            v.store(0, Ordering::Relaxed);
        }
        h.cap.store(
            s.cap_records.clamp(1, self.ch.max_records()),
            Ordering::Relaxed,
        );
        h.period_ns.store(s.period_ns.max(1), Ordering::Relaxed);
        h.start_ns.store(s.start_ns, Ordering::Relaxed);
        h.owner_pid.store(s.owner_pid, Ordering::Relaxed);
        h.logging.store(u32::from(s.logging), Ordering::Release);
    }

    /// Ends the session; its counters stay readable until the next start.
    pub(super) fn stop(&self) -> Stats {
        self.h().logging.store(0, Ordering::Release);
        self.h().owner_pid.store(0, Ordering::Relaxed);
        self.stats()
    }

    pub(super) fn stats(&self) -> Stats {
        let h = self.h();
        Stats {
            produced: Self::get(&h.produced),
            lost: Self::get(&h.lost),
            read: Self::get(&h.head_bytes) / self.ch.rec as u64,
        }
    }

    /// The capacity, bounded again on every read: the file is shared with other processes, so
    /// the slot arithmetic must not trust it.
    fn cap(&self) -> u64 {
        Self::get(&self.h().cap).clamp(1, self.ch.max_records())
    }

    /// Records that still occupy the buffer: a record frees its slot once read completely.
    fn occupied(&self) -> u64 {
        let h = self.h();
        Self::get(&h.tail).saturating_sub(Self::get(&h.head_bytes) / self.ch.rec as u64)
    }

    /// Stores one record produced at host time `ns`, or counts it lost when the buffer is full.
    /// Stores one record (`record_size` bytes of `rec`) produced at host time `ns`, or counts it
    /// lost when the buffer is full.
    pub(super) fn append(&self, rec: &[u8], ns: u64) {
        let h = self.h();
        h.produced.fetch_add(1, Ordering::Relaxed);
        if self.occupied() >= self.cap() {
            h.lost.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let seq = Self::get(&h.tail);
        let slot = (seq % self.cap()) as usize;
        let size = self.ch.rec;
        let mut bytes = [0u8; 64];
        let n = rec.len().min(size).min(bytes.len());
        bytes[..n].copy_from_slice(&rec[..n]);
        // SAFETY: slot < cap <= max_records, so slot * size + size <= RECORD_BYTES and both
        // writes stay inside the mapping; the lock excludes every other reader and writer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ch.base.add(RECORDS_OFF + slot * size),
                size.min(bytes.len()),
            );
        }
        self.time(slot).store(ns, Ordering::Relaxed);
        h.tail.store(seq + 1, Ordering::Relaxed);
    }

    fn time(&self, slot: usize) -> &AtomicU64 {
        assert!(slot < RECORD_BYTES / MIN_RECORD);
        // SAFETY: slot < RECORD_BYTES / MIN_RECORD, the size of the times array, which is
        // 8-aligned inside the mapping.
        unsafe { &*self.ch.base.add(TIMES_OFF + slot * 8).cast::<AtomicU64>() }
    }

    /// The latest delivery instant at or before `now`: records produced by then are readable.
    fn delivered_by(&self, now: u64) -> u64 {
        let h = self.h();
        let (start, period) = (Self::get(&h.start_ns), Self::get(&h.period_ns).max(1));
        start + now.saturating_sub(start) / period * period
    }

    /// The next delivery instant after `now`.
    pub(super) fn next_delivery(&self, now: u64) -> u64 {
        self.delivered_by(now) + Self::get(&self.h().period_ns).max(1)
    }

    /// Index one past the last readable record: records are stored in time order, so the
    /// readable ones (flushed, or produced by the last delivery) form a prefix.
    fn readable_end(&self, now: u64) -> u64 {
        let h = self.h();
        let first = Self::get(&h.head_bytes) / self.ch.rec as u64;
        let (flushed, by) = (Self::get(&h.flushed), self.delivered_by(now));
        let cap = self.cap();
        let is_readable = |seq: u64| {
            seq < flushed || self.time((seq % cap) as usize).load(Ordering::Relaxed) <= by
        };
        let (mut lo, mut hi) = (first, Self::get(&h.tail));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if is_readable(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Bytes a read at `now` could return.
    pub(super) fn readable_bytes(&self, now: u64) -> u64 {
        let end = self.readable_end(now) * self.ch.rec as u64;
        end.saturating_sub(Self::get(&self.h().head_bytes))
    }

    /// Copies up to `out.len()` readable bytes (possibly ending inside a record, as the real
    /// driver's byte ring does) and consumes them.
    pub(super) fn read(&self, out: &mut [u8], now: u64) -> usize {
        let ring = (self.cap() as usize) * self.ch.rec;
        // Never more than one ring's worth, whatever the shared counters say.
        let n = (self.readable_bytes(now) as usize).min(out.len()).min(ring);
        let head = Self::get(&self.h().head_bytes);
        let pos = (head % ring as u64) as usize;
        let first = n.min(ring - pos);
        // SAFETY: both ranges lie inside the ring of `cap` slots (pos < ring, first <= ring -
        // pos, n - first <= pos) and `out` has n bytes; the lock excludes writers.
        unsafe {
            let records = self.ch.base.add(RECORDS_OFF);
            std::ptr::copy_nonoverlapping(records.add(pos), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(records, out.as_mut_ptr().add(first), n - first);
        }
        self.h()
            .head_bytes
            .store(head + n as u64, Ordering::Relaxed);
        n
    }

    /// Makes everything stored so far readable now; returns the readable bytes.
    pub(super) fn flush(&self, now: u64) -> u64 {
        let h = self.h();
        h.flushed.store(Self::get(&h.tail), Ordering::Relaxed);
        self.readable_bytes(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(tag: &str) -> SharedChannel {
        let name = format!("/npu-sim-unit-{tag}-{}\0", std::process::id());
        let name = CStr::from_bytes_with_nul(name.as_bytes()).unwrap();
        let ch = SharedChannel::open(name, 64).expect("shm channel");
        // SAFETY: unlinking the name we just created; the mapping stays valid.
        unsafe { libc::shm_unlink(name.as_ptr()) };
        ch
    }

    fn rec(i: u8) -> [u8; 64] {
        [i; 64]
    }

    fn session(cap: u64) -> Session {
        Session {
            owner_pid: 1,
            logging: true,
            cap_records: cap,
            period_ns: 100,
            start_ns: 1000,
        }
    }

    #[test]
    fn records_become_readable_at_the_next_delivery() {
        let ch = channel("delivery");
        let l = ch.lock();
        l.start(&session(8));
        l.append(&rec(1), 1010);
        l.append(&rec(2), 1150);
        assert_eq!(l.readable_bytes(1099), 0, "before the first delivery");
        assert_eq!(l.readable_bytes(1100), 64);
        assert_eq!(l.next_delivery(1100), 1200);
        let mut out = [0u8; 100];
        assert_eq!(
            l.read(&mut out, 1250),
            100,
            "a read may end inside a record"
        );
        assert_eq!((out[0], out[63], out[64], out[99]), (1, 1, 2, 2));
        assert_eq!(l.read(&mut out, 1250), 28);
        assert_eq!(
            l.stats(),
            Stats {
                produced: 2,
                lost: 0,
                read: 2
            }
        );
    }

    #[test]
    fn a_full_buffer_drops_and_counts() {
        let ch = channel("full");
        let l = ch.lock();
        l.start(&session(3));
        for i in 0..10 {
            l.append(&rec(i), 1000 + u64::from(i));
        }
        assert_eq!(l.flush(1001), 3 * 64);
        let mut out = [0u8; 64];
        assert_eq!(l.read(&mut out, 1001), 64);
        assert_eq!(out[0], 0);
        l.append(&rec(20), 1020);
        let mut all = [0u8; 1024];
        assert_eq!(
            l.read(&mut all, 5000),
            3 * 64,
            "the slot freed by the read was reused"
        );
        assert_eq!((all[0], all[64], all[128]), (1, 2, 20));
        assert_eq!(
            l.stop(),
            Stats {
                produced: 11,
                lost: 7,
                read: 4
            }
        );
        assert!(!l.logging());
    }
}
