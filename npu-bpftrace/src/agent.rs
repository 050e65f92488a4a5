//! A tracing session: preflight checks, loading and attaching the probes, and the tokio
//! pipeline ring buffer -> decode -> correlate -> sinks, until the session is told to stop.
use std::{
    collections::BTreeMap,
    ffi::OsString,
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result, bail};
use aya::maps::{MapData, RingBuf};
use tokio::{
    io::{Interest, unix::AsyncFd},
    sync::{mpsc, oneshot, watch},
};
use tracer_common::{Config, SPEC_RANGE_START, TaskInfo, TaskKey, WindowEdge};

use tracer_catalog::{Catalog, ChipLayout, ProbeTable};
use tracer_core::{
    clock::ClockReading,
    correlate::{Correlator, FinalState, Output},
    decode::{Decoded, Record, decode},
    soclog::{PassiveChannels, SocBatch},
};
use tracer_schema::session::{
    ActivityStats, AttachedFile, ChipSummary, ClockSummary, CorrelateStats, HoldStats, OutputStats,
    Session, WindowCause,
};

use crate::{
    attach::{Attacher, Selection, plan_file},
    bpf::{AttachKind, Probes, UprobeMode},
    caps,
    capture::{RangeSpec, Windows},
    channel::{self, ChannelReader},
    discovery::{self, LibraryFile},
    driver::{self, Chip, Devices, Driver},
    hold::{self, Holds},
    outdir::{Found, OutDir},
    outname,
    progress::{ProcessCounter, Progress, StatusLine},
    session::{self, clock_ns},
    signals::{Caught, StopSignals},
    sink::{
        Sink, SinkStats,
        parquet::{ParquetSink, SinkOptions},
        print::{PrintFormat, Printer},
    },
    status,
    symbolize::{CapturedBinaries, Symbolizer},
    symbols::SymbolTable,
};

/// What to trace.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Already running processes.
    Attach(Vec<u32>),
    /// A command started by the agent, traced with its children from its first instruction.
    Command(Vec<OsString>),
    /// Every process on the host that maps the CANN libraries, including later ones.
    SystemWide,
}

impl Mode {
    fn name(&self) -> &'static str {
        match self {
            Self::Attach(_) => "attach",
            Self::Command(_) => "record",
            Self::SystemWide => "system-wide",
        }
    }
}

#[derive(Debug, Clone)]
pub struct TraceOptions {
    pub mode: Mode,
    pub selection: Selection,
    /// The built-in catalog with the `--catalog` files added.
    pub catalog: Arc<Catalog>,
    /// Extra library files or directories to attach to.
    pub libs: Vec<PathBuf>,
    /// The output directory, a template (`%h`, `%p`, `%r`, `%t`: see [`outname`]).
    pub out_dir: PathBuf,
    /// Stop this long after recording first began.
    pub duration: Option<Duration>,
    /// Record nothing until this long after tracing began (`--delay`).
    pub delay: Option<Duration>,
    /// Record only inside these mstx ranges (`--capture-range`).
    pub capture_range: Option<RangeSpec>,
    /// `--print` and how.
    pub print: Option<PrintFormat>,
    pub ringbuf_bytes: u32,
}

/// How a session ended.
pub struct TraceSummary {
    pub out_dir: PathBuf,
    pub session: Session,
    /// Exit status of the traced command (record mode), when it exited while traced.
    pub command_status: Option<std::process::ExitStatus>,
    /// In record mode, the second stop signal that ended the session before the command
    /// exited (the first was passed on to the command).
    pub interrupted: Option<Caught>,
    /// Why the trace is incomplete (rows or session.json that could not be written).
    pub incomplete: Option<String>,
}

/// What the correlator receives.
pub enum Input {
    /// Decoded ring-buffer records.
    Records(Vec<Record>),
    /// A device clock reading taken by the agent through the driver.
    Clock(ClockReading),
    /// Submitted tasks of processes that exited before completing them.
    Lost(Vec<(TaskKey, TaskInfo)>),
    /// Where each device's task times come from, decided at start (`since_ns`).
    DeviceTimes(channel::Outcomes, u64),
    /// Device task records read from the profiling channel.
    Soc(SocBatch),
    /// Tracing stops: answer once no task submitted by then (CLOCK_MONOTONIC ns) waits for
    /// its profiling-channel records.
    Settle(u64, oneshot::Sender<()>),
    /// The end of tracing: what only the kernel maps still know.
    Finish(FinalState),
}

impl From<ClockReading> for Input {
    fn from(reading: ClockReading) -> Self {
        Self::Clock(reading)
    }
}

impl From<SocBatch> for Input {
    fn from(batch: SocBatch) -> Self {
        Self::Soc(batch)
    }
}

/// Messages in flight from the poller (and the clock sampler) to the correlator.
const CHANNEL_BATCHES: usize = 32;
/// Upper bound of records per batch, so the correlator sees data while a burst lasts.
const BATCH_RECORDS: usize = 2048;
/// How often the ring buffer is drained when the BPF side has not woken the poller.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How often rows become durable Parquet files.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// How often the correlator forgets the state of processes that are gone (a process is
/// forgotten at the second sweep that finds it gone, so 5 to 10 s after it exited).
const EXITED_SWEEP_INTERVAL: Duration = Duration::from_secs(5);
/// How often the traced processes' memory maps are read for libraries they loaded since
/// (torch_npu dlopens the operator libraries when it is imported, and GE's at the first
/// aclop call): calls in between are not seen.
const RESCAN_INTERVAL: Duration = Duration::from_millis(200);
/// `device_time_sources` of a device whose channel another profiler owns and reads.
const PASSIVE_SOURCE: &str = "profiling_channel_passive";
/// How long stopping waits for the end records of tasks still running on the devices.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(1);
/// The same when another profiler reads a device's channel (passive mode): its reads come at
/// its own pace (msPTI and msprof poll with a 1 s timeout).
const PASSIVE_SETTLE_TIMEOUT: Duration = Duration::from_secs(5);

pub fn trace(opts: TraceOptions) -> Result<TraceSummary> {
    preflight(&opts)?;
    limit_malloc_arenas();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let summary = runtime.block_on(run(opts));
    // A command still running (record mode, stopped by a second signal) has a blocking
    // task waiting for it: do not wait for that.
    runtime.shutdown_background();
    summary
}

/// A few malloc arenas suffice for a handful of threads; each extra arena keeps its own
/// high-water mark of freed memory.
fn limit_malloc_arenas() {
    // SAFETY: mallopt only tunes glibc's allocator.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
}

