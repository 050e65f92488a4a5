//! Helpers for the end-to-end tests: running `npu-bpftrace` against the installed NPU
//! simulator, reading its Parquet dataset back, and comparing it with the simulator's
//! ground truth.
use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use serde_json::Value;
use tracer_schema::{
    dataset::{Dataset, JsonRow},
    session::Session,
};

pub use npu_sim_app::{read_truth, scratch_dir, sim_command, sim_home};

/// One row of a table, column name -> value (null for missing).
pub type Row = JsonRow;

/// How many times longer than native runs a test's time window should be:
/// `NPU_BPFTRACE_TEST_TIME_SCALE` (1 when unset), which `cargo xtask vm` sets for its
/// emulated arm64 machine, where everything runs an order of magnitude slower and a
/// fixed window would hold too few calls to check.
pub fn time_scale() -> u32 {
    std::env::var("NPU_BPFTRACE_TEST_TIME_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// The `npu-bpftrace` binary cargo built next to this test executable.
pub fn npu_bpftrace() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/npu-bpftrace
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("npu-bpftrace"))
        .expect("target directory");
    assert!(
        bin.exists(),
        "{} missing: build it with `cargo build -p npu-bpftrace` (cargo test does)",
        bin.display()
    );
    bin
}

/// `npu-bpftrace ARGS`, plain.
pub fn npu_bpftrace_command() -> Command {
    Command::new(npu_bpftrace())
}

/// `npu-bpftrace ARGS` with the simulator's environment (as after sourcing set_env.sh) and
/// ground truth going to `truth`.
pub fn tracer_command(truth: &Path) -> Command {
    let template = sim_command("npu-sim-app", truth);
    let mut cmd = Command::new(npu_bpftrace());
    for (key, value) in template.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    cmd
}

/// Path of a program of the simulator tree.
pub fn sim_bin(prog: &str) -> String {
    sim_home().join("bin").join(prog).display().to_string()
}

/// A finished recording: its dataset, its ground truth and the agent's output.
pub struct Recording {
    pub dir: PathBuf,
    pub truth: PathBuf,
    pub output: Output,
}

impl Recording {
    pub fn table(&self, name: &str) -> Vec<Row> {
        read_table(&self.dir, name)
    }

    /// `npu-bpftrace report DIR --format FORMAT`'s stdout; panics unless it succeeds.
    pub fn report(&self, format: &str) -> String {
        let out = Command::new(npu_bpftrace())
            .arg("report")
            .arg(&self.dir)
            .args(["--format", format])
            .output()
            .expect("running npu-bpftrace report");
        assert!(
            out.status.success(),
            "report failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 report")
    }

    pub fn session(&self) -> Session {
        Session::read(&self.dir).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Ground-truth `api` lines of the traced (non-driver) libraries.
    pub fn truth_api(&self) -> Vec<Value> {
        read_truth(&self.truth)
            .into_values()
            .flatten()
            .filter(|l| l["type"] == "api" && l["lib"] != "libascend_hal.so")
            .collect()
    }
}

/// The simulated host's profiling-channel files outlive processes (like driver state):
/// a finished recording removes those of its test thread's host.
impl Drop for Recording {
    fn drop(&mut self) {
        npu_sim_app::prof::remove_host(&npu_sim_app::test_host());
    }
}

/// `npu-bpftrace record [extra] --out DIR -- <workload>` with truth on; panics unless both
/// the agent and the workload succeed.
pub fn record(name: &str, extra: &[&str], workload: &[String]) -> Recording {
    record_with(name, &[], extra, workload)
}

/// [`record`] on a simulated host of chip `chip` (`NPU_SIM_CHIP`, `910B` or `950`). The chip is
/// the host's: the agent's own driver calls (the chip it asks for, the profiling channels it
/// starts) see it as the workload's do, so the agent gets it too, and its workload inherits
/// it.
pub fn record_on_chip(name: &str, chip: &str, extra: &[&str], workload: &[String]) -> Recording {
    record_with(name, &[("NPU_SIM_CHIP", chip)], extra, workload)
}

/// [`record`] with `env` set for the agent (and so for the workload it starts).
pub fn record_with(
    name: &str,
    env: &[(&str, &str)],
    extra: &[&str],
    workload: &[String],
) -> Recording {
    let scratch = scratch_dir(name);
    let (dir, truth) = (scratch.join("trace"), scratch.join("truth"));
    fs::create_dir_all(&truth).expect("truth dir");
    let output = tracer_command(&truth)
        .envs(env.iter().copied())
        .arg("record")
        .args(extra)
        .arg("--out")
        .arg(&dir)
        .arg("--")
        .args(workload)
        .output()
        .expect("running npu-bpftrace");
    assert!(
        output.status.success(),
        "npu-bpftrace record failed: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Recording { dir, truth, output }
}

/// Every row of table `table` of the dataset in `dir`, read by the reader every tool
/// shares (`tracer_schema::dataset`); no rows when the dataset lacks the table.
pub fn read_table(dir: &Path, table: &str) -> Vec<Row> {
    Dataset::open(dir)
        .unwrap_or_else(|e| panic!("reading the dataset {}: {e:#}", dir.display()))
        .table(table)
        .json_rows()
        .unwrap_or_else(|e| panic!("reading table {table}: {e:#}"))
}

/// Whether the running kernel's release is at least `major.minor` (uprobe_multi links
/// came with 6.6).
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

/// Integer view of a JSON number (signed or not) for comparisons.
pub fn int(v: &Value) -> Option<i128> {
    v.as_u64()
        .map(i128::from)
        .or_else(|| v.as_i64().map(i128::from))
}

/// Groups rows by a key.
pub fn group<K: Ord, T>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> K,
) -> BTreeMap<K, Vec<T>> {
    let mut map: BTreeMap<K, Vec<T>> = BTreeMap::new();
    for item in items {
        map.entry(key(&item)).or_default().push(item);
    }
    map
}

pub mod attach;
pub mod device;
pub mod fuzz;
pub mod truth;
