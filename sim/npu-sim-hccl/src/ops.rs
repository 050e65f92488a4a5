//! Collectives as they run on the device. A collective is a few tasks on the caller's stream
//! (see [`steps`]): notify records and waits that synchronize the ranks, and an SDMA task that
//! moves the data. libhccl puts [`exec_step`] and a [`StepCtx`] in each SQE, and a device core
//! calls it when the task reaches the head of its stream. Data moves through the
//! communicator's staging slots in chunks, two barriers per chunk, so no rank can finish a
//! collective before every rank has started it.
use std::ffi::CStr;
use std::ops::Not;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use npu_sim_common::abi;

use crate::comm::{Comm, SLOT_BYTES, exec_timeout};
use crate::dtype::{DType, ReduceOp, reduce};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    AllReduce,
    Broadcast,
    AllGather,
    ReduceScatter,
    Reduce,
    AlltoAll,
    Send,
    Recv,
    Barrier,
}

impl Kind {
    /// Task name in the ground truth (the API that submitted it).
    pub(crate) fn name(self) -> &'static CStr {
        match self {
            Kind::AllReduce => c"HcclAllReduce",
            Kind::Broadcast => c"HcclBroadcast",
            Kind::AllGather => c"HcclAllGather",
            Kind::ReduceScatter => c"HcclReduceScatter",
            Kind::Reduce => c"HcclReduce",
            Kind::AlltoAll => c"HcclAlltoAll",
            Kind::Send => c"HcclSend",
            Kind::Recv => c"HcclRecv",
            Kind::Barrier => c"HcclBarrier",
        }
    }
}

pub(crate) struct Op {
    pub comm: Arc<Comm>,
    pub kind: Kind,
    pub send: *const u8,
    pub recv: *mut u8,
    /// Elements: per rank for AllReduce/Broadcast/Reduce/Send/Recv, per rank's input for
    /// AllGather, per output for ReduceScatter, per peer for AlltoAll.
    pub count: u64,
    pub dtype: DType,
    pub op: ReduceOp,
    /// Root rank (Broadcast, Reduce) or peer rank (Send, Recv).
    pub peer: u32,
}

/// One task of a collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Notify record: this rank arrived (collectives: its barrier epoch; send/recv: its
    /// handshake on the channel).
    PreRecord,
    /// Notify wait: the peers arrived.
    PreWait,
    /// SDMA: the data movement (with inline reduction).
    Exchange,
    /// Notify record and wait after the data moved: nobody leaves before everyone is done.
    PostRecord,
    PostWait,
}

impl Step {
    /// A notify record (SQE type 6) rather than a wait (7) or SDMA (11).
    pub(crate) fn is_record(self) -> bool {
        matches!(self, Step::PreRecord | Step::PostRecord)
    }
}

/// The tasks a collective of `kind` puts on the stream, in order.
pub(crate) fn steps(kind: Kind) -> &'static [Step] {
    match kind {
        Kind::Barrier => &[Step::PreRecord, Step::PreWait],
        Kind::Send | Kind::Recv => &[Step::PreRecord, Step::PreWait, Step::Exchange],
        _ => &[
            Step::PreRecord,
            Step::PreWait,
            Step::Exchange,
            Step::PostRecord,
            Step::PostWait,
        ],
    }
}

/// A collective in flight: its operation and the epochs or handshake numbers its records got.
pub(crate) struct Collective {
    pub op: Op,
    pre: AtomicU64,
    post: AtomicU64,
}

// SAFETY: the raw pointers in `op` are the application's device buffers, only dereferenced by
// the collective's exchange task on a device core; everything else is atomics or Send+Sync.
unsafe impl Send for Collective {}
// SAFETY: as above: shared access to the pointers themselves is read-only.
unsafe impl Sync for Collective {}

impl Collective {
    pub(crate) fn new(op: Op) -> Collective {
        Collective {
            op,
            pre: AtomicU64::new(0),
            post: AtomicU64::new(0),
        }
    }
}

/// What one SQE of a collective carries for the device.
pub(crate) struct StepCtx {
    pub coll: Arc<Collective>,
    pub step: Step,
}

