//! Agent throughput without the kernel: a synthetic ring-buffer stream replayed through
//! decode -> correlate -> Parquet on the calling thread, as `agent::consume` drives them.
//!
//! The stream looks like a training job's: a few processes with a few threads each, every
//! thread running steps of an mstx range, an async H2D copy (`aclrtMemcpyAsync` ->
//! `rtMemcpyAsync`), two handle launches (`aclrtLaunchKernel` ->
//! `rtLaunchKernelByFuncHandleV3`), a stub launch (`rtKernelLaunch`), an mstx mark, an
//! allreduce every fourth step and a stream synchronize (`aclrtSynchronizeStream` ->
//! `rtStreamSynchronize`). Threads interleave record by record, timestamps increase, and every
//! submitted task completes (a `TaskComplete` from the report thread) ~50 µs later, with
//! device clock readings every 100 ms as the agent's sampler takes them. Records are built as
//! the BPF programs lay them out and decoded from bytes, so the decoder's work is included.
//!
//! Only the pipeline is timed: generating the stream is excluded (CPU time is measured per
//! batch with `CLOCK_THREAD_CPUTIME_ID` around decode + correlate + write, and the final
//! flush). `cargo xtask bench` runs it through `examples/replay/main.rs`.
use std::{
    collections::{BTreeMap, VecDeque},
    path::PathBuf,
    time::Instant,
};

use anyhow::{Context, Result};
use serde::Serialize;
use tracer_common::{
    ApiEnter, ApiExit, DropKind, EXIT_OUT_VALID, MAX_ARGS, RecordHeader, RecordKind, TEXT_LEN,
    TaskComplete, TaskInfo,
};

use npu_bpftrace::{
    session::clock_ns,
    sink::parquet::{ParquetSink, SinkOptions},
};
use tracer_catalog as catalog;
use tracer_core::{
    clock::ClockReading,
    correlate::{Correlator, FinalState},
    decode::{Decoded, Record, WireRecord, decode, record_bytes},
};

/// What to replay.
#[derive(Debug, Clone)]
pub(crate) struct ReplayOptions {
    /// API calls (ENTER + EXIT pairs) to generate, at least.
    pub calls: u64,
    pub processes: u32,
    pub threads_per_process: u32,
    /// Trace-time rate of API calls: sets the timestamps, hence how often the sink makes a
    /// part durable (once per second of trace time, as the agent does once per second).
    pub calls_per_trace_second: u64,
    /// Records per batch handed to the correlator (the agent's poller sends up to 8192).
    pub batch_records: usize,
    /// Parquet output directory (created; must not hold an earlier replay).
    pub out_dir: PathBuf,
    /// The sink's settings; the agent's defaults unless changed.
    pub sink: SinkOptions,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            calls: 2_000_000,
            processes: 2,
            threads_per_process: 3,
            calls_per_trace_second: 100_000,
            batch_records: 8192,
            out_dir: PathBuf::from("agent-replay"),
            sink: SinkOptions::new("replay"),
        }
    }
}

/// What the replay measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReplayReport {
    /// API rows written (each one ENTER + EXIT pair).
    pub api_calls: u64,
    /// Ring-buffer records replayed: ENTER, EXIT and task completions.
    pub records: u64,
    pub task_completions: u64,
    /// CPU time of the replaying thread spent in decode, correlate and write.
    pub cpu_seconds: f64,
    /// Wall time of the same work.
    pub wall_seconds: f64,
    pub api_calls_per_cpu_second: f64,
    pub api_calls_per_wall_second: f64,
    pub records_per_cpu_second: f64,
    pub rows: BTreeMap<&'static str, u64>,
    pub files: u64,
    pub bytes: u64,
    /// Peak resident set of this process (getrusage), bytes.
    pub peak_rss_bytes: u64,
    /// Where the CPU time went: decoding records, correlating them into rows (including
    /// device activity), encoding rows into Parquet, and the final flush.
    pub cpu_seconds_by_stage: BTreeMap<&'static str, f64>,
    pub exits_without_enter: u64,
}

#[derive(Default)]
struct StageNs {
    decode: u64,
    correlate: u64,
    write: u64,
    finish: u64,
}

fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Replays a synthetic stream of `opts.calls` API calls; see the module documentation.
pub(crate) fn replay(opts: &ReplayOptions) -> Result<ReplayReport> {
    std::fs::create_dir_all(&opts.out_dir)
        .with_context(|| format!("creating {}", opts.out_dir.display()))?;
    let mut sink = ParquetSink::create(&opts.out_dir, opts.sink.clone())?;
    let mut correlator = Correlator::default();
    let mut generator = Generator::new(opts);
    let mut bytes = Vec::new();
    let mut spans = Vec::new();
    let mut batch: Vec<Record> = Vec::with_capacity(opts.batch_records);
    let mut clocks = Vec::new();
    let mut stages = StageNs::default();
    let mut wall_ns = 0u64;
    let (mut records, mut completions) = (0u64, 0u64);
    let mut next_flush_ns = generator.now + 1_000_000_000;

    while generator.calls_started < opts.calls || !generator.is_idle() {
        bytes.clear();
        spans.clear();
        clocks.clear();
        generator.fill(
            opts.batch_records,
            opts.calls,
            &mut bytes,
            &mut spans,
            &mut clocks,
        );
        let flush = generator.now >= next_flush_ns;
        if flush {
            next_flush_ns = generator.now + 1_000_000_000;
        }

        let wall0 = Instant::now();
        let t0 = thread_cpu_ns();
        // As agent::poll_ring + agent::consume: decode a batch, correlate it, write its rows.
        batch.clear();
        for &(start, len) in &spans {
            if let Ok(Decoded::Record(record)) = decode(&bytes[start..start + len]) {
                batch.push(record);
            }
        }
        let t1 = thread_cpu_ns();
        for reading in clocks.drain(..) {
            correlator.clock_reading(reading);
        }
        for record in &batch {
            correlator.push(record, &mut ());
        }
        let output = correlator.take_output();
        let t2 = thread_cpu_ns();
        sink.write_output(output)?;
        if flush {
            sink.flush()?;
        }
        let t3 = thread_cpu_ns();
        wall_ns += wall0.elapsed().as_nanos() as u64;
        stages.decode += t1 - t0;
        stages.correlate += t2 - t1;
        stages.write += t3 - t2;

        records += batch.len() as u64;
        completions += batch
            .iter()
            .filter(|r| matches!(r, Record::TaskComplete(_)))
            .count() as u64;
    }

    let (cpu0, wall0) = (thread_cpu_ns(), Instant::now());
    let end = FinalState {
        missing_tasks: Vec::new(),
        drops: vec![0; DropKind::COUNT as usize],
        now_ns: generator.now,
    };
    correlator.finish(&mut (), &end);
    sink.write_output(correlator.take_output())?;
    let stats = sink.finish()?;
    stages.finish += thread_cpu_ns() - cpu0;
    wall_ns += wall0.elapsed().as_nanos() as u64;
    let cpu_ns = stages.decode + stages.correlate + stages.write + stages.finish;

    let api_calls = stats.rows.get("api").copied().unwrap_or(0);
    let cpu_seconds = cpu_ns as f64 / 1e9;
    let wall_seconds = wall_ns as f64 / 1e9;
    Ok(ReplayReport {
        api_calls,
        records,
        task_completions: completions,
        cpu_seconds,
        wall_seconds,
        api_calls_per_cpu_second: api_calls as f64 / cpu_seconds.max(1e-9),
        api_calls_per_wall_second: api_calls as f64 / wall_seconds.max(1e-9),
        records_per_cpu_second: records as f64 / cpu_seconds.max(1e-9),
        rows: stats.rows,
        files: stats.files,
        bytes: stats.bytes,
        peak_rss_bytes: peak_rss_bytes(),
        cpu_seconds_by_stage: BTreeMap::from([
            ("decode", stages.decode as f64 / 1e9),
            ("correlate", stages.correlate as f64 / 1e9),
            ("write", stages.write as f64 / 1e9),
            ("finish", stages.finish as f64 / 1e9),
        ]),
        exits_without_enter: correlator.stats().exits_without_enter,
    })
}

fn peak_rss_bytes() -> u64 {
    // SAFETY: an all-zero rusage is valid for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss as u64 * 1024
}

/// Device clock: 50 MHz, 3.5 h ahead of CLOCK_MONOTONIC (the simulator's defaults).
const DEV_HZ: u64 = 50_000_000;
const DEV_OFFSET_NS: u64 = 12_600_000_000_000;
/// A task completes this long after the call that submitted it entered.
const TASK_LATENCY_NS: u64 = 50_000;
const CLOCK_SAMPLE_NS: u64 = 100_000_000;

fn device_cnt(ns: u64) -> u64 {
    (ns + DEV_OFFSET_NS) / (1_000_000_000 / DEV_HZ)
}

/// One call to emit: ENTER, nested calls, EXIT, maybe a device task.
#[derive(Clone, Copy)]
enum Step {
    Enter {
        probe: u16,
        args: [u64; MAX_ARGS],
        text: &'static str,
    },
    Exit {
        ret: u64,
        out: Option<u64>,
        /// Device task submitted by the outermost call: (stream, SQE type, block dim).
        task: Option<(u16, u8, u16)>,
    },
}

