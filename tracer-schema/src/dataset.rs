//! Reading a dataset back: `DIR/session.json` and every `DIR/<table>/host=<h>/part-*.parquet`.
//!
//! Opening a dataset reads only the files' footers (schema version, row counts, columns);
//! rows are read when asked for, either streamed a batch at a time with only the columns
//! a tool needs ([`Table::scan`]: `report` and `export` keep their memory independent of
//! the trace's size), or a whole column at once for small datasets and tests.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs::{self, File},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use arrow::{
    array::{Array, ArrayRef, AsArray, StringArray},
    compute::cast,
    datatypes::{DataType, Float64Type, Int32Type, Int64Type, UInt8Type, UInt32Type, UInt64Type},
    record_batch::RecordBatch,
};
use parquet::arrow::{
    ProjectionMask,
    arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder},
};
use serde_json::{Map, Value};

use crate::{
    session::{Session, check_version},
    tables::TABLES,
};

/// Key of the schema version in every Parquet file's key-value metadata.
pub const SCHEMA_VERSION_KEY: &str = "npu_bpftrace.schema_version";

/// Rows per batch that [`Table::scan`] yields: large enough to amortize the per-batch work,
/// small enough that a batch of the widest table stays a few MiB.
pub const BATCH_ROWS: usize = 8192;

/// One row as a JSON object, column name -> value (null for nulls): for tests and tools
/// that compare rows with other JSON (the simulator's ground truth).
pub type JsonRow = Map<String, Value>;

/// A dataset as found on disk.
#[derive(Debug)]
pub struct Dataset {
    pub dir: PathBuf,
    /// `session.json`, when there is one (a dataset merged from several hosts may lack it).
    pub session: Option<Session>,
    /// Every `host=<h>` partition seen in any table, with or without files.
    pub hosts: BTreeSet<String>,
    tables: BTreeMap<&'static str, Table>,
    /// Parts that could not be read and were skipped ([`Dataset::open_skipping_corrupt`]),
    /// with why.
    pub skipped: Vec<(PathBuf, String)>,
}

impl Dataset {
    /// Finds every part of every table under `dir` and reads their footers. Fails with a
    /// one-line reason when `dir` is not a dataset at all, or when a file in it is not
    /// readable Parquet of this schema version.
    pub fn open(dir: &Path) -> Result<Self> {
        Self::read(dir, false)
    }

    /// [`Dataset::open`], but a part whose footer is not readable Parquet (truncated,
    /// damaged) is skipped and listed in [`Dataset::skipped`] instead of failing the whole
    /// dataset. Parts of another schema version still fail.
    pub fn open_skipping_corrupt(dir: &Path) -> Result<Self> {
        Self::read(dir, true)
    }

    fn read(dir: &Path, skip_corrupt: bool) -> Result<Self> {
        if !dir.is_dir() {
            bail!("{}: no such directory", dir.display());
        }
        let session = read_session(dir)?;
        let mut hosts = BTreeSet::new();
        let mut tables = BTreeMap::new();
        let mut skipped = Vec::new();
        for name in TABLES {
            let mut found = Found {
                hosts: &mut hosts,
                skipped: skip_corrupt.then_some(&mut skipped),
            };
            tables.insert(name, Table::open(dir, name, &mut found)?);
        }
        if session.is_none() && !tables.values().any(|t| t.present) {
            bail!(
                "{} is not an npu-bpftrace dataset: it has no session.json and no table \
                 directories (api/, kernel/, ...); pass the directory given to `record --out`",
                dir.display()
            );
        }
        if let Some(session) = &session {
            hosts.insert(session.host.clone());
        }
        Ok(Self {
            dir: dir.to_owned(),
            session,
            hosts,
            tables,
            skipped,
        })
    }

    /// Every table of [`TABLES`], empty (and not `present`) where the dataset lacks it.
    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.values()
    }

    /// Table `name`: empty (and not `present`) where the dataset lacks it, or when `name`
    /// is not one of [`TABLES`] (a table of a newer schema that this build does not know).
    pub fn table(&self, name: &str) -> &Table {
        static EMPTY: Table = Table {
            name: "",
            present: false,
            parts: Vec::new(),
            columns: Vec::new(),
        };
        self.tables.get(name).unwrap_or(&EMPTY)
    }

    /// Rows in all tables, from the files' footers: the total of a progress bar.
    pub fn rows(&self) -> u64 {
        self.tables().map(|t| t.rows() as u64).sum()
    }
}

fn read_session(dir: &Path) -> Result<Option<Session>> {
    if !dir.join("session.json").exists() {
        return Ok(None);
    }
    Session::read(dir).map(Some)
}

