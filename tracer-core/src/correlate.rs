//! Joins ENTER and EXIT records into `api` rows, names kernels, and builds mstx markers.
//!
//! Correlation ids come from the kernel; this stage only pairs records by id, interprets
//! arguments through the catalog, and remembers what registration calls taught it
//! (kernel names by function handle or stub, mstx domain names, open ranges).
use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use tracer_common::{
    ApiEnter, ApiExit, EXIT_OUT_VALID, MAX_DEPTH, OutScan, RecordHeader, SCAN_ARGS, TaskInfo,
    TaskKey,
};

use tracer_catalog::{self as catalog, ChipLayout, ProbeDef, ProbeTable, Role, TaskKind, Text};
use tracer_schema::{
    rows::{ApiArgs, ApiRow, MarkerRow, OpPhase, OpRow},
    session::CorrelateStats,
    vocab::{MarkerKind, OpKind},
};

use crate::{
    activity::{Activity, ActivityOutput},
    clock::ClockReading,
    decode::{Record, text},
    operators::{Operators, Pointee},
    soclog::SocBatch,
};

/// Rows produced since the last [`Correlator::take_output`].
#[derive(Debug, Default)]
pub struct Output {
    pub api: Vec<ApiRow>,
    pub markers: Vec<MarkerRow>,
    pub ops: Vec<OpRow>,
    pub activity: ActivityOutput,
}

