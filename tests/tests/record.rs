//! `npu-bpftrace record -- CMD`: every call of the simulator's workloads, traced from the
//! first instruction, matches the ground truth exactly.
use tests::{Recording, kernel_at_least, record, record_with, sim_bin, truth::assert_api_matches};
use tracer_schema::session::AttachKind;

fn check(recording: &Recording) {
    let rows = recording.table("api");
    let truth = recording.truth_api();
    assert!(!truth.is_empty(), "the workload wrote no ground truth");
    let comparison = assert_api_matches(&rows, &truth);
    println!("{comparison:?}");
    let session = recording.session();
    assert!(session.complete);
    assert_eq!(session.total_drops(), 0, "drops: {:?}", session.drops);
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn train_with_two_ranks() {
    let workload = [
        vec![sim_bin("npu-sim-run")],
        args(&["--nproc", "2", "--", "npu-sim-app", "train", "--steps", "5"]),
    ]
    .concat();
    let recording = record("record-train", &[], &workload);
    check(&recording);
    let markers = recording.table("marker");
    let ranges = markers.iter().filter(|m| m["kind"] == "range").count();
    assert!(ranges >= 10, "an mstx range per step per rank: {ranges}");
    assert!(
        markers.iter().all(|m| !m["end_ns"].is_null()),
        "every range ended"
    );
}

/// Every library file with functions says how they were attached, and it is `kind`.
fn assert_attached_as(recording: &Recording, kind: AttachKind) {
    let session = recording.session();
    let files: Vec<_> = session
        .attached
        .iter()
        .filter(|f| !f.functions.is_empty())
        .collect();
    assert!(!files.is_empty());
    for file in files {
        assert_eq!(file.attach, Some(kind), "{}", file.path.display());
    }
}

#[test]
fn alloc() {
    let recording = record(
        "record-alloc",
        &[],
        &[sim_bin("npu-sim-app"), "alloc".into()],
    );
    check(&recording);
    let expected = if kernel_at_least(6, 6) {
        AttachKind::UprobeMulti
    } else {
        AttachKind::PerfEvent
    };
    assert_attached_as(&recording, expected);
}

#[test]
fn alloc_with_perf_event_uprobes() {
    // NPU_BPFTRACE_UPROBE_MULTI=0 asks for the fallback whatever the kernel has.
    let recording = record_with(
        "record-alloc-perf-event",
        &[("NPU_BPFTRACE_UPROBE_MULTI", "0")],
        &[],
        &[sim_bin("npu-sim-app"), "alloc".into()],
    );
    check(&recording);
    assert_attached_as(&recording, AttachKind::PerfEvent);
}

#[test]
fn multithreaded_burst() {
    let workload = [
        vec![sim_bin("npu-sim-app")],
        args(&["burst", "--threads", "4", "--launches", "300"]),
    ]
    .concat();
    check(&record("record-burst", &[], &workload));
}

#[test]
fn dlopen_mode() {
    let workload = [
        vec![sim_bin("npu-sim-app-dlopen")],
        args(&["train", "--steps", "3"]),
    ]
    .concat();
    check(&record("record-dlopen", &[], &workload));
}

#[test]
fn collectives_and_faults() {
    let collectives = [
        vec![sim_bin("npu-sim-run")],
        args(&["--nproc", "2", "--", "npu-sim-app", "collectives"]),
    ]
    .concat();
    check(&record("record-collectives", &[], &collectives));
    let faults = [vec![sim_bin("npu-sim-app")], args(&["faults"])].concat();
    let recording = record("record-faults", &[], &faults);
    check(&recording);
    let errors = recording
        .table("api")
        .iter()
        .filter(|r| r["return_value"].as_i64().is_some_and(|v| v != 0))
        .count();
    assert!(
        errors > 0,
        "the faults workload returns errors the trace must show"
    );
}

#[test]
fn print_shows_enter_and_exit_lines() {
    let recording = record(
        "record-print",
        &["--print"],
        &[sim_bin("npu-sim-app"), "alloc".into()],
    );
    let stdout = String::from_utf8_lossy(&recording.output.stdout);
    let enters = stdout
        .lines()
        .filter(|l| l.starts_with("[ENTER] aclrtMalloc "))
        .count();
    let exits = stdout
        .lines()
        .filter(|l| {
            l.starts_with("[EXIT]  aclrtMalloc ") && l.contains(" dur=") && l.contains(" corr=")
        })
        .count();
    let calls = recording
        .truth_api()
        .iter()
        .filter(|c| c["fn"] == "aclrtMalloc")
        .count();
    assert!(calls > 0);
    assert_eq!(
        (enters, exits),
        (calls, calls),
        "one [ENTER] and one [EXIT] line per call"
    );
}

#[test]
fn status_line_only_on_a_terminal() {
    // Under `script` stderr is a terminal: the status line appears, then the summary.
    let scratch = tests::scratch_dir("record-status");
    let (dir, truth) = (scratch.join("trace"), scratch.join("truth"));
    std::fs::create_dir_all(&truth).unwrap();
    let inner = format!(
        "{} record --out {} -- {} train --steps 40 --step-sleep-ms 50",
        tests::npu_bpftrace().display(),
        dir.display(),
        sim_bin("npu-sim-app")
    );
    let output = tests::tracer_command(&truth)
        .get_envs()
        .fold(std::process::Command::new("script"), |mut cmd, (k, v)| {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
            cmd
        })
        .args(["-qec", &inner, "/dev/null"])
        .output()
        .expect("run script(1)");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains("processes |") && text.contains("events |"),
        "status line: {text}"
    );
    assert!(text.contains(" calls, "), "final summary: {text}");

    // Without a terminal, only the line that says tracing is on and the summary.
    let quiet = record(
        "record-status-quiet",
        &[],
        &[sim_bin("npu-sim-app"), "alloc".into()],
    );
    let stderr = String::from_utf8_lossy(&quiet.output.stderr);
    assert!(!stderr.contains("processes |"), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("npu-bpftrace: "))
        .collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(lines[0].contains(" probes in 1 process "), "{stderr}");
    assert!(lines[1].contains(" calls, "), "{stderr}");
}
