//! Processes with their own copy of the CANN libraries, as in a container image: under
//! `record --system-wide` they are traced from their first call (`aclInit`), call for call
//! as the ground truth has them, with their kernels named, although no probe was on their
//! files when they started.
//!
//! Each "container" is a mount namespace of its own (`unshare --mount --propagation
//! private`) in which a copy of the simulator tree is bind-mounted over the host's: the
//! process sees the same paths as the host's processes, but other files (other inodes), so
//! the host's probes do not apply to it and a path alone does not tell the files apart.
use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Mutex, MutexGuard},
    thread::sleep,
    time::{Duration, Instant},
};

use serde_json::Value;
use tests::{
    Row, attach::session, read_table, read_truth, scratch_dir, sim_command, sim_home,
    tracer_command, truth::assert_api_matches,
};

/// One system-wide agent at a time: each holds the other's containers.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A copy of the simulator tree: the container's image.
fn image(scratch: &Path, name: &str) -> PathBuf {
    let copy = scratch.join(name);
    let status = Command::new("cp")
        .arg("-a")
        .arg(sim_home())
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success(), "copying the simulator tree");
    copy
}

/// `npu-sim-app ARGS` in a new mount namespace where `image` is mounted over the simulator
/// tree; its environment (library path, truth) is the host's.
fn in_container(image: &Path, truth: &Path, args: &[&str]) -> Command {
    let template = sim_command("npu-sim-app", truth);
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(r#"mount --bind "$1" "$2" || exit 97; shift 2; exec "$@""#)
        .arg("container")
        .arg(image)
        .arg(sim_home())
        .arg(sim_home().join("bin/npu-sim-app"))
        .args(args);
    for (key, value) in template.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    cmd
}

/// Runs `cmd` to its end; returns its pid (the workload's, `sh` execs it) and how long it ran.
fn run(mut cmd: Command) -> (u32, Duration) {
    let started = Instant::now();
    let out = cmd.stdout(Stdio::piped()).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let pid = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("workload printed no pid: {text}"));
    (pid, started.elapsed())
}

/// Truth api calls of `pid` (traced libraries only), and the trace's rows of that pid.
fn calls_of(truth: &Path, dir: &Path, pid: u32) -> (Vec<Value>, Vec<Row>) {
    let truth: Vec<Value> = read_truth(truth)
        .remove(&u64::from(pid))
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l["type"] == "api" && l["lib"] != "libascend_hal.so")
        .collect();
    let rows = read_table(dir, "api")
        .into_iter()
        .filter(|r| r["pid"].as_u64() == Some(u64::from(pid)))
        .collect();
    (truth, rows)
}

/// How long after the process's first call its first traced call began (ms; infinite when
/// none was traced).
fn first_traced_after_ms(truth: &[Value], rows: &[Row]) -> f64 {
    let first_call = truth.iter().filter_map(|c| c["enter_ns"].as_u64()).min();
    let first_row = rows.iter().filter_map(|r| r["start_ns"].as_u64()).min();
    match (first_call, first_row) {
        (Some(call), Some(row)) => (row as f64 - call as f64) / 1e6,
        _ => f64::INFINITY,
    }
}

/// Every call of the truth is in the trace, the first one (`aclInit`) included, and every
/// kernel launch is named (the kernels were registered at the start).
fn assert_traced_from_the_start(truth: &[Value], rows: &[Row], what: &str) {
    assert!(!truth.is_empty(), "{what}: no ground truth");
    let first = truth.iter().min_by_key(|c| c["enter_ns"].as_u64()).unwrap();
    println!(
        "{what}: {} rows for {} truth calls; first call {}",
        rows.len(),
        truth.len(),
        first["fn"]
    );
    assert_eq!(
        first["fn"], "aclInit",
        "{what}: the truth begins with aclInit"
    );
    assert!(
        rows.iter().any(|r| r["name"] == "aclInit"),
        "{what}: aclInit missing: {} of {} calls traced",
        rows.len(),
        truth.len()
    );
    assert_api_matches(rows, truth);
    let launches: Vec<&Row> = rows
        .iter()
        .filter(|r| r["name"] == "aclrtLaunchKernel")
        .collect();
    assert!(!launches.is_empty(), "{what}: no kernel launch");
    assert!(
        launches.iter().all(|r| r["kernel_name"].is_string()),
        "{what}: unnamed kernels"
    );
}

