//! Reading a dataset back: `DIR/session.json` and every `DIR/<table>/host=<h>/part-*.parquet`,
//! into plain column vectors that the summary aggregates.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs::{self, File},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use arrow::{
    array::{Array, ArrayRef, AsArray},
    compute::cast,
    datatypes::{DataType, Float64Type, Int32Type, Int64Type, UInt8Type, UInt32Type, UInt64Type},
    record_batch::RecordBatch,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Map, Value};

use crate::{
    session::{Session, check_version},
    tables::TABLES,
};

/// Key of the schema version in every Parquet file's key-value metadata.
pub const SCHEMA_VERSION_KEY: &str = "npu_bpftrace.schema_version";

/// One row as a JSON object, column name -> value (null for nulls): for tests and tools
/// that compare rows with other JSON (the simulator's ground truth).
pub type JsonRow = Map<String, Value>;

/// A dataset as read from disk.
#[derive(Debug)]
pub struct Dataset {
    pub dir: PathBuf,
    /// `session.json`, when there is one (a dataset merged from several hosts may lack it).
    pub session: Option<Session>,
    /// Every `host=<h>` partition seen in any table, with or without files.
    pub hosts: BTreeSet<String>,
    /// Parts that could not be read and were skipped ([`Dataset::open_skipping_corrupt`]),
    /// with why.
    pub skipped: Vec<(PathBuf, String)>,
    tables: BTreeMap<&'static str, Table>,
}

impl Dataset {
    /// Reads every part of every table under `dir`. Fails with a one-line reason when `dir`
    /// is not a dataset at all, or when a file in it is not readable Parquet.
    pub fn open(dir: &Path) -> Result<Self> {
        Self::read(dir, false)
    }

    /// [`Dataset::open`], but a part that is not readable Parquet (truncated, damaged) is
    /// skipped and listed in [`Dataset::skipped`] instead of failing the whole dataset.
    /// Parts of another schema version still fail.
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
            tables.insert(name, Table::read(dir, name, &mut found)?);
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
            skipped,
            tables,
        })
    }

    /// Every table of [`TABLES`], empty (and not `present`) where the dataset lacks it.
    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.values()
    }

    /// Table `name` of [`TABLES`].
    pub fn table(&self, name: &str) -> &Table {
        static EMPTY: Table = Table {
            name: "",
            present: false,
            batches: Vec::new(),
        };
        self.tables.get(name).unwrap_or(&EMPTY)
    }
}

fn read_session(dir: &Path) -> Result<Option<Session>> {
    if !dir.join("session.json").exists() {
        return Ok(None);
    }
    Session::read(dir).map(Some)
}

/// What reading the tables collects besides rows.
struct Found<'a> {
    hosts: &'a mut BTreeSet<String>,
    /// Where corrupt parts go when they are skipped (None: they fail the read).
    skipped: Option<&'a mut Vec<(PathBuf, String)>>,
}

/// The rows of one table, as record batches tagged with their host partition.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    /// The table's directory exists (it may still hold no rows).
    pub present: bool,
    batches: Vec<(String, RecordBatch)>,
}

impl Table {
    /// Reads `DIR/<name>/host=*/part-*.parquet`. Hidden `.part-*.tmp` files are parts
    /// still being written (or left by a killed agent) and are skipped, as every dataset
    /// reader does.
    fn read(root: &Path, name: &'static str, found: &mut Found<'_>) -> Result<Self> {
        let dir = root.join(name);
        let mut table = Self {
            name,
            present: dir.is_dir(),
            batches: Vec::new(),
        };
        if !table.present {
            return Ok(table);
        }
        for (host, host_dir) in partitions(&dir)? {
            for file in part_files(&host_dir)? {
                let batches = match (read_parquet(&file)?, found.skipped.as_deref_mut()) {
                    (Ok(batches), _) => batches,
                    (Err(e), Some(skipped)) => {
                        skipped.push((file, format!("{e:#}")));
                        continue;
                    }
                    (Err(e), None) => return Err(e),
                };
                for batch in batches {
                    table.batches.push((host.clone(), batch));
                }
            }
            found.hosts.insert(host);
        }
        Ok(table)
    }

    pub fn rows(&self) -> usize {
        self.batches.iter().map(|(_, b)| b.num_rows()).sum()
    }

    /// The host partition of each row.
    pub fn hosts(&self) -> Vec<&str> {
        self.batches
            .iter()
            .flat_map(|(host, b)| std::iter::repeat_n(host.as_str(), b.num_rows()))
            .collect()
    }

