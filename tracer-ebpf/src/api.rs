//! The generic ENTER/EXIT pair. One program of each kind serves every catalog function;
//! `bpf_get_attach_cookie` tells which one fired, `PROBE_SPECS` says what to capture.
use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_attach_cookie, bpf_ktime_get_ns, bpf_probe_read_user,
        generated::{self, bpf_probe_read_user_str},
    },
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use tracer_common::{
    ApiEnter, ApiExit, DropKind, EXIT_OUT_VALID, FAR_ARG_SLOT, FRAME_CLOSES_WINDOW,
    FRAME_COPY_CHANNEL, FRAME_OPENS_WINDOW, FRAME_UNRECORDED, Frame, MAX_ARGS, MAX_DEPTH, NO_ARG,
    OutScan, ProbeRole, ProbeSpec, RAW_TEXT_LEN, RecordHeader, RecordKind, SCAN_ARGS, SPEC_ALWAYS,
    SPEC_OUT_SCAN, SPEC_QUIET, SPEC_RANGE_END, SPEC_RANGE_START, TEXT_FUNC_HANDLE, TEXT_LEN,
    TEXT_RAW, ThreadState,
};

use crate::maps::{
    EVENTS, LAYOUT, PROBE_SPECS, SCAN_SCRATCH, SCANNED_ARGS, THREADS, count_drop, current_ids,
    is_traced, next_correlation_id, read, submit_flags, window_open,
};
use crate::{capture, pieces, tasks};

#[uprobe]
pub(crate) fn api_enter(ctx: ProbeContext) -> u32 {
    on_enter(&ctx);
    0
}

#[uretprobe]
pub(crate) fn api_exit(ctx: RetProbeContext) -> u32 {
    on_exit(&ctx);
    0
}

#[inline(always)]
fn probe_of(ctx: &impl EbpfContext) -> (u16, ProbeSpec) {
    // SAFETY: the context pointer comes from the kernel for this program invocation.
    let probe = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) } as u16;
    let spec = PROBE_SPECS
        .get(probe as u32)
        .copied()
        .unwrap_or(ProbeSpec::NONE);
    (probe, spec)
}

/// The thread's call stack, created empty on its first traced call.
#[inline(always)]
fn thread_state(tid: u32) -> Option<*mut ThreadState> {
    if let Some(state) = THREADS.get_ptr_mut(tid) {
        return Some(state);
    }
    if THREADS.insert(tid, ThreadState::default(), 0).is_err() {
        count_drop(DropKind::ThreadMapFull);
        return None;
    }
    THREADS.get_ptr_mut(tid)
}