impl Output {
    /// Rows over all tables.
    pub fn len(&self) -> usize {
        let a = &self.activity;
        self.api.len()
            + self.markers.len()
            + self.ops.len()
            + a.kernels.len()
            + a.memcpys.len()
            + a.memsets.len()
            + a.syncs.len()
            + a.hccl.len()
            + a.memory.len()
            + a.critical.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What only the end of tracing knows.
#[derive(Debug, Default)]
pub struct FinalState {
    /// Submitted tasks still awaiting completion.
    pub missing_tasks: Vec<(TaskKey, TaskInfo)>,
    /// Kernel-side loss counters, indexed like `DropKind::ALL`.
    pub drops: Vec<u64>,
    pub now_ns: u64,
}

/// Names addresses inside traced processes: a kernel stub registered before tracing
/// began is named by the ELF symbol it points at. The agent reads `/proc` and ELF files;
/// a replay can answer from a recording, or not at all (`()`).
pub trait Symbolize {
    /// The function symbol at `addr` in process `pid`, if known.
    fn function_at(&mut self, pid: u32, addr: u64) -> Option<String>;

    /// The kernel (function) symbols of the device ELF that call `correlation_id` of process
    /// `pid` registered (`len` bytes at `data`); none when it cannot be read.
    fn binary_kernels(
        &mut self,
        pid: u32,
        correlation_id: u64,
        data: u64,
        len: u64,
    ) -> Vec<String> {
        let _ = (pid, correlation_id, data, len);
        Vec::new()
    }
}

impl Symbolize for () {
    fn function_at(&mut self, _: u32, _: u64) -> Option<String> {
        None
    }
}

/// Sees calls as they happen (the `--print` sink).
pub trait Live {
    fn entered(&mut self, def: &ProbeDef, enter: &ApiEnter);
    fn exited(&mut self, row: &ApiRow);
}

/// No live output.
impl Live for () {
    fn entered(&mut self, _: &ProbeDef, _: &ApiEnter) {}
    fn exited(&mut self, _: &ApiRow) {}
}

pub struct Correlator {
    /// What each probe id stands for (filled by the attacher as libraries are attached).
    probes: Arc<ProbeTable>,
    open: HashMap<u64, ApiEnter>,
    /// (pid, function handle or stub address) -> kernel name.
    kernels: HashMap<(u32, u64), String>,
    /// (pid, binary handle) -> its functions' names in registration order.
    binaries: HashMap<(u32, u64), Vec<String>>,
    /// (pid, binary handle, tiling key) -> kernel name, for binaries of rtRegisterAllKernel.
    keyed_kernels: HashMap<(u32, u64, u64), String>,
    /// (pid, mstx domain handle) -> domain name.
    mstx_domains: HashMap<(u32, u64), String>,
    /// (pid, mstx range id) -> the range, waiting for its end.
    ranges: HashMap<(u32, u64), MarkerRow>,
    /// What the arguments of returning first phases pointed at, until their EXIT.
    scans: HashMap<u64, OutScan>,
    /// First phases of operators, waiting for the second phases that run their executors.
    operators: Operators,
    /// Second phases in flight, by correlation id, with the first phase each took at its
    /// ENTER: the run consumes (and may free) its executor, whose address a call that
    /// returns before this one can already hold again.
    running_ops: HashMap<u64, OpPhase>,
    /// Processes found gone at the last [`Correlator::forget_exited`] sweep.
    gone_before: HashSet<u32>,
    symbolizer: Box<dyn Symbolize + Send>,
    activity: Activity,
    output: Output,
    stats: CorrelateStats,
}

/// A correlator that names no address it was not told about, of a 910B's tasks, whose probe
/// ids are those of the built-in catalog's exact entries ([`ProbeTable::builtin`]).
impl Default for Correlator {
    fn default() -> Self {
        Self::new(Box::new(()), catalog::DEFAULT_CHIP, ProbeTable::builtin())
    }
}

impl Correlator {
    /// A correlator of the tasks of `chip` (its SQE types and completion entries), whose
    /// records name functions by their ids in `probes`.
    pub fn new(
        symbolizer: Box<dyn Symbolize + Send>,
        chip: &'static ChipLayout,
        probes: Arc<ProbeTable>,
    ) -> Self {
        Self {
            probes,
            open: HashMap::new(),
            kernels: HashMap::new(),
            binaries: HashMap::new(),
            keyed_kernels: HashMap::new(),
            mstx_domains: HashMap::new(),
            ranges: HashMap::new(),
            scans: HashMap::new(),
            operators: Operators::default(),
            running_ops: HashMap::new(),
            gone_before: HashSet::new(),
            symbolizer,
            activity: Activity::new(chip),
            output: Output::default(),
            stats: CorrelateStats::default(),
        }
    }

    pub fn push(&mut self, record: &Record, live: &mut impl Live) {
        match record {
            Record::Enter(enter) => self.enter(enter, live),
            Record::Exit(exit) => self.exit(exit, live),
            Record::OutScan(scan) => {
                self.scans.insert(scan.correlation_id, *scan);
            }
            Record::ThreadExit(header) => self.thread_exit(header, live),
            Record::TaskComplete(done) => self.activity.completed(done),
            Record::TaskSubmit(submit) => self.activity.submitted(submit),
        }
    }

    pub fn clock_reading(&mut self, reading: ClockReading) {
        self.activity.clock_reading(reading);
    }

    /// Device task records read from the profiling channel.
    pub fn soc_batch(&mut self, batch: &SocBatch) {
        self.activity.soc_batch(batch);
    }

    /// `device`'s task times come from the profiling channel from `since_ns` on.
    pub fn soc_log_started(&mut self, device: u32, since_ns: u64) {
        self.activity.soc_log_started(device, since_ns);
    }

    /// `device`'s profiling channel could not be started, for `reason` (another profiler
    /// owns it): its task times come from what that profiler reads, from `since_ns` on.
    pub fn soc_log_passive(&mut self, device: u32, reason: &str, since_ns: u64) {
        self.activity.soc_log_passive(device, reason, since_ns);
    }

    /// Devices whose tasks were seen.
    pub fn devices(&self) -> Vec<u32> {
        self.activity.devices().collect()
    }

    pub fn take_output(&mut self) -> Output {
        self.activity.release();
        self.output.activity = self.activity.take_output();
        std::mem::take(&mut self.output)
    }

    pub fn activity(&self) -> &Activity {
        &self.activity
    }

    /// Tasks of processes that exited before completing them.
    pub fn tasks_lost(&mut self, lost: &[(TaskKey, TaskInfo)], now_ns: u64) {
        self.activity.tasks_lost(lost, now_ns);
    }

    /// Forgets what was kept to name the later calls of processes that are gone (`gone`
    /// says whether one is): their kernel names, device binaries, mstx domains, operator
    /// first phases, communicators and allocations. Only processes found gone at two
    /// sweeps in a row are forgotten, so records of theirs still in flight are named. A
    /// system-wide session sees processes come and go for days.
    pub fn forget_exited(&mut self, gone: impl Fn(u32) -> bool) {
        let mut pids: HashSet<u32> = HashSet::new();
        pids.extend(self.kernels.keys().map(|k| k.0));
        pids.extend(self.binaries.keys().map(|k| k.0));
        pids.extend(self.keyed_kernels.keys().map(|k| k.0));
        pids.extend(self.mstx_domains.keys().map(|k| k.0));
        pids.extend(self.operators.pids());
        pids.extend(self.activity.pids());
        let gone_now: HashSet<u32> = pids.into_iter().filter(|&p| gone(p)).collect();
        let forget: HashSet<u32> = gone_now.intersection(&self.gone_before).copied().collect();
        if !forget.is_empty() {
            self.kernels.retain(|k, _| !forget.contains(&k.0));
            self.binaries.retain(|k, _| !forget.contains(&k.0));
            self.keyed_kernels.retain(|k, _| !forget.contains(&k.0));
            self.mstx_domains.retain(|k, _| !forget.contains(&k.0));
            self.operators.forget_processes(&forget);
            self.activity.forget_processes(&forget);
        }
        self.gone_before = &gone_now - &forget;
    }

    pub fn stats(&self) -> CorrelateStats {
        self.stats
    }

    /// Tracing is stopping: calls and ranges still open become incomplete rows, tasks that
    /// never completed and lost records become critical events.
    pub fn finish(&mut self, live: &mut impl Live, end: &FinalState) {
        let open: Vec<u64> = self.open.keys().copied().collect();
        for id in open {
            self.close_incomplete(id, live);
        }
        let ranges = std::mem::take(&mut self.ranges);
        self.output.markers.extend(ranges.into_values());
        self.activity
            .finish(&end.missing_tasks, &end.drops, end.now_ns);
    }

    fn enter(&mut self, enter: &ApiEnter, live: &mut impl Live) {
        let Some(def) = self.probes.get(enter.header.probe) else {
            self.stats.unknown_probes += 1;
            return;
        };
        live.entered(def, enter);
        let args = def.decode_args(&enter.args, None, None);
        let op = operator_name(def, enter, &args);
        let (pid, id, ts) = (enter.header.pid, enter.correlation_id, enter.header.ts_ns);
        if def.role == Role::OpLaunch
            && let Some(executor) = args.handle.filter(|&h| h != 0)
            && let Some(phase) = self.operators.ran(pid, executor, args.bytes.unwrap_or(0))
        {
            self.running_ops.insert(id, phase);
        }
        if enter.header.depth == 0 && def.task.is_some() {
            let mut args = args;
            args.kernel_name = self.kernel_name_at_enter(def, enter, args.handle.unwrap_or(0));
            self.activity.call_entered(def, (pid, id, ts), args, op);
        } else if enter.header.depth > 0 {
            let outermost = self.outermost_from(enter.parent_correlation_id);
            if let Some(name) = op {
                self.activity.op_entered(outermost, ts, id, name);
            }
            if def.task == Some(TaskKind::Kernel) && !def.role.is_operator_call() {
                let name = self.kernel_name_at_enter(def, enter, args.handle.unwrap_or(0));
                self.activity.launch_entered(outermost, ts, name);
            }
        }
        self.open.insert(enter.correlation_id, *enter);
    }

    /// The kernel a launch runs, as known when it enters.
    fn kernel_name_at_enter(
        &mut self,
        def: &ProbeDef,
        enter: &ApiEnter,
        handle: u64,
    ) -> Option<String> {
        let pid = enter.header.pid;
        let captured =
            (!text(enter).is_empty()).then(|| String::from_utf8_lossy(text(enter)).into_owned());
        match def.role {
            Role::LaunchByHandle => self.kernels.get(&(pid, handle)).cloned().or(captured),
            Role::LaunchByStub => self.stub_name(pid, handle),
            Role::LaunchByTilingKey => self.tiling_key_name(pid, handle, enter.args[1]),
            _ => captured.filter(|_| matches!(def.text, Some((_, Text::KernelName)))),
        }
    }

    /// The outermost call enclosing `row` (itself when it is outermost); its ancestors are
    /// still open when it returns.
    fn outermost(&self, row: &ApiRow) -> u64 {
        row.parent_correlation_id
            .map_or(row.correlation_id, |parent| self.outermost_from(parent))
    }

    /// The outermost call enclosing open call `id` (itself when it is outermost). The walk
    /// stops after [`MAX_DEPTH`] steps, as deep as the BPF side nests calls: corrupt records
    /// could link parents in a cycle.
    fn outermost_from(&self, mut id: u64) -> u64 {
        for _ in 0..MAX_DEPTH {
            match self
                .open
                .get(&id)
                .map(|e| e.parent_correlation_id)
                .filter(|&p| p != 0)
            {
                Some(parent) => id = parent,
                None => break,
            }
        }
        id
    }

    fn exit(&mut self, exit: &ApiExit, live: &mut impl Live) {
        let Some(enter) = self.open.remove(&exit.correlation_id) else {
            self.stats.exits_without_enter += 1;
            return;
        };
        let Some(def) = self.probes.get(enter.header.probe) else {
            self.stats.unknown_probes += 1;
            return;
        };
        let out = (exit.flags & EXIT_OUT_VALID != 0).then_some(exit.out_value);
        let mut row = base_row(def, &enter);
        row.end_ns = Some(exit.header.ts_ns);
        row.return_value = def.return_value(exit.ret);
        row.args = def.decode_args(&enter.args, out, Some(exit.ret));
        self.apply_text(def, &enter, &mut row);
        self.apply_role(def, &enter, &mut row);
        self.operator(def, &enter, &row);
        self.stats.calls += 1;
        self.activity.call_returned(def, &row, self.outermost(&row));
        live.exited(&row);
        self.output.api.push(row);
    }

    /// What operator roles do at return: a first phase is remembered by what its arguments
    /// pointed at, executors are marked repeatable or gone, and an operator call is a row of
    /// table `op` (with the first phase its ENTER found by the executor it runs).
    fn operator(&mut self, def: &'static ProbeDef, enter: &ApiEnter, row: &ApiRow) {
        let (pid, ok) = (row.pid, row.return_value == Some(0));
        let scan = self.scans.remove(&row.correlation_id);
        let handle = row.args.handle.unwrap_or(0);
        let kind = match def.role {
            Role::OpPrepare => {
                if let (true, Some(scan), Some(end_ns)) = (ok, scan, row.end_ns) {
                    let phase = OpPhase {
                        correlation_id: row.correlation_id,
                        api_name: def.symbol,
                        tid: row.tid,
                        start_ns: row.start_ns,
                        end_ns,
                    };
                    self.operators.prepared(pid, phase, &scanned_values(&scan));
                }
                return;
            }
            Role::OpExecutorRepeatable if ok => {
                self.operators.set_repeatable(pid, handle);
                return;
            }
            Role::OpExecutorDestroy if ok => {
                self.operators.destroyed(pid, handle);
                return;
            }
            Role::OpExecutorCached => {
                self.operators.cached(pid, handle);
                return;
            }
            Role::OpLaunch => OpKind::Aclnn,
            Role::OpCompileExecute => OpKind::Aclop,
            Role::OpModelExecute => OpKind::Model,
            _ => return,
        };
        let Some(name) = operator_name(def, enter, &row.args) else {
            return;
        };
        if row.parent_correlation_id.is_some()
            && let Some(end_ns) = row.end_ns
        {
            let outermost = self.outermost(row);
            self.activity
                .op_returned(outermost, row.correlation_id, end_ns);
        }
        let prepare = self.running_ops.remove(&row.correlation_id);
        let aclnn = kind == OpKind::Aclnn;
        self.output.ops.push(OpRow {
            correlation_id: row.correlation_id,
            name,
            kind,
            api_name: def.symbol,
            library: def.library,
            pid,
            tid: row.tid,
            start_ns: row.start_ns,
            end_ns: row.end_ns,
            prepare,
            workspace_bytes: row.args.bytes.filter(|_| aclnn),
            executor: row.args.handle.filter(|_| aclnn),
            stream: row.args.stream,
            return_value: row.return_value,
        });
    }

    fn thread_exit(&mut self, header: &RecordHeader, live: &mut impl Live) {
        let orphaned: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, e)| e.header.tid == header.tid)
            .map(|(&id, _)| id)
            .collect();
        for id in orphaned {
            self.close_incomplete(id, live);
        }
    }

