//! `npu-bpftrace probes`: the catalog's entries, and what they and `--function` resolve to
//! in each library file found (installed ones, or those a process maps), with counts.
use std::{collections::BTreeMap, fmt::Write};

use anyhow::Result;

use tracer_catalog::{Catalog, Domain, Entry, Symbols};

use crate::{
    attach::{Selection, plan_file},
    discovery::LibraryFile,
    symbols::SymbolTable,
};

/// What the selection attaches in one library file.
struct Resolved {
    file: LibraryFile,
    /// Functions per catalog entry index (`None`: known only by name).
    by_entry: BTreeMap<Option<usize>, Vec<(String, u64)>>,
    /// Enabled functions an exact entry names that the file lacks.
    missing: Vec<&'static str>,
}

/// The listing: catalog sources, one line per entry with where it resolves, then per library
/// file what the selection attaches there.
pub fn render(catalog: &Catalog, selection: &Selection, files: &[LibraryFile]) -> Result<String> {
    let resolved = resolve(catalog, selection, files)?;
    let mut out = String::new();
    for source in catalog.sources() {
        writeln!(out, "catalog: {source}")?;
    }
    writeln!(
        out,
        "\n{:<34} {:<7} {:<20} {:<12} where",
        "function", "domain", "library", "mspti"
    )?;
    for (index, entry) in catalog.entries().iter().enumerate() {
        writeln!(out, "{}", entry_line(index, entry, &resolved))?;
    }
    writeln!(
        out,
        "\nattached with this selection ({} files):",
        resolved.len()
    )?;
    for r in &resolved {
        let total: usize = r.by_entry.values().map(Vec::len).sum();
        writeln!(
            out,
            "{}  {} ({total} functions)",
            r.file.name,
            r.file.path.display()
        )?;
        // Entries of one function each make one line; a glob or the functions known only
        // by name a line each.
        let mut named = Vec::new();
        for (entry, functions) in &r.by_entry {
            let what = match entry {
                Some(i) if catalog.entries()[*i].symbols.is_glob() => {
                    pattern(&catalog.entries()[*i])
                }
                Some(_) => {
                    named.extend(functions.iter().cloned());
                    continue;
                }
                None => "known only by name (--function)".to_owned(),
            };
            writeln!(out, "  {:>6}  {what}{}", functions.len(), sample(functions))?;
        }
        if !named.is_empty() {
            writeln!(out, "  {:>6}  named entries{}", named.len(), sample(&named))?;
        }
        if !r.missing.is_empty() {
            writeln!(out, "  missing: {}", r.missing.join(", "))?;
        }
    }
    Ok(out)
}

fn resolve(
    catalog: &Catalog,
    selection: &Selection,
    files: &[LibraryFile],
) -> Result<Vec<Resolved>> {
    let mut resolved = Vec::new();
    for file in files {
        let symbols = SymbolTable::read(&file.path)?;
        let plan = plan_file(catalog, selection, file.name, &symbols);
        let mut by_entry: BTreeMap<_, Vec<_>> = BTreeMap::new();
        for (offset, def, _) in plan.functions {
            let entry = catalog.entry_index(file.name, def.symbol);
            by_entry
                .entry(entry)
                .or_default()
                .push((def.symbol.to_owned(), offset));
        }
        resolved.push(Resolved {
            file: file.clone(),
            by_entry,
            missing: plan.missing,
        });
    }
    Ok(resolved)
}

/// `aclnn*` with its exclusions, or the function name.
fn pattern(entry: &Entry) -> String {
    let mut text = entry.def.symbol.to_owned();
    if !entry.exclude.is_empty() {
        text += &format!(" !{}", entry.exclude.join(" !"));
    }
    text
}

/// A few of the functions a glob resolved to.
fn sample(functions: &[(String, u64)]) -> String {
    const SHOWN: usize = 4;
    if functions.len() <= 1 {
        return String::new();
    }
    let names: Vec<&str> = functions
        .iter()
        .take(SHOWN)
        .map(|(n, _)| n.as_str())
        .collect();
    let more = if functions.len() > SHOWN { ", ..." } else { "" };
    format!(": {}{more}", names.join(", "))
}

fn entry_line(index: usize, entry: &Entry, resolved: &[Resolved]) -> String {
    let def = &entry.def;
    let mspti = def
        .mspti
        .map_or("-".to_string(), |(d, id)| format!("{}:{id}", d.name()));
    let default = if Domain::DEFAULT.contains(&def.domain) {
        ""
    } else {
        " (opt-in)"
    };
    let place = match &entry.symbols {
        Symbols::Exact(symbol) => exact_place(index, symbol, entry, resolved),
        Symbols::Glob { .. } => {
            let counts: Vec<String> = resolved
                .iter()
                .filter_map(|r| {
                    let n = r.by_entry.get(&Some(index))?.len();
                    Some(format!("{n} in {}", r.file.name))
                })
                .collect();
            if counts.is_empty() {
                "no function attached".to_owned()
            } else {
                counts.join(", ")
            }
        }
    };
    format!(
        "{:<34} {:<7} {:<20} {:<12} {place}{default}",
        pattern(entry),
        def.domain.name(),
        entry.libraries.join(","),
        mspti
    )
}

fn exact_place(index: usize, symbol: &str, entry: &Entry, resolved: &[Resolved]) -> String {
    let at = resolved.iter().find_map(|r| {
        let (_, offset) = r
            .by_entry
            .get(&Some(index))?
            .iter()
            .find(|(n, _)| n == symbol)?;
        Some(format!("{}+{offset:#x}", r.file.path.display()))
    });
    match at {
        Some(at) => at,
        None if resolved
            .iter()
            .any(|r| r.missing.contains(&entry.def.symbol)) =>
        {
            "not found".to_owned()
        }
        None if resolved.iter().any(|r| entry.names_library(r.file.name)) => {
            "not selected".to_owned()
        }
        None => String::new(),
    }
}