/// Each flush drops a second's worth of Arrow and Parquet buffers; hand that memory back
/// so the agent's footprint follows its live data, not its peak.
fn release_freed_memory() {
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
}

/// Clear, early errors for what a user can fix.
fn preflight(opts: &TraceOptions) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        caps::ensure_privileged()?;
    }
    if let Mode::Attach(pids) = &opts.mode {
        for &pid in pids {
            check_attachable(pid, &opts.catalog)?;
        }
    }
    if opts.capture_range.is_some() && !traces_range_starts(opts) {
        bail!(
            "--capture-range needs the mstx range functions traced: add mstx to --domain, or \
             --function 'mstxRangeStartA,mstxRangeEnd,mstxDomainRangeStartA,mstxDomainRangeEnd'"
        );
    }
    Ok(())
}

/// Whether the selection traces a function that starts mstx ranges (by its catalog role):
/// without one no capture window can open.
fn traces_range_starts(opts: &TraceOptions) -> bool {
    opts.catalog.entries().iter().any(|entry| {
        entry.def.role.spec_flags() & SPEC_RANGE_START != 0 && opts.selection.is_enabled(&entry.def)
    })
}

/// The output directory: `--out` with its placeholders filled in for this session.
fn out_dir(opts: &TraceOptions, targets: &[u32]) -> Result<PathBuf> {
    let rank = match &opts.mode {
        Mode::Attach(pids) => {
            let pid = pids.first().copied().unwrap_or(0);
            outname::rank_in(
                |var| outname::process_var(pid, var),
                &format!("the environment of process {pid}"),
            )
        }
        _ => outname::rank_in(|var| std::env::var(var).ok(), "the agent's environment"),
    };
    let vars = outname::Vars {
        host: SinkOptions::default().host,
        // System-wide: the agent's own pid, which no other session has.
        pids: match &opts.mode {
            Mode::SystemWide => vec![std::process::id()],
            _ => targets.to_vec(),
        },
        rank,
        time: outname::local_time(),
    };
    outname::expand(&opts.out_dir, &vars)
}

/// Opens (or makes, 0700) the output directory, never through a symbolic link. An existing
/// directory must belong to the invoking user (the agent runs privileged and must not be
/// made to write into someone else's tree) and hold no trace yet.
fn open_output(path: &Path) -> Result<OutDir> {
    let (dir, found) = OutDir::open_or_create(path)?;
    if found == Found::Existing {
        let owner = dir
            .owner()
            .with_context(|| format!("stat {}", path.display()))?;
        if !invoking_users().contains(&owner) {
            bail!(
                "{} exists and belongs to uid {owner}, not to you; choose another --out \
                 (a new directory is made for you)",
                path.display()
            );
        }
        if dir.contains("session.json") {
            bail!(
                "{} already holds a trace (session.json); choose another --out",
                path.display()
            );
        }
    }
    let probe = ".write-test";
    dir.create_file(probe)
        .and_then(|_| dir.remove(probe))
        .with_context(|| format!("cannot write to output directory {}", path.display()))?;
    Ok(dir)
}

/// The user ids an existing output directory may belong to: the real uid, and under sudo
/// the user who ran sudo.
fn invoking_users() -> Vec<u32> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let mut users = vec![uid];
    if uid == 0
        && let Some(sudo) = std::env::var("SUDO_UID").ok().and_then(|u| u.parse().ok())
    {
        users.push(sudo);
    }
    users
}

fn check_attachable(pid: u32, catalog: &Catalog) -> Result<()> {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        bail!("no such process: {pid}");
    };
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let comm = comm.trim();
    // The state follows the command name, which is in parentheses and may hold any byte.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    if matches!(state, Some('Z' | 'X')) {
        bail!(
            "process {pid} ({comm}) has exited: it is a zombie waiting for its parent to \
             collect its status, with nothing left to trace"
        );
    }
    let libs = discovery::mapped_libraries(pid, catalog).map_err(|e| {
        if process_alive(pid) {
            e
        } else {
            anyhow::anyhow!("process {pid} ({comm}) exited while its libraries were read")
        }
    })?;
    if libs.is_empty() {
        bail!(
            "process {pid} ({comm}) maps no CANN library (libascendcl.so, libruntime.so, libhccl.so, \
             libms_tools_ext.so, libascend_hal.so, or one a catalog file names); is it an NPU \
             program?"
        );
    }
    Ok(())
}

/// Warns about a `--lib` that contributes nothing: no CANN library file there, or files
/// that define none of the enabled functions (a stripped build, another library).
fn warn_useless_libs(libs: &[PathBuf], attached: &[AttachedFile]) {
    for lib in libs {
        let lib_real = fs::canonicalize(lib).unwrap_or_else(|_| lib.clone());
        let files: Vec<&AttachedFile> = attached
            .iter()
            .filter(|f| {
                let real = fs::canonicalize(&f.path).unwrap_or_else(|_| f.path.clone());
                real.starts_with(&lib_real) || f.path.starts_with(lib)
            })
            .collect();
        if files.is_empty() {
            eprintln!(
                "npu-bpftrace: warning: --lib {}: no CANN library file there (libascendcl.so, \
                 libruntime.so, libhccl.so, libms_tools_ext.so, libascend_hal.so)",
                lib.display()
            );
        } else if files.iter().all(|f| f.functions.is_empty()) {
            eprintln!(
                "npu-bpftrace: warning: --lib {}: none of the enabled functions is defined in \
                 its {} file(s) (stripped of symbols? `npu-bpftrace probes` lists what is traced)",
                lib.display(),
                files.len()
            );
        }
    }
}

/// The line that says tracing is on: how many functions are probed, in how many library
/// files, for which processes.
fn announce(opts: &TraceOptions, attacher: &Attacher, processes: usize, targets: &[u32]) {
    let probes = attacher.function_count();
    let files = attacher
        .attached()
        .iter()
        .filter(|f| !f.functions.is_empty())
        .count();
    let whom = match &opts.mode {
        Mode::Attach(_) if targets.len() == 1 => "in 1 process".to_owned(),
        Mode::Attach(_) => format!("in {} processes", targets.len()),
        Mode::Command(_) => format!(
            "in 1 process (the command, pid {}, and its children as they start)",
            targets.first().copied().unwrap_or(0)
        ),
        Mode::SystemWide => format!("in {processes} processes (and any that start later)"),
    };
    let when = match (&opts.delay, &opts.capture_range) {
        (Some(delay), _) => format!("recording in {:.1} s (--delay)", delay.as_secs_f64()),
        (None, Some(range)) => format!(
            "recording inside mstx ranges '{}{}'{}",
            range.message,
            if range.prefix { "*" } else { "" },
            range
                .count
                .map_or(String::new(), |n| format!(", {n} per process"))
        ),
        (None, None) => "tracing".to_owned(),
    };
    status!("npu-bpftrace: attached {probes} probes {whom}, {files} library files; {when}");
}

