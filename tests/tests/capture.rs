//! Capture control: `--delay`, SIGUSR1/SIGUSR2 and `--capture-range mstx:MESSAGE`. Real
//! probes on the simulator; the windows `session.json` reports are checked against the
//! simulator's ground truth: every call whose outermost call began inside a window is in
//! the trace, whole, with its device tasks, and nothing else is (but the setup calls that
//! name later ones, which are always recorded); nothing deliberately left out counts as
//! lost.
use std::{
    collections::{HashMap, HashSet},
    io::{BufRead, BufReader},
    process::Stdio,
    sync::mpsc,
    thread,
    time::Duration,
};

use serde_json::Value;
use tests::{
    Recording, Row,
    attach::{start_long_train, stop},
    device::expected_rows,
    read_truth, record, scratch_dir, sim_bin, tracer_command,
    truth::TASK_TABLES,
};
use tracer_catalog::Catalog;
use tracer_common::SPEC_ALWAYS;
use tracer_schema::session::{CaptureWindow, WindowCause};

/// Calls this close to the edge of a window of every process may fall either side: the
/// agent stamps the edge next to the moment it switches the probes, not at it.
const EDGE_NS: u64 = 2_000_000;

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Where an outermost call that began at `enter_ns` on a thread stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    In,
    Out,
    /// Too close to an edge to say.
    Edge,
}

/// The windows of a recording, as `session.json` reports them.
struct Windows(Vec<CaptureWindow>);

impl Windows {
    /// A call of `pid`/`tid` entering at `ns`: inside a window of every process and, when
    /// the session has range windows, inside one of its own process.
    fn verdict(&self, ranges: bool, pid: u64, tid: u64, ns: u64) -> Verdict {
        let within = |w: &CaptureWindow, margin: u64| {
            let end = w.end_ns.expect("a finished session closes every window");
            if ns >= w.start_ns + margin && ns <= end.saturating_sub(margin) {
                Verdict::In
            } else if ns + margin >= w.start_ns && ns <= end + margin {
                Verdict::Edge
            } else {
                Verdict::Out
            }
        };
        let best = |verdicts: Vec<Verdict>| {
            if verdicts.contains(&Verdict::In) {
                Verdict::In
            } else if verdicts.contains(&Verdict::Edge) {
                Verdict::Edge
            } else {
                Verdict::Out
            }
        };
        let global = best(
            self.0
                .iter()
                .filter(|w| w.pid.is_none())
                .map(|w| within(w, EDGE_NS))
                .collect(),
        );
        if !ranges {
            return global;
        }
        // A range's own thread calls in sequence: its window's edges are exact there.
        let own = best(
            self.0
                .iter()
                .filter(|w| w.pid == Some(pid as u32))
                .map(|w| {
                    within(
                        w,
                        if w.tid == Some(tid as u32) {
                            0
                        } else {
                            EDGE_NS
                        },
                    )
                })
                .collect(),
        );
        match (global, own) {
            (Verdict::Out, _) | (_, Verdict::Out) => Verdict::Out,
            (Verdict::In, Verdict::In) => Verdict::In,
            _ => Verdict::Edge,
        }
    }
}

/// Whether the catalog records `name` of `lib` whatever the windows (it names later calls).
fn always(lib: &str, name: &str) -> bool {
    Catalog::builtin()
        .resolve(lib, name)
        .is_some_and(|def| def.role.spec_flags() & SPEC_ALWAYS != 0)
}

/// Each truth call with its verdict: the verdict of its outermost call, or `In` when it or
/// a call it is nested in is always recorded and began while traced (`traced`: from the
/// session's start to its end). A call under an outermost call that began while library
/// files were still being attached (before `traced.0`) may be seen without its parent: `Edge`.
/// Keyed (pid, tid, enter_ns).
fn classify(
    truth: &[Value],
    windows: &Windows,
    ranges: bool,
    traced: (u64, u64),
) -> HashMap<(u64, u64, u64), Verdict> {
    let mut by_thread: HashMap<(u64, u64), Vec<&Value>> = HashMap::new();
    for call in truth {
        by_thread
            .entry((u(&call["pid"]), u(&call["tid"])))
            .or_default()
            .push(call);
    }
    let mut verdicts = HashMap::new();
    for ((pid, tid), mut calls) in by_thread {
        calls.sort_by_key(|c| (u(&c["enter_ns"]), u(&c["depth"])));
        // (exit_ns, verdict) of the calls enclosing the current one.
        let mut stack: Vec<(u64, Verdict)> = Vec::new();
        for call in calls {
            let enter = u(&call["enter_ns"]);
            while stack.last().is_some_and(|&(exit, _)| exit < enter) {
                stack.pop();
            }
            let inherited = match stack.last() {
                Some(&(_, v)) => v,
                None if enter < traced.0 => Verdict::Edge,
                None => windows.verdict(ranges, pid, tid, enter),
            };
            let name = call["fn"].as_str().unwrap_or_default();
            let lib = call["lib"].as_str().unwrap_or_default();
            let verdict = if always(lib, name) {
                if (traced.0..=traced.1).contains(&enter) {
                    Verdict::In
                } else {
                    Verdict::Edge
                }
            } else {
                inherited
            };
            stack.push((u(&call["exit_ns"]), verdict));
            verdicts.insert((pid, tid, enter), verdict);
        }
    }
    verdicts
}