    fn close_incomplete(&mut self, id: u64, live: &mut impl Live) {
        let Some(enter) = self.open.remove(&id) else {
            return;
        };
        let Some(def) = self.probes.get(enter.header.probe) else {
            return;
        };
        let mut row = base_row(def, &enter);
        row.incomplete = true;
        row.args = def.decode_args(&enter.args, None, None);
        self.apply_text(def, &enter, &mut row);
        self.apply_role(def, &enter, &mut row);
        self.operator(def, &enter, &row);
        self.stats.incomplete_calls += 1;
        live.exited(&row);
        self.output.api.push(row);
    }

    fn apply_text(&mut self, def: &ProbeDef, enter: &ApiEnter, row: &mut ApiRow) {
        let Some((_, kind)) = def.text else { return };
        let bytes = text(enter);
        if bytes.is_empty() {
            return;
        }
        let value = || String::from_utf8_lossy(bytes).into_owned();
        match kind {
            Text::KernelName => row.args.kernel_name = Some(value()),
            Text::Message => row.args.message = Some(value()),
            // Bytes for the role, not text; an operator type names the call's `op` row.
            Text::DevBinary | Text::OpType => {}
        }
    }

    fn apply_role(&mut self, def: &ProbeDef, enter: &ApiEnter, row: &mut ApiRow) {
        let pid = row.pid;
        let ok = row.return_value.is_none_or(|r| r == 0);
        let handle = row.args.handle.unwrap_or(0);
        match def.role {
            // Memory and communicator roles are device activity, handled at return.
            Role::Plain | Role::Alloc(_) | Role::Free(_) | Role::CommInit => {}
            // Operator calls and their executors: `Correlator::operator`.
            Role::OpPrepare
            | Role::OpLaunch
            | Role::OpCompileExecute
            | Role::OpModelExecute
            | Role::OpExecutorRepeatable
            | Role::OpExecutorDestroy
            | Role::OpExecutorCached => {}
            Role::RegisterStub | Role::RegisterFunction => {
                if let (true, Some(name)) = (ok && handle != 0, &row.args.kernel_name) {
                    self.kernels.insert((pid, handle), name.clone());
                    if def.role == Role::RegisterStub {
                        let binary = enter.args[0];
                        self.binaries
                            .entry((pid, binary))
                            .or_default()
                            .push(name.clone());
                    }
                }
            }
            Role::RegisterAllKernels => {
                if let (true, Some((data, len))) = (ok && handle != 0, dev_binary(enter)) {
                    let call = enter.correlation_id;
                    for name in self.symbolizer.binary_kernels(pid, call, data, len) {
                        if let Some(key) = tiling_key_of(&name) {
                            self.keyed_kernels.insert((pid, handle, key), name);
                        }
                    }
                }
            }
            // Registration seen while tracing wins; else the name read through the handle.
            Role::LaunchByHandle => {
                if let Some(name) = self.kernels.get(&(pid, handle)) {
                    row.args.kernel_name = Some(name.clone());
                }
            }
            Role::LaunchByStub => row.args.kernel_name = self.stub_name(pid, handle),
            Role::LaunchByTilingKey => {
                row.args.kernel_name = self.tiling_key_name(pid, handle, enter.args[1])
            }
            Role::DomainCreate => {
                if let (true, Some(name)) = (handle != 0, &row.args.message) {
                    self.mstx_domains.insert((pid, handle), name.clone());
                }
            }
            Role::MarkA | Role::DomainMark => self.mark(def, row),
            Role::RangeStartA | Role::DomainRangeStart => self.range_start(def, row),
            Role::RangeEnd | Role::DomainRangeEnd => self.range_end(enter, row),
        }
    }