/// Waits, with progress on stderr, while a previous session's detached helper releases its
/// probes: releasing perf-event uprobes holds the kernel mutex that making them needs, so
/// attaching meanwhile stalls (and can fail) without a word.
fn wait_for_previous_release() {
    const LIMIT: Duration = Duration::from_secs(120);
    let started = std::time::Instant::now();
    let mut said = None;
    loop {
        let releasing = crate::bpf::releasing_sessions();
        if releasing == 0 {
            if said.is_some() {
                status!(
                    "npu-bpftrace: previous probes released after {:.1} s",
                    started.elapsed().as_secs_f64()
                );
            }
            return;
        }
        let waited = started.elapsed();
        if waited > LIMIT {
            eprintln!("npu-bpftrace: previous probes still being released; attaching anyway");
            return;
        }
        let secs = waited.as_secs();
        if said.is_none_or(|last| secs >= last + 5) {
            status!(
                "npu-bpftrace: waiting for {releasing} previous session(s) to release their probes \
                 ({secs} s; perf-event uprobes take ~0.1 s each)"
            );
            said = Some(secs);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

async fn run(opts: TraceOptions) -> Result<TraceSummary> {
    // First: from now on a stop signal is a request to finish cleanly, at any stage.
    let mut signals = StopSignals::install().context("installing the signal handlers")?;
    // The command waits at its gate (and exits if the agent gives up before opening it);
    // its pid names the output directory (`%p`).
    let mut child = match &opts.mode {
        Mode::Command(argv) => Some(GatedChild::spawn(argv)?),
        _ => None,
    };
    let targets = match (&opts.mode, &child) {
        (Mode::Attach(pids), _) => pids.clone(),
        (_, Some(child)) => vec![child.pid()],
        _ => Vec::new(),
    };
    let out_dir = out_dir(&opts, &targets)?;
    let mut out = open_output(&out_dir)?;
    let mut probes = load_probes(&opts)?;
    if probes.attach_kind() == AttachKind::PerfEvent {
        // Perf-event uprobes are made and released under one kernel mutex.
        wait_for_previous_release();
    }
    // Probe ids are handed out as files are attached; the correlator reads them.
    let table = Arc::new(ProbeTable::new());
    for &pid in &targets {
        probes.add_target(pid)?;
    }
    let initial = initial_libraries(&opts)?;
    let processes = match &opts.mode {
        Mode::SystemWide => discovery::scan_processes(&opts.catalog).len(),
        _ => targets.len(),
    };
    check_functions(&opts, &initial)?;
    let host = SinkOptions::default().host;
    let sink = ParquetSink::create_in(out.try_clone()?, SinkOptions::new(host.clone()))?;
    // The pipeline, with the device profiling channel, starts before any probe: every
    // submission the probes see then falls inside the channel's session, and the probes read
    // SQE headers and completion entries as the chip the driver reports lays them out.
    let driver = driver_library(&opts.catalog, &initial);
    let (edges_tx, mut edges) = mpsc::unbounded_channel();
    let pipeline = Pipeline::start(
        &opts,
        &mut probes,
        driver,
        table.clone(),
        Box::new(sink),
        edges_tx,
    )?;
    // Recording is on (unless paused) from the first probe attached.
    let started_ns = clock_ns(libc::CLOCK_MONOTONIC);
    let mut attacher = match attach_initial(&opts, &mut probes, table, initial) {
        Ok(attacher) => attacher,
        Err(e) => {
            pipeline.abandon().await;
            return Err(e);
        }
    };
    // The session's start clock pair: every initial probe is in place (calls after it were
    // traced, which `attach` tests rely on). Taken before the holds' set-up, which takes
    // tens of milliseconds while the traced processes run on.
    let mut session = session::start(host, opts.mode.name().into(), targets);

    // Before the command runs and before capabilities go (tracefs may need one).
    let (mut holds, hold_stats) = start_holds(&mut probes, &opts.catalog, &attacher);
    session.attached = attacher.attached().to_vec();
    session.chip = Some(pipeline.chip.clone());
    session.holds = hold_stats;
    session::write(&session, &out, true)?;
    // Attached: what the rest of the session does not need goes.
    if let Err(e) = caps::drop_unneeded() {
        eprintln!("npu-bpftrace: warning: could not drop capabilities: {e}");
    }
    warn_useless_libs(&opts.libs, attacher.attached());
    announce(&opts, &attacher, processes, &session.targets);
    if let Some(child) = &mut child {
        child.release()?;
    }

    let mut windows = Windows::new(
        opts.delay
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        opts.capture_range.as_ref(),
        started_ns,
        opts.delay.is_some(),
    );
    let mut control = Control {
        windows: &mut windows,
        edges: &mut edges,
    };
    let stopped = wait_for_stop(
        &opts,
        &mut probes,
        &mut attacher,
        &mut holds,
        child,
        &pipeline,
        &mut signals,
        &mut control,
    )
    .await?;
    // Recording stops now: the probes return at once from here on.
    probes.silence()?;
    if let Some(holds) = holds.take() {
        session.holds = holds.finish();
    }
    let stop_ns = clock_ns(libc::CLOCK_MONOTONIC);
    session.device_time_sources = pipeline.device_time_sources.clone();
    let hurry = stopped.interrupted.is_some();
    let (report, decode_errors) = pipeline.stop(&mut probes, &mut signals, hurry).await?;
    // Window edges the last drain of the ring buffer delivered.
    while let Ok(edge) = edges.try_recv() {
        if edge.header.ts_ns <= stop_ns {
            windows.edge(&edge);
        }
    }
    session.capture = windows.finish(stop_ns);
    finish_session(&mut session, &attacher, &probes, report, decode_errors)?;
    let incomplete = write_final_session(&session, &mut out);
    probes.close();
    Ok(TraceSummary {
        out_dir,
        session,
        command_status: stopped.status,
        interrupted: stopped.interrupted,
        incomplete,
    })
}

/// Writes the final session.json (into the output directory made again, should it have
/// been removed). Returns why the trace is incomplete, if it is.
fn write_final_session(session: &Session, out: &mut OutDir) -> Option<String> {
    let mut why = Vec::new();
    let lost = session.output.total_rows_lost();
    if lost > 0 {
        why.push(format!(
            "{lost} rows could not be written ({})",
            session
                .output
                .error
                .as_deref()
                .unwrap_or("output directory removed")
        ));
    }
    if out.removed() {
        match OutDir::open_or_create(out.path()) {
            Ok((again, _)) => *out = again,
            Err(e) => why.push(format!("{e:#}")),
        }
    }
    if let Err(e) = session::write(session, out, false) {
        why.push(format!(
            "{e:#}; {} is the preliminary one (complete: false)",
            out.path().join("session.json").display()
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// Starts holding processes at their first open of a library file not attached yet
/// ([`hold`]), unless `NPU_BPFTRACE_HOLD=0` or the kernel lacks what it needs (then said
/// once, and in session.json: libraries are found by rescans only).
fn start_holds(
    probes: &mut Probes,
    catalog: &Catalog,
    attacher: &Attacher,
) -> (Option<Holds>, HoldStats) {
    if hold::disabled_by_env() {
        let why = format!("{}=0", hold::HOLD_ENV);
        return (
            None,
            HoldStats {
                unavailable: Some(why),
                ..HoldStats::default()
            },
        );
    }
    match Holds::start(probes, catalog, attacher.attached()) {
        Ok(holds) => (
            Some(holds),
            HoldStats {
                enabled: true,
                ..HoldStats::default()
            },
        ),
        Err(e) => {
            eprintln!(
                "npu-bpftrace: warning: processes with their own copy of the libraries are \
                 traced from when a rescan finds them (up to a second late): {e:#}"
            );
            (
                None,
                HoldStats {
                    unavailable: Some(format!("{e:#}")),
                    ..HoldStats::default()
                },
            )
        }
    }
}

/// Loads the BPF programs (what each function captures is set as its file is attached).
fn load_probes(opts: &TraceOptions) -> Result<Probes> {
    let mut probes = Probes::load(opts.ringbuf_bytes, UprobeMode::from_env()?)?;
    let fork_child_pid_offset = probes.attach_lifecycle()?;
    probes.set_config(Config {
        filter_targets: u8::from(!matches!(opts.mode, Mode::SystemWide)),
        follow_children: u8::from(matches!(opts.mode, Mode::Command(_))),
        fork_child_pid_offset,
        agent_pid: std::process::id(),
        passive_devices: 0,
        paused: u8::from(opts.delay.is_some()),
        capture_mstx: u8::from(opts.capture_range.is_some()),
        _pad: 0,
        capture_ranges: opts
            .capture_range
            .as_ref()
            .and_then(|r| r.count)
            .unwrap_or(0),
    })?;
    if let Some(range) = &opts.capture_range {
        probes.set_capture_match(range.bpf_match())?;
    }
    Ok(probes)
}

/// With `--function` alone, a session whose patterns name nothing in the libraries found is
/// refused before anything starts, naming the first pattern.
fn check_functions(opts: &TraceOptions, files: &[LibraryFile]) -> Result<()> {
    if opts.selection.selects_domains() {
        return Ok(());
    }
    for file in files {
        let symbols = SymbolTable::read(&file.path)?;
        if !plan_file(&opts.catalog, &opts.selection, file.name, &symbols)
            .functions
            .is_empty()
        {
            return Ok(());
        }
    }
    let unmatched = opts.selection.functions().unmatched([]);
    match unmatched.first() {
        Some(pattern) => bail!(
            "unknown function '{pattern}': no library found defines it (see `npu-bpftrace \
             probes --function '{pattern}'`; --lib adds a library)"
        ),
        None => Ok(()),
    }
}

/// Attaches to the libraries known before tracing starts.
fn attach_initial(
    opts: &TraceOptions,
    probes: &mut Probes,
    table: Arc<ProbeTable>,
    initial: Vec<LibraryFile>,
) -> Result<Attacher> {
    let mut attacher = Attacher::new(opts.selection.clone(), opts.catalog.clone(), table);
    for file in initial {
        // Attach mode starts from what the targets map; the others from installed files.
        match opts.mode {
            Mode::Attach(_) => attacher.attach(probes, file)?,
            _ => attacher.attach_unmapped(probes, file)?,
        };
    }
    if attacher.function_count() == 0 {
        bail!(
            "no enabled function resolves in the CANN libraries found; check --domain/--function and --lib"
        );
    }
    for pattern in attacher.unmatched_functions() {
        eprintln!(
            "npu-bpftrace: --function '{pattern}' names no function of the libraries found yet \
             (see `npu-bpftrace probes`)"
        );
    }
    Ok(attacher)
}

fn finish_session(
    session: &mut Session,
    attacher: &Attacher,
    probes: &Probes,
    report: ConsumeReport,
    decode_errors: u64,
) -> Result<()> {
    session.clock_end = Some(session::clock_sample());
    session.complete = true;
    session.attached = attacher.attached().to_vec();
    session::set_drops(session, &probes.drops()?);
    session.bpf_maps = probes.occupancy()?;
    if decode_errors > 0 {
        session
            .drops
            .insert("undecodable_records".to_owned(), decode_errors);
    }
    session.correlation = report.correlation;
    session.activity = report.activity;
    session.clocks = report.clocks;
    session.rows = report
        .sink
        .rows
        .into_iter()
        .map(|(table, rows)| (table.to_owned(), rows))
        .collect();
    session.files = report.sink.files;
    session.bytes = report.sink.bytes;
    session.output = OutputStats {
        write_errors: report.sink.write_errors,
        error: report.sink.write_error,
        rows_lost: report
            .sink
            .rows_lost
            .into_iter()
            .map(|(table, rows)| (table.to_owned(), rows))
            .collect(),
        directory_removed: report.sink.directory_removed,
    };
    Ok(())
}

/// The running tasks of the pipeline: ring-buffer poller, clock sampler, correlator.
struct Pipeline {
    stop: watch::Sender<bool>,
    tx: mpsc::Sender<Input>,
    poller: tokio::task::JoinHandle<Result<u64>>,
    sampler: Option<(std::thread::JoinHandle<()>, Arc<AtomicBool>)>,
    channel: Option<ChannelReader>,
    /// The chip whose device path is read (for session.json).
    chip: ChipSummary,
    /// Per device, where its task times come from (for session.json).
    device_time_sources: BTreeMap<u32, String>,
    /// Asks the ring poller to hand on what it holds, then the correlator to answer once
    /// no task submitted by the given time waits for its channel records.
    settle: mpsc::Sender<Settle>,
    /// How long stopping waits for the end records of submitted tasks.
    settle_timeout: Duration,
    consumer: tokio::task::JoinHandle<Result<ConsumeReport>>,
    progress: Arc<Progress>,
}

impl Pipeline {
    /// `driver` is the traced processes' driver library, through which the chip, device
    /// clocks and profiling channels are read. The chip's device layout goes to the BPF
    /// programs here, before any probe is attached.
    fn start(
        opts: &TraceOptions,
        probes: &mut Probes,
        driver: Option<&Path>,
        table: Arc<ProbeTable>,
        sink: Box<dyn Sink + Send>,
        edges: mpsc::UnboundedSender<WindowEdge>,
    ) -> Result<Self> {
        let (stop, stop_rx) = watch::channel(false);
        let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
        let devices = Devices::default();
        let opened = driver.and_then(Driver::open);
        let chip = match &opened {
            Some(driver) => driver.chip(),
            None => Chip::fallback(
                None,
                "no driver library (libascend_hal.so) to ask which chip this is".to_owned(),
            ),
        };
        probes.set_layout(chip.layout.device)?;
        let sampler = opened.map(|driver| {
            let stop = Arc::new(AtomicBool::new(false));
            (
                driver::spawn_sampler(driver, devices.clone(), tx.clone(), stop.clone()),
                stop,
            )
        });
        let (channel, device_time_sources) = match driver {
            Some(path) => start_channel(path, chip.layout, &tx),
            None => (None, BTreeMap::new()),
        };
        let passive: Vec<u32> = device_time_sources
            .iter()
            .filter(|(_, source)| source.starts_with(PASSIVE_SOURCE))
            .map(|(&device, _)| device)
            .collect();
        probes.set_passive_devices(passive.iter().copied())?;
        let settle_timeout = if passive.is_empty() {
            SETTLE_TIMEOUT
        } else {
            PASSIVE_SETTLE_TIMEOUT
        };
        // Before the ring poller starts: the correlator must know a device's time source
        // before it sees any of its submissions.
        let (settle, settle_rx) = mpsc::channel(1);
        let binaries = CapturedBinaries::default();
        let reader = RingReader::new(binaries.clone(), chip.layout, edges);
        let poller = tokio::spawn(poll_ring(
            probes.take_events()?,
            reader,
            tx.clone(),
            stop_rx,
            settle_rx,
        ));
        let progress = Arc::new(Progress::default());
        let symbolizer = Symbolizer::new(binaries);
        let consumer = tokio::spawn(consume(
            rx,
            sink,
            Correlator::new(Box::new(symbolizer), chip.layout, table),
            opts.print,
            devices,
            progress.clone(),
        ));
        Ok(Self {
            stop,
            tx,
            poller,
            sampler,
            channel,
            chip: chip.summary,
            device_time_sources,
            settle,
            settle_timeout,
            consumer,
            progress,
        })
    }

    /// Drains the ring buffer, takes a last clock sample, hands the correlator what only
    /// the kernel maps still know, and waits for it to write everything. Unless `hurry`,
    /// it first waits (up to the settle timeout) for the end records of tasks still running
    /// on the devices; a stop signal meanwhile cuts that wait short.
    async fn stop(
        self,
        probes: &mut Probes,
        signals: &mut StopSignals,
        hurry: bool,
    ) -> Result<(ConsumeReport, u64)> {
        // Tasks submitted until now may still be running: their end records, read by the
        // agent or (passive mode) copied through the ring buffer, may take a while.
        let (settled, wait) = oneshot::channel();
        let now_ns = clock_ns(libc::CLOCK_MONOTONIC);
        if !hurry && self.settle.send((now_ns, settled)).await.is_ok() {
            tokio::select! {
                _ = tokio::time::timeout(self.settle_timeout, wait) => {}
                Ok(caught) = signals.recv_stop() => {
                    status!("npu-bpftrace: {}: finishing at once", caught.name());
                }
            }
        }
        let _ = self.stop.send(true);
        let decode_errors = self.poller.await.context("ring-buffer poller panicked")??;
        if let Some(channel) = self.channel {
            // Flushes the devices and reads their last records before the end.
            let _ = tokio::task::spawn_blocking(move || channel.stop()).await;
        }
        if let Some((sampler, stop)) = self.sampler {
            stop.store(true, Ordering::Relaxed);
            let _ = tokio::task::spawn_blocking(move || sampler.join()).await;
        }
        let end = FinalState {
            missing_tasks: probes.drain_tasks(|_| true)?,
            drops: probes.drops()?.to_vec(),
            now_ns: clock_ns(libc::CLOCK_MONOTONIC),
        };
        let _ = self.tx.send(Input::Finish(end)).await;
        drop(self.tx);
        let report = self.consumer.await.context("correlator task panicked")??;
        Ok((report, decode_errors))
    }
}

impl Pipeline {
    /// Stops everything without writing a session: tracing never began.
    async fn abandon(self) {
        let _ = self.stop.send(true);
        let _ = self.poller.await;
        if let Some(channel) = self.channel {
            let _ = tokio::task::spawn_blocking(move || channel.stop()).await;
        }
        if let Some((sampler, stop)) = self.sampler {
            stop.store(true, Ordering::Relaxed);
            let _ = tokio::task::spawn_blocking(move || sampler.join()).await;
        }
        drop(self.tx);
        let _ = self.consumer.await;
    }
}

/// Starts the profiling channel on every device of the traced processes' driver, and tells
/// the correlator (through `tx`, ahead of any record) which devices it serves. Returns the
/// reader and, per device, the time source for session.json.
///
fn start_channel(
    path: &Path,
    chip: &'static ChipLayout,
    tx: &mpsc::Sender<Input>,
) -> (Option<ChannelReader>, BTreeMap<u32, String>) {
    let since_ns = clock_ns(libc::CLOCK_MONOTONIC);
    let (reader, outcomes) = match ChannelReader::start(path, chip, tx.clone()) {
        Ok(started) => started,
        Err(why) => {
            eprintln!("npu-bpftrace: device task times from completion entries: {why}");
            return (None, BTreeMap::new());
        }
    };
    let sources = outcomes
        .iter()
        .map(|(&device, outcome)| {
            let source = match outcome {
                Ok(()) => "profiling_channel".to_owned(),
                Err(why) => format!("{PASSIVE_SOURCE}: {why}"),
            };
            (device, source)
        })
        .collect();
    if tx.try_send(Input::DeviceTimes(outcomes, since_ns)).is_err() {
        eprintln!("npu-bpftrace: could not pass the device time sources on");
    }
    (reader, sources)
}

/// The driver library of the traced processes (the catalog says which library submits
/// device tasks), to read the chip, device clocks and profiling channels through.
fn driver_library<'a>(catalog: &Catalog, files: &'a [LibraryFile]) -> Option<&'a Path> {
    let driver = catalog.driver_library()?;
    files
        .iter()
        .find(|f| f.name == driver)
        .map(|f| f.path.as_path())
}

/// Libraries attached before tracing starts.
fn initial_libraries(opts: &TraceOptions) -> Result<Vec<LibraryFile>> {
    let installed = || {
        let ld_path = std::env::var("LD_LIBRARY_PATH").ok();
        let dirs = discovery::install_dirs(ld_path.as_deref());
        discovery::installed_libraries(&dirs, &opts.libs, &opts.catalog)
    };
    let files = match &opts.mode {
        Mode::Attach(pids) => {
            let mut files = discovery::installed_libraries(&[], &opts.libs, &opts.catalog);
            for &pid in pids {
                files.extend(discovery::mapped_libraries(pid, &opts.catalog)?);
            }
            files
        }
        Mode::Command(_) => installed(),
        Mode::SystemWide => {
            let mut files = installed();
            files.extend(
                discovery::scan_processes(&opts.catalog)
                    .into_iter()
                    .flat_map(|(_, l)| l),
            );
            files
        }
    };
    if files.is_empty() {
        bail!(
            "no CANN libraries found: set ASCEND_HOME_PATH (source CANN's set_env.sh), \
             add their directory to LD_LIBRARY_PATH, or pass --lib PATH"
        );
    }
    Ok(files)
}

/// Why recording stopped.
struct Stopped {
    /// The traced command's exit status (record mode), when it exited.
    status: Option<std::process::ExitStatus>,
    /// The second stop signal, which ended a record session before its command exited.
    interrupted: Option<Caught>,
}

/// Waits for a stop signal (SIGINT, SIGTERM, SIGHUP), --duration, the command's exit
/// (record) or the targets' exit (attach); meanwhile attaches to CANN libraries that
/// processes map later. In record mode the first stop signal goes on to the command and
/// tracing goes on until it exits; a second one stops at once.
#[allow(
    clippy::too_many_arguments,
    reason = "the session's parts, each borrowed once"
)]
async fn wait_for_stop(
    opts: &TraceOptions,
    probes: &mut Probes,
    attacher: &mut Attacher,
    holds: &mut Option<Holds>,
    child: Option<GatedChild>,
    pipeline: &Pipeline,
    signals: &mut StopSignals,
    control: &mut Control<'_>,
) -> Result<Stopped> {
    let mut status = StatusLine::new();
    let (tx, progress) = (&pipeline.tx, pipeline.progress.as_ref());
    let waiting = Waiting { opts, tx, progress };
    let stopped = waiting
        .wait(
            probes,
            attacher,
            holds,
            child,
            signals,
            control,
            &mut status,
        )
        .await;
    status.finish();
    stopped
}

/// Capture control while the session waits: the windows so far, and the mstx window edges
/// the BPF programs report.
struct Control<'a> {
    windows: &'a mut Windows,
    edges: &'a mut mpsc::UnboundedReceiver<WindowEdge>,
}

impl Control<'_> {
    /// SIGUSR1 resumes recording, SIGUSR2 pauses it (and cancels a pending `--delay`).
    fn signal(
        &mut self,
        caught: Caught,
        probes: &mut Probes,
        delay: &mut Option<tokio::time::Instant>,
    ) -> Result<()> {
        let now = clock_ns(libc::CLOCK_MONOTONIC);
        let changed = if caught.signo == libc::SIGUSR1 {
            *delay = None;
            probes.set_paused(false)?;
            self.windows.resume(now, WindowCause::Sigusr1)
        } else {
            let cancelled = delay.take().is_some();
            probes.set_paused(true)?;
            self.windows.pause(now, WindowCause::Sigusr2) || cancelled
        };
        match (changed, self.windows.recording()) {
            (true, true) => status!("npu-bpftrace: {}: recording", caught.name()),
            (true, false) => status!("npu-bpftrace: {}: recording paused", caught.name()),
            (false, true) => status!("npu-bpftrace: {}: recording already", caught.name()),
            (false, false) => status!("npu-bpftrace: {}: paused already", caught.name()),
        }
        Ok(())
    }

    /// `--delay` ran out.
    fn delay_over(&mut self, probes: &mut Probes) -> Result<()> {
        probes.set_paused(false)?;
        self.windows
            .resume(clock_ns(libc::CLOCK_MONOTONIC), WindowCause::Delay);
        status!("npu-bpftrace: recording (--delay)");
        Ok(())
    }

    /// With `--capture-range-count N`: whether every process that opened a window has
    /// closed its Nth (or exited).
    fn ranges_done(&self, opts: &TraceOptions) -> bool {
        opts.capture_range
            .as_ref()
            .and_then(|r| r.count)
            .is_some_and(|n| self.windows.ranges_done(n, process_alive))
    }

    /// When `--duration` ends: that long after recording first began.
    fn deadline(&self, duration: Option<Duration>) -> Option<tokio::time::Instant> {
        let (duration, start_ns) = (duration?, self.windows.first_start_ns()?);
        let elapsed = clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(start_ns);
        let left = duration.saturating_sub(Duration::from_nanos(elapsed));
        Some(tokio::time::Instant::now() + left)
    }
}

/// What the wait for the stop reads.
struct Waiting<'a> {
    opts: &'a TraceOptions,
    tx: &'a mpsc::Sender<Input>,
    progress: &'a Progress,
}

