//! Two agents on one workload, in a test binary of its own: the second agent reads device
//! times from the channel the first owns (passive mode), and passive mode copies every
//! channel read on the machine, which a test beside this one would feed.
use std::{
    process::{Output, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use tests::{
    Recording,
    attach::truth_of,
    device::{assert_aligned, check_tasks, truth_tasks},
    record, scratch_dir, sim_bin, tracer_command,
    truth::assert_api_matches,
};

/// A system-wide agent runs while a second agent records a workload: each sees every
/// call of the workload and times every device task. The first agent owns device 0's
/// profiling channel; the second is refused it and reads along with the first.
#[test]
fn two_agents_on_one_workload_both_record_everything() {
    let scratch = scratch_dir("two-agents");
    let (truth, dir) = (scratch.join("truth"), scratch.join("trace"));
    std::fs::create_dir_all(&truth).expect("truth dir");
    let first = tracer_command(&truth)
        .args(["record", "--system-wide", "--out"])
        .arg(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the first agent");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("session.json").exists() {
        assert!(Instant::now() < deadline, "the first agent did not start");
        sleep(Duration::from_millis(50));
    }

    let second = record(
        "two-agents-second",
        &[],
        &[
            sim_bin("npu-sim-app"),
            "train".into(),
            "--steps".into(),
            "3".into(),
        ],
    );
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(first.id() as i32, libc::SIGINT) };
    let output = first
        .wait_with_output()
        .expect("waiting for the first agent");
    assert!(
        output.status.success(),
        "first agent: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );

    // The second agent: everything, device times read along with the first.
    let workload = second.truth_api();
    assert!(workload.len() > 100, "the workload ran: {}", workload.len());
    assert_api_matches(&second.table("api"), &workload);
    let session = second.session();
    assert!(
        session.device_time_sources[&0].starts_with("profiling_channel_passive: "),
        "{:?}",
        session.device_time_sources
    );
    assert_aligned("second agent", check_tasks(&second));
    assert_eq!(session.total_drops(), 0, "{:?}", session.drops);

    // The first agent: the same calls and tasks of the workload's process.
    let pid = workload[0]["pid"].as_u64().expect("truth pid");
    let rows: Vec<_> = tests::read_table(&dir, "api")
        .into_iter()
        .filter(|r| r["pid"].as_u64() == Some(pid))
        .collect();
    assert_api_matches(&rows, &truth_of(&second.truth, pid as u32));
    let first = Recording {
        dir,
        truth: second.truth.clone(),
        output: Output {
            status: output.status,
            stdout: output.stdout,
            stderr: output.stderr,
        },
    };
    let session = first.session();
    assert_eq!(
        session.device_time_sources.get(&0).map(String::as_str),
        Some("profiling_channel"),
        "{:?}",
        session.device_time_sources
    );
    assert_aligned("first agent", check_tasks(&first));
    assert_eq!(
        session.activity.tasks_from_channel,
        truth_tasks(&first).len() as u64,
        "{:?}",
        session.activity
    );
    assert_eq!(session.total_drops(), 0, "{:?}", session.drops);
}