    /// A stub registered while tracing is named by `rtFunctionRegister`; one registered
    /// before attach is named by the ELF symbol it points at.
    fn stub_name(&mut self, pid: u32, stub: u64) -> Option<String> {
        if let Some(name) = self.kernels.get(&(pid, stub)) {
            return Some(name.clone());
        }
        let name = self.symbolizer.function_at(pid, stub)?;
        self.kernels.insert((pid, stub), name.clone());
        Some(name)
    }

    fn tiling_key_name(&self, pid: u32, binary: u64, tiling_key: u64) -> Option<String> {
        if let Some(name) = self.keyed_kernels.get(&(pid, binary, tiling_key)) {
            return Some(name.clone());
        }
        let functions = self.binaries.get(&(pid, binary))?;
        functions.get(usize::try_from(tiling_key).ok()?).cloned()
    }

    fn domain_of(&self, def: &ProbeDef, row: &ApiRow) -> Option<String> {
        matches!(def.role, Role::DomainMark | Role::DomainRangeStart)
            .then(|| self.mstx_domains.get(&(row.pid, row.args.handle?)).cloned())
            .flatten()
    }

    fn mark(&mut self, def: &ProbeDef, row: &ApiRow) {
        let marker = MarkerRow {
            kind: MarkerKind::Mark,
            end_ns: Some(row.start_ns),
            ..self.marker(def, row)
        };
        self.output.markers.push(marker);
    }

