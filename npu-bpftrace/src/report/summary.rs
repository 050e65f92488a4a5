//! The report's figures, aggregated in Rust from a [`Dataset`]'s tables, streamed a batch
//! at a time with only the columns each section needs. What grows with the trace is one
//! duration per timed row of the sections that give percentiles (kernels, API calls,
//! operators), kept per name to sort them once at the end.
//!
//! Every field name here is a JSON key of `report --format json`: keep them stable.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::{Result, bail};
use serde::Serialize;

use tracer_catalog::{self as catalog, Ret};
use tracer_schema::{
    dataset::{Batch, Dataset, Table},
    rows::bandwidth_gbps,
    tables::TABLES,
};

use super::Filter;

/// Everything `npu-bpftrace report` prints, one field per section.
#[derive(Debug, Serialize)]
pub struct Report {
    pub header: Header,
    pub kernels: Vec<KernelStat>,
    pub api: Vec<ApiStat>,
    /// Operators (the `op` table); empty when the dataset has none.
    pub operators: Vec<OperatorStat>,
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
    /// The filters the figures below are restricted to, as given; empty for none.
    pub filters: Vec<String>,
}

/// Distribution of the durations of one name's timed rows, like `nsys stats`: the mean of
/// the two middle values for an even count's median, nearest rank for the percentiles,
/// the sample standard deviation. None where no row was timed.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Stats {
    /// Rows, timed or not.
    pub count: u64,
    pub total_ns: u64,
    pub mean_ns: Option<u64>,
    pub median_ns: Option<u64>,
    pub p95_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub min_ns: Option<u64>,
    pub max_ns: Option<u64>,
    pub stddev_ns: Option<u64>,
}

/// One kernel name: durations are device time of the tasks that completed.
#[derive(Debug, Serialize)]
pub struct KernelStat {
    pub name: String,
    #[serde(flatten)]
    pub stats: Stats,
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
    #[serde(flatten)]
    pub stats: Stats,
    /// Calls that returned a non-zero status.
    pub errors: u64,
    /// Calls that had not returned when their thread, process or the trace ended.
    pub incomplete: u64,
}

/// One operator name: durations are host time of the operator calls that returned.
#[derive(Debug, Serialize)]
pub struct OperatorStat {
    pub name: String,
    #[serde(flatten)]
    pub stats: Stats,
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

/// The report on `ds`, restricted to what `filter` selects.
pub fn summarize(ds: &Dataset, filter: &Filter) -> Result<Report> {
    let (header, origins) = header(ds, filter)?;
    let rows = Rows::new(ds, filter, origins)?;
    Ok(Report {
        header,
        kernels: top_of(kernels(ds.table("kernel"), &rows)?, filter),
        api: top_of(api(ds.table("api"), &rows)?, filter),
        operators: top_of(operators(ds.table("op"), &rows)?, filter),
        memcpy: top_of(memcpy(ds.table("memcpy"), &rows)?, filter),
        hccl: top_of(hccl(ds.table("hccl"), &rows)?, filter),
        markers: top_of(markers(ds.table("marker"), &rows)?, filter),
        health: health(ds, &rows)?,
    })
}

/// The first `--top` rows of a section (sections are sorted, largest first).
fn top_of<T>(mut rows: Vec<T>, filter: &Filter) -> Vec<T> {
    rows.truncate(filter.top.unwrap_or(usize::MAX));
    rows
}

/// Which rows the figures count: the filter, with the time window placed on each host's
/// clock and `--rank` turned into the processes that have the ranks.
struct Rows<'f> {
    filter: &'f Filter,
    /// First timestamp per host: the origin of `--from` / `--to`.
    origins: HashMap<String, u64>,
    /// (host, pid) of the processes of the ranks asked for; None without `--rank`.
    ranked: Option<BTreeSet<(String, u64)>>,
}

impl<'f> Rows<'f> {
    fn new(ds: &Dataset, filter: &'f Filter, origins: HashMap<String, u64>) -> Result<Self> {
        let ranked = if filter.ranks.is_empty() {
            None
        } else {
            Some(ranked_processes(ds.table("hccl"), &filter.ranks)?)
        };
        Ok(Self {
            filter,
            origins,
            ranked,
        })
    }

