//! Many short-lived processes under one system-wide agent, in a test binary of its own (the
//! agent traces every process on the machine).
use std::{
    fs,
    process::Stdio,
    thread::sleep,
    time::{Duration, Instant},
};

use serde_json::Value;
use tests::{read_table, read_truth, scratch_dir, sim_command, tracer_command};

/// Short-lived processes started one after another.
const PROCESSES: usize = 1000;
/// Processes run first, to bring the agent to its working set (Parquet writers, interned
/// names, channel buffers): its idle footprint after work, which churn must not grow.
const WARM_UP: usize = 500;

/// The agent's resident memory, in bytes.
fn rss_bytes(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("agent status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line");
    kib * 1024
}

/// Every call of a thousand processes that each live a few milliseconds is recorded,
/// every per-thread and per-task entry they made in the kernel's maps is gone once they
/// are, and the agent's memory comes back to within 10% of where it was before them (idle
/// after a warm-up).
#[test]
fn a_thousand_short_lived_processes_lose_nothing_and_leave_nothing() {
    let scratch = scratch_dir("churn");
    let (truth, dir) = (scratch.join("truth"), scratch.join("trace"));
    fs::create_dir_all(&truth).expect("truth dir");
    let mut agent = tracer_command(&truth)
        .args(["record", "--system-wide", "--quiet", "--out"])
        .arg(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the agent");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("session.json").exists() {
        assert!(Instant::now() < deadline, "the agent did not start");
        sleep(Duration::from_millis(50));
    }
    let run = |count: usize| {
        for i in 0..count {
            let out = sim_command("npu-sim-app", &truth)
                .args(["alloc", "--iters", "3"])
                .output()
                .expect("running npu-sim-app");
            assert!(out.status.success(), "process {i}: {}", out.status);
        }
    };
    run(WARM_UP);
    // Idle after work: every row flushed, the freed buffers handed back.
    sleep(Duration::from_secs(3));
    let idle = rss_bytes(agent.id());
    run(PROCESSES);
    // Idle again: every row flushed, the freed buffers handed back.
    sleep(Duration::from_secs(3));
    let after = rss_bytes(agent.id());
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(agent.id() as i32, libc::SIGINT) };
    assert!(agent.wait().expect("agent exit").success());

    let workload: Vec<Value> = read_truth(&truth)
        .into_values()
        .flatten()
        .filter(|l| l["type"] == "api" && l["lib"] != "libascend_hal.so")
        .collect();
    let pids: std::collections::HashSet<u64> =
        workload.iter().filter_map(|l| l["pid"].as_u64()).collect();
    assert_eq!(pids.len(), WARM_UP + PROCESSES, "truth of every process");
    let rows: Vec<_> = read_table(&dir, "api")
        .into_iter()
        .filter(|r| r["pid"].as_u64().is_some_and(|p| pids.contains(&p)))
        .collect();
    tests::truth::assert_api_matches(&rows, &workload);

    let session = tests::attach::session(&dir);
    assert_eq!(session.total_drops(), 0, "{:?}", session.drops);
    let maps = &session.bpf_maps;
    assert!(
        maps.threads_gone == 0 && maps.targets_gone == 0 && maps.tasks_gone == 0,
        "kernel-side state of exited processes left behind: {maps:?}"
    );
    println!(
        "{} calls of {} processes; agent RSS {} KiB idle, {} KiB after; maps {maps:?}",
        rows.len(),
        WARM_UP + PROCESSES,
        idle / 1024,
        after / 1024
    );
    assert!(
        after * 10 <= idle * 11,
        "agent RSS {} KiB after the processes, {} KiB before",
        after / 1024,
        idle / 1024
    );
}
