//! Helpers for the simulator's end-to-end tests: locating the installed tree, running its
//! programs with ground truth on, and reading the truth back. The workload itself is C
//! (`c/app.c`), compiled by `cargo xtask sim`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The installed simulator tree: `$NPU_SIM_HOME`, else `<workspace>/target/npu-sim`.
pub fn sim_home() -> PathBuf {
    let home = std::env::var_os("NPU_SIM_HOME").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/npu-sim")
    });
    assert!(
        home.join("bin/npu-sim-app").exists() && home.join("driver/lib64/libascend_hal.so").exists(),
        "no simulator installed at {}: run `cargo xtask sim` first (or set NPU_SIM_HOME)",
        home.display()
    );
    home.canonicalize().expect("canonical simulator path")
}

/// A fresh, empty directory for one test.
pub fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("npu-sim-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("creating scratch dir");
    d
}

/// A command for program `bin/<prog>` of the tree with `set_env.sh`'s environment and ground
/// truth written to `truth`.
pub fn sim_command(prog: &str, truth: &Path) -> Command {
    let home = sim_home();
    let mut c = Command::new(home.join("bin").join(prog));
    let lib = format!(
        "{}:{}",
        home.join("ascend-toolkit/latest/lib64").display(),
        home.join("driver/lib64").display()
    );
    c.env("LD_LIBRARY_PATH", lib)
        .env("ASCEND_HOME_PATH", home.join("ascend-toolkit/latest"))
        .env("NPU_SIM_TRUTH", truth);
    for var in ["NPU_SIM_FAIL_API", "NPU_SIM_FAULT_KERNEL", "NPU_SIM_TASK_ID_START", "NPU_SIM_STRAGGLER_MS"] {
        c.env_remove(var);
    }
    c
}

/// Runs `cmd` and panics with its output unless it succeeds.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every ground-truth line in `dir`, by pid.
pub fn read_truth(dir: &Path) -> BTreeMap<u64, Vec<Value>> {
    let mut by_pid = BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("truth dir") {
        let p = e.expect("dir entry").path();
        let name = p.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("truth-").and_then(|s| s.strip_suffix(".jsonl")) else { continue };
        let text = std::fs::read_to_string(&p).expect("truth file");
        let lines = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: bad line {l:?}: {e}", p.display())))
            .collect();
        by_pid.insert(pid.parse().expect("pid in name"), lines);
    }
    by_pid
}

/// Lines of one `type` ("api", "task", "clock").
pub fn of_type<'a>(lines: &'a [Value], ty: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == ty).collect()
}

/// `u64` field of a line (panics with the line if missing).
pub fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// Number of `api` lines calling `func`.
pub fn api_count(lines: &[Value], func: &str) -> usize {
    lines.iter().filter(|l| l["type"] == "api" && l["fn"] == func).count()
}
