//! Printing a [`Report`]: aligned tables with human units, CSV with raw numbers, or JSON.
use std::fmt::Write;

use anyhow::Result;

use tracer_schema::tables::TABLES;

use super::{
    Format,
    summary::{Header, Health, Report},
};

pub fn render(report: &Report, format: Format) -> Result<String> {
    Ok(match format {
        Format::Table => table(report),
        Format::Csv => csv(report),
        Format::Json => serde_json::to_string_pretty(report)? + "\n",
    })
}

/// One value of a section. Table mode prints it for people, CSV as a raw number.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Text(String),
    Count(u64),
    Ns(Option<u64>),
    Bytes(u64),
    Gbps(Option<f64>),
    Pct(f64),
}

impl Cell {
    fn human(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Count(n) => n.to_string(),
            Cell::Ns(Some(ns)) => human_ns(*ns),
            Cell::Bytes(b) => human_bytes(*b),
            Cell::Gbps(Some(g)) => human_rate(*g),
            Cell::Pct(p) => format!("{p:.1}%"),
            Cell::Ns(None) | Cell::Gbps(None) => "-".to_owned(),
        }
    }

    fn raw(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Count(n) | Cell::Bytes(n) | Cell::Ns(Some(n)) => n.to_string(),
            Cell::Gbps(Some(x)) | Cell::Pct(x) => format!("{x:.4}"),
            Cell::Ns(None) | Cell::Gbps(None) => String::new(),
        }
    }

    /// Text reads left to right; numbers line up on the right.
    fn left_aligned(&self) -> bool {
        matches!(self, Cell::Text(_))
    }
}

/// A titled table of the report; `key` names it in CSV output.
struct Section {
    key: &'static str,
    title: &'static str,
    columns: &'static [&'static str],
    rows: Vec<Vec<Cell>>,
}

fn text(s: &str) -> Cell {
    Cell::Text(s.to_owned())
}

fn opt_text(s: &Option<String>) -> Cell {
    Cell::Text(s.clone().unwrap_or_default())
}