    fn range_start(&mut self, def: &ProbeDef, row: &ApiRow) {
        let Some(id) = row.args.range_id.filter(|&id| id != 0) else {
            return;
        };
        let marker = MarkerRow {
            kind: MarkerKind::Range,
            range_id: Some(id),
            ..self.marker(def, row)
        };
        self.ranges.insert((row.pid, id), marker);
    }

    /// What marks and ranges take from the mstx call that made them.
    fn marker(&self, def: &ProbeDef, row: &ApiRow) -> MarkerRow {
        MarkerRow {
            message: row.args.message.clone().unwrap_or_default(),
            domain: self.domain_of(def, row),
            pid: row.pid,
            tid: row.tid,
            start_ns: row.start_ns,
            correlation_id: row.correlation_id,
            stream: row.args.stream,
            ..Default::default()
        }
    }

    fn range_end(&mut self, enter: &ApiEnter, row: &ApiRow) {
        let Some(id) = row.args.range_id else { return };
        if let Some(mut marker) = self.ranges.remove(&(row.pid, id)) {
            marker.end_ns = Some(enter.header.ts_ns);
            marker.end_tid = Some(row.tid);
            self.output.markers.push(marker);
        }
    }
}

/// The operator an operator call runs (`aclnnAdd` -> `Add`), kept for the session.
fn operator_name(def: &ProbeDef, enter: &ApiEnter, args: &ApiArgs) -> Option<&'static str> {
    if !def.role.is_operator_call() {
        return None;
    }
    def.operator_name(text(enter), args)
        .map(|name| catalog::intern(&name))
}