/// What opening the tables collects besides parts.
struct Found<'a> {
    hosts: &'a mut BTreeSet<String>,
    /// Where corrupt parts go when they are skipped (None: they fail the open).
    skipped: Option<&'a mut Vec<(PathBuf, String)>>,
}

/// One complete Parquet file of a table.
#[derive(Debug)]
struct Part {
    host: String,
    path: PathBuf,
    rows: usize,
}

/// The parts of one table, in host then part order; rows are read on demand.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    /// The table's directory exists (it may still hold no rows).
    pub present: bool,
    parts: Vec<Part>,
    /// Column names, from the first part.
    columns: Vec<String>,
}

impl Table {
    /// Finds `DIR/<name>/host=*/part-*.parquet` and reads their footers. Hidden
    /// `.part-*.tmp` files are parts still being written (or left by a killed agent) and
    /// are skipped, as every dataset reader does.
    fn open(root: &Path, name: &'static str, found: &mut Found) -> Result<Self> {
        let dir = root.join(name);
        let mut table = Self {
            name,
            present: dir.is_dir(),
            parts: Vec::new(),
            columns: Vec::new(),
        };
        if !table.present {
            return Ok(table);
        }
        for (host, host_dir) in partitions(&dir)? {
            for path in part_files(&host_dir)? {
                let builder = match (footer(&path)?, found.skipped.as_deref_mut()) {
                    (Ok(builder), _) => builder,
                    (Err(e), Some(skipped)) => {
                        skipped.push((path, format!("{e:#}")));
                        continue;
                    }
                    (Err(e), None) => return Err(e),
                };
                if table.columns.is_empty() {
                    let schema = builder.schema();
                    table.columns = schema.fields().iter().map(|f| f.name().clone()).collect();
                }
                let rows = builder.metadata().file_metadata().num_rows();
                let rows = usize::try_from(rows).unwrap_or(0);
                table.parts.push(Part {
                    host: host.clone(),
                    path,
                    rows,
                });
            }
            found.hosts.insert(host);
        }
        Ok(table)
    }

    /// Rows in the table, from the files' footers.
    pub fn rows(&self) -> usize {
        self.parts.iter().map(|p| p.rows).sum()
    }

    /// Whether the table's files have `column` (a table without files has none).
    pub fn has_column(&self, column: &str) -> bool {
        self.columns.iter().any(|c| c == column)
    }

    /// The rows, a batch of at most [`BATCH_ROWS`] at a time, with only `columns` read
    /// from the files. A column the table does not have is an error (another schema
    /// version); ask [`Table::has_column`] first for optional ones.
    pub fn scan<'t>(&'t self, columns: &[&str]) -> Result<Scan<'t>> {
        for column in columns {
            if !self.parts.is_empty() && !self.has_column(column) {
                bail!(
                    "table {} has no column `{column}` (another schema version?)",
                    self.name
                );
            }
        }
        Ok(Scan {
            table: self,
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            next_part: 0,
            current: None,
        })
    }

    /// The host partition of each row.
    pub fn hosts(&self) -> Vec<&str> {
        self.parts
            .iter()
            .flat_map(|p| std::iter::repeat_n(p.host.as_str(), p.rows))
            .collect()
    }

    /// An unsigned integer column (any integer type; negative values read as null).
    pub fn u64s(&self, column: &str) -> Result<Vec<Option<u64>>> {
        self.column(column, |b, c| b.u64s(c))
    }

    /// A signed integer column.
    pub fn i64s(&self, column: &str) -> Result<Vec<Option<i64>>> {
        self.column(column, |b, c| b.i64s(c))
    }

    pub fn strings(&self, column: &str) -> Result<Vec<Option<String>>> {
        self.column(column, |b, c| {
            let text = b.text(c)?;
            Ok((0..b.rows())
                .map(|i| text.get(i).map(str::to_owned))
                .collect())
        })
    }

    pub fn bools(&self, column: &str) -> Result<Vec<Option<bool>>> {
        self.column(column, |b, c| b.bools(c))
    }

    /// `end_ns - start_ns` per row; None where either is null (a task or call that never
    /// completed) or the interval is inverted.
    pub fn durations(&self) -> Result<Vec<Option<u64>>> {
        self.column_of(&["start_ns", "end_ns"], |b, _| b.durations())
    }

    /// Every row as a JSON object, in part order.
    pub fn json_rows(&self) -> Result<Vec<JsonRow>> {
        let columns: Vec<&str> = self.columns.iter().map(String::as_str).collect();
        let mut rows = Vec::with_capacity(self.rows());
        for batch in self.scan(&columns)? {
            let batch = batch?;
            let schema = batch.batch.schema();
            for i in 0..batch.rows() {
                let mut row = JsonRow::new();
                for (field, column) in schema.fields().iter().zip(batch.batch.columns()) {
                    let value = json_cell(column.as_ref(), i)
                        .with_context(|| format!("column {}.{}", self.name, field.name()))?;
                    row.insert(field.name().clone(), value);
                }
                rows.push(row);
            }
        }
        Ok(rows)
    }

    /// A whole column, read with `read` from each batch.
    fn column<T>(
        &self,
        column: &str,
        read: impl Fn(&Batch, &str) -> Result<Vec<Option<T>>>,
    ) -> Result<Vec<Option<T>>> {
        self.column_of(&[column], |b, c| read(b, c))
    }

    fn column_of<T>(
        &self,
        columns: &[&str],
        read: impl Fn(&Batch, &str) -> Result<Vec<Option<T>>>,
    ) -> Result<Vec<Option<T>>> {
        let mut out = Vec::with_capacity(self.rows());
        for batch in self.scan(columns)? {
            out.extend(read(&batch?, columns[0])?);
        }
        Ok(out)
    }
}