/// Runs the step whose boxed [`StepCtx`] is `ctx`; returns the CQE error code.
// SAFETY: unsafe because `ctx` must be a `Box<StepCtx>` that libhccl leaked into exactly one
// SQE, so the device runs it (and frees it) exactly once.
pub(crate) unsafe extern "C" fn exec_step(ctx: u64) -> u32 {
    // SAFETY: `ctx` is the Box<StepCtx> libhccl leaked into exactly one SQE.
    let ctx = unsafe { Box::from_raw(ctx as *mut StepCtx) };
    let coll = &*ctx.coll;
    let op = &coll.op;
    let c = &*op.comm;
    let t = exec_timeout();
    let p2p = matches!(op.kind, Kind::Send | Kind::Recv);
    let sending = op.kind == Kind::Send;
    let r = match ctx.step {
        Step::PreRecord | Step::PostRecord => {
            let n = if p2p {
                c.p2p_signal(sending, op.peer)
            } else {
                c.signal()
            };
            let slot = if ctx.step == Step::PreRecord {
                &coll.pre
            } else {
                &coll.post
            };
            slot.store(n, Ordering::Release);
            Ok(())
        }
        Step::PreWait | Step::PostWait => {
            let slot = if ctx.step == Step::PreWait {
                &coll.pre
            } else {
                &coll.post
            };
            let n = slot.load(Ordering::Acquire);
            if p2p {
                c.p2p_wait(sending, op.peer, n, t)
            } else {
                c.wait_all(n, t)
            }
        }
        Step::Exchange => {
            // Collectives share the staging slots and barrier epochs, so they run one at a
            // time; a send and a receive use their own channels and may overlap anything (a
            // ring of sends and receives on two streams needs that).
            let _one_at_a_time = p2p
                .not()
                .then(|| c.exec_lock.lock().unwrap_or_else(|e| e.into_inner()));
            op.run()
        }
    };
    match r {
        Ok(()) => 0,
        Err(abi::HCCL_E_TIMEOUT) => abi::ACL_ERROR_RT_TASK_TIMEOUT as u32,
        Err(_) => abi::ACL_ERROR_RT_INTERNAL_ERROR as u32,
    }
}

/// Copies `n` bytes.
///
/// # Safety
/// Both ranges are valid for `n` bytes.
// SAFETY: unsafe because both ranges must be valid for `n` bytes (see # Safety).
unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: forwarded; user buffers may overlap each other (in-place collectives).
    unsafe { std::ptr::copy(src, dst, n) };
}

/// Chunks of `total` bytes of at most `chunk` bytes: (offset, length).
fn chunks(total: usize, chunk: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..total)
        .step_by(chunk.max(1))
        .map(move |off| (off, chunk.min(total - off)))
}

impl Op {
    fn run(&self) -> Result<(), i32> {
        let c = &*self.comm;
        let (n, me) = (c.nranks, c.rank);
        let es = self.dtype.size();
        let bytes = self.count as usize * es;
        let t = exec_timeout();
        // SAFETY: (whole match) user buffers were checked non-null and are sized by the counts
        // the application passed; slots hold SLOT_BYTES and chunks never exceed that.
        unsafe {
            match self.kind {
                Kind::AllReduce | Kind::Reduce => {
                    let mut acc = vec![0u8; bytes.min(SLOT_BYTES / es * es)];
                    for (off, len) in chunks(bytes, acc.len()) {
                        copy(self.send.add(off), c.slot(me), len);
                        c.barrier(t)?;
                        if self.kind == Kind::AllReduce || me == self.peer {
                            copy(c.slot(0), acc.as_mut_ptr(), len);
                            for r in 1..n {
                                reduce(
                                    &mut acc[..len],
                                    std::slice::from_raw_parts(c.slot(r), len),
                                    self.dtype,
                                    self.op,
                                );
                            }
                            copy(acc.as_ptr(), self.recv.add(off), len);
                        }
                        c.barrier(t)?;
                    }
                }
                Kind::Broadcast => {
                    for (off, len) in chunks(bytes, SLOT_BYTES) {
                        if me == self.peer {
                            copy(self.recv.add(off), c.slot(me), len);
                        }
                        c.barrier(t)?;
                        if me != self.peer {
                            copy(c.slot(self.peer), self.recv.add(off), len);
                        }
                        c.barrier(t)?;
                    }
                }
                Kind::AllGather => {
                    for (off, len) in chunks(bytes, SLOT_BYTES) {
                        copy(self.send.add(off), c.slot(me), len);
                        c.barrier(t)?;
                        for r in 0..n {
                            copy(c.slot(r), self.recv.add(r as usize * bytes + off), len);
                        }
                        c.barrier(t)?;
                    }
                }
                Kind::ReduceScatter | Kind::AlltoAll => {
                    let chunk = SLOT_BYTES / n as usize / es * es;
                    let mut acc = vec![0u8; chunk.min(bytes)];
                    for (off, len) in chunks(bytes, chunk) {
                        for dst in 0..n as usize {
                            copy(
                                self.send.add(dst * bytes + off),
                                c.slot(me).add(dst * len),
                                len,
                            );
                        }
                        c.barrier(t)?;
                        let mine = me as usize * len;
                        if self.kind == Kind::AlltoAll {
                            for r in 0..n {
                                copy(
                                    c.slot(r).add(mine),
                                    self.recv.add(r as usize * bytes + off),
                                    len,
                                );
                            }
                        } else {
                            copy(c.slot(0).add(mine), acc.as_mut_ptr(), len);
                            for r in 1..n {
                                let src = std::slice::from_raw_parts(c.slot(r).add(mine), len);
                                reduce(&mut acc[..len], src, self.dtype, self.op);
                            }
                            copy(acc.as_ptr(), self.recv.add(off), len);
                        }
                        c.barrier(t)?;
                    }
                }
                Kind::Send => c.send(self.peer, self.send, bytes, t)?,
                Kind::Recv => c.recv(self.peer, self.recv, bytes, t)?,
                Kind::Barrier => c.barrier(t)?,
            }
        }
        Ok(())
    }
}