/// What each argument of an [`OutScan`] pointed at, where it could be read.
fn scanned_values(scan: &OutScan) -> [Option<Pointee>; SCAN_ARGS] {
    std::array::from_fn(|i| {
        (scan.valid & (1 << i) != 0).then_some(Pointee {
            value: scan.values[i],
            written: scan.written & (1 << i) != 0,
        })
    })
}

fn base_row(def: &ProbeDef, enter: &ApiEnter) -> ApiRow {
    ApiRow {
        correlation_id: enter.correlation_id,
        parent_correlation_id: (enter.parent_correlation_id != 0)
            .then_some(enter.parent_correlation_id),
        domain: def.domain.name(),
        name: def.symbol,
        mspti_domain: def.mspti.map(|(d, _)| d.name()),
        cbid: def.mspti.map(|(_, id)| id),
        library: def.library,
        pid: enter.header.pid,
        tid: enter.header.tid,
        depth: enter.header.depth,
        start_ns: enter.header.ts_ns,
        ..Default::default()
    }
}

/// The (data, length) of the `rtDevBinary_t` captured at ENTER (`Text::DevBinary`).
fn dev_binary(enter: &ApiEnter) -> Option<(u64, u64)> {
    let raw = text(enter);
    let word = |at: usize| Some(u64::from_le_bytes(raw.get(at..at + 8)?.try_into().ok()?));
    Some((word(8)?, word(16)?))
}

