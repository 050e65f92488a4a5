//! `libhccl.so`: simulated HCCL. Ranks are processes; a communicator is a shared-memory file
//! named in the HcclRootInfo (see `comm.rs`). Each collective is validated on the calling
//! thread and expanded on the host into tasks on the given stream, as HCCL's host (HOST_TS)
//! expansion does on 910B: notify records and waits (SQE types 6 and 7) and an SDMA task (11);
//! the exchange itself runs on the device when the tasks execute (see `ops.rs`).
#![allow(clippy::missing_safety_doc, non_snake_case)]

mod comm;
mod dtype;
mod ops;

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use npu_sim_common::abi::{self, Sqe, annot, kind, pl};
use npu_sim_common::json::Obj;
use npu_sim_common::trace::{api, out_ptr};

use comm::{Comm, MAX_RANKS, ROOT_INFO_BYTES, ROOT_MAGIC};
use dtype::{DType, ReduceOp};
use ops::{Collective, Kind, Op, Step, StepCtx};

const LIB: &str = "libhccl.so";

type HcclComm = *mut c_void;
type Stream = *mut c_void;

npu_sim_common::import_table! {
    struct Rt from "libruntime.so" {
        fn npu_sim_rt_submit(stm: *mut c_void, sqe: *const u8) -> i32;
    }
}

/// Live communicators by handle (handles are looked up, never dereferenced).
static COMMS: LazyLock<Mutex<HashMap<usize, Arc<Comm>>>> = LazyLock::new(Mutex::default);

fn comm(h: HcclComm) -> Result<Arc<Comm>, i32> {
    if h.is_null() {
        return Err(abi::HCCL_E_PTR);
    }
    COMMS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(h as usize))
        .cloned()
        .ok_or(abi::HCCL_E_PARA)
}

fn rc(r: Result<(), i32>) -> i32 {
    r.err().unwrap_or(abi::HCCL_SUCCESS)
}

fn non_null(ptrs: &[*const c_void]) -> Result<(), i32> {
    if ptrs.iter().any(|p| p.is_null()) {
        Err(abi::HCCL_E_PTR)
    } else {
        Ok(())
    }
}

/// Validates the common parts of a collective and submits its tasks.
fn submit(op: Op, stream: Stream) -> Result<(), i32> {
    non_null(&[stream])?;
    let n = op.comm.nranks;
    let es = op.dtype.size() as u64;
    let bytes = match op.kind {
        Kind::ReduceScatter | Kind::AlltoAll => op.count * es * u64::from(n),
        _ => op.count * es,
    };
    if op.count == 0 && op.kind != Kind::Barrier {
        return Ok(());
    }
    let name = op.kind.name().as_ptr() as u64;
    let steps = ops::steps(op.kind);
    let coll = Arc::new(Collective::new(op));
    let exec: unsafe extern "C" fn(u64) -> u32 = ops::exec_step;
    for (i, &step) in steps.iter().enumerate() {
        let ctx = Box::into_raw(Box::new(StepCtx {
            coll: coll.clone(),
            step,
        })) as u64;
        let mut sqe = match step {
            Step::Exchange => {
                let mut s = Sqe::new(abi::v100::SDMA, kind::HCCL, 0);
                s.set_u64(pl::COPY_SRC, exec as usize as u64)
                    .set_u64(pl::COPY_DST, ctx);
                s.set_u64(pl::COPY_BYTES, bytes)
                    .set_u32(pl::SDMA_OP, abi::SDMA_OP_CALL);
                s
            }
            _ => {
                let ty = if step.is_record() {
                    abi::v100::NOTIFY_RECORD
                } else {
                    abi::v100::NOTIFY_WAIT
                };
                let mut s = Sqe::new(ty, kind::HCCL, 0);
                s.set_u64(pl::CALL_FN, exec as usize as u64)
                    .set_u64(pl::CALL_CTX, ctx);
                s
            }
        };
        sqe.set_u32(pl::HCCL_STEP, i as u32)
            .set_u64(annot::NAME, name)
            .set_u32(annot::AUX, n);
        // SAFETY: one valid SQE.
        if unsafe { (Rt::get().npu_sim_rt_submit)(stream, sqe.0.as_ptr()) } != 0 {
            // SAFETY: the task was not queued, so the context is still ours.
            drop(unsafe { Box::from_raw(ctx as *mut StepCtx) });
            return Err(abi::HCCL_E_RUNTIME);
        }
    }
    Ok(())
}

