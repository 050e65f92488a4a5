//! Output tables: how each row type becomes Arrow columns.
//!
//! A table is a struct of Arrow builders implementing [`Table`]. Its column list (names,
//! types, nullability, encoding) is written once, in `into_columns`; the schema and the
//! Parquet encodings are derived from it, so they cannot disagree with the batches. Adding
//! a table means adding one such struct; the Parquet writer is generic over it. The contract
//! is `docs/schema.md`.
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Int32Builder, Int64Builder, StringBuilder,
    UInt8Builder, UInt32Builder, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use crate::records::{ApiRow, MarkerRow};

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
    /// DELTA_BINARY_PACKED: integers that mostly increase row to row (ids, timestamps)
    /// take a few bits per row, where a dictionary would not help.
    Delta,
    /// Plain values: small low-entropy integers (pids, tids) that zstd alone shrinks as
    /// well, where a dictionary's per-value hashing would double the encoding cost.
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

/// Estimated bytes of `&'static str` data per row, to size string builders.
const SHORT_STR: usize = 16;

fn strings(rows: usize, bytes_per_row: usize) -> StringBuilder {
    StringBuilder::with_capacity(rows, rows * bytes_per_row)
}

/// Table `api`: one row per traced API call, `ApiArgs` flattened into top-level columns.
pub struct ApiTable {
    correlation_id: UInt64Builder,
    parent_correlation_id: UInt64Builder,
    domain: StringBuilder,
    name: StringBuilder,
    mspti_domain: StringBuilder,
    cbid: UInt32Builder,
    library: StringBuilder,
    pid: UInt32Builder,
    tid: UInt32Builder,
    depth: UInt8Builder,
    start_ns: UInt64Builder,
    end_ns: UInt64Builder,
    incomplete: BooleanBuilder,
    return_value: Int64Builder,
    device_id: Int32Builder,
    stream: UInt64Builder,
    bytes: UInt64Builder,
    count: UInt64Builder,
    memcpy_kind: StringBuilder,
    address: UInt64Builder,
    src_address: UInt64Builder,
    value: Int64Builder,
    block_dim: UInt32Builder,
    handle: UInt64Builder,
    kernel_name: StringBuilder,
    data_type: StringBuilder,
    reduce_op: StringBuilder,
    rank: UInt32Builder,
    message: StringBuilder,
    range_id: UInt64Builder,
}

impl Table for ApiTable {
    type Row = ApiRow;
    const NAME: &'static str = "api";

    fn with_capacity(n: usize) -> Self {
        Self {
            correlation_id: UInt64Builder::with_capacity(n),
            parent_correlation_id: UInt64Builder::with_capacity(n),
            domain: strings(n, 8),
            name: strings(n, 2 * SHORT_STR),
            mspti_domain: strings(n, 8),
            cbid: UInt32Builder::with_capacity(n),
            library: strings(n, SHORT_STR),
            pid: UInt32Builder::with_capacity(n),
            tid: UInt32Builder::with_capacity(n),
            depth: UInt8Builder::with_capacity(n),
            start_ns: UInt64Builder::with_capacity(n),
            end_ns: UInt64Builder::with_capacity(n),
            incomplete: BooleanBuilder::with_capacity(n),
            return_value: Int64Builder::with_capacity(n),
            device_id: Int32Builder::with_capacity(n),
            stream: UInt64Builder::with_capacity(n),
            bytes: UInt64Builder::with_capacity(n),
            count: UInt64Builder::with_capacity(n),
            memcpy_kind: strings(n, SHORT_STR),
            address: UInt64Builder::with_capacity(n),
            src_address: UInt64Builder::with_capacity(n),
            value: Int64Builder::with_capacity(n),
            block_dim: UInt32Builder::with_capacity(n),
            handle: UInt64Builder::with_capacity(n),
            kernel_name: strings(n, SHORT_STR),
            data_type: strings(n, 0),
            reduce_op: strings(n, 0),
            rank: UInt32Builder::with_capacity(n),
            message: strings(n, 0),
            range_id: UInt64Builder::with_capacity(n),
        }
    }

    fn append(&mut self, rows: &[ApiRow]) {
        for r in rows {
            self.correlation_id.append_value(r.correlation_id);
            self.parent_correlation_id
                .append_option(r.parent_correlation_id);
            self.domain.append_value(r.domain);
            self.name.append_value(r.name);
            self.mspti_domain.append_option(r.mspti_domain);
            self.cbid.append_option(r.cbid);
            self.library.append_value(r.library);
            self.pid.append_value(r.pid);
            self.tid.append_value(r.tid);
            self.depth.append_value(r.depth);
            self.start_ns.append_value(r.start_ns);
            self.end_ns.append_option(r.end_ns);
            self.incomplete.append_value(r.incomplete);
            self.return_value.append_option(r.return_value);
            let a = &r.args;
            self.device_id.append_option(a.device_id);
            self.stream.append_option(a.stream);
            self.bytes.append_option(a.bytes);
            self.count.append_option(a.count);
            self.memcpy_kind.append_option(a.memcpy_kind);
            self.address.append_option(a.address);
            self.src_address.append_option(a.src_address);
            self.value.append_option(a.value);
            self.block_dim.append_option(a.block_dim);
            self.handle.append_option(a.handle);
            self.kernel_name.append_option(a.kernel_name.as_deref());
            self.data_type.append_option(a.data_type);
            self.reduce_op.append_option(a.reduce_op);
            self.rank.append_option(a.rank);
            self.message.append_option(a.message.as_deref());
            self.range_id.append_option(a.range_id);
        }
    }

