//! Device activity: completions (joined in the kernel to the outermost API call that
//! submitted them) become `kernel`, `memcpy`, `memset` and `hccl` rows with device times
//! converted to the host clock; allocation calls become `memory` rows; device errors, lost
//! completions, drops and clock doubts become `critical_event` rows.
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use tracer_common::{
    DropKind, RecordHeader, RecordKind, TASK_FILLED, TASK_UNRECORDED, TaskComplete, TaskInfo,
    TaskKey, TaskSubmit,
};

use tracer_catalog::{self as catalog, ChipLayout, Payload, ProbeDef, Role, TaskKind};
use tracer_schema::{
    rows::{
        ApiArgs, ApiRow, CriticalEventRow, DeviceTask, HcclRow, KernelRow, MemcpyRow, MemoryRow,
        MemsetRow, SyncRow, bandwidth_gbps,
    },
    session::{ActivityStats, ClockStatus, ClockSummary},
    vocab::{EventKind, KernelType, MemoryKind, MemoryOperation, Severity},
};

use crate::{
    clock::{ClockModel, ClockReading},
    soclog::{SocBatch, SocEdge, SocRecord},
};

/// Completions wait this long (in trace time) before their device times are converted,
/// so the clock model has seen the constraints around them (the agent samples device
/// clocks every 100 ms); longer only costs memory at high task rates.
const HOLD_NS: u64 = 300_000_000;
/// An API call's task context is dropped this long after the call returned.
const CONTEXT_TTL_NS: u64 = 30_000_000_000;

/// Rows produced since the last [`Activity::take_output`].
#[derive(Debug, Default)]
pub struct ActivityOutput {
    pub kernels: Vec<KernelRow>,
    pub memcpys: Vec<MemcpyRow>,
    pub memsets: Vec<MemsetRow>,
    pub syncs: Vec<SyncRow>,
    pub hccl: Vec<HcclRow>,
    pub memory: Vec<MemoryRow>,
    pub critical: Vec<CriticalEventRow>,
}

/// What the outermost API call said about the task(s) it submits.
#[derive(Debug, Clone)]
pub struct TaskContext {
    /// The submitting function.
    pub def: &'static ProbeDef,
    pub kind: TaskKind,
    pub args: ApiArgs,
    /// Per-communicator sequence number of a collective.
    pub seq: Option<u64>,
    returned_ns: Option<u64>,
    /// Kernel launches nested in the call (an operator's), by entry time: a task submitted
    /// after one entered (on the call's thread) was launched by it and is named by it.
    launches: Vec<(u64, Option<String>)>,
    /// Operator calls the tasks were launched in: the call itself, or calls nested in it
    /// (entry time, return time once known, correlation id, operator).
    ops: Vec<NestedOp>,
}

/// An operator call within an outermost call.
#[derive(Debug, Clone, Copy)]
struct NestedOp {
    start_ns: u64,
    end_ns: Option<u64>,
    correlation_id: u64,
    name: &'static str,
}

impl TaskContext {
    /// The kernel a task submitted at `submit_ns` runs: its launch's, else the call's.
    fn kernel_name(&self, submit_ns: u64) -> Option<String> {
        let launch = self.launches.iter().rev().find(|(at, _)| *at <= submit_ns);
        match launch {
            Some((_, name)) => name.clone(),
            None => self.args.kernel_name.clone(),
        }
    }

    /// The innermost operator call in progress at `submit_ns`.
    fn op(&self, submit_ns: u64) -> Option<(u64, &'static str)> {
        self.ops
            .iter()
            .rev()
            .find(|op| op.start_ns <= submit_ns && op.end_ns.is_none_or(|end| submit_ns <= end))
            .map(|op| (op.correlation_id, op.name))
    }
}

struct Comm {
    name: String,
    rank: u32,
    world_size: u32,
    next_seq: u64,
}

struct Held {
    done: TaskComplete,
    context: Option<TaskContext>,
}

/// The tasks of one call that make one row: a memset the runtime performs as several
/// copies, a collective made of notifies and transfers. The row spans them all; it is
/// written once the call has returned and its last task was timed (or given up on).
struct Span {
    /// Tasks submitted (counted as their submissions arrive) and turned into rows.
    submitted: u32,
    seen: u32,
    /// The first task seen, with the earliest begin and the latest end of all.
    task: Option<DeviceTask>,
    sqe_type: u8,
    block_dim: u16,
    context: Option<TaskContext>,
}

impl Span {
    fn new() -> Self {
        Self {
            submitted: 0,
            seen: 0,
            task: None,
            sqe_type: 0,
            block_dim: 0,
            context: None,
        }
    }

    fn add(
        &mut self,
        task: DeviceTask,
        sqe_type: u8,
        block_dim: u16,
        context: Option<TaskContext>,
    ) {
        self.seen += 1;
        let Some(span) = &mut self.task else {
            (self.task, self.sqe_type, self.block_dim, self.context) =
                (Some(task), sqe_type, block_dim, context);
            return;
        };
        span.start_ns = earliest(span.start_ns, task.start_ns);
        span.device_start_cnt = earliest(span.device_start_cnt, task.device_start_cnt);
        span.end_ns = span.end_ns.max(task.end_ns);
        span.device_end_cnt = span.device_end_cnt.max(task.device_end_cnt);
        if span.status == Some(0) {
            span.status = task.status;
        }
    }

    fn complete(&self) -> bool {
        self.seen >= self.submitted
            && self
                .context
                .as_ref()
                .is_some_and(|c| c.returned_ns.is_some())
    }
}

/// Adds a begin or end record to a task's runs: an end closes the last run when it has no
/// end yet.
fn push_run(runs: &mut VecDeque<Unmatched>, record: &SocRecord, read_ns: u64) {
    match (record.edge, runs.back_mut()) {
        (SocEdge::End, Some(run)) if run.end_cnt.is_none() => {
            run.end_cnt = Some(record.cnt);
            run.read_ns = read_ns;
        }
        (edge, _) => runs.push_back(Unmatched {
            begin_cnt: (edge == SocEdge::Begin).then_some(record.cnt),
            end_cnt: (edge == SocEdge::End).then_some(record.cnt),
            read_ns,
        }),
    }
}

/// The earlier of two optional times (a missing one does not count).
fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        _ => a.or(b),
    }
}

/// A task on a device (device, stream, task): what the profiling channel's records name (the
/// stream is 0 on a chip whose records name none).
type DeviceTaskKey = (u32, u16, u32);

/// Submissions waiting for their device records, oldest first per (device, stream, task):
/// a device-wide stream id is reused once its stream is destroyed, and a task of the new
/// stream may be submitted before the channel delivered the records of the old stream's
/// task with the same ids. Records of one key come in submission order.
#[derive(Debug, Default)]
struct Waiting(HashMap<DeviceTaskKey, VecDeque<Submitted>>);

impl Waiting {
    fn contains_key(&self, key: &DeviceTaskKey) -> bool {
        self.0.contains_key(key)
    }

    /// The oldest submission of `key`.
    fn oldest_mut(&mut self, key: &DeviceTaskKey) -> Option<&mut Submitted> {
        self.0.get_mut(key)?.front_mut()
    }

    /// Removes and returns the oldest submission of `key`.
    fn take_oldest(&mut self, key: &DeviceTaskKey) -> Option<Submitted> {
        let queue = self.0.get_mut(key)?;
        let oldest = queue.pop_front();
        if queue.is_empty() {
            self.0.remove(key);
        }
        oldest
    }

    fn push(&mut self, key: DeviceTaskKey, submitted: Submitted) {
        self.0.entry(key).or_default().push_back(submitted);
    }

    fn values(&self) -> impl Iterator<Item = &Submitted> {
        self.0.values().flatten()
    }