/// Checks the trace against the truth and the windows; returns how many calls were in.
/// `early`: tracing stopped while the workload went on, so the device's profiling channel
/// delivered records of tasks submitted after the probes were silenced (counted unmatched,
/// as other processes' tasks are).
fn check_windows(recording: &Recording, ranges: bool, early: bool) -> usize {
    let session = recording.session();
    let windows = Windows(session.capture.windows.clone());
    let truth = recording.truth_api();
    // Every probe is in place once the last library file is attached (`attach` attaches
    // them one after another while the process runs).
    let attached = session
        .attached
        .iter()
        .filter_map(|f| f.attached_ns)
        .max()
        .unwrap_or(0);
    let traced = (
        session.clock_start.monotonic_ns.max(attached),
        session.clock_end.expect("finished").monotonic_ns,
    );
    let verdicts = classify(&truth, &windows, ranges, traced);
    let rows = recording.table("api");
    // Each row is the truth call on its thread, of its function, whose own times it brackets
    // (its depth may be less: a parent in a library not attached yet is not seen).
    let mut matched: HashSet<(u64, u64, u64)> = HashSet::new();
    for row in &rows {
        let call = truth
            .iter()
            .filter(|c| {
                c["pid"] == row["pid"]
                    && c["tid"] == row["tid"]
                    && c["fn"] == row["name"]
                    && u(&row["start_ns"]) <= u(&c["enter_ns"])
                    && u(&c["exit_ns"]) <= u(&row["end_ns"])
            })
            .min_by_key(|c| u(&c["enter_ns"]))
            .unwrap_or_else(|| panic!("no truth call for row {row:?}"));
        let key = (u(&call["pid"]), u(&call["tid"]), u(&call["enter_ns"]));
        assert_ne!(
            verdicts[&key],
            Verdict::Out,
            "recorded outside every window: {call}\nwindows {:?}",
            windows.0
        );
        assert!(matched.insert(key), "two rows for {call}");
    }
    let inside: Vec<_> = verdicts
        .iter()
        .filter(|(_, v)| **v == Verdict::In)
        .map(|(k, _)| *k)
        .collect();
    for key in &inside {
        assert!(
            matched.contains(key),
            "call inside a window missing: {:?}\nwindows {:?}",
            truth
                .iter()
                .find(|c| (u(&c["pid"]), u(&c["tid"]), u(&c["enter_ns"])) == *key),
            windows.0
        );
    }
    let outside = verdicts.values().filter(|v| **v == Verdict::Out).count();
    assert!(
        outside > 0,
        "the windows left nothing out: the test proves nothing"
    );
    check_tasks(recording, &rows, &verdicts, traced.0);
    // Nothing left out deliberately is counted as lost.
    assert!(session.complete);
    assert_eq!(session.total_drops(), 0, "drops: {:?}", session.drops);
    let a = &session.activity;
    assert_eq!(
        (a.missing_completions, a.channel_records_lost),
        (0, 0),
        "{a:?}"
    );
    if !early {
        assert_eq!(a.channel_records_unmatched, 0, "{a:?}");
    }
    assert_eq!(session.correlation.exits_without_enter, 0);
    assert_eq!(session.correlation.incomplete_calls, 0);
    inside.len()
}

/// Device tasks: only those of recorded calls, and all of those inside the windows. A task
/// submitted before every library file was attached (`attached_ns`) may have no call.
fn check_tasks(
    recording: &Recording,
    api: &[Row],
    verdicts: &HashMap<(u64, u64, u64), Verdict>,
    attached_ns: u64,
) {
    let recorded: HashSet<u64> = api
        .iter()
        .filter_map(|r| r["correlation_id"].as_u64())
        .collect();
    let mut rows = 0;
    for table in TASK_TABLES {
        for row in recording.table(table) {
            let id = row["correlation_id"].as_u64();
            let early = u(&row["submit_ns"]) < attached_ns;
            assert!(
                id.is_some_and(|id| recorded.contains(&id) || (id == 0 && early)),
                "{table} row of no recorded call: {row:?}"
            );
            rows += 1;
        }
    }
    let tasks: Vec<Value> = read_truth(&recording.truth)
        .into_values()
        .flatten()
        .filter(|l| {
            l["type"] == "task" && tests::truth::task_table(l["kind"].as_str().unwrap()).is_some()
        })
        .collect();
    let of = |wanted: &[Verdict]| {
        let picked: Vec<Value> = tasks
            .iter()
            .filter(|t| {
                let key = (u(&t["pid"]), u(&t["tid"]), u(&t["api_enter_ns"]));
                verdicts.get(&key).is_some_and(|v| wanted.contains(v))
            })
            .cloned()
            .collect();
        expected_rows(&picked).len()
    };
    let (least, most) = (of(&[Verdict::In]), of(&[Verdict::In, Verdict::Edge]));
    assert!(
        (least..=most).contains(&rows),
        "{rows} device task rows; the windows hold {least}..={most}"
    );
    assert!(least > 0, "no device task inside the windows");
}