impl Waiting<'_> {
    #[allow(
        clippy::too_many_arguments,
        reason = "the session's parts, each borrowed once"
    )]
    async fn wait(
        &self,
        probes: &mut Probes,
        attacher: &mut Attacher,
        holds: &mut Option<Holds>,
        child: Option<GatedChild>,
        signals: &mut StopSignals,
        control: &mut Control<'_>,
        status: &mut StatusLine,
    ) -> Result<Stopped> {
        let stopped = |status, interrupted| {
            Ok(Stopped {
                status,
                interrupted,
            })
        };
        let mut delay = self.opts.delay.map(|d| tokio::time::Instant::now() + d);
        let mut deadline = control.deadline(self.opts.duration);
        let mut tick = tokio::time::interval(FLUSH_INTERVAL);
        let mut rescans = tokio::time::interval(RESCAN_INTERVAL);
        let system_wide = matches!(self.opts.mode, Mode::SystemWide);
        let command = child.as_ref().map(GatedChild::pid);
        let mut passed_on = false;
        let mut exited = child.map(GatedChild::wait);
        loop {
            if deadline.is_none() {
                deadline = control.deadline(self.opts.duration);
            }
            tokio::select! {
                caught = signals.recv() => {
                    let caught = caught.context("reading signals")?;
                    if !caught.is_stop() {
                        control.signal(caught, probes, &mut delay)?;
                        continue;
                    }
                    match command {
                        Some(pid) if !passed_on => {
                            pass_on(caught, pid);
                            passed_on = true;
                        }
                        Some(_) => return stopped(None, Some(caught)),
                        None => return stopped(None, None),
                    }
                }
                _ = sleep_until(delay) => {
                    delay = None;
                    control.delay_over(probes)?;
                }
                Some(edge) = control.edges.recv() => {
                    control.windows.edge(&edge);
                    if control.ranges_done(self.opts) {
                        status!("npu-bpftrace: every process recorded its capture ranges; stopping");
                        return stopped(None, None);
                    }
                }
                _ = sleep_until(deadline) => return stopped(None, None),
                events = next_holds(holds) => {
                    if let Some(holds) = holds.as_mut() {
                        holds.handle(&events?, probes, attacher, &self.opts.catalog);
                    }
                }
                status = wait_exit(&mut exited) => return stopped(Some(status?), None),
                // Every process's maps are read only once a flush interval (system-wide).
                _ = rescans.tick(), if !system_wide => rescan(self.opts, probes, attacher)?,
                _ = tick.tick() => {
                    if !self.tick(probes, attacher, status).await? || control.ranges_done(self.opts) {
                        return stopped(None, None);
                    }
                }
            }
        }
    }

    /// Once a second: new libraries, tasks of exited processes, the status line. False
    /// once every attach target has exited.
    async fn tick(
        &self,
        probes: &mut Probes,
        attacher: &mut Attacher,
        status: &mut StatusLine,
    ) -> Result<bool> {
        if let Mode::Attach(pids) = &self.opts.mode
            && pids.iter().all(|&pid| !process_alive(pid))
        {
            return Ok(false);
        }
        if matches!(self.opts.mode, Mode::SystemWide) {
            rescan(self.opts, probes, attacher)?;
        }
        let lost = probes.drain_tasks(|tgid| !process_alive(tgid))?;
        if !lost.is_empty() {
            let _ = self.tx.send(Input::Lost(lost)).await;
        }
        status.update(self.progress, probes.drops()?.iter().sum());
        Ok(true)
    }
}

