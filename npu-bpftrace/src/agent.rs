//! A tracing session: preflight checks, loading and attaching the probes, and the tokio
//! pipeline ring buffer -> decode -> correlate -> sinks, until the session is told to stop.
use std::{
    collections::BTreeMap,
    ffi::OsString,
    fs,
    os::unix::{fs::DirBuilderExt, process::CommandExt},
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
    signal::unix::{SignalKind, signal},
    sync::{mpsc, oneshot, watch},
};
use tracer_common::{Config, TaskInfo, TaskKey};

use tracer_catalog::{Catalog, ChipLayout, ProbeTable};
use tracer_core::{
    clock::ClockReading,
    correlate::{Correlator, FinalState, Output},
    decode::{Decoded, Record, decode},
    soclog::{PassiveChannels, SocBatch},
};
use tracer_schema::session::{ActivityStats, ChipSummary, ClockSummary, CorrelateStats, Session};

use crate::{
    attach::{Attacher, Selection, plan_file},
    bpf::{Probes, UprobeMode},
    channel::{self, ChannelReader},
    discovery::{self, LibraryFile},
    driver::{self, Chip, Devices, Driver},
    progress::{ProcessCounter, Progress, StatusLine},
    session::{self, clock_ns},
    sink::{
        Sink, SinkStats,
        parquet::{ParquetSink, SinkOptions},
        print::Printer,
    },
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
    pub out_dir: PathBuf,
    pub duration: Option<Duration>,
    pub print: bool,
    pub ringbuf_bytes: u32,
}

/// How a session ended.
pub struct TraceSummary {
    pub out_dir: PathBuf,
    pub session: Session,
    /// Exit status of the traced command (record mode).
    pub command_status: Option<std::process::ExitStatus>,
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
    runtime.block_on(run(opts))
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
    ensure_privileged()?;
    if let Mode::Attach(pids) = &opts.mode {
        for &pid in pids {
            check_attachable(pid, &opts.catalog)?;
        }
    }
    if opts.out_dir.join("session.json").exists() {
        bail!(
            "{} already holds a trace (session.json); choose another --out",
            opts.out_dir.display()
        );
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&opts.out_dir)
        .with_context(|| format!("cannot create output directory {}", opts.out_dir.display()))?;
    let probe = opts.out_dir.join(".write-test");
    fs::write(&probe, b"").with_context(|| {
        format!(
            "cannot write to output directory {}",
            opts.out_dir.display()
        )
    })?;
    let _ = fs::remove_file(probe);
    Ok(())
}

fn ensure_privileged() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 || has_bpf_capabilities() {
        return Ok(());
    }
    bail!("loading BPF programs needs root, or the CAP_BPF and CAP_PERFMON capabilities (try sudo)")
}

/// Capability numbers (`linux/capability.h`) the BPF programs need.
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// CAP_PERFMON and CAP_BPF in the effective set.
fn has_bpf_capabilities() -> bool {
    let needed = (1u64 << CAP_PERFMON) | (1u64 << CAP_BPF);
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & needed == needed)
}

fn check_attachable(pid: u32, catalog: &Catalog) -> Result<()> {
    if !PathBuf::from(format!("/proc/{pid}")).exists() {
        bail!("no such process: {pid}");
    }
    let libs = discovery::mapped_libraries(pid, catalog)?;
    if libs.is_empty() {
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        bail!(
            "process {pid} ({}) maps no CANN library (libascendcl.so, libruntime.so, libhccl.so, \
             libms_tools_ext.so, libascend_hal.so, or one a catalog file names); is it an NPU \
             program?",
            comm.trim()
        );
    }
    Ok(())
}

