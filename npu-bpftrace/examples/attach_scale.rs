//! Attach and release time of the generic ENTER/EXIT pair (`cargo xtask bench`, part 5):
//! loads the BPF programs, attaches them to many functions the way the agent does, then
//! drops everything in this process and times the kernel's release. Prints JSON. Needs root.
//!
//! ```sh
//! # every function `PREFIX0`..`PREFIX<N-1>` of one library (the bench generates one):
//! attach_scale --lib libmany.so --prefix bench_fn_ --count 2000 [--mode auto|multi|perf]
//! # the whole catalog, in the CANN libraries of these directories:
//! attach_scale --catalog DIR [--catalog DIR ...] [--mode auto|multi|perf]
//! ```
use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Instant,
};

use anyhow::{Context, Result, bail};
use npu_bpftrace::{
    attach::{Attacher, Selection},
    bpf::{AttachKind, Probes, UprobeMode},
    discovery,
    symbols::SymbolTable,
};
use serde_json::json;
use tracer_catalog::{Catalog, ProbeTable};

const USAGE: &str = "usage: attach_scale (--lib FILE --prefix NAME --count N | --catalog DIR...) [--mode auto|multi|perf]";

fn main() -> Result<()> {
    let mut mode = UprobeMode::Auto;
    let (mut lib, mut prefix, mut count, mut catalog) = (None, None, 0usize, Vec::new());
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--lib" => lib = Some(PathBuf::from(value()?)),
            "--prefix" => prefix = Some(value()?),
            "--count" => count = value()?.parse()?,
            "--catalog" => catalog.push(PathBuf::from(value()?)),
            "--mode" => {
                mode = match value()?.as_str() {
                    "auto" => UprobeMode::Auto,
                    "multi" => UprobeMode::Multi,
                    "perf" => UprobeMode::PerfEvent,
                    other => bail!("unknown mode {other}; {USAGE}"),
                }
            }
            _ => bail!("{USAGE}"),
        }
    }

    let started = Instant::now();
    let mut probes = Probes::load(1 << 20, mode)?;
    let load_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let (functions, files, kinds) = match (lib, prefix, catalog.is_empty()) {
        (Some(lib), Some(prefix), true) => {
            let kind = attach_generated(&mut probes, &lib, &prefix, count)?;
            (count, 1, vec![kind])
        }
        (None, None, false) => attach_catalog(&mut probes, &catalog)?,
        _ => bail!("{USAGE}"),
    };
    let attach_seconds = started.elapsed().as_secs_f64();
    // Everything is released here, in this process: links and perf events are closed and
    // the kernel unregisters their uprobes before the drop returns.
    let started = Instant::now();
    drop(probes);
    let release_seconds = started.elapsed().as_secs_f64();

    let mut kinds: Vec<&str> = kinds.into_iter().map(AttachKind::name).collect();
    kinds.dedup();
    let report = json!({
        "attach": kinds.join(","),
        "functions": functions,
        "files": files,
        "load_seconds": load_seconds,
        "attach_seconds": attach_seconds,
        "release_seconds": release_seconds,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// Attaches to `PREFIX0`..`PREFIX<count-1>` of `lib`, probe ids (cookies) in order.
fn attach_generated(
    probes: &mut Probes,
    lib: &Path,
    prefix: &str,
    count: usize,
) -> Result<AttachKind> {
    let symbols = SymbolTable::read(lib)?;
    let mut functions = Vec::with_capacity(count);
    for i in 0..count {
        let name = format!("{prefix}{i}");
        let offset = symbols
            .file_offset(&name)
            .with_context(|| format!("{} does not export {name}", lib.display()))?;
        functions.push((offset, u16::try_from(i).context("at most 65536 functions")?));
    }
    probes.attach_file(lib, &functions)
}

/// Attaches every catalog function (all domains) to the CANN libraries in `dirs`, as the
/// agent does.
fn attach_catalog(
    probes: &mut Probes,
    dirs: &[PathBuf],
) -> Result<(usize, usize, Vec<AttachKind>)> {
    let selection = Selection::new(&["all".to_owned()], &[])?;
    let catalog = Arc::new(Catalog::builtin().clone());
    let mut attacher = Attacher::new(selection, catalog.clone(), Arc::new(ProbeTable::new()));
    for file in discovery::installed_libraries(dirs, &[], &catalog) {
        attacher.attach(probes, file)?;
    }
    let kinds = attacher
        .attached()
        .iter()
        .filter_map(|f| f.attach)
        .collect();
    Ok((attacher.function_count(), attacher.attached().len(), kinds))
}