#[test]
fn delay() {
    let workload = [
        vec![sim_bin("npu-sim-app")],
        args(&["train", "--steps", "14", "--step-sleep-ms", "40"]),
    ]
    .concat();
    let recording = record("capture-delay", &["--delay", "300ms"], &workload);
    let capture = recording.session().capture;
    assert_eq!(capture.delay_ns, Some(300_000_000));
    let [window] = &capture.windows[..] else {
        panic!("one window: {:?}", capture.windows);
    };
    assert_eq!(
        (window.opened_by, window.closed_by, window.pid),
        (WindowCause::Delay, Some(WindowCause::Stop), None)
    );
    let start = recording.session().clock_start.monotonic_ns;
    assert!(
        window.start_ns >= start + 300_000_000,
        "recording began {} ms after the session",
        (window.start_ns - start) / 1_000_000
    );
    let inside = check_windows(&recording, false, false);
    println!("{inside} calls inside the window");
}

/// SIGUSR1 starts recording, SIGUSR2 stops it; `--delay 1h` holds it until the first.
#[test]
fn signals() {
    let scratch = scratch_dir("capture-signals");
    let (dir, truth) = (scratch.join("trace"), scratch.join("truth"));
    std::fs::create_dir_all(&truth).expect("truth dir");
    let mut agent = tracer_command(&truth)
        .args(["record", "--delay", "1h", "--out"])
        .arg(&dir)
        .arg("--")
        .arg(sim_bin("npu-sim-app"))
        .args(["train", "--steps", "60", "--step-sleep-ms", "40"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting npu-bpftrace");
    // The handlers are in place once the probes are attached: then signals are safe.
    let stderr = agent.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let reader = thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("attached") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("the agent attached");
    let pid = agent.id() as i32;
    let signal = |signo| {
        // SAFETY: kill(2) of our own child.
        assert_eq!(unsafe { libc::kill(pid, signo) }, 0);
    };
    for (after_ms, signo) in [
        (300, libc::SIGUSR1),
        (400, libc::SIGUSR2),
        (300, libc::SIGUSR2),
        (300, libc::SIGUSR1),
    ] {
        thread::sleep(Duration::from_millis(after_ms));
        signal(signo);
    }
    let status = agent.wait().expect("waiting for the agent");
    let stderr = reader.join().expect("stderr reader");
    assert!(status.success(), "{status}\n{stderr}");
    assert!(stderr.contains("SIGUSR2: paused already"), "{stderr}");
    let recording = Recording {
        dir,
        truth,
        output: std::process::Output {
            status,
            stdout: Vec::new(),
            stderr: stderr.into_bytes(),
        },
    };
    let capture = recording.session().capture;
    let causes: Vec<_> = capture
        .windows
        .iter()
        .map(|w| (w.opened_by, w.closed_by))
        .collect();
    use WindowCause::*;
    assert_eq!(
        causes,
        [(Sigusr1, Some(Sigusr2)), (Sigusr1, Some(Stop))],
        "{:?}",
        capture.windows
    );
    let inside = check_windows(&recording, false, false);
    println!("{inside} calls inside the windows");
}

/// Two ranks, each recording only its first three `forward` domain ranges (`mstxDomainRange
/// StartA(dom, "forward")` .. `mstxDomainRangeEnd`): tracing stops once both have.
#[test]
fn mstx_range() {
    let workload = [
        vec![sim_bin("npu-sim-run")],
        args(&[
            "--nproc",
            "2",
            "--",
            "npu-sim-app",
            "train",
            "--steps",
            "6",
            "--step-sleep-ms",
            "20",
        ]),
    ]
    .concat();
    let recording = record(
        "capture-mstx",
        &[
            "--capture-range",
            "mstx:forward",
            "--capture-range-count",
            "3",
        ],
        &workload,
    );
    let session = recording.session();
    let range = session.capture.range.clone().expect("range");
    assert_eq!((range.message.as_str(), range.count), ("forward", Some(3)));
    let mut per_pid: HashMap<u32, Vec<&CaptureWindow>> = HashMap::new();
    for w in session.capture.windows.iter().filter(|w| w.pid.is_some()) {
        per_pid.entry(w.pid.unwrap_or(0)).or_default().push(w);
    }
    assert_eq!(
        per_pid.len(),
        2,
        "a window per rank: {:?}",
        session.capture.windows
    );
    for windows in per_pid.values() {
        assert_eq!(windows.len(), 3, "three ranges each: {windows:?}");
        for w in windows {
            assert_eq!(
                (w.opened_by, w.closed_by),
                (WindowCause::MstxRange, Some(WindowCause::MstxRange))
            );
            assert!(w.range_id.is_some() && w.tid.is_some());
        }
    }
    let inside = check_windows(&recording, true, true);
    println!("{inside} calls inside the windows");
    // The markers: the three forward ranges of each rank, with their messages, and no step
    // range (those began outside).
    let markers = recording.table("marker");
    let forward = markers
        .iter()
        .filter(|m| m["kind"] == "range" && m["message"] == "forward")
        .count();
    assert_eq!(forward, 6, "{markers:?}");
    assert!(
        markers
            .iter()
            .all(|m| m["message"] != "step 3" && m["message"] != "step 0"),
        "{markers:?}"
    );
}

/// A running process: `attach` with a capture range records its next two `forward` ranges
/// and stops by itself.
#[test]
fn attach_mstx_range() {
    let scratch = scratch_dir("capture-attach");
    let (dir, truth) = (scratch.join("trace"), scratch.join("truth"));
    std::fs::create_dir_all(&truth).expect("truth dir");
    let (app, pid) = start_long_train(&truth, &scratch.join("app.log"), "2026");
    let out = tracer_command(&truth)
        .args(["attach", "--pid", &pid.to_string()])
        .args([
            "--capture-range",
            "mstx:forward",
            "--capture-range-count",
            "2",
        ])
        .args(["--duration", "60s", "--out"])
        .arg(&dir)
        .output()
        .expect("running npu-bpftrace");
    // The agent stopped by itself after the ranges; the workload ran on.
    stop(app);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    assert!(stderr.contains("recorded its capture ranges"), "{stderr}");
    let recording = Recording {
        dir,
        truth,
        output: out,
    };
    let session = recording.session();
    let windows: Vec<_> = session
        .capture
        .windows
        .iter()
        .filter(|w| w.pid == Some(pid))
        .collect();
    assert_eq!(windows.len(), 2, "{:?}", session.capture.windows);
    let inside = check_windows(&recording, true, true);
    println!("{inside} calls inside the windows");
}

/// `--out` placeholders, `--quiet` and `--print-format json`.
#[test]
fn conventions() {
    let scratch = scratch_dir("capture-conventions");
    let truth = scratch.join("truth");
    std::fs::create_dir_all(&truth).expect("truth dir");
    let template = scratch.join("trace-%h-%p-r%r-%%");
    let out = tracer_command(&truth)
        // Not RANK, which the simulated ranks read themselves.
        .env("SLURM_PROCID", "7")
        .args(["record", "--quiet", "--print-format", "json", "--out"])
        .arg(&template)
        .arg("--")
        .arg(sim_bin("npu-sim-app"))
        .args(["train", "--steps", "2"])
        .output()
        .expect("running npu-bpftrace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    assert!(
        !stderr.contains("npu-bpftrace:"),
        "--quiet prints no status: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let exits = lines.iter().filter(|l| l["event"] == "exit").count();
    assert!(exits > 0 && lines.iter().any(|l| l["event"] == "enter"));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let found: Vec<_> = std::fs::read_dir(&scratch)
        .expect("scratch")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("trace-"))
        .collect();
    let [name] = &found[..] else {
        panic!("one trace directory: {found:?}");
    };
    let pid = lines[0]["pid"].as_u64().expect("pid");
    assert_eq!(name, &format!("trace-{}-{pid}-r7-%", host.trim()));
    let rows = tests::read_table(&scratch.join(name), "api");
    assert_eq!(rows.len(), exits, "a JSON exit line per api row");
    // %r without a rank is refused before anything starts, with exit status 1.
    let out = tracer_command(&truth)
        .env_remove("RANK")
        .env_remove("SLURM_PROCID")
        .args(["record", "--out"])
        .arg(scratch.join("norank-%r"))
        .arg("--")
        .arg("true")
        .output()
        .expect("running npu-bpftrace");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("%r: no rank"));
    // A capture range no traced function can open is refused.
    let out = tracer_command(&truth)
        .args([
            "record",
            "--domain",
            "acl",
            "--capture-range",
            "mstx:step",
            "--out",
        ])
        .arg(scratch.join("no-mstx"))
        .arg("--")
        .arg("true")
        .output()
        .expect("running npu-bpftrace");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--capture-range needs"));
}
