//! Command-line interface.
use std::{
    ffi::OsString, os::unix::process::ExitStatusExt, path::PathBuf, process::ExitCode, sync::Arc,
    time::Duration,
};

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use npu_bpftrace::{
    agent::{self, Mode, TraceOptions, TraceSummary},
    attach::Selection,
    bpf::DEFAULT_RINGBUF_BYTES,
    capture::RangeSpec,
    discovery, export, listing, outname, report, say,
    sink::print::PrintFormat,
    status,
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
      sudo npu-bpftrace record --system-wide --out /data/trace-%h\n  \
      sudo npu-bpftrace record --capture-range mstx:step --capture-range-count 3 -- python train.py\n  \
      sudo npu-bpftrace attach --pid 4242 --delay 10s --duration 5s\n  \
      sudo npu-bpftrace record --print-format json --quiet -- ./a.out | jq .name\n  \
      npu-bpftrace probes                              list what can be traced\n  \
      npu-bpftrace report DIR                          summarize a recorded trace\n  \
      npu-bpftrace export DIR -o trace.json            timeline for Perfetto UI / chrome://tracing\n  \
      npu-bpftrace export DIR --format perfetto -o trace.pftrace\n\n\
      Output: DIR/<table>/host=<host>/part-<n>.parquet and DIR/session.json, tables api, marker,\n\
      op, kernel, memcpy, memset, sync, memory, hccl, critical_event; read it with `npu-bpftrace\n\
      report` or DuckDB: SELECT name, count(*) FROM 'DIR/api/*/*.parquet' GROUP BY name;\n\n\
      Device task times come from the driver's profiling channel 50, as msPTI reads them; on a\n\
      device whose channel another profiler owns, from completion entries (session.json says\n\
      which, per device, in device_time_sources).\n\n\
      Stopping: SIGINT (Ctrl-C), SIGTERM and SIGHUP stop tracing and flush everything. In\n\
      `record` mode the first one is passed on to the command (unless the terminal sent it to\n\
      the command already) and tracing goes on until the command exits; a second one finishes\n\
      at once without waiting for the command. SIGUSR1 starts recording and SIGUSR2 stops it\n\
      (tracing goes on; see --delay, --capture-range).\n\n\
      Exit status:\n  \
      0     all is well\n  \
      1     an error prevented tracing, or report/export failed (a one-line message says why)\n  \
      2     bad arguments\n  \
      74    the trace is incomplete: rows or session.json could not be written (disk full,\n        \
      read-only or failing file system, output removed; session.json's `output` says what)\n  \
      N     record: the traced command failed with status N (128+S when signal S ended it);\n        \
      it wins over 74\n  \
      128+S record: a second stop signal S ended the session before the command exited"
)]
pub(crate) struct Cli {
    /// No progress bars or status lines on stderr (errors and warnings are still printed).
    #[arg(long, short, global = true)]
    pub quiet: bool,
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
        /// Processes to trace: comma-separated, or repeat the option (--pid 1,2 --pid 3).
        #[arg(
            long = "pid",
            value_name = "PID",
            required = true,
            value_delimiter = ','
        )]
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
    /// Prints top kernels by device time and API calls (and operators) by host time, each
    /// with count, total, mean, median, p95, p99, min, max and standard deviation, copies by
    /// direction with bandwidth, HCCL collectives with per-rank arrival skew, mstx ranges, and
    /// whether the trace is complete (critical events, drops). It reads the Parquet files
    /// back, so it also proves they are readable.
    #[command(after_help = "Examples:\n  \
      npu-bpftrace report ./npu-trace-20250101-120000\n  \
      npu-bpftrace report DIR --top 10 --name 'matmul|gelu'\n  \
      npu-bpftrace report DIR --rank 0 --from 2s --to 5s\n  \
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
        /// Fail on a corrupt part instead of skipping it with a warning.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Write a recorded dataset as a timeline file for trace viewers.
    ///
    /// The timeline shows every traced process with its threads' API calls (nested), mstx
    /// ranges and marks and operators, its memory in use as counters, one track per NPU
    /// stream with the kernels, copies, memsets and event records and waits that ran there,
    /// one per HCCL communicator and rank with its collectives, copy bandwidth counters, and
    /// an arrow from each API call to every device task it launched; critical events are
    /// marks across the whole timeline. Tables are streamed: memory use does not grow with
    /// the trace.
    #[command(after_help = "Examples:\n  \
      npu-bpftrace export ./npu-trace-20250101-120000 -o trace.json\n  \
      npu-bpftrace export DIR --format perfetto -o trace.pftrace\n\n\
      Open the file in Perfetto UI (https://ui.perfetto.dev, \"Open trace file\"; large files\n\
      load best there, and best as --format perfetto), in chrome://tracing (\"Load\", JSON\n\
      only) or in MindStudio Insight (JSON).\n\
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
    /// Output directory, a new or empty one; placeholders: %h host name, %p pid (record: the
    /// command's; attach: the pids joined by +; system-wide: the agent's), %r rank (RANK,
    /// OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID; attach: of the first
    /// process), %t start time (YYYYMMDD-HHMMSS), %% a percent sign.
    #[arg(long, short, value_name = "DIR", default_value = outname::DEFAULT)]
    out: PathBuf,
    #[command(flatten)]
    select: SelectArgs,
    /// Stop this long after recording began (after --delay, or the first --capture-range
    /// range; e.g. 30s, 500ms, 2m); otherwise at Ctrl-C, SIGTERM, or when the traced
    /// processes end.
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    duration: Option<Duration>,
    /// Record nothing until this long after tracing began (the probes are attached at once;
    /// SIGUSR1 starts recording earlier, SIGUSR2 cancels the delayed start).
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    delay: Option<Duration>,
    /// Record only inside mstx ranges (mstxRangeStartA/mstxRangeEnd, and the domain ones) with
    /// this message, per process: mstx:MESSAGE, or mstx:PREFIX* for messages that start with
    /// PREFIX.
    #[arg(long, value_name = "mstx:MESSAGE")]
    capture_range: Option<String>,
    /// With --capture-range: each process records at most N ranges; tracing stops once every
    /// process that began one has ended its Nth (or exited).
    #[arg(long, value_name = "N", requires = "capture_range")]
    capture_range_count: Option<u32>,
    /// Print each call to stdout as it happens (--print-format).
    #[arg(long)]
    print: bool,
    /// How --print prints: text ([ENTER]/[EXIT] lines) or json (one object per line);
    /// implies --print.
    #[arg(long, value_enum, value_name = "FORMAT")]
    print_format: Option<PrintFormat>,
    /// Ring-buffer size in MiB (a power of two); raise it if session.json reports drops.
    #[arg(long, default_value_t = DEFAULT_RINGBUF_BYTES >> 20, value_name = "MIB")]
    ringbuf_mb: u32,
    /// Print the report (`npu-bpftrace report`) of the trace when recording ends.
    #[arg(long)]
    stats: bool,
}

