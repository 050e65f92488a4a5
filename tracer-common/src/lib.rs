//! Types shared by `tracer-ebpf` (kernel side) and `tracer-user` (agent).
//!
//! Every record that crosses the ring buffer starts with a [`RecordHeader`]; its `kind`
//! byte says which struct follows. Layouts are `#[repr(C)]` and checked by the tests
//! below so both sides agree byte for byte.
#![no_std]

/// Integer arguments captured at ENTER. x86-64 passes six in registers and the rest on
/// the stack (read there); arm64 passes eight in registers. HCCL calls take up to eight.
pub const MAX_ARGS: usize = 8;
/// Bytes of a C string argument (kernel name, marker message) copied at ENTER.
pub const TEXT_LEN: usize = 64;
/// Nested traced calls remembered per thread (acl -> rt -> hal is 3 deep).
pub const MAX_DEPTH: usize = 8;
/// Catalog entries the BPF side can describe; probe ids index [`ProbeSpec`] maps.
pub const MAX_PROBES: u32 = 512;
/// Threads with a traced call in flight at once.
pub const MAX_THREADS: u32 = 65_536;
/// `ProbeSpec` fields that name no argument.
pub const NO_ARG: u8 = 0xff;

/// What follows the header in a ring-buffer record.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A traced function was entered: [`ApiEnter`].
    ApiEnter = 1,
    /// A traced function returned: [`ApiExit`].
    ApiExit = 2,
    /// A thread that had traced state exited: [`RecordHeader`] alone.
    ThreadExit = 3,
}

impl RecordKind {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::ApiEnter),
            2 => Some(Self::ApiExit),
            3 => Some(Self::ThreadExit),
            _ => None,
        }
    }
}

/// Counters of what the BPF side could not deliver, indexed in the per-CPU `DROPS` map.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropKind {
    /// Ring buffer full: an ENTER record was lost.
    ApiEnter = 0,
    /// Ring buffer full: an EXIT record was lost.
    ApiExit = 1,
    /// Ring buffer full: a thread-exit record was lost.
    ThreadExit = 2,
    /// Calls nested deeper than [`MAX_DEPTH`]; the call was not traced.
    StackOverflow = 3,
    /// The per-thread state map was full; the call was not traced.
    ThreadMapFull = 4,
}

impl DropKind {
    pub const COUNT: u32 = 5;
    pub const ALL: [DropKind; Self::COUNT as usize] = [
        Self::ApiEnter,
        Self::ApiExit,
        Self::ThreadExit,
        Self::StackOverflow,
        Self::ThreadMapFull,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Self::ApiEnter => "ringbuf_full_api_enter",
            Self::ApiExit => "ringbuf_full_api_exit",
            Self::ThreadExit => "ringbuf_full_thread_exit",
            Self::StackOverflow => "call_stack_overflow",
            Self::ThreadMapFull => "thread_map_full",
        }
    }
}

/// First bytes of every ring-buffer record.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordHeader {
    /// A [`RecordKind`].
    pub kind: u8,
    /// Call depth on this thread at ENTER/EXIT (0 = outermost traced call).
    pub depth: u8,
    /// Catalog index of the probed function (the attach cookie).
    pub probe: u16,
    /// Thread group id (the process id users see).
    pub pid: u32,
    /// Kernel thread id.
    pub tid: u32,
    pub _pad: u32,
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC nanoseconds.
    pub ts_ns: u64,
}

/// ENTER of a traced call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ApiEnter {
    pub header: RecordHeader,
    /// Allocated in the kernel, unique in a session: `(cpu + 1) << 48 | per-cpu sequence`.
    pub correlation_id: u64,
    /// The call this one is nested in on the same thread, 0 when outermost.
    pub parent_correlation_id: u64,
    /// Raw integer-register arguments.
    pub args: [u64; MAX_ARGS],
    /// Bytes of `text` that are valid (the C string, without its NUL).
    pub text_len: u32,
    pub _pad: u32,
    /// The C string named by [`ProbeSpec::text_arg`].
    pub text: [u8; TEXT_LEN],
}

