//! A communicator: the ranks of one HcclRootInfo share a file in /dev/shm through which data
//! really moves. Layout (all counters are atomics in the shared mapping):
//!
//! | offset          | what                                                        |
//! |-----------------|-------------------------------------------------------------|
//! | 8               | u32 rank count (set by the first rank to join)              |
//! | 12              | u32 ranks joined                                            |
//! | 4096 + 64*r     | u64 barrier epoch reached by rank r                         |
//! | 8192 + 16*(s*64+d) | u64 bytes produced, u64 bytes consumed on channel s -> d |
//! | P2P + 8*(s*64+d) | u64 handshakes the sender s made for channel s -> d          |
//! | P2P + 32768 + 8*(s*64+d) | u64 handshakes the receiver d made for channel s -> d |
//! | SLOTS           | n slots of SLOT_BYTES: each rank's staging area             |
//! | SLOTS + n*SLOT_BYTES | n*n channel buffers of CHAN_BYTES (send/recv)          |
//!
//! The file is unlinked once every rank has mapped it.
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use npu_sim_common::abi;

pub(crate) const MAX_RANKS: u32 = 64;
/// Staging bytes per rank per collective step.
pub(crate) const SLOT_BYTES: usize = 4 << 20;
/// Buffer bytes per point-to-point channel.
pub(crate) const CHAN_BYTES: usize = 1 << 20;
const EPOCH_OFF: usize = 4096;
const CHAN_HDR_OFF: usize = 8192;
const P2P_OFF: usize = CHAN_HDR_OFF + (MAX_RANKS * MAX_RANKS) as usize * 16;
const P2P_RECV_OFF: usize = P2P_OFF + (MAX_RANKS * MAX_RANKS) as usize * 8;
const SLOTS_OFF: usize = P2P_RECV_OFF + (MAX_RANKS * MAX_RANKS) as usize * 8;

/// What identifies a communicator inside `HcclRootInfo` (4108 bytes): a magic, then the name
/// of the shared-memory file, NUL-terminated.
pub(crate) const ROOT_MAGIC: &[u8; 16] = b"NPU-SIM-HCCL-V2\0";
pub(crate) const ROOT_INFO_BYTES: usize = 4108;

pub(crate) struct Comm {
    pub rank: u32,
    pub nranks: u32,
    base: *mut u8,
    len: usize,
    /// Last barrier epoch this rank reached; only touched by the one collective running.
    epoch: AtomicU64,
    /// Collectives of one communicator run one at a time, in submission order per stream.
    pub exec_lock: std::sync::Mutex<()>,
}

// SAFETY: the mapping is shared memory accessed through atomics and byte copies guarded by the
// barrier protocol; the pointer itself never changes, so moving a Comm between threads is fine.
unsafe impl Send for Comm {}
// SAFETY: shared access goes through the same atomics and barrier protocol as above; the
// mutable state (`epoch`) is atomic and the collective itself is serialized by `exec_lock`.
unsafe impl Sync for Comm {}

fn timeout_from_env(name: &str) -> Duration {
    Duration::from_secs(npu_sim_common::env::parse(name, 120u64))
}