struct Frame {
    probe: u16,
    correlation_id: u64,
    enter_ns: u64,
}

struct Thread {
    pid: u32,
    tid: u32,
    /// The simulated CPU it runs on: correlation ids are `(cpu + 1) << 48 | sequence`.
    cpu: u64,
    script: VecDeque<Step>,
    stack: Vec<Frame>,
    step: u64,
    range_id: u64,
    stream: u64,
}

struct PendingTask {
    at_ns: u64,
    done: TaskComplete,
}

struct Generator {
    now: u64,
    record_ns: u64,
    threads: Vec<Thread>,
    next: usize,
    sequence: u64,
    calls_started: u64,
    tasks: VecDeque<PendingTask>,
    task_ids: BTreeMap<(u32, u16), u16>,
    next_clock_ns: u64,
    devices: Vec<u32>,
    frequency_sent: bool,
}

const MATMUL: u64 = 0x7f00_0000_1000;
const GELU: u64 = 0x7f00_0000_2000;
const SOFTMAX_STUB: u64 = 0x5555_0000_4000;
const COMM: u64 = 0x7f00_0000_9000;
const DEV_BUF: u64 = 0x1_0000_0000;
const HOST_BUF: u64 = 0x7f10_0000_0000;

fn probe(name: &str) -> u16 {
    // Built once: building the table per record would be measured as the agent's cost.
    static TABLE: std::sync::LazyLock<std::sync::Arc<catalog::ProbeTable>> =
        std::sync::LazyLock::new(catalog::ProbeTable::builtin);
    TABLE
        .find(name)
        .unwrap_or_else(|| panic!("{name} is not in the catalog"))
}

fn args(values: &[u64]) -> [u64; MAX_ARGS] {
    let mut a = [0; MAX_ARGS];
    a[..values.len()].copy_from_slice(values);
    a
}

impl Generator {
    fn new(opts: &ReplayOptions) -> Self {
        let mut threads = Vec::new();
        let mut devices = Vec::new();
        for p in 0..opts.processes.max(1) {
            let pid = 10_000 + p * 1000;
            devices.push(p);
            for t in 0..opts.threads_per_process.max(1) {
                let mut thread = Thread {
                    pid,
                    tid: pid + t,
                    cpu: u64::from(threads.len() as u32 % 2),
                    script: VecDeque::new(),
                    stack: Vec::new(),
                    step: 0,
                    range_id: 0,
                    stream: 0x7f20_0000_0000 + u64::from(pid) * 0x100 + u64::from(t) * 0x10,
                };
                if t == 0 {
                    thread.setup(p);
                }
                threads.push(thread);
            }
        }
        // Each ENTER and EXIT advances the clock by half a call's share of a trace second.
        let record_ns = (1_000_000_000 / opts.calls_per_trace_second.max(1) / 2).max(1);
        let now = 1_000_000_000_000;
        Self {
            now,
            record_ns,
            threads,
            next: 0,
            sequence: 0,
            calls_started: 0,
            tasks: VecDeque::new(),
            task_ids: BTreeMap::new(),
            next_clock_ns: now,
            devices,
            frequency_sent: false,
        }
    }

    fn is_idle(&self) -> bool {
        self.tasks.is_empty()
            && self
                .threads
                .iter()
                .all(|t| t.script.is_empty() && t.stack.is_empty())
    }

    /// Appends up to `max` records; stops starting new steps once `calls` calls started.
    fn fill(
        &mut self,
        max: usize,
        calls: u64,
        bytes: &mut Vec<u8>,
        spans: &mut Vec<(usize, usize)>,
        clocks: &mut Vec<ClockReading>,
    ) {
        if !self.frequency_sent {
            self.frequency_sent = true;
            for &device in &self.devices {
                clocks.push(ClockReading::Frequency {
                    device,
                    hz: DEV_HZ as f64,
                });
            }
        }
        while spans.len() < max {
            if self.now >= self.next_clock_ns {
                self.next_clock_ns += CLOCK_SAMPLE_NS;
                for &device in &self.devices {
                    clocks.push(ClockReading::Sample {
                        device,
                        cnt: device_cnt(self.now + 1_000),
                        enter_ns: self.now,
                        exit_ns: self.now + 2_000,
                    });
                }
            }
            if let Some(task) = self.tasks.front()
                && task.at_ns <= self.now
            {
                let mut task = self.tasks.pop_front().expect("front exists").done;
                task.header.ts_ns = self.now;
                push_record(bytes, spans, &task);
                continue;
            }
            let n = self.threads.len();
            let Some(i) = (0..n)
                .map(|k| (self.next + k) % n)
                .find(|&i| !self.threads[i].script.is_empty() || self.calls_started < calls)
            else {
                match self.tasks.front() {
                    Some(task) => {
                        self.now = self.now.max(task.at_ns);
                        continue;
                    }
                    None => break,
                }
            };
            self.next = (i + 1) % n;
            if self.threads[i].script.is_empty() {
                self.threads[i].plan_step();
            }
            self.now += self.record_ns;
            self.emit(i, bytes, spans);
        }
    }

