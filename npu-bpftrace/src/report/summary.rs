//! The report's figures, aggregated in Rust from a [`Dataset`]'s columns.
//!
//! Every field name here is a JSON key of `report --format json`: keep them stable.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::Result;
use serde::Serialize;

use tracer_catalog::{self as catalog, Ret};
use tracer_schema::{
    dataset::{Dataset, Table},
    rows::bandwidth_gbps,
    tables::TABLES,
};

/// Everything `npu-bpftrace report` prints, one field per section.
#[derive(Debug, Serialize)]
pub struct Report {
    pub header: Header,
    pub operators: Vec<OperatorStat>,
    pub kernels: Vec<KernelStat>,
    pub api: Vec<ApiStat>,
    pub memcpy: Vec<MemcpyStat>,
    pub hccl: Vec<HcclStat>,
    pub markers: Vec<MarkerStat>,
    pub health: Health,
}

#[derive(Debug, Serialize)]
pub struct Header {
    pub dir: String,
    pub hosts: Vec<String>,
    /// Distinct (host, pid) in any table.
    pub processes: usize,
    /// First to last timestamp, on the host with the longest span: hosts' CLOCK_MONOTONIC
    /// clocks are unrelated, so spans are only measured within one host.
    pub duration_ns: Option<u64>,
    /// Rows per table; 0 for a table that is missing or empty.
    pub rows: BTreeMap<&'static str, u64>,
}

/// One operator (table `op`, and the device rows of its calls).
#[derive(Debug, Serialize)]
pub struct OperatorStat {
    pub name: String,
    /// `aclnn`, `aclop` or `model`.
    pub kind: String,
    pub count: u64,
    /// Calls whose first phase ran (the others reused a cached or repeatable executor).
    pub first_phases: u64,
    /// Host time of both phases, over calls that returned.
    pub host_ns: u64,
    pub mean_host_ns: Option<u64>,
    /// Device tasks launched in its calls, and their device time.
    pub tasks: u64,
    pub device_ns: u64,
    /// Percent of the device time of all operators.
    pub share_pct: f64,
    /// Calls that returned a non-zero status.
    pub errors: u64,
}

/// One kernel name: durations are device time of the tasks that completed.
#[derive(Debug, Serialize)]
pub struct KernelStat {
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub mean_ns: Option<u64>,
    pub min_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// Percent of the device time of all kernels.
    pub share_pct: f64,
    /// Tasks the device reported a non-zero status for.
    pub errors: u64,
}

/// One API function: durations are host time of the calls that returned.
#[derive(Debug, Serialize)]
pub struct ApiStat {
    pub domain: String,
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub mean_ns: Option<u64>,
    /// Calls that returned a non-zero status.
    pub errors: u64,
    /// Calls that had not returned when their thread, process or the trace ended.
    pub incomplete: u64,
}

/// One copy direction (`HTOD`, `DTOH`, ...).
#[derive(Debug, Serialize)]
pub struct MemcpyStat {
    pub copy_kind: String,
    pub count: u64,
    pub bytes: u64,
    pub total_ns: u64,
    /// Bytes of completed copies / their device time, GB/s (10^9 bytes per second).
    pub bandwidth_gbps: Option<f64>,
}

/// One HCCL operation on one communicator. Rows of the `hccl` table are per rank, so
/// `count` counts rank-operations and `collectives` the operations they form together.
#[derive(Debug, Serialize)]
pub struct HcclStat {
    pub name: String,
    pub comm_name: Option<String>,
    pub count: u64,
    pub collectives: u64,
    /// Bytes each rank contributed, summed over ranks.
    pub bytes: u64,
    /// Device time summed over ranks.
    pub total_ns: u64,
    /// Mean device time of one rank's part.
    pub mean_ns: Option<u64>,
    /// Per-rank bytes / per-rank device time, GB/s.
    pub bandwidth_gbps: Option<f64>,
    /// Spread of the ranks' device start times of one collective (max - min): a straggler
    /// shows as skew, the others' wait for it as device time.
    pub skew_mean_ns: Option<u64>,
    pub skew_max_ns: Option<u64>,
}