    /// The columns [`Rows::keep`] reads.
    const COLUMNS: [&'static str; 2] = ["pid", "start_ns"];

    /// Whether row `i` of `b` counts, by its host, process and start (`name` is matched
    /// separately, where a section has one).
    fn keep(&self, b: &Batch, pids: &[Option<u64>], starts: &[Option<u64>], i: usize) -> bool {
        let f = self.filter;
        if !f.hosts.is_empty() && !f.hosts.iter().any(|h| h == b.host) {
            return false;
        }
        let pid = pids[i].unwrap_or(0);
        if !f.pids.is_empty() && !f.pids.contains(&pid) {
            return false;
        }
        if let Some(ranked) = &self.ranked
            && !ranked.contains(&(b.host.to_owned(), pid))
        {
            return false;
        }
        if f.from.is_none() && f.to.is_none() {
            return true;
        }
        // Rows without a start (tasks that never ran while traced) are outside any window.
        let (Some(start), Some(&origin)) = (starts[i], self.origins.get(b.host)) else {
            return false;
        };
        let since = start.saturating_sub(origin);
        f.from.is_none_or(|from| since >= from) && f.to.is_none_or(|to| since < to)
    }

    fn named(&self, name: &str) -> bool {
        self.filter.name.as_ref().is_none_or(|re| re.is_match(name))
    }

    /// The batches of `table` with `columns` (and those of [`Rows::keep`]), each with the
    /// indices of its rows that count.
    fn scan<'t>(
        &self,
        t: &'t Table,
        columns: &[&str],
        mut f: impl FnMut(&Batch<'t>, Vec<usize>) -> Result<()>,
    ) -> Result<()> {
        let columns = [columns, &Self::COLUMNS[..]].concat();
        for batch in t.scan(&columns)? {
            let b = batch?;
            let (pids, starts) = (b.u64s("pid")?, b.u64s("start_ns")?);
            let kept = (0..b.rows())
                .filter(|&i| self.keep(&b, &pids, &starts, i))
                .collect();
            f(&b, kept)?;
        }
        Ok(())
    }
}

/// The (host, pid) of the processes whose rank is one of `ranks`: a process's rank is its
/// rank in the largest communicator it belongs to (the world, in a data-parallel job), as
/// its HCCL rows say.
fn ranked_processes(t: &Table, ranks: &[u64]) -> Result<BTreeSet<(String, u64)>> {
    // (host, pid) -> (world size, rank)
    let mut best: BTreeMap<(String, u64), (u64, u64)> = BTreeMap::new();
    for batch in t.scan(&["pid", "rank", "world_size"])? {
        let b = batch?;
        let (pids, rank, world) = (b.u64s("pid")?, b.u64s("rank")?, b.u64s("world_size")?);
        for i in 0..b.rows() {
            let (Some(pid), Some(rank)) = (pids[i], rank[i]) else {
                continue;
            };
            let size = world[i].unwrap_or(0);
            let entry = best.entry((b.host.to_owned(), pid)).or_insert((size, rank));
            if size > entry.0 {
                *entry = (size, rank);
            }
        }
    }
    if best.is_empty() {
        bail!(
            "--rank: no process's rank is known in this dataset (it has no HCCL rows with a \
             rank); filter by --pid or --host instead"
        );
    }
    Ok(best
        .into_iter()
        .filter(|(_, (_, rank))| ranks.contains(rank))
        .map(|(process, _)| process)
        .collect())
}

/// Durations of one name: count, total, min and max as rows come, every timed duration
/// kept for the median and percentiles.
#[derive(Debug, Default)]
struct Times {
    count: u64,
    durations: Vec<u64>,
}

impl Times {
    fn add(&mut self, duration: Option<u64>) {
        self.count += 1;
        if let Some(d) = duration {
            self.durations.push(d);
        }
    }

    fn total(&self) -> u64 {
        self.durations.iter().sum()
    }