async fn run(opts: TraceOptions) -> Result<TraceSummary> {
    let mut probes = load_probes(&opts)?;
    // Probe ids are handed out as files are attached; the correlator reads them.
    let table = Arc::new(ProbeTable::new());
    let mut child = match &opts.mode {
        Mode::Command(argv) => Some(GatedChild::spawn(argv)?),
        _ => None,
    };
    let targets = match (&opts.mode, &child) {
        (Mode::Attach(pids), _) => pids.clone(),
        (_, Some(child)) => vec![child.pid()],
        _ => Vec::new(),
    };
    for &pid in &targets {
        probes.add_target(pid)?;
    }
    let initial = initial_libraries(&opts)?;
    check_functions(&opts, &initial)?;
    let host = SinkOptions::default().host;
    let sink = ParquetSink::create(&opts.out_dir, SinkOptions::new(host.clone()))?;
    // The pipeline, with the device profiling channel, starts before any probe: every
    // submission the probes see then falls inside the channel's session, and the probes read
    // SQE headers and completion entries as the chip the driver reports lays them out.
    let driver = driver_library(&opts.catalog, &initial);
    let pipeline = Pipeline::start(&opts, &mut probes, driver, table.clone(), Box::new(sink))?;
    let mut attacher = match attach_initial(&opts, &mut probes, table, initial) {
        Ok(attacher) => attacher,
        Err(e) => {
            pipeline.abandon().await;
            return Err(e);
        }
    };

    let mut session = session::start(host, opts.mode.name().into(), targets);
    session.attached = attacher.attached().to_vec();
    session.chip = Some(pipeline.chip.clone());
    session.write(&opts.out_dir)?;
    if let Some(child) = &mut child {
        child.release()?;
    }

    let command_status = wait_for_stop(&opts, &mut probes, &mut attacher, child, &pipeline).await?;
    session.device_time_sources = pipeline.device_time_sources.clone();
    let (report, decode_errors) = pipeline.stop(&mut probes).await?;
    finish_session(&mut session, &attacher, &probes, report, decode_errors)?;
    session.write(&opts.out_dir)?;
    probes.close();
    Ok(TraceSummary {
        out_dir: opts.out_dir.clone(),
        session,
        command_status,
    })
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
    })?;
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
        let reader = RingReader::new(binaries.clone(), chip.layout);
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
    /// the kernel maps still know, and waits for it to write everything.
    async fn stop(self, probes: &mut Probes) -> Result<(ConsumeReport, u64)> {
        // Tasks submitted until now may still be running: their end records, read by the
        // agent or (passive mode) copied through the ring buffer, may take a while.
        let (settled, wait) = oneshot::channel();
        let now_ns = clock_ns(libc::CLOCK_MONOTONIC);
        if self.settle.send((now_ns, settled)).await.is_ok() {
            let _ = tokio::time::timeout(self.settle_timeout, wait).await;
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

/// Waits for Ctrl-C, SIGTERM, --duration, the command's exit (record) or the targets' exit
/// (attach); meanwhile attaches to CANN libraries that processes map later.
async fn wait_for_stop(
    opts: &TraceOptions,
    probes: &mut Probes,
    attacher: &mut Attacher,
    child: Option<GatedChild>,
    pipeline: &Pipeline,
) -> Result<Option<std::process::ExitStatus>> {
    let mut status = StatusLine::new();
    let (tx, progress) = (&pipeline.tx, pipeline.progress.as_ref());
    let stopped = wait_loop(opts, probes, attacher, child, tx, progress, &mut status).await;
    status.finish();
    stopped
}

async fn wait_loop(
    opts: &TraceOptions,
    probes: &mut Probes,
    attacher: &mut Attacher,
    child: Option<GatedChild>,
    tx: &mpsc::Sender<Input>,
    progress: &Progress,
    status: &mut StatusLine,
) -> Result<Option<std::process::ExitStatus>> {
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let deadline = opts.duration.map(|d| tokio::time::Instant::now() + d);
    let mut tick = tokio::time::interval(FLUSH_INTERVAL);
    let mut rescans = tokio::time::interval(RESCAN_INTERVAL);
    let system_wide = matches!(opts.mode, Mode::SystemWide);
    let mut exited = child.map(GatedChild::wait);
    loop {
        tokio::select! {
            _ = sigint.recv() => return Ok(None),
            _ = sigterm.recv() => return Ok(None),
            _ = sleep_until(deadline) => return Ok(None),
            status = wait_exit(&mut exited) => return Ok(Some(status?)),
            // Every process's maps are read only once a flush interval (system-wide).
            _ = rescans.tick(), if !system_wide => rescan(opts, probes, attacher)?,
            _ = tick.tick() => {
                if let Mode::Attach(pids) = &opts.mode
                    && pids.iter().all(|&pid| !process_alive(pid))
                {
                    return Ok(None);
                }
                if system_wide {
                    rescan(opts, probes, attacher)?;
                }
                let lost = probes.drain_tasks(|tgid| !process_alive(tgid))?;
                if !lost.is_empty() {
                    let _ = tx.send(Input::Lost(lost)).await;
                }
                status.update(progress, probes.drops()?.iter().sum());
            }
        }
    }
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
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
            attacher.attach(probes, file)?;
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
}

impl RingReader {
    /// Channel bytes are split into records of `chip`'s layout.
    fn new(binaries: CapturedBinaries, chip: &ChipLayout) -> Self {
        Self {
            decode_errors: 0,
            passive: PassiveChannels::new(chip.soc_log),
            binaries,
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
    print: bool,
    devices: Devices,
    progress: Arc<Progress>,
) -> Result<ConsumeReport> {
    let mut processes = ProcessCounter::default();
    let mut printer = Printer::new(print);
    let mut tick = tokio::time::interval(FLUSH_INTERVAL);
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
