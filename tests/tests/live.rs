//! Tracing processes that are already running (attach), processes that start later
//! (system-wide), and processes killed in the middle of a call.
use std::{
    process::Stdio,
    sync::{Mutex, MutexGuard},
    thread::sleep,
    time::{Duration, Instant},
};

use serde_json::Value;
use tests::{
    Row,
    attach::{attach_and_name_kernels, session, spawn_workload, truth_of},
    read_table, read_truth, scratch_dir, sim_command, tracer_command,
    truth::assert_api_matches,
};

/// Kernels registered before the attach are named from their function handles; the
/// other handle generation is tested in `handles.rs` (a binary of its own, so the two
/// attach sessions' probe releases do not overlap the system-wide test's start).
/// These tests run one at a time: each session attaches and releases uprobes under the
/// kernel's global uprobe locks, and side by side (with the system-wide agent attaching to
/// every process, the other agents included) they stalled each other past the tests'
/// deadlines and the ring buffer's capacity on this 2-core machine.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn attach_to_running_process_names_kernels_registered_before() {
    let _serial = one_at_a_time();
    attach_and_name_kernels("2026");
}

#[test]
fn system_wide_traces_processes_started_later() {
    let _serial = one_at_a_time();
    let scratch = scratch_dir("system-wide");
    let (truth, dir) = (scratch.join("truth"), scratch.join("trace"));
    std::fs::create_dir_all(&truth).unwrap();
    let mut agent = tracer_command(&truth)
        .args(["record", "--system-wide", "--out"])
        .arg(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("session.json").exists() {
        assert!(Instant::now() < deadline, "agent did not start");
        sleep(Duration::from_millis(50));
    }
    let app = sim_command("npu-sim-app", &truth)
        .arg("alloc")
        .output()
        .unwrap();
    assert!(app.status.success());
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(agent.id() as i32, libc::SIGINT) };
    assert!(agent.wait().unwrap().success());

    let truth_lines: Vec<Value> = read_truth(&truth).into_values().flatten().collect();
    // The workload's pid: the agent reads device clocks through the driver and so has
    // truth of its own (driver calls only).
    let pid = truth_lines
        .iter()
        .find(|l| l["type"] == "api" && l["lib"] != "libascend_hal.so")
        .and_then(|l| l["pid"].as_u64())
        .expect("truth written");
    let rows: Vec<Row> = read_table(&dir, "api")
        .into_iter()
        .filter(|r| r["pid"].as_u64() == Some(pid))
        .collect();
    assert_api_matches(&rows, &truth_of(&truth, pid as u32));
    assert!(session(&dir).complete);
}

#[test]
fn killed_process_leaves_incomplete_calls() {
    let _serial = one_at_a_time();
    let scratch = scratch_dir("killed");
    let (truth, dir) = (scratch.join("truth"), scratch.join("trace"));
    std::fs::create_dir_all(&truth).unwrap();
    let mut cmd = tracer_command(&truth);
    cmd.env("NPU_SIM_KERNEL_US", "matmul_fwd=5000000")
        .args(["record", "--out"])
        .arg(&dir)
        .args(["--", "npu-sim-app", "train", "--steps", "3"]);
    let (mut agent, pid) = spawn_workload(&mut cmd, &scratch.join("app.log"));
    let pid = pid as i32;
    sleep(Duration::from_millis(1500)); // inside a stream sync waiting for the 5 s kernel
    // SAFETY: plain kill(2) of the workload.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let status = agent.wait().unwrap();
    assert!(!status.success(), "the agent reports the command's failure");

    let rows = read_table(&dir, "api");
    let incomplete: Vec<&Row> = rows.iter().filter(|r| r["incomplete"] == true).collect();
    assert!(
        incomplete
            .iter()
            .any(|r| r["name"].as_str().unwrap().contains("ynchronize")),
        "the call blocked at the kill is reported incomplete: {incomplete:?}"
    );
    assert!(incomplete.iter().all(|r| r["end_ns"].is_null()));
    assert!(session(&dir).correlation.incomplete_calls >= 1);
}
