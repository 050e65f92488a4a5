//! Loading the embedded BPF object, filling its maps, and attaching its programs.
//!
//! The generic ENTER/EXIT pair attaches to a library file in one of two ways
//! ([`AttachKind`]): two uprobe_multi links carrying every function of the file (Linux >=
//! 6.6, loaded through bpf(2) by [`uprobe_multi`], since aya 0.14 cannot), or one aya
//! perf-event uprobe per function and program, the fallback. [`UprobeMode`] chooses.
use std::{
    collections::HashSet,
    io,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    path::Path,
};

use anyhow::{Context, Result, bail};
use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap, Map, MapData, PerCpuArray, RingBuf},
    programs::{
        TracePoint, UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
};
use tracer_common::{
    CaptureMatch, Config, DeviceLayout, DropKind, PendingTask, ProbeSpec, TaskInfo, TaskKey,
    ThreadState,
};
pub use tracer_schema::session::AttachKind;
use tracer_schema::session::MapOccupancy;

mod uprobe_multi;

use uprobe_multi::MultiPair;

/// The BPF object built from `tracer-ebpf` by build.rs.
static BPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));

const ENTER_PROGRAM: &str = "api_enter";
const EXIT_PROGRAM: &str = "api_exit";
const TRACEFS: &str = "/sys/kernel/tracing";

/// Default ring-buffer size; a power of two multiple of the page size.
pub const DEFAULT_RINGBUF_BYTES: u32 = 8 << 20;

/// The environment variable that chooses the [`UprobeMode`]: `0` perf-event uprobes only,
/// `1` uprobe_multi links or fail, unset or `auto` uprobe_multi when the kernel has it.
pub const UPROBE_MULTI_ENV: &str = "NPU_BPFTRACE_UPROBE_MULTI";

/// How the generic pair may attach to library files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UprobeMode {
    /// uprobe_multi links, falling back to perf-event uprobes when the kernel rejects them
    /// (the first time; the choice then holds for the session).
    Auto,
    /// uprobe_multi links only: an error on kernels without them.
    Multi,
    /// One perf-event uprobe per function and program.
    PerfEvent,
}

impl UprobeMode {
    /// The mode [`UPROBE_MULTI_ENV`] asks for ([`UprobeMode::Auto`] when unset).
    pub fn from_env() -> Result<Self> {
        match std::env::var(UPROBE_MULTI_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(Self::Auto),
            Ok(value) => Self::parse(&value)
                .with_context(|| format!("{UPROBE_MULTI_ENV}={value}: expected 0, 1 or auto")),
            Err(e) => Err(e).with_context(|| format!("reading {UPROBE_MULTI_ENV}")),
        }
    }

    fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "" | "auto" => Some(Self::Auto),
            "1" => Some(Self::Multi),
            "0" => Some(Self::PerfEvent),
            _ => None,
        }
    }
}

/// The loaded BPF programs and maps of one tracing session.
pub struct Probes {
    ebpf: Ebpf,
    /// The pair loaded as uprobe_multi programs while that is how files are attached.
    multi: Option<MultiPair>,
    /// Whether the kernel may still turn uprobe_multi down in favour of perf events.
    may_fall_back: bool,
    /// Whether aya has loaded the pair for perf-event uprobes.
    perf_loaded: bool,
    /// uprobe_multi links, two per attached file; closing them detaches.
    links: Vec<OwnedFd>,
    attached: usize,
}