fn sections(r: &Report) -> Vec<Section> {
    vec![
        Section {
            key: "operators",
            title: "Top operators by device time",
            columns: &[
                "name",
                "kind",
                "count",
                "1st phases",
                "host",
                "mean host",
                "tasks",
                "device",
                "share",
                "errors",
            ],
            rows: r
                .operators
                .iter()
                .map(|o| {
                    vec![
                        text(&o.name),
                        text(&o.kind),
                        Cell::Count(o.count),
                        Cell::Count(o.first_phases),
                        Cell::Ns(Some(o.host_ns)),
                        Cell::Ns(o.mean_host_ns),
                        Cell::Count(o.tasks),
                        Cell::Ns(Some(o.device_ns)),
                        Cell::Pct(o.share_pct),
                        Cell::Count(o.errors),
                    ]
                })
                .collect(),
        },
        Section {
            key: "kernels",
            title: "Kernels by total device time",
            columns: &[
                "name", "count", "total", "mean", "min", "max", "share", "errors",
            ],
            rows: r
                .kernels
                .iter()
                .map(|k| {
                    vec![
                        text(&k.name),
                        Cell::Count(k.count),
                        Cell::Ns(Some(k.total_ns)),
                        Cell::Ns(k.mean_ns),
                        Cell::Ns(k.min_ns),
                        Cell::Ns(k.max_ns),
                        Cell::Pct(k.share_pct),
                        Cell::Count(k.errors),
                    ]
                })
                .collect(),
        },
        Section {
            key: "api",
            title: "API calls by total host time",
            columns: &[
                "domain",
                "name",
                "count",
                "total",
                "mean",
                "errors",
                "incomplete",
            ],
            rows: r
                .api
                .iter()
                .map(|a| {
                    vec![
                        text(&a.domain),
                        text(&a.name),
                        Cell::Count(a.count),
                        Cell::Ns(Some(a.total_ns)),
                        Cell::Ns(a.mean_ns),
                        Cell::Count(a.errors),
                        Cell::Count(a.incomplete),
                    ]
                })
                .collect(),
        },
        Section {
            key: "memcpy",
            title: "Memory copies by direction",
            columns: &["copy_kind", "count", "bytes", "total", "bandwidth"],
            rows: r
                .memcpy
                .iter()
                .map(|m| {
                    vec![
                        text(&m.copy_kind),
                        Cell::Count(m.count),
                        Cell::Bytes(m.bytes),
                        Cell::Ns(Some(m.total_ns)),
                        Cell::Gbps(m.bandwidth_gbps),
                    ]
                })
                .collect(),
        },
        Section {
            key: "hccl",
            title: "HCCL operations by communicator (rank rows; skew = spread of rank start times)",
            columns: &[
                "name",
                "comm_name",
                "count",
                "collectives",
                "bytes",
                "total",
                "mean",
                "bandwidth",
                "skew_mean",
                "skew_max",
            ],
            rows: r
                .hccl
                .iter()
                .map(|h| {
                    vec![
                        text(&h.name),
                        opt_text(&h.comm_name),
                        Cell::Count(h.count),
                        Cell::Count(h.collectives),
                        Cell::Bytes(h.bytes),
                        Cell::Ns(Some(h.total_ns)),
                        Cell::Ns(h.mean_ns),
                        Cell::Gbps(h.bandwidth_gbps),
                        Cell::Ns(h.skew_mean_ns),
                        Cell::Ns(h.skew_max_ns),
                    ]
                })
                .collect(),
        },
        Section {
            key: "markers",
            title: "mstx markers and ranges",
            columns: &[
                "message", "domain", "kind", "count", "total", "mean", "open",
            ],
            rows: r
                .markers
                .iter()
                .map(|m| {
                    vec![
                        text(&m.message),
                        opt_text(&m.domain),
                        text(&m.kind),
                        Cell::Count(m.count),
                        Cell::Ns(m.total_ns),
                        Cell::Ns(m.mean_ns),
                        Cell::Count(m.open),
                    ]
                })
                .collect(),
        },
        Section {
            key: "critical_events",
            title: "Critical events",
            columns: &["kind", "severity", "count"],
            rows: r
                .health
                .events
                .iter()
                .map(|e| vec![text(&e.kind), text(&e.severity), Cell::Count(e.count)])
                .collect(),
        },
    ]
}

fn table(r: &Report) -> String {
    let h = &r.header;
    let mut out = String::new();
    let _ = writeln!(out, "npu-bpftrace report: {}", h.dir);
    let hosts = if h.hosts.is_empty() {
        "none".to_owned()
    } else {
        h.hosts.join(", ")
    };
    let duration = h.duration_ns.map_or("-".to_owned(), human_ns);
    let _ = writeln!(
        out,
        "  hosts: {hosts}   processes: {}   duration: {duration}",
        h.processes
    );
    let rows: Vec<String> = table_rows(h).map(|(t, n)| format!("{t} {n}")).collect();
    let _ = writeln!(out, "  rows: {}", rows.join(", "));
    for section in sections(r) {
        out.push('\n');
        write_table(&mut out, &section);
    }
    write_health(&mut out, &r.health);
    out
}

/// Row counts in the order of [`TABLES`] (api first), not alphabetical.
fn table_rows(h: &Header) -> impl Iterator<Item = (&str, u64)> {
    TABLES
        .iter()
        .map(|&t| (t, h.rows.get(t).copied().unwrap_or(0)))
}