/// One mstx message: marks are instants, ranges have durations.
#[derive(Debug, Serialize)]
pub struct MarkerStat {
    pub message: String,
    pub domain: Option<String>,
    /// `mark` or `range`.
    pub kind: String,
    pub count: u64,
    /// Null for marks.
    pub total_ns: Option<u64>,
    pub mean_ns: Option<u64>,
    /// Ranges that never ended while traced.
    pub open: u64,
}

/// Whether the trace can be trusted: critical events, drops, clean shutdown.
#[derive(Debug, Serialize)]
pub struct Health {
    pub events: Vec<EventStat>,
    /// `session.json`'s drop counters, by kind.
    pub drops: BTreeMap<String, u64>,
    pub total_drops: u64,
    /// `session.json`'s `complete`; null without a session.json.
    pub complete: Option<bool>,
    pub clean: bool,
    pub verdict: String,
}

#[derive(Debug, Serialize)]
pub struct EventStat {
    pub kind: String,
    pub severity: String,
    /// Occurrences (the sum of the rows' `count`).
    pub count: u64,
}

pub fn summarize(ds: &Dataset) -> Result<Report> {
    Ok(Report {
        header: header(ds)?,
        operators: operators(ds)?,
        kernels: kernels(ds.table("kernel"))?,
        api: api(ds.table("api"))?,
        memcpy: memcpy(ds.table("memcpy"))?,
        hccl: hccl(ds.table("hccl"))?,
        markers: markers(ds.table("marker"))?,
        health: health(ds)?,
    })
}

/// Count, total, min and max of durations; rows without one count but are not timed.
#[derive(Debug, Default, Clone, Copy)]
struct Times {
    count: u64,
    timed: u64,
    total: u64,
    min: Option<u64>,
    max: Option<u64>,
}

impl Times {
    fn add(&mut self, duration: Option<u64>) {
        self.count += 1;
        if let Some(d) = duration {
            self.timed += 1;
            self.total += d;
            self.min = Some(self.min.map_or(d, |m| m.min(d)));
            self.max = Some(self.max.map_or(d, |m| m.max(d)));
        }
    }

    fn mean(&self) -> Option<u64> {
        (self.timed > 0).then(|| self.total / self.timed)
    }
}

fn header(ds: &Dataset) -> Result<Header> {
    let mut processes = BTreeSet::new();
    let mut spans: HashMap<&str, (u64, u64)> = HashMap::new();
    for table in ds.tables() {
        let hosts = table.hosts();
        for (host, pid) in hosts.iter().zip(table.u64s("pid")?) {
            if let Some(pid) = pid {
                processes.insert((*host, pid));
            }
        }
        // Critical events carry the time they were noticed, not activity.
        if table.name == "critical_event" {
            continue;
        }
        for column in ["start_ns", "end_ns"] {
            for (host, t) in hosts.iter().zip(table.u64s(column)?) {
                if let Some(t) = t {
                    let span = spans.entry(host).or_insert((t, t));
                    *span = (span.0.min(t), span.1.max(t));
                }
            }
        }
    }
    Ok(Header {
        dir: ds.dir.display().to_string(),
        hosts: ds.hosts.iter().cloned().collect(),
        processes: processes.len(),
        duration_ns: spans.values().map(|(first, last)| last - first).max(),
        rows: TABLES
            .iter()
            .map(|&t| (t, ds.table(t).rows() as u64))
            .collect(),
    })
}

/// Tables of device tasks, whose rows carry the operator call they ran in.
const DEVICE_TABLES: [&str; 5] = ["kernel", "memcpy", "memset", "sync", "hccl"];

