//! Helpers for the profiling-channel tests: running `npu-sim-prof` beside workloads on a
//! simulated host of the test's own (`NPU_SIM_HOST`), and checking the records it read against
//! the ground truth.
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::thread::JoinHandle;

use serde_json::Value;

use crate::{of_type, sim_command, u};

/// A simulated host name no other test uses.
pub fn unique_host(test: &str) -> String {
    format!("{test}-{}", std::process::id())
}

/// Removes the files of simulated host `host` from /dev/shm: its profiling channels and device
/// id tables (they outlive processes, like a driver's state, until removed).
pub fn remove_host(host: &str) {
    let marker = format!("-{host}-");
    for e in std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
    {
        if e.file_name().to_string_lossy().contains(&marker) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A running `npu-sim-prof` that has started its channels.
pub struct Prof {
    child: Child,
    stderr: JoinHandle<String>,
    pub output: PathBuf,
}

/// The outcome of a `npu-sim-prof` run.
pub struct ProfEnd {
    pub success: bool,
    pub stderr: String,
    /// The records it wrote, one JSON object each.
    pub records: Vec<Value>,
}

impl ProfEnd {
    /// (read, produced, lost) from the summary line of `device`.
    pub fn summary(&self, device: u64) -> (u64, u64, u64) {
        let prefix = format!("npu-sim-prof: device {device} channel 50: read ");
        let line = self
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no summary for device {device}:\n{}", self.stderr));
        let nums: Vec<u64> = line
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect();
        assert_eq!(nums.len(), 3, "summary {line:?}");
        (nums[0], nums[1], nums[2])
    }
}

/// Starts `npu-sim-prof ARGS --output DIR/records.jsonl` on `host` and waits until it says its
/// channels are started (or it exits): an order, not a time limit.
pub fn start(host: &str, dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Result<Prof, ProfEnd> {
    let output = dir.join("records.jsonl");
    let mut cmd = sim_command("npu-sim-prof", &dir.join("prof-truth"));
    cmd.env("NPU_SIM_HOST", host)
        .args(args)
        .arg("--output")
        .arg(&output)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawning npu-sim-prof");
    let (tx, rx) = std::sync::mpsc::channel();
    let pipe = child.stderr.take().expect("stderr pipe");
    let stderr = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if line.contains("npu-sim-prof: started") {
                let _ = tx.send(());
            }
            all += &line;
            all.push('\n');
        }
        all
    });
    let prof = Prof {
        child,
        stderr,
        output,
    };
    // Either the started line arrives, or the pipe closes because npu-sim-prof exited.
    match rx.recv() {
        Ok(()) => Ok(prof),
        Err(_) => Err(prof.wait()),
    }
}

impl Prof {
    /// SIGINT, then waits for it to drain its channels and exit.
    pub fn stop(self) -> ProfEnd {
        // SAFETY: signalling the child process we spawned and have not yet reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        self.wait()
    }

    /// SIGKILL: it dies owning its channels.
    pub fn kill(mut self) {
        self.child.kill().expect("killing npu-sim-prof");
        self.child.wait().expect("reaping npu-sim-prof");
    }

    fn wait(mut self) -> ProfEnd {
        let status = self.child.wait().expect("waiting for npu-sim-prof");
        let stderr = self.stderr.join().expect("stderr reader");
        let records = std::fs::read_to_string(&self.output)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad record {l:?}: {e}")))
            .collect();
        ProfEnd {
            success: status.success(),
            stderr,
            records,
        }
    }
}

/// A begin or end record as (device, func_type, stream, task, timestamp, task_type).
pub type RecordKey = (u64, u64, u64, u64, u64, u64);

/// The key of a record `npu-sim-prof` wrote.
pub fn record_key(r: &Value) -> RecordKey {
    let f = |k| u(r, k);
    (
        f("device"),
        f("func_type"),
        f("stream"),
        f("task"),
        f("timestamp"),
        f("task_type"),
    )
}

/// The begin and end records each ground-truth task of `lines` should have produced. On 950
/// (the clock line's `chip`) records carry no stream: it reads 0, as msPTI decodes it.
pub fn expected_records(lines: &[Value]) -> Vec<RecordKey> {
    let chip950: std::collections::BTreeSet<u64> = of_type(lines, "clock")
        .into_iter()
        .filter(|c| c["chip"] == "950")
        .map(|c| u(c, "device"))
        .collect();
    let mut out = Vec::new();
    for t in of_type(lines, "task") {
        let dev = u(t, "device");
        let stream = if chip950.contains(&dev) {
            0
        } else {
            u(t, "stream")
        };
        let (task, ty) = (u(t, "task"), u(t, "sqe_type"));
        out.push((dev, 0, stream, task, u(t, "start_cnt"), ty));
        out.push((dev, 1, stream, task, u(t, "end_cnt"), ty));
    }
    out
}

/// How many times each key occurs.
pub fn multiset(keys: impl IntoIterator<Item = RecordKey>) -> BTreeMap<RecordKey, usize> {
    let mut m = BTreeMap::new();
    for k in keys {
        *m.entry(k).or_insert(0) += 1;
    }
    m
}