    fn len(&self) -> usize {
        self.correlation_id.len()
    }

    fn into_columns(self) -> Vec<Column> {
        use ColumnEncoding::{Delta, Dictionary, Plain};
        vec![
            required("correlation_id", Delta, self.correlation_id),
            optional("parent_correlation_id", Delta, self.parent_correlation_id),
            required("domain", Dictionary, self.domain),
            required("name", Dictionary, self.name),
            optional("mspti_domain", Dictionary, self.mspti_domain),
            optional("cbid", Plain, self.cbid),
            required("library", Dictionary, self.library),
            required("pid", Plain, self.pid),
            required("tid", Plain, self.tid),
            required("depth", Plain, self.depth),
            required("start_ns", Delta, self.start_ns),
            optional("end_ns", Delta, self.end_ns),
            required("incomplete", Plain, self.incomplete),
            optional("return_value", Plain, self.return_value),
            optional("device_id", Plain, self.device_id),
            optional("stream", Dictionary, self.stream),
            optional("bytes", Dictionary, self.bytes),
            optional("count", Dictionary, self.count),
            optional("memcpy_kind", Dictionary, self.memcpy_kind),
            optional("address", Dictionary, self.address),
            optional("src_address", Dictionary, self.src_address),
            optional("value", Dictionary, self.value),
            optional("block_dim", Dictionary, self.block_dim),
            optional("handle", Dictionary, self.handle),
            optional("kernel_name", Dictionary, self.kernel_name),
            optional("data_type", Dictionary, self.data_type),
            optional("reduce_op", Dictionary, self.reduce_op),
            optional("rank", Dictionary, self.rank),
            optional("message", Dictionary, self.message),
            optional("range_id", Delta, self.range_id),
        ]
    }
}

/// Table `marker`: one row per mstx mark or range.
pub struct MarkerTable {
    kind: StringBuilder,
    message: StringBuilder,
    domain: StringBuilder,
    pid: UInt32Builder,
    tid: UInt32Builder,
    start_ns: UInt64Builder,
    end_ns: UInt64Builder,
    range_id: UInt64Builder,
    correlation_id: UInt64Builder,
    stream: UInt64Builder,
    end_tid: UInt32Builder,
}

impl Table for MarkerTable {
    type Row = MarkerRow;
    const NAME: &'static str = "marker";

    fn with_capacity(n: usize) -> Self {
        Self {
            kind: strings(n, 8),
            message: strings(n, 2 * SHORT_STR),
            domain: strings(n, SHORT_STR),
            pid: UInt32Builder::with_capacity(n),
            tid: UInt32Builder::with_capacity(n),
            start_ns: UInt64Builder::with_capacity(n),
            end_ns: UInt64Builder::with_capacity(n),
            range_id: UInt64Builder::with_capacity(n),
            correlation_id: UInt64Builder::with_capacity(n),
            stream: UInt64Builder::with_capacity(n),
            end_tid: UInt32Builder::with_capacity(n),
        }
    }

    fn append(&mut self, rows: &[MarkerRow]) {
        for r in rows {
            self.kind.append_value(r.kind);
            self.message.append_value(&r.message);
            self.domain.append_option(r.domain.as_deref());
            self.pid.append_value(r.pid);
            self.tid.append_value(r.tid);
            self.start_ns.append_value(r.start_ns);
            self.end_ns.append_option(r.end_ns);
            self.range_id.append_option(r.range_id);
            self.correlation_id.append_value(r.correlation_id);
            self.stream.append_option(r.stream);
            self.end_tid.append_option(r.end_tid);
        }
    }

    fn len(&self) -> usize {
        self.correlation_id.len()
    }

    fn into_columns(self) -> Vec<Column> {
        use ColumnEncoding::{Delta, Dictionary, Plain};
        vec![
            required("kind", Dictionary, self.kind),
            required("message", Dictionary, self.message),
            optional("domain", Dictionary, self.domain),
            required("pid", Plain, self.pid),
            required("tid", Plain, self.tid),
            required("start_ns", Delta, self.start_ns),
            optional("end_ns", Delta, self.end_ns),
            optional("range_id", Delta, self.range_id),
            required("correlation_id", Delta, self.correlation_id),
            optional("stream", Dictionary, self.stream),
            optional("end_tid", Plain, self.end_tid),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ApiArgs;
    use arrow::datatypes::DataType;

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
                memcpy_kind: Some("HOST_TO_DEVICE"),
                address: Some(4),
                src_address: Some(5),
                value: Some(-6),
                block_dim: Some(8),
                handle: Some(9),
                kernel_name: Some("k".into()),
                data_type: Some("FP32"),
                reduce_op: Some("SUM"),
                rank: Some(1),
                message: Some("m".into()),
                range_id: Some(12),
            },
        }
    }

    #[test]
    fn api_schema_flattens_args_and_maps_types() {
        let s = schema(&columns::<ApiTable>());
        assert_eq!(s.fields().len(), 30);
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
}