    /// Keeps the submissions `keep` accepts.
    fn retain(&mut self, keep: impl Fn(&Submitted) -> bool) {
        for queue in self.0.values_mut() {
            queue.retain(&keep);
        }
        self.0.retain(|_, queue| !queue.is_empty());
    }

    fn drain(&mut self) -> impl Iterator<Item = (DeviceTaskKey, Submitted)> + '_ {
        self.0
            .drain()
            .flat_map(|(key, queue)| queue.into_iter().map(move |s| (key, s)))
    }
}

/// A submission waiting for its device records.
#[derive(Debug, Clone, Copy)]
struct Submitted {
    pid: u32,
    info: TaskInfo,
    begin_cnt: Option<u64>,
}

/// A task submitted outside a capture window: its device records are consumed and dropped.
fn unrecorded(info: &TaskInfo) -> bool {
    info.flags & TASK_UNRECORDED != 0
}

/// Channel records that arrived before their submission (the ring buffer and the channel
/// are read by different threads), or that belong to processes not traced.
#[derive(Debug, Clone, Copy, Default)]
struct Unmatched {
    begin_cnt: Option<u64>,
    end_cnt: Option<u64>,
    read_ns: u64,
}

/// A timed model-execute task.
#[derive(Debug, Clone, Copy)]
struct Execution {
    submitted: Submitted,
    end_cnt: u64,
    read_ns: u64,
}

/// Runs of loaded tasks are given to their execution this long (trace time) after their end
/// record was read: by then the execution's own records and submission are in, whichever of
/// the ring buffer and the channel was read first.
const RUN_DELAY_NS: u64 = 200_000_000;

/// Unmatched channel records older than this (trace time) belong to no traced submission.
const UNMATCHED_TTL_NS: u64 = 2_000_000_000;

pub struct Activity {
    /// The chip whose SQE types and completion entries the tasks have.
    chip: &'static ChipLayout,
    contexts: HashMap<u64, TaskContext>,
    /// Tasks submitted per correlation id and not yet turned into rows: a call's context
    /// stays until its last task has it.
    tasks_per_call: HashMap<u64, u32>,
    /// Devices whose task times come from the profiling channel, since when (trace time).
    soc_devices: BTreeMap<u32, u64>,
    submitted: Waiting,
    /// Tasks loaded into model streams (`halStreamTaskFill`), run by each execution.
    loaded: HashMap<DeviceTaskKey, Submitted>,
    /// Runs of loaded tasks (their begin and end records) waiting to be given to the model
    /// execution they ran in, in arrival order per task.
    loaded_runs: HashMap<DeviceTaskKey, VecDeque<Unmatched>>,
    /// Timed model-execute tasks by (device, begin syscnt): a loaded task that began while
    /// one ran belongs to its call.
    executions: BTreeMap<(u32, u64), Execution>,
    /// Per task ids, the runs (begin and end records) read before any submission with those
    /// ids: the latest is an early record of the next submission; a loaded model task may
    /// have run several times.
    unmatched: HashMap<DeviceTaskKey, VecDeque<Unmatched>>,
    /// Completion-queue error statuses of channel-timed tasks, applied when they are emitted,
    /// by the task id bits a completion entry carries (`ChipLayout::task_key_mask`).
    cqe_status: HashMap<DeviceTaskKey, u32>,
    /// Calls whose tasks fold into one row, by (correlation id, kind).
    spans: HashMap<(u64, TaskKind), Span>,
    comms: HashMap<(u32, u64), Comm>,
    comms_per_pid: HashMap<u32, u32>,
    allocations: HashMap<(u32, u64), u64>,
    clocks: BTreeMap<u32, ClockModel>,
    held: VecDeque<Held>,
    latest_ns: u64,
    output: ActivityOutput,
    stats: ActivityStats,
}

/// Tasks of a 910B, the chip an unknown chip is read as.
impl Default for Activity {
    fn default() -> Self {
        Self::new(catalog::DEFAULT_CHIP)
    }
}

impl Activity {
    /// Device activity of tasks of `chip`.
    pub fn new(chip: &'static ChipLayout) -> Self {
        Self {
            chip,
            contexts: HashMap::new(),
            tasks_per_call: HashMap::new(),
            soc_devices: BTreeMap::new(),
            submitted: Waiting::default(),
            loaded: HashMap::new(),
            loaded_runs: HashMap::new(),
            executions: BTreeMap::new(),
            unmatched: HashMap::new(),
            cqe_status: HashMap::new(),
            spans: HashMap::new(),
            comms: HashMap::new(),
            comms_per_pid: HashMap::new(),
            allocations: HashMap::new(),
            clocks: BTreeMap::new(),
            held: VecDeque::new(),
            latest_ns: 0,
            output: ActivityOutput::default(),
            stats: ActivityStats::default(),
        }
    }

    /// An outermost call that submits device tasks entered at `ts_ns`; `op` names the
    /// operator when it is an operator call.
    pub fn call_entered(
        &mut self,
        def: &'static ProbeDef,
        (pid, correlation_id, ts_ns): (u32, u64, u64),
        args: ApiArgs,
        op: Option<&'static str>,
    ) {
        let Some(kind) = def.task else { return };
        let seq = (kind == TaskKind::Collective)
            .then_some(args.handle)
            .flatten()
            .and_then(|comm| self.comms.get_mut(&(pid, comm)))
            .map(|comm| {
                comm.next_seq += 1;
                comm.next_seq - 1
            });
        let ops = op
            .map(|name| NestedOp {
                start_ns: ts_ns,
                end_ns: None,
                correlation_id,
                name,
            })
            .into_iter()
            .collect();
        let context = TaskContext {
            def,
            kind,
            args,
            seq,
            returned_ns: None,
            launches: Vec::new(),
            ops,
        };
        self.contexts.insert(correlation_id, context);
    }

    /// A kernel launch (of kernel `name`) entered at `ts_ns` inside outermost call
    /// `outermost`.
    pub fn launch_entered(&mut self, outermost: u64, ts_ns: u64, name: Option<String>) {
        if let Some(context) = self.contexts.get_mut(&outermost) {
            context.launches.push((ts_ns, name));
        }
    }

    /// Operator call `correlation_id` (operator `name`) entered at `ts_ns` inside outermost
    /// call `outermost`.
    pub fn op_entered(
        &mut self,
        outermost: u64,
        ts_ns: u64,
        correlation_id: u64,
        name: &'static str,
    ) {
        if let Some(context) = self.contexts.get_mut(&outermost) {
            context.ops.push(NestedOp {
                start_ns: ts_ns,
                end_ns: None,
                correlation_id,
                name,
            });
        }
    }

    /// Operator call `correlation_id` inside `outermost` returned at `ts_ns`.
    pub fn op_returned(&mut self, outermost: u64, correlation_id: u64, ts_ns: u64) {
        let Some(context) = self.contexts.get_mut(&outermost) else {
            return;
        };
        if let Some(op) = context
            .ops
            .iter_mut()
            .find(|op| op.correlation_id == correlation_id)
        {
            op.end_ns = Some(ts_ns);
        }
    }

    /// A call returned (any depth): memory rows, communicators, task-context bookkeeping.
    pub fn call_returned(&mut self, def: &ProbeDef, row: &ApiRow, outermost: u64) {
        if let Some(context) = self.contexts.get_mut(&row.correlation_id) {
            context.returned_ns = row.end_ns;
            for kind in TaskKind::FOLDED {
                if let Some(span) = self.spans.get_mut(&(row.correlation_id, kind)) {
                    if let Some(c) = &mut span.context {
                        c.returned_ns = row.end_ns;
                    }
                    if span.complete() {
                        self.close_span(row.correlation_id, kind);
                    }
                }
            }
        }
        match def.role {
            Role::Alloc(kind) => self.memory_row(row, outermost, MemoryOperation::Allocation, kind),
            Role::Free(kind) => self.memory_row(row, outermost, MemoryOperation::Release, kind),
            Role::CommInit if row.return_value == Some(0) => self.comm_created(row),
            _ => {}
        }
    }

