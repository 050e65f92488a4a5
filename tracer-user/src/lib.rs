//! npu-bpftrace agent: probes -> ring buffer -> decode -> correlate -> sinks.
//!
//! - [`catalog`]: every traced CANN function, as data.
//! - [`bpf`]: loading the embedded BPF object and attaching it; [`attach`] decides what to
//!   attach where, [`discovery`] finds the library files, [`symbols`] resolves symbols.
//! - [`agent`]: a tracing session and its tokio pipeline.
//! - [`decode`] -> [`correlate`] -> [`sink`]: records to rows to files; [`records`] are
//!   the rows, [`session`] the dataset's `session.json`.
pub mod activity;
pub mod agent;
pub mod attach;
pub mod bench;
pub mod bpf;
pub mod catalog;
pub mod clock;
pub mod correlate;
pub mod decode;
pub mod discovery;
pub mod driver;
pub mod progress;
pub mod records;
pub mod report;
pub mod session;
pub mod sink;
pub mod symbolize;
pub mod symbols;
