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
    datatypes::{DataType, Int64Type, UInt64Type},
    record_batch::RecordBatch,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

/// Every table the agent writes, in the order the report lists their row counts.
pub const TABLES: [&str; 8] = [
    "api",
    "marker",
    "kernel",
    "memcpy",
    "memset",
    "hccl",
    "memory",
    "critical_event",
];

/// A dataset as read from disk.
#[derive(Debug)]
pub struct Dataset {
    pub dir: PathBuf,
    /// `session.json`, when there is one (a dataset merged from several hosts may lack it).
    pub session: Option<Value>,
    /// Every `host=<h>` partition seen in any table, with or without files.
    pub hosts: BTreeSet<String>,
    tables: BTreeMap<&'static str, Table>,
}

impl Dataset {
    /// Reads every part of every table under `dir`. Fails with a one-line reason when `dir`
    /// is not a dataset at all, or when a file in it is not readable Parquet.
    pub fn open(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            bail!("{}: no such directory", dir.display());
        }
        let session = read_session(dir)?;
        let mut hosts = BTreeSet::new();
        let mut tables = BTreeMap::new();
        for name in TABLES {
            tables.insert(name, Table::read(dir, name, &mut hosts)?);
        }
        if session.is_none() && !tables.values().any(|t| t.present) {
            bail!(
                "{} is not an npu-bpftrace dataset: it has no session.json and no table \
                 directories (api/, kernel/, ...); pass the directory given to `record --out`",
                dir.display()
            );
        }
        if let Some(host) = session.as_ref().and_then(|s| s["host"].as_str()) {
            hosts.insert(host.to_owned());
        }
        Ok(Self {
            dir: dir.to_owned(),
            session,
            hosts,
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

fn read_session(dir: &Path) -> Result<Option<Value>> {
    let path = dir.join("session.json");
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    Ok(Some(value))
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
    fn read(root: &Path, name: &'static str, hosts: &mut BTreeSet<String>) -> Result<Self> {
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
                for batch in read_parquet(&file)? {
                    table.batches.push((host.clone(), batch));
                }
            }
            hosts.insert(host);
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

fn read_parquet(path: &Path) -> Result<Vec<RecordBatch>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .with_context(|| format!("{} is not a readable Parquet file", path.display()))?;
    reader
        .map(|batch| batch.with_context(|| format!("reading {}", path.display())))
        .collect()
}