/// Waits until `ready()` holds, backing off to short sleeps; `Err(HCCL_E_TIMEOUT)` after `limit`.
fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) -> Result<(), i32> {
    let start = Instant::now();
    let mut spins = 0u32;
    while !ready() {
        if spins < 64 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            if start.elapsed() > limit {
                return Err(abi::HCCL_E_TIMEOUT);
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    Ok(())
}

impl Comm {
    /// Joins the communicator named in `root` as `rank` of `nranks`.
    pub(crate) fn join(root: &[u8], nranks: u32, rank: u32) -> Result<Comm, i32> {
        if root.len() < ROOT_MAGIC.len() || &root[..ROOT_MAGIC.len()] != ROOT_MAGIC {
            return Err(abi::HCCL_E_PARA);
        }
        let name_bytes = &root[ROOT_MAGIC.len()..];
        let end = name_bytes
            .iter()
            .position(|b| *b == 0)
            .ok_or(abi::HCCL_E_PARA)?;
        let name = CString::new(&name_bytes[..end]).map_err(|_| abi::HCCL_E_PARA)?;
        let len =
            SLOTS_OFF + nranks as usize * SLOT_BYTES + (nranks * nranks) as usize * CHAN_BYTES;
        // SAFETY: plain shm_open/ftruncate/mmap of a file we create or share.
        let base = unsafe {
            let fd = libc::shm_open(name.as_ptr(), libc::O_RDWR | libc::O_CREAT, 0o600);
            if fd < 0 {
                return Err(abi::HCCL_E_SYSCALL);
            }
            let ok = libc::ftruncate(fd, len as libc::off_t) == 0;
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            libc::close(fd);
            if !ok || p == libc::MAP_FAILED {
                return Err(abi::HCCL_E_SYSCALL);
            }
            p.cast::<u8>()
        };
        let comm = Comm {
            rank,
            nranks,
            base,
            len,
            epoch: AtomicU64::new(0),
            exec_lock: Default::default(),
        };
        let joined = comm.rendezvous(nranks);
        if joined.is_err() || rank == 0 {
            // Every rank has the file mapped (or the communicator failed): the name can go.
            // SAFETY: unlinking our own shm name.
            unsafe { libc::shm_unlink(name.as_ptr()) };
        }
        joined.map(|()| comm)
    }

    /// Checks the rank count and waits (up to HCCL_CONNECT_TIMEOUT) for every rank to join.
    fn rendezvous(&self, nranks: u32) -> Result<(), i32> {
        if let Err(existing) =
            self.u32_at(8)
                .compare_exchange(0, nranks, Ordering::AcqRel, Ordering::Acquire)
            && existing != nranks
        {
            return Err(abi::HCCL_E_PARA);
        }
        self.u32_at(12).fetch_add(1, Ordering::AcqRel);
        let limit = timeout_from_env("HCCL_CONNECT_TIMEOUT");
        wait_until(limit, || self.u32_at(12).load(Ordering::Acquire) >= nranks)?;
        self.barrier(limit)
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` is a 4-aligned offset inside the mapping.
        unsafe { &*self.base.add(off).cast::<AtomicU32>() }
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is an 8-aligned offset inside the mapping.
        unsafe { &*self.base.add(off).cast::<AtomicU64>() }
    }

    /// Every rank reaches this point before any continues.
    pub(crate) fn barrier(&self, limit: Duration) -> Result<(), i32> {
        let e = self.signal();
        self.wait_all(e, limit)
    }

    /// The first half of a barrier (a notify record): this rank reached epoch `e`, returned.
    pub(crate) fn signal(&self) -> u64 {
        let e = self.epoch.fetch_add(1, Ordering::Relaxed) + 1;
        self.u64_at(EPOCH_OFF + 64 * self.rank as usize)
            .store(e, Ordering::Release);
        e
    }

    /// The second half (a notify wait): every rank reached epoch `e`.
    pub(crate) fn wait_all(&self, e: u64, limit: Duration) -> Result<(), i32> {
        wait_until(limit, || {
            (0..self.nranks).all(|r| {
                self.u64_at(EPOCH_OFF + 64 * r as usize)
                    .load(Ordering::Acquire)
                    >= e
            })
        })
    }

    /// The counters of channel `src -> dst`: (sender's handshakes, receiver's handshakes).
    fn handshakes(&self, src: u32, dst: u32) -> (&AtomicU64, &AtomicU64) {
        let i = 8 * (src * MAX_RANKS + dst) as usize;
        (self.u64_at(P2P_OFF + i), self.u64_at(P2P_RECV_OFF + i))
    }

    /// A send's or receive's notify record towards `peer`: returns its handshake number.
    pub(crate) fn p2p_signal(&self, sending: bool, peer: u32) -> u64 {
        if sending {
            self.handshakes(self.rank, peer)
                .0
                .fetch_add(1, Ordering::AcqRel)
                + 1
        } else {
            self.handshakes(peer, self.rank)
                .1
                .fetch_add(1, Ordering::AcqRel)
                + 1
        }
    }

    /// Its notify wait: the peer made handshake `k` on the same channel.
    pub(crate) fn p2p_wait(
        &self,
        sending: bool,
        peer: u32,
        k: u64,
        limit: Duration,
    ) -> Result<(), i32> {
        let (chan_src, chan_dst) = if sending {
            (self.rank, peer)
        } else {
            (peer, self.rank)
        };
        let (snd, rcv) = self.handshakes(chan_src, chan_dst);
        let other = if sending { rcv } else { snd };
        wait_until(limit, || other.load(Ordering::Acquire) >= k)
    }

    /// Rank `r`'s staging slot.
    pub(crate) fn slot(&self, r: u32) -> *mut u8 {
        // SAFETY: r < nranks, so the slot lies inside the mapping.
        unsafe { self.base.add(SLOTS_OFF + r as usize * SLOT_BYTES) }
    }

    fn chan(&self, src: u32, dst: u32) -> (&AtomicU64, &AtomicU64, *mut u8) {
        let i = (src * self.nranks + dst) as usize;
        let hdr = CHAN_HDR_OFF + 16 * ((src * MAX_RANKS + dst) as usize);
        let buf_off = SLOTS_OFF + self.nranks as usize * SLOT_BYTES + i * CHAN_BYTES;
        // SAFETY: inside the mapping.
        (self.u64_at(hdr), self.u64_at(hdr + 8), unsafe {
            self.base.add(buf_off)
        })
    }

    /// Sends `len` bytes at `data` to `dst` through the channel's ring buffer (returns once
    /// they are all in the buffer).
    pub(crate) fn send(
        &self,
        dst: u32,
        data: *const u8,
        len: usize,
        limit: Duration,
    ) -> Result<(), i32> {
        let (produced, consumed, buf) = self.chan(self.rank, dst);
        let mut off = 0;
        while off < len {
            let p = produced.load(Ordering::Relaxed);
            wait_until(limit, || {
                p - consumed.load(Ordering::Acquire) < CHAN_BYTES as u64
            })?;
            let space = CHAN_BYTES - (p - consumed.load(Ordering::Acquire)) as usize;
            let n = space.min(len - off);
            // SAFETY: `data` has `len` readable bytes; ring positions stay inside the buffer.
            unsafe { ring_copy(data.add(off), buf, p as usize % CHAN_BYTES, n, true) };
            produced.store(p + n as u64, Ordering::Release);
            off += n;
        }
        Ok(())
    }

    /// Receives `len` bytes from `src` into `data`.
    pub(crate) fn recv(
        &self,
        src: u32,
        data: *mut u8,
        len: usize,
        limit: Duration,
    ) -> Result<(), i32> {
        let (produced, consumed, buf) = self.chan(src, self.rank);
        let mut off = 0;
        while off < len {
            let c = consumed.load(Ordering::Relaxed);
            wait_until(limit, || produced.load(Ordering::Acquire) > c)?;
            let n = ((produced.load(Ordering::Acquire) - c) as usize).min(len - off);
            // SAFETY: `data` has `len` writable bytes; ring positions stay inside the buffer.
            unsafe { ring_copy(data.add(off), buf, c as usize % CHAN_BYTES, n, false) };
            consumed.store(c + n as u64, Ordering::Release);
            off += n;
        }
        Ok(())
    }
}

/// Copies `n` bytes between `user` and the ring `ring` at position `pos`, wrapping at
/// CHAN_BYTES; into the ring when `to_ring`.
// SAFETY: unsafe because `user` must be valid for `n` bytes and `ring` must be a CHAN_BYTES
// ring with `pos < CHAN_BYTES` and `n <= CHAN_BYTES`.
unsafe fn ring_copy(user: *const u8, ring: *mut u8, pos: usize, n: usize, to_ring: bool) {
    let first = n.min(CHAN_BYTES - pos);
    // SAFETY: the caller guarantees both ranges; `pos + first <= CHAN_BYTES`.
    unsafe {
        if to_ring {
            std::ptr::copy_nonoverlapping(user, ring.add(pos), first);
            std::ptr::copy_nonoverlapping(user.add(first), ring, n - first);
        } else {
            std::ptr::copy_nonoverlapping(ring.add(pos), user.cast_mut(), first);
            std::ptr::copy_nonoverlapping(ring, user.cast_mut().add(first), n - first);
        }
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what join mapped.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// The timeout of a collective step (HCCL_EXEC_TIMEOUT seconds, default 120).
pub(crate) fn exec_timeout() -> Duration {
    timeout_from_env("HCCL_EXEC_TIMEOUT")
}
