//! The output contract of npu-bpftrace (`docs/schema.md`): the rows the pipeline produces,
//! how each becomes an Arrow/Parquet table, the vocabularies of their text columns, the
//! dataset's `session.json`, and the one reader of a dataset that the report, the tests,
//! xtask and the benchmarks share.
//!
//! Nothing here knows about BPF, CANN or the filesystem layout of a live session: a writer
//! fills these types, a reader gets them back, and [`SCHEMA_VERSION`] says whether both
//! sides speak the same layout.
#[cfg(feature = "parquet")]
pub mod dataset;
pub mod rows;
pub mod session;
#[cfg(feature = "parquet")]
pub mod tables;
pub mod vocab;

/// Version of the table layout and `session.json` in `docs/schema.md`. Stored in every
/// Parquet file's metadata and in `session.json`; readers refuse another version.
pub const SCHEMA_VERSION: u32 = 2;
