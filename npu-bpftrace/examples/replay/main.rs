//! Agent throughput without the kernel (`cargo xtask bench`, part 2): replays a synthetic
//! ring-buffer stream through decode -> correlate -> Parquet on one thread and prints the
//! measurement as JSON. Build it in release mode:
//!
//! ```sh
//! cargo run --release -p npu-bpftrace --example replay -- --calls 2000000 --out /tmp/replay
//! ```
use anyhow::{Context, Result, bail};
mod workload;

use workload::{ReplayOptions, replay};

fn main() -> Result<()> {
    let mut opts = ReplayOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--calls" => opts.calls = value()?.parse()?,
            "--processes" => opts.processes = value()?.parse()?,
            "--threads" => opts.threads_per_process = value()?.parse()?,
            "--rate" => opts.calls_per_trace_second = value()?.parse()?,
            "--out" => opts.out_dir = value()?.into(),
            "--zstd-level" => opts.sink.zstd_level = value()?.parse()?,
            _ => bail!(
                "usage: replay [--calls N] [--processes N] [--threads N] [--rate CALLS_PER_S] [--zstd-level N] --out DIR"
            ),
        }
    }
    if opts.out_dir.join("api").exists() {
        bail!(
            "{} already holds a replay; remove it first",
            opts.out_dir.display()
        );
    }
    let report = replay(&opts)?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