#[inline(always)]
fn on_enter(ctx: &ProbeContext) {
    // SAFETY: a helper without arguments that only reads the clock.
    let ts_ns = unsafe { bpf_ktime_get_ns() };
    let (tgid, tid) = current_ids();
    let (probe, spec) = probe_of(ctx);
    let traced = is_traced(tgid);
    // Another profiler's channel reads are copied whichever process makes them.
    let passive = spec.role == ProbeRole::ChannelRead as u8 && pieces::wants_channel(ctx, tgid);
    if !traced && !passive {
        return;
    }
    let mut args = read_args(ctx);
    if spec.far_arg != NO_ARG {
        args[FAR_ARG_SLOT] = read_far_arg(ctx, spec.far_arg);
    }
    if spec.role == ProbeRole::SqSend as u8 {
        tasks::on_sq_send(&args, tgid, tid, ts_ns);
    } else if spec.role == ProbeRole::StreamFill as u8 {
        tasks::on_stream_fill(&args, tgid, tid, ts_ns);
    }
    let quiet = spec.flags & SPEC_QUIET != 0 || !traced;
    if quiet && spec.role != ProbeRole::CqRecv as u8 && !passive {
        return;
    }
    let Some(state) = thread_state(tid) else {
        return;
    };
    // SAFETY: map value pointer valid for this program run; the map is per-thread.
    let state = unsafe { &mut *state };
    let depth = state.depth as usize;
    if depth >= MAX_DEPTH {
        count_drop(DropKind::StackOverflow);
        return;
    }
    let (parent, parent_flags) = state
        .frames
        .get(depth)
        .map_or((0, 0), |f| (f.correlation_id, f.flags));
    let window = window_flags(&spec, &args, tgid, tid, ts_ns);
    // Recorded: a call whose outermost call began inside a capture window, whole (nested
    // calls and device tasks too, past the window's end), and the calls that name what
    // later calls do.
    let recorded = spec.flags & SPEC_ALWAYS != 0
        || if depth == 0 {
            window & FRAME_OPENS_WINDOW != 0 || window_open(tgid)
        } else {
            parent_flags & FRAME_UNRECORDED == 0
        };
    let correlation_id = next_correlation_id();
    let Some(frame) = state.frames.get_mut(depth + 1) else {
        return;
    };
    *frame = Frame {
        correlation_id,
        // A CQ receive keeps its `halReportRecvInfo` pointer for EXIT, a channel read
        // its buffer.
        out_ptr: if spec.role == ProbeRole::CqRecv as u8 {
            args[1]
        } else if passive {
            args[2]
        } else {
            arg(&args, spec.out_arg)
        },
        probe,
        flags: if passive { FRAME_COPY_CHANNEL } else { 0 }
            | if recorded { 0 } else { FRAME_UNRECORDED }
            | window,
        aux: args[0] as u32,
    };
    state.depth = depth as u32 + 1;
    if quiet || !recorded {
        return;
    }

    let Some(mut entry) = EVENTS.reserve::<ApiEnter>(0) else {
        count_drop(DropKind::ApiEnter);
        return;
    };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring-buffer memory of the right size.
    unsafe {
        (*rec).header =
            RecordHeader::new(RecordKind::ApiEnter, probe, depth as u8, tgid, tid, ts_ns);
        (*rec).correlation_id = correlation_id;
        (*rec).parent_correlation_id = parent;
        (*rec).args = args;
        let text = arg(&args, spec.text_arg);
        (*rec).text_len = if spec.text_flags & TEXT_FUNC_HANDLE != 0 {
            read_handle_name(text, &mut (*rec).text)
        } else if spec.text_flags & TEXT_RAW != 0 {
            read_raw(text, &mut (*rec).text)
        } else {
            read_text(text, &mut (*rec).text)
        };
        (*rec)._pad = 0;
    }
    entry.submit(submit_flags());
    if spec.flags & SPEC_OUT_SCAN != 0 {
        keep_scan_args(ctx, correlation_id, &args);
    }
    if spec.role == ProbeRole::CaptureBinary as u8 {
        pieces::capture_binary(args[0], correlation_id, tgid, tid, ts_ns);
    }
}

/// What an mstx range call does to its process's capture window: [`FRAME_OPENS_WINDOW`]
/// when it is a range start that opens it, [`FRAME_CLOSES_WINDOW`] when it ends the range
/// that did, else 0.
#[inline(always)]
fn window_flags(spec: &ProbeSpec, args: &[u64; MAX_ARGS], tgid: u32, tid: u32, ts_ns: u64) -> u16 {
    if spec.flags & (SPEC_RANGE_START | SPEC_RANGE_END) == 0 {
        return 0;
    }
    if spec.flags & SPEC_RANGE_START != 0 {
        if capture::matches(arg(args, spec.text_arg)) {
            capture::open(u64::from(tgid) << 32 | u64::from(tid), ts_ns)
        } else {
            0
        }
    } else {
        capture::range_end(tgid, arg(args, spec.range_id_arg))
    }
}

/// The integer arguments. Constant indices only: the verifier rejects context reads at
/// computed offsets.
#[inline(always)]
fn read_args(ctx: &ProbeContext) -> [u64; MAX_ARGS] {
    let [a6, a7] = stack_args(ctx);
    [
        ctx.arg(0).unwrap_or(0),
        ctx.arg(1).unwrap_or(0),
        ctx.arg(2).unwrap_or(0),
        ctx.arg(3).unwrap_or(0),
        ctx.arg(4).unwrap_or(0),
        ctx.arg(5).unwrap_or(0),
        a6,
        a7,
    ]
}

/// Argument `index` (at least [`MAX_ARGS`], below [`SCAN_ARGS`]) from the stack, where the
/// ABI passes it; 0 (and a counted failure) when it cannot be read.
#[inline(always)]
fn read_far_arg(ctx: &ProbeContext, index: u8) -> u64 {
    let Some(words) = (index as usize)
        .checked_sub(MAX_ARGS)
        .filter(|&w| w < SCAN_ARGS - MAX_ARGS)
    else {
        return 0;
    };
    let at = stack_after_args(ctx) + 8 * words as u64;
    // SAFETY: bpf_probe_read_user faults safely on bad user pointers.
    unsafe { bpf_probe_read_user(at as *const u64) }.unwrap_or_else(|_| {
        count_drop(DropKind::StackArgsRead);
        0
    })
}

