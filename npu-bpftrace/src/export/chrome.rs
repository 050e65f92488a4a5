//! The Chrome Trace Event Format: the JSON that chrome://tracing, Perfetto UI and MindStudio
//! Insight open, and that msprof's `trace_view.json` uses. The file is one object,
//! `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`, with one event per
//! line, written as the [`timeline`] walks the tables: it is never built in
//! memory.
//!
//! Times are the format's microseconds, with nanoseconds as fractions: `ts` is the traced
//! host's CLOCK_MONOTONIC as recorded, `dur` the row's `end_ns - start_ns`. The clocks of
//! different hosts are not aligned with each other.
//!
//! Tracks (`pid` and `tid` in the file):
//! - a traced process: `pid` is its pid, `tid` a thread id. API calls are complete events
//!   (`X`; `B` for a call that never returned), mstx ranges too (on the thread that started
//!   them), marks are instants (`i`), and memory in use is a counter (`C`); operators (the
//!   `op` table) are on a thread of their own per thread, `tid` [`OPERATOR_TID`] + its tid;
//! - a device: `pid` is [`DEVICE_PID`] + device id (named `NPU <id>`), `tid` a stream id
//!   (`stream <id>`): kernels, copies, memsets and synchronization tasks (`X`); collectives
//!   on a thread per communicator and rank (`tid` from [`COMMUNICATOR_TID`] up); copy
//!   bandwidth counters per stream;
//! - flow arrows: an `s` at the start of every outermost API call and an `f` at the start of
//!   every device task it submitted, with the same `id` (so one call can point at several
//!   tasks: Perfetto UI draws them all, chrome://tracing only the first);
//! - critical events: global instants (`i` with scope `g`).
//!
//! On a dataset of several hosts, the pids of the tracks of the `n`th host (in name order)
//! are offset by `n` × [`HOST_STRIDE`], and their names say the host. Every event's `cat` is
//! the table it comes from (`api`, `marker`, `op`, `kernel`, `memcpy`, `memset`, `hccl`,
//! `sync`, `memory`, `critical_event`), or `flow` for the arrows.
use std::{
    collections::{HashMap, HashSet},
    io::Write,
};

use anyhow::Result;
use serde::Serialize;
use serde_json::{Map, Value, json};
use tracer_schema::dataset::Dataset;

use super::{
    Summary,
    timeline::{self, Args, Flow, Owner, Sink, Slice, Track, Unit},
};

/// Pid of the track of device 0: Linux pids are below 2^22 (`PID_MAX_LIMIT`), so devices'
/// tracks never take a traced process's pid.
pub const DEVICE_PID: u64 = 1 << 22;

/// Offset between the pids of consecutive hosts' tracks (processes and devices), so that
/// equal pids on different hosts stay apart.
pub const HOST_STRIDE: u64 = 2 * DEVICE_PID;

/// Thread ids of the operator tracks of process threads: `OPERATOR_TID` + the thread's
/// tid (Linux tids are below 2^22 too).
pub const OPERATOR_TID: u64 = 1 << 22;

/// Thread id of the first communicator track of a device; the next ones count up.
pub const COMMUNICATOR_TID: u64 = 1 << 22;

/// Name and category of the flow events: Perfetto pairs `s` and `f` events by id, name and
/// category.
const FLOW_NAME: &str = "launch";

/// Writes `dataset` to `out`; `progress` shows a progress bar on stderr.
pub fn write(dataset: &Dataset, out: impl Write, progress: bool) -> Result<Summary> {
    let mut w = Writer::new(out, dataset);
    w.raw(b"{\"traceEvents\":[\n")?;
    let summary = timeline::walk(dataset, &mut w, progress)?;
    w.finish(dataset, summary)
}

/// One trace event; fields that do not apply are left out of the JSON.
#[derive(Debug, Default, Serialize)]
struct Event<'a> {
    ph: &'static str,
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    cat: &'static str,
    pid: u64,
    tid: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    /// Flow id, in hex: pairs an `s` with its `f`s.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// Binding point of a flow's `f`: `e`, the slice that encloses it (the task's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    /// Scope of an instant: `t` thread, `g` global.
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    args: Map<String, Value>,
}

/// Microseconds, with nanoseconds as fractions: exact below 2^53 ns (104 days of uptime).
fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

impl<'a> Event<'a> {
    fn at(
        cat: &'static str,
        name: &'a str,
        pid: u64,
        tid: u64,
        ts: u64,
        args: Map<String, Value>,
    ) -> Self {
        Self {
            name,
            cat,
            pid,
            tid,
            ts: Some(us(ts)),
            args,
            ..Self::default()
        }
    }