    fn stats(mut self) -> Stats {
        let d = &mut self.durations;
        d.sort_unstable();
        let n = d.len();
        let total: u64 = d.iter().sum();
        let mean = (n > 0).then(|| total / n as u64);
        // Nearest rank: the smallest value with at least p% of the values at or below it.
        let rank = |p: u64| {
            d.get((n as u64 * p).div_ceil(100).max(1) as usize - 1)
                .copied()
        };
        let median = match n {
            0 => None,
            n if n % 2 == 1 => Some(d[n / 2]),
            n => Some(((u128::from(d[n / 2 - 1]) + u128::from(d[n / 2])) / 2) as u64),
        };
        let stddev = (n > 1).then(|| {
            let m = total as f64 / n as f64;
            let squares: f64 = d.iter().map(|&x| (x as f64 - m).powi(2)).sum();
            (squares / (n - 1) as f64).sqrt().round() as u64
        });
        Stats {
            count: self.count,
            total_ns: total,
            mean_ns: mean,
            median_ns: median,
            p95_ns: if n > 0 { rank(95) } else { None },
            p99_ns: if n > 0 { rank(99) } else { None },
            min_ns: d.first().copied(),
            max_ns: d.last().copied(),
            stddev_ns: stddev,
        }
    }
}

/// Times without the durations: for sections that give only totals and means.
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    count: u64,
    timed: u64,
    total: u64,
}

impl Totals {
    fn add(&mut self, duration: Option<u64>) {
        self.count += 1;
        if let Some(d) = duration {
            self.timed += 1;
            self.total += d;
        }
    }

    fn mean(&self) -> Option<u64> {
        (self.timed > 0).then(|| self.total / self.timed)
    }
}

/// The header, and the first timestamp of each host (the origin of `--from` / `--to`).
fn header(ds: &Dataset, filter: &Filter) -> Result<(Header, HashMap<String, u64>)> {
    let mut processes = BTreeSet::new();
    let mut spans: HashMap<String, (u64, u64)> = HashMap::new();
    for table in ds.tables() {
        // Critical events carry the time they were noticed, not activity.
        let timed = table.name != "critical_event";
        let columns: &[&str] = if timed {
            &["pid", "start_ns", "end_ns"]
        } else {
            &["pid"]
        };
        for batch in table.scan(columns)? {
            let b = batch?;
            for pid in b.u64s("pid")?.into_iter().flatten() {
                processes.insert((b.host.to_owned(), pid));
            }
            if !timed {
                continue;
            }
            let times = [b.u64s("start_ns")?, b.u64s("end_ns")?];
            for t in times.iter().flatten().flatten() {
                let span = spans.entry(b.host.to_owned()).or_insert((*t, *t));
                *span = (span.0.min(*t), span.1.max(*t));
            }
        }
    }
    let header = Header {
        dir: ds.dir.display().to_string(),
        hosts: ds.hosts.iter().cloned().collect(),
        processes: processes.len(),
        duration_ns: spans.values().map(|(first, last)| last - first).max(),
        rows: TABLES
            .iter()
            .map(|&t| (t, ds.table(t).rows() as u64))
            .collect(),
        filters: filter.describe(),
    };
    let origins = spans
        .into_iter()
        .map(|(h, (first, _))| (h, first))
        .collect();
    Ok((header, origins))
}

fn kernels(t: &Table, rows: &Rows) -> Result<Vec<KernelStat>> {
    let mut groups: BTreeMap<String, (Times, u64)> = BTreeMap::new();
    rows.scan(t, &["name", "end_ns", "status"], |b, kept| {
        let (names, durations, status) = (b.text("name")?, b.durations()?, b.u64s("status")?);
        for i in kept {
            let name = names.get(i).unwrap_or("<unknown>");
            if !rows.named(name) {
                continue;
            }
            let (times, errors) = groups.entry(name.to_owned()).or_default();
            times.add(durations[i]);
            *errors += u64::from(status[i].is_some_and(|s| s != 0));
        }
        Ok(())
    })?;
    let all: u64 = groups.values().map(|(t, _)| t.total()).sum();
    let mut stats: Vec<KernelStat> = groups
        .into_iter()
        .map(|(name, (times, errors))| {
            let stats = times.stats();
            KernelStat {
                name,
                share_pct: if all == 0 {
                    0.0
                } else {
                    100.0 * stats.total_ns as f64 / all as f64
                },
                stats,
                errors,
            }
        })
        .collect();
    stats.sort_by(|a, b| (b.stats.total_ns.cmp(&a.stats.total_ns)).then(a.name.cmp(&b.name)));
    Ok(stats)
}