/// Passes the first stop signal on to the traced command, as perf does, unless the terminal
/// already sent it to the command's process group (Ctrl-C, a hangup): a program that
/// handles SIGINT must not see one keypress twice.
fn pass_on(caught: Caught, pid: u32) {
    // SAFETY: getpgid/getpgrp have no memory preconditions.
    let same_group = unsafe { libc::getpgid(pid as i32) == libc::getpgrp() };
    if !(caught.from_terminal && same_group) {
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(pid as i32, caught.signo) };
    }
    status!(
        "npu-bpftrace: {} passed on to the traced command (pid {pid}); tracing until it exits, \
         send it again to stop at once",
        caught.name()
    );
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The next hold events; never, without holds.
async fn next_holds(holds: &mut Option<Holds>) -> Result<Vec<tracer_common::HoldEvent>> {
    match holds {
        Some(holds) => holds.next().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn wait_exit(
    exited: &mut Option<tokio::task::JoinHandle<std::io::Result<std::process::ExitStatus>>>,
) -> Result<std::process::ExitStatus> {
    match exited {
        Some(handle) => Ok(handle.await.context("waiting for the command")??),
        None => std::future::pending().await,
    }
}

/// Attaches to CANN library files that traced processes (or, system-wide, any process)
/// mapped since the last scan, e.g. from a container or a private install.
fn rescan(opts: &TraceOptions, probes: &mut Probes, attacher: &mut Attacher) -> Result<()> {
    let pids: Vec<u32> = match &opts.mode {
        Mode::SystemWide => discovery::scan_processes(&opts.catalog)
            .into_iter()
            .map(|(p, _)| p)
            .collect(),
        _ => probes.targets()?,
    };
    for pid in pids {
        for file in discovery::mapped_libraries(pid, &opts.catalog).unwrap_or_default() {
            // One file that cannot be attached (session.json lists it with the reason) must
            // not end the tracing of everything else; it is not tried again.
            if let Err(e) = attacher.attach(probes, file) {
                eprintln!(
                    "npu-bpftrace: warning: process {pid}: {e:#}; its calls there are not traced"
                );
            }
        }
    }
    Ok(())
}

/// Drains the ring buffer whenever it is readable and forwards decoded batches. On stop,
/// drains what is left so nothing already recorded is lost.
/// A settle request: (CLOCK_MONOTONIC ns, who to answer).
type Settle = (u64, oneshot::Sender<()>);

async fn poll_ring(
    ring: RingBuf<MapData>,
    mut reader: RingReader,
    tx: mpsc::Sender<Input>,
    mut stop: watch::Receiver<bool>,
    mut settle: mpsc::Receiver<Settle>,
) -> Result<u64> {
    // SAFETY: the ring buffer owns its fd and outlives the registration (both move here).
    let mut fd = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
        .map_err(|e| anyhow::anyhow!("registering the ring buffer with tokio: {e}"))?;
    // The BPF side wakes us only once data piles up; small amounts wait for this tick.
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            guard = fd.readable_mut() => {
                let mut guard = guard?;
                if !reader.forward_all(guard.get_inner_mut(), &tx).await {
                    return Ok(reader.decode_errors);
                }
                guard.clear_ready();
            }
            _ = tick.tick() => {
                if !reader.forward_all(fd.get_mut(), &tx).await {
                    return Ok(reader.decode_errors);
                }
            }
            Some((by_ns, reply)) = settle.recv() => {
                // Submissions still in the ring first: the correlator must know them
                // before it can say none is waiting.
                if !reader.forward_all(fd.get_mut(), &tx).await
                    || tx.send(Input::Settle(by_ns, reply)).await.is_err()
                {
                    return Ok(reader.decode_errors);
                }
            }
            _ = stop.changed() => break,
        }
    }
    reader.forward_all(fd.get_mut(), &tx).await;
    Ok(reader.decode_errors)
}