    fn comm_created(&mut self, row: &ApiRow) {
        let (Some(handle), Some(world_size)) = (row.args.handle, row.args.count) else {
            return;
        };
        let index = self.comms_per_pid.entry(row.pid).or_default();
        let name = format!("comm{index}/{world_size}");
        *index += 1;
        let comm = Comm {
            name,
            rank: row.args.rank.unwrap_or(0),
            world_size: world_size as u32,
            next_seq: 0,
        };
        self.comms.insert((row.pid, handle), comm);
    }

    fn memory_row(
        &mut self,
        row: &ApiRow,
        outermost: u64,
        operation: MemoryOperation,
        kind: MemoryKind,
    ) {
        let Some(address) = row.args.address.filter(|&a| a != 0) else {
            return;
        };
        let ok = row.return_value == Some(0);
        let bytes = if operation == MemoryOperation::Allocation {
            if ok {
                self.allocations
                    .insert((row.pid, address), row.args.bytes.unwrap_or(0));
            }
            row.args.bytes
        } else {
            self.allocations.remove(&(row.pid, address))
        };
        self.output.memory.push(MemoryRow {
            correlation_id: outermost,
            pid: row.pid,
            tid: row.tid,
            operation,
            memory_kind: kind,
            address,
            bytes,
            device_id: row.args.device_id,
            start_ns: row.start_ns,
            end_ns: row.end_ns.unwrap_or(row.start_ns),
            api_name: row.name,
            return_value: row.return_value.unwrap_or(0),
        });
    }

    /// The agent reads `device`'s task times from the profiling channel from `since_ns` on:
    /// completion entries of tasks submitted since then give only their status.
    pub fn soc_log_started(&mut self, device: u32, since_ns: u64) {
        self.soc_devices.insert(device, since_ns);
    }

    /// `device`'s channel could not be started (another profiler owns it): its task times
    /// come from the records that profiler reads, copied by the probes (passive mode), from
    /// `since_ns` on. Said as a critical event: the agent depends on the other profiler
    /// reading.
    pub fn soc_log_passive(&mut self, device: u32, reason: &str, since_ns: u64) {
        self.soc_devices.insert(device, since_ns);
        let message = format!(
            "device {device}: task times from the profiling-channel records another profiler \
             reads (passive), not from a channel of the agent's own: {reason}"
        );
        let mut row = critical_row(
            since_ns,
            EventKind::DeviceTimeSource,
            Severity::Warning,
            1,
            message,
        );
        row.device_id = Some(device);
        self.output.critical.push(row);
    }

    /// A task was handed to the driver.
    pub fn submitted(&mut self, submit: &TaskSubmit) {
        // A device in use: the agent starts sampling its clock now, not at its first timed
        // task, which the channel reports tens of ms later.
        self.clock(submit.device_id);
        if submit.info.flags & TASK_FILLED != 0 {
            let key = (submit.device_id, submit.stream_id, submit.task_id);
            let loaded = Submitted {
                pid: submit.header.pid,
                info: submit.info,
                begin_cnt: None,
            };
            self.loaded.insert(key, loaded);
            // Its runs read before its loading was seen (the ring buffer and the channel
            // are read by different threads).
            if let Some(early) = self.unmatched.remove(&key) {
                self.loaded_runs.entry(key).or_default().extend(early);
            }
            return;
        }
        let correlation_id = submit.info.correlation_id;
        if correlation_id != 0 && !unrecorded(&submit.info) {
            *self.tasks_per_call.entry(correlation_id).or_default() += 1;
            let context = self.contexts.get(&correlation_id);
            if let Some(kind) = task_kind(self.chip, submit.info.sqe_type, context)
                && kind.folds()
            {
                self.spans
                    .entry((correlation_id, kind))
                    .or_insert_with(Span::new)
                    .submitted += 1;
            }
        }
        if !self.soc_devices.contains_key(&submit.device_id) {
            return;
        }
        let key = (submit.device_id, submit.stream_id, submit.task_id);
        let submitted = Submitted {
            pid: submit.header.pid,
            info: submit.info,
            begin_cnt: None,
        };
        let mut early = self.unmatched.remove(&key).unwrap_or_default();
        // Records read before the task was even submitted belong to an earlier task with
        // the same ids (a wrapped id, a process not traced). Of the others the first run is
        // this task's; later ones are of later tasks with these ids (a reused stream id),
        // whose submissions the ring buffer has not delivered yet.
        let stale = early
            .iter()
            .take_while(|run| run.read_ns < submit.header.ts_ns)
            .count();
        self.stats.channel_records_unmatched += stale as u64;
        early.drain(..stale);
        match early.pop_front() {
            Some(run) => {
                if !early.is_empty() {
                    self.unmatched.insert(key, early);
                }
                self.timed_by_channel(key, submitted, run)
            }
            None => self.submitted.push(key, submitted),
        }
    }

    /// Device records read from the profiling channel.
    pub fn soc_batch(&mut self, batch: &SocBatch) {
        self.latest_ns = self.latest_ns.max(batch.read_ns);
        for record in &batch.records {
            let key = (batch.device, record.stream_id, record.task_id);
            if !self.submitted.contains_key(&key) && self.loaded.contains_key(&key) {
                self.loaded_run(key, record, batch.read_ns);
                continue;
            }
            let Some(submitted) = self.submitted.oldest_mut(&key) else {
                push_run(
                    self.unmatched.entry(key).or_default(),
                    record,
                    batch.read_ns,
                );
                continue;
            };
            match record.edge {
                SocEdge::Begin => submitted.begin_cnt = Some(record.cnt),
                SocEdge::End => {
                    let Some(submitted) = self.submitted.take_oldest(&key) else {
                        continue;
                    };
                    let early = Unmatched {
                        end_cnt: Some(record.cnt),
                        read_ns: batch.read_ns,
                        ..Default::default()
                    };
                    self.timed_by_channel(key, submitted, early);
                }
            }
        }
    }

    /// A begin or end record of a loaded model task: one run of it, for the execution it ran
    /// in (found once that execution is timed, see [`Activity::give_runs`]).
    fn loaded_run(&mut self, key: DeviceTaskKey, record: &SocRecord, read_ns: u64) {
        push_run(self.loaded_runs.entry(key).or_default(), record, read_ns);
    }

    /// Gives the finished runs of loaded tasks read by `by_ns` (trace time) to the model
    /// execution each began in: a row of that execution's call. A run no execution covers
    /// is counted unmatched.
    fn give_runs(&mut self, by_ns: u64) {
        let mut ready: Vec<(DeviceTaskKey, Unmatched)> = Vec::new();
        for (key, runs) in &mut self.loaded_runs {
            while runs
                .front()
                .is_some_and(|r| r.end_cnt.is_some() && r.read_ns <= by_ns)
            {
                if let Some(run) = runs.pop_front() {
                    ready.push((*key, run));
                }
            }
        }
        self.loaded_runs.retain(|_, runs| !runs.is_empty());
        ready.sort_unstable_by_key(|(_, run)| run.begin_cnt);
        for (key, run) in ready {
            let Some(begin) = run.begin_cnt else {
                self.stats.channel_records_unmatched += 1;
                continue;
            };
            let execution = self
                .executions
                .range((key.0, 0)..=(key.0, begin))
                .next_back()
                .map(|(_, e)| *e)
                .filter(|e| run.end_cnt.is_some_and(|end| end <= e.end_cnt));
            let (Some(execution), Some(loaded)) = (execution, self.loaded.get(&key)) else {
                self.stats.channel_records_unmatched += 2;
                continue;
            };
            if unrecorded(&execution.submitted.info) {
                continue;
            }
            let info = TaskInfo {
                block_dim: loaded.info.block_dim,
                sqe_type: loaded.info.sqe_type,
                flags: 0,
                ..execution.submitted.info
            };
            if info.correlation_id != 0 {
                *self.tasks_per_call.entry(info.correlation_id).or_default() += 1;
            }
            let submitted = Submitted {
                pid: execution.submitted.pid,
                info,
                begin_cnt: None,
            };
            self.timed_by_channel(key, submitted, run);
        }
        let expired = self.latest_ns.saturating_sub(CONTEXT_TTL_NS);
        self.executions.retain(|_, e| e.read_ns > expired);
    }