/// The batches of a [`Table::scan`], part after part.
pub struct Scan<'t> {
    table: &'t Table,
    columns: Vec<String>,
    next_part: usize,
    current: Option<(&'t str, PathBuf, ParquetRecordBatchReader)>,
}

impl<'t> Scan<'t> {
    /// Opens the next part with the scan's columns; None after the last.
    fn open_next(&mut self) -> Result<bool> {
        let Some(part) = self.table.parts.get(self.next_part) else {
            return Ok(false);
        };
        self.next_part += 1;
        let builder = reader(&part.path)?;
        let schema = builder.schema().clone();
        let indices = self
            .columns
            .iter()
            .map(|c| {
                schema.index_of(c).with_context(|| {
                    format!(
                        "{} has no column `{c}` (another schema version?)",
                        part.path.display()
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
        let reader = builder
            .with_projection(mask)
            .with_batch_size(BATCH_ROWS)
            .build()
            .with_context(|| format!("{} is not a readable Parquet file", part.path.display()))?;
        self.current = Some((part.host.as_str(), part.path.clone(), reader));
        Ok(true)
    }
}

impl<'t> Iterator for Scan<'t> {
    type Item = Result<Batch<'t>>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((host, path, reader)) = &mut self.current {
                match reader.next() {
                    Some(Ok(batch)) => {
                        return Some(Ok(Batch {
                            table: self.table.name,
                            host,
                            batch,
                        }));
                    }
                    Some(Err(e)) => {
                        let e =
                            anyhow::Error::new(e).context(format!("reading {}", path.display()));
                        self.current = None;
                        self.next_part = self.table.parts.len();
                        return Some(Err(e));
                    }
                    None => self.current = None,
                }
            }
            match self.open_next() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    self.next_part = self.table.parts.len();
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Up to [`BATCH_ROWS`] rows of one part of a table, with the columns of the scan.
pub struct Batch<'t> {
    table: &'static str,
    /// The host partition the rows come from.
    pub host: &'t str,
    batch: RecordBatch,
}

impl Batch<'_> {
    pub fn rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// An unsigned integer column (any integer type; negative values read as null).
    pub fn u64s(&self, column: &str) -> Result<Vec<Option<u64>>> {
        let values = self.cast(column, &DataType::UInt64)?;
        Ok(values.as_primitive::<UInt64Type>().iter().collect())
    }

    /// A signed integer column.
    pub fn i64s(&self, column: &str) -> Result<Vec<Option<i64>>> {
        let values = self.cast(column, &DataType::Int64)?;
        Ok(values.as_primitive::<Int64Type>().iter().collect())
    }

    pub fn f64s(&self, column: &str) -> Result<Vec<Option<f64>>> {
        let values = self.cast(column, &DataType::Float64)?;
        Ok(values.as_primitive::<Float64Type>().iter().collect())
    }

    pub fn bools(&self, column: &str) -> Result<Vec<Option<bool>>> {
        let values = self.cast(column, &DataType::Boolean)?;
        Ok(values.as_boolean().iter().collect())
    }

    /// A text column, read in place.
    pub fn text(&self, column: &str) -> Result<Text> {
        let values = self.cast(column, &DataType::Utf8)?;
        Ok(Text(values.as_string::<i32>().clone()))
    }

    /// `end_ns - start_ns` per row (both columns must be scanned); None where either is
    /// null or the interval is inverted.
    pub fn durations(&self) -> Result<Vec<Option<u64>>> {
        let (start, end) = (self.u64s("start_ns")?, self.u64s("end_ns")?);
        Ok(start
            .iter()
            .zip(&end)
            .map(|(s, e)| e.zip(*s).and_then(|(e, s)| e.checked_sub(s)))
            .collect())
    }

    /// `column` cast to `to`.
    fn cast(&self, column: &str, to: &DataType) -> Result<ArrayRef> {
        let name = self.table;
        let values = self.batch.column_by_name(column).with_context(|| {
            format!("column `{column}` of table {name} was not scanned or does not exist")
        })?;
        cast(values, to).with_context(|| {
            format!(
                "column {name}.{column} of type {} is not {to}",
                values.data_type()
            )
        })
    }
}

/// A text column of a [`Batch`].
pub struct Text(StringArray);

impl Text {
    /// Row `i`'s value; None when it is null.
    pub fn get(&self, i: usize) -> Option<&str> {
        (!self.0.is_null(i)).then(|| self.0.value(i))
    }
}

/// `(host, directory)` of each `host=<h>` partition under a table directory, sorted.
fn partitions(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        let Some(host) = name.to_str().and_then(|n| n.strip_prefix("host=")) else {
            continue;
        };
        if entry.path().is_dir() {
            out.push((host.to_owned(), entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The complete `part-*.parquet` files of a partition, in part order.
fn part_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("listing {}", dir.display()))?
            .path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("part-") && name.ends_with(".parquet") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// A reader of the Parquet file at `path`, after checking its schema version.
fn reader(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>> {
    footer(path)?
}

/// [`reader`], with two kinds of failure: the outer error is a part that cannot be opened
/// or is of another schema version, the inner one a file that is not readable Parquet
/// (which a lenient open skips).
fn footer(path: &Path) -> Result<Result<ParquetRecordBatchReaderBuilder<File>>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let builder = match ParquetRecordBatchReaderBuilder::try_new(file) {
        Ok(builder) => builder,
        Err(e) => {
            return Ok(Err(anyhow::Error::new(e).context(format!(
                "{} is not a readable Parquet file",
                path.display()
            ))));
        }
    };
    let version = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|kv| kv.key == SCHEMA_VERSION_KEY))
        .and_then(|kv| kv.value.as_deref())
        .and_then(|v| v.parse().ok());
    check_version(path, version)?;
    Ok(Ok(builder))
}

/// Value `i` of `column` as JSON.
fn json_cell(column: &dyn Array, i: usize) -> Result<Value> {
    if column.is_null(i) {
        return Ok(Value::Null);
    }
    Ok(match column.data_type() {
        DataType::UInt64 => column.as_primitive::<UInt64Type>().value(i).into(),
        DataType::UInt32 => column.as_primitive::<UInt32Type>().value(i).into(),
        DataType::UInt8 => column.as_primitive::<UInt8Type>().value(i).into(),
        DataType::Int64 => column.as_primitive::<Int64Type>().value(i).into(),
        DataType::Int32 => column.as_primitive::<Int32Type>().value(i).into(),
        DataType::Boolean => column.as_boolean().value(i).into(),
        DataType::Float64 => column.as_primitive::<Float64Type>().value(i).into(),
        DataType::Utf8 => column.as_string::<i32>().value(i).into(),
        other => bail!("unexpected column type {other}"),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::{
        array::UInt64Array,
        datatypes::{Field, Schema},
    };
    use parquet::{
        arrow::ArrowWriter, file::metadata::KeyValue, file::properties::WriterProperties,
    };

    use super::*;

    /// A one-column part stamped with schema `version` (none: no stamp).
    fn write_part(path: &Path, version: Option<&str>) {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::UInt64, false)]));
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(UInt64Array::from(vec![1]))])
                .expect("batch");
        let kv = version.map(|v| vec![KeyValue::new(SCHEMA_VERSION_KEY.to_owned(), v.to_owned())]);
        let props = WriterProperties::builder()
            .set_key_value_metadata(kv)
            .build();
        let file = File::create(path).expect("create");
        let mut writer = ArrowWriter::try_new(file, schema, Some(props)).expect("writer");
        writer.write(&batch).expect("write");
        writer.close().expect("close");
    }

    #[test]
    fn parts_of_another_schema_version_are_refused() {
        let dir =
            std::env::temp_dir().join(format!("tracer-schema-versions-{}", std::process::id()));
        let part = dir.join("part-000000.parquet");
        fs::create_dir_all(&dir).expect("dir");
        write_part(&part, Some(&crate::SCHEMA_VERSION.to_string()));
        let rows = reader(&part)
            .expect("current version")
            .metadata()
            .file_metadata()
            .num_rows();
        assert_eq!(rows, 1);
        for (stamp, says) in [(Some("1"), "older"), (None, "older"), (Some("99"), "newer")] {
            write_part(&part, stamp);
            let err = format!("{:#}", reader(&part).expect_err("another version"));
            assert!(
                err.contains(&format!("{says} than this npu-bpftrace reads")),
                "{err}"
            );
        }
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
