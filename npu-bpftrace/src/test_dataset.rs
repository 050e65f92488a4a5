//! Builders of small hand-made datasets for the unit tests of the tools that read datasets
//! back (`report`, `export`): scratch directories and rows with the fields the tests vary;
//! the tests write them with the real [`ParquetSink`](crate::sink::parquet::ParquetSink).
use std::path::{Path, PathBuf};

use tracer_schema::{
    rows::{ApiRow, CriticalEventRow, DeviceTask, HcclRow, KernelRow, MarkerRow, MemcpyRow},
    vocab::{CopyKind, EventKind, KernelType, MarkerKind, Severity},
};

/// A fresh directory for one test, removed when the test passes (kept on failure, to look at).
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("npu-bpftrace-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

/// A task of process `pid` (submitted by its main thread) that ran from `start` to `end`.
pub(crate) fn task(pid: u32, start: u64, end: Option<u64>, status: Option<u32>) -> DeviceTask {
    DeviceTask {
        pid,
        tid: pid,
        start_ns: Some(start),
        end_ns: end,
        submit_ns: start,
        status,
        ..DeviceTask::default()
    }
}

pub(crate) fn kernel(pid: u32, name: &str, start: u64, end: Option<u64>, status: u32) -> KernelRow {
    KernelRow {
        task: task(pid, start, end, Some(status)),
        name: Some(name.to_owned()),
        kernel_type: KernelType::AiCore,
        block_dim: 1,
        api_name: "aclrtLaunchKernel",
    }
}

pub(crate) fn memcpy(kind: CopyKind, bytes: u64, start: u64, end: Option<u64>) -> MemcpyRow {
    MemcpyRow {
        task: task(1, start, end, Some(0)),
        copy_kind: kind,
        bytes,
        api_name: "aclrtMemcpy",
        ..MemcpyRow::default()
    }
}

/// Rank `pid - 1`'s part of the `seq`th all-reduce of a 2-rank communicator.
pub(crate) fn allreduce(pid: u32, seq: u64, start: u64, end: u64) -> HcclRow {
    HcclRow {
        task: task(pid, start, Some(end), Some(0)),
        name: "HcclAllReduce",
        comm: 0xc0,
        comm_name: Some("comm0/2".to_owned()),
        rank: Some(pid - 1),
        world_size: Some(2),
        bytes: Some(1024),
        seq,
        ..HcclRow::default()
    }
}

/// A call of process 1's main thread; mstx functions are in the MSTX domain, others in ACL.
pub(crate) fn call(name: &'static str, start: u64, end: Option<u64>, ret: Option<i64>) -> ApiRow {
    ApiRow {
        domain: if name.starts_with("mstx") {
            "MSTX"
        } else {
            "ACL"
        },
        name,
        library: "libascendcl.so",
        pid: 1,
        tid: 1,
        start_ns: start,
        end_ns: end,
        incomplete: end.is_none(),
        return_value: ret,
        ..ApiRow::default()
    }
}

/// A mark or range of process 1's main thread.
pub(crate) fn marker(kind: MarkerKind, message: &str, start: u64, end: Option<u64>) -> MarkerRow {
    MarkerRow {
        kind,
        message: message.to_owned(),
        pid: 1,
        tid: 1,
        start_ns: start,
        end_ns: end,
        ..MarkerRow::default()
    }
}

/// A critical event whose message is its kind.
pub(crate) fn event(kind: EventKind, severity: Severity, count: u64) -> CriticalEventRow {
    CriticalEventRow {
        kind,
        severity,
        count,
        message: kind.to_string(),
        ..CriticalEventRow::default()
    }
}

/// A complete `session.json` of host `host` with these drop counters.
pub(crate) fn write_session(dir: &Path, host: &str, drops: &[(&str, u64)]) {
    let mut session = crate::session::start(host.to_owned(), "record".to_owned(), Vec::new());
    session.complete = true;
    session.drops = drops.iter().map(|&(k, n)| (k.to_owned(), n)).collect();
    session.write(dir).expect("session.json");
}