    /// A task whose end record arrived: held like a completion until the clock model has
    /// seen the constraints around it.
    fn timed_by_channel(&mut self, key: DeviceTaskKey, submitted: Submitted, records: Unmatched) {
        let (device_id, stream_id, task_id) = key;
        let begin = submitted.begin_cnt.or(records.begin_cnt);
        let Some(end) = records.end_cnt else {
            // Only the begin was early: wait for the end.
            let mut waiting = submitted;
            waiting.begin_cnt = begin;
            self.submitted.push(key, waiting);
            return;
        };
        if unrecorded(&submitted.info) {
            // Outside a capture window: no row. A model execution is still remembered, so
            // that the runs of its loaded tasks are known and dropped with it.
            if submitted.info.sqe_type == self.chip.model_execute_sqe {
                let begin = begin.unwrap_or(0);
                let execution = Execution {
                    submitted,
                    end_cnt: end,
                    read_ns: records.read_ns,
                };
                self.executions.insert((device_id, begin), execution);
            }
            return;
        }
        // A task's begin record precedes its end on the device: an end without one means
        // the begin was lost (a full channel buffer). The task keeps its end time.
        let begin = begin.unwrap_or_else(|| {
            self.stats.channel_records_lost += 1;
            0
        });
        let done = TaskComplete {
            header: RecordHeader::new(
                RecordKind::TaskComplete,
                0,
                0,
                submitted.pid,
                submitted.info.tid,
                records.read_ns,
            ),
            info: submitted.info,
            start_cnt: begin,
            end_cnt: end,
            device_id,
            status: 0,
            stream_id,
            task_id,
            sqe_type: submitted.info.sqe_type,
            _pad: 0,
        };
        self.stats.tasks_from_channel += 1;
        if submitted.info.sqe_type == self.chip.model_execute_sqe {
            let execution = Execution {
                submitted,
                end_cnt: end,
                read_ns: records.read_ns,
            };
            self.executions.insert((device_id, begin), execution);
        }
        self.timed(&done);
    }

    /// A completion-queue entry arrived.
    pub fn completed(&mut self, done: &TaskComplete) {
        // A task submitted before tracing began (no submission joined, `submit_ns` 0) had
        // its begin before the channel started: only its completion entry can time it.
        if self.soc_devices.contains_key(&done.device_id) {
            // The channel times this task; the entry says only whether it failed.
            if done.status != 0 {
                let task = done.task_id & self.chip.task_key_mask();
                self.cqe_status
                    .insert((done.device_id, done.stream_id, task), done.status);
            }
            return;
        }
        // No channel: an entry carries the task's end only for the SQE types the driver
        // stamps, and never its start.
        let mut done = *done;
        if done.status != 0 || !self.chip.cqe_has_timestamp(done.sqe_type) {
            done.end_cnt = 0;
        }
        self.timed(&done);
    }

    /// A task with device times, from either source.
    fn timed(&mut self, done: &TaskComplete) {
        self.stats.tasks += 1;
        let recv_ns = done.header.ts_ns;
        self.latest_ns = self.latest_ns.max(recv_ns);
        // Only a task with both device times bounds the clock (a completion entry has at
        // most its end).
        if done.info.submit_ns != 0 && done.start_cnt != 0 && done.end_cnt != 0 {
            self.clock(done.device_id).add_task(
                done.info.submit_ns,
                done.start_cnt,
                done.end_cnt,
                recv_ns,
            );
        }
        let context = self.take_context(done.info.correlation_id);
        self.held.push_back(Held {
            done: *done,
            context,
        });
    }

    /// The context of a task. Every task of a call gets it: the context goes once the call
    /// has returned and its last submitted task took it.
    fn take_context(&mut self, correlation_id: u64) -> Option<TaskContext> {
        let remaining = match self.tasks_per_call.get_mut(&correlation_id) {
            Some(n) => {
                *n = n.saturating_sub(1);
                *n
            }
            None => 0,
        };
        if remaining == 0 {
            self.tasks_per_call.remove(&correlation_id);
        }
        let context = self.contexts.get(&correlation_id)?.clone();
        // A model execution's loaded tasks are only found after its own task is timed: its
        // context stays until it expires.
        if context.returned_ns.is_some() && remaining == 0 && context.kind != TaskKind::Model {
            self.contexts.remove(&correlation_id);
        }
        Some(context)
    }

    pub fn clock_reading(&mut self, reading: ClockReading) {
        match reading {
            ClockReading::Frequency { device, hz } => self.clock(device).set_frequency(hz),
            ClockReading::Sample {
                device,
                cnt,
                enter_ns,
                exit_ns,
            } => self.clock(device).add_sample(cnt, enter_ns, exit_ns),
        }
    }

    fn clock(&mut self, device: u32) -> &mut ClockModel {
        self.clocks
            .entry(device)
            .or_insert_with(|| ClockModel::new(None))
    }

    /// Whether a task submitted by `by_ns` still waits for its profiling-channel records.
    pub fn channel_waiting(&self, by_ns: u64) -> bool {
        self.submitted.values().any(|s| s.info.submit_ns <= by_ns)
    }

