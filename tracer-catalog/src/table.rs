//! The probe table: what each probe id (the attach cookie, the index into the BPF array
//! `PROBE_SPECS`) stands for. Ids are handed out as library files are attached (catalog
//! entries and the functions their globs expand to, functions known only by name), so the
//! attacher fills the table and the correlator reads it; it only grows.
use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use tracer_common::MAX_PROBES;

use crate::{catalog::Catalog, model::ProbeDef};

/// Probe ids and their functions, shared by the attacher (which adds) and the correlator
/// (which reads). Append-only: an id, once given, names the same function for the session.
#[derive(Debug, Default)]
pub struct ProbeTable {
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    defs: Vec<&'static ProbeDef>,
    /// (library file name, function) -> id.
    ids: HashMap<(&'static str, &'static str), u16>,
}

/// The table holds [`MAX_PROBES`] functions, what the BPF programs can describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableFull;

impl std::fmt::Display for TableFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "more than {MAX_PROBES} functions to trace (the BPF probe table's size): narrow \
             --function or --domain"
        )
    }
}

impl std::error::Error for TableFull {}

impl ProbeTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// A table of every exact entry of the built-in catalog, in file order (replays, tests).
    pub fn builtin() -> Arc<Self> {
        let table = Self::new();
        for entry in Catalog::builtin().entries() {
            if !entry.symbols.is_glob() && !crate::file::is_glob(entry.def.library) {
                // The built-in catalog is far smaller than the table.
                let _ = table.insert(entry.def);
            }
        }
        Arc::new(table)
    }

    /// The id of function `def` (its library file and name): the one it already has, or
    /// the next.
    pub fn insert(&self, def: ProbeDef) -> Result<u16, TableFull> {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = inner.ids.get(&(def.library, def.symbol)) {
            return Ok(id);
        }
        let id = u16::try_from(inner.defs.len())
            .ok()
            .filter(|&id| u32::from(id) < MAX_PROBES)
            .ok_or(TableFull)?;
        let def: &'static ProbeDef = Box::leak(Box::new(def));
        inner.defs.push(def);
        inner.ids.insert((def.library, def.symbol), id);
        Ok(id)
    }

    /// The function of probe id `id`.
    pub fn get(&self, id: u16) -> Option<&'static ProbeDef> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner.defs.get(usize::from(id)).copied()
    }

    /// The first id given to a function named `symbol`, whatever its library.
    pub fn find(&self, symbol: &str) -> Option<u16> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        let index = inner.defs.iter().position(|d| d.symbol == symbol)?;
        u16::try_from(index).ok()
    }

    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .defs
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