/// `record --system-wide --out DIR`, started; returns once it traces.
fn start_agent(truth: &Path, dir: &Path) -> Child {
    let mut agent = tracer_command(truth)
        .args(["record", "--system-wide", "--out"])
        .arg(dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("session.json").exists() {
        assert!(
            agent.try_wait().unwrap().is_none(),
            "the agent exited before it started"
        );
        assert!(Instant::now() < deadline, "agent did not start");
        sleep(Duration::from_millis(50));
    }
    agent
}

#[test]
fn containers_are_traced_from_their_first_call() {
    let _serial = one_at_a_time();
    let scratch = scratch_dir("containers");
    let (truth, dir) = (scratch.join("truth"), scratch.join("trace"));
    std::fs::create_dir_all(&truth).unwrap();
    // Copied before the agent starts: the copies are each a container's own files.
    let images = ["short", "long", "dlopen"].map(|name| image(&scratch, name));
    let agent = start_agent(&truth, &dir);
    let short = run(in_container(
        &images[0],
        &truth,
        &["train", "--steps", "40", "--step-sleep-ms", "20"],
    ));
    let long = run(in_container(
        &images[1],
        &truth,
        &["train", "--steps", "200", "--step-sleep-ms", "20"],
    ));
    // Libraries loaded with dlopen as the program goes, not by the loader at start.
    let dlopen = run(in_container(
        &images[2],
        &truth,
        &[
            "--dlopen",
            "train",
            "--steps",
            "20",
            "--step-sleep-ms",
            "10",
        ],
    ));
    // A host process: its libraries are the host's, attached at start; it is not held.
    let host = run({
        let mut cmd = sim_command("npu-sim-app", &truth);
        cmd.args(["train", "--steps", "10"]);
        cmd
    });
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(agent.id() as i32, libc::SIGINT) };
    let out = agent.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);

    let runs = [
        (short, "short container run"),
        (long, "long container run"),
        (dlopen, "container run with dlopen"),
        (host, "host run"),
    ]
    .map(|((pid, took), what)| {
        let (truth_calls, rows) = calls_of(&truth, &dir, pid);
        println!(
            "{what}: pid {pid}, {:.2} s, {} of {} calls traced; first traced {:.1} ms after the first call",
            took.as_secs_f64(),
            rows.len(),
            truth_calls.len(),
            first_traced_after_ms(&truth_calls, &rows)
        );
        (what, truth_calls, rows)
    });
    for (what, truth_calls, rows) in &runs {
        assert_traced_from_the_start(truth_calls, rows, what);
    }
    let session = session(&dir);
    println!("holds: {:?}", session.holds);
    assert!(session.complete);
    assert_eq!(session.total_drops(), 0, "{:?}", session.drops);
    let holds = &session.holds;
    assert!(holds.enabled, "{holds:?}");
    // Other processes on this machine may be held too (system-wide); these three were.
    assert!(holds.processes >= 3, "{holds:?}");
    assert!(holds.files_attached >= 3, "{holds:?}");
    assert_eq!(holds.timed_out, 0, "{holds:?}");
    assert_eq!(holds.left_stopped, 0, "{holds:?}");
    assert_eq!(holds.missed, 0, "{holds:?}");
    // The containers' copies were attached through the processes' roots.
    for pid in [short.0, long.0, dlopen.0] {
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        assert!(
            session.attached.iter().any(|f| f.path.starts_with(&root)),
            "no file of pid {pid} attached: {:?}",
            session.attached.iter().map(|f| &f.path).collect::<Vec<_>>()
        );
    }
}

fn signal(pid: u32, signo: i32) {
    // SAFETY: plain kill(2) of a process this test started.
    unsafe { libc::kill(pid as i32, signo) };
}

/// The state letter of `/proc/PID/stat` (`T`: stopped).
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// Waits until `pid` is stopped (held).
fn wait_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while state(pid) != Some('T') {
        assert!(Instant::now() < deadline, "pid {pid} was never held");
        sleep(Duration::from_millis(10));
    }
}

/// Waits for `child` at most `limit`; panics unless it exits successfully in time.
fn exits_within(child: &mut Child, limit: Duration, what: &str) -> Duration {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{what}: {status}");
            return started.elapsed();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("{what}: still running after {limit:?}");
        }
        sleep(Duration::from_millis(10));
    }
}

/// Nothing stays stopped when the agent cannot answer. With the agent itself stopped, a
/// held container is continued once the hold bound (3 s) runs out, and holding is off until
/// the agent answers again (so the container's later libraries do not wait 3 s each); the
/// agent, continued, counts the hold as timed out. When the agent is killed, every held
/// process is continued at once, except one that someone else stopped meanwhile: it stays
/// stopped (and runs on when that someone continues it).
#[test]
fn held_processes_are_never_left_stopped() {
    let _serial = one_at_a_time();
    let scratch = scratch_dir("containers-held");
    let truth = scratch.join("truth");
    std::fs::create_dir_all(&truth).unwrap();
    let images = ["bound", "killed", "stopped"].map(|name| image(&scratch, name));
    let workload = ["train", "--steps", "5"];
    let spawn = |image: &Path| {
        in_container(image, &truth, &workload)
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };

    let dir = scratch.join("trace-bound");
    let agent = start_agent(&truth, &dir);
    // The agent reads no hold event while stopped; its watchdog still runs.
    signal(agent.id(), libc::SIGSTOP);
    let mut bound = spawn(&images[0]);
    wait_stopped(bound.id());
    let took = exits_within(&mut bound, Duration::from_secs(20), "held past the bound");
    println!("held past the bound: ran {:.2} s", took.as_secs_f64());
    assert!(
        took > Duration::from_millis(2500) && took < Duration::from_millis(6000),
        "held once, for the bound: {took:?}"
    );
    signal(agent.id(), libc::SIGCONT);
    signal(agent.id(), libc::SIGINT);
    let out = agent.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let holds = session(&dir).holds;
    println!("holds: {holds:?}");
    assert!(holds.timed_out >= 1, "{holds:?}");

    let mut agent = start_agent(&truth, &scratch.join("trace-killed"));
    signal(agent.id(), libc::SIGSTOP);
    let (mut killed, mut stopped) = (spawn(&images[1]), spawn(&images[2]));
    wait_stopped(killed.id());
    wait_stopped(stopped.id());
    // Someone else stops it while it is held.
    signal(stopped.id(), libc::SIGSTOP);
    signal(agent.id(), libc::SIGKILL);
    let _ = agent.wait();
    let took = exits_within(
        &mut killed,
        Duration::from_secs(20),
        "held when the agent died",
    );
    println!(
        "held when the agent died: ran {:.2} s after",
        took.as_secs_f64()
    );
    assert!(
        took < Duration::from_millis(2000),
        "not continued at once: {took:?}"
    );
    sleep(Duration::from_millis(500));
    assert_eq!(
        state(stopped.id()),
        Some('T'),
        "a stop sent by another was undone"
    );
    signal(stopped.id(), libc::SIGCONT);
    exits_within(&mut stopped, Duration::from_secs(20), "stopped by another");
}