fn write_table(out: &mut String, s: &Section) {
    let _ = writeln!(out, "{}", s.title);
    if s.rows.is_empty() {
        let _ = writeln!(out, "  none");
        return;
    }
    let cells: Vec<Vec<String>> = s
        .rows
        .iter()
        .map(|row| row.iter().map(Cell::human).collect())
        .collect();
    let widths: Vec<usize> = (0..s.columns.len())
        .map(|i| {
            cells
                .iter()
                .map(|row| row[i].chars().count())
                .chain([s.columns[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Headers align like their column's values.
    let left: Vec<bool> = s.rows[0].iter().map(Cell::left_aligned).collect();
    let header: Vec<String> = s.columns.iter().map(|c| c.to_string()).collect();
    for row in std::iter::once(&header).chain(&cells) {
        let mut line = String::from(" ");
        for ((value, width), left) in row.iter().zip(&widths).zip(&left) {
            let pad = " ".repeat(width - value.chars().count());
            let _ = if *left {
                write!(line, " {value}{pad}")
            } else {
                write!(line, " {pad}{value}")
            };
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

fn write_health(out: &mut String, h: &Health) {
    let drops: Vec<String> = h
        .drops
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    let drops = if drops.is_empty() {
        "none".to_owned()
    } else {
        drops.join(", ")
    };
    let complete = match h.complete {
        Some(true) => "complete",
        Some(false) => "NOT complete",
        None => "unknown (no session.json)",
    };
    let _ = writeln!(out, "  drops: {drops}   session: {complete}");
    let _ = writeln!(out, "\n{}", h.verdict);
}

/// Sections as CSV blocks (`# key`, header, rows) separated by blank lines, like
/// `nsys stats --format csv`; the header and health become `key,value` blocks.
fn csv(r: &Report) -> String {
    let h = &r.header;
    let mut header = vec![
        kv("dir", &h.dir),
        kv("hosts", &h.hosts.join(";")),
        kv("processes", &h.processes.to_string()),
        kv(
            "duration_ns",
            &h.duration_ns.map_or(String::new(), |d| d.to_string()),
        ),
    ];
    header.extend(table_rows(h).map(|(t, n)| kv(&format!("rows_{t}"), &n.to_string())));
    let health = &r.health;
    let mut summary = vec![
        kv("total_drops", &health.total_drops.to_string()),
        kv(
            "complete",
            &health.complete.map_or(String::new(), |c| c.to_string()),
        ),
        kv("clean", &health.clean.to_string()),
        kv("verdict", &health.verdict),
    ];
    summary.extend(
        health
            .drops
            .iter()
            .map(|(k, n)| kv(&format!("drops_{k}"), &n.to_string())),
    );
    let mut out = String::new();
    write_csv(&mut out, "header", &["key", "value"], &header);
    for s in sections(r) {
        out.push('\n');
        write_csv(&mut out, s.key, s.columns, &s.rows);
    }
    out.push('\n');
    write_csv(&mut out, "health", &["key", "value"], &summary);
    out
}

fn kv(key: &str, value: &str) -> Vec<Cell> {
    vec![text(key), text(value)]
}

fn write_csv(out: &mut String, key: &str, columns: &[&str], rows: &[Vec<Cell>]) {
    let _ = writeln!(out, "# {key}");
    let _ = writeln!(out, "{}", columns.join(","));
    for row in rows {
        let fields: Vec<String> = row.iter().map(|c| csv_field(&c.raw())).collect();
        let _ = writeln!(out, "{}", fields.join(","));
    }
}

/// RFC 4180 quoting, for messages and names that contain commas or quotes.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// `850 ns`, `12.35 µs`, `4.20 ms`, `1.50 s`.
pub fn human_ns(ns: u64) -> String {
    let x = ns as f64;
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.2} µs", x / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} ms", x / 1e6),
        _ => format!("{:.2} s", x / 1e9),
    }
}

/// `12.50 GB/s`, or `730.0 MB/s` below 1 GB/s (small copies are latency-bound).
pub fn human_rate(gbps: f64) -> String {
    if gbps >= 1.0 {
        format!("{gbps:.2} GB/s")
    } else {
        format!("{:.1} MB/s", gbps * 1e3)
    }
}

/// `512 B`, `256.0 KiB`, `1.5 MiB`, `2.0 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human_ns(850), "850 ns");
        assert_eq!(human_ns(12_345), "12.35 µs");
        assert_eq!(human_ns(4_200_000), "4.20 ms");
        assert_eq!(human_ns(1_500_000_000), "1.50 s");
        assert_eq!(human_rate(12.5), "12.50 GB/s");
        assert_eq!(human_rate(0.73), "730.0 MB/s");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(256 * 1024), "256.0 KiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }

    #[test]
    fn csv_quotes_only_when_needed() {
        assert_eq!(csv_field("step 1"), "step 1");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
