//! `cargo xtask bench [--quick]`: what tracing costs and whether the agent keeps up,
//! measured side by side in one run (see docs/bench.md).
//!
//! 1. Traced-call overhead: `bench-calls` (bench/calls.c, compiled here against the
//!    simulator) calls CANN APIs in a tight loop, untraced, under an empty uprobe+uretprobe
//!    pair on every function npu-bpftrace attaches (bpftrace, the floor), under
//!    `npu-bpftrace record`, and under bpftrace doing the equivalent work. Rounds interleave
//!    the four configurations; medians are reported.
//! 2. Agent throughput without the kernel: `npu-bpftrace/examples/replay`.
//! 3. Sustained load: `npu-sim-app burst` under `npu-bpftrace record`.
//! 4. Output size: Parquet bytes per row of the 2-rank `train` workload.
//! 5. Attach at scale: attaching the generic pair to 2,000 functions of a generated library,
//!    and to the whole catalog, then releasing it (`npu-bpftrace/examples/attach_scale`).
//!
//! Everything runs against a private copy of the simulator (target/bench/npu-sim): uprobes
//! belong to a library file, so other sessions tracing target/npu-sim (tests running
//! meanwhile) would otherwise trap in the "untraced" runs too.
use std::{
    collections::{BTreeMap, HashSet},
    ffi::OsString,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tracer_schema::session::Session;

use crate::{cargo, setup, sim, workspace_root};

mod procs;
mod scale;

use procs::{Usage, run_monitored, wait_quiet};

const CALLS_C: &str = include_str!("bench/calls.c");

/// Targets (issue: benchmarks).
const MAX_RATIO_VS_FLOOR: f64 = 1.15;
const MAX_RATIO_VS_BPFTRACE: f64 = 1.0;
const MIN_AGENT_CALLS_PER_SEC: f64 = 2e6;
const MAX_PEAK_RSS_BYTES: u64 = 64 << 20;
const MAX_BYTES_PER_API_ROW: f64 = 16.0;
const MAX_ATTACH_SECONDS_2000: f64 = 1.0;
const MAX_RELEASE_SECONDS_2000: f64 = 1.0;

/// Workloads of part 1: `bench-calls` phase arguments.
const PHASES: [&str; 5] = ["launch", "memcpy", "mark", "mix", "mix:4"];

/// How long each part runs.
struct Plan {
    quick: bool,
    rounds: usize,
    phase_seconds: f64,
    replay_calls: u64,
    burst_seconds: u32,
    train_steps: u32,
    /// Longest wait for other tracers to finish before a measurement.
    quiet_limit: Duration,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                quick,
                rounds: 1,
                phase_seconds: 0.5,
                replay_calls: 1_000_000,
                burst_seconds: 5,
                train_steps: 100,
                quiet_limit: Duration::from_secs(60),
            }
        } else {
            Self {
                quick,
                rounds: 3,
                phase_seconds: 2.0,
                replay_calls: 4_000_000,
                burst_seconds: 30,
                train_steps: 400,
                quiet_limit: Duration::from_secs(120),
            }
        }
    }
}

/// Where things are.
struct Paths {
    dir: PathBuf,
    tracer: PathBuf,
    replay: PathBuf,
    attach_scale: PathBuf,
    sim: PathBuf,
    bench_calls: PathBuf,
}

pub(crate) fn run(quick: bool) -> Result<()> {
    check_root()?;
    setup::run()?;
    let plan = Plan::new(quick);
    let paths = prepare()?;
    let env = sim_env(&paths.sim)?;
    let mut notes = Vec::new();

    println!(
        "\n== 1/5 traced-call overhead ({} round(s), {} s per phase)",
        plan.rounds, plan.phase_seconds
    );
    let overhead = overhead(&plan, &paths, &env, &mut notes)?;
    println!("\n== 2/5 agent throughput (replay, one thread)");
    let replay = replay(&plan, &paths)?;
    println!(
        "\n== 3/5 sustained load ({} s of npu-sim-app burst)",
        plan.burst_seconds
    );
    let sustained = sustained(&plan, &paths, &env, &mut notes)?;
    println!(
        "\n== 4/5 output size (npu-sim-run --nproc 2 -- npu-sim-app train --steps {})",
        plan.train_steps
    );
    let size = output_size(&plan, &paths, &env, &mut notes)?;
    println!(
        "\n== 5/5 attach at scale ({} generated functions, the catalog)",
        scale::FUNCTIONS
    );
    let scale = attach_scale(&plan, &paths, &mut notes)?;

    let results = results(&plan, overhead, replay, sustained, size, scale, &notes);
    let file = workspace_root().join("target/bench/results.json");
    fs::create_dir_all(file.parent().expect("has a parent"))?;
    fs::write(&file, serde_json::to_string_pretty(&results)? + "\n")
        .with_context(|| format!("writing {}", file.display()))?;
    print!("{}", table(&results));
    println!("\nResults: {}", file.display());
    Ok(())
}

fn check_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "cargo xtask bench attaches uprobes and must run as root \
             (sudo -E env \"PATH=$PATH\" cargo xtask bench)"
        );
    }
    Ok(())
}

