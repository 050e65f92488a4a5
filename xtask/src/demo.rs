//! `cargo xtask demo`: the whole product in one command, on a machine without an NPU. It
//! traces a simulated 2-rank training run with `npu-bpftrace record`, then prints
//! `npu-bpftrace report` on the dataset it wrote.
use std::{
    collections::{BTreeMap, BTreeSet},
    ffi::OsString,
    path::{Path, PathBuf},
    process::Command,
    time::SystemTime,
};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{cargo, default_sim_dir, setup, sim, workspace_root};

pub(crate) fn run() -> Result<()> {
    check_root()?;
    setup::run()?;
    let tracer = build_tracer()?;
    let sim_dir = default_sim_dir();
    sim::install(&sim_dir, crate::Arch::Host)?;
    let sim_dir = sim_dir
        .canonicalize()
        .with_context(|| format!("resolving {}", sim_dir.display()))?;
    let out = workspace_root().join("target/demo").join(timestamp());
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;

    println!("\n== npu-bpftrace record: 2-rank training run on the NPU simulator\n");
    let recorded = record(&tracer, &sim_dir, &out);
    println!("\nDataset: {}\n", out.display());
    // A failed run still leaves a dataset worth a report (errors show in it).
    println!("== npu-bpftrace report {}\n", out.display());
    let status = Command::new(&tracer)
        .arg("report")
        .arg(&out)
        .status()
        .with_context(|| format!("running {} report", tracer.display()))?;
    recorded?;
    if !status.success() {
        bail!("npu-bpftrace report failed: {status}");
    }
    check_truth(&tracer, &out)?;
    println!(
        "\nQuery the tables with DuckDB, e.g.:\n  \
         duckdb -c \"SELECT name, count(*), sum(end_ns - start_ns) FROM '{}/kernel/*/*.parquet' GROUP BY name\"",
        out.display()
    );
    Ok(())
}

/// Compares the report's totals with the simulator's ground truth of the same run
/// (`OUT/truth/truth-<pid>.jsonl`, one `"type":"task"` line per device task).
fn check_truth(tracer: &Path, out: &Path) -> Result<()> {
    let json = Command::new(tracer)
        .arg("report")
        .arg(out)
        .args(["--format", "json"])
        .output()
        .context("running npu-bpftrace report --format json")?;
    let report: Value = serde_json::from_slice(&json.stdout).context("parsing the JSON report")?;
    let sum = |section: &str, key: &str| -> u64 {
        report[section]
            .as_array()
            .map_or(0, |rows| rows.iter().filter_map(|r| r[key].as_u64()).sum())
    };
    let truth = Totals::of_truth(&out.join("truth"))?;
    let checks = [
        ("kernels", sum("kernels", "count"), truth.kernels),
        ("bytes copied", sum("memcpy", "bytes"), truth.memcpy_bytes),
        (
            "collectives",
            sum("hccl", "collectives"),
            truth.collectives(),
        ),
    ];
    let agree = checks
        .iter()
        .all(|(_, traced, expected)| traced == expected);
    let line: Vec<String> = checks
        .iter()
        .map(|(what, traced, expected)| format!("{what} {traced} (truth {expected})"))
        .collect();
    let verdict = if agree { "agrees" } else { "DIFFERS" };
    println!("\nGround truth check: {}: {verdict}", line.join(", "));
    if !agree {
        bail!(
            "the report differs from the simulator's ground truth in {}",
            out.display()
        );
    }
    Ok(())
}

/// What the simulator says it ran.
#[derive(Default)]
struct Totals {
    kernels: u64,
    memcpy_bytes: u64,
    /// Each rank's part of each collective, (pid, api_enter_ns), by the collective's rank
    /// count: a part is one or more HCCL task lines (notifies and transfers).
    hccl_parts: BTreeMap<u64, BTreeSet<(u64, u64)>>,
}