    fn emit(&mut self, i: usize, bytes: &mut Vec<u8>, spans: &mut Vec<(usize, usize)>) {
        let now = self.now;
        let Some(step) = self.threads[i].script.pop_front() else {
            return;
        };
        match step {
            Step::Enter { probe, args, text } => {
                self.sequence += 1;
                self.calls_started += 1;
                let thread = &mut self.threads[i];
                let correlation_id = ((thread.cpu + 1) << 48) | self.sequence;
                let parent = thread.stack.last().map_or(0, |f| f.correlation_id);
                let mut record = ApiEnter {
                    header: header(RecordKind::ApiEnter, thread, probe, now),
                    correlation_id,
                    parent_correlation_id: parent,
                    args,
                    text_len: text.len().min(TEXT_LEN) as u32,
                    _pad: 0,
                    text: [0; TEXT_LEN],
                };
                record.header.depth = thread.stack.len() as u8;
                record.text[..record.text_len as usize]
                    .copy_from_slice(&text.as_bytes()[..record.text_len as usize]);
                thread.stack.push(Frame {
                    probe,
                    correlation_id,
                    enter_ns: now,
                });
                push_record(bytes, spans, &record);
            }
            Step::Exit { ret, out, task } => {
                let thread = &mut self.threads[i];
                let Some(frame) = thread.stack.pop() else {
                    return;
                };
                let mut record = ApiExit {
                    header: header(RecordKind::ApiExit, thread, frame.probe, now),
                    correlation_id: frame.correlation_id,
                    ret,
                    out_value: out.unwrap_or(0),
                    flags: if out.is_some() { EXIT_OUT_VALID } else { 0 },
                    _pad: 0,
                };
                record.header.depth = thread.stack.len() as u8;
                let (pid, tid) = (thread.pid, thread.tid);
                push_record(bytes, spans, &record);
                if let Some((stream, sqe_type, block_dim)) = task {
                    self.submit(pid, tid, &frame, stream, sqe_type, block_dim);
                }
            }
        }
    }

    /// The task the outermost call `frame` submitted completes `TASK_LATENCY_NS` later,
    /// reported by the process's report thread.
    fn submit(&mut self, pid: u32, tid: u32, frame: &Frame, stream: u16, sqe_type: u8, dim: u16) {
        let device = (pid - 10_000) / 1000;
        let task_id = self.task_ids.entry((pid, stream)).or_default();
        *task_id = task_id.wrapping_add(1);
        let start = frame.enter_ns + TASK_LATENCY_NS / 2;
        let end = frame.enter_ns + TASK_LATENCY_NS;
        let done = TaskComplete {
            header: RecordHeader::new(RecordKind::TaskComplete, 0, 0, pid, pid + 999, 0),
            info: TaskInfo {
                correlation_id: frame.correlation_id,
                submit_ns: frame.enter_ns + 1_000,
                tid,
                block_dim: dim,
                sqe_type,
                flags: 0,
            },
            start_cnt: device_cnt(start),
            end_cnt: device_cnt(end),
            device_id: device,
            status: 0,
            stream_id: stream,
            task_id: u32::from(*task_id),
            sqe_type,
            _pad: 0,
        };
        self.tasks.push_back(PendingTask {
            at_ns: end + 2_000,
            done,
        });
    }
}

fn header(kind: RecordKind, thread: &Thread, probe: u16, ts_ns: u64) -> RecordHeader {
    RecordHeader::new(kind, probe, 0, thread.pid, thread.tid, ts_ns)
}

/// Appends a record's bytes, as the ring buffer hands them to the poller.
fn push_record<T: WireRecord>(bytes: &mut Vec<u8>, spans: &mut Vec<(usize, usize)>, record: &T) {
    let raw = record_bytes(record);
    spans.push((bytes.len(), raw.len()));
    bytes.extend_from_slice(raw);
}