fn reducing(dt: u32, op: u32) -> Result<(DType, ReduceOp), i32> {
    let dt = DType::from_hccl(dt)?;
    let op = ReduceOp::from_hccl(op)?;
    if !dtype::reducible(dt) {
        return Err(abi::HCCL_E_NOT_SUPPORT);
    }
    Ok((dt, op))
}

fn rank_arg(c: &Comm, r: u32) -> Result<u32, i32> {
    if r < c.nranks {
        Ok(r)
    } else {
        Err(abi::HCCL_E_PARA)
    }
}

fn coll_args(
    a: &mut Obj,
    count_name: &str,
    count: u64,
    dataType: u32,
    comm: HcclComm,
    stream: Stream,
) {
    a.u64(count_name, count)
        .u64("dataType", dataType.into())
        .u64("comm", comm as u64)
        .u64("stream", stream as u64);
}

// SAFETY: the C caller's contract: `rootInfo` is null or valid for what the prototype says it
// points to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclGetRootInfo(rootInfo: *mut u8) -> i32 {
    api(
        LIB,
        "HcclGetRootInfo",
        || {
            if rootInfo.is_null() {
                return abi::HCCL_E_PTR;
            }
            static SEQ: AtomicU64 = AtomicU64::new(0);
            let name = format!(
                "/npusim-hccl-{}-{}-{}\0",
                std::process::id(),
                npu_sim_common::time::monotonic_ns(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            );
            // SAFETY: HcclRootInfo is ROOT_INFO_BYTES writable bytes.
            let out = unsafe { std::slice::from_raw_parts_mut(rootInfo, ROOT_INFO_BYTES) };
            out.fill(0);
            out[..ROOT_MAGIC.len()].copy_from_slice(ROOT_MAGIC);
            out[ROOT_MAGIC.len()..ROOT_MAGIC.len() + name.len()].copy_from_slice(name.as_bytes());
            abi::HCCL_SUCCESS
        },
        |a| {
            a.u64("rootInfo", rootInfo as u64);
        },
    )
}

// SAFETY: the C caller's contract: `rootInfo`, `comm` are null or valid for what the prototype
// says it points to.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclCommInitRootInfo(
    nRanks: u32,
    rootInfo: *const u8,
    rank: u32,
    comm: *mut HcclComm,
) -> i32 {
    api(
        LIB,
        "HcclCommInitRootInfo",
        || {
            rc((|| {
                non_null(&[rootInfo.cast(), comm.cast_const().cast()])?;
                if nRanks == 0 || nRanks > MAX_RANKS || rank >= nRanks {
                    return Err(abi::HCCL_E_PARA);
                }
                // SAFETY: HcclRootInfo is ROOT_INFO_BYTES readable bytes.
                let root = unsafe { std::slice::from_raw_parts(rootInfo, ROOT_INFO_BYTES) };
                let c = Arc::new(Comm::join(root, nRanks, rank)?);
                let h = Arc::as_ptr(&c) as usize;
                COMMS.lock().unwrap_or_else(|e| e.into_inner()).insert(h, c);
                // SAFETY: checked non-null.
                unsafe { *comm = h as HcclComm };
                Ok(())
            })())
        },
        |a| {
            a.u64("nRanks", nRanks.into())
                .u64("rootInfo", rootInfo as u64)
                .u64("rank", rank.into());
            a.u64("comm", comm as u64)
                // SAFETY: `comm` is null or the caller's out-parameter, readable once the call returned.
                .u64("out_comm", unsafe { out_ptr(comm) });
        },
    )
}