fn operators(ds: &Dataset) -> Result<Vec<OperatorStat>> {
    #[derive(Default)]
    struct Acc {
        kind: String,
        host: Times,
        first_phases: u64,
        errors: u64,
        tasks: u64,
        device_ns: u64,
    }
    let t = ds.table("op");
    let mut groups: BTreeMap<String, Acc> = BTreeMap::new();
    let (names, kinds) = (t.strings("name")?, t.strings("kind")?);
    let (host, prepared, returns) = (
        t.u64s("host_ns")?,
        t.u64s("prepare_correlation_id")?,
        t.i64s("return_value")?,
    );
    for (((name, kind), (host, prepared)), ret) in names
        .into_iter()
        .zip(kinds)
        .zip(host.into_iter().zip(prepared))
        .zip(returns)
    {
        let acc = groups.entry(name.unwrap_or_default()).or_default();
        acc.kind = kind.unwrap_or_default();
        acc.host.add(host);
        acc.first_phases += u64::from(prepared.is_some());
        acc.errors += u64::from(ret.is_some_and(|r| r != 0));
    }
    for table in DEVICE_TABLES.map(|name| ds.table(name)) {
        // Datasets of schema 1 before the operator layer have no operator columns.
        let Ok(names) = table.strings("op_name") else {
            continue;
        };
        for (name, d) in names.into_iter().zip(table.durations()?) {
            if let Some(acc) = name.and_then(|n| groups.get_mut(&n)) {
                acc.tasks += 1;
                acc.device_ns += d.unwrap_or(0);
            }
        }
    }
    let all: u64 = groups.values().map(|a| a.device_ns).sum();
    let mut stats: Vec<OperatorStat> = groups
        .into_iter()
        .map(|(name, a)| OperatorStat {
            name,
            kind: a.kind,
            count: a.host.count,
            first_phases: a.first_phases,
            host_ns: a.host.total,
            mean_host_ns: a.host.mean(),
            tasks: a.tasks,
            device_ns: a.device_ns,
            share_pct: if all == 0 {
                0.0
            } else {
                100.0 * a.device_ns as f64 / all as f64
            },
            errors: a.errors,
        })
        .collect();
    stats.sort_by(|a, b| {
        (b.device_ns, b.host_ns)
            .cmp(&(a.device_ns, a.host_ns))
            .then(a.name.cmp(&b.name))
    });
    Ok(stats)
}

fn kernels(t: &Table) -> Result<Vec<KernelStat>> {
    let mut groups: BTreeMap<String, (Times, u64)> = BTreeMap::new();
    let (names, durations, status) = (t.strings("name")?, t.durations()?, t.u64s("status")?);
    for ((name, d), status) in names.into_iter().zip(durations).zip(status) {
        let name = name.unwrap_or_else(|| "<unknown>".to_owned());
        let (times, errors) = groups.entry(name).or_default();
        times.add(d);
        *errors += u64::from(status.is_some_and(|s| s != 0));
    }
    let all: u64 = groups.values().map(|(t, _)| t.total).sum();
    let mut stats: Vec<KernelStat> = groups
        .into_iter()
        .map(|(name, (times, errors))| KernelStat {
            name,
            count: times.count,
            total_ns: times.total,
            mean_ns: times.mean(),
            min_ns: times.min,
            max_ns: times.max,
            share_pct: if all == 0 {
                0.0
            } else {
                100.0 * times.total as f64 / all as f64
            },
            errors,
        })
        .collect();
    stats.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    Ok(stats)
}

/// Whether `name` returns a status code; mstx range starts and domain creation return ids
/// and handles, which are not errors when non-zero. Unknown functions are assumed to.
fn returns_status(name: &str) -> bool {
    catalog::Catalog::builtin()
        .find(name)
        .is_none_or(|def| def.ret == Ret::Status)
}

fn api(t: &Table) -> Result<Vec<ApiStat>> {
    #[derive(Default)]
    struct Acc {
        times: Times,
        errors: u64,
        incomplete: u64,
    }
    let mut groups: BTreeMap<(String, String), Acc> = BTreeMap::new();
    let (domains, names) = (t.strings("domain")?, t.strings("name")?);
    let (durations, returns) = (t.durations()?, t.i64s("return_value")?);
    let incomplete = t.bools("incomplete")?;
    let rows = domains.into_iter().zip(names).zip(durations);
    for (((domain, name), d), (ret, incomplete)) in rows.zip(returns.into_iter().zip(incomplete)) {
        let key = (domain.unwrap_or_default(), name.unwrap_or_default());
        let acc = groups.entry(key).or_default();
        acc.times.add(d);
        acc.errors += u64::from(ret.is_some_and(|r| r != 0));
        acc.incomplete += u64::from(incomplete == Some(true));
    }
    let mut stats: Vec<ApiStat> = groups
        .into_iter()
        .map(|((domain, name), acc)| ApiStat {
            errors: if returns_status(&name) { acc.errors } else { 0 },
            domain,
            name,
            count: acc.times.count,
            total_ns: acc.times.total,
            mean_ns: acc.times.mean(),
            incomplete: acc.incomplete,
        })
        .collect();
    stats.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    Ok(stats)
}

