//! Output tables: how each row type becomes Arrow columns.
//!
//! A table is a struct of Arrow builders implementing [`Table`], declared with `table!`:
//! each column (name, builder, nullability, encoding, and how to read it from a row) is
//! written once, and the struct, its appends and its column list are generated from that.
//! The schema and the Parquet encodings are derived from the column list, so they cannot
//! disagree with the batches. Adding a table means adding one `table!`; the Parquet writer
//! is generic over it. The contract is `docs/schema.md`.
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder,
    PrimitiveBuilder, StringBuilder, UInt8Builder, UInt32Builder, UInt64Builder,
};
use arrow::datatypes::{ArrowPrimitiveType, DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use crate::rows::{
    ApiRow, CriticalEventRow, HcclRow, KernelRow, MarkerRow, MemcpyRow, MemoryRow, MemsetRow,
    OpRow, SyncRow,
};

/// Rows of one table, buffered in one Arrow builder per column.
pub trait Table: Sized {
    type Row;
    /// Dataset directory name under the output directory.
    const NAME: &'static str;

    /// Builders sized for `rows` rows, so appending does not reallocate.
    fn with_capacity(rows: usize) -> Self;
    fn append(&mut self, rows: &[Self::Row]);
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The buffered rows as columns, in schema order.
    fn into_columns(self) -> Vec<Column>;
}

/// How a column is stored in Parquet (all columns are zstd-compressed on top).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnEncoding {
    /// A dictionary of the distinct values: names, handles, sizes, addresses, which repeat.
    Dictionary,
    /// DELTA_BINARY_PACKED: integers that mostly increase row to row (ids, timestamps,
    /// device counters, sequence numbers) take a few bits per row, where a dictionary
    /// would not help. Integers only.
    Delta,
    /// Plain values: small low-entropy integers (pids, tids) that zstd alone shrinks as
    /// well, where a dictionary's per-value hashing would double the encoding cost; and
    /// floats (bandwidths), which rarely repeat.
    Plain,
}

/// One output column: its name, whether it may hold nulls, its encoding and its values.
pub struct Column {
    pub name: &'static str,
    pub nullable: bool,
    pub encoding: ColumnEncoding,
    values: ArrayRef,
}

impl Column {
    pub fn data_type(&self) -> &DataType {
        self.values.data_type()
    }
}

/// A column that never holds nulls.
fn required(name: &'static str, encoding: ColumnEncoding, mut b: impl ArrayBuilder) -> Column {
    let values = b.finish();
    Column {
        name,
        nullable: false,
        encoding,
        values,
    }
}

/// A column from an `Option` field: null where the field is `None`.
fn optional(name: &'static str, encoding: ColumnEncoding, mut b: impl ArrayBuilder) -> Column {
    let values = b.finish();
    Column {
        name,
        nullable: true,
        encoding,
        values,
    }
}

/// The columns of table `T`, without rows: its schema and encodings.
pub fn columns<T: Table>() -> Vec<Column> {
    T::with_capacity(0).into_columns()
}

/// The Arrow schema of `columns`.
pub fn schema(columns: &[Column]) -> SchemaRef {
    let fields: Vec<Field> = columns
        .iter()
        .map(|c| Field::new(c.name, c.data_type().clone(), c.nullable))
        .collect();
    Arc::new(Schema::new(fields))
}

/// Drains `table` into a batch of `schema` (that of [`columns`]).
pub fn into_batch<T: Table>(table: T, schema: &SchemaRef) -> Result<RecordBatch> {
    let arrays = table.into_columns().into_iter().map(|c| c.values).collect();
    RecordBatch::try_new(schema.clone(), arrays)
        .with_context(|| format!("building a record batch of table {}", T::NAME))
}

/// An Arrow builder that `table!` can size for a batch.
trait ColumnBuilder: ArrayBuilder {
    /// Room for `rows` values, and for strings `bytes_per_row` bytes of data per row, so
    /// that appending a batch does not reallocate.
    fn for_rows(rows: usize, bytes_per_row: usize) -> Self;
}

