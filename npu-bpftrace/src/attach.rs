//! Turning the enabled part of the catalog into attached uprobes on library files.
use anyhow::{Result, bail};
use tracer_common::ProbeRole;

use tracer_catalog::{self as catalog, CATALOG, Domain};
use tracer_schema::session::AttachedFile;

use crate::{
    bpf::Probes,
    discovery::{LibraryFile, LibrarySet},
    symbols::SymbolTable,
};

/// Which catalog entries are traced, like msptiEnableDomain / msptiEnableCallback.
#[derive(Debug, Clone)]
pub struct Selection {
    enabled: Vec<bool>,
}

impl Selection {
    /// `domains` and `functions` add up; with neither, the default domains are traced.
    /// Unknown names are errors that list what exists.
    pub fn new(domains: &[String], functions: &[String]) -> Result<Self> {
        let mut enabled = vec![false; CATALOG.len()];
        let mut wanted_domains = Vec::new();
        for name in domains {
            if name.eq_ignore_ascii_case("all") {
                wanted_domains.extend(Domain::ALL);
            } else if let Some(domain) = Domain::parse(name) {
                wanted_domains.push(domain);
            } else {
                let known: Vec<_> = Domain::ALL
                    .iter()
                    .map(|d| d.name().to_lowercase())
                    .collect();
                bail!("unknown domain '{name}' (known: {}, all)", known.join(", "));
            }
        }
        if domains.is_empty() && functions.is_empty() {
            wanted_domains.extend(Domain::DEFAULT);
        }
        for (i, def) in CATALOG.iter().enumerate() {
            enabled[i] = wanted_domains.contains(&def.domain);
        }
        for name in functions {
            let Some(probe) = catalog::find(name) else {
                bail!("unknown function '{name}' (see `npu-bpftrace probes` for the catalog)");
            };
            enabled[probe as usize] = true;
        }
        Ok(Self { enabled })
    }

    pub fn is_enabled(&self, probe: u16) -> bool {
        self.enabled.get(probe as usize).copied().unwrap_or(false)
    }

    /// Whether `probe` is attached: enabled for API records, or needed for device activity
    /// (then attached quietly).
    pub fn is_attached(&self, probe: u16) -> bool {
        self.is_enabled(probe)
            || catalog::by_probe(probe).is_some_and(|d| d.device_role != ProbeRole::Api)
    }
}

/// Attaches enabled probes to each library file once.
pub struct Attacher {
    selection: Selection,
    files: LibrarySet,
    attached: Vec<AttachedFile>,
}

impl Attacher {
    pub fn new(selection: Selection) -> Self {
        Self {
            selection,
            files: LibrarySet::default(),
            attached: Vec::new(),
        }
    }

    /// Attaches to `file` unless that file was attached before. Returns the number of
    /// functions attached.
    pub fn attach(&mut self, probes: &mut Probes, file: LibraryFile) -> Result<usize> {
        if !self.files.insert(file.clone()) {
            return Ok(0);
        }
        let symbols = SymbolTable::read(&file.path)?;
        let mut record = AttachedFile {
            library: file.library.file_name().to_owned(),
            path: file.path.clone(),
            functions: Vec::new(),
            missing: Vec::new(),
            attach: None,
        };
        let mut functions = Vec::new();
        for (index, def) in CATALOG.iter().enumerate() {
            let probe = catalog::probe_id(index);
            if def.library != file.library || !self.selection.is_attached(probe) {
                continue;
            }
            match symbols.file_offset(def.symbol) {
                Some(offset) => {
                    functions.push((offset, probe));
                    record.functions.push(def.symbol.to_owned());
                }
                None => record.missing.push(def.symbol.to_owned()),
            }
        }
        if !functions.is_empty() {
            record.attach = Some(probes.attach_file(&file.path, &functions)?);
        }
        let count = record.functions.len();
        self.attached.push(record);
        Ok(count)
    }

    pub fn attached(&self) -> &[AttachedFile] {
        &self.attached
    }

    /// Functions attached over all files.
    pub fn function_count(&self) -> usize {
        self.attached.iter().map(|a| a.functions.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_follows_domains_and_functions() {
        let default = Selection::new(&[], &[]).unwrap();
        assert!(default.is_enabled(catalog::find("aclrtMemcpy").unwrap()));
        let send = catalog::find("halSqTaskSend").unwrap();
        assert!(
            !default.is_enabled(send) && default.is_attached(send),
            "quiet device probe"
        );
        assert!(!default.is_attached(catalog::find("halGetDeviceInfo").unwrap()));

        let hccl = Selection::new(&["hccl".into()], &["aclrtMemcpy".into()]).unwrap();
        assert!(hccl.is_enabled(catalog::find("HcclAllReduce").unwrap()));
        assert!(hccl.is_enabled(catalog::find("aclrtMemcpy").unwrap()));
        assert!(!hccl.is_enabled(catalog::find("aclrtMalloc").unwrap()));

        let err = Selection::new(&["gpu".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown domain 'gpu'"), "{err}");
        let err = Selection::new(&[], &["cudaMalloc".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown function 'cudaMalloc'"), "{err}");
    }
}
