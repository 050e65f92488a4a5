//! `--print`: one `[ENTER]` / `[EXIT]` line per call as it happens, like the msPTI
//! callback sample.
use std::io::{self, BufWriter, Stdout, Write};

use tracer_common::ApiEnter;

use tracer_catalog::ProbeDef;
use tracer_core::correlate::Live;
use tracer_schema::rows::ApiRow;

pub struct Printer {
    out: Option<BufWriter<Stdout>>,
}

impl Printer {
    pub fn new(enabled: bool) -> Self {
        Self {
            out: enabled.then(|| BufWriter::new(io::stdout())),
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
        let h = &enter.header;
        self.line(format_args!(
            "[ENTER] {:<28} pid={} tid={} corr={:#x}\n",
            def.symbol, h.pid, h.tid, enter.correlation_id
        ));
    }

    fn exited(&mut self, row: &ApiRow) {
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
}
