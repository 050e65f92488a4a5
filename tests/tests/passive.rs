//! Passive mode, in a test binary of its own: another profiler owns a device's channel and
//! the agent reads along. The agent copies every read of that device's channel by any other
//! process; the simulator gives each test thread a simulated host of its own, but one kernel
//! sees them all, so a test beside this one reading its own device 0 would feed it records
//! of another host.
use npu_sim_app::{prof, test_host};
use tests::{
    device::{assert_aligned, check_tasks, truth_tasks},
    record, scratch_dir, sim_bin,
};

/// Another profiler (npu-sim-prof, as msprof or msPTI) owns device 0's channel: the driver
/// refuses it to the agent, which says so and times that device's tasks from the records
/// the other profiler reads (copied at the return of its `prof_channel_read`, "passive
/// mode"); nothing is lost.
#[test]
fn a_channel_owned_by_another_profiler_is_read_passively() {
    let scratch = scratch_dir("device-prof-owner");
    let profiler = prof::start(&test_host(), &scratch, &[], &["--device", "0"])
        .unwrap_or_else(|end| panic!("npu-sim-prof did not start: {}", end.stderr));
    let recording = record(
        "device-prof-owner",
        &[],
        &[
            sim_bin("npu-sim-app"),
            "train".into(),
            "--steps".into(),
            "3".into(),
        ],
    );
    let end = profiler.stop();
    assert!(end.success, "npu-sim-prof: {}", end.stderr);
    let session = recording.session();
    let source = &session.device_time_sources[&0];
    assert!(
        source.starts_with("profiling_channel_passive: "),
        "{source}"
    );
    let critical = recording.table("critical_event");
    assert!(
        critical
            .iter()
            .any(|c| c["kind"] == "device_time_source" && c["device_id"] == 0),
        "{critical:?}"
    );
    assert_aligned("profiler-owned channel", check_tasks(&recording));
    let tasks = truth_tasks(&recording).len() as u64;
    assert_eq!(
        session.activity.tasks_from_channel, tasks,
        "every task timed by the records the other profiler read: {:?}",
        session.activity
    );
    assert_eq!(session.total_drops(), 0, "{:?}", session.drops);
}