/// The tiling key a kernel name ends in (`_<digits>`), as the runtime reads it.
fn tiling_key_of(name: &str) -> Option<u64> {
    let (_, digits) = name.rsplit_once('_')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_common::{MAX_ARGS, RecordKind, TEXT_LEN};

    fn probe(name: &str) -> u16 {
        ProbeTable::builtin().find(name).unwrap()
    }

    fn enter(probe: &str, id: u64, parent: u64, ts: u64, args: [u64; MAX_ARGS], s: &str) -> Record {
        let mut text = [0u8; TEXT_LEN];
        text[..s.len()].copy_from_slice(s.as_bytes());
        Record::Enter(ApiEnter {
            header: RecordHeader::new(RecordKind::ApiEnter, self::probe(probe), 0, 10, 11, ts),
            correlation_id: id,
            parent_correlation_id: parent,
            args,
            text_len: s.len() as u32,
            _pad: 0,
            text,
        })
    }

    fn exit(probe: &str, id: u64, ts: u64, ret: u64, out: Option<u64>) -> Record {
        Record::Exit(ApiExit {
            header: RecordHeader::new(RecordKind::ApiExit, self::probe(probe), 0, 10, 11, ts),
            correlation_id: id,
            ret,
            out_value: out.unwrap_or(0),
            flags: if out.is_some() { EXIT_OUT_VALID } else { 0 },
            _pad: 0,
        })
    }

    #[test]
    fn nested_calls_and_kernel_names() {
        let mut c = Correlator::default();
        let a = [0; MAX_ARGS];
        for r in [
            enter("aclrtBinaryGetFunction", 1, 0, 100, a, "matmul_kernel"),
            exit("aclrtBinaryGetFunction", 1, 110, 0, Some(0xf00)),
            enter(
                "aclrtLaunchKernel",
                2,
                0,
                200,
                [0xf00, 8, 0, 0, 0x5, 0, 0, 0],
                "",
            ),
            enter(
                "rtLaunchKernelByFuncHandleV3",
                3,
                2,
                210,
                [0xf00, 8, 0, 0x5, 0, 0, 0, 0],
                "",
            ),
            exit("rtLaunchKernelByFuncHandleV3", 3, 220, 0, None),
            exit("aclrtLaunchKernel", 2, 230, 0, None),
        ] {
            c.push(&r, &mut ());
        }
        let out = c.take_output();
        assert_eq!(out.api.len(), 3);
        let inner = &out.api[1];
        assert_eq!(inner.name, "rtLaunchKernelByFuncHandleV3");
        assert_eq!(inner.parent_correlation_id, Some(2));
        assert_eq!(inner.args.kernel_name.as_deref(), Some("matmul_kernel"));
        assert_eq!(inner.args.stream, Some(0x5));
        let outer = &out.api[2];
        assert_eq!((outer.start_ns, outer.end_ns), (200, Some(230)));
        assert_eq!(outer.args.block_dim, Some(8));
        assert_eq!(outer.args.kernel_name.as_deref(), Some("matmul_kernel"));
    }

    #[test]
    fn mstx_ranges_and_incomplete_calls() {
        let mut c = Correlator::default();
        let a = [0; MAX_ARGS];
        for r in [
            enter("mstxRangeStartA", 1, 0, 10, a, "step 1"),
            exit("mstxRangeStartA", 1, 11, 77, None),
            enter("mstxMarkA", 2, 0, 20, a, "here"),
            exit("mstxMarkA", 2, 21, 0, None),
            enter("mstxRangeEnd", 3, 0, 30, [77, 0, 0, 0, 0, 0, 0, 0], ""),
            exit("mstxRangeEnd", 3, 31, 0, None),
            enter("aclrtSynchronizeStream", 4, 0, 40, a, ""),
        ] {
            c.push(&r, &mut ());
        }
        c.finish(&mut (), &FinalState::default());
        let out = c.take_output();
        assert_eq!(out.markers.len(), 2);
        let range = out
            .markers
            .iter()
            .find(|m| m.kind == MarkerKind::Range)
            .unwrap();
        assert_eq!(
            (range.start_ns, range.end_ns, range.range_id),
            (10, Some(30), Some(77))
        );
        assert_eq!(range.message, "step 1");
        let open = out
            .api
            .iter()
            .find(|r| r.name == "aclrtSynchronizeStream")
            .unwrap();
        assert!(open.incomplete && open.end_ns.is_none());
        assert_eq!(c.stats().incomplete_calls, 1);
    }

    #[test]
    fn what_names_the_calls_of_a_gone_process_is_forgotten_at_the_second_sweep() {
        let mut c = Correlator::default();
        c.kernels.insert((7, 0x10), "gone_kernel".into());
        c.kernels.insert((8, 0x10), "live_kernel".into());
        c.mstx_domains.insert((7, 0x20), "domain".into());
        let gone = |pid: u32| pid == 7;
        c.forget_exited(gone);
        assert!(
            c.kernels.contains_key(&(7, 0x10)),
            "kept at the first sweep: records may be in flight"
        );
        c.forget_exited(gone);
        assert!(!c.kernels.contains_key(&(7, 0x10)) && c.mstx_domains.is_empty());
        assert!(
            c.kernels.contains_key(&(8, 0x10)),
            "a live process keeps its names"
        );
        assert!(c.gone_before.is_empty());
    }
}