/// Which rows `report` counts.
#[derive(Debug, Args)]
pub(crate) struct FilterArgs {
    /// Only these processes, comma-separated pids (of any host).
    #[arg(long = "pid", value_delimiter = ',', value_name = "PID")]
    pids: Vec<u64>,
    /// Only these hosts, comma-separated (the names of the host=<name> directories).
    #[arg(long = "host", value_delimiter = ',', value_name = "HOST")]
    hosts: Vec<String>,
    /// Only the processes of these HCCL ranks, comma-separated (a process's rank in its
    /// largest communicator, from the hccl table).
    #[arg(long = "rank", value_delimiter = ',', value_name = "RANK")]
    ranks: Vec<u64>,
    /// Only kernels, API functions, operators, collectives, mstx messages and copy
    /// directions whose name matches this regular expression (e.g. 'matmul|gelu', '^aclrt').
    #[arg(long, value_name = "REGEX")]
    name: Option<String>,
    /// Only rows that start this long after the first timestamp of their host or later
    /// (e.g. 2s, 500ms).
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    from: Option<Duration>,
    /// Only rows that start before this long after the first timestamp of their host.
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    to: Option<Duration>,
    /// Only the first N rows of each section (sections are sorted, largest first).
    #[arg(long, value_name = "N")]
    top: Option<usize>,
}

