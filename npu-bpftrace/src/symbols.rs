//! ELF symbol resolution: function name -> file offset, the form uprobes attach by.
//!
//! Reads `.dynsym` and `.symtab` (exports and, where not stripped, local symbols), strips
//! symbol versions (`rtMalloc@@CANN_1.0`), and converts virtual addresses to file offsets
//! through the loadable segments.
use std::{collections::HashMap, fs, path::Path};

use anyhow::{Context, Result};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// The function symbols of one ELF file.
#[derive(Debug, Default)]
pub struct SymbolTable {
    /// Name -> virtual address.
    functions: HashMap<String, u64>,
    /// The functions the file exports (`.dynsym`), sorted: what globs expand to.
    exported: Vec<String>,
    /// Sorted (address, size, name) for address -> name lookups.
    by_address: Vec<(u64, u64, String)>,
    /// Loadable segments: (virtual address, size, file offset).
    segments: Vec<(u64, u64, u64)>,
}

impl SymbolTable {
    pub fn read(path: &Path) -> Result<Self> {
        let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&data).with_context(|| format!("parsing ELF {}", path.display()))
    }

    pub fn parse(data: &[u8]) -> Result<Self> {
        let file = object::File::parse(data)?;
        let mut table = Self::default();
        for symbol in file.dynamic_symbols() {
            if symbol.kind() == SymbolKind::Text
                && !symbol.is_undefined()
                && symbol.address() != 0
                && let Ok(name) = symbol.name()
            {
                table.exported.push(unversioned(name).to_string());
            }
        }
        table.exported.sort();
        table.exported.dedup();
        for symbol in file.dynamic_symbols().chain(file.symbols()) {
            if symbol.kind() != SymbolKind::Text || symbol.is_undefined() || symbol.address() == 0 {
                continue;
            }
            let Ok(name) = symbol.name() else { continue };
            let name = unversioned(name);
            table
                .functions
                .entry(name.to_string())
                .or_insert(symbol.address());
            table
                .by_address
                .push((symbol.address(), symbol.size(), name.to_string()));
        }
        table.by_address.sort();
        table.by_address.dedup_by(|a, b| a.0 == b.0);
        table.segments = file
            .segments()
            .map(|s| (s.address(), s.size(), s.file_range().0))
            .collect();
        Ok(table)
    }

    /// File offset of function `name`, if the file defines it.
    pub fn file_offset(&self, name: &str) -> Option<u64> {
        self.functions
            .get(name)
            .and_then(|&addr| self.vaddr_to_offset(addr))
    }

    fn vaddr_to_offset(&self, addr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(start, size, _)| addr >= *start && addr < start + size)
            .map(|(start, _, offset)| addr - start + offset)
    }

    /// The function containing file offset `offset` (a mapped address made file-relative).
    pub fn function_at_file_offset(&self, offset: u64) -> Option<&str> {
        let (start, _, seg_offset) = self
            .segments
            .iter()
            .find(|(_, size, seg_offset)| offset >= *seg_offset && offset < seg_offset + size)?;
        self.function_at(offset - seg_offset + start)
    }

    /// The function containing virtual address `addr` (symbolization of kernel stubs).
    pub fn function_at(&self, addr: u64) -> Option<&str> {
        let i = self.by_address.partition_point(|(a, _, _)| *a <= addr);
        let (start, size, name) = self.by_address.get(i.checked_sub(1)?)?;
        (addr == *start || addr < start + (*size).max(1)).then_some(name.as_str())
    }

    /// The functions the file exports, sorted by name.
    pub fn exported(&self) -> &[String] {
        &self.exported
    }

    pub fn len(&self) -> usize {
        self.functions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }
}

/// `name@VER` / `name@@VER` -> `name`.
fn unversioned(name: &str) -> &str {
    name.split_once('@').map_or(name, |(base, _)| base)
}

/// The kernel names of a device ELF (a CANN kernel binary): its defined function symbols,
/// whatever their addresses (device code is not loaded at host addresses). A blob that is
/// not an ELF has none.
pub fn kernel_symbols(data: &[u8]) -> Vec<String> {
    let Ok(file) = object::File::parse(data) else {
        return Vec::new();
    };
    file.symbols()
        .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined() && s.is_global())
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_symbol_versions() {
        assert_eq!(unversioned("rtMalloc@@CANN_1.0"), "rtMalloc");
        assert_eq!(unversioned("memcpy@GLIBC_2.2.5"), "memcpy");
        assert_eq!(unversioned("plain"), "plain");
    }

    #[test]
    fn resolves_own_binary_functions() {
        let exe = std::env::current_exe().expect("test binary path");
        let table = SymbolTable::read(&exe).expect("parse test binary");
        assert!(!table.is_empty());
        // `main` is always a text symbol of an executable, and lies in a loadable segment.
        let offset = table.file_offset("main").expect("main resolves");
        assert!(offset > 0);
    }
}