/// Turns ring-buffer bytes into the correlator's inputs.
struct RingReader {
    decode_errors: u64,
    /// Channel bytes other profilers read (passive mode), as device records.
    passive: PassiveChannels,
    /// Device binaries copied at registration, for the symbolizer.
    binaries: CapturedBinaries,
    /// Capture window edges, for the session.
    edges: mpsc::UnboundedSender<WindowEdge>,
}

impl RingReader {
    /// Channel bytes are split into records of `chip`'s layout.
    fn new(
        binaries: CapturedBinaries,
        chip: &ChipLayout,
        edges: mpsc::UnboundedSender<WindowEdge>,
    ) -> Self {
        Self {
            decode_errors: 0,
            passive: PassiveChannels::new(chip.soc_log),
            binaries,
            edges,
        }
    }

    /// Sends everything the ring buffer holds, in batches; false once nobody listens.
    async fn forward_all(&mut self, ring: &mut RingBuf<MapData>, tx: &mpsc::Sender<Input>) -> bool {
        loop {
            let (batch, device) = self.drain(ring);
            let full = batch.len() == BATCH_RECORDS;
            if !batch.is_empty() && tx.send(Input::Records(batch)).await.is_err() {
                return false;
            }
            for soc in device {
                if tx.send(Input::Soc(soc)).await.is_err() {
                    return false;
                }
            }
            if !full {
                return true;
            }
        }
    }

