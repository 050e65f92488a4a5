//! Loading the embedded BPF object, filling its maps, and attaching its programs.
use std::{io, path::Path};

use anyhow::{Context, Result, bail};
use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap, MapData, PerCpuArray, RingBuf},
    programs::{
        TracePoint, UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
};
use tracer_common::{Config, DeviceLayout, DropKind, PendingTask, ProbeSpec, TaskInfo, TaskKey};

/// The BPF object built from `tracer-ebpf` by build.rs.
static BPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));

const ENTER_PROGRAM: &str = "api_enter";
const EXIT_PROGRAM: &str = "api_exit";
const TRACEFS: &str = "/sys/kernel/tracing";

/// Default ring-buffer size; a power of two multiple of the page size.
pub const DEFAULT_RINGBUF_BYTES: u32 = 8 << 20;

/// The loaded BPF programs and maps of one tracing session.
pub struct Probes {
    ebpf: Ebpf,
    attached: usize,
}

impl Probes {
    /// Loads the embedded object and its programs into the kernel (nothing attached yet).
    pub fn load(ringbuf_bytes: u32) -> Result<Self> {
        raise_memlock_limit();
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("EVENTS", ringbuf_bytes)
            .load(BPF_OBJECT)
            .map_err(|e| permission_hint(e.into()))
            .context("loading the BPF programs")?;
        for name in [ENTER_PROGRAM, EXIT_PROGRAM] {
            uprobe(&mut ebpf, name)?
                .load()
                .with_context(|| format!("loading BPF program {name}"))?;
        }
        for name in ["sched_process_exit", "sched_process_fork"] {
            tracepoint(&mut ebpf, name)?
                .load()
                .with_context(|| format!("loading BPF program {name}"))?;
        }
        Ok(Self { ebpf, attached: 0 })
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

    /// Attaches the ENTER/EXIT pair to the function at `file_offset` in `path`.
    pub fn attach(&mut self, path: &Path, file_offset: u64, probe: u16) -> Result<()> {
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

    /// Detaches everything without making the caller wait. Releasing a uprobe link waits
    /// for an RCU-tasks grace period under a kernel-wide mutex (about 0.1 s each here, so
    /// seconds for a full catalog). The probes are first told to trace nobody, then a
    /// detached grandchild process inherits the links and releases them in the background,
    /// so this process's own releases are cheap.
    pub fn close(mut self) {
        if self.silence().is_ok() {
            release_in_background();
        }
    }

    /// Makes every probe return at once: filter on, no targets.
    fn silence(&mut self) -> Result<()> {
        self.set_config(Config {
            filter_targets: 1,
            ..Default::default()
        })?;
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

    /// Hands the ring buffer to its poller.
    pub fn take_events(&mut self) -> Result<RingBuf<MapData>> {
        let events = self
            .ebpf
            .take_map("EVENTS")
            .context("BPF map EVENTS missing")?;
        Ok(RingBuf::try_from(events)?)
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

/// Tracepoints need tracefs; mount it where the kernel expects it when nobody has.
fn ensure_tracefs() -> Result<()> {
    let events = Path::new(TRACEFS).join("events");
    if events.is_dir() {
        return Ok(());
    }
    let status = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev", TRACEFS])
        .status()
        .context("running mount for tracefs")?;
    if !status.success() || !events.is_dir() {
        bail!("tracefs is not mounted at {TRACEFS} and mounting it failed");
    }
    Ok(())
}

fn fork_child_pid_offset() -> Result<u16> {
    let path = Path::new(TRACEFS).join("events/sched/sched_process_fork/format");
    let format =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_field_offset(&format, "child_pid")
        .with_context(|| format!("no child_pid field in {}", path.display()))
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
    use super::parse_field_offset;

    #[test]
    fn parses_tracepoint_field_offsets() {
        let format = "\tfield:pid_t parent_pid;\toffset:12;\tsize:4;\tsigned:1;\n\
                      \tfield:pid_t child_pid;\toffset:20;\tsize:4;\tsigned:1;\n";
        assert_eq!(parse_field_offset(format, "child_pid"), Some(20));
        assert_eq!(parse_field_offset(format, "parent_pid"), Some(12));
        assert_eq!(parse_field_offset(format, "missing"), None);
    }
}