// SAFETY: the C caller's contract: `sendBuf`, `recvBuf` are null or valid for what the prototype
// says it points to; `comm`, `stream` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclAllReduce(
    sendBuf: *mut c_void,
    recvBuf: *mut c_void,
    count: u64,
    dataType: u32,
    op: u32,
    comm: HcclComm,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "HcclAllReduce",
        || {
            rc((|| {
                let c = self::comm(comm)?;
                non_null(&[sendBuf, recvBuf])?;
                let (dtype, op) = reducing(dataType, op)?;
                let o = Op {
                    comm: c,
                    kind: Kind::AllReduce,
                    send: sendBuf.cast(),
                    recv: recvBuf.cast(),
                    count,
                    dtype,
                    op,
                    peer: 0,
                };
                submit(o, stream)
            })())
        },
        |a| {
            a.u64("sendBuf", sendBuf as u64)
                .u64("recvBuf", recvBuf as u64)
                .u64("op", op.into());
            coll_args(a, "count", count, dataType, comm, stream);
        },
    )
}

// SAFETY: the C caller's contract: `buf` is null or valid for what the prototype says it points
// to; `comm`, `stream` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclBroadcast(
    buf: *mut c_void,
    count: u64,
    dataType: u32,
    root: u32,
    comm: HcclComm,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "HcclBroadcast",
        || {
            rc((|| {
                let c = self::comm(comm)?;
                non_null(&[buf])?;
                let dtype = DType::from_hccl(dataType)?;
                let peer = rank_arg(&c, root)?;
                let o = Op {
                    comm: c,
                    kind: Kind::Broadcast,
                    send: buf.cast(),
                    recv: buf.cast(),
                    count,
                    dtype,
                    op: ReduceOp::Sum,
                    peer,
                };
                submit(o, stream)
            })())
        },
        |a| {
            a.u64("buf", buf as u64).u64("root", root.into());
            coll_args(a, "count", count, dataType, comm, stream);
        },
    )
}

// SAFETY: the C caller's contract: `sendBuf`, `recvBuf` are null or valid for what the prototype
// says it points to; `comm`, `stream` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclAllGather(
    sendBuf: *mut c_void,
    recvBuf: *mut c_void,
    sendCount: u64,
    dataType: u32,
    comm: HcclComm,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "HcclAllGather",
        || {
            rc((|| {
                let c = self::comm(comm)?;
                non_null(&[sendBuf, recvBuf])?;
                let dtype = DType::from_hccl(dataType)?;
                let o = Op {
                    comm: c,
                    kind: Kind::AllGather,
                    send: sendBuf.cast(),
                    recv: recvBuf.cast(),
                    count: sendCount,
                    dtype,
                    op: ReduceOp::Sum,
                    peer: 0,
                };
                submit(o, stream)
            })())
        },
        |a| {
            a.u64("sendBuf", sendBuf as u64)
                .u64("recvBuf", recvBuf as u64);
            coll_args(a, "sendCount", sendCount, dataType, comm, stream);
        },
    )
}

// SAFETY: the C caller's contract: `sendBuf`, `recvBuf` are null or valid for what the prototype
// says it points to; `comm`, `stream` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclReduceScatter(
    sendBuf: *mut c_void,
    recvBuf: *mut c_void,
    recvCount: u64,
    dataType: u32,
    op: u32,
    comm: HcclComm,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "HcclReduceScatter",
        || {
            rc((|| {
                let c = self::comm(comm)?;
                non_null(&[sendBuf, recvBuf])?;
                let (dtype, op) = reducing(dataType, op)?;
                let o = Op {
                    comm: c,
                    kind: Kind::ReduceScatter,
                    send: sendBuf.cast(),
                    recv: recvBuf.cast(),
                    count: recvCount,
                    dtype,
                    op,
                    peer: 0,
                };
                submit(o, stream)
            })())
        },
        |a| {
            a.u64("sendBuf", sendBuf as u64)
                .u64("recvBuf", recvBuf as u64)
                .u64("op", op.into());
            coll_args(a, "recvCount", recvCount, dataType, comm, stream);
        },
    )
}