impl<T: ArrowPrimitiveType> ColumnBuilder for PrimitiveBuilder<T> {
    fn for_rows(rows: usize, _: usize) -> Self {
        Self::with_capacity(rows)
    }
}

impl ColumnBuilder for BooleanBuilder {
    fn for_rows(rows: usize, _: usize) -> Self {
        Self::with_capacity(rows)
    }
}

impl ColumnBuilder for StringBuilder {
    fn for_rows(rows: usize, bytes_per_row: usize) -> Self {
        Self::with_capacity(rows, rows * bytes_per_row)
    }
}

/// Declares a table: a struct with one builder per column, and its [`Table`] impl.
///
/// ```text
/// table! {
///     /// Table `t`: ...
///     TTable "t" for r: TRow {
///         column: Builder(bytes per row) required|optional Encoding = value;
///         ...
///     }
/// }
/// ```
///
/// The column is named after its builder field. `value` reads it from row `r` (a `&TRow`):
/// a value for `required` columns, an `Option` for `optional` ones. `(bytes per row)`
/// sizes string builders and may be left out. A leading `device_task(expr);` first adds
/// the fields of the [`DeviceTask`](crate::rows::DeviceTask) `expr`, flattened.
macro_rules! table {
    (@append required, $builder:expr, $value:expr) => {
        $builder.append_value($value)
    };
    (@append optional, $builder:expr, $value:expr) => {
        $builder.append_option($value)
    };
    (@bytes) => {
        0
    };
    (@bytes $bytes:expr) => {
        $bytes
    };
    (
        $(#[$doc:meta])*
        $table:ident $name:literal for $r:ident: $row:ty {
            device_task($task:expr);
            $($columns:tt)*
        }
    ) => {
        table! {
            $(#[$doc])*
            $table $name for $r: $row {
                correlation_id: UInt64Builder required Delta = $task.correlation_id;
                pid: UInt32Builder required Plain = $task.pid;
                tid: UInt32Builder required Plain = $task.tid;
                device_id: UInt32Builder required Plain = $task.device_id;
                stream_id: UInt32Builder required Plain = $task.stream_id;
                // Per-stream sequence numbers: they mostly step by one.
                task_id: UInt32Builder required Delta = $task.task_id;
                start_ns: UInt64Builder optional Delta = $task.start_ns;
                end_ns: UInt64Builder optional Delta = $task.end_ns;
                device_start_cnt: UInt64Builder optional Delta = $task.device_start_cnt;
                device_end_cnt: UInt64Builder optional Delta = $task.device_end_cnt;
                submit_ns: UInt64Builder required Delta = $task.submit_ns;
                status: UInt32Builder optional Plain = $task.status;
                op_correlation_id: UInt64Builder optional Delta = $task.op_correlation_id;
                op_name: StringBuilder(SHORT_STR) optional Dictionary = $task.op_name;
                $($columns)*
            }
        }
    };
    (
        $(#[$doc:meta])*
        $table:ident $name:literal for $r:ident: $row:ty {
            $($col:ident: $builder:ident $(($bytes:expr))? $null:ident $enc:ident = $value:expr;)*
        }
    ) => {
        $(#[$doc])*
        pub struct $table {
            rows: usize,
            $($col: $builder,)*
        }

        impl Table for $table {
            type Row = $row;
            const NAME: &'static str = $name;

            fn with_capacity(n: usize) -> Self {
                Self {
                    rows: 0,
                    $($col: ColumnBuilder::for_rows(n, table!(@bytes $($bytes)?)),)*
                }
            }

            fn append(&mut self, rows: &[$row]) {
                self.rows += rows.len();
                for $r in rows {
                    $(table!(@append $null, self.$col, $value);)*
                }
            }

            fn len(&self) -> usize {
                self.rows
            }

            fn into_columns(self) -> Vec<Column> {
                vec![$($null(stringify!($col), ColumnEncoding::$enc, self.$col),)*]
            }
        }
    };
}

/// Estimated bytes of `&'static str` data per row, to size string builders.
const SHORT_STR: usize = 16;

table! {
    /// Table `api`: one row per traced API call, `ApiArgs` flattened into top-level columns.
    ApiTable "api" for r: ApiRow {
        correlation_id: UInt64Builder required Delta = r.correlation_id;
        parent_correlation_id: UInt64Builder optional Delta = r.parent_correlation_id;
        domain: StringBuilder(8) required Dictionary = r.domain;
        name: StringBuilder(2 * SHORT_STR) required Dictionary = r.name;
        mspti_domain: StringBuilder(8) optional Dictionary = r.mspti_domain;
        cbid: UInt32Builder optional Plain = r.cbid;
        library: StringBuilder(SHORT_STR) required Dictionary = r.library;
        pid: UInt32Builder required Plain = r.pid;
        tid: UInt32Builder required Plain = r.tid;
        depth: UInt8Builder required Plain = r.depth;
        start_ns: UInt64Builder required Delta = r.start_ns;
        end_ns: UInt64Builder optional Delta = r.end_ns;
        incomplete: BooleanBuilder required Plain = r.incomplete;
        return_value: Int64Builder optional Plain = r.return_value;
        device_id: Int32Builder optional Plain = r.args.device_id;
        stream: UInt64Builder optional Dictionary = r.args.stream;
        bytes: UInt64Builder optional Dictionary = r.args.bytes;
        count: UInt64Builder optional Dictionary = r.args.count;
        memcpy_kind: StringBuilder(SHORT_STR) optional Dictionary = r.args.memcpy_kind.map(|v| v.as_str());
        address: UInt64Builder optional Dictionary = r.args.address;
        src_address: UInt64Builder optional Dictionary = r.args.src_address;
        value: Int64Builder optional Dictionary = r.args.value;
        block_dim: UInt32Builder optional Dictionary = r.args.block_dim;
        handle: UInt64Builder optional Dictionary = r.args.handle;
        kernel_name: StringBuilder(SHORT_STR) optional Dictionary =
            r.args.kernel_name.as_deref();
        data_type: StringBuilder optional Dictionary = r.args.data_type.map(|v| v.as_str());
        reduce_op: StringBuilder optional Dictionary = r.args.reduce_op.map(|v| v.as_str());
        rank: UInt32Builder optional Dictionary = r.args.rank;
        message: StringBuilder optional Dictionary = r.args.message.as_deref();
        range_id: UInt64Builder optional Delta = r.args.range_id;
        arg0: UInt64Builder optional Dictionary = r.args.raw.map(|a| a[0]);
        arg1: UInt64Builder optional Dictionary = r.args.raw.map(|a| a[1]);
        arg2: UInt64Builder optional Dictionary = r.args.raw.map(|a| a[2]);
        arg3: UInt64Builder optional Dictionary = r.args.raw.map(|a| a[3]);
        arg4: UInt64Builder optional Dictionary = r.args.raw.map(|a| a[4]);
        arg5: UInt64Builder optional Dictionary = r.args.raw.map(|a| a[5]);
    }
}

table! {
    /// Table `marker`: one row per mstx mark or range.
    MarkerTable "marker" for r: MarkerRow {
        kind: StringBuilder(8) required Dictionary = r.kind.as_str();
        message: StringBuilder(2 * SHORT_STR) required Dictionary = &r.message;
        domain: StringBuilder(SHORT_STR) optional Dictionary = r.domain.as_deref();
        pid: UInt32Builder required Plain = r.pid;
        tid: UInt32Builder required Plain = r.tid;
        start_ns: UInt64Builder required Delta = r.start_ns;
        end_ns: UInt64Builder optional Delta = r.end_ns;
        range_id: UInt64Builder optional Delta = r.range_id;
        correlation_id: UInt64Builder required Delta = r.correlation_id;
        stream: UInt64Builder optional Dictionary = r.stream;
        end_tid: UInt32Builder optional Plain = r.end_tid;
    }
}

table! {
    /// Table `op`: one row per operator call (both phases of a two-phase operator).
    OpTable "op" for r: OpRow {
        correlation_id: UInt64Builder required Delta = r.correlation_id;
        name: StringBuilder(SHORT_STR) required Dictionary = r.name;
        kind: StringBuilder(8) required Dictionary = r.kind.as_str();
        api_name: StringBuilder(2 * SHORT_STR) required Dictionary = r.api_name;
        library: StringBuilder(SHORT_STR) required Dictionary = r.library;
        pid: UInt32Builder required Plain = r.pid;
        tid: UInt32Builder required Plain = r.tid;
        start_ns: UInt64Builder required Delta = r.start_ns;
        end_ns: UInt64Builder optional Delta = r.end_ns;
        prepare_correlation_id: UInt64Builder optional Delta = r.prepare.map(|p| p.correlation_id);
        prepare_api_name: StringBuilder(2 * SHORT_STR) optional Dictionary = r.prepare.map(|p| p.api_name);
        prepare_tid: UInt32Builder optional Plain = r.prepare.map(|p| p.tid);
        prepare_start_ns: UInt64Builder optional Delta = r.prepare.map(|p| p.start_ns);
        prepare_end_ns: UInt64Builder optional Delta = r.prepare.map(|p| p.end_ns);
        host_ns: UInt64Builder optional Plain = r.host_ns();
        workspace_bytes: UInt64Builder optional Dictionary = r.workspace_bytes;
        executor: UInt64Builder optional Plain = r.executor;
        stream: UInt64Builder optional Dictionary = r.stream;
        return_value: Int64Builder optional Plain = r.return_value;
    }
}

table! {
    /// Table `kernel`: one row per kernel execution.
    KernelTable "kernel" for r: KernelRow {
        device_task(r.task);
        name: StringBuilder(2 * SHORT_STR) optional Dictionary = r.name.as_deref();
        kernel_type: StringBuilder(8) required Dictionary = r.kernel_type.as_str();
        block_dim: UInt32Builder required Dictionary = r.block_dim;
        api_name: StringBuilder(SHORT_STR) required Dictionary = r.api_name;
    }
}

table! {
    /// Table `memcpy`: one row per device copy.
    MemcpyTable "memcpy" for r: MemcpyRow {
        device_task(r.task);
        copy_kind: StringBuilder(4) required Dictionary = r.copy_kind.as_str();
        bytes: UInt64Builder required Dictionary = r.bytes;
        is_async: BooleanBuilder required Plain = r.is_async;
        bandwidth_gbps: Float64Builder optional Plain = r.bandwidth_gbps;
        api_name: StringBuilder(SHORT_STR) required Dictionary = r.api_name;
    }
}

table! {
    /// Table `memset`: one row per device memset.
    MemsetTable "memset" for r: MemsetRow {
        device_task(r.task);
        value: UInt32Builder required Dictionary = r.value;
        bytes: UInt64Builder required Dictionary = r.bytes;
        is_async: BooleanBuilder required Plain = r.is_async;
        api_name: StringBuilder(SHORT_STR) required Dictionary = r.api_name;
    }
}

table! {
    /// Table `hccl`: one row per collective or point-to-point operation of one rank.
    HcclTable "hccl" for r: HcclRow {
        device_task(r.task);
        name: StringBuilder(SHORT_STR) required Dictionary = r.name;
        comm: UInt64Builder required Dictionary = r.comm;
        comm_name: StringBuilder(8) optional Dictionary = r.comm_name.as_deref();
        rank: UInt32Builder optional Dictionary = r.rank;
        world_size: UInt32Builder optional Dictionary = r.world_size;
        data_type: StringBuilder(4) optional Dictionary = r.data_type.map(|v| v.as_str());
        count: UInt64Builder optional Dictionary = r.count;
        bytes: UInt64Builder optional Dictionary = r.bytes;
        reduce_op: StringBuilder(4) optional Dictionary = r.reduce_op.map(|v| v.as_str());
        peer: UInt32Builder optional Dictionary = r.peer;
        bandwidth_gbps: Float64Builder optional Plain = r.bandwidth_gbps;
        seq: UInt64Builder required Delta = r.seq;
    }
}

table! {
    /// Table `sync`: one row per synchronization task (event record or wait, notify).
    SyncTable "sync" for r: SyncRow {
        device_task(r.task);
        kind: StringBuilder(SHORT_STR) required Dictionary = r.kind.as_str();
        event: UInt64Builder optional Dictionary = r.event;
        api_name: StringBuilder(SHORT_STR) required Dictionary = r.api_name;
    }
}

table! {
    /// Table `memory`: one row per allocation or release.
    MemoryTable "memory" for r: MemoryRow {
        correlation_id: UInt64Builder required Delta = r.correlation_id;
        pid: UInt32Builder required Plain = r.pid;
        tid: UInt32Builder required Plain = r.tid;
        operation: StringBuilder(SHORT_STR) required Dictionary = r.operation.as_str();
        memory_kind: StringBuilder(8) required Dictionary = r.memory_kind.as_str();
        address: UInt64Builder required Dictionary = r.address;
        bytes: UInt64Builder optional Dictionary = r.bytes;
        device_id: Int32Builder optional Plain = r.device_id;
        start_ns: UInt64Builder required Delta = r.start_ns;
        end_ns: UInt64Builder required Delta = r.end_ns;
        api_name: StringBuilder(SHORT_STR) required Dictionary = r.api_name;
        return_value: Int64Builder required Plain = r.return_value;
    }
}

table! {
    /// Table `critical_event`: what the user must know to trust the trace.
    CriticalEventTable "critical_event" for r: CriticalEventRow {
        ts_ns: UInt64Builder required Delta = r.ts_ns;
        kind: StringBuilder(SHORT_STR) required Dictionary = r.kind.as_str();
        severity: StringBuilder(8) required Dictionary = r.severity.as_str();
        pid: UInt32Builder optional Plain = r.pid;
        tid: UInt32Builder optional Plain = r.tid;
        device_id: UInt32Builder optional Plain = r.device_id;
        correlation_id: UInt64Builder optional Delta = r.correlation_id;
        count: UInt64Builder required Plain = r.count;
        message: StringBuilder(2 * SHORT_STR) required Dictionary = &r.message;
    }
}

/// Every table the agent writes, in the order the report lists their row counts.
pub const TABLES: [&str; 10] = [
    ApiTable::NAME,
    MarkerTable::NAME,
    OpTable::NAME,
    KernelTable::NAME,
    MemcpyTable::NAME,
    MemsetTable::NAME,
    HcclTable::NAME,
    SyncTable::NAME,
    MemoryTable::NAME,
    CriticalEventTable::NAME,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::{ApiArgs, DeviceTask};
    use crate::vocab::{HcclDataType, MemcpyKind, ReduceOp};
    use arrow::datatypes::DataType;
    use std::collections::HashSet;

    fn full_api_row() -> ApiRow {
        ApiRow {
            correlation_id: 1,
            parent_correlation_id: Some(0),
            domain: "ACL",
            name: "aclrtMemcpy",
            mspti_domain: Some("RUNTIME"),
            cbid: Some(7),
            library: "libascendcl.so",
            pid: 10,
            tid: 11,
            depth: 1,
            start_ns: 100,
            end_ns: Some(200),
            incomplete: false,
            return_value: Some(0),
            args: ApiArgs {
                device_id: Some(0),
                stream: Some(1),
                bytes: Some(2),
                count: Some(3),
                memcpy_kind: Some(MemcpyKind::HostToDevice),
                address: Some(4),
                src_address: Some(5),
                value: Some(-6),
                block_dim: Some(8),
                handle: Some(9),
                kernel_name: Some("k".into()),
                data_type: Some(HcclDataType::Fp32),
                reduce_op: Some(ReduceOp::Sum),
                rank: Some(1),
                message: Some("m".into()),
                range_id: Some(12),
                raw: Some([1, 2, 3, 4, 5, 6]),
            },
        }
    }

    #[test]
    fn api_schema_flattens_args_and_maps_types() {
        let s = schema(&columns::<ApiTable>());
        assert_eq!(s.fields().len(), 36);
        let ty = |n: &str| s.field_with_name(n).unwrap().data_type().clone();
        assert_eq!(ty("correlation_id"), DataType::UInt64);
        assert_eq!(ty("depth"), DataType::UInt8);
        assert_eq!(ty("device_id"), DataType::Int32);
        assert_eq!(ty("return_value"), DataType::Int64);
        assert_eq!(ty("incomplete"), DataType::Boolean);
        assert_eq!(ty("kernel_name"), DataType::Utf8);
        assert!(!s.field_with_name("name").unwrap().is_nullable());
        assert!(s.field_with_name("end_ns").unwrap().is_nullable());
    }

    #[test]
    fn batches_match_schema_with_all_some_and_all_none() {
        let s = schema(&columns::<ApiTable>());
        let mut t = ApiTable::with_capacity(2);
        t.append(&[full_api_row(), ApiRow::default()]);
        let b = into_batch(t, &s).unwrap();
        assert_eq!(b.num_rows(), 2);

        let s = schema(&columns::<MarkerTable>());
        let mut t = MarkerTable::with_capacity(0);
        t.append(&[MarkerRow::default()]);
        assert_eq!(into_batch(t, &s).unwrap().num_rows(), 1);
    }

    /// Every table's columns, by table name.
    fn all_tables() -> Vec<(&'static str, Vec<Column>)> {
        fn named<T: Table>() -> (&'static str, Vec<Column>) {
            (T::NAME, columns::<T>())
        }
        vec![
            named::<ApiTable>(),
            named::<MarkerTable>(),
            named::<KernelTable>(),
            named::<MemcpyTable>(),
            named::<MemsetTable>(),
            named::<HcclTable>(),
            named::<SyncTable>(),
            named::<MemoryTable>(),
            named::<CriticalEventTable>(),
        ]
    }

    #[test]
    fn column_names_are_unique_and_delta_is_integer_only() {
        for (table, columns) in all_tables() {
            let mut names = HashSet::new();
            for c in &columns {
                assert!(names.insert(c.name), "{table}.{} twice", c.name);
                if c.encoding == ColumnEncoding::Delta {
                    assert!(c.data_type().is_integer(), "{table}.{}", c.name);
                }
            }
        }
    }

    #[test]
    fn device_tables_start_with_the_flattened_task() {
        const TASK: [(&str, DataType, bool); 12] = [
            ("correlation_id", DataType::UInt64, false),
            ("pid", DataType::UInt32, false),
            ("tid", DataType::UInt32, false),
            ("device_id", DataType::UInt32, false),
            ("stream_id", DataType::UInt32, false),
            ("task_id", DataType::UInt32, false),
            ("start_ns", DataType::UInt64, true),
            ("end_ns", DataType::UInt64, true),
            ("device_start_cnt", DataType::UInt64, true),
            ("device_end_cnt", DataType::UInt64, true),
            ("submit_ns", DataType::UInt64, false),
            ("status", DataType::UInt32, true),
        ];
        let device = ["kernel", "memcpy", "memset", "hccl", "sync"];
        for (table, columns) in all_tables() {
            if !device.contains(&table) {
                continue;
            }
            let head: Vec<_> = columns[..TASK.len()]
                .iter()
                .map(|c| (c.name, c.data_type().clone(), c.nullable))
                .collect();
            assert_eq!(head, TASK, "{table}");
        }
    }

    #[test]
    fn new_tables_map_types() {
        let ty = |s: &SchemaRef, n: &str| s.field_with_name(n).unwrap().data_type().clone();
        let s = schema(&columns::<KernelTable>());
        assert_eq!(s.fields().len(), 18);
        assert_eq!(ty(&s, "op_name"), DataType::Utf8);
        assert!(
            s.field_with_name("op_correlation_id")
                .unwrap()
                .is_nullable()
        );
        let o = schema(&columns::<OpTable>());
        assert_eq!(ty(&o, "host_ns"), DataType::UInt64);
        assert!(!o.field_with_name("name").unwrap().is_nullable());
        assert!(
            o.field_with_name("prepare_correlation_id")
                .unwrap()
                .is_nullable()
        );
        assert_eq!(ty(&s, "name"), DataType::Utf8);
        assert!(s.field_with_name("name").unwrap().is_nullable());
        assert!(!s.field_with_name("kernel_type").unwrap().is_nullable());
        let s = schema(&columns::<MemcpyTable>());
        assert_eq!(ty(&s, "bandwidth_gbps"), DataType::Float64);
        assert_eq!(ty(&s, "is_async"), DataType::Boolean);
        let s = schema(&columns::<HcclTable>());
        assert_eq!(s.fields().len(), 26);
        assert_eq!(ty(&s, "comm"), DataType::UInt64);
        assert!(!s.field_with_name("seq").unwrap().is_nullable());
        let s = schema(&columns::<MemoryTable>());
        assert_eq!(ty(&s, "device_id"), DataType::Int32);
        assert_eq!(ty(&s, "return_value"), DataType::Int64);
        let s = schema(&columns::<CriticalEventTable>());
        assert_eq!(ty(&s, "device_id"), DataType::UInt32);
        assert!(s.field_with_name("correlation_id").unwrap().is_nullable());
    }

    /// Appends `rows` to a fresh `T` (sized for fewer, so builders grow) and checks that
    /// they make a batch of `T`'s schema.
    fn check_batch<T: Table>(rows: &[T::Row]) {
        let s = schema(&columns::<T>());
        let mut t = T::with_capacity(1);
        t.append(rows);
        assert_eq!(t.len(), rows.len());
        assert_eq!(
            into_batch(t, &s).unwrap().num_rows(),
            rows.len(),
            "{}",
            T::NAME
        );
    }

    #[test]
    fn new_tables_take_full_and_default_rows() {
        let task = DeviceTask {
            start_ns: Some(1),
            end_ns: Some(2),
            device_start_cnt: Some(3),
            device_end_cnt: Some(4),
            status: Some(0),
            ..DeviceTask::default()
        };
        let kernel = KernelRow {
            task: task.clone(),
            name: Some("k".into()),
            ..KernelRow::default()
        };
        check_batch::<KernelTable>(&[kernel, KernelRow::default()]);
        let memcpy = MemcpyRow {
            task: task.clone(),
            bandwidth_gbps: Some(1.5),
            ..MemcpyRow::default()
        };
        check_batch::<MemcpyTable>(&[memcpy, MemcpyRow::default()]);
        check_batch::<MemsetTable>(&[MemsetRow::default()]);
        check_batch::<SyncTable>(&[SyncRow::default()]);
        let hccl = HcclRow {
            task,
            comm_name: Some("comm0/2".into()),
            rank: Some(0),
            world_size: Some(2),
            data_type: Some(HcclDataType::Fp32),
            count: Some(8),
            bytes: Some(32),
            reduce_op: Some(ReduceOp::Sum),
            peer: Some(1),
            bandwidth_gbps: Some(2.0),
            ..HcclRow::default()
        };
        check_batch::<HcclTable>(&[hccl, HcclRow::default()]);
        let memory = MemoryRow {
            bytes: Some(4096),
            device_id: Some(0),
            ..MemoryRow::default()
        };
        check_batch::<MemoryTable>(&[memory, MemoryRow::default()]);
        let event = CriticalEventRow {
            pid: Some(1),
            tid: Some(2),
            device_id: Some(0),
            correlation_id: Some(3),
            ..CriticalEventRow::default()
        };
        let rows = [event, CriticalEventRow::default()];
        check_batch::<CriticalEventTable>(&rows);
    }
}
