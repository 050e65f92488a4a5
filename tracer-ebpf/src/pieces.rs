//! User memory copied to the agent in fixed-size pieces, for two callers:
//!
//! - passive profiling-channel reading: when another profiler (msprof, msPTI) owns a
//!   device's channel 50, the driver refuses it to the agent, but that profiler reads the
//!   channel with `prof_channel_read(device, channel, buf, size)` in its own process; at the
//!   call's return the bytes it read are copied ([`ChannelData`]) and the agent decodes the
//!   records exactly as if it had read them itself;
//! - device binaries at registration (`rtRegisterAllKernel`): the kernels are named by the
//!   ELF's symbols, and the caller may free the binary once the call returned
//!   ([`BinaryPiece`]).
//!
//! A copy is up to 512 pieces, cut by a `bpf_loop` callback ([`for_each`]).
use core::ffi::c_void;

use aya_ebpf::{helpers::generated::bpf_probe_read_user, programs::ProbeContext};
use tracer_common::{
    BinaryPiece, CHANNEL_CHUNK, ChannelData, DropKind, MAX_BINARY_CHUNKS, MAX_CHANNEL_CHUNKS,
    RecordHeader, RecordKind,
};

use crate::maps::{
    EVENTS, LAYOUT, PIECE_COPY, PieceCopy, config, count_drop, for_each, read, submit_flags,
};

/// Whether a `prof_channel_read` entered by process `tgid` is one to copy: it reads the
/// channel that carries task records, of a device the agent reads passively, and the reader
/// is not the agent itself.
#[inline(always)]
pub(crate) fn wants_channel(ctx: &ProbeContext, tgid: u32) -> bool {
    let c = config();
    let device: u64 = ctx.arg(0).unwrap_or(u64::MAX);
    let channel: u64 = ctx.arg(1).unwrap_or(u64::MAX);
    device < 64
        && c.passive_devices & (1 << device) != 0
        && tgid != c.agent_pid
        && LAYOUT
            .get(0)
            .is_some_and(|l| channel == u64::from(l.soc_log_channel))
}

/// At the return of a copied channel read: `ret` bytes (when positive) were read into `buf`.
#[inline(always)]
pub(crate) fn on_channel_read(buf: u64, device_id: u32, ret: u64, tgid: u32, tid: u32, ts_ns: u64) {
    let total = ret as i32;
    if total <= 0 {
        return;
    }
    let copy = PieceCopy {
        src: buf,
        total: total as u32,
        device_id,
        length: total as u64,
        correlation_id: 0,
        tgid,
        tid,
        ts_ns,
    };
    copy_pieces(&copy, MAX_CHANNEL_CHUNKS, channel_piece);
}

/// `bpf_loop` callback: sends piece `index` of the channel read in [`PIECE_COPY`]; 1 stops.
extern "C" fn channel_piece(index: u32, _ctx: *mut c_void) -> i64 {
    let Some(c) = PIECE_COPY.get_ptr(0) else {
        return 1;
    };
    // SAFETY: a per-CPU map value, written by this program run before the loop.
    let c = unsafe { &*c };
    let offset = index.wrapping_mul(CHANNEL_CHUNK as u32);
    if index >= MAX_CHANNEL_CHUNKS || offset >= c.total {
        return 1;
    }
    let Some(mut entry) = EVENTS.reserve::<ChannelData>(0) else {
        count_drop(DropKind::ChannelData);
        return 1;
    };
    let rec = entry.as_mut_ptr();
    let len = piece_len(c.total - offset);
    // SAFETY: `rec` points at reserved ring-buffer memory of the right size; the helper
    // copies `len` <= CHANNEL_CHUNK bytes into `data` and faults safely on bad user memory.
    let rc = unsafe {
        (*rec).header = RecordHeader::new(RecordKind::ChannelData, 0, 0, c.tgid, c.tid, c.ts_ns);
        (*rec).device_id = c.device_id;
        (*rec).len = len;
        (*rec).offset = offset;
        (*rec)._pad = 0;
        copy(&mut (*rec).data, c.src, offset, len)
    };
    if rc != 0 {
        entry.discard(0);
        count_drop(DropKind::ChannelDataRead);
        return 1;
    }
    entry.submit(submit_flags());
    0
}

