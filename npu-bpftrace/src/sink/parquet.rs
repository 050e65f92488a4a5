//! Parquet sink: one hive-style dataset per table, `DIR/<table>/host=<host>/part-<n>.parquet`.
//!
//! A Parquet file is readable only once its footer is written. Each part is encoded in
//! memory (the Parquet writer holds a row group's pages there anyway) and, on every
//! [`ParquetSink::flush`], finished and written to a hidden `.part-<n>.parquet.tmp`, fsynced
//! and renamed into place; the next rows start a new part. A killed agent loses at most the
//! rows since the last flush, and readers never see a partial file.
//!
//! A part that cannot be written (disk full, read-only or failing file system) stays in
//! memory, compressed, and is written at the next flush that can; its `.tmp` file is
//! removed. Past [`SinkOptions::max_unwritten_bytes`] the oldest unwritten parts are dropped
//! and their rows counted as lost, per table ([`SinkStats::rows_lost`]). An output
//! directory removed while tracing is made again, and the rows of its parts counted lost.
//! Every file and directory is reached through [`OutDir`], never through a symbolic link.
use std::collections::VecDeque;
use std::fs;
use std::io::{self, Write};
use std::mem;
use std::path::Path;

use anyhow::{Context, Result, bail};
use arrow::datatypes::{DataType, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use tracer_schema::vocab::{EventKind, Severity};

use tracer_core::correlate::Output;

use super::{Sink, SinkStats};
use crate::outdir::OutDir;
use tracer_schema::{
    SCHEMA_VERSION,
    dataset::SCHEMA_VERSION_KEY,
    rows::{
        ApiRow, CriticalEventRow, HcclRow, KernelRow, MarkerRow, MemcpyRow, MemoryRow, MemsetRow,
        OpRow, SyncRow,
    },
    tables::{
        self, ApiTable, Column, ColumnEncoding, CriticalEventTable, HcclTable, KernelTable,
        MarkerTable, MemcpyTable, MemoryTable, MemsetTable, OpTable, SyncTable, Table,
    },
};

/// How the sink lays out and encodes its files.
#[derive(Debug, Clone)]
pub struct SinkOptions {
    /// Value of the `host=` partition; defaults to this machine's hostname.
    pub host: String,
    /// zstd level of all columns.
    pub zstd_level: i32,
    /// Rows buffered in Arrow builders before they are encoded into the open part.
    pub batch_rows: usize,
    /// Rows per Parquet row group; bounds the writer's memory between flushes.
    pub row_group_rows: usize,
    /// Finished parts kept in memory while they cannot be written, at most (bytes).
    pub max_unwritten_bytes: u64,
}

impl Default for SinkOptions {
    fn default() -> Self {
        Self {
            host: hostname(),
            zstd_level: 3,
            batch_rows: 4096,
            row_group_rows: 1024 * 1024,
            max_unwritten_bytes: 256 << 20,
        }
    }
}

impl SinkOptions {
    pub fn new(host: impl Into<String>) -> Self {
        Self {
            host: host.into(),
            ..Self::default()
        }
    }
}

/// The kernel's hostname, or `localhost` where it cannot be read.
fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Writes each table as a Parquet dataset under one output directory.
pub struct ParquetSink {
    root: OutDir,
    host: String,
    max_unwritten_bytes: u64,
    api: TableWriter<ApiTable>,
    marker: TableWriter<MarkerTable>,
    op: TableWriter<OpTable>,
    kernel: TableWriter<KernelTable>,
    memcpy: TableWriter<MemcpyTable>,
    memset: TableWriter<MemsetTable>,
    sync: TableWriter<SyncTable>,
    hccl: TableWriter<HcclTable>,
    memory: TableWriter<MemoryTable>,
    critical_event: TableWriter<CriticalEventTable>,
    /// The write error of the last flush, while writing fails.
    failing: Option<String>,
    write_errors: u64,
    first_error: Option<String>,
    directory_removed: bool,
    dropped_for_memory: bool,
}

impl ParquetSink {
    /// [`ParquetSink::create_in`] the directory at `dir`, made if missing.
    pub fn create(dir: &Path, opts: SinkOptions) -> Result<Self> {
        let (root, _) = OutDir::open_or_create(dir)?;
        Self::create_in(root, opts)
    }

    /// Creates `DIR/<table>/host=<host>/` (mode 0700) for every table now, so that
    /// permission problems show at start and readers find every dataset, even an empty one.
    /// Part numbers continue after any parts already there.
    pub fn create_in(root: OutDir, opts: SinkOptions) -> Result<Self> {
        check_host(&opts.host)?;
        Ok(Self {
            api: TableWriter::create(&root, &opts)?,
            marker: TableWriter::create(&root, &opts)?,
            op: TableWriter::create(&root, &opts)?,
            kernel: TableWriter::create(&root, &opts)?,
            memcpy: TableWriter::create(&root, &opts)?,
            memset: TableWriter::create(&root, &opts)?,
            sync: TableWriter::create(&root, &opts)?,
            hccl: TableWriter::create(&root, &opts)?,
            memory: TableWriter::create(&root, &opts)?,
            critical_event: TableWriter::create(&root, &opts)?,
            root,
            host: opts.host,
            max_unwritten_bytes: opts.max_unwritten_bytes,
            failing: None,
            write_errors: 0,
            first_error: None,
            directory_removed: false,
            dropped_for_memory: false,
        })
    }

    /// Every table's rows of one correlator output.
    pub fn write_output(&mut self, output: Output) -> Result<()> {
        let Output {
            api,
            markers,
            ops,
            activity: a,
        } = output;
        self.write_api(&api)?;
        self.write_markers(&markers)?;
        self.write_ops(&ops)?;
        self.write_kernels(&a.kernels)?;
        self.write_memcpys(&a.memcpys)?;
        self.write_memsets(&a.memsets)?;
        self.write_syncs(&a.syncs)?;
        self.write_hccl(&a.hccl)?;
        self.write_memory(&a.memory)?;
        self.write_critical_events(&a.critical)
    }

    pub fn write_api(&mut self, rows: &[ApiRow]) -> Result<()> {
        self.api.write(rows)
    }

    pub fn write_markers(&mut self, rows: &[MarkerRow]) -> Result<()> {
        self.marker.write(rows)
    }

    pub fn write_ops(&mut self, rows: &[OpRow]) -> Result<()> {
        self.op.write(rows)
    }

    pub fn write_kernels(&mut self, rows: &[KernelRow]) -> Result<()> {
        self.kernel.write(rows)
    }

    pub fn write_memcpys(&mut self, rows: &[MemcpyRow]) -> Result<()> {
        self.memcpy.write(rows)
    }

    pub fn write_memsets(&mut self, rows: &[MemsetRow]) -> Result<()> {
        self.memset.write(rows)
    }

    pub fn write_syncs(&mut self, rows: &[SyncRow]) -> Result<()> {
        self.sync.write(rows)
    }

    pub fn write_hccl(&mut self, rows: &[HcclRow]) -> Result<()> {
        self.hccl.write(rows)
    }

    pub fn write_memory(&mut self, rows: &[MemoryRow]) -> Result<()> {
        self.memory.write(rows)
    }

    pub fn write_critical_events(&mut self, rows: &[CriticalEventRow]) -> Result<()> {
        self.critical_event.write(rows)
    }

    /// Makes every row written so far durable and readable: finishes each table's open
    /// part and writes it (with any part an earlier flush could not write) to its file:
    /// fsync, rename, directory fsync. Tables without new rows are untouched. A write that
    /// fails keeps its part for the next flush: only encoding errors are returned.
    pub fn flush(&mut self) -> Result<()> {
        if self.root.removed() {
            self.make_again()?;
        }
        let mut error = None;
        for table in self.tables() {
            table.seal()?;
            // Every table tries, even after one failed: a small part may still fit.
            if let Err(e) = table.write_out()
                && error.is_none()
            {
                error = Some(e);
            }
        }
        self.note_result(error)?;
        self.bound_memory();
        Ok(())
    }

    /// Says when writing starts failing (stderr, a critical event) and when it works again.
    fn note_result(&mut self, error: Option<String>) -> Result<()> {
        match (error, self.failing.is_some()) {
            (Some(why), was_failing) => {
                self.write_errors += 1;
                if !was_failing {
                    eprintln!(
                        "npu-bpftrace: {why}; keeping rows in memory (up to {} MiB) and retrying every flush",
                        self.max_unwritten_bytes >> 20
                    );
                    self.first_error.get_or_insert_with(|| why.clone());
                    let event = critical(
                        EventKind::OutputWriteError,
                        1,
                        format!("{why}; rows kept in memory and retried"),
                    );
                    self.critical_event.write(&[event])?;
                }
                self.failing = Some(why);
            }
            (None, true) => {
                self.failing = None;
                eprintln!(
                    "npu-bpftrace: writing to {} works again; rows kept meanwhile are written",
                    self.root.path().display()
                );
            }
            (None, false) => {}
        }
        Ok(())
    }

    /// Drops the oldest unwritten parts, largest backlog first, while they hold more than
    /// the bound; their rows are lost.
    fn bound_memory(&mut self) {
        let max = self.max_unwritten_bytes;
        loop {
            let mut tables = self.tables();
            let total: u64 = tables.iter().map(|t| t.unwritten_bytes()).sum();
            if total <= max {
                return;
            }
            let Some(biggest) = tables.iter_mut().max_by_key(|t| t.unwritten_bytes()) else {
                return;
            };
            biggest.drop_oldest();
            if !self.dropped_for_memory {
                self.dropped_for_memory = true;
                eprintln!(
                    "npu-bpftrace: more than {} MiB of rows could not be written: dropping the \
                     oldest (counted in session.json, output.rows_lost)",
                    max >> 20
                );
            }
        }
    }

    /// The output directory was removed while tracing: make it again at its path (never
    /// through a link), with every table's directory; the rows of the parts it held are lost.
    fn make_again(&mut self) -> Result<()> {
        let path = self.root.path().to_owned();
        eprintln!(
            "npu-bpftrace: the output directory {} was removed while tracing; making it again \
             (rows written before are lost, counted in session.json)",
            path.display()
        );
        let (root, _) = OutDir::open_or_create(&path)?;
        self.root = root;
        self.directory_removed = true;
        let root = self.root.try_clone().context("the output directory")?;
        let host = self.host.clone();
        let mut lost = 0;
        for table in self.tables() {
            lost += table.move_to(&root, &host)?;
        }
        let event = critical(
            EventKind::OutputWriteError,
            lost,
            format!(
                "the output directory {} was removed while tracing: {lost} rows written before were lost",
                path.display()
            ),
        );
        self.critical_event.write(&[event])
    }

    /// Flushes and closes everything; afterwards every file is a complete Parquet file.
    /// Parts still unwritten get a few more tries before their rows are counted lost.
    pub fn finish(mut self) -> Result<SinkStats> {
        self.flush()?;
        for _ in 0..FINISH_RETRIES {
            if self.failing.is_none() {
                break;
            }
            std::thread::sleep(FINISH_RETRY_PAUSE);
            self.flush()?;
        }
        let lost_at_end: u64 = self.tables().iter_mut().map(|t| t.abandon()).sum();
        if lost_at_end > 0 {
            eprintln!(
                "npu-bpftrace: {lost_at_end} rows could not be written: {}",
                self.failing.as_deref().unwrap_or("unknown error")
            );
        }
        let mut stats = SinkStats {
            write_errors: self.write_errors,
            write_error: self.first_error.clone(),
            directory_removed: self.directory_removed,
            ..SinkStats::default()
        };
        for table in self.tables() {
            let t = table.stats();
            stats.rows.insert(t.name, t.rows);
            if t.rows_lost > 0 {
                stats.rows_lost.insert(t.name, t.rows_lost);
            }
            stats.files += t.files;
            stats.bytes += t.bytes;
        }
        Ok(stats)
    }

    /// Every table, for the operations that treat them alike.
    fn tables(&mut self) -> [&mut dyn Dataset; 10] {
        [
            &mut self.api,
            &mut self.marker,
            &mut self.op,
            &mut self.kernel,
            &mut self.memcpy,
            &mut self.memset,
            &mut self.sync,
            &mut self.hccl,
            &mut self.memory,
            &mut self.critical_event,
        ]
    }
}

/// Tries at the end of a session to write what could not be written before.
const FINISH_RETRIES: usize = 2;
const FINISH_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

/// A critical event of the sink itself, now.
fn critical(kind: EventKind, count: u64, message: String) -> CriticalEventRow {
    CriticalEventRow {
        ts_ns: crate::session::clock_ns(libc::CLOCK_MONOTONIC),
        kind,
        severity: Severity::Error,
        count,
        message,
        ..CriticalEventRow::default()
    }
}

/// The host becomes a directory name: refuse anything that would escape or nest it.
fn check_host(host: &str) -> Result<()> {
    if host.is_empty() || host == "." || host == ".." || host.contains(['/', '\0']) {
        bail!("invalid host name {host:?} for the output path");
    }
    Ok(())
}

/// What one table wrote.
struct TableStats {
    name: &'static str,
    rows: u64,
    rows_lost: u64,
    files: u64,
    bytes: u64,
}

/// The table-independent operations of a [`TableWriter`].
trait Dataset {
    /// Finishes the open part in memory.
    fn seal(&mut self) -> Result<()>;
    /// Writes the finished parts to files, oldest first; the error says what failed.
    fn write_out(&mut self) -> Result<(), String>;
    fn unwritten_bytes(&self) -> u64;
    /// Drops the oldest unwritten part; its rows are lost.
    fn drop_oldest(&mut self);
    /// Drops every unwritten part; returns their rows, now lost.
    fn abandon(&mut self) -> u64;
    /// Continues in `root/<table>/host=<host>` (a new output directory); returns the rows
    /// of the parts written to the old one, now lost.
    fn move_to(&mut self, root: &OutDir, host: &str) -> Result<u64>;
    fn stats(&self) -> TableStats;
}

/// One table's dataset directory: buffers rows, encodes parts, writes them on flush.
struct TableWriter<T: Table> {
    dir: OutDir,
    schema: SchemaRef,
    props: WriterProperties,
    batch_rows: usize,
    pending: T,
    part: Option<Part>,
    /// Finished parts not written yet, oldest first.
    unwritten: VecDeque<Finished>,
    next_part: u64,
    rows: u64,
    /// Rows in the parts written to files.
    rows_written: u64,
    rows_lost: u64,
    files: u64,
    bytes: u64,
}

/// The part being encoded, in memory.
struct Part {
    writer: ArrowWriter<Vec<u8>>,
    rows: u64,
}

/// A complete Parquet file waiting to be written.
struct Finished {
    bytes: Vec<u8>,
    rows: u64,
}

impl<T: Table> TableWriter<T> {
    fn create(root: &OutDir, opts: &SinkOptions) -> Result<Self> {
        let dir = root
            .subdir(T::NAME)?
            .subdir(&format!("host={}", opts.host))?;
        let batch_rows = opts.batch_rows.max(1);
        let columns = tables::columns::<T>();
        Ok(Self {
            next_part: next_part_number(&dir)?,
            dir,
            schema: tables::schema(&columns),
            props: writer_properties(opts, &columns)?,
            batch_rows,
            pending: T::with_capacity(batch_rows),
            part: None,
            unwritten: VecDeque::new(),
            rows: 0,
            rows_written: 0,
            rows_lost: 0,
            files: 0,
            bytes: 0,
        })
    }

    fn write(&mut self, mut rows: &[T::Row]) -> Result<()> {
        self.rows += rows.len() as u64;
        while !rows.is_empty() {
            let room = self.batch_rows.saturating_sub(self.pending.len()).max(1);
            let (now, rest) = rows.split_at(room.min(rows.len()));
            self.pending.append(now);
            if self.pending.len() >= self.batch_rows {
                self.write_pending()?;
            }
            rows = rest;
        }
        Ok(())
    }

    /// Encodes the buffered rows into the open part, opening one if needed.
    fn write_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let rows = self.pending.len() as u64;
        let table = mem::replace(&mut self.pending, T::with_capacity(self.batch_rows));
        let batch = tables::into_batch(table, &self.schema)?;
        let part = match self.part.take() {
            Some(part) => part,
            None => self.open_part()?,
        };
        let part = self.part.insert(part);
        part.rows += rows;
        part.writer
            .write(&batch)
            .with_context(|| format!("encoding a part of {}", self.dir.path().display()))
    }

    fn open_part(&self) -> Result<Part> {
        // The Parquet schema alone maps back to the same Arrow types, so the ~1.7 KB
        // ARROW:schema copy would only add to every (per-second) part.
        let options = ArrowWriterOptions::new()
            .with_properties(self.props.clone())
            .with_skip_arrow_metadata(true);
        let writer = ArrowWriter::try_new_with_options(Vec::new(), self.schema.clone(), options)
            .context("starting a Parquet part")?;
        Ok(Part { writer, rows: 0 })
    }

    /// Writes one finished part to its file: a new `.tmp` (0600), fsync, rename to the
    /// next free part number, directory fsync. A failure removes the `.tmp`.
    fn write_file(&mut self, bytes: &[u8]) -> Result<(), String> {
        let n = loop {
            let n = self.next_part;
            self.next_part += 1;
            // Never clobber a part, finished or in progress, that another writer made.
            if !self.dir.contains(&part_name(n)) && !self.dir.contains(&tmp_name(n)) {
                break n;
            }
        };
        let (tmp, name) = (tmp_name(n), part_name(n));
        let fail = |what: &str, e: io::Error| {
            format!(
                "cannot {what} {}: {e}",
                self.dir.path().join(&name).display()
            )
        };
        let mut file = self.dir.create_file(&tmp).map_err(|e| fail("create", e))?;
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .and_then(|()| self.dir.rename(&tmp, &name))
            .and_then(|()| self.dir.sync());
        if let Err(e) = written {
            drop(file);
            let _ = self.dir.remove(&tmp);
            // The number stays free for the retry.
            self.next_part = n;
            return Err(fail("write", e));
        }
        Ok(())
    }
}

