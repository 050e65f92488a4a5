//! Helpers for the end-to-end tests: running `npu-bpftrace` against the installed NPU
//! simulator, reading its Parquet dataset back, and comparing it with the simulator's
//! ground truth.
use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use arrow::{
    array::{Array, AsArray},
    datatypes::{DataType, Float64Type, Int32Type, Int64Type, UInt8Type, UInt32Type, UInt64Type},
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Map, Value};

pub use npu_sim_app::{read_truth, scratch_dir, sim_command, sim_home};

/// One row of a table, column name -> value (null for missing).
pub type Row = Map<String, Value>;

/// The `npu-bpftrace` binary cargo built next to this test executable.
pub fn npu_bpftrace() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/npu-bpftrace
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("npu-bpftrace"))
        .expect("target directory");
    assert!(
        bin.exists(),
        "{} missing: build it with `cargo build -p tracer-user` (cargo test does)",
        bin.display()
    );
    bin
}

/// `npu-bpftrace ARGS` with the simulator's environment (as after sourcing set_env.sh) and
/// ground truth going to `truth`.
pub fn tracer_command(truth: &Path) -> Command {
    let template = sim_command("npu-sim-app", truth);
    let mut cmd = Command::new(npu_bpftrace());
    for (key, value) in template.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    cmd
}

/// Path of a program of the simulator tree.
pub fn sim_bin(prog: &str) -> String {
    sim_home().join("bin").join(prog).display().to_string()
}

/// A finished recording: its dataset, its ground truth and the agent's output.
pub struct Recording {
    pub dir: PathBuf,
    pub truth: PathBuf,
    pub output: Output,
}

impl Recording {
    pub fn table(&self, name: &str) -> Vec<Row> {
        read_table(&self.dir, name)
    }

    pub fn session(&self) -> Value {
        let text = fs::read_to_string(self.dir.join("session.json")).expect("session.json");
        serde_json::from_str(&text).expect("session.json is JSON")
    }

    /// Ground-truth `api` lines of the traced (non-driver) libraries.
    pub fn truth_api(&self) -> Vec<Value> {
        read_truth(&self.truth)
            .into_values()
            .flatten()
            .filter(|l| l["type"] == "api" && l["lib"] != "libascend_hal.so")
            .collect()
    }
}

/// `npu-bpftrace record [extra] --out DIR -- <workload>` with truth on; panics unless both
/// the agent and the workload succeed.
pub fn record(name: &str, extra: &[&str], workload: &[String]) -> Recording {
    let scratch = scratch_dir(name);
    let (dir, truth) = (scratch.join("trace"), scratch.join("truth"));
    fs::create_dir_all(&truth).expect("truth dir");
    let output = tracer_command(&truth)
        .arg("record")
        .args(extra)
        .arg("--out")
        .arg(&dir)
        .arg("--")
        .args(workload)
        .output()
        .expect("running npu-bpftrace");
    assert!(
        output.status.success(),
        "npu-bpftrace record failed: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Recording { dir, truth, output }
}

/// Every row of `DIR/<table>/host=*/part-*.parquet`.
pub fn read_table(dir: &Path, table: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let Ok(hosts) = fs::read_dir(dir.join(table)) else {
        return rows;
    };
    let mut files: Vec<PathBuf> = hosts
        .flatten()
        .flat_map(|h| fs::read_dir(h.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    for file in files {
        let reader = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(&file).unwrap())
            .and_then(|b| b.build())
            .unwrap_or_else(|e| panic!("{} is not valid Parquet: {e}", file.display()));
        for batch in reader {
            let batch = batch.expect("record batch");
            let schema = batch.schema();
            for i in 0..batch.num_rows() {
                let mut row = Row::new();
                for (field, column) in schema.fields().iter().zip(batch.columns()) {
                    row.insert(field.name().clone(), cell(column.as_ref(), i));
                }
                rows.push(row);
            }
        }
    }
    rows
}

fn cell(column: &dyn Array, i: usize) -> Value {
    if column.is_null(i) {
        return Value::Null;
    }
    match column.data_type() {
        DataType::UInt64 => column.as_primitive::<UInt64Type>().value(i).into(),
        DataType::UInt32 => column.as_primitive::<UInt32Type>().value(i).into(),
        DataType::UInt8 => column.as_primitive::<UInt8Type>().value(i).into(),
        DataType::Int64 => column.as_primitive::<Int64Type>().value(i).into(),
        DataType::Int32 => column.as_primitive::<Int32Type>().value(i).into(),
        DataType::Boolean => column.as_boolean().value(i).into(),
        DataType::Float64 => column.as_primitive::<Float64Type>().value(i).into(),
        DataType::Utf8 => column.as_string::<i32>().value(i).into(),
        other => panic!("unexpected column type {other}"),
    }
}

/// Integer view of a JSON number (signed or not) for comparisons.
pub fn int(v: &Value) -> Option<i128> {
    v.as_u64()
        .map(i128::from)
        .or_else(|| v.as_i64().map(i128::from))
}

/// Groups rows by a key.
pub fn group<K: Ord, T>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> K,
) -> BTreeMap<K, Vec<T>> {
    let mut map: BTreeMap<K, Vec<T>> = BTreeMap::new();
    for item in items {
        map.entry(key(&item)).or_default().push(item);
    }
    map
}

pub mod truth;