    /// Devices seen so far (the clock sampler reads them).
    pub fn devices(&self) -> impl Iterator<Item = u32> + '_ {
        self.clocks.keys().copied()
    }

    /// Converts and emits completions that have waited long enough; drops stale contexts.
    pub fn release(&mut self) {
        self.give_runs(self.latest_ns.saturating_sub(RUN_DELAY_NS));
        let horizon = self.latest_ns.saturating_sub(HOLD_NS);
        while self
            .held
            .front()
            .is_some_and(|h| h.done.header.ts_ns <= horizon)
        {
            if let Some(held) = self.held.pop_front() {
                self.emit(held);
            }
        }
        let expired = self.latest_ns.saturating_sub(CONTEXT_TTL_NS);
        self.contexts
            .retain(|_, c| c.returned_ns.is_none_or(|t| t > expired));
        let stale: Vec<(u64, TaskKind)> = self
            .spans
            .iter()
            .filter(|(_, s)| {
                s.context
                    .as_ref()
                    .and_then(|c| c.returned_ns)
                    .is_some_and(|t| t <= expired)
            })
            .map(|(&key, _)| key)
            .collect();
        for (correlation_id, kind) in stale {
            self.close_span(correlation_id, kind);
        }
        // Counts only serve contexts: tasks of calls without one (or whose tasks are never
        // timed) must not pile up.
        let contexts = &self.contexts;
        self.tasks_per_call
            .retain(|id, _| contexts.contains_key(id));
        let stale = self.latest_ns.saturating_sub(UNMATCHED_TTL_NS);
        let mut expired = 0;
        for runs in self.unmatched.values_mut() {
            while runs.front().is_some_and(|u| u.read_ns <= stale) {
                runs.pop_front();
                expired += 1;
            }
        }
        self.unmatched.retain(|_, runs| !runs.is_empty());
        self.stats.channel_records_unmatched += expired;
    }

    /// Emits everything: held completions, tasks that never completed, loss counters and
    /// the clock models' verdicts.
    pub fn finish(&mut self, missing: &[(TaskKey, TaskInfo)], drops: &[u64], now_ns: u64) {
        self.give_runs(u64::MAX);
        for model in self.clocks.values_mut() {
            model.refit();
        }
        while let Some(held) = self.held.pop_front() {
            self.emit(held);
        }
        self.tasks_lost(missing, now_ns);
        // Not recorded: nothing is missing.
        self.submitted.retain(|s| !unrecorded(&s.info));
        // Channel-timed tasks whose end record never came.
        // Each lacks its end record, and its begin too if none came.
        self.stats.channel_records_lost += self
            .submitted
            .values()
            .map(|s| if s.begin_cnt.is_some() { 1 } else { 2 })
            .sum::<u64>();
        let mut waiting: Vec<(TaskKey, TaskInfo)> = self
            .submitted
            .drain()
            .map(|((device, stream, task), s)| (TaskKey::new(s.pid, device, stream, task), s.info))
            .collect();
        waiting.sort_by_key(|(_, info)| info.submit_ns);
        for (key, info) in &waiting {
            self.missing_completion(key, info, now_ns);
        }
        if self.stats.channel_records_lost > 0 {
            let lost = self.stats.channel_records_lost;
            self.critical(
                now_ns,
                EventKind::ChannelRecordsLost,
                Severity::Warning,
                lost,
                format!(
                    "{lost} begin or end records of traced tasks never came from the profiling \
                     channel (a full channel buffer, or tasks that had not ended)"
                ),
            );
        }
        let mut open: Vec<(u64, TaskKind)> = self.spans.keys().copied().collect();
        open.sort_unstable_by_key(|&(correlation_id, _)| correlation_id);
        for (correlation_id, kind) in open {
            self.close_span(correlation_id, kind);
        }
        let left: usize = self.unmatched.drain().map(|(_, runs)| runs.len()).sum();
        self.stats.channel_records_unmatched += left as u64;
        for (kind, &count) in DropKind::ALL.iter().zip(drops).filter(|(_, c)| **c > 0) {
            let (event, severity) = if kind.is_read_failure() {
                (EventKind::ProbeReadFailure, Severity::Warning)
            } else {
                (EventKind::RingBufferDrop, Severity::Error)
            };
            self.critical(now_ns, event, severity, count, kind.name().to_string());
        }
        let doubts: Vec<(u32, String)> = self
            .clocks
            .iter()
            .filter_map(|(&d, m)| clock_doubt(&m.summary()).map(|msg| (d, msg)))
            .collect();
        for (device, message) in doubts {
            let mut row =
                critical_row(now_ns, EventKind::ClockModel, Severity::Warning, 1, message);
            row.device_id = Some(device);
            self.output.critical.push(row);
        }
    }

    /// Tasks whose completion entry will never be seen (their process exited, or tracing
    /// stopped). Channel-timed tasks are not waiting for one: they are missing only if
    /// their end record never comes (see [`Activity::finish`]).
    /// Processes with communicators or allocations known.
    pub(crate) fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.comms
            .keys()
            .map(|k| k.0)
            .chain(self.allocations.keys().map(|k| k.0))
    }

    /// Forgets the communicators and allocations of the processes `pids` (gone).
    pub(crate) fn forget_processes(&mut self, pids: &HashSet<u32>) {
        self.comms.retain(|k, _| !pids.contains(&k.0));
        self.comms_per_pid.retain(|p, _| !pids.contains(p));
        self.allocations.retain(|k, _| !pids.contains(&k.0));
    }

    pub fn tasks_lost(&mut self, lost: &[(TaskKey, TaskInfo)], now_ns: u64) {
        for (key, info) in lost.iter().filter(|(_, info)| !unrecorded(info)) {
            let channel_timed = self
                .soc_devices
                .get(&key.device_id)
                .is_some_and(|&since| info.submit_ns >= since);
            if !channel_timed {
                self.missing_completion(key, info, now_ns);
            }
        }
    }

    pub fn take_output(&mut self) -> ActivityOutput {
        std::mem::take(&mut self.output)
    }

    pub fn stats(&self) -> ActivityStats {
        self.stats
    }

    /// Per device, the clock model as fitted so far.
    pub fn clock_summaries(&self) -> BTreeMap<u32, ClockSummary> {
        self.clocks.iter().map(|(&d, m)| (d, m.summary())).collect()
    }

    fn emit(&mut self, mut held: Held) {
        let task = held.done.task_id & self.chip.task_key_mask();
        if let Some(status) =
            self.cqe_status
                .remove(&(held.done.device_id, held.done.stream_id, task))
        {
            held.done.status = status;
        }
        let done = &held.done;
        let model = self.clocks.get(&done.device_id);
        // 0: a time the source did not give.
        let known = |cnt: u64| (cnt != 0).then_some(cnt);
        let convert = |cnt: u64| known(cnt).and_then(|c| model.and_then(|m| m.to_host_ns(c)));
        let task = DeviceTask {
            correlation_id: done.info.correlation_id,
            pid: done.header.pid,
            tid: done.info.tid,
            device_id: done.device_id,
            stream_id: u32::from(done.stream_id),
            task_id: done.task_id,
            start_ns: convert(done.start_cnt),
            end_ns: convert(done.end_cnt),
            device_start_cnt: known(done.start_cnt),
            device_end_cnt: known(done.end_cnt),
            submit_ns: done.info.submit_ns,
            status: Some(done.status),
            // Set from the task's context when its row is made.
            op_correlation_id: None,
            op_name: None,
        };
        if held.context.is_none() {
            self.stats.tasks_without_api += 1;
        }
        if done.status != 0 {
            self.device_error(&task, held.context.as_ref(), done.header.ts_ns);
        }
        let sqe_type = if done.info.submit_ns != 0 {
            done.info.sqe_type
        } else {
            done.sqe_type
        };
        self.task_row(task, sqe_type, done.info.block_dim, held.context);
    }

    fn task_row(
        &mut self,
        task: DeviceTask,
        sqe_type: u8,
        block_dim: u16,
        context: Option<TaskContext>,
    ) {
        let Some(kind) = task_kind(self.chip, sqe_type, context.as_ref()) else {
            return; // maintenance and other bookkeeping tasks have no table
        };
        if let Some(correlation_id) = context
            .as_ref()
            .map(|_| task.correlation_id)
            .filter(|_| kind.folds())
        {
            self.fold(correlation_id, kind, task, sqe_type, block_dim, context);
            return;
        }
        self.row(kind, task, sqe_type, block_dim, context);
    }

    /// Adds a task to its call's span; writes the span's row once it is complete.
    fn fold(
        &mut self,
        correlation_id: u64,
        kind: TaskKind,
        task: DeviceTask,
        sqe_type: u8,
        block_dim: u16,
        context: Option<TaskContext>,
    ) {
        let span = self
            .spans
            .entry((correlation_id, kind))
            .or_insert_with(Span::new);
        span.add(task, sqe_type, block_dim, context);
        if span.complete() {
            self.close_span(correlation_id, kind);
        }
    }

    /// Writes the row of a span, whatever of it was seen.
    fn close_span(&mut self, correlation_id: u64, kind: TaskKind) {
        let Some(span) = self.spans.remove(&(correlation_id, kind)) else {
            return;
        };
        if let Some(task) = span.task {
            self.row(kind, task, span.sqe_type, span.block_dim, span.context);
        }
    }

    /// The row of a task (or of a span of tasks) of `kind`.
    fn row(
        &mut self,
        kind: TaskKind,
        mut task: DeviceTask,
        sqe_type: u8,
        block_dim: u16,
        context: Option<TaskContext>,
    ) {
        let unit = self
            .chip
            .sqe_task_kind(sqe_type)
            .map_or(KernelType::Unknown, |(_, unit)| unit);
        let kernel_name = context.as_ref().and_then(|c| c.kernel_name(task.submit_ns));
        if let Some((op, name)) = context.as_ref().and_then(|c| c.op(task.submit_ns)) {
            task.op_correlation_id = Some(op);
            task.op_name = Some(name);
        }
        let (def, args, seq) = match context {
            Some(c) => (Some(c.def), c.args, c.seq),
            None => (None, ApiArgs::default(), None),
        };
        let api_name = def.map_or("", |d| d.symbol);
        let is_async = def.is_some_and(|d| d.is_async);
        match kind {
            TaskKind::Kernel => self.output.kernels.push(KernelRow {
                task,
                name: kernel_name,
                kernel_type: unit,
                block_dim: u32::from(block_dim),
                api_name,
            }),
            TaskKind::Memcpy => {
                let bytes = args.bytes.unwrap_or(0);
                self.output.memcpys.push(MemcpyRow {
                    bandwidth_gbps: bandwidth(bytes, &task),
                    task,
                    copy_kind: args.memcpy_kind.unwrap_or_default().copy_kind(),
                    bytes,
                    is_async,
                    api_name,
                })
            }
            TaskKind::Memset => self.output.memsets.push(MemsetRow {
                task,
                value: args.value.unwrap_or(0) as u32,
                bytes: args.bytes.unwrap_or(0),
                is_async,
                api_name,
            }),
            // `task_kind` gives a model's tasks their SQE's kind; a model task of no known
            // kind would be a synchronization of its own.
            TaskKind::Sync | TaskKind::Model => self.output.syncs.push(SyncRow {
                task,
                kind: self.chip.sqe_sync_kind(sqe_type),
                event: args.handle,
                api_name,
            }),
            TaskKind::Collective => {
                let payload = def.map_or(Payload::Count, |d| d.payload);
                let row = self.hccl_row(task, api_name, payload, args, seq);
                self.output.hccl.push(row);
            }
        }
    }

    fn hccl_row(
        &self,
        task: DeviceTask,
        name: &'static str,
        payload: Payload,
        args: ApiArgs,
        seq: Option<u64>,
    ) -> HcclRow {
        let comm = args.handle.unwrap_or(0);
        let info = self.comms.get(&(task.pid, comm));
        let bytes = input_bytes(payload, &args, info.map(|c| c.world_size));
        HcclRow {
            bandwidth_gbps: bytes.and_then(|b| bandwidth(b, &task)),
            name,
            comm,
            comm_name: info.map(|c| c.name.clone()),
            rank: info.map(|c| c.rank),
            world_size: info.map(|c| c.world_size),
            data_type: args.data_type,
            count: args.count,
            bytes,
            reduce_op: args.reduce_op,
            peer: args.rank,
            seq: seq.unwrap_or(0),
            task,
        }
    }

    fn device_error(&mut self, task: &DeviceTask, context: Option<&TaskContext>, ts_ns: u64) {
        self.stats.device_errors += 1;
        let what = context.map_or("task".to_string(), |c| match &c.args.kernel_name {
            Some(name) => format!("kernel {name} ({})", c.def.symbol),
            None => c.def.symbol.to_string(),
        });
        let message = format!(
            "{what} on device {} stream {} task {} failed with {} ({})",
            task.device_id,
            task.stream_id,
            task.task_id,
            task.status.unwrap_or(0),
            error_name(task.status.unwrap_or(0))
        );
        let mut row = critical_row(ts_ns, EventKind::DeviceError, Severity::Error, 1, message);
        row.pid = Some(task.pid);
        row.tid = Some(task.tid);
        row.device_id = Some(task.device_id);
        row.correlation_id = Some(task.correlation_id);
        self.output.critical.push(row);
    }

    fn missing_completion(&mut self, key: &TaskKey, info: &TaskInfo, now_ns: u64) {
        self.stats.missing_completions += 1;
        let context = self.take_context(info.correlation_id);
        let task = DeviceTask {
            correlation_id: info.correlation_id,
            pid: key.tgid,
            tid: info.tid,
            device_id: key.device_id,
            stream_id: u32::from(key.stream_id),
            task_id: key.task_id,
            submit_ns: info.submit_ns,
            ..Default::default()
        };
        let mut row = critical_row(
            now_ns,
            EventKind::MissingCompletion,
            Severity::Warning,
            1,
            format!(
                "no completion arrived for device {} stream {} task {} by the end of tracing",
                key.device_id, key.stream_id, key.task_id
            ),
        );
        row.pid = Some(key.tgid);
        row.tid = Some(info.tid);
        row.device_id = Some(key.device_id);
        row.correlation_id = Some(info.correlation_id);
        self.output.critical.push(row);
        self.task_row(task, info.sqe_type, info.block_dim, context);
    }

    fn critical(
        &mut self,
        ts_ns: u64,
        kind: EventKind,
        severity: Severity,
        count: u64,
        message: String,
    ) {
        self.output
            .critical
            .push(critical_row(ts_ns, kind, severity, count, message));
    }
}