impl FilterArgs {
    fn filter(self) -> Result<report::Filter> {
        let name = self
            .name
            .map(|re| {
                regex::Regex::new(&re)
                    .with_context(|| format!("--name: invalid regular expression '{re}'"))
            })
            .transpose()?;
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let (from, to) = (self.from.map(ns), self.to.map(ns));
        if let (Some(from), Some(to)) = (from, to)
            && from >= to
        {
            bail!("--from must be before --to");
        }
        Ok(report::Filter {
            pids: self.pids,
            hosts: self.hosts,
            ranks: self.ranks,
            name,
            from,
            to,
            top: self.top,
        })
    }
}

impl TraceArgs {
    fn options(self, mode: Mode) -> Result<TraceOptions> {
        let mb = self.ringbuf_mb;
        if !mb.is_power_of_two() || mb > 1024 {
            bail!("--ringbuf-mb must be a power of two up to 1024, got {mb}");
        }
        let capture_range = self
            .capture_range
            .map(|spec| RangeSpec::parse(&spec, self.capture_range_count))
            .transpose()?;
        Ok(TraceOptions {
            mode,
            selection: self.select.selection()?,
            catalog: Arc::new(self.select.catalog()?),
            libs: self.select.lib,
            out_dir: self.out,
            duration: self.duration,
            delay: self.delay,
            capture_range,
            print: match (self.print, self.print_format) {
                (_, Some(format)) => Some(format),
                (true, None) => Some(PrintFormat::Text),
                (false, None) => None,
            },
            ringbuf_bytes: mb << 20,
        })
    }
}