/// Builds the agent and the replay in release mode, installs the bench's private copy of the
/// simulator, and compiles `bench-calls` against it.
fn prepare() -> Result<Paths> {
    let status = cargo()
        .args(["build", "--release", "-p", "npu-bpftrace"])
        .args(["--bin", "npu-bpftrace", "--example", "replay"])
        .args(["--example", "attach_scale"])
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("building npu-bpftrace failed");
    }
    let root = workspace_root();
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let release = root.join(target).join("release");
    let dir = root.join("target/bench");
    let sim_dir = dir.join("npu-sim");
    sim::install(&sim_dir, crate::Arch::Host)?;
    let sim_dir = sim_dir.canonicalize()?;

    let src = dir.join("src");
    let bin = dir.join("bin");
    fs::create_dir_all(&src)?;
    fs::create_dir_all(&bin)?;
    let c = src.join("calls.c");
    if fs::read_to_string(&c).ok().as_deref() != Some(CALLS_C) {
        fs::write(&c, CALLS_C)?;
    }
    let bench_calls = bin.join("bench-calls");
    let lib = sim_dir.join(sim::TOOLKIT_LIB);
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "gcc".into()))
        .args([
            "-std=gnu11",
            "-O2",
            "-g",
            "-Wall",
            "-Wextra",
            "-pthread",
            "-I",
        ])
        .arg(sim_dir.join("ascend-toolkit/latest/include"))
        .arg(&c)
        .arg("-o")
        .arg(&bench_calls)
        .arg(format!("-L{}", lib.display()))
        .args(["-lascendcl", "-lms_tools_ext"])
        .arg(format!(
            "-Wl,-rpath,{}:{}",
            lib.display(),
            sim_dir.join(sim::DRIVER_LIB).display()
        ))
        .status()
        .context("running gcc")?;
    if !status.success() {
        bail!("compiling {} failed", c.display());
    }
    Ok(Paths {
        dir: dir.canonicalize()?,
        tracer: release.join("npu-bpftrace"),
        replay: release.join("examples/replay"),
        attach_scale: release.join("examples/attach_scale"),
        sim: sim_dir,
        bench_calls,
    })
}

/// What the simulator's `set_env.sh` exports, for the bench's private tree.
fn sim_env(sim_dir: &Path) -> Result<Vec<(&'static str, OsString)>> {
    let toolkit = sim_dir.join("ascend-toolkit/latest");
    let libs = [
        sim_dir.join(sim::TOOLKIT_LIB),
        sim_dir.join(sim::DRIVER_LIB),
    ];
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::iter::once(sim_dir.join("bin")).chain(std::env::split_paths(&path));
    Ok(vec![
        ("NPU_SIM_HOME", sim_dir.into()),
        ("ASCEND_HOME_PATH", toolkit.clone().into()),
        ("ASCEND_TOOLKIT_HOME", toolkit.into()),
        ("LD_LIBRARY_PATH", std::env::join_paths(libs)?),
        ("PATH", std::env::join_paths(path)?),
    ])
}

/// Waits for other tracers (and our own uprobe releases) to finish; notes it if they don't.
fn settle(plan: &Plan, what: &str, notes: &mut Vec<String>) -> bool {
    let (waited, quiet) = wait_quiet(plan.quiet_limit);
    if !quiet {
        let note =
            format!("{what}: other tracers still running after {waited:.0} s; measured anyway");
        println!("   note: {note}");
        notes.push(note);
    }
    quiet
}

// ---------------------------------------------------------------------------------------
// 1. Traced-call overhead

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Config {
    Untraced,
    NpuBpftrace,
    Floor,
    Bpftrace,
}

impl Config {
    /// Round order: npu-bpftrace runs before the floor, whose probe list it provides.
    const ALL: [Config; 4] = [
        Self::Untraced,
        Self::NpuBpftrace,
        Self::Floor,
        Self::Bpftrace,
    ];

    fn key(self) -> &'static str {
        match self {
            Self::Untraced => "untraced",
            Self::NpuBpftrace => "npu_bpftrace",
            Self::Floor => "floor",
            Self::Bpftrace => "bpftrace",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Untraced => "untraced",
            Self::NpuBpftrace => "npu-bpftrace",
            Self::Floor => "uprobe floor",
            Self::Bpftrace => "bpftrace",
        }
    }
}

/// One run of `bench-calls` under one configuration.
#[derive(Debug, Clone, Default)]
struct Sample {
    /// phase -> (calls, seconds)
    phases: BTreeMap<String, (f64, f64)>,
    uprobes_mapped: bool,
    app_cpu_s: f64,
    tracer: Option<Usage>,
    quiet: bool,
    /// npu-bpftrace: session.json
    session: Option<Session>,
}

impl Sample {
    /// Seconds per call of `phase`.
    fn per_call(&self, phase: &str) -> Option<f64> {
        self.phases.get(phase).map(|&(calls, s)| s / calls.max(1.0))
    }

    /// Mean seconds per call over every phase: the cost of running them one after another
    /// for the same number of calls each.
    fn mean_per_call(&self) -> f64 {
        let v: Vec<f64> = self
            .phases
            .keys()
            .filter_map(|p| self.per_call(p))
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }

    /// Tracer CPU seconds, without the traced program's.
    fn tracer_cpu_s(&self) -> Option<f64> {
        self.tracer
            .as_ref()
            .map(|u| (u.total_cpu_s - self.app_cpu_s).max(0.0))
    }
}

