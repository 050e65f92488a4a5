//! Turning the enabled part of the catalog into attached uprobes on library files: each
//! function to trace gets its probe id from the probe table (shared with the correlator)
//! as its file is attached.
use std::{collections::BTreeSet, sync::Arc};

use anyhow::{Result, bail};
use tracer_common::ProbeRole;

use tracer_catalog::{Catalog, Domain, FunctionPatterns, ProbeDef, ProbeTable};
use tracer_schema::session::AttachedFile;

use crate::{
    bpf::{AttachKind, Probes},
    discovery::{LibraryFile, LibrarySet},
    session::clock_ns,
    symbols::SymbolTable,
};

/// Which functions are traced, like msptiEnableDomain / msptiEnableCallback.
#[derive(Debug, Clone)]
pub struct Selection {
    domains: Vec<Domain>,
    functions: FunctionPatterns,
}

impl Selection {
    /// `domains` and the selecting `functions` (names or globs) add up; `!` patterns leave
    /// functions out of both; with no domain and no selecting pattern, the default domains
    /// are traced. Unknown domains and malformed patterns are errors that say why.
    pub fn new(domains: &[String], functions: &[String]) -> Result<Self> {
        let functions = FunctionPatterns::new(functions)?;
        let mut wanted = Vec::new();
        for name in domains {
            if name.eq_ignore_ascii_case("all") {
                wanted.extend(Domain::ALL);
            } else if let Some(domain) = Domain::parse(name) {
                wanted.push(domain);
            } else {
                let known: Vec<_> = Domain::ALL
                    .iter()
                    .map(|d| d.name().to_lowercase())
                    .collect();
                bail!("unknown domain '{name}' (known: {}, all)", known.join(", "));
            }
        }
        if domains.is_empty() && !functions.selects() {
            wanted.extend(Domain::DEFAULT);
        }
        Ok(Self {
            domains: wanted,
            functions,
        })
    }

    /// Whether calls of `def` are reported (API records).
    pub fn is_enabled(&self, def: &ProbeDef) -> bool {
        (self.domains.contains(&def.domain) || self.functions.includes(def.symbol))
            && !self.functions.excludes(def.symbol)
    }

    /// Whether `def` is attached: enabled for API records, or needed for device activity
    /// (then attached quietly).
    pub fn is_attached(&self, def: &ProbeDef) -> bool {
        self.is_enabled(def) || def.device_role != ProbeRole::Api
    }

    /// Whether any domain is traced (given, or the defaults).
    pub fn selects_domains(&self) -> bool {
        !self.domains.is_empty()
    }

    /// Whether `--function` selects `symbol` (by name or glob).
    fn names(&self, symbol: &str) -> bool {
        self.functions.includes(symbol)
    }

    /// The `--function` patterns.
    pub fn functions(&self) -> &FunctionPatterns {
        &self.functions
    }
}

/// What to attach in one library file: (file offset, function, enabled), and the enabled
/// functions an exact catalog entry names that the file lacks.
#[derive(Debug, Default)]
pub struct FilePlan {
    pub functions: Vec<(u64, ProbeDef, bool)>,
    pub missing: Vec<&'static str>,
}

/// The functions of library file `name` (its symbols `symbols`) that `selection` traces:
/// those the catalog's entries name (exact entries wherever the file defines them, globs
/// over its exports), and exports `--function` names that no entry does (a generic entry).
pub fn plan_file(
    catalog: &Catalog,
    selection: &Selection,
    name: &str,
    symbols: &SymbolTable,
) -> FilePlan {
    let mut plan = FilePlan::default();
    let mut done = BTreeSet::new();
    let add = |plan: &mut FilePlan, offset: u64, def: ProbeDef| {
        let enabled = selection.is_enabled(&def);
        if enabled || selection.is_attached(&def) {
            plan.functions.push((offset, def, enabled));
        }
    };
    // Exact entries first: a function defined but not exported (a stripped local symbol)
    // is still found by name.
    for entry in catalog.entries() {
        let tracer_catalog::Symbols::Exact(symbol) = entry.symbols else {
            continue;
        };
        if !entry.names_library(name) || !done.insert(symbol) {
            continue;
        }
        let Some(def) = catalog.resolve(name, symbol) else {
            continue;
        };
        match symbols.file_offset(symbol) {
            Some(offset) => add(&mut plan, offset, def),
            None if selection.is_attached(&def) => plan.missing.push(def.symbol),
            None => {}
        }
    }
    for symbol in symbols.exported() {
        if done.contains(symbol.as_str()) {
            continue;
        }
        let def = match catalog.resolve(name, symbol) {
            Some(def) => def,
            None if selection.names(symbol) => catalog.generic(name, symbol),
            None => continue,
        };
        if let Some(offset) = symbols.file_offset(symbol) {
            add(&mut plan, offset, def);
        }
    }
    plan
}

/// Functions of a library file that no process maps yet beyond which perf-event uprobes are
/// attached only once a process maps it ([`Attacher::attach_unmapped`]).
pub const PERF_EVENT_EAGER_LIMIT: usize = 256;