impl Probes {
    /// Loads the embedded object and its programs into the kernel (nothing attached yet).
    /// The generic pair is loaded for uprobe_multi links unless `mode` says perf events;
    /// with [`UprobeMode::Auto`], when loading it fails or the kernel turns down a trial
    /// link, it is loaded for perf-event uprobes instead (once, for the whole session).
    pub fn load(ringbuf_bytes: u32, mode: UprobeMode) -> Result<Self> {
        raise_memlock_limit();
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("EVENTS", ringbuf_bytes)
            .load(BPF_OBJECT)
            .map_err(|e| permission_hint(e.into()))
            .context("loading the BPF programs")?;
        for name in [
            "sched_process_exit",
            "sched_process_fork",
            "hold_open_enter",
            "hold_open_exit",
        ] {
            tracepoint(&mut ebpf, name)?
                .load()
                .with_context(|| format!("loading BPF program {name}"))?;
        }
        let (multi, may_fall_back) = match mode {
            UprobeMode::PerfEvent => (None, false),
            UprobeMode::Multi => (Some(load_multi(&ebpf)?), false),
            UprobeMode::Auto => match load_multi(&ebpf) {
                Ok(pair) => match pair.check_links() {
                    Ok(()) => (Some(pair), false),
                    // A kernel before 6.6: expected, session.json says `perf_event`.
                    Err(e) if e.is_unsupported() => (None, false),
                    // Undecided: the first real link decides, with the fallback loaded.
                    Err(_) => (Some(pair), true),
                },
                Err(e) => {
                    if !e.is_unsupported() {
                        note_fallback(&e);
                    }
                    (None, false)
                }
            },
        };
        let mut probes = Self {
            ebpf,
            multi,
            may_fall_back,
            perf_loaded: false,
            links: Vec::new(),
            attached: 0,
        };
        if probes.multi.is_none() || probes.may_fall_back {
            probes.load_perf()?;
        }
        Ok(probes)
    }

    /// Loads the generic pair for perf-event uprobes (aya's way).
    fn load_perf(&mut self) -> Result<()> {
        for name in [ENTER_PROGRAM, EXIT_PROGRAM] {
            uprobe(&mut self.ebpf, name)?
                .load()
                .with_context(|| format!("loading BPF program {name}"))?;
        }
        self.perf_loaded = true;
        Ok(())
    }

    /// How the next library file will be attached.
    pub fn attach_kind(&self) -> AttachKind {
        if self.multi.is_some() {
            AttachKind::UprobeMulti
        } else {
            AttachKind::PerfEvent
        }
    }

    /// Tells the generic probes what to capture for catalog entry `probe`.
    pub fn set_probe_spec(&mut self, probe: u16, spec: ProbeSpec) -> Result<()> {
        let mut specs: Array<_, ProbeSpec> = Array::try_from(map(&mut self.ebpf, "PROBE_SPECS")?)?;
        specs
            .set(u32::from(probe), spec, 0)
            .with_context(|| format!("probe id {probe} exceeds the BPF catalog size"))
    }

    /// Where the driver's SQ/CQ structures keep their fields.
    pub fn set_layout(&mut self, layout: DeviceLayout) -> Result<()> {
        let mut map: Array<_, DeviceLayout> = Array::try_from(map(&mut self.ebpf, "LAYOUT")?)?;
        map.set(0, layout, 0)?;
        Ok(())
    }

    pub fn set_config(&mut self, config: Config) -> Result<()> {
        let mut cfg: Array<_, Config> = Array::try_from(map(&mut self.ebpf, "CONFIG")?)?;
        cfg.set(0, config, 0)?;
        Ok(())
    }

    /// Copies other profilers' reads of these devices' profiling channels (passive mode).
    pub fn set_passive_devices(&mut self, devices: impl IntoIterator<Item = u32>) -> Result<()> {
        let mut cfg: Array<_, Config> = Array::try_from(map(&mut self.ebpf, "CONFIG")?)?;
        let mut config = cfg.get(&0, 0)?;
        config.passive_devices = devices
            .into_iter()
            .filter(|&d| d < u64::BITS)
            .fold(0, |mask, d| mask | 1 << d);
        cfg.set(0, config, 0)?;
        Ok(())
    }

    /// Pauses or resumes recording: while paused, calls that begin are not recorded (the
    /// probes stay attached and keep their per-thread state).
    pub fn set_paused(&mut self, paused: bool) -> Result<()> {
        let mut cfg: Array<_, Config> = Array::try_from(map(&mut self.ebpf, "CONFIG")?)?;
        let mut config = cfg.get(&0, 0)?;
        config.paused = u8::from(paused);
        cfg.set(0, config, 0)?;
        Ok(())
    }

    /// The message of the mstx ranges that open capture windows.
    pub fn set_capture_match(&mut self, matcher: CaptureMatch) -> Result<()> {
        let mut array: Array<_, CaptureMatch> =
            Array::try_from(map(&mut self.ebpf, "CAPTURE_MATCH")?)?;
        array.set(0, matcher, 0)?;
        Ok(())
    }

    /// Adds a process to the kernel-side target filter.
    pub fn add_target(&mut self, pid: u32) -> Result<()> {
        let mut targets: HashMap<_, u32, u8> = HashMap::try_from(map(&mut self.ebpf, "TARGETS")?)?;
        targets.insert(pid, 1, 0)?;
        Ok(())
    }