fn memcpy(t: &Table) -> Result<Vec<MemcpyStat>> {
    // (times, all bytes, bytes of the timed copies)
    let mut groups: BTreeMap<String, (Times, u64, u64)> = BTreeMap::new();
    let (kinds, bytes, durations) = (t.strings("copy_kind")?, t.u64s("bytes")?, t.durations()?);
    for ((kind, bytes), d) in kinds.into_iter().zip(bytes).zip(durations) {
        let (times, all, timed) = groups.entry(kind.unwrap_or_default()).or_default();
        let bytes = bytes.unwrap_or(0);
        times.add(d);
        *all += bytes;
        *timed += if d.is_some() { bytes } else { 0 };
    }
    let mut stats: Vec<MemcpyStat> = groups
        .into_iter()
        .map(|(copy_kind, (times, bytes, timed))| MemcpyStat {
            copy_kind,
            count: times.count,
            bytes,
            total_ns: times.total,
            bandwidth_gbps: bandwidth_gbps(timed, times.total),
        })
        .collect();
    stats.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.copy_kind.cmp(&b.copy_kind)));
    Ok(stats)
}

/// What identifies one collective across its ranks: the job-wide communicator name and the
/// sequence number. Without a name, only the rows of one process can be matched.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum CollectiveKey {
    Named(String, u64),
    Local(String, u64, u64, u64),
}

fn hccl(t: &Table) -> Result<Vec<HcclStat>> {
    #[derive(Default)]
    struct Acc {
        times: Times,
        bytes: u64,
        timed_bytes: u64,
        /// Earliest and latest device start of each collective's ranks.
        starts: BTreeMap<CollectiveKey, (u64, u64)>,
        collectives: BTreeSet<CollectiveKey>,
    }
    let mut groups: BTreeMap<(String, Option<String>), Acc> = BTreeMap::new();
    let (names, comm_names) = (t.strings("name")?, t.strings("comm_name")?);
    let (seqs, comms, pids) = (t.u64s("seq")?, t.u64s("comm")?, t.u64s("pid")?);
    let (bytes, starts, durations) = (t.u64s("bytes")?, t.u64s("start_ns")?, t.durations()?);
    for (i, host) in t.hosts().into_iter().enumerate() {
        let seq = seqs[i].unwrap_or(0);
        let key = match &comm_names[i] {
            Some(comm) => CollectiveKey::Named(comm.clone(), seq),
            None => CollectiveKey::Local(
                host.to_owned(),
                pids[i].unwrap_or(0),
                comms[i].unwrap_or(0),
                seq,
            ),
        };
        let group = (names[i].clone().unwrap_or_default(), comm_names[i].clone());
        let acc = groups.entry(group).or_default();
        let b = bytes[i].unwrap_or(0);
        acc.times.add(durations[i]);
        acc.bytes += b;
        acc.timed_bytes += if durations[i].is_some() { b } else { 0 };
        if let Some(start) = starts[i] {
            let span = acc.starts.entry(key.clone()).or_insert((start, start));
            *span = (span.0.min(start), span.1.max(start));
        }
        acc.collectives.insert(key);
    }
    let mut stats: Vec<HcclStat> = groups
        .into_iter()
        .map(|((name, comm_name), acc)| {
            let skews: Vec<u64> = acc.starts.values().map(|(lo, hi)| hi - lo).collect();
            HcclStat {
                name,
                comm_name,
                count: acc.times.count,
                collectives: acc.collectives.len() as u64,
                bytes: acc.bytes,
                total_ns: acc.times.total,
                mean_ns: acc.times.mean(),
                bandwidth_gbps: bandwidth_gbps(acc.timed_bytes, acc.times.total),
                skew_mean_ns: (!skews.is_empty())
                    .then(|| skews.iter().sum::<u64>() / skews.len() as u64),
                skew_max_ns: skews.iter().copied().max(),
            }
        })
        .collect();
    stats.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    Ok(stats)
}

