//! The report on small hand-made datasets written by the real sink, over two hosts.
use std::path::Path;

use serde_json::{Value, json};
use tracer_schema::{
    dataset::Dataset,
    vocab::{CopyKind, EventKind, MarkerKind, Severity},
};

use super::{Filter, Format, summary::summarize};
use crate::{
    sink::parquet::{ParquetSink, SinkOptions},
    test_dataset::{Scratch, allreduce, call, event, kernel, marker, memcpy, write_session},
};

/// Host `a` (pid 1) has most rows; host `b` (pid 2) the second rank of each collective and
/// one more kernel. Each host's sink flushes twice, so tables span several parts.
fn write_dataset(dir: &Path) {
    let mut a = ParquetSink::create(dir, SinkOptions::new("a")).expect("sink a");
    a.write_kernels(&[
        kernel(1, "matmul", 1_000, Some(1_100), 0),
        kernel(1, "matmul", 2_000, Some(2_300), 0),
        kernel(1, "gelu", 3_000, Some(3_100), 507_015),
    ])
    .expect("kernels");
    a.flush().expect("flush");
    a.write_kernels(&[kernel(1, "matmul", 4_000, None, 0)])
        .expect("kernels");
    a.write_memcpys(&[
        memcpy(CopyKind::HostToDevice, 1_000, 100, Some(200)),
        memcpy(CopyKind::HostToDevice, 3_000, 300, Some(500)),
        memcpy(CopyKind::DeviceToHost, 500, 600, None),
    ])
    .expect("memcpy");
    a.write_hccl(&[allreduce(1, 0, 5_000, 5_500), allreduce(1, 1, 6_000, 6_400)])
        .expect("hccl");
    a.write_api(&[
        call("aclrtMemcpy", 100, Some(250), Some(0)),
        call("aclrtMemcpy", 300, Some(350), Some(107_000)),
        call("aclrtMemcpy", 400, None, None),
        call("mstxRangeStartA", 10, Some(20), Some(5)),
    ])
    .expect("api");
    a.write_markers(&[
        marker(MarkerKind::Range, "step 0", 100, Some(400)),
        marker(MarkerKind::Range, "step 0", 500, Some(600)),
        marker(MarkerKind::Range, "step 1", 700, None),
        marker(MarkerKind::Mark, "init", 50, Some(50)),
    ])
    .expect("markers");
    a.write_critical_events(&[
        event(EventKind::RingBufferDrop, Severity::Error, 3),
        event(EventKind::ClockModel, Severity::Warning, 1),
        event(EventKind::ClockModel, Severity::Warning, 1),
    ])
    .expect("events");
    a.finish().expect("finish a");

    let mut b = ParquetSink::create(dir, SinkOptions::new("b")).expect("sink b");
    b.write_kernels(&[kernel(2, "matmul", 10_000, Some(10_200), 0)])
        .expect("kernels");
    b.write_hccl(&[allreduce(2, 0, 5_300, 5_500), allreduce(2, 1, 6_100, 6_400)])
        .expect("hccl");
    b.finish().expect("finish b");

    write_session(
        dir,
        "a",
        &[("ringbuf_full_api_enter", 2), ("ringbuf_full_api_exit", 0)],
    );
}