/// The table a task belongs in: a collective's tasks (notifies, transfers) are the
/// collective; otherwise a synchronization task is one whatever call submitted it (a flip
/// task inside a launch); other tasks take their kind from the call, which knows more than
/// the SQE type (as `chip` numbers them), or from the SQE type when no call is known.
fn task_kind(chip: &ChipLayout, sqe_type: u8, context: Option<&TaskContext>) -> Option<TaskKind> {
    let by_sqe = chip.sqe_task_kind(sqe_type).map(|(kind, _)| kind);
    match (context.map(|c| c.kind), by_sqe) {
        (Some(TaskKind::Collective), _) => Some(TaskKind::Collective),
        // A model runs tasks of every kind: each is what its SQE says.
        (Some(TaskKind::Model), by_sqe) => by_sqe,
        // So may an operator: its kernels, and copies where it makes them.
        (Some(from_call), by_sqe) if context.is_some_and(|c| c.def.role.is_operator_call()) => {
            by_sqe.or(Some(from_call))
        }
        (_, Some(TaskKind::Sync)) => Some(TaskKind::Sync),
        (from_call, by_sqe) => from_call.or(by_sqe),
    }
}

fn critical_row(
    ts_ns: u64,
    kind: EventKind,
    severity: Severity,
    count: u64,
    message: String,
) -> CriticalEventRow {
    CriticalEventRow {
        ts_ns,
        kind,
        severity,
        count,
        message,
        ..Default::default()
    }
}

/// Device time error above which the trace's device times deserve a warning.
const CLOCK_WARN_NS: f64 = 10_000.0;

/// Why a device's converted times should not be trusted blindly, if they should not.
fn clock_doubt(summary: &ClockSummary) -> Option<String> {
    let error = summary.error_bound_ns;
    let why = match summary.status {
        ClockStatus::Direct | ClockStatus::BoundsOnly
            if error.is_some_and(|e| e <= CLOCK_WARN_NS) =>
        {
            return None;
        }
        ClockStatus::Direct | ClockStatus::BoundsOnly => match error {
            Some(e) => format!("device times may be off by up to {:.1} us", e / 1e3),
            None => "device time error is unbounded".to_string(),
        },
        ClockStatus::Infeasible => format!(
            "clock observations conflict ({} violations); device times are approximate",
            summary.violations
        ),
        ClockStatus::Nominal | ClockStatus::Unknown => {
            "too little clock data: device times could not be converted".to_string()
        }
    };
    Some(format!(
        "{why} (model {:?}, {} samples, {} tasks)",
        summary.status, summary.samples, summary.tasks
    ))
}

/// GB/s over the device interval.
fn bandwidth(bytes: u64, task: &DeviceTask) -> Option<f64> {
    bandwidth_gbps(bytes, task.end_ns?.checked_sub(task.start_ns?)?)
}

