//! `--print`: one `[ENTER]` / `[EXIT]` line per call as it happens, like the msPTI
//! callback sample, or (`--print-format json`) one JSON object per line.
use std::io::{self, BufWriter, Stdout, Write};

use serde_json::json;
use tracer_common::ApiEnter;

use tracer_catalog::ProbeDef;
use tracer_core::correlate::Live;
use tracer_schema::rows::ApiRow;

/// How `--print` writes calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PrintFormat {
    /// `[ENTER]` and `[EXIT]` lines for people.
    #[default]
    Text,
    /// JSON lines: `{"event":"enter",...}` and `{"event":"exit",...}` objects.
    Json,
}

pub struct Printer {
    out: Option<BufWriter<Stdout>>,
    format: PrintFormat,
}

impl Printer {
    /// Prints in `format`, or nothing when `None`.
    pub fn new(format: Option<PrintFormat>) -> Self {
        Self {
            out: format.map(|_| BufWriter::new(io::stdout())),
            format: format.unwrap_or_default(),
        }
    }

    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        if let Some(out) = &mut self.out {
            // A closed stdout (e.g. `| head`) must not stop tracing.
            let _ = out.write_fmt(args).and_then(|_| out.flush());
        }
    }
}

impl Live for Printer {
    fn entered(&mut self, def: &ProbeDef, enter: &ApiEnter) {
        if self.out.is_none() {
            return;
        }
        let h = &enter.header;
        match self.format {
            PrintFormat::Text => self.line(format_args!(
                "[ENTER] {:<28} pid={} tid={} corr={:#x}\n",
                def.symbol, h.pid, h.tid, enter.correlation_id
            )),
            PrintFormat::Json => {
                let parent =
                    (enter.parent_correlation_id != 0).then_some(enter.parent_correlation_id);
                let line = json!({
                    "event": "enter",
                    "name": def.symbol,
                    "domain": def.domain.name(),
                    "pid": h.pid,
                    "tid": h.tid,
                    "depth": h.depth,
                    "correlation_id": enter.correlation_id,
                    "parent_correlation_id": parent,
                    "ts_ns": h.ts_ns,
                });
                self.line(format_args!("{line}\n"));
            }
        }
    }

    fn exited(&mut self, row: &ApiRow) {
        if self.out.is_none() {
            return;
        }
        match self.format {
            PrintFormat::Text => {
                let duration = row.end_ns.map_or("incomplete".to_string(), |end| {
                    format!("{:.3}us", end.saturating_sub(row.start_ns) as f64 / 1e3)
                });
                let ret = row
                    .return_value
                    .map_or(String::new(), |r| format!(" ret={r}"));
                self.line(format_args!(
                    "[EXIT]  {:<28} pid={} tid={} corr={:#x} dur={duration}{ret}\n",
                    row.name, row.pid, row.tid, row.correlation_id
                ));
            }
            PrintFormat::Json => {
                let line = json!({
                    "event": "exit",
                    "name": row.name,
                    "pid": row.pid,
                    "tid": row.tid,
                    "depth": row.depth,
                    "correlation_id": row.correlation_id,
                    "parent_correlation_id": row.parent_correlation_id,
                    "start_ns": row.start_ns,
                    "end_ns": row.end_ns,
                    "duration_ns": row.end_ns.map(|end| end.saturating_sub(row.start_ns)),
                    "return_value": row.return_value,
                    "incomplete": row.incomplete,
                });
                self.line(format_args!("{line}\n"));
            }
        }
    }
}
