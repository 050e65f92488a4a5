//! Passive profiling-channel reading: when another profiler (msprof, msPTI) owns a device's
//! channel 50, the driver refuses it to the agent, but that profiler reads the channel with
//! `prof_channel_read(device, channel, buf, size)` in its own process. At the call's return
//! the bytes it read are copied to the agent in [`ChannelData`] pieces; the agent decodes the
//! records exactly as if it had read them itself.
use aya_ebpf::{helpers::generated::bpf_probe_read_user, programs::ProbeContext};
use tracer_common::{
    CHANNEL_CHUNK, ChannelData, DropKind, MAX_CHANNEL_CHUNKS, RecordHeader, RecordKind,
};

use crate::maps::{EVENTS, LAYOUT, config, count_drop, submit_flags};

/// Whether a `prof_channel_read` entered by process `tgid` is one to copy: it reads the
/// channel that carries task records, of a device the agent reads passively, and the reader
/// is not the agent itself.
#[inline(always)]
pub(crate) fn wants(ctx: &ProbeContext, tgid: u32) -> bool {
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

/// At the return of a copied read: `ret` bytes (when positive) were read into `buf`.
#[inline(always)]
pub(crate) fn on_read(buf: u64, device_id: u32, ret: u64, tgid: u32, tid: u32, ts_ns: u64) {
    let total = ret as i32;
    if total <= 0 {
        return;
    }
    let total = total as u32;
    for i in 0..MAX_CHANNEL_CHUNKS {
        let offset = i * CHANNEL_CHUNK as u32;
        if offset >= total {
            return;
        }
        if !copy_piece(buf, offset, total - offset, device_id, tgid, tid, ts_ns) {
            return;
        }
    }
}

/// Copies up to one chunk from `buf + offset`; false when nothing more can be copied.
#[inline(always)]
fn copy_piece(
    buf: u64,
    offset: u32,
    left: u32,
    device_id: u32,
    tgid: u32,
    tid: u32,
    ts_ns: u64,
) -> bool {
    let len = if left > CHANNEL_CHUNK as u32 {
        CHANNEL_CHUNK as u32
    } else {
        left
    };
    let Some(mut entry) = EVENTS.reserve::<ChannelData>(0) else {
        count_drop(DropKind::ChannelData);
        return false;
    };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring-buffer memory of the right size; the helper
    // copies `len` <= CHANNEL_CHUNK bytes into `data` and faults safely on bad user memory.
    let rc = unsafe {
        (*rec).header = RecordHeader::new(RecordKind::ChannelData, 0, 0, tgid, tid, ts_ns);
        (*rec).device_id = device_id;
        (*rec).len = len;
        (*rec).offset = offset;
        (*rec)._pad = 0;
        bpf_probe_read_user(
            (*rec).data.as_mut_ptr().cast(),
            len,
            buf.wrapping_add(u64::from(offset)) as *const _,
        )
    };
    if rc != 0 {
        entry.discard(0);
        count_drop(DropKind::ChannelDataRead);
        return false;
    }
    entry.submit(submit_flags());
    true
}
