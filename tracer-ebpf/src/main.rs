//! Kernel side of npu-bpftrace. Thin programs that copy facts out; the agent thinks.
//!
//! - [`api`]: the generic uprobe/uretprobe pair attached to every catalog function; the
//!   attach cookie is the catalog index.
//! - [`lifecycle`]: thread exit and fork tracepoints that keep per-thread state and the
//!   target set clean.
//! - [`tasks`]: device tasks: submissions seen in `halSqTaskSend` joined in the kernel to
//!   completions returned by `halCqReportRecv`.
//! - [`pieces`]: user memory copied in pieces: what another profiler reads from a
//!   profiling channel (passive mode), device binaries at registration.
//! - [`capture`]: capture windows opened and closed by mstx ranges.
//! - [`hold`]: a process stopped at its first open of a library file not yet attached (a
//!   container's own copy), until the agent has attached it.
//! - [`maps`]: every BPF map, and small helpers over them.
// Built for the host only so `cargo clippy --workspace` checks this code too.
#![cfg_attr(target_arch = "bpf", no_std, no_main)]

mod api;
mod capture;
mod hold;
mod lifecycle;
mod maps;
mod pieces;
mod tasks;

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

// GPL-compatible: bpf_probe_read_user and bpf_get_attach_cookie are GPL-only helpers.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";

#[cfg(not(target_arch = "bpf"))]
fn main() {
    eprintln!("tracer-ebpf holds BPF programs; npu-bpftrace embeds and loads them");
}