    /// Processes currently in the kernel-side target filter (record mode adds children).
    pub fn targets(&self) -> Result<Vec<u32>> {
        let map = self
            .ebpf
            .map("TARGETS")
            .context("BPF map TARGETS missing")?;
        let targets: HashMap<_, u32, u8> = HashMap::try_from(map)?;
        Ok(targets.keys().filter_map(|k| k.ok()).collect())
    }

    /// Removes and returns the submitted tasks, still awaiting completion, of processes
    /// matching `pred`, each under its full task id (the map's key may keep fewer bits).
    pub fn drain_tasks(&mut self, pred: impl Fn(u32) -> bool) -> Result<Vec<(TaskKey, TaskInfo)>> {
        let mut tasks: HashMap<_, TaskKey, PendingTask> =
            HashMap::try_from(map(&mut self.ebpf, "TASKS")?)?;
        // Iterating a hash map the BPF programs change at the same time restarts when the
        // current key is deleted under it: the same entry can come twice.
        let found: Vec<(TaskKey, PendingTask)> = tasks
            .iter()
            .filter_map(|entry| entry.ok())
            .filter(|(key, _)| pred(key.tgid))
            .collect::<std::collections::HashMap<_, _>>()
            .into_iter()
            .collect();
        for (key, _) in &found {
            let _ = tasks.remove(key);
        }
        Ok(found
            .into_iter()
            .map(|(key, pending)| {
                let full = TaskKey::new(key.tgid, key.device_id, key.stream_id, pending.task_id);
                (full, pending.info)
            })
            .collect())
    }

    /// Attaches the ENTER/EXIT pair to the functions of the file at `path`, given as
    /// (file offset, probe id): the probe id is the attach cookie. Returns how they were
    /// attached: two uprobe_multi links for the whole file, or two perf-event uprobes per
    /// function. (Should the trial link at load time have been inconclusive in
    /// [`UprobeMode::Auto`], a kernel refusing this first real link with `EINVAL`, `ENOSYS`
    /// or `EOPNOTSUPP` turns this and every later file to perf-event uprobes.)
    pub fn attach_file(&mut self, path: &Path, functions: &[(u64, u16)]) -> Result<AttachKind> {
        if functions.is_empty() {
            return Ok(self.attach_kind());
        }
        if let Some(multi) = &self.multi {
            let (offsets, cookies): (Vec<u64>, Vec<u64>) = functions
                .iter()
                .map(|&(offset, probe)| (offset, u64::from(probe)))
                .unzip();
            match multi.attach(path, &offsets, &cookies) {
                Ok(links) => {
                    self.links.extend(links);
                    self.may_fall_back = false;
                    self.attached += functions.len();
                    return Ok(AttachKind::UprobeMulti);
                }
                Err(e) if self.may_fall_back && e.is_unsupported() => {
                    note_fallback(&e);
                    self.multi = None;
                    self.may_fall_back = false;
                }
                Err(e) => return Err(e.into()),
            }
        }
        if !self.perf_loaded {
            bail!(
                "BPF programs {ENTER_PROGRAM}/{EXIT_PROGRAM} are not loaded for perf-event uprobes"
            );
        }
        for &(offset, probe) in functions {
            self.attach_perf(path, offset, probe)?;
        }
        Ok(AttachKind::PerfEvent)
    }

    /// Attaches the ENTER/EXIT pair to the function at `file_offset` in `path` with two
    /// perf-event uprobes.
    fn attach_perf(&mut self, path: &Path, file_offset: u64, probe: u16) -> Result<()> {
        // Return probe first: a call entered between the two attaches then has no ENTER
        // (its EXIT finds no frame and is ignored) rather than a frame that never pops.
        for name in [EXIT_PROGRAM, ENTER_PROGRAM] {
            let point = UProbeAttachPoint {
                location: UProbeAttachLocation::AbsoluteOffset(file_offset),
                cookie: Some(u64::from(probe)),
            };
            uprobe(&mut self.ebpf, name)?
                .attach(point, path, UProbeScope::AllProcesses)
                .with_context(|| {
                    format!("attaching {name} to {}+{file_offset:#x}", path.display())
                })?;
        }
        self.attached += 1;
        Ok(())
    }