impl<T: Table> Dataset for TableWriter<T> {
    fn seal(&mut self) -> Result<()> {
        self.write_pending()?;
        let Some(Part { writer, rows }) = self.part.take() else {
            return Ok(());
        };
        let bytes = writer
            .into_inner()
            .with_context(|| format!("finishing a part of {}", self.dir.path().display()))?;
        self.unwritten.push_back(Finished { bytes, rows });
        Ok(())
    }

    fn write_out(&mut self) -> Result<(), String> {
        while let Some(part) = self.unwritten.pop_front() {
            if let Err(e) = self.write_file(&part.bytes) {
                self.unwritten.push_front(part);
                return Err(e);
            }
            self.files += 1;
            self.bytes += part.bytes.len() as u64;
            self.rows_written += part.rows;
        }
        Ok(())
    }

    fn unwritten_bytes(&self) -> u64 {
        self.unwritten.iter().map(|p| p.bytes.len() as u64).sum()
    }

    fn drop_oldest(&mut self) {
        if let Some(part) = self.unwritten.pop_front() {
            self.rows_lost += part.rows;
        }
    }

    fn abandon(&mut self) -> u64 {
        let lost: u64 = self.unwritten.drain(..).map(|p| p.rows).sum();
        self.rows_lost += lost;
        lost
    }