    fn drain(&mut self, ring: &mut RingBuf<MapData>) -> (Vec<Record>, Vec<SocBatch>) {
        let mut batch = Vec::with_capacity(256);
        let mut device = Vec::new();
        while batch.len() < BATCH_RECORDS {
            let Some(item) = ring.next() else { break };
            match decode(&item) {
                Ok(Decoded::Record(record)) => batch.push(record),
                Ok(Decoded::Channel(piece)) => device.push(self.passive.push(&piece)),
                Ok(Decoded::Binary(piece)) => self.binaries.add(&piece),
                Ok(Decoded::Window(edge)) => {
                    let _ = self.edges.send(edge);
                }
                Err(_) => self.decode_errors += 1,
            }
        }
        (batch, device)
    }
}

/// What the correlator learned, for session.json.
struct ConsumeReport {
    correlation: CorrelateStats,
    activity: ActivityStats,
    clocks: BTreeMap<u32, ClockSummary>,
    sink: SinkStats,
}

/// Correlates records and writes rows; makes them durable once a second.
async fn consume(
    mut rx: mpsc::Receiver<Input>,
    mut sink: Box<dyn Sink + Send>,
    mut correlator: Correlator,
    print: Option<PrintFormat>,
    devices: Devices,
    progress: Arc<Progress>,
) -> Result<ConsumeReport> {
    let mut processes = ProcessCounter::default();
    let mut printer = Printer::new(print);
    let mut tick = tokio::time::interval(FLUSH_INTERVAL);
    let mut sweep = tokio::time::interval(EXITED_SWEEP_INTERVAL);
    let mut end = FinalState::default();
    let mut settle: Option<(u64, oneshot::Sender<()>)> = None;
    loop {
        if let Some((by_ns, _)) = settle
            && !correlator.activity().channel_waiting(by_ns)
        {
            let _ = settle.take().map(|(_, tx)| tx.send(()));
        }
        tokio::select! {
            input = rx.recv() => match input {
                Some(Input::Records(batch)) => {
                    processes.observe(&batch, &progress);
                    for record in &batch {
                        correlator.push(record, &mut printer);
                    }
                    if let Ok(mut known) = devices.lock() {
                        known.extend(correlator.devices());
                    }
                    write(&mut sink, correlator.take_output(), &progress)?;
                }
                Some(Input::Clock(reading)) => correlator.clock_reading(reading),
                Some(Input::Lost(tasks)) => correlator.tasks_lost(&tasks, clock_ns(libc::CLOCK_MONOTONIC)),
                Some(Input::DeviceTimes(outcomes, since_ns)) => {
                    for (device, outcome) in &outcomes {
                        match outcome {
                            Ok(()) => correlator.soc_log_started(*device, since_ns),
                            Err(why) => correlator.soc_log_passive(*device, why, since_ns),
                        }
                    }
                }
                Some(Input::Soc(batch)) => correlator.soc_batch(&batch),
                Some(Input::Settle(by_ns, tx)) => settle = Some((by_ns, tx)),
                Some(Input::Finish(state)) => end = state,
                None => break,
            },
            _ = tick.tick() => {
                sink.flush()?;
                release_freed_memory();
            }
            _ = sweep.tick() => correlator.forget_exited(|pid| !process_alive(pid)),
        }
    }
    correlator.finish(&mut printer, &end);
    write(&mut sink, correlator.take_output(), &progress)?;
    Ok(ConsumeReport {
        correlation: correlator.stats(),
        activity: correlator.activity().stats(),
        clocks: correlator.activity().clock_summaries(),
        sink: sink.finish()?,
    })
}