impl Totals {
    fn of_truth(dir: &Path) -> Result<Self> {
        let mut totals = Self::default();
        for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
            let path = entry?.path();
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            for line in text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            {
                totals.add(&line);
            }
        }
        Ok(totals)
    }

    fn add(&mut self, line: &Value) {
        if line["type"] != "task" {
            return;
        }
        match line["kind"].as_str() {
            Some("KERNEL") => self.kernels += 1,
            Some("MEMCPY") => self.memcpy_bytes += line["bytes"].as_u64().unwrap_or(0),
            Some("HCCL") => {
                let nranks = line["nranks"].as_u64().unwrap_or(1).max(1);
                let part = (
                    line["pid"].as_u64().unwrap_or(0),
                    line["api_enter_ns"].as_u64().unwrap_or(0),
                );
                self.hccl_parts.entry(nranks).or_default().insert(part);
            }
            _ => {}
        }
    }

    fn collectives(&self) -> u64 {
        self.hccl_parts
            .iter()
            .map(|(n, parts)| parts.len() as u64 / n)
            .sum()
    }
}

/// Loading BPF programs needs root (or CAP_BPF + CAP_PERFMON); say so before building.
fn check_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "cargo xtask demo traces with eBPF and must run as root. Run it as root, or keep \
             your toolchain with: sudo -E env \"PATH=$PATH\" cargo xtask demo"
        );
    }
    Ok(())
}

/// Builds the release agent; returns the binary's path.
fn build_tracer() -> Result<PathBuf> {
    let status = cargo()
        .args([
            "build",
            "--release",
            "-p",
            "npu-bpftrace",
            "--bin",
            "npu-bpftrace",
        ])
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("building npu-bpftrace failed");
    }
    let root = workspace_root();
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    Ok(root.join(target).join("release/npu-bpftrace"))
}

/// `npu-bpftrace record --out OUT -- npu-sim-run --nproc 2 -- npu-sim-app train`, with the
/// environment of the simulator's `set_env.sh` and ground truth written to `OUT/truth`.
fn record(tracer: &Path, sim_dir: &Path, out: &Path) -> Result<()> {
    let status = Command::new(tracer)
        .arg("record")
        .arg("--out")
        .arg(out)
        .arg("--")
        .arg(sim_dir.join("bin/npu-sim-run"))
        .args(["--nproc", "2", "--", "npu-sim-app", "train"])
        .envs(sim_env(sim_dir)?)
        .env("NPU_SIM_TRUTH", out.join("truth"))
        .status()
        .with_context(|| format!("running {} record", tracer.display()))?;
    if !status.success() {
        bail!("npu-bpftrace record failed: {status}");
    }
    Ok(())
}

/// What `set_env.sh` of the simulator tree exports.
fn sim_env(sim_dir: &Path) -> Result<Vec<(&'static str, OsString)>> {
    let toolkit = sim_dir.join("ascend-toolkit/latest");
    let libs = [
        sim_dir.join(sim::TOOLKIT_LIB),
        sim_dir.join(sim::DRIVER_LIB),
    ];
    let bin = [sim_dir.join("bin")];
    Ok(vec![
        ("NPU_SIM_HOME", sim_dir.into()),
        ("ASCEND_HOME_PATH", toolkit.clone().into()),
        ("ASCEND_TOOLKIT_HOME", toolkit.into()),
        ("LD_LIBRARY_PATH", prepend(&libs, "LD_LIBRARY_PATH")?),
        ("PATH", prepend(&bin, "PATH")?),
    ])
}

/// `dirs` followed by the current value of the path list `var`.
fn prepend(dirs: &[PathBuf], var: &str) -> Result<OsString> {
    let current = std::env::var_os(var).unwrap_or_default();
    let all = dirs.iter().cloned().chain(std::env::split_paths(&current));
    std::env::join_paths(all).with_context(|| format!("building {var}"))
}

/// Local time as `YYYYmmdd-HHMMSS`, so demo runs sort by time.
fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as libc::time_t);
    // SAFETY: an all-zero `tm` is a valid value for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers; localtime_r is thread-safe.
    unsafe { libc::localtime_r(&secs, &mut tm) };
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}