/// EXIT of a traced call.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiExit {
    pub header: RecordHeader,
    pub correlation_id: u64,
    /// Raw return register.
    pub ret: u64,
    /// Value read at EXIT through the out-parameter pointer of [`ProbeSpec::out_arg`].
    pub out_value: u64,
    /// [`EXIT_OUT_VALID`] when `out_value` was read.
    pub flags: u32,
    pub _pad: u32,
}

/// `ApiExit::flags`: the out-parameter was read.
pub const EXIT_OUT_VALID: u32 = 1;

/// What the generic probes capture for one catalog entry (BPF map `PROBE_SPECS`, index = probe id).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSpec {
    /// Argument holding a `const char *` to copy at ENTER, or [`NO_ARG`].
    pub text_arg: u8,
    /// Argument holding a pointer whose pointee is read at EXIT, or [`NO_ARG`].
    pub out_arg: u8,
    /// Bytes read through `out_arg` (1..=8).
    pub out_size: u8,
    /// [`TEXT_INDIRECT`]: `text_arg` points at a struct whose field at `text_offset` is
    /// the `const char *` (a layout description, e.g. a kernel name inside a handle).
    pub text_flags: u8,
    pub text_offset: u32,
}

/// `ProbeSpec::text_flags`: the string is reached through a pointer field.
pub const TEXT_INDIRECT: u8 = 1;

impl ProbeSpec {
    pub const NONE: Self = Self {
        text_arg: NO_ARG,
        out_arg: NO_ARG,
        out_size: 0,
        text_flags: 0,
        text_offset: 0,
    };
}

/// One traced call in flight on a thread.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Frame {
    pub correlation_id: u64,
    /// Out-parameter pointer saved at ENTER (arguments are gone at EXIT).
    pub out_ptr: u64,
    pub probe: u16,
    pub _pad: [u8; 6],
}

/// Per-thread call stack kept in the BPF map `THREADS`.
///
/// One-based: `frames[depth]` is the innermost call and `frames[0]` stays zero, so the
/// parent of a new call is always `frames[depth]` (the verifier rejects the negative
/// offsets that a `depth - 1` index compiles to).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadState {
    pub depth: u32,
    pub _pad: u32,
    pub frames: [Frame; MAX_DEPTH + 1],
}

/// Global switches (BPF array `CONFIG`, index 0).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Config {
    /// Non-zero: only processes in `TARGETS` are traced (attach and record modes).
    pub filter_targets: u8,
    /// Non-zero: children forked by a target become targets (record mode).
    pub follow_children: u8,
    /// Offset of `child_pid` in the `sched/sched_process_fork` tracepoint record,
    /// read by the agent from the tracepoint's `format` file.
    pub fork_child_pid_offset: u16,
    pub _pad: u32,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain-old-data, #[repr(C)], every bit pattern valid.
    unsafe impl aya::Pod for super::ProbeSpec {}
    unsafe impl aya::Pod for super::Config {}
    unsafe impl aya::Pod for super::ThreadState {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn layouts_are_stable() {
        assert_eq!(size_of::<RecordHeader>(), 24);
        assert_eq!(offset_of!(ApiEnter, correlation_id), 24);
        assert_eq!(offset_of!(ApiEnter, args), 40);
        assert_eq!(offset_of!(ApiEnter, text), 112);
        assert_eq!(size_of::<ApiEnter>(), 176);
        assert_eq!(size_of::<ApiExit>(), 56);
        assert_eq!(size_of::<ProbeSpec>(), 8);
        assert_eq!(size_of::<ThreadState>(), 8 + (MAX_DEPTH + 1) * 24);
    }

    #[test]
    fn record_kinds_round_trip() {
        for kind in [
            RecordKind::ApiEnter,
            RecordKind::ApiExit,
            RecordKind::ThreadExit,
        ] {
            assert_eq!(RecordKind::from_u8(kind as u8), Some(kind));
        }
        assert_eq!(RecordKind::from_u8(0), None);
    }
}