/// Whether `name` returns a status code; mstx range starts and domain creation return ids
/// and handles, which are not errors when non-zero. Unknown functions are assumed to.
fn returns_status(name: &str) -> bool {
    catalog::Catalog::builtin()
        .find(name)
        .is_none_or(|def| def.ret == Ret::Status)
}

fn api(t: &Table, rows: &Rows) -> Result<Vec<ApiStat>> {
    #[derive(Default)]
    struct Acc {
        times: Times,
        errors: u64,
        incomplete: u64,
    }
    let mut groups: BTreeMap<(String, String), Acc> = BTreeMap::new();
    let columns = ["domain", "name", "end_ns", "return_value", "incomplete"];
    rows.scan(t, &columns, |b, kept| {
        let (domains, names) = (b.text("domain")?, b.text("name")?);
        let (durations, returns) = (b.durations()?, b.i64s("return_value")?);
        let incomplete = b.bools("incomplete")?;
        for i in kept {
            let name = names.get(i).unwrap_or("");
            if !rows.named(name) {
                continue;
            }
            let key = (domains.get(i).unwrap_or("").to_owned(), name.to_owned());
            let acc = groups.entry(key).or_default();
            acc.times.add(durations[i]);
            acc.errors += u64::from(returns[i].is_some_and(|r| r != 0));
            acc.incomplete += u64::from(incomplete[i] == Some(true));
        }
        Ok(())
    })?;
    let mut stats: Vec<ApiStat> = groups
        .into_iter()
        .map(|((domain, name), acc)| ApiStat {
            errors: if returns_status(&name) { acc.errors } else { 0 },
            domain,
            name,
            stats: acc.times.stats(),
            incomplete: acc.incomplete,
        })
        .collect();
    stats.sort_by(|a, b| (b.stats.total_ns.cmp(&a.stats.total_ns)).then(a.name.cmp(&b.name)));
    Ok(stats)
}

/// Operators by name, where the dataset has an `op` table (none: no rows).
fn operators(t: &Table, rows: &Rows) -> Result<Vec<OperatorStat>> {
    let mut groups: BTreeMap<String, Times> = BTreeMap::new();
    if t.rows() == 0 {
        return Ok(Vec::new());
    }
    rows.scan(t, &["name", "end_ns"], |b, kept| {
        let (names, durations) = (b.text("name")?, b.durations()?);
        for i in kept {
            let name = names.get(i).unwrap_or("<unknown>");
            if rows.named(name) {
                groups.entry(name.to_owned()).or_default().add(durations[i]);
            }
        }
        Ok(())
    })?;
    let mut stats: Vec<OperatorStat> = groups
        .into_iter()
        .map(|(name, times)| OperatorStat {
            name,
            stats: times.stats(),
        })
        .collect();
    stats.sort_by(|a, b| (b.stats.total_ns.cmp(&a.stats.total_ns)).then(a.name.cmp(&b.name)));
    Ok(stats)
}