/// The bytes each rank puts into a collective.
fn input_bytes(payload: Payload, args: &ApiArgs, world_size: Option<u32>) -> Option<u64> {
    let per_rank = || Some(args.count? * args.data_type?.size()?);
    match payload {
        Payload::Nothing => Some(0),
        Payload::Count => per_rank(),
        Payload::PerPeer => Some(per_rank()? * u64::from(world_size?)),
    }
}

/// Names of the device error codes CQEs carry.
fn error_name(code: u32) -> &'static str {
    catalog::DEVICE_ERRORS
        .iter()
        .find(|(c, _)| *c == code)
        .map_or("device error", |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    use tracer_schema::vocab::HcclDataType;

    #[test]
    fn collective_bytes_follow_the_payload_rule() {
        let args = ApiArgs {
            count: Some(10),
            data_type: Some(HcclDataType::Fp32),
            ..Default::default()
        };
        assert_eq!(input_bytes(Payload::Count, &args, Some(4)), Some(40));
        assert_eq!(input_bytes(Payload::PerPeer, &args, Some(4)), Some(160));
        assert_eq!(input_bytes(Payload::PerPeer, &args, None), None);
        assert_eq!(
            input_bytes(Payload::Nothing, &ApiArgs::default(), None),
            Some(0)
        );
    }

    use crate::soclog::{SocBatch, SocEdge, SocRecord};

    fn submit(device: u32, stream: u16, task: u32, correlation_id: u64, ts: u64) -> TaskSubmit {
        TaskSubmit {
            header: RecordHeader::new(RecordKind::TaskSubmit, 0, 0, 100, 101, ts),
            info: TaskInfo {
                correlation_id,
                submit_ns: ts,
                tid: 101,
                block_dim: 8,
                sqe_type: 0,
                flags: 0,
            },
            device_id: device,
            sq_id: 0,
            stream_id: stream,
            task_id: task,
            _pad: 0,
        }
    }

    fn batch(device: u32, read_ns: u64, records: &[(SocEdge, u16, u32, u64)]) -> SocBatch {
        SocBatch {
            device,
            read_ns,
            records: records
                .iter()
                .map(|&(edge, stream_id, task_id, cnt)| SocRecord {
                    edge,
                    stream_id,
                    task_id,
                    cnt,
                })
                .collect(),
        }
    }

    fn launch() -> &'static ProbeDef {
        catalog::Catalog::builtin()
            .find("aclrtLaunchKernel")
            .expect("in the catalog")
    }

    /// Begin/end records join their submission by (device, stream, task), whichever
    /// arrives first; both tasks of one call keep its kernel name; a failed task's
    /// completion entry gives its status; other processes' records are left unmatched.
    #[test]
    fn a_reused_stream_id_waits_behind_the_old_streams_task() {
        let mut a = Activity::default();
        a.soc_log_started(0, 0);
        a.call_entered(launch(), (100, 7, 0), ApiArgs::default(), None);
        a.call_entered(launch(), (100, 8, 0), ApiArgs::default(), None);
        // Stream 3 is destroyed and its id given to a new stream, whose task 0 is submitted
        // before the channel delivered the old stream's task 0.
        a.submitted(&submit(0, 3, 0, 7, 1_000));
        a.submitted(&submit(0, 3, 0, 8, 2_000));
        a.soc_batch(&batch(
            0,
            5_000,
            &[
                (SocEdge::Begin, 3, 0, 40),
                (SocEdge::End, 3, 0, 50),
                (SocEdge::Begin, 3, 0, 60),
                (SocEdge::End, 3, 0, 70),
            ],
        ));
        a.finish(&[], &[], 1_000_000_000_000);
        let out = a.take_output();
        let kernels: Vec<_> = out
            .kernels
            .iter()
            .map(|k| (k.task.correlation_id, k.task.device_start_cnt))
            .collect();
        assert_eq!(kernels, [(7, Some(40)), (8, Some(60))]);
        assert_eq!(a.stats().channel_records_unmatched, 0);

        // The same when the channel delivers both tasks' records before the ring buffer
        // delivers either submission.
        let mut a = Activity::default();
        a.soc_log_started(0, 0);
        a.call_entered(launch(), (100, 7, 0), ApiArgs::default(), None);
        a.call_entered(launch(), (100, 8, 0), ApiArgs::default(), None);
        a.soc_batch(&batch(
            0,
            5_000,
            &[(SocEdge::Begin, 3, 0, 40), (SocEdge::End, 3, 0, 50)],
        ));
        a.soc_batch(&batch(
            0,
            6_000,
            &[(SocEdge::Begin, 3, 0, 60), (SocEdge::End, 3, 0, 70)],
        ));
        a.submitted(&submit(0, 3, 0, 7, 1_000));
        a.submitted(&submit(0, 3, 0, 8, 2_000));
        a.finish(&[], &[], 1_000_000_000_000);
        let out = a.take_output();
        let kernels: Vec<_> = out
            .kernels
            .iter()
            .map(|k| (k.task.correlation_id, k.task.device_start_cnt))
            .collect();
        assert_eq!(kernels, [(7, Some(40)), (8, Some(60))]);
        assert_eq!(a.stats().channel_records_unmatched, 0);
    }

    #[test]
    fn channel_records_join_submissions() {
        let mut a = Activity::default();
        a.soc_log_started(0, 0);
        let args = ApiArgs {
            kernel_name: Some("matmul".into()),
            ..Default::default()
        };
        a.call_entered(launch(), (100, 7, 0), args, None);
        a.submitted(&submit(0, 3, 10, 7, 1_000));
        // The second task's records come before its submission is seen.
        a.soc_batch(&batch(
            0,
            5_000,
            &[(SocEdge::Begin, 3, 11, 60), (SocEdge::End, 3, 11, 70)],
        ));
        a.submitted(&submit(0, 3, 11, 7, 1_100));
        a.soc_batch(&batch(
            0,
            6_000,
            &[
                (SocEdge::Begin, 3, 10, 40),
                (SocEdge::End, 3, 10, 50),
                (SocEdge::End, 9, 9, 55), // another process's task
            ],
        ));
        let mut failed = TaskComplete::default();
        (
            failed.device_id,
            failed.stream_id,
            failed.task_id,
            failed.status,
        ) = (0, 3, 10, 507_015);
        failed.info.submit_ns = 1_000;
        a.completed(&failed);
        a.finish(&[], &[], 1_000_000_000_000);
        let out = a.take_output();
        type Seen<'a> = (u32, Option<&'a str>, Option<u64>, Option<u64>, Option<u32>);
        let kernels: Vec<Seen<'_>> = out
            .kernels
            .iter()
            .map(|k| {
                (
                    k.task.task_id,
                    k.name.as_deref(),
                    k.task.device_start_cnt,
                    k.task.device_end_cnt,
                    k.task.status,
                )
            })
            .collect();
        assert_eq!(
            kernels,
            [
                (11, Some("matmul"), Some(60), Some(70), Some(0)),
                (10, Some("matmul"), Some(40), Some(50), Some(507_015)),
            ]
        );
        let stats = a.stats();
        assert_eq!(
            (stats.tasks_from_channel, stats.channel_records_unmatched),
            (2, 1)
        );
        assert_eq!(stats.missing_completions, 0);
    }

    /// On a 950 (STARS v2) tasks are named by the process's 32-bit task serial number and no
    /// stream: records join by it, a completion entry's error (which carries the id's low 16
    /// bits only) reaches its task, and SQE types are v2's (6 a notify record, 1 an AI Vector
    /// kernel).
    #[test]
    fn a_950_joins_32_bit_task_ids_and_reads_v2_sqe_types() {
        let mut a = Activity::new(&catalog::CHIP_950);
        a.soc_log_started(0, 0);
        a.call_entered(launch(), (100, 7, 0), ApiArgs::default(), None);
        let mut vector = submit(0, 0, 0x1_0005, 7, 1_000);
        vector.info.sqe_type = 1;
        a.submitted(&vector);
        let mut record = submit(0, 0, 0x2_0006, 0, 1_100);
        record.info.sqe_type = 6;
        a.submitted(&record);
        a.soc_batch(&batch(
            0,
            5_000,
            &[
                (SocEdge::Begin, 0, 0x1_0005, 40),
                (SocEdge::End, 0, 0x1_0005, 50),
                (SocEdge::Begin, 0, 0x2_0006, 60),
                (SocEdge::End, 0, 0x2_0006, 61),
            ],
        ));
        let mut failed = TaskComplete::default();
        (failed.device_id, failed.task_id, failed.status) = (0, 0x0005, 507_015);
        a.completed(&failed);
        a.finish(&[], &[], 1_000_000_000_000);
        let out = a.take_output();
        let kernels: Vec<_> = out
            .kernels
            .iter()
            .map(|k| {
                (
                    k.task.stream_id,
                    k.task.task_id,
                    k.kernel_type,
                    k.task.status,
                )
            })
            .collect();
        assert_eq!(
            kernels,
            [(0, 0x1_0005, KernelType::AiVector, Some(507_015))]
        );
        let syncs: Vec<_> = out.syncs.iter().map(|r| (r.task.task_id, r.kind)).collect();
        assert_eq!(
            syncs,
            [(0x2_0006, tracer_schema::vocab::SyncKind::NotifyRecord)]
        );
        assert_eq!(a.stats().channel_records_unmatched, 0);
    }

    /// Records read before a task was submitted belong to an earlier task with the same
    /// ids: the submission waits for its own.
    #[test]
    fn records_older_than_the_submission_are_not_its_own() {
        let mut a = Activity::default();
        a.soc_log_started(0, 0);
        a.call_entered(launch(), (100, 7, 0), ApiArgs::default(), None);
        a.soc_batch(&batch(
            0,
            900,
            &[(SocEdge::Begin, 3, 10, 5), (SocEdge::End, 3, 10, 6)],
        ));
        a.submitted(&submit(0, 3, 10, 7, 1_000));
        a.soc_batch(&batch(
            0,
            2_000,
            &[(SocEdge::Begin, 3, 10, 40), (SocEdge::End, 3, 10, 50)],
        ));
        a.finish(&[], &[], 1_000_000_000_000);
        let out = a.take_output();
        let times: Vec<_> = out
            .kernels
            .iter()
            .map(|k| (k.task.device_start_cnt, k.task.device_end_cnt))
            .collect();
        assert_eq!(times, [(Some(40), Some(50))]);
        let stats = a.stats();
        assert_eq!(
            (stats.tasks_from_channel, stats.channel_records_unmatched),
            (1, 1)
        );
    }

    /// Records lost to a full channel buffer are counted: an end without its begin keeps
    /// the end time (one lost), a submission that got nothing is missing (two lost).
    #[test]
    fn lost_channel_records_are_counted() {
        let mut a = Activity::default();
        a.soc_log_started(0, 0);
        a.submitted(&submit(0, 3, 10, 0, 1_000));
        a.submitted(&submit(0, 3, 11, 0, 1_100));
        a.soc_batch(&batch(0, 5_000, &[(SocEdge::End, 3, 10, 50)]));
        a.finish(&[], &[], 1_000_000_000_000);
        let out = a.take_output();
        let times: Vec<_> = out
            .kernels
            .iter()
            .map(|k| {
                (
                    k.task.task_id,
                    k.task.device_start_cnt,
                    k.task.device_end_cnt,
                )
            })
            .collect();
        assert_eq!(times, [(10, None, Some(50)), (11, None, None)]);
        assert_eq!(a.stats().channel_records_lost, 3);
        assert!(
            out.critical
                .iter()
                .any(|c| c.kind == EventKind::ChannelRecordsLost && c.count == 3)
        );
    }

    /// A channel-timed submission whose end record never comes is a missing completion; a
    /// completion entry on a channel-timed device makes no row of its own (it carries no
    /// start time: only its status counts).
    #[test]
    fn channel_gaps_and_completion_entries() {
        let mut a = Activity::default();
        let mut entry = TaskComplete::default();
        (entry.device_id, entry.stream_id, entry.task_id) = (0, 1, 1);
        (entry.info.submit_ns, entry.sqe_type, entry.end_cnt) = (500, 4, 6);
        a.soc_log_started(0, 1_000);
        a.completed(&entry);
        a.submitted(&submit(0, 1, 2, 0, 2_000));
        a.finish(&[], &[], 3_000);
        let out = a.take_output();
        assert_eq!(out.kernels.len(), 1, "{:?}", out.kernels);
        assert!(
            out.critical
                .iter()
                .any(|c| c.kind == EventKind::MissingCompletion)
        );
        assert_eq!(a.stats().missing_completions, 1);
    }

    /// Without a channel, a completion entry times only the end of the SQE types the driver
    /// stamps (an event record here), never a kernel.
    #[test]
    fn completion_entries_without_a_channel_give_ends_only() {
        let mut a = Activity::default();
        let mut record = TaskComplete::default();
        (record.device_id, record.stream_id, record.task_id) = (0, 1, 1);
        (record.sqe_type, record.end_cnt) = (4, 60);
        let mut kernel = record;
        (kernel.task_id, kernel.sqe_type, kernel.end_cnt) = (2, 0, 70);
        a.completed(&record);
        a.completed(&kernel);
        a.finish(&[], &[], 3_000);
        let out = a.take_output();
        let ends: Vec<_> = out
            .syncs
            .iter()
            .map(|r| (r.task.device_start_cnt, r.task.device_end_cnt))
            .chain(
                out.kernels
                    .iter()
                    .map(|r| (r.task.device_start_cnt, r.task.device_end_cnt)),
            )
            .collect();
        assert_eq!(ends, [(None, Some(60)), (None, None)]);
    }

    /// A collective's tasks (notifies, a transfer) make one hccl row spanning them, written
    /// once the call returned and its last task was timed.
    #[test]
    fn a_collective_is_one_row_over_its_tasks() {
        let mut a = Activity::default();
        a.soc_log_started(0, 0);
        let collective = &catalog::Catalog::builtin()
            .entries()
            .iter()
            .find(|e| e.def.task == Some(TaskKind::Collective))
            .unwrap()
            .def;
        a.call_entered(collective, (100, 9, 0), ApiArgs::default(), None);
        for (task, sqe_type) in [(1, 6), (2, 11), (3, 7)] {
            let mut s = submit(0, 5, task, 9, 1_000);
            s.info.sqe_type = sqe_type;
            a.submitted(&s);
        }
        a.soc_batch(&batch(
            0,
            2_000,
            &[
                (SocEdge::Begin, 5, 1, 10),
                (SocEdge::End, 5, 1, 12),
                (SocEdge::Begin, 5, 2, 12),
                (SocEdge::End, 5, 2, 30),
                (SocEdge::Begin, 5, 3, 30),
                (SocEdge::End, 5, 3, 31),
            ],
        ));
        a.finish(&[], &[], 1_000_000_000_000);
        let out = a.take_output();
        assert!(out.syncs.is_empty() && out.memcpys.is_empty(), "{out:?}");
        let spans: Vec<_> = out
            .hccl
            .iter()
            .map(|r| {
                (
                    r.task.task_id,
                    r.task.device_start_cnt,
                    r.task.device_end_cnt,
                )
            })
            .collect();
        assert_eq!(spans, [(1, Some(10), Some(31))]);
    }
}