    fn move_to(&mut self, root: &OutDir, host: &str) -> Result<u64> {
        self.dir = root.subdir(T::NAME)?.subdir(&format!("host={host}"))?;
        self.next_part = next_part_number(&self.dir)?;
        let lost = mem::take(&mut self.rows_written);
        self.rows_lost += lost;
        self.files = 0;
        self.bytes = 0;
        Ok(lost)
    }

    fn stats(&self) -> TableStats {
        TableStats {
            name: T::NAME,
            rows: self.rows,
            rows_lost: self.rows_lost,
            files: self.files,
            bytes: self.bytes,
        }
    }
}

fn part_name(n: u64) -> String {
    format!("part-{n:06}.parquet")
}

fn tmp_name(n: u64) -> String {
    format!(".{}.tmp", part_name(n))
}

/// One past the highest part number in `dir`, counting hidden `.tmp` leftovers, so a new
/// session appends to a dataset instead of overwriting it.
fn next_part_number(dir: &OutDir) -> Result<u64> {
    let mut next = 0;
    let names = dir
        .names()
        .with_context(|| format!("listing {}", dir.path().display()))?;
    for name in names {
        let name = name.strip_prefix('.').unwrap_or(&name);
        let name = name.strip_suffix(".tmp").unwrap_or(name);
        let n = name
            .strip_prefix("part-")
            .and_then(|s| s.strip_suffix(".parquet"));
        if let Some(n) = n.and_then(|n| n.parse::<u64>().ok()) {
            next = next.max(n + 1);
        }
    }
    Ok(next)
}