#[test]
fn figures_match_the_rows() {
    let dir = Scratch::new("figures");
    write_dataset(&dir);
    let r = summary(&dir, &Filter::default());

    assert_eq!(r.header.hosts, ["a", "b"]);
    assert_eq!(r.header.processes, 2);
    assert_eq!(r.header.rows["kernel"], 5);
    assert_eq!(r.header.rows["memset"], 0);
    // Host a: from the mark at 50 to the last kernel end at 6_400.
    assert_eq!(r.header.duration_ns, Some(6_400 - 10));

    let matmul = &r.kernels[0];
    assert_eq!(matmul.name, "matmul");
    let m = &matmul.stats;
    assert_eq!((m.count, m.total_ns), (4, 600));
    assert_eq!(
        (m.mean_ns, m.min_ns, m.max_ns),
        (Some(200), Some(100), Some(300))
    );
    // Timed: 100, 300 (host a) and 200 (host b); the fourth never ran.
    assert_eq!(
        (m.median_ns, m.p95_ns, m.p99_ns),
        (Some(200), Some(300), Some(300))
    );
    assert_eq!(m.stddev_ns, Some(100));
    assert!((matmul.share_pct - 600.0 / 7.0).abs() < 1e-9);
    let gelu = &r.kernels[1];
    assert_eq!(
        (gelu.name.as_str(), gelu.stats.count, gelu.errors),
        ("gelu", 1, 1)
    );

    let memcpy = &r.api[0];
    assert_eq!(
        (memcpy.name.as_str(), memcpy.stats.count),
        ("aclrtMemcpy", 3)
    );
    assert_eq!(
        (memcpy.stats.total_ns, memcpy.stats.mean_ns),
        (200, Some(100))
    );
    assert_eq!(memcpy.stats.median_ns, Some(100), "the mean of 150 and 50");
    assert_eq!((memcpy.errors, memcpy.incomplete), (1, 1));
    let range_start = r
        .api
        .iter()
        .find(|a| a.name == "mstxRangeStartA")
        .expect("mstx");
    assert_eq!(range_start.errors, 0, "a range id is not an error code");

    let htod = &r.memcpy[0];
    assert_eq!(
        (htod.copy_kind.as_str(), htod.count, htod.bytes),
        ("HTOD", 2, 4_000)
    );
    assert_eq!(htod.total_ns, 300);
    assert!((htod.bandwidth_gbps.expect("timed") - 4_000.0 / 300.0).abs() < 1e-9);
    let dtoh = &r.memcpy[1];
    assert_eq!((dtoh.bytes, dtoh.bandwidth_gbps), (500, None));

    assert_eq!(r.hccl.len(), 1);
    let h = &r.hccl[0];
    assert_eq!((h.count, h.collectives, h.bytes), (4, 2, 4_096));
    assert_eq!((h.total_ns, h.mean_ns), (500 + 400 + 200 + 300, Some(350)));
    assert_eq!((h.skew_mean_ns, h.skew_max_ns), (Some(200), Some(300)));

    let step0 = r
        .markers
        .iter()
        .find(|m| m.message == "step 0")
        .expect("step 0");
    assert_eq!(
        (step0.count, step0.total_ns, step0.mean_ns),
        (2, Some(400), Some(200))
    );
    let step1 = r
        .markers
        .iter()
        .find(|m| m.message == "step 1")
        .expect("step 1");
    assert_eq!((step1.open, step1.total_ns), (1, Some(0)));
    let init = r
        .markers
        .iter()
        .find(|m| m.message == "init")
        .expect("init");
    assert_eq!((init.kind.as_str(), init.total_ns), ("mark", None));

    let health = &r.health;
    let counts: Vec<(&str, u64)> = health
        .events
        .iter()
        .map(|e| (e.kind.as_str(), e.count))
        .collect();
    assert_eq!(counts, [("clock_model", 2), ("ring_buffer_drop", 3)]);
    assert_eq!(
        (health.total_drops, health.complete, health.clean),
        (2, Some(true), false)
    );
    assert!(
        health.verdict.contains("2 events dropped"),
        "{}",
        health.verdict
    );
}

/// The report on the dataset in `dir`, restricted by `filter`.
fn summary(dir: &Path, filter: &Filter) -> super::summary::Report {
    summarize(&Dataset::open(dir).expect("open"), filter).expect("summary")
}

fn report(dir: &Path, format: Format) -> anyhow::Result<String> {
    super::report(dir, format, &Filter::default())
}