/// Arguments 7 and 8. On x86-64 they are on the stack: at function entry `rsp` points at
/// the return address, so they sit at `rsp + 8` and `rsp + 16`.
#[cfg(bpf_target_arch = "x86_64")]
#[inline(always)]
fn stack_args(ctx: &ProbeContext) -> [u64; 2] {
    // SAFETY: the context pointer comes from the kernel for this program invocation.
    let sp = unsafe { (*ctx.regs).rsp };
    // SAFETY: bpf_probe_read_user faults safely on bad user pointers.
    unsafe { bpf_probe_read_user((sp + 8) as *const [u64; 2]) }.unwrap_or_else(|_| {
        count_drop(DropKind::StackArgsRead);
        [0; 2]
    })
}

/// Arguments 7 and 8 are in registers on the other 64-bit ABIs aya supports.
#[cfg(not(bpf_target_arch = "x86_64"))]
#[inline(always)]
fn stack_args(ctx: &ProbeContext) -> [u64; 2] {
    [ctx.arg(6).unwrap_or(0), ctx.arg(7).unwrap_or(0)]
}

/// Keeps the first [`SCAN_ARGS`] integer argument slots of call `correlation_id` for its
/// return: `args`, then the stack slots where further arguments are passed (past a
/// function's last argument they hold its caller's data, which the scan reads harmlessly),
/// and what each points at now, so the return can tell which the call wrote. Built in a
/// per-CPU scratch slot: the BPF stack has no room for it. A function of its own
/// (a BPF subprogram): inlined, it leaves the enter program too little room.
#[inline(never)]
fn keep_scan_args(ctx: &ProbeContext, correlation_id: u64, args: &[u64; MAX_ARGS]) {
    let Some(call) = SCAN_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: a per-CPU map value, ours for this program run.
    let call = unsafe { &mut *call };
    call.args[..MAX_ARGS].copy_from_slice(args);
    const TAIL_BYTES: u32 = ((SCAN_ARGS - MAX_ARGS) * 8) as u32;
    // SAFETY: the destination is the last SCAN_ARGS - MAX_ARGS words of `args`; the helper
    // faults safely on bad user pointers (and zeroes the destination then).
    unsafe {
        generated::bpf_probe_read_user(
            call.args.as_mut_ptr().add(MAX_ARGS).cast(),
            TAIL_BYTES,
            stack_after_args(ctx) as *const core::ffi::c_void,
        );
    }
    call.before_valid = 0;
    call._pad = 0;
    let sp = stack_pointer(ctx);
    // Constant indices: the verifier follows an unrolled loop.
    for i in 0..SCAN_ARGS {
        let ptr = call.args[i];
        call.before[i] = 0;
        if ptr == 0 {
            continue;
        }
        // Below the stack pointer lie the frames the call itself is about to use: what it
        // writes there is its scratch (among it addresses of objects it frees), never an
        // out-parameter, which points into its caller's frame or the heap.
        if ptr < sp && sp - ptr <= CALLEE_STACK_BYTES {
            call.args[i] = 0;
            continue;
        }
        // SAFETY: bpf_probe_read_user faults safely on bad user pointers.
        if let Ok(v) = unsafe { bpf_probe_read_user(ptr as *const u64) } {
            call.before[i] = v;
            call.before_valid |= 1 << i;
        }
    }
    if SCANNED_ARGS.insert(correlation_id, call, 0).is_err() {
        count_drop(DropKind::OutRead);
    }
}

/// How far below its entry stack pointer a call's own frames are taken to reach, for
/// [`keep_scan_args`] (a thread's stack is a few MiB; the frames of one call far less).
const CALLEE_STACK_BYTES: u64 = 1 << 20;

/// The stack pointer at function entry.
#[cfg(bpf_target_arch = "x86_64")]
#[inline(always)]
fn stack_pointer(ctx: &ProbeContext) -> u64 {
    // SAFETY: the context pointer comes from the kernel for this program invocation.
    unsafe { (*ctx.regs).rsp }
}

/// The stack pointer at function entry.
#[cfg(not(bpf_target_arch = "x86_64"))]
#[inline(always)]
fn stack_pointer(ctx: &ProbeContext) -> u64 {
    // SAFETY: the context pointer comes from the kernel for this program invocation.
    unsafe { (*ctx.regs).sp }
}

