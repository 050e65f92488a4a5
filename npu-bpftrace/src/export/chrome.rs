//! The Chrome Trace Event Format: the JSON that chrome://tracing, Perfetto UI and MindStudio
//! Insight open, and that msprof's `trace_view.json` uses. The file is one object,
//! `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`, with one event per
//! line, written while the tables are read: it is never built in memory.
//!
//! Times are the format's microseconds, with nanoseconds as fractions: `ts` is the traced
//! host's CLOCK_MONOTONIC as recorded, `dur` the row's `end_ns - start_ns`. The clocks of
//! different hosts are not aligned with each other.
//!
//! Tracks (`pid` and `tid` in the file):
//! - a traced process: `pid` is its pid, `tid` a thread id. API calls are complete events
//!   (`X`; `B` for a call that never returned), mstx ranges too (on the thread that started
//!   them), marks are instants (`i`), and device memory in use is a counter (`C`);
//! - a device: `pid` is [`DEVICE_PID`] + device id (named `NPU <id>`), `tid` a stream id
//!   (`stream <id>`): kernels, copies, memsets, collectives and synchronization tasks (`X`),
//!   each with a flow arrow (`s` on the API call's thread at its start, `f` on the task)
//!   from the API call that produced it;
//! - critical events: global instants (`i` with scope `g`).
//!
//! On a dataset of several hosts, the pids of the tracks of the `n`th host (in name order)
//! are offset by `n` × [`HOST_STRIDE`], and their names say the host. Every event's `cat` is
//! the table it comes from (`api`, `marker`, `kernel`, `memcpy`, `memset`, `hccl`, `sync`,
//! `memory`, `critical_event`), or `flow` for the arrows.
use std::{
    cmp::Reverse,
    collections::{HashMap, HashSet},
    io::Write,
};

use anyhow::Result;
use serde::Serialize;
use serde_json::{Map, Value, json};
use tracer_schema::{
    dataset::{Dataset, Table},
    vocab::{MarkerKind, MemoryKind, MemoryOperation},
};

use super::Summary;
use crate::report::render::human_bytes;

/// Pid of the track of device 0: Linux pids are below 2^22 (`PID_MAX_LIMIT`), so devices'
/// tracks never take a traced process's pid.
pub const DEVICE_PID: u64 = 1 << 22;

/// Offset between the pids of consecutive hosts' tracks (processes and devices), so that
/// equal pids on different hosts stay apart.
pub const HOST_STRIDE: u64 = 2 * DEVICE_PID;

/// The live count on stderr is updated every this many events.
const PROGRESS_EVERY: u64 = 100_000;

/// Writes `dataset` to `out`; `progress` shows a live count of events on stderr.
pub fn write(dataset: &Dataset, out: impl Write, progress: bool) -> Result<Summary> {
    let mut w = Writer::new(out, dataset, progress);
    w.raw(b"{\"traceEvents\":[\n")?;
    // Before the API calls: a range and its mstxRangeStartA call start at the same ns, and
    // viewers nest the one that comes first outermost.
    markers(&mut w, dataset.table("marker"))?;
    let launches = api(&mut w, dataset.table("api"))?;
    for table in &DEVICE_TABLES {
        device_tasks(&mut w, dataset.table(table.name), table, &launches)?;
    }
    memory(&mut w, dataset.table("memory"))?;
    critical_events(&mut w, dataset.table("critical_event"))?;
    w.finish(dataset)
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
    /// Flow id: pairs an `s` with its `f`.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    /// Binding point of a flow's `f`: `e`, the slice that encloses it (the task's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    /// Scope of an instant: `t` thread, `g` global.
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    args: Map<String, Value>,
}

/// Where an event is drawn: a thread of a process, or a stream of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Track {
    pid: u64,
    tid: u64,
}

/// Microseconds, with nanoseconds as fractions: exact below 2^53 ns (104 days of uptime).
fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