    /// Metadata: `process_name` or `thread_name` of a track.
    fn name_of(kind: &'static str, pid: u64, tid: u64, name: String) -> Self {
        let mut args = Map::new();
        args.insert("name".to_owned(), name.into());
        Self {
            ph: "M",
            name: kind,
            pid,
            tid,
            args,
            ..Self::default()
        }
    }
}

/// The output file, and the tracks already named.
struct Writer<'d, W: Write> {
    out: W,
    hosts: Vec<&'d str>,
    processes: HashSet<u64>,
    threads: HashSet<Track>,
    /// Communicator tracks by (pid in the file, communicator, rank): their `tid`.
    communicators: HashMap<(u64, String, Option<u32>), u64>,
    events: u64,
    processes_named: usize,
    devices_named: usize,
}

impl<'d, W: Write> Writer<'d, W> {
    fn new(out: W, dataset: &'d Dataset) -> Self {
        Self {
            out,
            hosts: dataset.hosts.iter().map(String::as_str).collect(),
            processes: HashSet::new(),
            threads: HashSet::new(),
            communicators: HashMap::new(),
            events: 0,
            processes_named: 0,
            devices_named: 0,
        }
    }

    fn raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes)?;
        Ok(())
    }

    fn emit(&mut self, event: &Event) -> Result<()> {
        if self.events > 0 {
            self.raw(b",\n")?;
        }
        serde_json::to_writer(&mut self.out, event)?;
        self.events += 1;
        Ok(())
    }

    /// ` on <host>` when the dataset has several hosts, for track names.
    fn on(&self, host: usize) -> String {
        match self.hosts.get(host) {
            Some(name) if self.hosts.len() > 1 => format!(" on {name}"),
            _ => String::new(),
        }
    }

    /// The pid in the file of process `pid` of `host`, named on first use.
    fn process(&mut self, host: usize, pid: u32) -> Result<u64> {
        let file_pid = host as u64 * HOST_STRIDE + u64::from(pid);
        if self.processes.insert(file_pid) {
            self.processes_named += 1;
            let name = format!("pid {pid}{}", self.on(host));
            self.emit(&Event::name_of("process_name", file_pid, 0, name))?;
        }
        Ok(file_pid)
    }

    /// The pid in the file of device `device` of `host`, named on first use.
    fn device(&mut self, host: usize, device: u32) -> Result<u64> {
        let file_pid = host as u64 * HOST_STRIDE + DEVICE_PID + u64::from(device);
        if self.processes.insert(file_pid) {
            self.devices_named += 1;
            let name = format!("NPU {device}{}", self.on(host));
            self.emit(&Event::name_of("process_name", file_pid, 0, name))?;
        }
        Ok(file_pid)
    }

    /// `pid` and `tid` of `track` in the file, naming it on first use.
    fn place(&mut self, track: &Track) -> Result<(u64, u64)> {
        let (pid, tid, name) = match track {
            Track::Thread { host, pid, tid } | Track::Mstx { host, pid, tid } => {
                let file_pid = self.process(*host, *pid)?;
                (file_pid, u64::from(*tid), format!("thread {tid}"))
            }
            Track::Operators { host, pid, tid } => {
                let file_pid = self.process(*host, *pid)?;
                let name = format!("operators of thread {tid}");
                (file_pid, OPERATOR_TID + u64::from(*tid), name)
            }
            Track::Stream {
                host,
                device,
                stream,
            } => {
                let file_pid = self.device(*host, *device)?;
                (file_pid, u64::from(*stream), format!("stream {stream}"))
            }
            Track::Communicator {
                host,
                device,
                comm,
                rank,
            } => {
                let file_pid = self.device(*host, *device)?;
                let next = COMMUNICATOR_TID + self.communicators.len() as u64;
                let key = (file_pid, comm.clone(), *rank);
                let tid = *self.communicators.entry(key).or_insert(next);
                (file_pid, tid, communicator_name(comm, *rank))
            }
            Track::Counter { owner, .. } => {
                let file_pid = match *owner {
                    Owner::Process { host, pid } => self.process(host, pid)?,
                    Owner::Device { host, device } => self.device(host, device)?,
                };
                return Ok((file_pid, 0));
            }
            Track::Global => return Ok((0, 0)),
        };
        let key = Track::Thread {
            host: 0,
            pid: pid as u32,
            tid: tid as u32,
        };
        if self.threads.insert(key) {
            self.emit(&Event::name_of("thread_name", pid, tid, name))?;
        }
        Ok((pid, tid))
    }

    /// Closes the event list, adds what the file is, and flushes it.
    fn finish(mut self, dataset: &Dataset, mut summary: Summary) -> Result<Summary> {
        self.raw(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":")?;
        serde_json::to_writer(&mut self.out, &other_data(dataset))?;
        self.raw(b"}\n")?;
        self.out.flush()?;
        summary.events = self.events;
        summary.processes = self.processes_named;
        summary.devices = self.devices_named;
        Ok(summary)
    }
}

