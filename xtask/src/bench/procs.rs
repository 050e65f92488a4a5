//! Processes for `cargo xtask bench`: running a command while sampling its CPU time and
//! memory from /proc, and waiting until no other tracer runs on the machine.
use std::{
    fs,
    process::{Command, ExitStatus},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

/// Process names of tracers: ours (the agent and its detached release helpers) and bpftrace.
const TRACERS: [&str; 2] = ["npu-bpftrace", "bpftrace"];
const SAMPLE: Duration = Duration::from_millis(10);

/// What a monitored process used.
#[derive(Debug, Clone, Default)]
pub(crate) struct Usage {
    pub status: Option<ExitStatus>,
    pub wall_s: f64,
    /// utime + stime of the process itself, without the children it reaped: wait4's total
    /// minus the children's share that /proc/PID/stat last showed (final once the traced
    /// command was reaped, which happens before the agent's last flush).
    pub self_cpu_s: f64,
    /// wait4's utime + stime: the process and every child it reaped.
    pub total_cpu_s: f64,
    /// VmHWM of the process itself, last sampled (every 10 ms) before it exited.
    pub peak_rss_bytes: u64,
    /// At the largest VmRSS sample: anonymous memory (heap, stacks) and file-backed pages
    /// (the binary, and the BPF ring buffer, whose data pages user space maps twice).
    pub rss_anon_bytes: u64,
    pub rss_file_bytes: u64,
    /// wait4's ru_maxrss: the largest of the process and the children it reaped.
    pub max_rss_with_children_bytes: u64,
    /// Another tracer (not this process) ran at some point while this one did.
    pub foreign_tracer_seen: bool,
    /// The traced window: from when the process's child left the `npu-bpftrace record`
    /// gate (its `sh` exec'd the command, so the probes were attached) until that child
    /// exited. None when no such child was seen.
    pub window_s: Option<f64>,
    /// utime + stime of the process itself during that window.
    pub window_cpu_s: Option<f64>,
    /// From the start of the process to the start of the window: loading and attaching.
    pub startup_s: Option<f64>,
}

/// Tracks the traced window of a `record` agent through /proc/PID/task/PID/children.
#[derive(Default)]
struct Window {
    child: Option<u32>,
    start: Option<(Instant, f64)>,
    end: Option<(Instant, f64)>,
}

impl Window {
    fn observe(&mut self, pid: i32, tick: f64) {
        if self.end.is_some() {
            return;
        }
        let children =
            fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        let children: Vec<u32> = children
            .split_whitespace()
            .filter_map(|c| c.parse().ok())
            .collect();
        let cpu = || own_ticks(pid).map(|t| t as f64 / tick);
        match (self.child, self.start) {
            (None, _) => self.child = children.first().copied(),
            (Some(child), None) => {
                let comm = fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
                if !comm.is_empty() && comm.trim() != "sh" {
                    self.start = cpu().map(|c| (Instant::now(), c));
                }
            }
            (Some(child), Some(_)) => {
                if !children.contains(&child) {
                    self.end = cpu().map(|c| (Instant::now(), c));
                }
            }
        }
    }
}

/// Runs `cmd` to completion, sampling /proc/PID every 10 ms.
pub(crate) fn run_monitored(cmd: &mut Command) -> Result<Usage> {
    let start = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    let pid = child.id() as i32;
    let tick = ticks_per_second();
    let mut usage = Usage::default();
    let mut children_cpu_s = 0.0;
    let mut largest_rss = 0;
    let mut last_scan = Instant::now() - Duration::from_secs(1);
    let mut window = Window::default();
    loop {
        window.observe(pid, tick);
        if let Some((cutime, cstime)) = children_ticks(pid) {
            children_cpu_s = (cutime + cstime) as f64 / tick;
        }
        if let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) {
            let kib = |key| status_kib(&status, key).unwrap_or(0) * 1024;
            usage.peak_rss_bytes = usage.peak_rss_bytes.max(kib("VmHWM:"));
            if kib("VmRSS:") >= largest_rss {
                largest_rss = kib("VmRSS:");
                usage.rss_anon_bytes = kib("RssAnon:");
                usage.rss_file_bytes = kib("RssFile:") + kib("RssShmem:");
            }
        }
        if last_scan.elapsed() >= Duration::from_millis(200) {
            last_scan = Instant::now();
            usage.foreign_tracer_seen |= tracers_except(pid as u32) > 0;
        }
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid for wait4 to overwrite.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers; `pid` is our child, not yet reaped.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            use std::os::unix::process::ExitStatusExt;
            usage.status = Some(ExitStatus::from_raw(status));
            usage.wall_s = start.elapsed().as_secs_f64();
            usage.total_cpu_s = timeval_s(ru.ru_utime) + timeval_s(ru.ru_stime);
            usage.self_cpu_s = (usage.total_cpu_s - children_cpu_s).max(0.0);
            usage.max_rss_with_children_bytes = ru.ru_maxrss as u64 * 1024;
            usage.startup_s = window.start.map(|(t0, _)| (t0 - start).as_secs_f64());
            if let (Some((t0, c0)), Some((t1, c1))) = (window.start, window.end) {
                usage.window_s = Some((t1 - t0).as_secs_f64());
                usage.window_cpu_s = Some((c1 - c0).max(0.0));
            }
            // The Child handle was reaped here, not through std.
            std::mem::forget(child);
            return Ok(usage);
        }
        if r < 0 {
            bail!(
                "waiting for process {pid}: {}",
                std::io::Error::last_os_error()
            );
        }
        thread::sleep(SAMPLE);
    }
}

fn timeval_s(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// cutime and cstime (fields 16 and 17 of /proc/PID/stat), in clock ticks.
fn children_ticks(pid: i32) -> Option<(u64, u64)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields restart after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state), so field n is at index n - 3.
    Some((fields.get(13)?.parse().ok()?, fields.get(14)?.parse().ok()?))
}

/// utime and stime (fields 14 and 15 of /proc/PID/stat), in clock ticks.
fn own_ticks(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// A `kB` field of /proc/PID/status.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// Tracer processes running now, other than `except`.
pub(crate) fn tracers_except(except: u32) -> usize {
    let Ok(dir) = fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != except)
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| TRACERS.contains(&c.trim()))
        })
        .count()
}

/// Waits until no tracer process runs (our own uprobe releases from the previous
/// configuration included), at most `limit`. Returns the seconds waited and whether the
/// machine was quiet in the end.
pub(crate) fn wait_quiet(limit: Duration) -> (f64, bool) {
    let start = Instant::now();
    loop {
        if tracers_except(0) == 0 {
            return (start.elapsed().as_secs_f64(), true);
        }
        if start.elapsed() >= limit {
            return (start.elapsed().as_secs_f64(), false);
        }
        thread::sleep(Duration::from_millis(250));
    }
}