/// Where integer argument [`MAX_ARGS`] + 1 is passed: on x86-64 above the return address
/// and arguments 7 and 8 (`rsp + 24`); on the other 64-bit ABIs eight arguments travel in
/// registers and the ninth is at `sp`.
#[inline(always)]
fn stack_after_args(ctx: &ProbeContext) -> u64 {
    if cfg!(bpf_target_arch = "x86_64") {
        stack_pointer(ctx) + 24
    } else {
        stack_pointer(ctx)
    }
}

/// Argument `index`, or 0 when the catalog names none ([`NO_ARG`]).
#[inline(always)]
fn arg(args: &[u64; MAX_ARGS], index: u8) -> u64 {
    args.get(index as usize).copied().unwrap_or(0)
}

/// The kernel name of function handle `handle`, through the handle layout (`LAYOUT`): a
/// wrapper object is recognized by its magic, and a name whose `std::string` length
/// disagrees with what was read is dropped and counted, so a handle of an unknown layout
/// gives no name rather than a wrong one.
#[inline(always)]
fn read_handle_name(handle: u64, dst: &mut [u8]) -> u32 {
    if handle == 0 {
        return 0;
    }
    let Some(l) = LAYOUT.get(0) else {
        return 0;
    };
    let Some(first) = read::<u64>(handle, l.handle_magic_offset) else {
        count_drop(DropKind::TextRead);
        return 0;
    };
    let object = if l.handle_wrapper_magic != 0 && first == l.handle_wrapper_magic {
        read::<u64>(handle, l.handle_object_offset).unwrap_or(0)
    } else {
        handle
    };
    let (Some(name), Some(len)) = (
        read::<u64>(object, l.handle_name_ptr),
        read::<u64>(object, l.handle_name_len),
    ) else {
        count_drop(DropKind::TextRead);
        return 0;
    };
    let read_len = read_text(name, dst);
    let expected = len.min(dst.len() as u64 - 1);
    if u64::from(read_len) != expected {
        count_drop(DropKind::HandleLayout);
        return 0;
    }
    read_len
}

/// Copies the [`RAW_TEXT_LEN`] bytes at `ptr` into `dst`; returns how many were copied.
#[inline(always)]
fn read_raw(ptr: u64, dst: &mut [u8; TEXT_LEN]) -> u32 {
    match read::<[u8; RAW_TEXT_LEN]>(ptr, 0) {
        Some(bytes) => {
            dst[..RAW_TEXT_LEN].copy_from_slice(&bytes);
            RAW_TEXT_LEN as u32
        }
        None => {
            count_drop(DropKind::TextRead);
            0
        }
    }
}

/// Copies the C string at `ptr` into `dst`; returns its length without the NUL.
#[inline(always)]
fn read_text(ptr: u64, dst: &mut [u8]) -> u32 {
    let ptr = ptr as *const u8;
    if ptr.is_null() {
        return 0;
    }
    // SAFETY: the helper bounds the read by `dst` and faults safely on bad user pointers.
    let len =
        unsafe { bpf_probe_read_user_str(dst.as_mut_ptr().cast(), dst.len() as u32, ptr.cast()) };
    if len < 0 {
        count_drop(DropKind::TextRead);
        return 0;
    }
    // The helper counts the NUL it copied.
    (len.clamp(1, dst.len() as i64) - 1) as u32
}