// SAFETY: the C caller's contract: `sendBuf`, `recvBuf` are null or valid for what the prototype
// says it points to; `comm`, `stream` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclReduce(
    sendBuf: *mut c_void,
    recvBuf: *mut c_void,
    count: u64,
    dataType: u32,
    op: u32,
    root: u32,
    comm: HcclComm,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "HcclReduce",
        || {
            rc((|| {
                let c = self::comm(comm)?;
                non_null(&[sendBuf, recvBuf])?;
                let (dtype, op) = reducing(dataType, op)?;
                let peer = rank_arg(&c, root)?;
                let o = Op {
                    comm: c,
                    kind: Kind::Reduce,
                    send: sendBuf.cast(),
                    recv: recvBuf.cast(),
                    count,
                    dtype,
                    op,
                    peer,
                };
                submit(o, stream)
            })())
        },
        |a| {
            a.u64("sendBuf", sendBuf as u64)
                .u64("recvBuf", recvBuf as u64)
                .u64("op", op.into())
                .u64("root", root.into());
            coll_args(a, "count", count, dataType, comm, stream);
        },
    )
}

// SAFETY: the C caller's contract: `sendBuf`, `recvBuf` are null or valid for what the prototype
// says it points to; `comm`, `stream` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclAlltoAll(
    sendBuf: *const c_void,
    sendCount: u64,
    sendType: u32,
    recvBuf: *const c_void,
    recvCount: u64,
    recvType: u32,
    comm: HcclComm,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "HcclAlltoAll",
        || {
            rc((|| {
                let c = self::comm(comm)?;
                non_null(&[sendBuf, recvBuf])?;
                let (st, rt) = (DType::from_hccl(sendType)?, DType::from_hccl(recvType)?);
                // Every rank sends each peer exactly what that peer expects to receive.
                if sendCount * st.size() as u64 != recvCount * rt.size() as u64 {
                    return Err(abi::HCCL_E_PARA);
                }
                let o = Op {
                    comm: c,
                    kind: Kind::AlltoAll,
                    send: sendBuf.cast(),
                    recv: recvBuf.cast_mut().cast(),
                    count: sendCount,
                    dtype: st,
                    op: ReduceOp::Sum,
                    peer: 0,
                };
                submit(o, stream)
            })())
        },
        |a| {
            a.u64("sendBuf", sendBuf as u64)
                .u64("sendCount", sendCount)
                .u64("sendType", sendType.into());
            a.u64("recvBuf", recvBuf as u64)
                .u64("recvCount", recvCount)
                .u64("recvType", recvType.into());
            a.u64("comm", comm as u64).u64("stream", stream as u64);
        },
    )
}

fn p2p(
    kind: Kind,
    buf: *mut c_void,
    count: u64,
    dataType: u32,
    peer: u32,
    comm: HcclComm,
    stream: Stream,
) -> Result<(), i32> {
    let c = self::comm(comm)?;
    non_null(&[buf])?;
    let dtype = DType::from_hccl(dataType)?;
    let peer = rank_arg(&c, peer).and_then(|p| {
        if p == c.rank {
            Err(abi::HCCL_E_PARA)
        } else {
            Ok(p)
        }
    })?;
    let o = Op {
        comm: c,
        kind,
        send: buf.cast(),
        recv: buf.cast(),
        count,
        dtype,
        op: ReduceOp::Sum,
        peer,
    };
    submit(o, stream)
}