fn write(sink: &mut Box<dyn Sink + Send>, output: Output, progress: &Progress) -> Result<()> {
    progress.add_rows(output.len() as u64);
    sink.write(output)
}

/// A command started stopped at a gate, so probes are attached before it runs its first
/// instruction. `sh` holds the gate (reading fd 3) and then `exec`s the command in place,
/// keeping the pid the agent already registered as a target.
struct GatedChild {
    child: std::process::Child,
    gate: Option<fs::File>,
}

impl GatedChild {
    fn spawn(argv: &[OsString]) -> Result<Self> {
        let Some(program) = argv.first() else {
            bail!("record needs a command after `--`, or --system-wide");
        };
        let (read_end, write_end) = pipe()?;
        let mut command = std::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(r#"read -r _ <&3 || exit 127; exec 3<&-; exec "$@""#)
            .arg("npu-bpftrace-gate")
            .args(argv);
        let read_fd = read_end.into_raw();
        // SAFETY: dup2/close on inherited fds between fork and exec; async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                caps::clear_ambient_for_child();
                if libc::dup2(read_fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", program.to_string_lossy()))?;
        // SAFETY: our copy of the read end is no longer needed once the child has it.
        unsafe { libc::close(read_fd) };
        Ok(Self {
            child,
            gate: Some(write_end.into_file()),
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets the command run.
    fn release(&mut self) -> Result<()> {
        use std::io::Write;
        if let Some(mut gate) = self.gate.take() {
            gate.write_all(b"\n")
                .context("releasing the traced command")?;
        }
        Ok(())
    }

    fn wait(mut self) -> tokio::task::JoinHandle<std::io::Result<std::process::ExitStatus>> {
        tokio::task::spawn_blocking(move || self.child.wait())
    }
}

/// A pipe whose ends close on exec (fd 3 in the child is a dup without that flag).
fn pipe() -> Result<(RawEnd, RawEnd)> {
    let mut fds = [0; 2];
    // SAFETY: valid pointer to two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("creating the command gate pipe");
    }
    Ok((RawEnd(fds[0]), RawEnd(fds[1])))
}

struct RawEnd(i32);

impl RawEnd {
    fn into_raw(self) -> i32 {
        self.0
    }

    fn into_file(self) -> fs::File {
        use std::os::fd::FromRawFd;
        // SAFETY: the fd is open and owned by nobody else.
        unsafe { fs::File::from_raw_fd(self.0) }
    }
}