    /// Detaches everything without making the caller wait. Releasing a perf-event uprobe
    /// waits for an RCU-tasks grace period under a kernel-wide mutex (about 0.1 s each
    /// here, so 20 s for a full catalog); a uprobe_multi link waits for one for all its
    /// functions (a few hundredths of a second per file). The probes are first told to
    /// trace nobody, then a detached grandchild process inherits the links and releases
    /// them in the background, so this process's own releases are cheap.
    pub fn close(mut self) {
        if self.silence().is_ok() {
            release_in_background();
        }
    }

    /// Makes every probe return at once: filter on, no targets. (Other profilers' reads of
    /// passive devices' channels are still copied, for the end records stopping waits for.)
    pub fn silence(&mut self) -> Result<()> {
        let mut cfg: Array<_, Config> = Array::try_from(map(&mut self.ebpf, "CONFIG")?)?;
        let config = cfg.get(&0, 0)?;
        cfg.set(
            0,
            Config {
                filter_targets: 1,
                follow_children: 0,
                ..config
            },
            0,
        )?;
        let mut targets: HashMap<_, u32, u8> = HashMap::try_from(map(&mut self.ebpf, "TARGETS")?)?;
        let pids: Vec<u32> = targets.keys().filter_map(|k| k.ok()).collect();
        for pid in pids {
            let _ = targets.remove(&pid);
        }
        Ok(())
    }

    /// Number of functions attached so far.
    pub fn attached(&self) -> usize {
        self.attached
    }

    /// Attaches the thread-exit and fork tracepoints. Returns the config field the fork
    /// hook needs (the offset of `child_pid` in the tracepoint record).
    pub fn attach_lifecycle(&mut self) -> Result<u16> {
        ensure_tracefs()?;
        let offset = fork_child_pid_offset()?;
        for name in ["sched_process_exit", "sched_process_fork"] {
            tracepoint(&mut self.ebpf, name)?
                .attach("sched", name)
                .with_context(|| format!("attaching tracepoint sched/{name}"))?;
        }
        Ok(offset)
    }

    /// Attaches tracepoint program `program` to `category/name`; it stays attached for the
    /// session.
    pub fn attach_tracepoint(&mut self, category: &str, name: &str, program: &str) -> Result<()> {
        tracepoint(&mut self.ebpf, program)?
            .attach(category, name)
            .with_context(|| format!("attaching tracepoint {category}/{name}"))?;
        Ok(())
    }

    /// Takes map `name` out of the object, for a module that owns it from now on.
    pub fn take_map(&mut self, name: &str) -> Result<Map> {
        self.ebpf
            .take_map(name)
            .with_context(|| format!("BPF map {name} missing"))
    }

    /// Hands the ring buffer to its poller.
    pub fn take_events(&mut self) -> Result<RingBuf<MapData>> {
        let events = self
            .ebpf
            .take_map("EVENTS")
            .context("BPF map EVENTS missing")?;
        Ok(RingBuf::try_from(events)?)
    }

    /// How many entries the per-thread, per-process and per-task maps hold, and how many
    /// of them belong to threads or processes that no longer exist.
    pub fn occupancy(&self) -> Result<MapOccupancy> {
        let threads: HashMap<_, u32, ThreadState> = HashMap::try_from(self.map_ref("THREADS")?)?;
        let targets: HashMap<_, u32, u8> = HashMap::try_from(self.map_ref("TARGETS")?)?;
        let tasks: HashMap<_, TaskKey, PendingTask> = HashMap::try_from(self.map_ref("TASKS")?)?;
        // Keys can come twice while the BPF programs change a map under the iteration.
        let unique = |keys: Vec<u32>| keys.into_iter().collect::<HashSet<u32>>();
        let threads = unique(threads.keys().filter_map(|k| k.ok()).collect());
        let targets = unique(targets.keys().filter_map(|k| k.ok()).collect());
        let tasks: HashSet<TaskKey> = tasks.keys().filter_map(|k| k.ok()).collect();
        let gone = |id: &u32| !Path::new(&format!("/proc/{id}")).exists();
        Ok(MapOccupancy {
            threads: threads.len() as u64,
            threads_gone: threads.iter().filter(|t| gone(t)).count() as u64,
            targets: targets.len() as u64,
            targets_gone: targets.iter().filter(|p| gone(p)).count() as u64,
            tasks: tasks.len() as u64,
            tasks_gone: tasks.iter().filter(|k| gone(&k.tgid)).count() as u64,
        })
    }