#[inline(always)]
fn on_exit(ctx: &RetProbeContext) {
    // SAFETY: a helper without arguments that only reads the clock.
    let ts_ns = unsafe { bpf_ktime_get_ns() };
    let (tgid, tid) = current_ids();
    let Some(state) = THREADS.get_ptr_mut(tid) else {
        return;
    };
    // SAFETY: map value pointer valid for this program run; the map is per-thread.
    let state = unsafe { &mut *state };
    let (probe, spec) = probe_of(ctx);
    let Some(frame) = pop_frame(state, probe) else {
        return;
    };
    let ret = ctx.ret::<u64>();
    if spec.role == ProbeRole::CqRecv as u8 && ret as u32 == 0 {
        tasks::on_cq_recv(frame.out_ptr, frame.aux, tgid, tid, ts_ns);
    }
    if frame.flags & FRAME_COPY_CHANNEL != 0 {
        pieces::on_channel_read(frame.out_ptr, frame.aux, ret, tgid, tid, ts_ns);
    }
    if frame.flags & FRAME_OPENS_WINDOW != 0 {
        capture::opened(tgid, ret);
    }
    let recorded = frame.flags & FRAME_UNRECORDED == 0;
    if spec.flags & SPEC_QUIET != 0 || !recorded || !is_traced(tgid) {
        // A window closes even if the agent stopped tracing the process meanwhile.
        if frame.flags & FRAME_CLOSES_WINDOW != 0 {
            capture::closed(tgid, tid, ts_ns);
        }
        return;
    }
    let (out_value, flags) = read_out(frame.out_ptr, spec.out_size);
    if spec.flags & SPEC_OUT_SCAN != 0 {
        let header = RecordHeader::new(
            RecordKind::OutScan,
            probe,
            state.depth as u8,
            tgid,
            tid,
            ts_ns,
        );
        scan_out(&header, frame.correlation_id);
    }

    let Some(mut entry) = EVENTS.reserve::<ApiExit>(0) else {
        count_drop(DropKind::ApiExit);
        if frame.flags & FRAME_CLOSES_WINDOW != 0 {
            capture::closed(tgid, tid, ts_ns);
        }
        return;
    };
    entry.write(ApiExit {
        header: RecordHeader::new(
            RecordKind::ApiExit,
            probe,
            state.depth as u8,
            tgid,
            tid,
            ts_ns,
        ),
        correlation_id: frame.correlation_id,
        ret,
        out_value,
        flags,
        _pad: 0,
    });
    entry.submit(submit_flags());
    // After the range end's own EXIT: it is inside the window it closes.
    if frame.flags & FRAME_CLOSES_WINDOW != 0 {
        capture::closed(tgid, tid, ts_ns);
    }
}

/// Pops the frame of `probe`. Frames above it (calls whose return was never seen, e.g.
/// left by longjmp) are discarded; a return with no matching frame is ignored.
#[inline(always)]
fn pop_frame(state: &mut ThreadState, probe: u16) -> Option<Frame> {
    let top = state.depth as usize;
    // Fixed indices, innermost first: the verifier follows constant offsets.
    for depth in (1..=MAX_DEPTH).rev() {
        if depth > top {
            continue;
        }
        let frame = *state.frames.get(depth)?;
        if frame.probe == probe {
            state.depth = depth as u32 - 1;
            return Some(frame);
        }
    }
    None
}

/// Sends what the arguments the call entered with point at now that it returns
/// ([`SPEC_OUT_SCAN`]). Arguments that are not readable pointers (sizes, NULL) give nothing,
/// which is expected, so those reads are not counted as failures. Written in place: the
/// record does not fit the BPF stack. A BPF subprogram, like [`keep_scan_args`].
#[inline(never)]
fn scan_out(header: &RecordHeader, correlation_id: u64) {
    let Some(call) = SCANNED_ARGS.get_ptr(correlation_id) else {
        return;
    };
    let Some(mut entry) = EVENTS.reserve::<OutScan>(0) else {
        count_drop(DropKind::ApiExit);
        let _ = SCANNED_ARGS.remove(correlation_id);
        return;
    };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring-buffer memory of the right size; `call` at the
    // map value of this call, which only this thread's return removes.
    unsafe {
        (*rec).header = *header;
        (*rec).correlation_id = correlation_id;
        (*rec).valid = 0;
        (*rec).written = 0;
        // Constant indices: the verifier follows an unrolled loop.
        for i in 0..SCAN_ARGS {
            let ptr = (*call).args[i];
            (*rec).values[i] = 0;
            if ptr == 0 {
                continue;
            }
            if let Ok(v) = bpf_probe_read_user(ptr as *const u64) {
                (*rec).values[i] = v;
                (*rec).valid |= 1 << i;
                if (*call).before_valid & (1 << i) == 0 || (*call).before[i] != v {
                    (*rec).written |= 1 << i;
                }
            }
        }
    }
    entry.submit(submit_flags());
    let _ = SCANNED_ARGS.remove(correlation_id);
}

/// Reads `size` bytes (1..=8) of the out-parameter the call wrote.
#[inline(always)]
fn read_out(ptr: u64, size: u8) -> (u64, u32) {
    if ptr == 0 || size == 0 {
        return (0, 0);
    }
    // SAFETY: bpf_probe_read_user faults safely on bad user pointers.
    match unsafe { bpf_probe_read_user(ptr as *const u64) } {
        Ok(v) if size >= 8 => (v, EXIT_OUT_VALID),
        Ok(v) => (v & ((1u64 << (size as u32 * 8)) - 1), EXIT_OUT_VALID),
        Err(_) => {
            count_drop(DropKind::OutRead);
            (0, 0)
        }
    }
}
