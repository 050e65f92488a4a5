//! Output sinks: where correlated rows go.
pub mod parquet;
pub mod print;