    fn map_ref(&self, name: &str) -> Result<&Map> {
        self.ebpf
            .map(name)
            .with_context(|| format!("BPF map {name} missing"))
    }

    /// Loss counters summed over CPUs, indexed like [`DropKind::ALL`].
    pub fn drops(&self) -> Result<[u64; DropKind::COUNT as usize]> {
        let map = self.ebpf.map("DROPS").context("BPF map DROPS missing")?;
        let drops: PerCpuArray<_, u64> = PerCpuArray::try_from(map)?;
        let mut totals = [0u64; DropKind::COUNT as usize];
        for (i, total) in totals.iter_mut().enumerate() {
            *total = drops.get(&(i as u32), 0)?.iter().sum();
        }
        Ok(totals)
    }
}

/// The name (`comm`) of the helper process that releases a session's probes.
const RELEASE_COMM: &[u8] = b"npu-bpf-release";

/// Helper processes of earlier sessions still releasing their probes.
pub fn releasing_sessions() -> usize {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    procs
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| {
            std::fs::read(e.path().join("comm"))
                .is_ok_and(|comm| comm.strip_suffix(b"\n").unwrap_or(&comm) == RELEASE_COMM)
        })
        .count()
}

/// Forks a grandchild that holds copies of every fd (the BPF links among them) until this
/// process has exited, then closes them, so the kernel's slow releases happen there.
/// The grandchild gives up stdin/stdout/stderr at once: whoever reads our output must see
/// it end when we exit.
fn release_in_background() {
    let mut pipe = [0; 2];
    // SAFETY: valid pointer to two ints.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let [read_end, write_end] = pipe;
    // SAFETY: between fork and _exit the children call only async-signal-safe syscalls.
    unsafe {
        let child = libc::fork();
        if child == 0 {
            if libc::fork() == 0 {
                // So the next session can tell that probes are still being released.
                let mut name = [0u8; 16];
                name[..RELEASE_COMM.len()].copy_from_slice(RELEASE_COMM);
                libc::prctl(libc::PR_SET_NAME, name.as_ptr());
                libc::close(write_end);
                for fd in 0..3 {
                    libc::close(fd);
                }
                // Returns when the last write end closes: when this process has exited.
                let mut byte = 0u8;
                libc::read(read_end, (&raw mut byte).cast(), 1);
                libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
            }
            libc::_exit(0);
        }
        libc::close(read_end);
        if child > 0 {
            libc::waitpid(child, std::ptr::null_mut(), 0);
        }
    }
    // `write_end` stays open until exit on purpose.
}

/// Loads the generic pair a second time, as uprobe_multi programs sharing aya's maps.
fn load_multi(ebpf: &Ebpf) -> Result<MultiPair, uprobe_multi::Error> {
    let maps: Vec<(&str, BorrowedFd<'_>)> = ebpf
        .maps()
        .map(|(name, map)| (name, map_data(map).fd().as_fd()))
        .collect();
    MultiPair::load(BPF_OBJECT, &maps, ENTER_PROGRAM, EXIT_PROGRAM)
}

/// Says that perf-event uprobes replace uprobe_multi on a kernel that should have had it,
/// and why. (A kernel without uprobe_multi links falls back silently: `session.json` shows
/// `perf_event` for each attached file.)
fn note_fallback(why: &uprobe_multi::Error) {
    eprintln!(
        "npu-bpftrace: uprobe_multi unavailable ({why}); attaching one perf-event uprobe per function (Linux >= 6.6 has uprobe_multi)"
    );
}

/// The map behind any kind of aya map.
fn map_data(map: &Map) -> &MapData {
    match map {
        Map::Array(data)
        | Map::ArrayOfMaps(data)
        | Map::BloomFilter(data)
        | Map::CgroupArray(data)
        | Map::CgroupStorage(data)
        | Map::CgrpStorage(data)
        | Map::CpuMap(data)
        | Map::DevMap(data)
        | Map::DevMapHash(data)
        | Map::HashMap(data)
        | Map::HashOfMaps(data)
        | Map::InodeStorage(data)
        | Map::LpmTrie(data)
        | Map::LruHashMap(data)
        | Map::PerCpuArray(data)
        | Map::PerCpuCgroupStorage(data)
        | Map::PerCpuHashMap(data)
        | Map::PerCpuLruHashMap(data)
        | Map::PerfEventArray(data)
        | Map::ProgramArray(data)
        | Map::Queue(data)
        | Map::ReusePortSockArray(data)
        | Map::RingBuf(data)
        | Map::SockHash(data)
        | Map::SockMap(data)
        | Map::SkStorage(data)
        | Map::Stack(data)
        | Map::StackTraceMap(data)
        | Map::Unsupported(data)
        | Map::XskMap(data) => data,
    }
}

fn map<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut aya::maps::Map> {
    ebpf.map_mut(name)
        .with_context(|| format!("BPF map {name} missing"))
}

fn uprobe<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut UProbe> {
    let program = ebpf
        .program_mut(name)
        .with_context(|| format!("BPF program {name} missing"))?;
    Ok(program.try_into()?)
}

fn tracepoint<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut TracePoint> {
    let program = ebpf
        .program_mut(name)
        .with_context(|| format!("BPF program {name} missing"))?;
    Ok(program.try_into()?)
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK.
fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscall with a valid pointer; failure only matters on old kernels.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
}

fn permission_hint(err: anyhow::Error) -> anyhow::Error {
    let denied = err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::PermissionDenied)
    });
    if denied {
        err.context("permission denied: run as root or grant CAP_BPF and CAP_PERFMON")
    } else {
        err
    }
}

