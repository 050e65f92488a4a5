//! npu-bpftrace agent: probes -> ring buffer -> decode -> correlate -> sinks.
//!
//! The pure pipeline lives in `tracer-core`, the probe catalog in `tracer-catalog` and the
//! output contract in `tracer-schema`; this crate is everything that touches the host:
//! - [`bpf`]: loading the embedded BPF object and attaching it; [`attach`] decides what to
//!   attach where, [`discovery`] finds the library files ([`hold`] stops a process at its
//!   first open of one not attached yet, until it is), [`symbols`] reads ELF symbol
//!   tables and [`symbolize`] names addresses in live processes; [`listing`] is `probes`.
//! - [`agent`]: a tracing session and its tokio pipeline; [`driver`] samples device clocks,
//!   [`channel`] reads device task times from the driver's profiling channel;
//!   [`session`] fills the dataset's `session.json`.
//! - [`sink`]: where rows go (Parquet, `--print`); [`report`] reads a dataset back and
//!   summarizes it, [`export`] turns it into a timeline for trace viewers.
pub mod agent;
pub mod attach;
pub mod bpf;
pub mod caps;
pub mod capture;
pub mod channel;
pub mod discovery;
pub mod driver;
pub mod export;
pub mod hold;
pub mod listing;
pub mod outdir;
pub mod outname;
pub mod progress;
pub mod report;
pub mod say;
pub mod session;
pub mod signals;
pub mod sink;
pub mod symbolize;
pub mod symbols;

#[cfg(test)]
mod test_dataset;