/// Attaches enabled probes to each library file once, giving each function its probe id.
pub struct Attacher {
    catalog: Arc<Catalog>,
    probes: Arc<ProbeTable>,
    selection: Selection,
    files: LibrarySet,
    attached: Vec<AttachedFile>,
}

impl Attacher {
    pub fn new(selection: Selection, catalog: Arc<Catalog>, probes: Arc<ProbeTable>) -> Self {
        Self {
            catalog,
            probes,
            selection,
            files: LibrarySet::default(),
            attached: Vec::new(),
        }
    }

    /// Attaches to `file` unless that file was attached before. Returns the number of
    /// functions attached.
    pub fn attach(&mut self, probes: &mut Probes, file: LibraryFile) -> Result<usize> {
        self.attach_file(probes, file, false)
    }

    /// Attaches to `file`, which no traced process maps yet (an installed library, attached
    /// before the command starts). With perf-event uprobes, a file of more than
    /// [`PERF_EVENT_EAGER_LIMIT`] functions (the operator libraries) waits until a process
    /// maps it: each perf-event uprobe costs about 0.1 s to release, and most programs never
    /// load most operator libraries.
    pub fn attach_unmapped(&mut self, probes: &mut Probes, file: LibraryFile) -> Result<usize> {
        self.attach_file(probes, file, true)
    }

    fn attach_file(
        &mut self,
        probes: &mut Probes,
        file: LibraryFile,
        defer: bool,
    ) -> Result<usize> {
        if self.files.contains(&file) {
            return Ok(0);
        }
        let symbols = match SymbolTable::read(&file.path) {
            Ok(symbols) => symbols,
            Err(e) => return Err(self.failed(file, Vec::new(), e)),
        };
        let plan = plan_file(&self.catalog, &self.selection, file.name, &symbols);
        if defer
            && probes.attach_kind() == AttachKind::PerfEvent
            && plan.functions.len() > PERF_EVENT_EAGER_LIMIT
        {
            return Ok(0);
        }
        let missing = plan.missing.iter().map(|s| s.to_string()).collect();
        let mut functions = Vec::with_capacity(plan.functions.len());
        let mut names = Vec::with_capacity(plan.functions.len());
        for (offset, def, enabled) in plan.functions {
            let id = self.probes.insert(def)?;
            probes.set_probe_spec(id, def.spec(!enabled))?;
            functions.push((offset, id));
            names.push(def.symbol.to_owned());
        }
        let attach = if functions.is_empty() {
            None
        } else {
            match probes.attach_file(&file.path, &functions) {
                Ok(kind) => Some(kind),
                Err(e) => return Err(self.failed(file, missing, e)),
            }
        };
        self.files.insert(file.clone());
        let count = names.len();
        self.attached.push(AttachedFile {
            library: file.name.to_owned(),
            path: file.path,
            functions: names,
            missing,
            attach,
            attached_ns: attach.map(|_| clock_ns(libc::CLOCK_MONOTONIC)),
            error: None,
        });
        Ok(count)
    }

    /// `file` could not be attached: it is remembered (not tried again) and listed with
    /// the reason, which is returned.
    fn failed(
        &mut self,
        file: LibraryFile,
        missing: Vec<String>,
        e: anyhow::Error,
    ) -> anyhow::Error {
        let e = e.context(format!("attaching {}", file.path.display()));
        self.files.insert(file.clone());
        self.attached.push(AttachedFile {
            library: file.name.to_owned(),
            path: file.path,
            functions: Vec::new(),
            missing,
            attach: None,
            attached_ns: None,
            error: Some(format!("{e:#}")),
        });
        e
    }

    pub fn attached(&self) -> &[AttachedFile] {
        &self.attached
    }

    /// Functions attached over all files.
    pub fn function_count(&self) -> usize {
        self.attached.iter().map(|a| a.functions.len()).sum()
    }

    /// `--function` patterns that select no function of any attached file.
    pub fn unmatched_functions(&self) -> Vec<String> {
        let attached = self
            .attached
            .iter()
            .flat_map(|a| a.functions.iter().map(String::as_str));
        let unmatched = self.selection.functions().unmatched(attached);
        unmatched.into_iter().map(str::to_owned).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(symbol: &str) -> ProbeDef {
        *Catalog::builtin().find(symbol).unwrap()
    }

    #[test]
    fn selection_follows_domains_and_functions() {
        let default = Selection::new(&[], &[]).unwrap();
        assert!(default.is_enabled(&def("aclrtMemcpy")));
        let send = def("halSqTaskSend");
        assert!(
            !default.is_enabled(&send) && default.is_attached(&send),
            "quiet device probe"
        );
        assert!(!default.is_attached(&def("halGetDeviceInfo")));

        let hccl = Selection::new(&["hccl".into()], &["aclrtMemcpy".into()]).unwrap();
        assert!(hccl.is_enabled(&def("HcclAllReduce")));
        assert!(hccl.is_enabled(&def("aclrtMemcpy")));
        assert!(!hccl.is_enabled(&def("aclrtMalloc")));

        let err = Selection::new(&["gpu".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown domain 'gpu'"), "{err}");
    }
}