/// `rtDevBinary_t` (RT `pkg_inc/runtime/rt_external_kernel.h`): u32 magic, u32 version, the
/// binary's address and its length.
const DEV_BINARY_DATA: u16 = 8;
const DEV_BINARY_LENGTH: u16 = 16;

/// At the ENTER of a registration: copies the device binary `dev_binary` describes.
#[inline(always)]
pub(crate) fn capture_binary(
    dev_binary: u64,
    correlation_id: u64,
    tgid: u32,
    tid: u32,
    ts_ns: u64,
) {
    let (Some(data), Some(length)) = (
        read::<u64>(dev_binary, DEV_BINARY_DATA),
        read::<u64>(dev_binary, DEV_BINARY_LENGTH),
    ) else {
        count_drop(DropKind::BinaryRead);
        return;
    };
    let most = u64::from(MAX_BINARY_CHUNKS) * CHANNEL_CHUNK as u64;
    let copy = PieceCopy {
        src: data,
        total: if length > most { most } else { length } as u32,
        device_id: 0,
        length,
        correlation_id,
        tgid,
        tid,
        ts_ns,
    };
    copy_pieces(&copy, MAX_BINARY_CHUNKS, binary_piece);
}

/// `bpf_loop` callback: sends piece `index` of the binary in [`PIECE_COPY`]; 1 stops.
extern "C" fn binary_piece(index: u32, _ctx: *mut c_void) -> i64 {
    let Some(c) = PIECE_COPY.get_ptr(0) else {
        return 1;
    };
    // SAFETY: a per-CPU map value, written by this program run before the loop.
    let c = unsafe { &*c };
    let offset = index.wrapping_mul(CHANNEL_CHUNK as u32);
    if index >= MAX_BINARY_CHUNKS || offset >= c.total {
        return 1;
    }
    let Some(mut entry) = EVENTS.reserve::<BinaryPiece>(0) else {
        count_drop(DropKind::BinaryPiece);
        return 1;
    };
    let rec = entry.as_mut_ptr();
    let len = piece_len(c.total - offset);
    // SAFETY: as in `channel_piece`.
    let rc = unsafe {
        (*rec).header = RecordHeader::new(RecordKind::BinaryPiece, 0, 0, c.tgid, c.tid, c.ts_ns);
        (*rec).correlation_id = c.correlation_id;
        (*rec).len = len;
        (*rec).offset = offset;
        (*rec).total = c.length;
        copy(&mut (*rec).data, c.src, offset, len)
    };
    if rc != 0 {
        entry.discard(0);
        count_drop(DropKind::BinaryRead);
        return 1;
    }
    entry.submit(submit_flags());
    0
}

/// Runs `piece` for each of up to `chunks` pieces of `copy`, which it finds in
/// [`PIECE_COPY`].
#[inline(always)]
fn copy_pieces(copy: &PieceCopy, chunks: u32, piece: extern "C" fn(u32, *mut c_void) -> i64) {
    let Some(slot) = PIECE_COPY.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: a per-CPU map value, ours for this program run.
    unsafe { *slot = *copy };
    for_each(chunks, piece);
}

/// The length of a piece when `left` bytes remain: at most one chunk.
#[inline(always)]
fn piece_len(left: u32) -> u32 {
    if left > CHANNEL_CHUNK as u32 {
        CHANNEL_CHUNK as u32
    } else {
        left
    }
}

/// Copies `len` bytes at `base + offset` in user memory into `dst`; 0 on success.
///
/// # Safety
/// `len` must not exceed `dst`'s length.
#[inline(always)]
unsafe fn copy(dst: &mut [u8; CHANNEL_CHUNK], base: u64, offset: u32, len: u32) -> i64 {
    // SAFETY: the caller bounds `len` by `dst`; the helper faults safely on bad user memory.
    unsafe {
        bpf_probe_read_user(
            dst.as_mut_ptr().cast(),
            len,
            base.wrapping_add(u64::from(offset)) as *const _,
        )
    }
}
