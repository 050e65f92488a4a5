//! Command-line interface.
use std::{
    ffi::OsString,
    path::PathBuf,
    process::ExitCode,
    sync::Arc,
    time::{Duration, SystemTime},
};

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use npu_bpftrace::{
    agent::{self, Mode, TraceOptions, TraceSummary},
    attach::Selection,
    bpf::DEFAULT_RINGBUF_BYTES,
    discovery, export, listing, report,
};
use tracer_catalog::Catalog;

/// Trace Huawei Ascend NPU (CANN) workloads with eBPF uprobes: every ACL, runtime, HCCL and
/// mstx call and every operator (aclnn, aclop) of a process, with zero code change, written to
/// Parquet.
#[derive(Debug, Parser)]
#[command(
    name = "npu-bpftrace",
    version,
    about,
    after_help = "Examples:\n  \
      sudo npu-bpftrace record -- python train.py      trace a command and its children\n  \
      sudo npu-bpftrace attach --pid 4242 --duration 30s\n  \
      sudo npu-bpftrace record --system-wide --out /data/trace\n  \
      npu-bpftrace probes                              list what can be traced\n  \
      npu-bpftrace report DIR                          summarize a recorded trace\n  \
      npu-bpftrace export DIR -o trace.json            timeline for Perfetto UI / chrome://tracing\n\n\
      Output: DIR/<table>/host=<host>/part-<n>.parquet and DIR/session.json, tables api, marker,\n\
      op, kernel, memcpy, memset, sync, memory, hccl, critical_event; read it with `npu-bpftrace\n\
      report` or DuckDB: SELECT name, count(*) FROM 'DIR/api/*/*.parquet' GROUP BY name;\n\n\
      Device task times come from the driver's profiling channel 50, as msPTI reads them; on a\n\
      device whose channel another profiler owns, from completion entries (session.json says\n\
      which, per device, in device_time_sources)."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a command and trace it and its children from their first instruction, or
    /// trace every process on the host (--system-wide).
    Record {
        #[command(flatten)]
        trace: TraceArgs,
        /// Trace every process that maps the CANN libraries, including ones started later.
        #[arg(long, conflicts_with = "command")]
        system_wide: bool,
        /// The command to run, after `--`.
        #[arg(last = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Trace processes that are already running; no preparation needed.
    Attach {
        #[command(flatten)]
        trace: TraceArgs,
        /// Process to trace (repeat for several).
        #[arg(long = "pid", value_name = "PID", required = true)]
        pids: Vec<u32>,
    },
    /// List the probe catalog: every entry (a function, or a glob of functions), its domain
    /// and msPTI callback id, where it resolves, and per library file what the selection
    /// (--domain, --function) attaches there, with counts.
    ///
    /// Without --pid the libraries are those installed ($ASCEND_HOME_PATH, LD_LIBRARY_PATH,
    /// the default paths, --lib); with --pid, those the process maps.
    #[command(after_help = "Examples:\n  \
      npu-bpftrace probes\n  \
      npu-bpftrace probes --function 'aclnn*,!*GetWorkspaceSize'\n  \
      npu-bpftrace probes --pid 4242 --domain op\n  \
      npu-bpftrace probes --catalog my-ops.toml --lib /opt/vendor/lib64")]
    Probes {
        /// Resolve in the libraries this process maps.
        #[arg(long, value_name = "PID")]
        pid: Option<u32>,
        #[command(flatten)]
        select: SelectArgs,
    },
    /// Summarize a recorded dataset, like `nsys stats`.
    ///
    /// Prints top operators and kernels by device time, API calls by host time with errors,
    /// copies by direction with bandwidth, HCCL collectives with per-rank arrival skew, mstx
    /// ranges, and whether the trace is complete (critical events, drops). It reads the
    /// Parquet files back, so it also proves they are readable.
    #[command(after_help = "Examples:\n  \
      npu-bpftrace report ./npu-trace-20250101-120000\n  \
      npu-bpftrace report DIR --format json | jq '.kernels[:5]'\n  \
      npu-bpftrace report DIR --format csv > stats.csv\n\n\
      Times are device time for kernels, copies and collectives, host time for API calls.\n\
      A dataset may hold several processes and hosts (copy other hosts' DIR/<table>/host=*\n\
      directories into one DIR).")]
    Report {
        /// Dataset directory: what `record --out` or `attach --out` wrote.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// How to print it.
        #[arg(long, value_enum, default_value_t = report::Format::Table)]
        format: report::Format,
    },
    /// Write a recorded dataset as a timeline file for trace viewers.
    ///
    /// The Chrome Trace Event Format JSON (what msprof's trace_view.json uses) shows every
    /// traced process with its threads' API calls and mstx ranges and marks, its device
    /// memory in use as a counter, and one track per NPU stream with the kernels, copies,
    /// memsets, collectives and event records and waits that ran there, with an arrow from
    /// the API call that launched each task; critical events are marks across the whole
    /// timeline.
    #[command(after_help = "Examples:\n  \
      npu-bpftrace export ./npu-trace-20250101-120000 -o trace.json\n  \
      npu-bpftrace export DIR --format chrome -o trace.json\n\n\
      Open the file in Perfetto UI (https://ui.perfetto.dev, \"Open trace file\"; large files\n\
      load best there), in chrome://tracing (\"Load\") or in MindStudio Insight.\n\
      Times are each host's CLOCK_MONOTONIC in microseconds; the hosts of a multi-host\n\
      dataset are not aligned with each other. Device tasks that never completed while\n\
      traced have no device times and are left out (the count is printed).")]
    Export {
        /// Dataset directory: what `record --out` or `attach --out` wrote.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// File format.
        #[arg(long, value_enum, default_value_t = export::Format::Chrome)]
        format: export::Format,
        /// The file to write (replaced if it exists).
        #[arg(long, short, value_name = "FILE")]
        out: PathBuf,
    },
}

/// What to trace and where: shared by the tracing commands and `probes`.
#[derive(Debug, Args)]
pub(crate) struct SelectArgs {
    /// Domains to trace, comma-separated: acl, runtime, hccl, mstx, op, driver, other, all
    /// [default: acl,runtime,hccl,mstx,op].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    domain: Vec<String>,
    /// Functions to trace in addition to --domain, comma-separated names or globs; a leading
    /// `!` leaves functions out (e.g. 'aclnn*,!*GetWorkspaceSize', 'Hccl*', aclrtMemcpy).
    /// Alone, only these are traced. A function no catalog entry describes is traced by name:
    /// its first six integer arguments (arg0..arg5) and its return value.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    function: Vec<String>,
    /// A library file or directory to attach to, beyond $ASCEND_HOME_PATH, LD_LIBRARY_PATH
    /// and the default install paths (repeatable). A file is attached whatever its name; in a
    /// directory, the libraries the catalog names.
    #[arg(long, value_name = "PATH")]
    lib: Vec<PathBuf>,
    /// A catalog file (TOML, see docs/usage.md) whose entries add to or override the built-in
    /// catalog, later files winning (repeatable).
    #[arg(long, value_name = "FILE")]
    catalog: Vec<PathBuf>,
}

impl SelectArgs {
    fn catalog(&self) -> Result<Catalog> {
        Ok(Catalog::with_files(&self.catalog)?)
    }

    fn selection(&self) -> Result<Selection> {
        Selection::new(&self.domain, &self.function)
    }
}

#[derive(Debug, Args)]
pub(crate) struct TraceArgs {
    /// Output directory [default: ./npu-trace-<date>-<time>].
    #[arg(long, short, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    select: SelectArgs,
    /// Stop after this long (e.g. 30s, 500ms, 2m); otherwise at Ctrl-C, SIGTERM, or when the
    /// traced processes end.
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    duration: Option<Duration>,
    /// Print an [ENTER]/[EXIT] line per call to stdout as it happens.
    #[arg(long)]
    print: bool,
    /// Ring-buffer size in MiB (a power of two); raise it if session.json reports drops.
    #[arg(long, default_value_t = DEFAULT_RINGBUF_BYTES >> 20, value_name = "MIB")]
    ringbuf_mb: u32,
}

impl TraceArgs {
    fn options(self, mode: Mode) -> Result<TraceOptions> {
        let mb = self.ringbuf_mb;
        if !mb.is_power_of_two() || mb > 1024 {
            bail!("--ringbuf-mb must be a power of two up to 1024, got {mb}");
        }
        Ok(TraceOptions {
            mode,
            selection: self.select.selection()?,
            catalog: Arc::new(self.select.catalog()?),
            libs: self.select.lib,
            out_dir: self.out.unwrap_or_else(default_out_dir),
            duration: self.duration,
            print: self.print,
            ringbuf_bytes: mb << 20,
        })
    }
}

pub(crate) fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Record {
            trace,
            system_wide,
            command,
        } => {
            let mode = match (system_wide, command.is_empty()) {
                (true, _) => Mode::SystemWide,
                (false, false) => Mode::Command(command),
                (false, true) => bail!("record needs a command after `--`, or --system-wide"),
            };
            finish(agent::trace(trace.options(mode)?)?)
        }
        Command::Attach { trace, pids } => {
            finish(agent::trace(trace.options(Mode::Attach(pids))?)?)
        }
        Command::Probes { pid, select } => probes(pid, &select),
        Command::Report { dir, format } => {
            report::run(&dir, format)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Export { dir, format, out } => {
            export::run(&dir, format, &out)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Prints the one-line summary; exits like the traced command did.
fn finish(summary: TraceSummary) -> Result<ExitCode> {
    let s = &summary.session;
    let rows: u64 = s.rows.values().sum();
    eprintln!(
        "npu-bpftrace: {} calls, {rows} rows in {} files, {} drops, {} incomplete -> {}",
        s.correlation.calls,
        s.files,
        s.total_drops(),
        s.correlation.incomplete_calls,
        summary.out_dir.display()
    );
    Ok(match summary.command_status {
        Some(status) if !status.success() => {
            eprintln!("npu-bpftrace: the traced command exited with {status}");
            ExitCode::from(status.code().map_or(1, |c| c.clamp(1, 255) as u8))
        }
        _ => ExitCode::SUCCESS,
    })
}

fn probes(pid: Option<u32>, select: &SelectArgs) -> Result<ExitCode> {
    let catalog = select.catalog()?;
    let selection = select.selection()?;
    let mut files = discovery::installed_libraries(&[], &select.lib, &catalog);
    match pid {
        Some(pid) => files.extend(
            discovery::mapped_libraries(pid, &catalog)
                .with_context(|| format!("no such process: {pid}"))?,
        ),
        None => {
            let ld_path = std::env::var("LD_LIBRARY_PATH").ok();
            let dirs = discovery::install_dirs(ld_path.as_deref());
            files = discovery::installed_libraries(&dirs, &select.lib, &catalog);
        }
    }
    let mut set = discovery::LibrarySet::default();
    files.retain(|f| set.insert(f.clone()));
    let out = listing::render(&catalog, &selection, &files)?;
    // A closed pipe (`| head`) is the reader's choice, not an error.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    Ok(ExitCode::SUCCESS)
}

/// `30s`, `500ms`, `2m`, `1h`, or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (e.g. 30s, 500ms, 2m)"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in '{s}' (use ms, s, m or h)"
            ));
        }
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(format!("duration must be positive, got '{s}'"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn default_out_dir() -> PathBuf {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as libc::time_t);
    // SAFETY: `libc::tm` is a C struct of integers (and a pointer that may be null), for
    // which all-zero bytes are a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers; localtime_r is thread-safe.
    unsafe { libc::localtime_r(&secs, &mut tm) };
    PathBuf::from(format!(
        "npu-trace-{:04}{:02}{:02}-{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3d").is_err());
    }

    /// Only implemented formats are accepted, and the output file is required.
    #[test]
    fn export_arguments() {
        let parse =
            |args: &[&str]| Cli::try_parse_from([&["npu-bpftrace", "export"], args].concat());
        let Command::Export { format, out, .. } =
            parse(&["DIR", "-o", "t.json"]).expect("defaults").command
        else {
            panic!("not export");
        };
        assert_eq!(
            (format, out),
            (export::Format::Chrome, PathBuf::from("t.json"))
        );
        let err = parse(&["DIR", "--format", "perfetto", "-o", "t.json"]).expect_err("perfetto");
        assert!(
            err.to_string().contains("invalid value 'perfetto'"),
            "{err}"
        );
        assert!(parse(&["DIR"]).is_err(), "no -o");
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