fn markers(t: &Table) -> Result<Vec<MarkerStat>> {
    // (times, ranges never ended)
    let mut groups: BTreeMap<(String, Option<String>, String), (Times, u64)> = BTreeMap::new();
    let (messages, domains, kinds) = (
        t.strings("message")?,
        t.strings("domain")?,
        t.strings("kind")?,
    );
    let (durations, ends) = (t.durations()?, t.u64s("end_ns")?);
    let rows = messages.into_iter().zip(domains).zip(kinds);
    for (((message, domain), kind), (d, end)) in rows.zip(durations.into_iter().zip(ends)) {
        let key = (
            message.unwrap_or_default(),
            domain,
            kind.unwrap_or_default(),
        );
        let (times, open) = groups.entry(key).or_default();
        times.add(d);
        *open += u64::from(end.is_none());
    }
    let mut stats: Vec<MarkerStat> = groups
        .into_iter()
        .map(|((message, domain, kind), (times, open))| {
            let is_range = kind != "mark";
            MarkerStat {
                message,
                domain,
                count: times.count,
                total_ns: is_range.then_some(times.total),
                mean_ns: times.mean().filter(|_| is_range),
                open,
                kind,
            }
        })
        .collect();
    stats.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.message.cmp(&b.message)));
    Ok(stats)
}

fn health(ds: &Dataset) -> Result<Health> {
    let t = ds.table("critical_event");
    let mut groups: BTreeMap<(String, String), u64> = BTreeMap::new();
    let (kinds, severities, counts) =
        (t.strings("kind")?, t.strings("severity")?, t.u64s("count")?);
    for ((kind, severity), count) in kinds.into_iter().zip(severities).zip(counts) {
        let key = (kind.unwrap_or_default(), severity.unwrap_or_default());
        *groups.entry(key).or_default() += count.unwrap_or(1);
    }
    let events: Vec<EventStat> = groups
        .into_iter()
        .map(|((kind, severity), count)| EventStat {
            kind,
            severity,
            count,
        })
        .collect();
    let session = ds.session.as_ref();
    let drops: BTreeMap<String, u64> = session.map(|s| s.drops.clone()).unwrap_or_default();
    let total_drops = drops.values().sum();
    let complete = session.map(|s| s.complete);
    let (clean, verdict) = verdict(&events, total_drops, complete);
    Ok(Health {
        events,
        drops,
        total_drops,
        complete,
        clean,
        verdict,
    })
}

/// One line saying whether the numbers above can be trusted, and if not, why.
fn verdict(events: &[EventStat], drops: u64, complete: Option<bool>) -> (bool, String) {
    let mut problems = Vec::new();
    if drops > 0 {
        problems.push(format!(
            "{drops} events dropped in the kernel (figures undercount; raise --ringbuf-mb)"
        ));
    }
    let errors: u64 = events
        .iter()
        .filter(|e| e.severity == "error")
        .map(|e| e.count)
        .sum();
    let warnings: u64 = events.iter().map(|e| e.count).sum::<u64>() - errors;
    if errors + warnings > 0 {
        problems.push(format!(
            "{errors} critical errors and {warnings} warnings (see the table above)"
        ));
    }
    match complete {
        Some(true) => {}
        Some(false) => problems.push(
            "session not complete: the agent did not stop cleanly, the last second may be lost"
                .to_owned(),
        ),
        None => problems.push("no session.json: drops and shutdown are unknown".to_owned()),
    }
    if problems.is_empty() {
        let clean = "clean: no drops, no critical events, session complete";
        (true, clean.to_owned())
    } else {
        (false, format!("check: {}", problems.join("; ")))
    }
}
