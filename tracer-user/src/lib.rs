//! npu-bpftrace agent: probes -> ring buffer -> decode -> correlate -> sinks.
pub mod bpf;
pub mod decode;
pub mod symbols;