/// `comm0/2 rank 1`: a communicator track.
pub(crate) fn communicator_name(comm: &str, rank: Option<u32>) -> String {
    match rank {
        Some(rank) => format!("{comm} rank {rank}"),
        None => comm.to_owned(),
    }
}

/// Args as a JSON object; pointers and handles as `0x...` text (JavaScript viewers read
/// numbers as doubles, which lose their digits).
fn json_args(args: Args) -> Map<String, Value> {
    args.into_iter()
        .map(|(name, value)| {
            let value = match value {
                timeline::Value::Unsigned(v) => v.into(),
                timeline::Value::Signed(v) => v.into(),
                timeline::Value::Hex(v) => format!("{v:#x}").into(),
                timeline::Value::Float(v) => v.into(),
                timeline::Value::Text(v) => v.into(),
                timeline::Value::Flag(v) => v.into(),
            };
            (name.to_owned(), value)
        })
        .collect()
}

impl<W: Write> Sink for Writer<'_, W> {
    fn slice(&mut self, track: &Track, slice: Slice) -> Result<()> {
        let (pid, tid) = self.place(track)?;
        let event = Event {
            ph: if slice.end.is_some() { "X" } else { "B" },
            dur: slice.end.map(|end| us(end.saturating_sub(slice.start))),
            ..Event::at(
                slice.cat,
                slice.name,
                pid,
                tid,
                slice.start,
                json_args(slice.args),
            )
        };
        self.emit(&event)?;
        // After its slice: an `s` or `f` binds to the slice open on its track at its time.
        let Some(flow) = slice.flow else {
            return Ok(());
        };
        let (ph, id, bp) = match flow {
            Flow::Out(id) => ("s", id, None),
            Flow::In(id) => ("f", id, Some("e")),
        };
        self.emit(&Event {
            ph,
            id: Some(format!("{id:x}")),
            bp,
            ..Event::at("flow", FLOW_NAME, pid, tid, slice.start, Map::new())
        })
    }

    fn instant(
        &mut self,
        track: &Track,
        cat: &'static str,
        name: &str,
        ts: u64,
        args: Args,
    ) -> Result<()> {
        let (pid, tid) = self.place(track)?;
        let scope = if *track == Track::Global { "g" } else { "t" };
        self.emit(&Event {
            ph: "i",
            s: Some(scope),
            ..Event::at(cat, name, pid, tid, ts, json_args(args))
        })
    }

    fn counter(&mut self, track: &Track, ts: u64, value: f64) -> Result<()> {
        let (pid, tid) = self.place(track)?;
        let Track::Counter { name, unit, .. } = track else {
            return Ok(());
        };
        let (cat, key) = match unit {
            Unit::Bytes => ("memory", "bytes"),
            Unit::GigabytesPerSecond => ("memcpy", "GB/s"),
        };
        let mut args = Map::new();
        let value = if *unit == Unit::Bytes {
            Value::from(value as u64)
        } else {
            Value::from(value)
        };
        args.insert(key.to_owned(), value);
        self.emit(&Event {
            ph: "C",
            ..Event::at(cat, name, pid, tid, ts, args)
        })
    }
}

/// The file's `otherData`: where it comes from and how to read its times and pids.
fn other_data(dataset: &Dataset) -> Value {
    let wall_clock = dataset.session.as_ref().map(|s| {
        let offset = i64::try_from(s.clock_start.realtime_minus_monotonic_ns).ok();
        json!({ &s.host: offset })
    });
    json!({
        "tool": "npu-bpftrace",
        "version": env!("CARGO_PKG_VERSION"),
        "dataset": dataset.dir.display().to_string(),
        "hosts": dataset.hosts,
        "clock": "ts: CLOCK_MONOTONIC of the traced host, in microseconds; \
                  the clocks of different hosts are not aligned",
        "realtime_minus_monotonic_ns": wall_clock,
        "device_pid": DEVICE_PID,
        "host_pid_stride": HOST_STRIDE,
    })
}
