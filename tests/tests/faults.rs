//! The fault suite: what happens to a trace when things go wrong around the agent (signals,
//! killed processes, full or read-only disks, a removed or hostile output directory). Each
//! test checks the dataset against the simulator's ground truth: nothing may be lost
//! silently.
use std::{
    path::{Path, PathBuf},
    process::{Child, ExitStatus},
    sync::{Mutex, MutexGuard},
    thread::sleep,
    time::{Duration, Instant},
};

use tests::{
    attach::{assert_window_complete, session, spawn_workload, start_long_train, stop, truth_of},
    read_table, read_truth, scratch_dir, tracer_command,
    truth::assert_api_matches,
};

/// One agent at a time: attaching and releasing uprobes serializes in the kernel, and the
/// timing of these tests (signals at given moments) must not depend on other agents.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn kill(pid: u32, signal: i32) {
    // SAFETY: plain kill(2) of a process this test started.
    unsafe { libc::kill(pid as i32, signal) };
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && !zombie(pid)
}

fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
}

/// Waits until the agent has written its first session.json (the probes are attached).
fn wait_started(dir: &Path, agent: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("session.json").exists() {
        assert!(
            agent.try_wait().unwrap().is_none(),
            "the agent exited before it started tracing"
        );
        assert!(Instant::now() < deadline, "agent did not start");
        sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` at most `limit`.
fn wait_within(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("not finished within {limit:?}");
        }
        sleep(Duration::from_millis(10));
    }
}

/// Scratch directory with `truth/` made and `trace` as the output path.
fn scratch(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let scratch = scratch_dir(name);
    let (truth, dir) = (scratch.join("truth"), scratch.join("trace"));
    std::fs::create_dir_all(&truth).unwrap();
    (scratch, truth, dir)
}

/// An ssh disconnect: SIGHUP stops an attach session like SIGTERM. Everything is flushed,
/// session.json is complete, the agent exits 0 and the window matches the truth.
#[test]
fn sighup_stops_cleanly() {
    let _serial = one_at_a_time();
    let (scratch, truth, dir) = scratch("fault-sighup");
    let (app, pid) = start_long_train(&truth, &scratch.join("app.log"), "2026");
    let mut agent = tracer_command(&truth)
        .args(["attach", "--pid", &pid.to_string(), "--ringbuf-mb", "64"])
        .arg("--out")
        .arg(&dir)
        .spawn()
        .unwrap();
    wait_started(&dir, &mut agent);
    sleep(Duration::from_millis(1500));
    kill(agent.id(), libc::SIGHUP);
    let status = wait_within(&mut agent, Duration::from_secs(20));
    stop(app);
    assert!(status.success(), "the agent exits 0 on SIGHUP: {status}");
    let session = session(&dir);
    assert!(session.complete, "session.json is the final one");
    let rows = read_table(&dir, "api");
    let checked = assert_window_complete(
        &rows,
        &truth_of(&truth, pid),
        session.clock_start.monotonic_ns,
    );
    assert!(checked > 50, "only {checked} calls in the window");
    assert_eq!(session.rows["api"], rows.len() as u64);
}

/// In record mode the first SIGINT goes on to the command (which handles it by ending its
/// loop); tracing goes on until the command exits, so the trace holds every call of the
/// truth, and the agent exits with the command's status (0).
#[test]
fn record_passes_the_first_signal_on() {
    let _serial = one_at_a_time();
    let (scratch, truth, dir) = scratch("fault-sigint-record");
    let mut cmd = tracer_command(&truth);
    cmd.args(["record", "--out"]).arg(&dir).args([
        "--",
        "npu-sim-app",
        "train",
        "--steps",
        "100000",
        "--step-sleep-ms",
        "20",
    ]);
    let (mut agent, pid) = spawn_workload(&mut cmd, &scratch.join("app.log"));
    wait_started(&dir, &mut agent);
    sleep(Duration::from_millis(1000));
    kill(agent.id(), libc::SIGINT);
    let status = wait_within(&mut agent, Duration::from_secs(30));
    assert!(status.success(), "the command's status, 0: {status}");
    assert!(!alive(pid), "the agent waited for its command");
    let truth_api: Vec<_> = read_truth(&truth)
        .remove(&u64::from(pid))
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l["type"] == "api" && l["lib"] != "libascend_hal.so")
        .collect();
    assert!(!truth_api.is_empty());
    assert_api_matches(&read_table(&dir, "api"), &truth_api);
    assert!(session(&dir).complete);
}

/// A second SIGINT finishes at once: the agent does not wait for a command that takes its
/// time to stop (here, in a 5 s device synchronization), flushes what it has, writes a
/// complete session.json and exits with 130; what it recorded matches the truth.
#[test]
fn second_sigint_finishes_at_once() {
    let _serial = one_at_a_time();
    let (scratch, truth, dir) = scratch("fault-double-sigint");
    let mut cmd = tracer_command(&truth);
    cmd.env("NPU_SIM_KERNEL_US", "matmul_fwd=5000000")
        .args(["record", "--out"])
        .arg(&dir)
        .args(["--", "npu-sim-app", "train", "--steps", "3"]);
    let (mut agent, pid) = spawn_workload(&mut cmd, &scratch.join("app.log"));
    wait_started(&dir, &mut agent);
    sleep(Duration::from_millis(1500)); // inside the synchronization of the 5 s kernel
    kill(agent.id(), libc::SIGINT);
    sleep(Duration::from_millis(200));
    kill(agent.id(), libc::SIGINT);
    let status = wait_within(&mut agent, Duration::from_secs(3));
    assert_eq!(status.code(), Some(130), "128 + SIGINT");
    assert!(alive(pid), "the command was not waited for");
    let session = session(&dir);
    assert!(session.complete);
    let rows = read_table(&dir, "api");
    assert_eq!(session.rows["api"], rows.len() as u64);
    let calls = truth_of(&truth, pid);
    // Every call that returned while traced is there (the truth is read while the
    // command still runs: its blocked call has no truth line yet).
    let checked = assert_window_complete(&rows, &calls, 0);
    assert!(checked > 10, "only {checked} calls");
    let blocked = rows
        .iter()
        .filter(|r| r["incomplete"] == true)
        .filter(|r| r["name"].as_str().is_some_and(|n| n.contains("ynchronize")))
        .count();
    assert!(blocked >= 1, "the call in flight is reported incomplete");
    // The command ends on its own (it got the first SIGINT).
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) {
        assert!(Instant::now() < deadline, "the command did not end");
        sleep(Duration::from_millis(50));
    }
}