fn memcpy(t: &Table, rows: &Rows) -> Result<Vec<MemcpyStat>> {
    // (times, all bytes, bytes of the timed copies)
    let mut groups: BTreeMap<String, (Totals, u64, u64)> = BTreeMap::new();
    rows.scan(t, &["copy_kind", "bytes", "end_ns"], |b, kept| {
        let (kinds, bytes, durations) = (b.text("copy_kind")?, b.u64s("bytes")?, b.durations()?);
        for i in kept {
            let kind = kinds.get(i).unwrap_or("");
            if !rows.named(kind) {
                continue;
            }
            let (times, all, timed) = groups.entry(kind.to_owned()).or_default();
            let bytes = bytes[i].unwrap_or(0);
            times.add(durations[i]);
            *all += bytes;
            *timed += if durations[i].is_some() { bytes } else { 0 };
        }
        Ok(())
    })?;
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

fn hccl(t: &Table, rows: &Rows) -> Result<Vec<HcclStat>> {
    #[derive(Default)]
    struct Acc {
        times: Totals,
        bytes: u64,
        timed_bytes: u64,
        /// Earliest and latest device start of each collective's ranks.
        starts: BTreeMap<CollectiveKey, (u64, u64)>,
        collectives: BTreeSet<CollectiveKey>,
    }
    let mut groups: BTreeMap<(String, Option<String>), Acc> = BTreeMap::new();
    let columns = ["name", "comm_name", "seq", "comm", "bytes", "end_ns"];
    rows.scan(t, &columns, |b, kept| {
        let (names, comm_names) = (b.text("name")?, b.text("comm_name")?);
        let (seqs, comms, pids) = (b.u64s("seq")?, b.u64s("comm")?, b.u64s("pid")?);
        let (bytes, starts, durations) = (b.u64s("bytes")?, b.u64s("start_ns")?, b.durations()?);
        for i in kept {
            let name = names.get(i).unwrap_or("");
            if !rows.named(name) {
                continue;
            }
            let seq = seqs[i].unwrap_or(0);
            let comm_name = comm_names.get(i).map(str::to_owned);
            let key = match &comm_name {
                Some(comm) => CollectiveKey::Named(comm.clone(), seq),
                None => CollectiveKey::Local(
                    b.host.to_owned(),
                    pids[i].unwrap_or(0),
                    comms[i].unwrap_or(0),
                    seq,
                ),
            };
            let acc = groups.entry((name.to_owned(), comm_name)).or_default();
            let size = bytes[i].unwrap_or(0);
            acc.times.add(durations[i]);
            acc.bytes += size;
            acc.timed_bytes += if durations[i].is_some() { size } else { 0 };
            if let Some(start) = starts[i] {
                let span = acc.starts.entry(key.clone()).or_insert((start, start));
                *span = (span.0.min(start), span.1.max(start));
            }
            acc.collectives.insert(key);
        }
        Ok(())
    })?;
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

fn markers(t: &Table, rows: &Rows) -> Result<Vec<MarkerStat>> {
    // (times, ranges never ended)
    let mut groups: BTreeMap<(String, Option<String>, String), (Totals, u64)> = BTreeMap::new();
    rows.scan(t, &["message", "domain", "kind", "end_ns"], |b, kept| {
        let (messages, domains, kinds) = (b.text("message")?, b.text("domain")?, b.text("kind")?);
        let (durations, ends) = (b.durations()?, b.u64s("end_ns")?);
        for i in kept {
            let message = messages.get(i).unwrap_or("");
            if !rows.named(message) {
                continue;
            }
            let key = (
                message.to_owned(),
                domains.get(i).map(str::to_owned),
                kinds.get(i).unwrap_or("").to_owned(),
            );
            let (times, open) = groups.entry(key).or_default();
            times.add(durations[i]);
            *open += u64::from(ends[i].is_none());
        }
        Ok(())
    })?;
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

/// Critical events of the hosts and processes asked for (events about no process, like
/// drops, count whatever `--pid` says), and the session's drops.
fn health(ds: &Dataset, rows: &Rows) -> Result<Health> {
    let t = ds.table("critical_event");
    let mut groups: BTreeMap<(String, String), u64> = BTreeMap::new();
    let f = rows.filter;
    for batch in t.scan(&["kind", "severity", "count", "pid"])? {
        let b = batch?;
        let (kinds, severities) = (b.text("kind")?, b.text("severity")?);
        let (counts, pids) = (b.u64s("count")?, b.u64s("pid")?);
        for i in 0..b.rows() {
            let host_ok = f.hosts.is_empty() || f.hosts.iter().any(|h| h == b.host);
            let pid_ok = f.pids.is_empty() || pids[i].is_none_or(|p| f.pids.contains(&p));
            if !(host_ok && pid_ok) {
                continue;
            }
            let key = (
                kinds.get(i).unwrap_or("").to_owned(),
                severities.get(i).unwrap_or("").to_owned(),
            );
            *groups.entry(key).or_default() += counts[i].unwrap_or(1);
        }
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