impl<'a> Event<'a> {
    /// A complete event from `start` to `end`, or, without an end (a call or range still
    /// open when tracing stopped), a begin event that viewers draw to the end of the trace.
    fn span(
        cat: &'static str,
        name: &'a str,
        track: Track,
        start: u64,
        end: Option<u64>,
        args: Map<String, Value>,
    ) -> Self {
        Self {
            ph: if end.is_some() { "X" } else { "B" },
            dur: end.map(|end| us(end.saturating_sub(start))),
            ..Self::at(cat, name, track, start, args)
        }
    }

    fn instant(
        cat: &'static str,
        name: &'a str,
        track: Track,
        ts: u64,
        scope: &'static str,
        args: Map<String, Value>,
    ) -> Self {
        Self {
            ph: "i",
            s: Some(scope),
            ..Self::at(cat, name, track, ts, args)
        }
    }

    fn at(
        cat: &'static str,
        name: &'a str,
        track: Track,
        ts: u64,
        args: Map<String, Value>,
    ) -> Self {
        Self {
            name,
            cat,
            pid: track.pid,
            tid: track.tid,
            ts: Some(us(ts)),
            args,
            ..Self::default()
        }
    }

    /// Metadata: `process_name` or `thread_name` of a track.
    fn name_of(kind: &'static str, track: Track, name: String) -> Self {
        let mut args = Map::new();
        args.insert("name".to_owned(), name.into());
        Self {
            ph: "M",
            name: kind,
            pid: track.pid,
            tid: track.tid,
            args,
            ..Self::default()
        }
    }
}

/// The output file, and which tracks already have names.
struct Writer<'d, W: Write> {
    out: W,
    /// The dataset's hosts in name order: the position of a host gives its pid offset.
    hosts: Vec<&'d str>,
    processes: HashSet<u64>,
    threads: HashSet<Track>,
    flows: u64,
    progress: bool,
    summary: Summary,
}

impl<'d, W: Write> Writer<'d, W> {
    fn new(out: W, dataset: &'d Dataset, progress: bool) -> Self {
        Self {
            out,
            hosts: dataset.hosts.iter().map(String::as_str).collect(),
            processes: HashSet::new(),
            threads: HashSet::new(),
            flows: 0,
            progress,
            summary: Summary::default(),
        }
    }

    fn raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes)?;
        Ok(())
    }

    fn emit(&mut self, event: &Event) -> Result<()> {
        if self.summary.events > 0 {
            self.raw(b",\n")?;
        }
        serde_json::to_writer(&mut self.out, event)?;
        self.summary.events += 1;
        if self.progress && self.summary.events.is_multiple_of(PROGRESS_EVERY) {
            eprint!("\rnpu-bpftrace: exporting, {} events", self.summary.events);
        }
        Ok(())
    }

    /// Pid offset of `host`'s tracks.
    fn offset(&self, host: &str) -> u64 {
        // Every row's host is one of the dataset's hosts: the reader collects them.
        let index = self.hosts.binary_search(&host).unwrap_or(0);
        index as u64 * HOST_STRIDE
    }

    /// ` on <host>` when the dataset has several hosts, for track names.
    fn on(&self, host: &str) -> String {
        if self.hosts.len() > 1 {
            format!(" on {host}")
        } else {
            String::new()
        }
    }

    /// The pid in the file of process `pid` of `host`, named on first use.
    fn process(&mut self, host: &str, pid: u64) -> Result<u64> {
        let track = Track {
            pid: self.offset(host) + pid,
            tid: 0,
        };
        if self.processes.insert(track.pid) {
            self.summary.processes += 1;
            let name = format!("pid {pid}{}", self.on(host));
            self.emit(&Event::name_of("process_name", track, name))?;
        }
        Ok(track.pid)
    }

    /// Thread `tid` of process `pid` of `host`, named on first use.
    fn thread(&mut self, host: &str, pid: u64, tid: u64) -> Result<Track> {
        let track = Track {
            pid: self.process(host, pid)?,
            tid,
        };
        if self.threads.insert(track) {
            self.emit(&Event::name_of(
                "thread_name",
                track,
                format!("thread {tid}"),
            ))?;
        }
        Ok(track)
    }

    /// Stream `stream` of device `device` of `host`, named on first use.
    fn stream(&mut self, host: &str, device: u64, stream: u64) -> Result<Track> {
        let track = Track {
            pid: self.offset(host) + DEVICE_PID + device,
            tid: stream,
        };
        if self.processes.insert(track.pid) {
            self.summary.devices += 1;
            let name = format!("NPU {device}{}", self.on(host));
            self.emit(&Event::name_of("process_name", track, name))?;
        }
        if self.threads.insert(track) {
            let name = format!("stream {stream}");
            self.emit(&Event::name_of("thread_name", track, name))?;
        }
        Ok(track)
    }

    /// An arrow from the API call on `from` that started at `at` to the task on `to` that
    /// started at `start`. Its ends share a name, a category and an id of their own.
    fn flow(&mut self, name: &str, from: Track, at: u64, to: Track, start: u64) -> Result<()> {
        self.flows += 1;
        let id = Some(self.flows);
        let source = Event {
            ph: "s",
            id,
            ..Event::at("flow", name, from, at, Map::new())
        };
        self.emit(&source)?;
        let target = Event {
            ph: "f",
            id,
            bp: Some("e"),
            ..Event::at("flow", name, to, start, Map::new())
        };
        self.emit(&target)
    }

    /// Closes the event list, adds what the file is, and flushes it.
    fn finish(mut self, dataset: &Dataset) -> Result<Summary> {
        self.raw(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":")?;
        serde_json::to_writer(&mut self.out, &other_data(dataset))?;
        self.raw(b"}\n")?;
        self.out.flush()?;
        // Clears the live count, if there was one, for the closing line.
        if self.progress && self.summary.events >= PROGRESS_EVERY {
            eprint!("\r{:<60}\r", "");
        }
        Ok(self.summary)
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

/// How a column is shown in an event's args.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Unsigned,
    Signed,
    /// Pointers and handles, as `0x...` text: they lose digits as JSON numbers (JavaScript
    /// viewers read numbers as doubles).
    Hex,
    Text,
    Flag,
}