/// zstd everywhere, each column's [`ColumnEncoding`], and pages of up to 32k rows: large
/// enough to compress well, small enough that the dictionary indices a page buffers stay in
/// cache (unbounded pages made encoding ~15% slower for no size gain). Statistics (min/max, null count per column chunk) let readers skip files by time, id or
/// pid; they are off for strings, whose min/max over a few names prunes nothing and whose
/// comparisons would be a sizeable share of the encoding cost.
fn writer_properties(opts: &SinkOptions, columns: &[Column]) -> Result<WriterProperties> {
    let level = ZstdLevel::try_new(opts.zstd_level)
        .with_context(|| format!("invalid zstd level {}", opts.zstd_level))?;
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_dictionary_enabled(true)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_data_page_size_limit(1024 * 1024)
        .set_data_page_row_count_limit(32 * 1024)
        .set_write_batch_size(8192)
        .set_max_row_group_row_count(Some(opts.row_group_rows.max(1)))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            SCHEMA_VERSION_KEY.to_owned(),
            SCHEMA_VERSION.to_string(),
        )]));
    for col in columns {
        let path = ColumnPath::from(col.name);
        match col.encoding {
            ColumnEncoding::Dictionary => {}
            ColumnEncoding::Delta => {
                props = props
                    .set_column_dictionary_enabled(path.clone(), false)
                    .set_column_encoding(path.clone(), Encoding::DELTA_BINARY_PACKED);
            }
            ColumnEncoding::Plain => {
                props = props.set_column_dictionary_enabled(path.clone(), false);
            }
        }
        if *col.data_type() == DataType::Utf8 {
            props = props.set_column_statistics_enabled(path, EnabledStatistics::None);
        }
    }
    Ok(props.build())
}

impl Sink for ParquetSink {
    fn write(&mut self, output: Output) -> Result<()> {
        self.write_output(output)
    }

    fn flush(&mut self) -> Result<()> {
        ParquetSink::flush(self)
    }