/// Tracepoints need tracefs at /sys/kernel/tracing. When it is not mounted, it is mounted
/// with mount(2) (which needs CAP_SYS_ADMIN), never by running mount(8).
fn ensure_tracefs() -> Result<()> {
    if Path::new(TRACEFS).join("events").is_dir() {
        return Ok(());
    }
    match std::fs::metadata(Path::new(TRACEFS).join("events")) {
        // Mounted but not ours to read (mode 0700): the capability is what is missing.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => bail!(
            "cannot read {TRACEFS} (the tracepoints' ids): run as root or add CAP_DAC_READ_SEARCH"
        ),
        _ => {}
    }
    // SAFETY: NUL-terminated strings; mount(2) reads them only.
    let mounted = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    } == 0;
    if !mounted {
        let err = io::Error::last_os_error();
        bail!(
            "tracefs is not mounted at {TRACEFS} and mounting it failed ({err}): mount it \
             (mount -t tracefs nodev {TRACEFS}) or run with CAP_SYS_ADMIN"
        );
    }
    Ok(())
}

fn fork_child_pid_offset() -> Result<u16> {
    tracepoint_field_offset("sched", "sched_process_fork", "child_pid")
}

/// The offset of `field` in the records of tracepoint `category/name`, from its format file.
pub fn tracepoint_field_offset(category: &str, name: &str, field: &str) -> Result<u16> {
    let path = Path::new(TRACEFS).join(format!("events/{category}/{name}/format"));
    let format =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_field_offset(&format, field)
        .with_context(|| format!("no {field} field in {}", path.display()))
}

/// Finds `offset:N;` of `field` in a tracepoint format description.
fn parse_field_offset(format: &str, field: &str) -> Option<u16> {
    format.lines().find_map(|line| {
        let decl = line.trim().strip_prefix("field:")?;
        let (decl, rest) = decl.split_once(';')?;
        let name = decl.split_whitespace().last()?;
        if name != field {
            return None;
        }
        rest.trim()
            .strip_prefix("offset:")?
            .split(';')
            .next()?
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::{UprobeMode, parse_field_offset};

    #[test]
    fn uprobe_mode_from_its_variable() {
        assert_eq!(UprobeMode::parse(""), Some(UprobeMode::Auto));
        assert_eq!(UprobeMode::parse("auto"), Some(UprobeMode::Auto));
        assert_eq!(UprobeMode::parse("1"), Some(UprobeMode::Multi));
        assert_eq!(UprobeMode::parse("0"), Some(UprobeMode::PerfEvent));
        assert_eq!(UprobeMode::parse("yes"), None);
    }

    #[test]
    fn parses_tracepoint_field_offsets() {
        let format = "\tfield:pid_t parent_pid;\toffset:12;\tsize:4;\tsigned:1;\n\
                      \tfield:pid_t child_pid;\toffset:20;\tsize:4;\tsigned:1;\n";
        assert_eq!(parse_field_offset(format, "child_pid"), Some(20));
        assert_eq!(parse_field_offset(format, "parent_pid"), Some(12));
        assert_eq!(parse_field_offset(format, "missing"), None);
    }
}
