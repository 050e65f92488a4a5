//! Output sinks: where correlated rows go. A dataset sink takes the correlator's output in
//! batches ([`Sink`]); per-call output as it happens (`--print`) is a
//! [`Live`](tracer_core::correlate::Live) observer instead.
pub mod parquet;
pub mod print;

use std::collections::BTreeMap;

use anyhow::Result;
use tracer_core::correlate::Output;

/// Where the rows of a session go.
pub trait Sink {
    /// Takes one batch of correlated rows (every table's).
    fn write(&mut self, output: Output) -> Result<()>;
    /// Makes everything written so far durable; the agent calls it once a second.
    fn flush(&mut self) -> Result<()>;
    /// Ends the session's output and says what was written.
    fn finish(self: Box<Self>) -> Result<SinkStats>;
}

/// What a session wrote, as returned by [`Sink::finish`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// Rows per table name; every table is present, with 0 where it had no rows.
    pub rows: BTreeMap<&'static str, u64>,
    /// Complete files written.
    pub files: u64,
    /// Bytes of those files.
    pub bytes: u64,
    /// Rows that are not in the dataset, per table (only tables that lost some): never
    /// written (the disk failed to the end, or the memory bound was reached), or removed
    /// with the output directory.
    pub rows_lost: BTreeMap<&'static str, u64>,
    /// Flushes in which some part could not be written.
    pub write_errors: u64,
    /// The first write error.
    pub write_error: Option<String>,
    /// The output directory was removed while tracing (and made again).
    pub directory_removed: bool,
}