fn phase_key(name: &str, threads: u32) -> String {
    if threads > 1 {
        format!("{name}_{threads}threads")
    } else {
        name.to_string()
    }
}

fn overhead(
    plan: &Plan,
    paths: &Paths,
    env: &[(&'static str, OsString)],
    notes: &mut Vec<String>,
) -> Result<Value> {
    let mut samples: BTreeMap<Config, Vec<Sample>> = BTreeMap::new();
    let mut scripts: Option<(PathBuf, PathBuf, usize)> = None;
    for round in 1..=plan.rounds {
        for config in Config::ALL {
            let mut sample = None;
            // An "untraced" run that a uprobe fired in (a system-wide session of someone
            // else found our library copy) is retried.
            for attempt in 0..3 {
                let quiet = settle(plan, config.label(), notes);
                let out = paths
                    .dir
                    .join(format!("calls-{}-{round}-{attempt}", config.key()));
                let s = run_calls(plan, paths, env, config, &out, scripts.as_ref(), quiet)?;
                let clean = config != Config::Untraced || !s.uprobes_mapped;
                sample = Some(s);
                if clean {
                    break;
                }
                println!("   untraced run hit a uprobe (another tracer attached); retrying");
            }
            let sample = sample.expect("ran at least once");
            if config == Config::Untraced && sample.uprobes_mapped {
                notes.push("an untraced run was hit by foreign uprobes".into());
            }
            print_sample(round, config, &sample);
            if config == Config::NpuBpftrace && scripts.is_none() {
                let session = sample.session.as_ref().context("no session.json")?;
                let loaded = mapped_libraries(&paths.bench_calls, env, &paths.dir)?;
                scripts = Some(bpftrace_scripts(&paths.dir, session, &loaded)?);
            }
            samples.entry(config).or_default().push(sample);
        }
    }
    Ok(summarize_overhead(
        plan,
        &samples,
        scripts.map_or(0, |s| s.2),
    ))
}

fn run_calls(
    plan: &Plan,
    paths: &Paths,
    env: &[(&'static str, OsString)],
    config: Config,
    out: &Path,
    scripts: Option<&(PathBuf, PathBuf, usize)>,
    quiet: bool,
) -> Result<Sample> {
    let _ = fs::remove_dir_all(out);
    fs::create_dir_all(out)?;
    let result = out.join("calls.txt");
    let mut argv: Vec<OsString> = vec![
        paths.bench_calls.clone().into(),
        "--seconds".into(),
        plan.phase_seconds.to_string().into(),
        "--out".into(),
        result.clone().into(),
    ];
    argv.extend(PHASES.iter().map(OsString::from));
    let mut cmd = match config {
        Config::Untraced => {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
        Config::NpuBpftrace => {
            let mut c = Command::new(&paths.tracer);
            c.arg("record")
                .arg("--out")
                .arg(out.join("trace"))
                .arg("--")
                .args(&argv);
            c
        }
        Config::Floor | Config::Bpftrace => {
            let (floor, equivalent, _) = scripts.context("bpftrace scripts not ready")?;
            let line: Vec<String> = argv
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            if line.iter().any(|a| a.contains(char::is_whitespace)) {
                bail!("bpftrace -c cannot take paths with spaces: {line:?}");
            }
            let mut c = Command::new("bpftrace");
            // Two probes per function; bpftrace refuses more than 512 unless told.
            let probes = scripts.map_or(0, |s| s.2) * 2 + 16;
            c.env("BPFTRACE_MAX_PROBES", probes.to_string());
            c.arg("-c").arg(line.join(" "));
            c.arg(if config == Config::Floor {
                floor
            } else {
                equivalent
            });
            c
        }
    };
    cmd.envs(env.iter().map(|(k, v)| (*k, v)))
        // Device tasks take no modelled time: the loop measures the host side only.
        .env("NPU_SIM_TIME_SCALE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(out.join("stderr.txt"))?);
    let usage = run_monitored(&mut cmd)?;
    if !usage.status.is_some_and(|s| s.success()) {
        bail!(
            "{} run failed ({:?}); see {}",
            config.label(),
            usage.status,
            out.join("stderr.txt").display()
        );
    }
    let mut sample = parse_calls(
        &fs::read_to_string(&result).with_context(|| format!("reading {}", result.display()))?,
    )?;
    sample.quiet = quiet && !usage.foreign_tracer_seen;
    if config != Config::Untraced {
        sample.tracer = Some(usage);
    }
    if config == Config::NpuBpftrace {
        sample.session = Some(Session::read(&out.join("trace"))?);
        // The dataset is not needed once its session is read.
        for entry in fs::read_dir(out.join("trace"))?.flatten() {
            if entry.path().is_dir() {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
    Ok(sample)
}

fn parse_calls(text: &str) -> Result<Sample> {
    let mut sample = Sample::default();
    for line in text.lines() {
        let kv: BTreeMap<&str, &str> = line
            .split_whitespace()
            .filter_map(|f| f.split_once('='))
            .collect();
        if let (Some(phase), Some(threads), Some(calls), Some(secs)) = (
            kv.get("phase"),
            kv.get("threads"),
            kv.get("calls"),
            kv.get("seconds"),
        ) {
            sample.phases.insert(
                phase_key(phase, threads.parse()?),
                (calls.parse()?, secs.parse()?),
            );
        }
        if let Some(v) = kv.get("uprobes_mapped") {
            sample.uprobes_mapped = *v == "1";
        }
        if let Some(v) = kv.get("cpu_seconds") {
            sample.app_cpu_s = v.parse()?;
        }
    }
    if sample.phases.len() != PHASES.len() {
        bail!(
            "bench-calls reported {} phases: {text}",
            sample.phases.len()
        );
    }
    Ok(sample)
}

fn print_sample(round: usize, config: Config, s: &Sample) {
    let rates: Vec<String> = s
        .phases
        .iter()
        .map(|(p, &(calls, secs))| format!("{p} {:.0}/s", calls / secs))
        .collect();
    let cpu = s
        .tracer_cpu_s()
        .map_or(String::new(), |c| format!(", tracer CPU {c:.2} s"));
    println!(
        "   round {round} {:<13} {}{cpu}",
        config.label(),
        rates.join(", ")
    );
}

/// The files `program` maps while it runs (its libraries, those it dlopens included), by
/// canonical path: read from `/proc/PID/maps` during a short run.
fn mapped_libraries(
    program: &Path,
    env: &[(&'static str, OsString)],
    dir: &Path,
) -> Result<HashSet<PathBuf>> {
    let mut child = Command::new(program)
        .args(["--seconds", "1", "--out"])
        .arg(dir.join("maps-run.txt"))
        .arg("mark")
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("running {}", program.display()))?;
    // Set up (libraries loaded, device opened) well within the first half second.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let maps = fs::read_to_string(format!("/proc/{}/maps", child.id()));
    let _ = child.wait();
    Ok(maps
        .context("reading the benchmark program's memory maps")?
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5).map(PathBuf::from))
        .filter_map(|p| fs::canonicalize(p).ok())
        .collect())
}

/// The floor script (empty uprobe and uretprobe blocks) and bpftrace's equivalent of
/// npu-bpftrace's work, on the functions npu-bpftrace attached (session.json) in the
/// libraries the benchmark program maps (`loaded`). A uprobe's cost per call does not
/// depend on how many others are attached, and bpftrace attaches and releases one
/// perf-event uprobe at a time: the operator libraries' thousands of functions, which the
/// program never calls, would take it minutes.
fn bpftrace_scripts(
    dir: &Path,
    session: &Session,
    loaded: &HashSet<PathBuf>,
) -> Result<(PathBuf, PathBuf, usize)> {
    let mut floor = String::from("BEGIN {}\n");
    let mut equivalent = String::from("BEGIN {}\n");
    let mut n = 0;
    let used = |path: &Path| fs::canonicalize(path).is_ok_and(|p| loaded.contains(&p));
    for file in session.attached.iter().filter(|f| used(&f.path)) {
        let path = file.path.display();
        for func in &file.functions {
            writeln!(
                floor,
                "uprobe:{path}:{func} {{}}\nuretprobe:{path}:{func} {{}}"
            )?;
            // Per-thread entry timestamp (keyed by function: calls nest acl -> rt -> hal),
            // duration at exit, one line per call.
            writeln!(
                equivalent,
                "uprobe:{path}:{func} /pid == cpid/ {{ @start[tid, {n}] = nsecs; }}\n\
                 uretprobe:{path}:{func} /pid == cpid/ {{ \
                 printf(\"%d %d {func} %d %d\\n\", pid, tid, retval, nsecs - @start[tid, {n}]); \
                 delete(@start[tid, {n}]); }}"
            )?;
            n += 1;
        }
    }
    if n == 0 {
        bail!("npu-bpftrace attached nothing");
    }
    let (f, e) = (dir.join("floor.bt"), dir.join("bpftrace.bt"));
    fs::write(&f, floor)?;
    fs::write(&e, equivalent)?;
    Ok((f, e, n))
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn summarize_overhead(
    plan: &Plan,
    samples: &BTreeMap<Config, Vec<Sample>>,
    functions: usize,
) -> Value {
    let untraced = &samples[&Config::Untraced];
    // Per round, the overhead per call against the same round's untraced run.
    let figures = |per_call: &dyn Fn(&Sample) -> Option<f64>| -> Value {
        let mut out = serde_json::Map::new();
        let mut overhead_us = BTreeMap::new();
        for config in Config::ALL {
            let runs = &samples[&config];
            let rates: Vec<f64> = runs
                .iter()
                .filter_map(|s| per_call(s).map(|t| 1.0 / t))
                .collect();
            out.insert(
                format!("{}_calls_per_sec", config.key()),
                json!(median(rates)),
            );
            if config == Config::Untraced {
                continue;
            }
            let extra: Vec<f64> = runs
                .iter()
                .zip(untraced)
                .filter_map(|(s, u)| Some((per_call(s)? - per_call(u)?) * 1e6))
                .collect();
            let m = median(extra);
            overhead_us.insert(config, m);
            out.insert(format!("{}_overhead_us_per_call", config.key()), json!(m));
        }
        let npu = overhead_us[&Config::NpuBpftrace];
        out.insert(
            "ratio_vs_floor".into(),
            json!(npu / overhead_us[&Config::Floor]),
        );
        out.insert(
            "ratio_vs_bpftrace".into(),
            json!(npu / overhead_us[&Config::Bpftrace]),
        );
        Value::Object(out)
    };
    let mut phases = serde_json::Map::new();
    for phase in untraced[0].phases.keys() {
        phases.insert(phase.clone(), figures(&|s: &Sample| s.per_call(phase)));
    }
    let all = figures(&|s: &Sample| Some(s.mean_per_call()));
    let tracer_cpu: serde_json::Map<String, Value> = Config::ALL[1..]
        .iter()
        .map(|c| {
            let v: Vec<f64> = samples[c].iter().filter_map(Sample::tracer_cpu_s).collect();
            (c.key().to_string(), json!(median(v)))
        })
        .collect();
    let drops: u64 = samples[&Config::NpuBpftrace]
        .iter()
        .filter_map(|s| s.session.as_ref())
        .map(Session::total_drops)
        .sum();
    let clean = samples
        .values()
        .flatten()
        .all(|s| s.quiet && !(s.tracer.is_none() && s.uprobes_mapped));
    json!({
        "rounds": plan.rounds,
        "seconds_per_phase": plan.phase_seconds,
        "functions_attached": functions,
        "all": all,
        "phases": phases,
        "tracer_cpu_seconds_median": tracer_cpu,
        "npu_bpftrace_drops": drops,
        "no_other_tracer_seen": clean,
        "raw": samples.iter().map(|(c, runs)| (c.key().to_string(), json!(runs.iter().map(|s| {
            json!({
                "phases": s.phases.iter().map(|(p, (calls, secs))| (p.clone(), json!({"calls": calls, "seconds": secs}))).collect::<serde_json::Map<_, _>>(),
                "uprobes_mapped": s.uprobes_mapped,
                "app_cpu_seconds": s.app_cpu_s,
                "tracer_cpu_seconds": s.tracer_cpu_s(),
                "tracer_peak_rss_bytes": s.tracer.as_ref().map(|u| u.peak_rss_bytes),
                "quiet": s.quiet,
            })
        }).collect::<Vec<_>>()))).collect::<serde_json::Map<_, _>>(),
    })
}

// ---------------------------------------------------------------------------------------
// 2. Agent throughput

fn replay(plan: &Plan, paths: &Paths) -> Result<Value> {
    let out = paths.dir.join("replay");
    let _ = fs::remove_dir_all(&out);
    let output = Command::new(&paths.replay)
        .args(["--calls", &plan.replay_calls.to_string(), "--out"])
        .arg(&out)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", paths.replay.display()))?;
    if !output.status.success() {
        bail!("the replay example failed: {}", output.status);
    }
    let report: Value = serde_json::from_slice(&output.stdout).context("replay example output")?;
    let _ = fs::remove_dir_all(&out);
    println!(
        "   {} API calls in {:.2} s CPU: {:.0} calls/s per core",
        report["api_calls"],
        report["cpu_seconds"].as_f64().unwrap_or(0.0),
        report["api_calls_per_cpu_second"].as_f64().unwrap_or(0.0)
    );
    Ok(report)
}

// ---------------------------------------------------------------------------------------
// 3. Sustained load

fn sustained(
    plan: &Plan,
    paths: &Paths,
    env: &[(&'static str, OsString)],
    notes: &mut Vec<String>,
) -> Result<Value> {
    let quiet = settle(plan, "sustained load", notes);
    let out = paths.dir.join("sustained");
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&out)?;
    let stdout = out.join("stdout.txt");
    let threads = 4;
    // SIGINT ends the burst after the current launch; its threads then synchronize and exit.
    let usage = run_monitored(
        Command::new(&paths.tracer)
            .arg("record")
            .arg("--out")
            .arg(out.join("trace"))
            .args(["--", "timeout", "-s", "INT"])
            .arg(plan.burst_seconds.to_string())
            .args(["npu-sim-app", "burst", "--threads", &threads.to_string()])
            .args(["--launches", "1000000000"])
            .envs(env.iter().map(|(k, v)| (*k, v)))
            .stdin(Stdio::null())
            .stdout(fs::File::create(&stdout)?)
            .stderr(fs::File::create(out.join("stderr.txt"))?),
    )?;
    let text = fs::read_to_string(&stdout)?;
    // `timeout` exits 124 when it had to stop the burst, which is the plan.
    let code = usage.status.and_then(|s| s.code());
    if !matches!(code, Some(0 | 124)) || !text.contains("burst done") {
        bail!(
            "sustained run failed ({:?}); see {}",
            usage.status,
            out.display()
        );
    }
    let session = Session::read(&out.join("trace"))?;
    // "npu-sim-app: burst done: N launches from K threads in S s (R/s)"
    let launches_per_sec = text
        .lines()
        .find_map(|l| l.split("burst done: ").nth(1))
        .and_then(|l| {
            l.rsplit('(')
                .next()?
                .strip_suffix("/s)")?
                .parse::<f64>()
                .ok()
        });
    // The agent's CPU while the burst ran (attaching, which may wait for other sessions'
    // uprobe releases, and the final flush are outside it); its whole life if unknown.
    let share = match (usage.window_cpu_s, usage.window_s) {
        (Some(cpu), Some(wall)) if wall > 0.0 => cpu / wall,
        _ => usage.self_cpu_s / usage.wall_s.max(1e-9),
    };
    let drops = session.total_drops();
    let api_rows = session.rows.get("api").copied().unwrap_or(0);
    let r = json!({
        "seconds": plan.burst_seconds,
        "threads": threads,
        "launches_per_sec": launches_per_sec,
        "drops": drops,
        "drops_by_kind": session.drops,
        "agent_wall_seconds": usage.wall_s,
        "agent_cpu_seconds": usage.self_cpu_s,
        "agent_cpu_share": share,
        "traced_window_seconds": usage.window_s,
        "agent_startup_seconds": usage.startup_s,
        "agent_cpu_seconds_in_window": usage.window_cpu_s,
        "agent_cpu_us_per_api_row": usage.self_cpu_s * 1e6 / (api_rows.max(1) as f64),
        "agent_peak_rss_bytes": usage.peak_rss_bytes,
        "agent_rss_anon_bytes_at_peak": usage.rss_anon_bytes,
        "agent_rss_file_bytes_at_peak": usage.rss_file_bytes,
        "max_rss_with_traced_command_bytes": usage.max_rss_with_children_bytes,
        "rows": session.rows,
        "files": session.files,
        "bytes": session.bytes,
        "correlation": session.correlation,
        "no_other_tracer_seen": quiet && !usage.foreign_tracer_seen,
    });
    println!(
        "   {} launches/s traced, {drops} drops, agent CPU {:.0}% of one core, peak RSS {:.1} MiB, {api_rows} api rows",
        launches_per_sec.map_or("?".into(), |r| format!("{r:.0}")),
        share * 100.0,
        usage.peak_rss_bytes as f64 / (1 << 20) as f64,
    );
    remove_tables(&out.join("trace"));
    Ok(r)
}

/// Removes a dataset's tables, keeping session.json.
fn remove_tables(dir: &Path) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().is_dir() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

// ---------------------------------------------------------------------------------------
// 4. Output size

fn output_size(
    plan: &Plan,
    paths: &Paths,
    env: &[(&'static str, OsString)],
    notes: &mut Vec<String>,
) -> Result<Value> {
    settle(plan, "output size", notes);
    let out = paths.dir.join("train");
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&out)?;
    let status = Command::new(&paths.tracer)
        .arg("record")
        .arg("--out")
        .arg(out.join("trace"))
        .args([
            "--",
            "npu-sim-run",
            "--nproc",
            "2",
            "--",
            "npu-sim-app",
            "train",
        ])
        .args(["--steps", &plan.train_steps.to_string()])
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::null())
        .stdout(fs::File::create(out.join("stdout.txt"))?)
        .stderr(fs::File::create(out.join("stderr.txt"))?)
        .status()?;
    if !status.success() {
        bail!("train run failed ({status}); see {}", out.display());
    }
    let session = Session::read(&out.join("trace"))?;
    let mut tables = serde_json::Map::new();
    for (table, &rows) in &session.rows {
        let (bytes, files) = table_bytes(&out.join("trace").join(table))?;
        let per_row = if rows > 0 {
            Some(bytes as f64 / rows as f64)
        } else {
            None
        };
        tables.insert(
            table.clone(),
            json!({"rows": rows, "bytes": bytes, "files": files, "bytes_per_row": per_row}),
        );
    }
    let api = &tables["api"];
    let kernel = &tables["kernel"];
    println!(
        "   api: {} rows, {} bytes in {} files ({:.1} B/row); kernel: {} rows ({:.1} B/row)",
        api["rows"],
        api["bytes"],
        api["files"],
        api["bytes_per_row"].as_f64().unwrap_or(f64::NAN),
        kernel["rows"],
        kernel["bytes_per_row"].as_f64().unwrap_or(f64::NAN)
    );
    let r = json!({
        "steps": plan.train_steps,
        "ranks": 2,
        "bytes_per_api_row": api["bytes_per_row"],
        "bytes_per_kernel_row": kernel["bytes_per_row"],
        "tables": tables,
        "drops": session.drops,
    });
    remove_tables(&out.join("trace"));
    Ok(r)
}

/// Bytes and number of `part-*.parquet` files under `DIR/host=*/`.
fn table_bytes(dir: &Path) -> Result<(u64, u64)> {
    let (mut bytes, mut files) = (0, 0);
    for host in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        for part in fs::read_dir(host?.path())? {
            let part = part?;
            let name = part.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("part-") && name.ends_with(".parquet") {
                bytes += part.metadata()?.len();
                files += 1;
            }
        }
    }
    Ok((bytes, files))
}

// ---------------------------------------------------------------------------------------
// 5. Attach at scale

/// Attach and release times: 2,000 generated functions and the catalog with the default
/// attach (uprobe_multi where the kernel has it), and the catalog with perf-event uprobes
/// for comparison (not with `--quick`: its release takes tens of seconds).
fn attach_scale(plan: &Plan, paths: &Paths, notes: &mut Vec<String>) -> Result<Value> {
    let lib = scale::generated_library(&paths.dir)?;
    let exe = &paths.attach_scale;
    settle(plan, "attach at scale", notes);
    let generated = scale::measure(exe, &scale::Target::Generated(&lib), false)?;
    settle(plan, "attach at scale (catalog)", notes);
    let catalog = scale::measure(exe, &scale::Target::Catalog(&paths.sim), false)?;
    let catalog_perf_event = if plan.quick {
        Value::Null
    } else {
        settle(plan, "attach at scale (catalog, perf events)", notes);
        scale::measure(exe, &scale::Target::Catalog(&paths.sim), true)?
    };
    Ok(json!({
        "generated_2000": generated,
        "catalog": catalog,
        "catalog_perf_event": catalog_perf_event,
    }))
}

// ---------------------------------------------------------------------------------------
// Results

fn target(value: f64, limit: f64, pass: bool, text: &str) -> Value {
    json!({"value": value, "limit": limit, "target": text, "pass": pass})
}

fn results(
    plan: &Plan,
    overhead: Value,
    replay: Value,
    sustained: Value,
    size: Value,
    scale: Value,
    notes: &[String],
) -> Value {
    let all = &overhead["all"];
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let vs_floor = f(&all["ratio_vs_floor"]);
    let vs_bpftrace = f(&all["ratio_vs_bpftrace"]);
    let agent = f(&replay["api_calls_per_cpu_second"]);
    let drops = sustained["drops"].as_u64().unwrap_or(u64::MAX);
    let rss = sustained["agent_peak_rss_bytes"]
        .as_u64()
        .unwrap_or(u64::MAX);
    let per_api = f(&size["bytes_per_api_row"]);
    let attach_2000 = f(&scale["generated_2000"]["attach_seconds"]);
    let release_2000 = f(&scale["generated_2000"]["release_seconds"]);
    let targets = json!({
        "overhead_ratio_vs_floor": target(vs_floor, MAX_RATIO_VS_FLOOR, vs_floor <= MAX_RATIO_VS_FLOOR, "<= 1.15"),
        "overhead_ratio_vs_bpftrace": target(vs_bpftrace, MAX_RATIO_VS_BPFTRACE, vs_bpftrace < MAX_RATIO_VS_BPFTRACE, "< 1"),
        "agent_calls_per_sec_per_core": target(agent, MIN_AGENT_CALLS_PER_SEC, agent >= MIN_AGENT_CALLS_PER_SEC, ">= 2000000"),
        "drops": target(drops as f64, 0.0, drops == 0, "0"),
        "peak_rss_bytes": target(rss as f64, MAX_PEAK_RSS_BYTES as f64, rss <= MAX_PEAK_RSS_BYTES, "<= 64 MiB"),
        "bytes_per_api_row": target(per_api, MAX_BYTES_PER_API_ROW, per_api <= MAX_BYTES_PER_API_ROW, "<= 16"),
        "attach_seconds_2000": target(attach_2000, MAX_ATTACH_SECONDS_2000, attach_2000 <= MAX_ATTACH_SECONDS_2000, "<= 1 s"),
        "release_seconds_2000": target(release_2000, MAX_RELEASE_SECONDS_2000, release_2000 <= MAX_RELEASE_SECONDS_2000, "<= 1 s"),
    });
    let all_pass = targets
        .as_object()
        .is_some_and(|t| t.values().all(|v| v["pass"] == true));
    json!({
        "quick": plan.quick,
        "git": git_state(),
        "unix_time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "kernel": fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
        "overhead_ratio_vs_floor": vs_floor,
        "overhead_ratio_vs_bpftrace": vs_bpftrace,
        "untraced_calls_per_sec": all["untraced_calls_per_sec"],
        "floor_calls_per_sec": all["floor_calls_per_sec"],
        "npu_bpftrace_calls_per_sec": all["npu_bpftrace_calls_per_sec"],
        "bpftrace_calls_per_sec": all["bpftrace_calls_per_sec"],
        "floor_overhead_us_per_call": all["floor_overhead_us_per_call"],
        "npu_bpftrace_overhead_us_per_call": all["npu_bpftrace_overhead_us_per_call"],
        "bpftrace_overhead_us_per_call": all["bpftrace_overhead_us_per_call"],
        "agent_calls_per_sec_per_core": agent,
        "agent_calls_per_wall_sec": replay["api_calls_per_wall_second"],
        "drops": drops,
        "peak_rss_bytes": rss,
        "agent_cpu_share": sustained["agent_cpu_share"],
        "sustained_launches_per_sec": sustained["launches_per_sec"],
        "bytes_per_api_row": per_api,
        "bytes_per_kernel_row": size["bytes_per_kernel_row"],
        "attach_seconds_2000": attach_2000,
        "release_seconds_2000": release_2000,
        "attach_kind_2000": scale["generated_2000"]["attach"],
        "targets": targets,
        "all_targets_pass": all_pass,
        "notes": notes,
        "overhead": overhead,
        "agent_replay": replay,
        "sustained": sustained,
        "output_size": size,
        "attach_scale": scale,
    })
}

/// The commit measured, and the agent's sources that differed from it.
fn git_state() -> Value {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(workspace_root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let dirty: Vec<String> = git(&[
        "status",
        "--porcelain",
        "--",
        "tracer-common",
        "tracer-ebpf",
        "npu-bpftrace",
    ])
    .unwrap_or_default()
    .lines()
    .map(|l| l.get(3..).unwrap_or(l).to_string())
    .collect();
    json!({"commit": git(&["rev-parse", "HEAD"]), "uncommitted_agent_sources": dirty})
}

fn status(r: &Value, key: &str) -> &'static str {
    if r["targets"][key]["pass"] == true {
        "pass"
    } else {
        "MISS"
    }
}

/// The summary table.
fn table(r: &Value) -> String {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let mut s = String::new();
    let o = &r["overhead"];
    let _ = writeln!(
        s,
        "\n1. Traced-call overhead: calls/s and added µs per call (median of {} round(s), {} functions attached)\n",
        o["rounds"], o["functions_attached"]
    );
    let _ = writeln!(
        s,
        "{:<15} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "workload",
        "untraced",
        "floor",
        "npu-bpf",
        "bpftrace",
        "floor µs",
        "npu µs",
        "bpft µs",
        "npu/flr",
        "npu/bpft"
    );
    let mut rows: Vec<(String, &Value)> = o["phases"]
        .as_object()
        .map(|p| p.iter().map(|(k, v)| (k.clone(), v)).collect())
        .unwrap_or_default();
    rows.push(("all (mean)".into(), &o["all"]));
    for (name, v) in rows {
        let _ = writeln!(
            s,
            "{:<15} {:>10.0} {:>10.0} {:>10.0} {:>10.0} {:>8.2} {:>8.2} {:>8.2} {:>8.3} {:>8.3}",
            name,
            f(&v["untraced_calls_per_sec"]),
            f(&v["floor_calls_per_sec"]),
            f(&v["npu_bpftrace_calls_per_sec"]),
            f(&v["bpftrace_calls_per_sec"]),
            f(&v["floor_overhead_us_per_call"]),
            f(&v["npu_bpftrace_overhead_us_per_call"]),
            f(&v["bpftrace_overhead_us_per_call"]),
            f(&v["ratio_vs_floor"]),
            f(&v["ratio_vs_bpftrace"]),
        );
    }
    let t = &r["targets"];
    let line = |s: &mut String, what: &str, value: String, key: &str| {
        let _ = writeln!(
            s,
            "{:<44} {:>14} {:>12}  {}",
            what,
            value,
            t[key]["target"].as_str().unwrap_or(""),
            status(r, key)
        );
    };
    let _ = writeln!(
        s,
        "\n{:<44} {:>14} {:>12}  status",
        "figure", "value", "target"
    );
    line(
        &mut s,
        "1. overhead npu-bpftrace / uprobe floor",
        format!("{:.3}", f(&r["overhead_ratio_vs_floor"])),
        "overhead_ratio_vs_floor",
    );
    line(
        &mut s,
        "1. overhead npu-bpftrace / bpftrace",
        format!("{:.3}", f(&r["overhead_ratio_vs_bpftrace"])),
        "overhead_ratio_vs_bpftrace",
    );
    line(
        &mut s,
        "2. agent API calls/s per core (replay)",
        format!("{:.0}", f(&r["agent_calls_per_sec_per_core"])),
        "agent_calls_per_sec_per_core",
    );
    line(
        &mut s,
        "3. drops under sustained burst",
        r["drops"].to_string(),
        "drops",
    );
    line(
        &mut s,
        "3. agent peak RSS (MiB)",
        format!("{:.1}", f(&r["peak_rss_bytes"]) / (1 << 20) as f64),
        "peak_rss_bytes",
    );
    line(
        &mut s,
        "4. Parquet bytes per api row (train)",
        format!("{:.2}", f(&r["bytes_per_api_row"])),
        "bytes_per_api_row",
    );
    line(
        &mut s,
        "5. attach 2000 functions (s)",
        format!("{:.3}", f(&r["attach_seconds_2000"])),
        "attach_seconds_2000",
    );
    line(
        &mut s,
        "5. release 2000 functions (s)",
        format!("{:.3}", f(&r["release_seconds_2000"])),
        "release_seconds_2000",
    );
    let su = &r["sustained"];
    let _ = writeln!(
        s,
        "{:<44} {:>14}",
        "3. agent CPU share (of one core)",
        format!("{:.1}%", f(&su["agent_cpu_share"]) * 100.0)
    );
    let _ = writeln!(
        s,
        "{:<44} {:>14}",
        "3. agent CPU µs per api row",
        format!("{:.2}", f(&su["agent_cpu_us_per_api_row"]))
    );
    let _ = writeln!(
        s,
        "{:<44} {:>14}",
        "3. rows written",
        su["rows"]["api"]
            .as_u64()
            .map_or("?".into(), |a| format!("{a} api"))
    );
    let _ = writeln!(
        s,
        "{:<44} {:>14}",
        "4. Parquet bytes per kernel row (train)",
        format!("{:.2}", f(&r["bytes_per_kernel_row"]))
    );
    let sc = &r["attach_scale"];
    let _ = writeln!(
        s,
        "{:<44} {:>14}",
        "5. attached 2000 functions with",
        r["attach_kind_2000"].as_str().unwrap_or("?")
    );
    for (what, key) in [
        ("5. catalog attach / release (s)", "catalog"),
        (
            "5. catalog, perf events: attach / release (s)",
            "catalog_perf_event",
        ),
    ] {
        if sc[key].is_object() {
            let _ = writeln!(
                s,
                "{:<44} {:>14}",
                what,
                format!(
                    "{:.3} / {:.3}",
                    f(&sc[key]["attach_seconds"]),
                    f(&sc[key]["release_seconds"])
                )
            );
        }
    }
    for note in r["notes"].as_array().into_iter().flatten() {
        let _ = writeln!(s, "note: {}", note.as_str().unwrap_or(""));
    }
    if r["all_targets_pass"] != true {
        let _ = writeln!(
            s,
            "\nTargets marked MISS: docs/bench.md explains why and what would close them."
        );
    }
    s
}