    /// An unsigned integer column (any integer type; negative values read as null).
    pub fn u64s(&self, column: &str) -> Result<Vec<Option<u64>>> {
        self.collect(column, &DataType::UInt64, |a, out| {
            out.extend(a.as_primitive::<UInt64Type>().iter());
        })
    }

    /// A signed integer column.
    pub fn i64s(&self, column: &str) -> Result<Vec<Option<i64>>> {
        self.collect(column, &DataType::Int64, |a, out| {
            out.extend(a.as_primitive::<Int64Type>().iter());
        })
    }

    pub fn strings(&self, column: &str) -> Result<Vec<Option<String>>> {
        self.collect(column, &DataType::Utf8, |a, out| {
            out.extend(a.as_string::<i32>().iter().map(|s| s.map(str::to_owned)));
        })
    }

    pub fn bools(&self, column: &str) -> Result<Vec<Option<bool>>> {
        self.collect(column, &DataType::Boolean, |a, out| {
            out.extend(a.as_boolean().iter());
        })
    }

    /// Every row as a JSON object, in part order.
    pub fn json_rows(&self) -> Result<Vec<JsonRow>> {
        let mut rows = Vec::with_capacity(self.rows());
        for (_, batch) in &self.batches {
            let schema = batch.schema();
            for i in 0..batch.num_rows() {
                let mut row = JsonRow::new();
                for (field, column) in schema.fields().iter().zip(batch.columns()) {
                    let value = json_cell(column.as_ref(), i)
                        .with_context(|| format!("column {}.{}", self.name, field.name()))?;
                    row.insert(field.name().clone(), value);
                }
                rows.push(row);
            }
        }
        Ok(rows)
    }

    /// `end_ns - start_ns` per row; None where either is null (a task or call that never
    /// completed) or the interval is inverted.
    pub fn durations(&self) -> Result<Vec<Option<u64>>> {
        let (start, end) = (self.u64s("start_ns")?, self.u64s("end_ns")?);
        Ok(start
            .iter()
            .zip(&end)
            .map(|(s, e)| e.zip(*s).and_then(|(e, s)| e.checked_sub(s)))
            .collect())
    }

    /// Casts `column` of every batch to `to` and appends its values with `append`.
    fn collect<T>(
        &self,
        column: &str,
        to: &DataType,
        append: impl Fn(&ArrayRef, &mut Vec<Option<T>>),
    ) -> Result<Vec<Option<T>>> {
        let mut out = Vec::with_capacity(self.rows());
        for (_, batch) in &self.batches {
            let name = self.name;
            let values = batch.column_by_name(column).with_context(|| {
                format!("table {name} has no column `{column}` (another schema version?)")
            })?;
            let values = cast(values, to).with_context(|| {
                format!(
                    "column {name}.{column} of type {} is not {to}",
                    values.data_type()
                )
            })?;
            append(&values, &mut out);
        }
        Ok(out)
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

/// The batches of one part: the outer error is a part of another schema version, the inner
/// one a part that is not readable Parquet (which a lenient reader may skip).
fn read_parquet(path: &Path) -> Result<Result<Vec<RecordBatch>>> {
    let unreadable = |e| {
        anyhow::Error::new(e).context(format!("{} is not a readable Parquet file", path.display()))
    };
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let builder = match ParquetRecordBatchReaderBuilder::try_new(file) {
        Ok(builder) => builder,
        Err(e) => return Ok(Err(unreadable(e))),
    };
    let version = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|kv| kv.key == SCHEMA_VERSION_KEY))
        .and_then(|kv| kv.value.as_deref())
        .and_then(|v| v.parse().ok());
    check_version(path, version)?;
    let reader = match builder.build() {
        Ok(reader) => reader,
        Err(e) => return Ok(Err(unreadable(e))),
    };
    Ok(reader
        .map(|batch| batch.with_context(|| format!("reading {}", path.display())))
        .collect())
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
        assert_eq!(
            read_parquet(&part)
                .expect("current version")
                .expect("readable")[0]
                .num_rows(),
            1
        );
        for (stamp, says) in [(Some("1"), "older"), (None, "older"), (Some("99"), "newer")] {
            write_part(&part, stamp);
            let err = format!("{:#}", read_parquet(&part).expect_err("another version"));
            assert!(
                err.contains(&format!("{says} than this npu-bpftrace reads")),
                "{err}"
            );
        }
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