/// Nearest-rank percentiles, the middle of an even count, the sample standard deviation.
#[test]
fn percentiles_of_a_hundred_durations() {
    let dir = Scratch::new("percentiles");
    let mut sink = ParquetSink::create(&dir, SinkOptions::new("h")).expect("sink");
    // 1..=100 µs, written out of order over two parts.
    let rows: Vec<_> = (1..=100u64)
        .rev()
        .map(|i| kernel(1, "k", i * 10_000, Some(i * 10_000 + i * 1_000), 0))
        .collect();
    sink.write_kernels(&rows[..37]).expect("kernels");
    sink.flush().expect("flush");
    sink.write_kernels(&rows[37..]).expect("kernels");
    sink.finish().expect("finish");
    let s = &summary(&dir, &Filter::default()).kernels[0].stats;
    assert_eq!((s.count, s.total_ns), (100, 5_050_000));
    assert_eq!(
        (s.min_ns, s.max_ns, s.mean_ns),
        (Some(1_000), Some(100_000), Some(50_500))
    );
    assert_eq!(s.median_ns, Some(50_500), "(50 + 51) / 2 µs");
    assert_eq!((s.p95_ns, s.p99_ns), (Some(95_000), Some(99_000)));
    // sqrt(sum((i - 50.5)^2) / 99) µs = 29.011 µs.
    assert_eq!(s.stddev_ns, Some(29_011));
}

#[test]
fn filters_select_rows() {
    let dir = Scratch::new("filters");
    write_dataset(&dir);
    let only = |f: Filter| summary(&dir, &f);
    let kernels = |r: &super::summary::Report| -> Vec<(String, u64)> {
        r.kernels
            .iter()
            .map(|k| (k.name.clone(), k.stats.count))
            .collect()
    };
    let by_pid = only(Filter {
        pids: vec![2],
        ..Filter::default()
    });
    assert_eq!(kernels(&by_pid), [("matmul".to_owned(), 1)]);
    assert!(by_pid.api.is_empty(), "pid 2 made no traced call");
    assert_eq!(by_pid.header.filters, ["--pid 2"]);
    let by_host = only(Filter {
        hosts: vec!["a".to_owned()],
        ..Filter::default()
    });
    assert_eq!(by_host.hccl[0].count, 2, "host a's rank only");
    // Rank 1 of comm0/2 is pid 2 on host b (allreduce(pid, ...) gives rank pid - 1).
    let by_rank = only(Filter {
        ranks: vec![1],
        ..Filter::default()
    });
    assert_eq!(kernels(&by_rank), [("matmul".to_owned(), 1)]);
    let by_name = only(Filter {
        name: Some(regex::Regex::new("^ge").expect("regex")),
        ..Filter::default()
    });
    assert_eq!(kernels(&by_name), [("gelu".to_owned(), 1)]);
    assert!(by_name.memcpy.is_empty() && by_name.api.is_empty());
    // Host a starts at 10 ns: [1000, 2990) ns after it is [1010, 3000), where one kernel
    // starts (at 2000); host b starts at 5300, so its kernel at 10000 is 4700 ns in.
    let window = only(Filter {
        from: Some(1_000),
        to: Some(2_990),
        ..Filter::default()
    });
    assert_eq!(kernels(&window), [("matmul".to_owned(), 1)]);
    assert_eq!(window.kernels[0].stats.total_ns, 300);
    let top = only(Filter {
        top: Some(1),
        ..Filter::default()
    });
    assert_eq!((top.kernels.len(), top.markers.len()), (1, 1));
}

#[test]
fn rank_needs_hccl_rows() {
    let dir = Scratch::new("no-ranks");
    let mut sink = ParquetSink::create(&dir, SinkOptions::new("h")).expect("sink");
    sink.write_kernels(&[kernel(1, "noop", 0, Some(10), 0)])
        .expect("kernels");
    sink.finish().expect("finish");
    let filter = Filter {
        ranks: vec![0],
        ..Filter::default()
    };
    let err = summarize(&Dataset::open(&dir).expect("open"), &filter).expect_err("no ranks");
    assert!(err.to_string().contains("--rank"), "{err}");
}