pub(crate) fn run(cli: Cli) -> Result<ExitCode> {
    say::set_quiet(cli.quiet);
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
            let stats = trace.stats;
            finish(agent::trace(trace.options(mode)?)?, stats)
        }
        Command::Attach { trace, pids } => {
            let stats = trace.stats;
            finish(agent::trace(trace.options(Mode::Attach(pids))?)?, stats)
        }
        Command::Probes { pid, select } => probes(pid, &select),
        Command::Report {
            dir,
            format,
            filter,
            strict,
        } => {
            report::run(&dir, format, &filter.filter()?, strict)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Export { dir, format, out } => {
            export::run(&dir, format, &out)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Exit status when the trace is incomplete: rows or session.json could not be written
/// (disk full, read-only or failing file system). sysexits' EX_IOERR.
pub(crate) const EXIT_TRACE_INCOMPLETE: u8 = 74;

/// Prints the one-line summary (and with `stats` the report). The exit status: the traced
/// command's when it failed (128 + the signal when a signal ended it), 128 + the signal when
/// a second stop signal ended a `record` session before its command exited, otherwise
/// [`EXIT_TRACE_INCOMPLETE`] when something could not be written, 0 when all is well.
fn finish(summary: TraceSummary, stats: bool) -> Result<ExitCode> {
    let s = &summary.session;
    let rows: u64 = s.rows.values().sum();
    status!(
        "npu-bpftrace: {} calls, {rows} rows in {} files, {} drops, {} incomplete -> {}",
        s.correlation.calls,
        s.files,
        s.total_drops(),
        s.correlation.incomplete_calls,
        summary.out_dir.display()
    );
    if let Some(why) = &summary.incomplete {
        eprintln!("npu-bpftrace: the trace is incomplete: {why}");
    }
    if let Some(caught) = summary.interrupted {
        eprintln!(
            "npu-bpftrace: stopped by a second {} before the traced command exited",
            caught.name()
        );
        return Ok(ExitCode::from(caught.exit_code()));
    }
    if stats {
        report::run(
            &summary.out_dir,
            report::Format::Table,
            &report::Filter::default(),
            false,
        )?;
    }
    if let Some(status) = summary.command_status
        && !status.success()
    {
        eprintln!("npu-bpftrace: the traced command exited with {status}");
        let code = match (status.code(), status.signal()) {
            (Some(code), _) => code.clamp(1, 255) as u8,
            (None, Some(signal)) => 128u8.saturating_add(signal as u8),
            (None, None) => 1,
        };
        return Ok(ExitCode::from(code));
    }
    Ok(if summary.incomplete.is_some() {
        ExitCode::from(EXIT_TRACE_INCOMPLETE)
    } else {
        ExitCode::SUCCESS
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
        let Command::Export { format, .. } = parse(&["DIR", "--format", "perfetto", "-o", "t"])
            .expect("perfetto")
            .command
        else {
            panic!("not export");
        };
        assert_eq!(format, export::Format::Perfetto);
        let err = parse(&["DIR", "--format", "nsys", "-o", "t"]).expect_err("no such format");
        assert!(err.to_string().contains("invalid value 'nsys'"), "{err}");
        assert!(parse(&["DIR"]).is_err(), "no -o");
    }

    /// Report filters: comma lists, a regular expression, a window in either order.
    #[test]
    fn report_filters() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from([&["npu-bpftrace", "report", "DIR"], args].concat())
        };
        let filter = |args: &[&str]| {
            let Command::Report { filter, .. } = parse(args).expect("parses").command else {
                panic!("not report");
            };
            filter.filter()
        };
        let f = filter(&[
            "--pid", "1,2", "--rank", "0", "--name", "^acl", "--from", "2s",
        ])
        .expect("valid");
        assert_eq!((f.pids, f.ranks), (vec![1, 2], vec![0]));
        assert!(f.name.expect("regex").is_match("aclrtMemcpy"));
        assert_eq!((f.from, f.to, f.top), (Some(2_000_000_000), None, None));
        let err = filter(&["--name", "("]).expect_err("bad regex");
        assert!(err.to_string().contains("--name"), "{err}");
        let err = filter(&["--from", "5s", "--to", "1s"]).expect_err("inverted window");
        assert!(err.to_string().contains("--from"), "{err}");
        assert!(parse(&["--top", "ten"]).is_err());
    }

    #[test]
    fn attach_takes_pid_lists() {
        let cli = Cli::try_parse_from(["npu-bpftrace", "attach", "--pid", "1,2", "--pid", "3"])
            .expect("parses");
        let Command::Attach { pids, .. } = cli.command else {
            panic!("not attach");
        };
        assert_eq!(pids, [1, 2, 3]);
    }

    /// Capture control and output conventions reach the trace options.
    #[test]
    fn capture_arguments() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from([&["npu-bpftrace", "record"], args, &["--", "a.out"]].concat())
        };
        let options = |args: &[&str]| {
            let Command::Record { trace, .. } = parse(args).expect("parses").command else {
                panic!("not record");
            };
            trace.options(Mode::SystemWide)
        };
        let o = options(&[
            "--delay",
            "2s",
            "--capture-range",
            "mstx:step*",
            "--capture-range-count",
            "3",
            "--print-format",
            "json",
            "--out",
            "t-%h",
        ])
        .expect("valid");
        assert_eq!(o.delay, Some(Duration::from_secs(2)));
        let range = o.capture_range.expect("range");
        assert_eq!(
            (range.message.as_str(), range.prefix, range.count),
            ("step", true, Some(3))
        );
        assert_eq!(
            o.print,
            Some(PrintFormat::Json),
            "--print-format implies --print"
        );
        assert_eq!(o.out_dir, PathBuf::from("t-%h"));
        let o = options(&["--print"]).expect("valid");
        assert_eq!(
            (o.print, o.out_dir),
            (Some(PrintFormat::Text), PathBuf::from(outname::DEFAULT))
        );
        assert!(options(&["--capture-range", "nvtx:step"]).is_err());
        assert!(
            parse(&["--capture-range-count", "3"]).is_err(),
            "needs --capture-range"
        );
        let quiet = Cli::try_parse_from(["npu-bpftrace", "report", "DIR", "-q"]).expect("global");
        assert!(quiet.quiet);
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
