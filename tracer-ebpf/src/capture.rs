//! Capture windows opened and closed by mstx ranges (`--capture-range mstx:MESSAGE`).
//!
//! Each process has its own window (`CAPTURE`): the start of a range whose message matches
//! (`CAPTURE_MATCH`) opens it at its ENTER, while the process has fewer than
//! `Config::capture_ranges` windows behind it; the end of that range (the range id its start
//! returned) closes it at its EXIT. The range's own calls are inside. Each edge is reported
//! ([`WindowEdge`]) so the agent knows the windows exactly. A pause (`Config::paused`) holds
//! ranges too: one that starts while paused opens nothing.
use aya_ebpf::helpers::generated::bpf_probe_read_user_str;
use tracer_common::{
    FRAME_CLOSES_WINDOW, FRAME_OPENS_WINDOW, RecordHeader, RecordKind, TEXT_LEN, WindowEdge,
};

use crate::maps::{
    CAPTURE, CAPTURE_MATCH, CAPTURE_TEXT, CAPTURE_ZERO, CONFIG, EVENTS, submit_flags,
};

/// At the ENTER of a range start whose message matched ([`matches`]): opens its process's
/// window unless recording is paused, it is open already or the process has had its
/// windows; returns [`FRAME_OPENS_WINDOW`] when it did, else 0. `pid_tgid` is
/// `tgid << 32 | tid`. A subprogram with almost no stack of its own, like [`matches`]: the
/// enter program has almost none to spare.
#[inline(never)]
pub(crate) fn open(pid_tgid: u64, ts_ns: u64) -> u16 {
    let tgid = (pid_tgid >> 32) as u32;
    if CAPTURE.get_ptr(tgid).is_none() {
        // The new entry's zeroes come from a map value: one on the stack costs the stack
        // the enter program has not got.
        let Some(zero) = CAPTURE_ZERO.get_ptr(0) else {
            return 0;
        };
        // By reference: a value would be copied onto the stack first.
        #[allow(clippy::needless_borrows_for_generic_args)]
        // SAFETY: a map value, valid for this program run, never written.
        let _ = CAPTURE.insert(tgid, unsafe { &*zero }, 0);
    }
    let (Some(cfg), Some(state)) = (CONFIG.get_ptr(0), CAPTURE.get_ptr_mut(tgid)) else {
        return 0;
    };
    // SAFETY: map value pointers valid for this program run. Two threads of one process
    // starting matching ranges at the same instant may both see it closed; the window then
    // belongs to the one whose range id is stored last.
    unsafe {
        let limit = (*cfg).capture_ranges;
        if (*cfg).capture_mstx == 0
            || (*cfg).paused != 0
            || (*state).open != 0
            || (limit != 0 && (*state).ranges >= limit)
        {
            return 0;
        }
        (*state).open = 1;
        (*state).range_id = 0;
        edge(pid_tgid, ts_ns, 0, 1, (*state).ranges);
    }
    FRAME_OPENS_WINDOW
}

/// At the EXIT of the range start that opened the window: the id its end will carry.
#[inline(always)]
pub(crate) fn opened(tgid: u32, range_id: u64) {
    if let Some(state) = CAPTURE.get_ptr_mut(tgid) {
        // SAFETY: map value pointer valid for this program run.
        unsafe { (*state).range_id = range_id };
    }
}

/// At the ENTER of a range end of range `range_id`: [`FRAME_CLOSES_WINDOW`] when it ends the
/// range that opened its process's window, else 0.
#[inline(always)]
pub(crate) fn range_end(tgid: u32, range_id: u64) -> u16 {
    let ends = CAPTURE.get_ptr(tgid).is_some_and(|state| {
        // SAFETY: map value pointer valid for this program run.
        unsafe { (*state).open != 0 && (*state).range_id != 0 && (*state).range_id == range_id }
    });
    if ends { FRAME_CLOSES_WINDOW } else { 0 }
}

/// At the EXIT of the range end that closes the window.
#[inline(always)]
pub(crate) fn closed(tgid: u32, tid: u32, ts_ns: u64) {
    let Some(state) = CAPTURE.get_ptr_mut(tgid) else {
        return;
    };
    // SAFETY: map value pointer valid for this program run.
    let state = unsafe { &mut *state };
    if state.open == 0 {
        return;
    }
    state.open = 0;
    state.ranges += 1;
    edge(
        u64::from(tgid) << 32 | u64::from(tid),
        ts_ns,
        state.range_id,
        0,
        state.ranges,
    );
}

/// Reports a window edge, written in place. A lost edge is not counted as a drop: the agent
/// then knows the window only from the range's marker row; the records inside it are
/// unaffected.
#[inline(always)]
fn edge(pid_tgid: u64, ts_ns: u64, range_id: u64, open: u32, ranges: u32) {
    let (tgid, tid) = ((pid_tgid >> 32) as u32, pid_tgid as u32);
    let Some(mut entry) = EVENTS.reserve::<WindowEdge>(0) else {
        return;
    };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring-buffer memory of the right size; every field is
    // written before it is submitted.
    unsafe {
        (*rec).header = RecordHeader::new(RecordKind::Window, 0, 0, tgid, tid, ts_ns);
        (*rec).range_id = range_id;
        (*rec).open = open;
        (*rec).ranges = ranges;
    }
    entry.submit(submit_flags());
}

/// Whether the C string at `message` matches `CAPTURE_MATCH` (equal to it, or with a prefix
/// match starting with it), when capture ranges are on.
#[inline(never)]
pub(crate) fn matches(message: u64) -> bool {
    let (Some(want), Some(text)) = (CAPTURE_MATCH.get_ptr(0), CAPTURE_TEXT.get_ptr_mut(0)) else {
        return false;
    };
    // SAFETY: map value pointer valid for this program run.
    let ranges = CONFIG
        .get_ptr(0)
        .is_some_and(|c| unsafe { (*c).capture_mstx != 0 });
    if !ranges || message == 0 {
        return false;
    }
    // SAFETY: per-CPU and array map values, valid for this program run; the helper bounds
    // the copy by the destination's size and faults safely on bad user pointers.
    unsafe {
        let len = bpf_probe_read_user_str(
            (*text).as_mut_ptr().cast(),
            TEXT_LEN as u32,
            message as *const _,
        );
        if len <= 0 {
            return false;
        }
        // The helper counts the NUL it copied.
        let len = (len - 1) as u32;
        let wanted = (*want).len;
        if len < wanted || ((*want).prefix == 0 && len != wanted) {
            return false;
        }
        // Constant bounds: the verifier follows an unrolled loop.
        for i in 0..TEXT_LEN {
            if i as u32 >= wanted {
                break;
            }
            if (*text)[i] != (*want).text[i] {
                return false;
            }
        }
    }
    true
}