    fn finish(self: Box<Self>) -> Result<SinkStats> {
        ParquetSink::finish(*self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, RecordBatch, RecordBatchReader};
    use arrow::compute::concat_batches;
    use arrow::datatypes::{Float64Type, UInt32Type, UInt64Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use std::fs::File;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;
    use tracer_schema::{
        rows::{ApiArgs, DeviceTask},
        vocab::{
            CopyKind, EventKind, HcclDataType, KernelType, MarkerKind, MemcpyKind, MemoryKind,
            MemoryOperation, ReduceOp, Severity,
        },
    };

    /// A fresh, empty scratch directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("npu-sink-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn sink(dir: &Path) -> ParquetSink {
        ParquetSink::create(dir, SinkOptions::new("node-1")).unwrap()
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn read(path: &Path) -> RecordBatch {
        let file = File::open(path).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let schema = reader.schema();
        let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        concat_batches(&schema, &batches).unwrap()
    }

    fn api_row(id: u64) -> ApiRow {
        ApiRow {
            correlation_id: id,
            domain: "ACL",
            name: "aclrtMemcpy",
            library: "libascendcl.so",
            pid: 7,
            tid: 8,
            start_ns: 1000 * id,
            end_ns: Some(1000 * id + 500),
            return_value: Some(0),
            args: ApiArgs {
                bytes: Some(4096),
                memcpy_kind: Some(MemcpyKind::HostToDevice),
                kernel_name: id.is_multiple_of(2).then(|| format!("kernel_{id}")),
                ..ApiArgs::default()
            },
            ..ApiRow::default()
        }
    }

    fn marker_row(id: u64) -> MarkerRow {
        MarkerRow {
            kind: MarkerKind::Range,
            message: format!("step {id}"),
            domain: None,
            pid: 7,
            tid: 8,
            start_ns: 10 * id,
            end_ns: None,
            range_id: Some(id),
            correlation_id: id,
            stream: None,
            end_tid: Some(9),
        }
    }

    #[test]
    fn round_trip_across_flushes() {
        let dir = scratch("roundtrip");
        let mut s = sink(&dir);
        let api_dir = dir.join("api/host=node-1");
        let marker_dir = dir.join("marker/host=node-1");

        s.write_api(&[api_row(1), api_row(2)]).unwrap();
        s.write_markers(&[marker_row(1)]).unwrap();
        assert!(
            files(&api_dir).is_empty(),
            "rows wait in memory for a batch or a flush"
        );
        s.flush().unwrap();
        assert_eq!(files(&api_dir), ["part-000000.parquet"]);
        s.flush().unwrap(); // nothing new: no empty part
        s.write_api(&[api_row(3)]).unwrap();
        s.flush().unwrap();
        let mut incomplete = api_row(4);
        incomplete.end_ns = None;
        incomplete.incomplete = true;
        incomplete.return_value = None;
        s.write_api(&[incomplete]).unwrap();
        let stats = s.finish().unwrap();

        let parts = [
            "part-000000.parquet",
            "part-000001.parquet",
            "part-000002.parquet",
        ];
        assert_eq!(files(&api_dir), parts);
        assert_eq!(files(&marker_dir), ["part-000000.parquet"]);
        assert_eq!(stats.rows[&"api"], 4);
        assert_eq!(stats.rows[&"marker"], 1);
        assert_eq!(stats.files, 4);
        let on_disk: u64 = parts
            .iter()
            .map(|p| fs::metadata(api_dir.join(p)).unwrap().len())
            .sum::<u64>()
            + fs::metadata(marker_dir.join(parts[0])).unwrap().len();
        assert_eq!(stats.bytes, on_disk);

        for (dir, mode) in [(&api_dir, 0o700), (&dir.join("api"), 0o700)] {
            assert_eq!(
                fs::metadata(dir).unwrap().permissions().mode() & 0o777,
                mode
            );
        }
        let mode = fs::metadata(api_dir.join(parts[0]))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        let first = read(&api_dir.join(parts[0]));
        assert_eq!(first.num_rows(), 2);
        let ids = first
            .column_by_name("correlation_id")
            .unwrap()
            .as_primitive::<UInt64Type>();
        assert_eq!(ids.values(), &[1, 2]);
        let kernel = first
            .column_by_name("kernel_name")
            .unwrap()
            .as_string::<i32>();
        assert!(kernel.is_null(0));
        assert_eq!(kernel.value(1), "kernel_2");
        let name = first.column_by_name("name").unwrap().as_string::<i32>();
        assert_eq!(name.value(0), "aclrtMemcpy");
        assert_eq!(first.column_by_name("device_id").unwrap().null_count(), 2);
        // Types and nullability survive from the Parquet schema alone (no ARROW:schema).
        assert_eq!(
            first.schema(),
            tables::schema(&tables::columns::<ApiTable>())
        );

        let last = read(&api_dir.join(parts[2]));
        assert_eq!(last.num_rows(), 1);
        assert!(last.column_by_name("end_ns").unwrap().is_null(0));
        assert!(
            last.column_by_name("incomplete")
                .unwrap()
                .as_boolean()
                .value(0)
        );

        let markers = read(&marker_dir.join(parts[0]));
        assert_eq!(
            markers
                .column_by_name("message")
                .unwrap()
                .as_string::<i32>()
                .value(0),
            "step 1"
        );
        assert!(markers.column_by_name("domain").unwrap().is_null(0));
        let end_tid = markers
            .column_by_name("end_tid")
            .unwrap()
            .as_primitive::<UInt32Type>();
        assert_eq!(end_tid.value(0), 9);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Checks every column chunk of the part at `path` against `T`'s columns: zstd, the
    /// declared encoding, statistics except on strings; and the schema version.
    fn assert_documented_encodings<T: Table>(path: &Path) {
        let file = File::open(path).unwrap();
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let meta = builder.metadata();
        let kv = meta.file_metadata().key_value_metadata().unwrap();
        assert!(kv.iter().any(|k| k.key == "npu_bpftrace.schema_version"));
        let rg = meta.row_group(0);
        for (col, spec) in rg.columns().iter().zip(tables::columns::<T>()) {
            let name = col.column_path().string();
            assert_eq!(name, spec.name);
            assert!(matches!(col.compression(), Compression::ZSTD(_)), "{name}");
            let stats = *spec.data_type() != DataType::Utf8;
            assert_eq!(col.statistics().is_some(), stats, "{name}");
            let encodings: Vec<Encoding> = col.encodings().collect();
            let dict = encodings.contains(&Encoding::RLE_DICTIONARY);
            let delta = encodings.contains(&Encoding::DELTA_BINARY_PACKED);
            match spec.encoding {
                ColumnEncoding::Dictionary => assert!(dict, "{name}: {encodings:?}"),
                ColumnEncoding::Delta => assert!(delta && !dict, "{name}: {encodings:?}"),
                ColumnEncoding::Plain => assert!(!delta && !dict, "{name}: {encodings:?}"),
            }
        }
    }

    #[test]
    fn columns_use_the_documented_encodings() {
        let dir = scratch("encodings");
        let mut s = sink(&dir);
        s.write_api(&synthetic_trace(1000)).unwrap();
        s.finish().unwrap();
        assert_documented_encodings::<ApiTable>(&dir.join("api/host=node-1/part-000000.parquet"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn empty_session_writes_directories_but_no_parts() {
        let dir = scratch("empty");
        let mut s = sink(&dir);
        s.write_api(&[]).unwrap();
        s.flush().unwrap();
        let stats = s.finish().unwrap();
        assert_eq!(stats.files, 0);
        assert_eq!(stats.rows.get("api"), Some(&0));
        assert_eq!(stats.rows.get("marker"), Some(&0));
        for table in ["api", "marker"] {
            assert!(files(&dir.join(table).join("host=node-1")).is_empty());
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A completed device task; `id` varies its ids and times.
    fn task(id: u64) -> DeviceTask {
        DeviceTask {
            correlation_id: id,
            pid: 7,
            tid: 8,
            device_id: 1,
            stream_id: 3,
            task_id: id as u32,
            start_ns: Some(1000 * id + 100),
            end_ns: Some(1000 * id + 600),
            device_start_cnt: Some(50 * id),
            device_end_cnt: Some(50 * id + 25),
            submit_ns: 1000 * id,
            status: Some(0),
            op_correlation_id: Some(id),
            op_name: Some("Add"),
        }
    }

    /// A device task that never completed while traced: every optional field is None.
    fn unfinished(id: u64) -> DeviceTask {
        DeviceTask {
            start_ns: None,
            end_ns: None,
            device_start_cnt: None,
            device_end_cnt: None,
            status: None,
            op_correlation_id: None,
            op_name: None,
            ..task(id)
        }
    }

    /// Reads table `T`'s only part under `dir` and checks that it holds exactly `rows`
    /// (values, nulls, and the schema from the Parquet schema alone) with the documented
    /// encodings.
    fn check_round_trip<T: Table>(dir: &Path, rows: &[T::Row]) -> RecordBatch {
        let table_dir = dir.join(T::NAME).join("host=node-1");
        assert_eq!(files(&table_dir), ["part-000000.parquet"], "{}", T::NAME);
        let part = table_dir.join("part-000000.parquet");
        let batch = read(&part);
        let mut expected = T::with_capacity(rows.len());
        expected.append(rows);
        let schema = tables::schema(&tables::columns::<T>());
        let expected = tables::into_batch(expected, &schema).unwrap();
        assert_eq!(batch, expected, "{}", T::NAME);
        assert_documented_encodings::<T>(&part);
        batch
    }

    #[test]
    fn device_tables_round_trip() {
        let dir = scratch("device");
        let mut s = sink(&dir);
        let kernels = [
            KernelRow {
                task: task(1),
                name: Some("MatMulV2_1".into()),
                kernel_type: KernelType::AiCore,
                block_dim: 8,
                api_name: "aclrtLaunchKernel",
            },
            KernelRow {
                task: unfinished(2),
                name: None,
                kernel_type: KernelType::Unknown,
                block_dim: 1,
                api_name: "rtKernelLaunch",
            },
        ];
        let memcpys = [
            MemcpyRow {
                task: task(3),
                copy_kind: CopyKind::HostToDevice,
                bytes: 1 << 20,
                is_async: true,
                bandwidth_gbps: Some(2097.152),
                api_name: "aclrtMemcpyAsync",
            },
            MemcpyRow {
                task: unfinished(4),
                copy_kind: CopyKind::DeviceToHost,
                bytes: 4096,
                is_async: false,
                bandwidth_gbps: None,
                api_name: "aclrtMemcpy",
            },
        ];
        let memsets = [
            MemsetRow {
                task: task(5),
                value: 0,
                bytes: 4096,
                is_async: true,
                api_name: "aclrtMemsetAsync",
            },
            MemsetRow {
                task: unfinished(6),
                value: 0xff,
                bytes: 512,
                is_async: false,
                api_name: "aclrtMemset",
            },
        ];
        let hccl = [
            HcclRow {
                task: task(7),
                name: "HcclAllReduce",
                comm: 0x7f00_0002_0000,
                comm_name: Some("comm0/2".into()),
                rank: Some(0),
                world_size: Some(2),
                data_type: Some(HcclDataType::Fp32),
                count: Some(1024),
                bytes: Some(4096),
                reduce_op: Some(ReduceOp::Sum),
                peer: Some(1),
                bandwidth_gbps: Some(8.192),
                seq: 0,
            },
            HcclRow {
                task: unfinished(8),
                name: "HcclBarrier",
                comm: 0x7f00_0002_0000,
                seq: 1,
                ..HcclRow::default()
            },
        ];
        s.write_kernels(&kernels).unwrap();
        s.write_memcpys(&memcpys).unwrap();
        s.write_memsets(&memsets).unwrap();
        s.write_hccl(&hccl).unwrap();
        let stats = s.finish().unwrap();
        for table in ["kernel", "memcpy", "memset", "hccl"] {
            assert_eq!(stats.rows[table], 2, "{table}");
        }

        let kernel = check_round_trip::<KernelTable>(&dir, &kernels);
        let names: Vec<&str> = kernel
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names[..3], ["correlation_id", "pid", "tid"]);
        assert_eq!(
            names[12..],
            [
                "op_correlation_id",
                "op_name",
                "name",
                "kernel_type",
                "block_dim",
                "api_name"
            ]
        );
        let cnt = kernel
            .column_by_name("device_end_cnt")
            .unwrap()
            .as_primitive::<UInt64Type>();
        assert_eq!(cnt.value(0), 75);
        assert!(cnt.is_null(1));
        assert!(kernel.column_by_name("name").unwrap().is_null(1));

        let memcpy = check_round_trip::<MemcpyTable>(&dir, &memcpys);
        let bandwidth = memcpy
            .column_by_name("bandwidth_gbps")
            .unwrap()
            .as_primitive::<Float64Type>();
        assert_eq!(bandwidth.value(0), 2097.152);
        assert!(bandwidth.is_null(1));

        check_round_trip::<MemsetTable>(&dir, &memsets);

        let hccl = check_round_trip::<HcclTable>(&dir, &hccl);
        let seq = hccl
            .column_by_name("seq")
            .unwrap()
            .as_primitive::<UInt64Type>();
        assert_eq!(seq.values(), &[0, 1]);
        for column in [
            "comm_name",
            "rank",
            "data_type",
            "peer",
            "bandwidth_gbps",
            "status",
        ] {
            assert!(hccl.column_by_name(column).unwrap().is_null(1), "{column}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn memory_and_critical_event_round_trip() {
        let dir = scratch("memory");
        let mut s = sink(&dir);
        let memory = [
            MemoryRow {
                correlation_id: 1,
                pid: 7,
                tid: 8,
                operation: MemoryOperation::Allocation,
                memory_kind: MemoryKind::Device,
                address: 0x12c0_0000_0000,
                bytes: Some(1 << 20),
                device_id: Some(0),
                start_ns: 1000,
                end_ns: 1500,
                api_name: "rtMalloc",
                return_value: 0,
            },
            MemoryRow {
                correlation_id: 2,
                pid: 7,
                tid: 8,
                operation: MemoryOperation::Release,
                memory_kind: MemoryKind::Host,
                address: 0x5600_0000_0000,
                bytes: None,
                device_id: None,
                start_ns: 2000,
                end_ns: 2100,
                api_name: "rtFreeHost",
                return_value: -1,
            },
        ];
        let events = [
            CriticalEventRow {
                ts_ns: 5000,
                kind: EventKind::DeviceError,
                severity: Severity::Error,
                pid: Some(7),
                tid: Some(8),
                device_id: Some(1),
                correlation_id: Some(3),
                count: 1,
                message: "task 3 on stream 3 failed with 507015".into(),
            },
            CriticalEventRow {
                ts_ns: 6000,
                kind: EventKind::RingBufferDrop,
                severity: Severity::Warning,
                pid: None,
                tid: None,
                device_id: None,
                correlation_id: None,
                count: 42,
                message: "42 events dropped".into(),
            },
        ];
        s.write_memory(&memory).unwrap();
        s.write_critical_events(&events).unwrap();
        let stats = s.finish().unwrap();
        assert_eq!(stats.rows["memory"], 2);
        assert_eq!(stats.rows["critical_event"], 2);

        let memory = check_round_trip::<MemoryTable>(&dir, &memory);
        assert!(memory.column_by_name("bytes").unwrap().is_null(1));
        let events = check_round_trip::<CriticalEventTable>(&dir, &events);
        let count = events
            .column_by_name("count")
            .unwrap()
            .as_primitive::<UInt64Type>();
        assert_eq!(count.values(), &[1, 42]);
        assert!(events.column_by_name("correlation_id").unwrap().is_null(1));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn finish_makes_every_dataset_and_parts_only_where_rows_were() {
        let dir = scratch("datasets");
        let mut s = sink(&dir);
        s.write_kernels(&[KernelRow::default()]).unwrap();
        s.write_critical_events(&[CriticalEventRow::default(), CriticalEventRow::default()])
            .unwrap();
        s.write_memcpys(&[]).unwrap();
        let stats = s.finish().unwrap();
        let tables = [
            "api",
            "critical_event",
            "hccl",
            "kernel",
            "marker",
            "memcpy",
            "memory",
            "memset",
            "op",
            "sync",
        ];
        assert_eq!(stats.rows.keys().copied().collect::<Vec<_>>(), tables);
        let mut datasets = files(&dir);
        datasets.retain(|name| !name.starts_with('.'));
        assert_eq!(datasets, tables);
        for table in tables {
            let parts = files(&dir.join(table).join("host=node-1"));
            let rows = match table {
                "kernel" => 1,
                "critical_event" => 2,
                _ => 0,
            };
            assert_eq!(stats.rows[table], rows, "{table}");
            let expected: &[&str] = if rows > 0 {
                &["part-000000.parquet"]
            } else {
                &[]
            };
            assert_eq!(parts, expected, "{table}");
        }
        assert_eq!(stats.files, 2);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_new_session_appends_parts() {
        let dir = scratch("append");
        for _ in 0..2 {
            let mut s = sink(&dir);
            s.write_api(&[api_row(1)]).unwrap();
            s.finish().unwrap();
        }
        let api_dir = dir.join("api/host=node-1");
        assert_eq!(
            files(&api_dir),
            ["part-000000.parquet", "part-000001.parquet"]
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A table directory that disappears under the sink (creating a file in it fails with
    /// ENOENT, as on a broken disk): its parts wait in memory, the oldest are dropped past
    /// the bound, and what is never written is counted lost; the other tables are intact.
    #[test]
    fn unwritable_parts_are_kept_bounded_and_counted() {
        let dir = scratch("unwritable");
        let opts = SinkOptions {
            max_unwritten_bytes: 1,
            ..SinkOptions::new("node-1")
        };
        let mut s = ParquetSink::create(&dir, opts).unwrap();
        fs::remove_dir_all(dir.join("api/host=node-1")).unwrap();
        s.write_api(&[api_row(1), api_row(2)]).unwrap();
        s.write_markers(&[marker_row(1)]).unwrap();
        s.flush().unwrap();
        s.write_api(&[api_row(3)]).unwrap();
        let stats = s.finish().unwrap();
        assert_eq!(stats.rows["api"], 3);
        assert_eq!(stats.rows_lost.get("api"), Some(&3));
        assert_eq!(stats.rows_lost.get("marker"), None);
        assert!(stats.write_errors >= 1);
        assert!(
            stats
                .write_error
                .as_deref()
                .is_some_and(|e| e.contains("No such file")),
            "{stats:?}"
        );
        assert_eq!(files(&dir.join("marker/host=node-1")).len(), 1);
        // The error itself is a critical event (rows of the sink's own).
        assert_eq!(stats.rows["critical_event"], 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn host_must_be_one_path_component() {
        let dir = scratch("host");
        for host in ["", ".", "..", "a/b"] {
            assert!(
                ParquetSink::create(&dir, SinkOptions::new(host)).is_err(),
                "{host:?}"
            );
        }
        assert!(!SinkOptions::default().host.is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A realistic-looking trace: a loop of 10 functions over 2 processes and 4 threads,
    /// runtime calls nested in ACL calls, durations and arguments from small varied sets,
    /// rows in completion order as the correlator emits them (so ids and start times are
    /// only nearly increasing).
    fn synthetic_trace(n: usize) -> Vec<ApiRow> {
        const FUNCS: [(&str, &str, &str); 10] = [
            ("ACL", "aclrtMalloc", "libascendcl.so"),
            ("ACL", "aclrtMemcpy", "libascendcl.so"),
            ("RUNTIME", "rtMemcpy", "libruntime.so"),
            ("ACL", "aclrtLaunchKernel", "libascendcl.so"),
            ("RUNTIME", "rtKernelLaunch", "libruntime.so"),
            ("ACL", "aclrtMemset", "libascendcl.so"),
            ("HCCL", "HcclAllReduce", "libhccl.so"),
            ("ACL", "aclrtRecordEvent", "libascendcl.so"),
            ("ACL", "aclrtSynchronizeStream", "libascendcl.so"),
            ("ACL", "aclrtFree", "libascendcl.so"),
        ];
        const KERNELS: [&str; 4] = ["MatMulV2_1", "AddN_7", "Softmax_3", "TransData_12"];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let mut t = 1_000_000_000_000u64;
        let mut rows: Vec<ApiRow> = (0..n as u64)
            .map(|i| {
                let (domain, name, library) = FUNCS[(i % 10) as usize];
                let thread = (i / 10) % 4;
                let nested = library == "libruntime.so";
                t += 200 + rnd(1800);
                let stream = Some(0x1000_0000 + thread * 0x100);
                let mut args = ApiArgs {
                    device_id: Some(0),
                    ..ApiArgs::default()
                };
                match name {
                    "aclrtMalloc" | "aclrtFree" => {
                        args.bytes = Some(4096 << rnd(8));
                        args.address = Some(0x12c0_0000_0000 + rnd(256) * 0x20_0000);
                    }
                    "aclrtMemcpy" | "rtMemcpy" | "aclrtMemset" => {
                        args.stream = stream;
                        args.bytes = Some(4096 << rnd(8));
                        args.memcpy_kind = Some(MemcpyKind::HostToDevice);
                        args.address = Some(0x12c0_0000_0000 + rnd(256) * 0x20_0000);
                        args.src_address = Some(0x5600_0000_0000 + rnd(64) * 0x1000);
                    }
                    "aclrtLaunchKernel" | "rtKernelLaunch" => {
                        let k = rnd(4);
                        args.stream = stream;
                        args.block_dim = Some(8 << (k % 3));
                        args.handle = Some(0x7f00_0000_1000 + k * 0x40);
                        args.kernel_name = Some(KERNELS[k as usize].to_owned());
                    }
                    "HcclAllReduce" => {
                        args.stream = stream;
                        args.count = Some(1 << (10 + rnd(6)));
                        args.data_type = Some(HcclDataType::Fp32);
                        args.reduce_op = Some(ReduceOp::Sum);
                        args.handle = Some(0x7f00_0002_0000);
                    }
                    _ => args.stream = stream,
                }
                ApiRow {
                    correlation_id: i + 1,
                    parent_correlation_id: nested.then_some(i),
                    domain,
                    name,
                    mspti_domain: (domain != "ACL").then_some(domain),
                    cbid: (domain != "ACL").then_some((i % 10) as u32 + 1),
                    library,
                    pid: 4000 + (thread / 2) as u32,
                    tid: 4000 + thread as u32 * 3,
                    depth: nested as u8,
                    start_ns: t,
                    end_ns: Some(t + 300 + rnd(4000)),
                    incomplete: false,
                    return_value: Some(0),
                    args,
                }
            })
            .collect();
        // A nested call runs inside its parent, the row before it.
        for i in 1..rows.len() {
            if rows[i].depth == 1 {
                let (start, end) = (rows[i - 1].start_ns, rows[i - 1].end_ns.unwrap());
                rows[i].start_ns = start + 50 + rnd(100);
                rows[i].end_ns = Some(end - 20 - rnd(100));
            }
        }
        rows.sort_by_key(|r| r.end_ns);
        rows
    }

    #[test]
    fn api_rows_are_small_on_disk() {
        let dir = scratch("size");
        let rows = synthetic_trace(100_000);
        let mut s = sink(&dir);
        s.write_api(&rows).unwrap();
        let stats = s.finish().unwrap();
        let per_row = stats.bytes as f64 / rows.len() as f64;
        println!(
            "api: {} rows, {} bytes, {per_row:.2} bytes/row",
            rows.len(),
            stats.bytes
        );
        // Where the bytes go, for whoever tunes this next.
        let file = File::open(dir.join("api/host=node-1/part-000000.parquet")).unwrap();
        let meta = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .metadata()
            .clone();
        let mut sizes: Vec<(i64, String)> = meta.row_groups()[0]
            .columns()
            .iter()
            .map(|c| (c.compressed_size(), c.column_path().string()))
            .collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        for (size, name) in sizes.iter().take(8) {
            println!(
                "  {name}: {:.2} bytes/row",
                *size as f64 / rows.len() as f64
            );
        }
        assert!(per_row < 24.0, "{per_row:.2} bytes/row");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Throughput of write_api as the agent calls it: chunks of 1024 fresh (cache-warm)
    /// rows, a flush per 256k rows (the agent flushes once a second). Printed, not asserted:
    /// meaningful in release builds only.
    #[test]
    fn write_api_throughput() {
        let dir = scratch("speed");
        let pool = synthetic_trace(8192);
        let chunks = if cfg!(debug_assertions) { 100 } else { 1024 };
        let mut s = sink(&dir);
        // Thread CPU time rather than wall time, which suffers on a busy machine.
        let cpu = || crate::session::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        let (mut write_ns, mut flush_ns, mut flushes) = (0, 0, 0);
        for (i, chunk) in pool.chunks(1024).cycle().take(chunks).enumerate() {
            let t = cpu();
            s.write_api(chunk).unwrap();
            write_ns += cpu() - t;
            if i % 256 == 255 || i == chunks - 1 {
                let t = cpu();
                s.flush().unwrap();
                flush_ns += cpu() - t;
                flushes += 1;
            }
        }
        let rows = s.finish().unwrap().rows["api"] as f64;
        let per_row = (write_ns + flush_ns) as f64 / rows;
        println!(
            "write_api: {:.2} M rows/s per core ({per_row:.0} ns/row of CPU, flushes included; \
             {:.0} ns/row writing, {:.1} ms CPU per flush)",
            1e3 / per_row,
            write_ns as f64 / rows,
            flush_ns as f64 / flushes as f64 / 1e6
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
