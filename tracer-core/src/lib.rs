//! The deterministic middle of npu-bpftrace: ring-buffer bytes in, rows out.
//!
//! [`decode`] -> [`correlate`] (with the operator calls of `operators`) -> [`activity`]
//! (with the [`clock`] model) turn the BPF
//! programs' records into the rows of `tracer-schema`. No tokio, no aya, no filesystem:
//! what the pipeline needs from the host (symbol lookup) comes in through
//! [`correlate::Symbolize`], and device clock readings arrive as [`clock::ClockReading`]
//! values, so a recorded byte stream replays to the same rows.
pub mod activity;
pub mod clock;
pub mod correlate;
pub mod decode;
mod operators;
pub mod soclog;