impl Thread {
    fn call(&mut self, name: &str, args: [u64; MAX_ARGS], text: &'static str) {
        self.script.push_back(Step::Enter {
            probe: probe(name),
            args,
            text,
        });
    }

    fn ret(&mut self, ret: u64, out: Option<u64>, task: Option<(u16, u8, u16)>) {
        self.script.push_back(Step::Exit { ret, out, task });
    }

    /// Once per process: kernels by handle and stub, a communicator.
    fn setup(&mut self, rank: u32) {
        self.call(
            "aclrtBinaryGetFunction",
            args(&[0x7f00_0000_0100]),
            "matmul_fwd",
        );
        self.call(
            "rtBinaryGetFunctionByName",
            args(&[0x7f00_0000_0100]),
            "matmul_fwd",
        );
        self.ret(0, Some(MATMUL), None);
        self.ret(0, Some(MATMUL), None);
        self.call(
            "aclrtBinaryGetFunction",
            args(&[0x7f00_0000_0100]),
            "gelu_fwd",
        );
        self.call(
            "rtBinaryGetFunctionByName",
            args(&[0x7f00_0000_0100]),
            "gelu_fwd",
        );
        self.ret(0, Some(GELU), None);
        self.ret(0, Some(GELU), None);
        self.call(
            "rtFunctionRegister",
            args(&[0x7f00_0000_0200, SOFTMAX_STUB]),
            "softmax_fwd",
        );
        self.ret(0, None, None);
        self.call(
            "HcclCommInitRootInfo",
            args(&[2, 0x7ffd_0000_0000, u64::from(rank)]),
            "",
        );
        self.ret(0, Some(COMM), None);
    }

    /// One training step's calls.
    fn plan_step(&mut self) {
        let stream = self.stream;
        let sid = (stream & 0xfff) as u16;
        self.step += 1;
        self.range_id += 1;
        let range = (u64::from(self.tid) << 32) | self.range_id;
        self.call("mstxRangeStartA", args(&[0, stream]), "step");
        self.ret(range, None, None);

        self.call(
            "aclrtMemcpyAsync",
            args(&[DEV_BUF, 262_144, HOST_BUF, 262_144, 1, stream]),
            "",
        );
        self.call(
            "rtMemcpyAsync",
            args(&[DEV_BUF, 262_144, HOST_BUF, 262_144, 1, stream]),
            "",
        );
        self.ret(0, None, None);
        self.ret(0, None, Some((sid, 11, 0)));

        for (handle, name, dim) in [(MATMUL, "matmul_fwd", 24), (GELU, "gelu_fwd", 8)] {
            self.call(
                "aclrtLaunchKernel",
                args(&[handle, dim, 0x7f30_0000_0000, 32, stream]),
                name,
            );
            self.call(
                "rtLaunchKernelByFuncHandleV3",
                args(&[handle, dim, 0x7f30_0000_1000, stream]),
                name,
            );
            self.ret(0, None, None);
            self.ret(0, None, Some((sid, 0, dim as u16)));
        }

        self.call(
            "rtKernelLaunch",
            args(&[SOFTMAX_STUB, 16, 0x7f30_0000_2000, 32, 0, stream]),
            "",
        );
        self.ret(0, None, Some((sid, 0, 16)));

        self.call("mstxMarkA", args(&[0, stream]), "iteration");
        self.ret(0, None, None);

        if self.step.is_multiple_of(4) {
            self.call(
                "HcclAllReduce",
                args(&[DEV_BUF, DEV_BUF, 4096, 4, 0, COMM, stream]),
                "",
            );
            self.ret(0, None, Some((sid, 13, 1)));
        }

        self.call("aclrtSynchronizeStream", args(&[stream]), "");
        self.call("rtStreamSynchronize", args(&[stream]), "");
        self.ret(0, None, None);
        self.ret(0, None, None);

        self.call("mstxRangeEnd", args(&[range]), "");
        self.ret(0, None, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_writes_every_call() {
        let dir = std::env::temp_dir().join(format!("npu-replay-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let report = replay(&ReplayOptions {
            calls: 20_000,
            out_dir: dir.clone(),
            ..ReplayOptions::default()
        })
        .unwrap();
        assert!(report.api_calls >= 20_000, "{report:?}");
        assert_eq!(report.exits_without_enter, 0);
        // Every launch and copy completed and became a row.
        let kernels = report.rows["kernel"];
        let memcpys = report.rows["memcpy"];
        assert!(
            kernels > 0 && memcpys > 0 && kernels == 3 * memcpys,
            "{report:?}"
        );
        assert!(report.rows["hccl"] > 0 && report.rows["marker"] > 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
