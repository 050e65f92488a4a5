//! The fault suite: what happens to a trace when things go wrong around the agent (signals,
//! killed processes, full or read-only disks, a removed or hostile output directory). Each
//! test checks the dataset against the simulator's ground truth: nothing may be lost
//! silently.
use std::{
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
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
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
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

/// A small tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: PathBuf, size: &str) -> Self {
        std::fs::create_dir_all(&at).unwrap();
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size},mode=0700"))
            .arg("tmpfs")
            .arg(&at));
        Self(at)
    }

    /// Fills the file system up: returns the filler file.
    fn fill(&self) -> PathBuf {
        let filler = self.0.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 4096];
        while std::io::Write::write_all(&mut file, &block).is_ok() {}
        filler
    }

    /// Remounts read-only or read-write (retrying while a file is open for writing).
    fn remount(&self, options: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let status = Command::new("mount")
                .args(["-o", &format!("remount,{options}")])
                .arg(&self.0)
                .status()
                .unwrap();
            if status.success() {
                return;
            }
            assert!(Instant::now() < deadline, "remount,{options} failed");
            sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn run(cmd: &mut Command) {
    let status = cmd.status().unwrap();
    assert!(status.success(), "{cmd:?}: {status}");
}

/// `record --out DIR -- npu-sim-app train` of about 2-3 s, started; returns the agent, the
/// workload's pid and the truth directory.
fn start_train(name: &str, dir: &Path) -> (Child, u32, PathBuf) {
    let (scratch, truth, _) = scratch(name);
    let mut cmd = tracer_command(&truth);
    cmd.stderr(Stdio::piped())
        .args(["record", "--out"])
        .arg(dir)
        .args([
            "--",
            "npu-sim-app",
            "train",
            "--steps",
            "150",
            "--step-sleep-ms",
            "10",
        ]);
    let (mut agent, pid) = spawn_workload(&mut cmd, &scratch.join("app.log"));
    wait_started(dir, &mut agent);
    (agent, pid, truth)
}

/// The agent's stderr, once it has exited.
fn stderr_of(agent: Child) -> String {
    let out = agent.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Hidden `.tmp` part files anywhere under `dir`.
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.to_string_lossy().ends_with(".parquet.tmp") {
                found.push(path);
            }
        }
    }
    found
}

/// Truth api calls of `pid`.
fn truth_calls(truth: &Path, pid: u32) -> Vec<serde_json::Value> {
    read_truth(truth)
        .remove(&u64::from(pid))
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l["type"] == "api" && l["lib"] != "libascend_hal.so")
        .collect()
}