/// A column read for args.
enum Column {
    Unsigned(Vec<Option<u64>>),
    Signed(Vec<Option<i64>>),
    Hex(Vec<Option<u64>>),
    Text(Vec<Option<String>>),
    Flag(Vec<Option<bool>>),
}

impl Column {
    fn read(table: &Table, name: &str, kind: Kind) -> Result<Self> {
        Ok(match kind {
            Kind::Unsigned => Self::Unsigned(table.u64s(name)?),
            Kind::Signed => Self::Signed(table.i64s(name)?),
            Kind::Hex => Self::Hex(table.u64s(name)?),
            Kind::Text => Self::Text(table.strings(name)?),
            Kind::Flag => Self::Flag(table.bools(name)?),
        })
    }

    /// Row `i`'s value; None when it is null.
    fn get(&self, i: usize) -> Option<Value> {
        match self {
            Self::Unsigned(v) => v[i].map(Value::from),
            Self::Signed(v) => v[i].map(Value::from),
            Self::Hex(v) => v[i].map(|x| format!("{x:#x}").into()),
            Self::Text(v) => v[i].clone().map(Value::from),
            Self::Flag(v) => v[i].map(Value::from),
        }
    }
}

/// The columns of a table that go into its events' args.
struct Args(Vec<(&'static str, Column)>);

impl Args {
    fn read(table: &Table, columns: &[(&'static str, Kind)]) -> Result<Self> {
        let columns = columns
            .iter()
            .map(|&(name, kind)| Ok((name, Column::read(table, name, kind)?)))
            .collect::<Result<_>>()?;
        Ok(Self(columns))
    }

    /// Row `i`'s non-null values.
    fn of(&self, i: usize) -> Map<String, Value> {
        self.0
            .iter()
            .filter_map(|(name, column)| Some(((*name).to_owned(), column.get(i)?)))
            .collect()
    }
}

/// The columns that place the rows of a table on process tracks.
struct Placement<'t> {
    hosts: Vec<&'t str>,
    pids: Vec<Option<u64>>,
    tids: Vec<Option<u64>>,
}

impl<'t> Placement<'t> {
    fn read(table: &'t Table) -> Result<Self> {
        Ok(Self {
            hosts: table.hosts(),
            pids: table.u64s("pid")?,
            tids: table.u64s("tid")?,
        })
    }

    fn thread<W: Write>(&self, w: &mut Writer<W>, i: usize) -> Result<Track> {
        let (pid, tid) = (self.pids[i].unwrap_or(0), self.tids[i].unwrap_or(0));
        w.thread(self.hosts[i], pid, tid)
    }
}

const MARKER_ARGS: &[(&str, Kind)] = &[
    ("correlation_id", Kind::Unsigned),
    ("domain", Kind::Text),
    ("range_id", Kind::Unsigned),
    ("end_tid", Kind::Unsigned),
    ("stream", Kind::Hex),
];

/// mstx ranges as spans and marks as instants, on the thread that marked or started them.
fn markers<W: Write>(w: &mut Writer<W>, t: &Table) -> Result<()> {
    let at = Placement::read(t)?;
    let (kinds, messages) = (t.strings("kind")?, t.strings("message")?);
    let (starts, ends) = (t.u64s("start_ns")?, t.u64s("end_ns")?);
    let args = Args::read(t, MARKER_ARGS)?;
    for i in 0..t.rows() {
        let track = at.thread(w, i)?;
        let (name, start) = (messages[i].as_deref().unwrap_or(""), starts[i].unwrap_or(0));
        let event = if kinds[i].as_deref() == Some(MarkerKind::Mark.as_str()) {
            Event::instant("marker", name, track, start, "t", args.of(i))
        } else {
            Event::span("marker", name, track, start, ends[i], args.of(i))
        };
        w.emit(&event)?;
    }
    Ok(())
}

/// The API calls that produced device tasks, by (pid in the file, correlation id): the
/// call's thread and start, where its flow arrows leave.
type Launches = HashMap<(u64, u64), (Track, u64)>;

const API_ARGS: &[(&str, Kind)] = &[
    ("correlation_id", Kind::Unsigned),
    ("parent_correlation_id", Kind::Unsigned),
    ("domain", Kind::Text),
    ("return_value", Kind::Signed),
    ("device_id", Kind::Signed),
    ("stream", Kind::Hex),
    ("bytes", Kind::Unsigned),
    ("count", Kind::Unsigned),
    ("memcpy_kind", Kind::Text),
    ("address", Kind::Hex),
    ("src_address", Kind::Hex),
    ("value", Kind::Signed),
    ("block_dim", Kind::Unsigned),
    ("handle", Kind::Hex),
    ("kernel_name", Kind::Text),
    ("data_type", Kind::Text),
    ("reduce_op", Kind::Text),
    ("rank", Kind::Unsigned),
    ("message", Kind::Text),
    ("range_id", Kind::Unsigned),
];

/// API calls as spans on their thread; returns where each call's flow arrows leave.
fn api<W: Write>(w: &mut Writer<W>, t: &Table) -> Result<Launches> {
    let at = Placement::read(t)?;
    let (names, ids) = (t.strings("name")?, t.u64s("correlation_id")?);
    let (starts, ends) = (t.u64s("start_ns")?, t.u64s("end_ns")?);
    let args = Args::read(t, API_ARGS)?;
    // Viewers nest the spans of a thread by time; a call and a call nested in it that start
    // at the same ns nest right only when the outer (longer) one comes first.
    let mut order: Vec<usize> = (0..t.rows()).collect();
    order.sort_by_key(|&i| {
        let end = ends[i].unwrap_or(u64::MAX);
        (at.hosts[i], at.pids[i], at.tids[i], starts[i], Reverse(end))
    });
    let mut launches = Launches::with_capacity(t.rows());
    for i in order {
        let track = at.thread(w, i)?;
        let start = starts[i].unwrap_or(0);
        let name = names[i].as_deref().unwrap_or("");
        w.emit(&Event::span("api", name, track, start, ends[i], args.of(i)))?;
        launches.insert((track.pid, ids[i].unwrap_or(0)), (track, start));
    }
    Ok(launches)
}

/// A table of device tasks: how its tasks are named and which of its columns go into args.
struct DeviceTable {
    name: &'static str,
    task_names: fn(&Table) -> Result<Vec<String>>,
    args: &'static [(&'static str, Kind)],
}

const DEVICE_TABLES: [DeviceTable; 5] = [
    DeviceTable {
        name: "kernel",
        task_names: kernel_names,
        args: &[
            ("kernel_type", Kind::Text),
            ("block_dim", Kind::Unsigned),
            ("api_name", Kind::Text),
        ],
    },
    DeviceTable {
        name: "memcpy",
        task_names: memcpy_names,
        args: &[
            ("copy_kind", Kind::Text),
            ("bytes", Kind::Unsigned),
            ("is_async", Kind::Flag),
            ("api_name", Kind::Text),
        ],
    },
    DeviceTable {
        name: "memset",
        task_names: memset_names,
        args: &[
            ("value", Kind::Unsigned),
            ("bytes", Kind::Unsigned),
            ("is_async", Kind::Flag),
            ("api_name", Kind::Text),
        ],
    },
    DeviceTable {
        name: "hccl",
        task_names: hccl_names,
        args: &[
            ("comm_name", Kind::Text),
            ("comm", Kind::Hex),
            ("rank", Kind::Unsigned),
            ("world_size", Kind::Unsigned),
            ("data_type", Kind::Text),
            ("count", Kind::Unsigned),
            ("bytes", Kind::Unsigned),
            ("reduce_op", Kind::Text),
            ("peer", Kind::Unsigned),
            ("seq", Kind::Unsigned),
        ],
    },
    DeviceTable {
        name: "sync",
        task_names: sync_names,
        args: &[("event", Kind::Hex), ("api_name", Kind::Text)],
    },
];

/// The device task columns (docs/schema.md) that every device table puts in its args;
/// `pid` and `tid` say which process and thread submitted the task.
const TASK_ARGS: &[(&str, Kind)] = &[
    ("correlation_id", Kind::Unsigned),
    ("task_id", Kind::Unsigned),
    ("status", Kind::Unsigned),
    ("pid", Kind::Unsigned),
    ("tid", Kind::Unsigned),
];

fn kernel_names(t: &Table) -> Result<Vec<String>> {
    let names = t.strings("name")?;
    Ok(names
        .into_iter()
        .map(|name| name.unwrap_or_else(|| "unnamed kernel".to_owned()))
        .collect())
}

fn memcpy_names(t: &Table) -> Result<Vec<String>> {
    let (kinds, bytes) = (t.strings("copy_kind")?, t.u64s("bytes")?);
    Ok(kinds
        .into_iter()
        .zip(bytes)
        .map(|(kind, bytes)| {
            let kind = kind.unwrap_or_default();
            format!("memcpy {kind} {}", human_bytes(bytes.unwrap_or(0)))
        })
        .collect())
}

fn memset_names(t: &Table) -> Result<Vec<String>> {
    let bytes = t.u64s("bytes")?;
    Ok(bytes
        .into_iter()
        .map(|bytes| format!("memset {}", human_bytes(bytes.unwrap_or(0))))
        .collect())
}

fn hccl_names(t: &Table) -> Result<Vec<String>> {
    let names = t.strings("name")?;
    Ok(names.into_iter().map(Option::unwrap_or_default).collect())
}

/// `EVENT_RECORD`, `EVENT_WAIT`, ...: a wait's span is how long it held its stream.
fn sync_names(t: &Table) -> Result<Vec<String>> {
    let kinds = t.strings("kind")?;
    Ok(kinds.into_iter().map(Option::unwrap_or_default).collect())
}

/// Device tasks as spans on their device's stream, each with a flow arrow from the API call
/// that produced it. Tasks without device times are counted, not drawn.
fn device_tasks<W: Write>(
    w: &mut Writer<W>,
    t: &Table,
    table: &DeviceTable,
    launches: &Launches,
) -> Result<()> {
    let hosts = t.hosts();
    let (pids, ids) = (t.u64s("pid")?, t.u64s("correlation_id")?);
    let (devices, streams) = (t.u64s("device_id")?, t.u64s("stream_id")?);
    let (starts, ends) = (t.u64s("start_ns")?, t.u64s("end_ns")?);
    let names = (table.task_names)(t)?;
    let args = Args::read(t, &[TASK_ARGS, table.args].concat())?;
    for i in 0..t.rows() {
        let (Some(start), Some(end)) = (starts[i], ends[i]) else {
            *w.summary.skipped_tasks.entry(table.name).or_default() += 1;
            continue;
        };
        let (device, stream) = (devices[i].unwrap_or(0), streams[i].unwrap_or(0));
        let track = w.stream(hosts[i], device, stream)?;
        let task = Event::span(table.name, &names[i], track, start, Some(end), args.of(i));
        w.emit(&task)?;
        let process = w.offset(hosts[i]) + pids[i].unwrap_or(0);
        if let Some(&(from, at)) = launches.get(&(process, ids[i].unwrap_or(0))) {
            w.flow(table.name, from, at, track, start)?;
        }
    }
    Ok(())
}

/// Memory in use per process as counters, one per device (and one for pinned host memory):
/// each allocation adds its bytes when its call returns, each release subtracts them.
/// Failed calls and releases of allocations made before tracing (their size is unknown)
/// change nothing.
fn memory<W: Write>(w: &mut Writer<W>, t: &Table) -> Result<()> {
    let (hosts, pids) = (t.hosts(), t.u64s("pid")?);
    let (operations, kinds) = (t.strings("operation")?, t.strings("memory_kind")?);
    let (bytes, devices) = (t.u64s("bytes")?, t.i64s("device_id")?);
    let (ends, returns) = (t.u64s("end_ns")?, t.i64s("return_value")?);
    let mut order: Vec<usize> = (0..t.rows()).collect();
    order.sort_by_key(|&i| ends[i]);
    let mut in_use: HashMap<(u64, String), u64> = HashMap::new();
    for i in order {
        let Some(size) = bytes[i].filter(|_| returns[i] == Some(0)) else {
            continue;
        };
        let pid = w.process(hosts[i], pids[i].unwrap_or(0))?;
        let name = counter_name(kinds[i].as_deref(), devices[i]);
        let total = in_use.entry((pid, name.clone())).or_default();
        *total = if operations[i].as_deref() == Some(MemoryOperation::Allocation.as_str()) {
            total.saturating_add(size)
        } else {
            total.saturating_sub(size)
        };
        let mut args = Map::new();
        args.insert("bytes".to_owned(), (*total).into());
        let track = Track { pid, tid: 0 };
        let event = Event {
            ph: "C",
            ..Event::at("memory", &name, track, ends[i].unwrap_or(0), args)
        };
        w.emit(&event)?;
    }
    Ok(())
}

/// `NPU <id> memory in use`, or `pinned host memory in use`.
fn counter_name(kind: Option<&str>, device: Option<i64>) -> String {
    match (kind, device) {
        (Some(kind), _) if kind == MemoryKind::Host.as_str() => "pinned host memory in use".into(),
        (_, Some(device)) => format!("NPU {device} memory in use"),
        (_, None) => "NPU memory in use".into(),
    }
}

const EVENT_ARGS: &[(&str, Kind)] = &[
    ("kind", Kind::Text),
    ("severity", Kind::Text),
    ("count", Kind::Unsigned),
    ("message", Kind::Text),
    ("pid", Kind::Unsigned),
    ("tid", Kind::Unsigned),
    ("device_id", Kind::Unsigned),
    ("correlation_id", Kind::Unsigned),
];

/// Critical events as global instants named `<kind>: <message>`.
fn critical_events<W: Write>(w: &mut Writer<W>, t: &Table) -> Result<()> {
    let (hosts, times) = (t.hosts(), t.u64s("ts_ns")?);
    let (kinds, messages) = (t.strings("kind")?, t.strings("message")?);
    let args = Args::read(t, EVENT_ARGS)?;
    let global = Track { pid: 0, tid: 0 };
    for i in 0..t.rows() {
        let kind = kinds[i].as_deref().unwrap_or("");
        let name = format!("{kind}: {}", messages[i].as_deref().unwrap_or(""));
        let mut args = args.of(i);
        args.insert("host".to_owned(), hosts[i].into());
        let ts = times[i].unwrap_or(0);
        w.emit(&Event::instant(
            "critical_event",
            &name,
            global,
            ts,
            "g",
            args,
        ))?;
    }
    Ok(())
}