// SAFETY: the C caller's contract: `sendBuf` is null or valid for what the prototype says it
// points to; `comm`, `stream` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclSend(
    sendBuf: *mut c_void,
    count: u64,
    dataType: u32,
    destRank: u32,
    comm: HcclComm,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "HcclSend",
        || {
            rc(p2p(
                Kind::Send,
                sendBuf,
                count,
                dataType,
                destRank,
                comm,
                stream,
            ))
        },
        |a| {
            a.u64("sendBuf", sendBuf as u64)
                .u64("destRank", destRank.into());
            coll_args(a, "count", count, dataType, comm, stream);
        },
    )
}

// SAFETY: the C caller's contract: `recvBuf` is null or valid for what the prototype says it
// points to; `comm`, `stream` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclRecv(
    recvBuf: *mut c_void,
    count: u64,
    dataType: u32,
    srcRank: u32,
    comm: HcclComm,
    stream: Stream,
) -> i32 {
    api(
        LIB,
        "HcclRecv",
        || {
            rc(p2p(
                Kind::Recv,
                recvBuf,
                count,
                dataType,
                srcRank,
                comm,
                stream,
            ))
        },
        |a| {
            a.u64("recvBuf", recvBuf as u64)
                .u64("srcRank", srcRank.into());
            coll_args(a, "count", count, dataType, comm, stream);
        },
    )
}

// SAFETY: the C caller's contract: `comm`, `stream` are opaque handles, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclBarrier(comm: HcclComm, stream: Stream) -> i32 {
    api(
        LIB,
        "HcclBarrier",
        || {
            rc((|| {
                let c = self::comm(comm)?;
                let o = Op {
                    comm: c,
                    kind: Kind::Barrier,
                    send: std::ptr::null(),
                    recv: std::ptr::null_mut(),
                    count: 0,
                    dtype: DType::U8,
                    op: ReduceOp::Sum,
                    peer: 0,
                };
                submit(o, stream)
            })())
        },
        |a| {
            a.u64("comm", comm as u64).u64("stream", stream as u64);
        },
    )
}

// SAFETY: the C caller's contract: `rank` is null or valid for what the prototype says it points
// to; `comm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclGetRankId(comm: HcclComm, rank: *mut u32) -> i32 {
    api(
        LIB,
        "HcclGetRankId",
        || {
            rc(self::comm(comm).and_then(|c| {
                non_null(&[rank.cast_const().cast()])?;
                // SAFETY: checked non-null.
                unsafe { *rank = c.rank };
                Ok(())
            }))
        },
        |a| {
            a.u64("comm", comm as u64).u64("rank", rank as u64);
        },
    )
}

// SAFETY: the C caller's contract: `rankSize` is null or valid for what the prototype says it
// points to; `comm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclGetRankSize(comm: HcclComm, rankSize: *mut u32) -> i32 {
    api(
        LIB,
        "HcclGetRankSize",
        || {
            rc(self::comm(comm).and_then(|c| {
                non_null(&[rankSize.cast_const().cast()])?;
                // SAFETY: checked non-null.
                unsafe { *rankSize = c.nranks };
                Ok(())
            }))
        },
        |a| {
            a.u64("comm", comm as u64).u64("rankSize", rankSize as u64);
        },
    )
}

// SAFETY: the C caller's contract: `comm` is an opaque handle, never trusted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn HcclCommDestroy(comm: HcclComm) -> i32 {
    api(
        LIB,
        "HcclCommDestroy",
        || {
            if comm.is_null() {
                return abi::HCCL_E_PTR;
            }
            // Collectives still queued keep the communicator alive through their Arc.
            match COMMS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&(comm as usize))
            {
                Some(_) => abi::HCCL_SUCCESS,
                None => abi::HCCL_E_PARA,
            }
        },
        |a| {
            a.u64("comm", comm as u64);
        },
    )
}