/// The disk fills up while tracing and is freed 2 s later: the rows wait in memory and are
/// written then; every call of the truth is in the trace, the agent exits 0, no `.tmp` is
/// left, and session.json and a critical event say what happened.
#[test]
fn disk_full_for_a_while_loses_nothing() {
    let _serial = one_at_a_time();
    let fs = Tmpfs::mount(scratch_dir("fault-enospc-fs").join("mnt"), "2m");
    let dir = fs.0.join("trace");
    let (mut agent, pid, truth) = start_train("fault-enospc", &dir);
    let filler = fs.fill();
    sleep(Duration::from_millis(2000));
    std::fs::remove_file(filler).unwrap();
    let _ = wait_within(&mut agent, Duration::from_secs(60));
    let status = agent.try_wait().unwrap().unwrap();
    let stderr = stderr_of(agent);
    assert!(status.success(), "{status}\n{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert_api_matches(&read_table(&dir, "api"), &truth_calls(&truth, pid));
    let session = session(&dir);
    assert!(session.complete);
    assert!(session.output.write_errors >= 1, "{:?}", session.output);
    assert!(session.output.rows_lost.is_empty(), "{:?}", session.output);
    let events = read_table(&dir, "critical_event");
    assert!(
        events.iter().any(|e| e["kind"] == "output_write_error"),
        "{events:?}"
    );
    assert_eq!(leftovers(&dir), Vec::<PathBuf>::new());
}

/// The disk stays full to the end: the rows that could not be written are counted per table
/// in session.json (which the space reserved at start still lets the agent write), the
/// files plus the lost rows are the truth's calls, no `.tmp` is left, and the agent exits
/// 74 (trace incomplete) although the workload succeeded.
#[test]
fn disk_full_to_the_end_counts_what_is_lost() {
    let _serial = one_at_a_time();
    let fs = Tmpfs::mount(scratch_dir("fault-enospc-end-fs").join("mnt"), "2m");
    let dir = fs.0.join("trace");
    let (mut agent, pid, truth) = start_train("fault-enospc-end", &dir);
    let _filler = fs.fill();
    let _ = wait_within(&mut agent, Duration::from_secs(60));
    let status = agent.try_wait().unwrap().unwrap();
    let stderr = stderr_of(agent);
    assert_eq!(status.code(), Some(74), "{stderr}");
    assert!(stderr.contains("trace is incomplete"), "{stderr}");
    let session = session(&dir);
    assert!(
        session.complete,
        "the final session.json, through reserved space"
    );
    let calls = truth_calls(&truth, pid).len() as u64;
    let in_files = read_table(&dir, "api").len() as u64;
    let lost = session.output.rows_lost.get("api").copied().unwrap_or(0);
    assert!(lost > 0, "{:?}", session.output);
    assert_eq!(session.rows["api"], calls);
    assert_eq!(in_files + lost, calls, "{:?}", session.output);
    assert!(
        session
            .output
            .error
            .as_deref()
            .is_some_and(|e| e.contains("No space left")),
        "{:?}",
        session.output
    );
    assert_eq!(leftovers(&dir), Vec::<PathBuf>::new());
}

/// The file system goes read-only for 2 s (a remount, as after an I/O error) and comes back:
/// nothing is lost.
#[test]
fn read_only_remount_for_a_while_loses_nothing() {
    let _serial = one_at_a_time();
    let fs = Tmpfs::mount(scratch_dir("fault-erofs-fs").join("mnt"), "64m");
    let dir = fs.0.join("trace");
    let (mut agent, pid, truth) = start_train("fault-erofs", &dir);
    fs.remount("ro");
    sleep(Duration::from_millis(2000));
    fs.remount("rw");
    let _ = wait_within(&mut agent, Duration::from_secs(60));
    let status = agent.try_wait().unwrap().unwrap();
    let stderr = stderr_of(agent);
    assert!(status.success(), "{status}\n{stderr}");
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert_api_matches(&read_table(&dir, "api"), &truth_calls(&truth, pid));
    let session = session(&dir);
    assert!(session.complete && session.output.write_errors >= 1);
    assert!(session.output.rows_lost.is_empty(), "{:?}", session.output);
    assert_eq!(leftovers(&dir), Vec::<PathBuf>::new());
}

/// The output directory is removed while tracing: the agent makes it again and goes on;
/// the rows of the removed parts are counted lost, so the files plus the lost rows are
/// the truth's calls, and the agent exits 74.
#[test]
fn output_removed_is_made_again_and_counted() {
    let _serial = one_at_a_time();
    let dir = scratch_dir("fault-removed-out").join("trace");
    let (mut agent, pid, truth) = start_train("fault-removed", &dir);
    sleep(Duration::from_millis(1500));
    std::fs::remove_dir_all(&dir).unwrap();
    let _ = wait_within(&mut agent, Duration::from_secs(60));
    let status = agent.try_wait().unwrap().unwrap();
    let stderr = stderr_of(agent);
    assert_eq!(status.code(), Some(74), "{stderr}");
    let session = session(&dir);
    assert!(session.complete && session.output.directory_removed);
    let calls = truth_calls(&truth, pid).len() as u64;
    let in_files = read_table(&dir, "api").len() as u64;
    let lost = session.output.rows_lost.get("api").copied().unwrap_or(0);
    assert!(lost > 0, "{:?}", session.output);
    assert_eq!(in_files + lost, calls, "{:?}", session.output);
}

/// No symbolic link is followed in or below `--out`, and an existing `--out` of another
/// user is refused; nothing is written where the links point.
#[test]
fn output_links_and_foreign_directories_are_refused() {
    let (scratch, truth, _) = scratch("fault-links");
    let elsewhere = scratch.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let link = scratch.join("link");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let planted = scratch.join("planted");
    std::fs::create_dir_all(planted.join("api")).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    std::os::unix::fs::symlink(
        &elsewhere,
        planted.join("api").join(format!("host={}", host.trim())),
    )
    .unwrap();
    let foreign = scratch.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    let cases = [
        (link.clone(), "is a symbolic link"),
        (link.join("sub"), "is a symbolic link"),
        (planted, "refusing to write through it"),
        (foreign.clone(), "belongs to uid 65534"),
    ];
    for (out, says) in cases {
        let output = tracer_command(&truth)
            .args(["record", "--out"])
            .arg(&out)
            .args(["--", "npu-sim-app", "alloc"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{}: {stderr}", out.display());
        assert!(stderr.contains(says), "{}: {stderr}", out.display());
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 0);
}

/// A damaged part (truncated, as by a disk error) does not abort `report`: it is skipped
/// with a warning that counts it, the report covers the other parts' rows exactly, and
/// `--strict` makes it an error.
#[test]
fn report_skips_a_corrupt_part() {
    let recording = tests::record(
        "fault-corrupt-part",
        &[],
        &[
            "npu-sim-app",
            "train",
            "--steps",
            "20",
            "--step-sleep-ms",
            "100",
        ]
        .map(String::from),
    );
    let dir = &recording.dir;
    let all = read_table(dir, "api").len();
    let host_dir = std::fs::read_dir(dir.join("api"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut parts: Vec<PathBuf> = std::fs::read_dir(&host_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    parts.sort();
    let victim = &parts[0];
    let len = std::fs::metadata(victim).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(victim)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let left = tracer_schema::dataset::Dataset::open_skipping_corrupt(dir)
        .unwrap()
        .table("api")
        .rows();
    assert!(left < all, "the damaged part held rows");

    let output = tests::npu_bpftrace_command()
        .args(["report", "--format", "json"])
        .arg(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("1 corrupt parts skipped"), "{stderr}");
    assert!(stderr.contains(&victim.display().to_string()), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let calls: u64 = report["api"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["count"].as_u64().unwrap())
        .sum();
    assert_eq!(calls, left as u64);

    let strict = tests::npu_bpftrace_command()
        .args(["report", "--strict"])
        .arg(dir)
        .output()
        .unwrap();
    assert_eq!(strict.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&strict.stderr).contains("--strict"));
}

/// Clear states: attaching to a zombie says so; a `--lib` with nothing traceable is
/// warned about; every mode says when it is ready ("attached N probes in M processes").
#[test]
fn unclear_states_are_named() {
    let (scratch, truth, dir) = scratch("fault-states");
    // A zombie: a child that exited and that nobody has waited for yet.
    let mut dead = Command::new("true").spawn().unwrap();
    while !zombie(dead.id()) {
        sleep(Duration::from_millis(10));
    }
    let output = tracer_command(&truth)
        .args(["attach", "--pid", &dead.id().to_string()])
        .output()
        .unwrap();
    let _ = dead.wait();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr.contains("has exited: it is a zombie"), "{stderr}");

    let not_cann = scratch.join("not-cann");
    std::fs::create_dir_all(&not_cann).unwrap();
    std::fs::copy("/bin/true", not_cann.join("libascendcl.so")).unwrap();
    let nothing = scratch.join("nothing");
    std::fs::create_dir_all(&nothing).unwrap();
    let output = tracer_command(&truth)
        .args(["record", "--lib"])
        .arg(&not_cann)
        .arg("--lib")
        .arg(&nothing)
        .arg("--out")
        .arg(&dir)
        .args(["--", "npu-sim-app", "alloc"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--lib {}: none of the enabled functions",
            not_cann.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "--lib {}: no CANN library file there",
            nothing.display()
        )),
        "{stderr}"
    );
    let attached = session(&dir).attached;
    let probes: usize = attached.iter().map(|f| f.functions.len()).sum();
    assert!(
        stderr.contains(&format!("attached {probes} probes in 1 process")),
        "{stderr}"
    );
}

/// A session right after one with perf-event uprobes waits, and says so, until the earlier
/// session's probes are released, then traces every call.
#[test]
fn waiting_for_a_previous_release_is_shown() {
    let _serial = one_at_a_time();
    let run = |name: &str| {
        let (_, truth, dir) = scratch(name);
        let output = tracer_command(&truth)
            .env("NPU_BPFTRACE_UPROBE_MULTI", "0")
            .args(["record", "--domain", "mstx,hccl", "--out"])
            .arg(&dir)
            .args(["--", "npu-sim-app", "alloc"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{stderr}");
        stderr
    };
    run("fault-release-a");
    let stderr = run("fault-release-b");
    assert!(stderr.contains("to release their probes"), "{stderr}");
    assert!(
        stderr.contains("previous probes released after"),
        "{stderr}"
    );
    assert!(
        stderr.find("released after") < stderr.find("attached"),
        "waited before attaching: {stderr}"
    );
}

/// Least privilege: as an ordinary user (nobody) with exactly CAP_BPF, CAP_PERFMON and
/// CAP_DAC_READ_SEARCH (tracefs is mode 0700 here; the tracepoint ids are read there), the
/// agent records every call of the truth; once attached, every thread of it holds only
/// CAP_BPF and CAP_PERFMON, and the traced command none.
#[test]
fn least_privilege_records_everything_and_drops_the_rest() {
    let _serial = one_at_a_time();
    let (scratch, truth, dir) = scratch("fault-privileges");
    let nobody = 65534;
    for path in [&scratch, &truth] {
        std::os::unix::fs::chown(path, Some(nobody), Some(nobody)).unwrap();
    }
    let caps = "+bpf,+perfmon,+dac_read_search";
    let template = tracer_command(&truth);
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps={caps}"))
        .arg(format!("--ambient-caps={caps}"))
        .arg(template.get_program())
        .args(["record", "--out"])
        .arg(&dir)
        .args([
            "--",
            "npu-sim-app",
            "train",
            "--steps",
            "40",
            "--step-sleep-ms",
            "20",
        ])
        .stderr(Stdio::piped());
    for (key, value) in template.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let (mut agent, pid) = spawn_workload(&mut cmd, &scratch.join("app.log"));
    wait_started(&dir, &mut agent);
    // setpriv execs the agent: the child is the agent itself.
    let bpf_perfmon = (1u64 << 39) | (1 << 38);
    let threads: Vec<u64> = std::fs::read_dir(format!("/proc/{}/task", agent.id()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("status")).ok())
        .map(|status| cap_eff(&status))
        .collect();
    assert!(threads.len() > 1);
    assert!(
        threads.iter().all(|&c| c == bpf_perfmon),
        "every thread keeps CAP_BPF and CAP_PERFMON only: {threads:x?}"
    );
    let workload = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert_eq!(
        cap_eff(&workload),
        0,
        "the traced command has no capabilities"
    );
    let status = wait_within(&mut agent, Duration::from_secs(60));
    let stderr = stderr_of(agent);
    assert!(status.success(), "{status}\n{stderr}");
    assert_api_matches(&read_table(&dir, "api"), &truth_calls(&truth, pid));
    let session = session(&dir);
    assert!(session.complete);
    assert_eq!(session.total_drops(), 0);
}

/// CapEff of a /proc status file.
fn cap_eff(status: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .expect("CapEff")
}

/// The agent is SIGKILLed while tracing: every part it renamed into place is complete and
/// readable, they hold every call that returned up to about a second before the kill (one
/// flush period), no part is damaged, and session.json is the preliminary one.
#[test]
fn agent_sigkill_leaves_readable_parts() {
    let _serial = one_at_a_time();
    let (scratch, truth, dir) = scratch("fault-agent-sigkill");
    let (app, pid) = start_long_train(&truth, &scratch.join("app.log"), "2026");
    let mut agent = tracer_command(&truth)
        .args(["attach", "--pid", &pid.to_string(), "--ringbuf-mb", "64"])
        .arg("--out")
        .arg(&dir)
        .spawn()
        .unwrap();
    wait_started(&dir, &mut agent);
    sleep(Duration::from_millis(2500));
    let killed_ns = monotonic_ns();
    kill(agent.id(), libc::SIGKILL);
    let _ = agent.wait();
    stop(app);
    let session = session(&dir);
    assert!(
        !session.complete,
        "a killed agent leaves the preliminary session.json"
    );
    // Dataset::open (strict) fails on any unreadable part.
    let rows = read_table(&dir, "api");
    let last_end = rows
        .iter()
        .filter_map(|r| r["end_ns"].as_u64())
        .max()
        .unwrap();
    let lost_ns = killed_ns.saturating_sub(last_end);
    assert!(
        lost_ns < 2_000_000_000,
        "the last durable call ended {lost_ns} ns before the kill"
    );
    let checked = assert_window_complete(
        &rows,
        &truth_of(&truth, pid),
        session.clock_start.monotonic_ns,
    );
    assert!(checked > 50, "only {checked} calls");
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