#[test]
fn json_has_a_key_per_section() {
    let dir = Scratch::new("json");
    write_dataset(&dir);
    let text = report(&dir, Format::Json).expect("report");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    for key in [
        "header",
        "kernels",
        "api",
        "operators",
        "memcpy",
        "hccl",
        "markers",
        "health",
    ] {
        assert!(v.get(key).is_some(), "no {key} in {v}");
    }
    assert_eq!(v["kernels"][0]["total_ns"], 600);
    assert_eq!(v["kernels"][0]["p99_ns"], 300);
    assert_eq!(v["hccl"][0]["collectives"], 2);
    assert_eq!(v["health"]["drops"]["ringbuf_full_api_enter"], 2);
}

#[test]
fn table_and_csv_show_every_section() {
    let dir = Scratch::new("text");
    write_dataset(&dir);
    let table = report(&dir, Format::Table).expect("table");
    for needle in [
        "matmul",
        "85.7%",
        "13.33 GB/s",
        "comm0/2",
        "step 0",
        "ring_buffer_drop",
    ] {
        assert!(table.contains(needle), "no {needle} in\n{table}");
    }
    let csv = report(&dir, Format::Csv).expect("csv");
    for needle in [
        "# kernels\nname,count,total,",
        "matmul,4,600,200,200,300,300,100,300,100,85.7143,0",
        "HTOD,2,4000,300,",
    ] {
        assert!(csv.contains(needle), "no {needle:?} in\n{csv}");
    }
}

#[test]
fn empty_dataset_says_none() {
    let dir = Scratch::new("empty");
    ParquetSink::create(&dir, SinkOptions::new("h"))
        .and_then(ParquetSink::finish)
        .expect("empty sink");
    let text = report(&dir, Format::Table).expect("report");
    assert!(
        text.contains("Kernels by total device time\n  none"),
        "{text}"
    );
    assert!(text.contains("no session.json"), "{text}");
    let v: Value = serde_json::from_str(&report(&dir, Format::Json).expect("json")).expect("JSON");
    assert_eq!(v["kernels"], json!([]));
    assert_eq!(v["header"]["duration_ns"], Value::Null);
}

#[test]
fn clean_verdict() {
    let dir = Scratch::new("clean");
    let mut sink = ParquetSink::create(&dir, SinkOptions::new("h")).expect("sink");
    sink.write_kernels(&[kernel(1, "noop", 0, Some(10), 0)])
        .expect("kernels");
    sink.finish().expect("finish");
    write_session(&dir, "h", &[("x", 0)]);
    let text = report(&dir, Format::Table).expect("report");
    assert!(
        text.ends_with("clean: no drops, no critical events, session complete\n"),
        "{text}"
    );
}

/// A dataset whose session.json has another schema version is refused with a line saying
/// which side is older (Parquet parts: `tracer_schema::dataset`'s tests).
#[test]
fn other_schema_versions_are_refused() {
    let dir = Scratch::new("versions");
    write_dataset(&dir);
    let path = dir.join("session.json");
    let text = std::fs::read_to_string(&path).expect("session.json");
    let mut session: Value = serde_json::from_str(&text).expect("json");
    session["schema_version"] = json!(tracer_schema::SCHEMA_VERSION + 1);
    std::fs::write(&path, session.to_string()).expect("write");
    let err = format!(
        "{:#}",
        report(&dir, Format::Table).expect_err("newer session")
    );
    assert!(err.contains("newer than this npu-bpftrace reads"), "{err}");
}

#[test]
fn not_a_dataset() {
    let dir = Scratch::new("not-a-dataset");
    let err = report(&dir, Format::Table)
        .expect_err("empty directory")
        .to_string();
    assert!(err.contains("is not an npu-bpftrace dataset"), "{err}");
    let err = report(&dir.join("missing"), Format::Json)
        .expect_err("missing")
        .to_string();
    assert!(err.ends_with("no such directory"), "{err}");
}
