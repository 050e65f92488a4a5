//! A catalog: the built-in file of a CANN release line, then the files `--catalog` adds, as
//! entries that name a function or a glob of functions of a library (or a glob of
//! libraries). [`Catalog::resolve`] says what a function of a library file is traced as.
use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::{LazyLock, Mutex},
};

use globset::{Glob, GlobMatcher, GlobSet, GlobSetBuilder};
use tracer_common::{FAR_ARG_SLOT, ProbeRole};
use tracer_schema::vocab::MemoryKind;

use crate::file::{
    self, CatalogFile, ColumnName, DeviceRoleName, DomainName, FileError, FunctionSpec, MAX_ARGS,
    MsptiName, OpNameFrom, PayloadName, RetName, RoleName, TaskName, TextName,
};
use crate::model::{
    Arg, Column, Domain, MsptiDomain, OpNaming, Out, Payload, ProbeDef, Ret, Role, TaskKind, Text,
    library_base_name,
};

/// The built-in catalogs, one per CANN release line, newest last.
const BUILTIN: &[(&str, &str)] = &[(
    "catalogs/cann-8.toml",
    include_str!("../catalogs/cann-8.toml"),
)];

/// A string that lives as long as the process: catalog names and expanded function names
/// are kept for the whole session (the probe table is append-only), each once.
pub fn intern(s: &str) -> &'static str {
    static STRINGS: LazyLock<Mutex<HashSet<&'static str>>> = LazyLock::new(Default::default);
    let mut strings = STRINGS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = strings.get(s) {
        return known;
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    strings.insert(leaked);
    leaked
}

/// Where an entry comes from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub file: &'static str,
    pub line: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// The functions an entry names.
#[derive(Debug, Clone)]
pub enum Symbols {
    Exact(&'static str),
    Glob {
        matcher: GlobMatcher,
        exclude: Option<GlobSet>,
    },
}

impl Symbols {
    pub fn matches(&self, symbol: &str) -> bool {
        match self {
            Self::Exact(name) => *name == symbol,
            Self::Glob { matcher, exclude } => {
                matcher.is_match(symbol) && !exclude.as_ref().is_some_and(|x| x.is_match(symbol))
            }
        }
    }

    pub fn is_glob(&self) -> bool {
        matches!(self, Self::Glob { .. })
    }
}

/// One `[[function]]` entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// What it says; `library` and `symbol` are the entry's (maybe globs).
    pub def: ProbeDef,
    pub symbols: Symbols,
    /// The `exclude` globs, as written.
    pub exclude: Vec<&'static str>,
    /// The library names or globs, as written.
    pub libraries: Vec<&'static str>,
    library: GlobSet,
    pub origin: Origin,
}

impl Entry {
    /// Whether the entry's library pattern names library file `file_name`.
    pub fn names_library(&self, file_name: &str) -> bool {
        self.library.is_match(library_base_name(file_name))
    }
}

/// A `[[library]]` rule.
#[derive(Debug, Clone)]
struct LibraryRule {
    matcher: GlobMatcher,
    domain: Domain,
}

/// A catalog that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError(String);

impl std::fmt::Display for CatalogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CatalogError {}

impl CatalogError {
    pub(crate) fn new(message: String) -> Self {
        Self(message)
    }
}

impl From<FileError> for CatalogError {
    fn from(e: FileError) -> Self {
        Self(e.to_string())
    }
}

/// Entries in precedence order: the built-in file first, then each added file.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    entries: Vec<Entry>,
    /// Exact entries by function name: indices into `entries`.
    exact: HashMap<&'static str, Vec<usize>>,
    /// Glob entries: indices into `entries`.
    globs: Vec<usize>,
    libraries: Vec<LibraryRule>,
    /// Every library pattern of the rules and entries in one set: discovery asks about
    /// every file a process maps, often.
    known_libraries: GlobSet,
    /// The patterns of `known_libraries`, to build it again when a file is added.
    library_patterns: Vec<String>,
    /// The release lines of the files, for `probes`.
    releases: Vec<String>,
}

impl Catalog {
    /// The built-in catalog (checked when the crate was built).
    pub fn builtin() -> &'static Catalog {
        static CATALOG: LazyLock<Catalog> = LazyLock::new(|| {
            let mut catalog = Catalog::default();
            for (origin, text) in BUILTIN {
                if let Err(e) = catalog.add_text(text, origin) {
                    // The build script parsed the same text: this cannot happen.
                    panic!("built-in catalog: {e}");
                }
            }
            catalog
        });
        &CATALOG
    }

    /// The built-in catalog with the entries of `files` added, each overriding what came
    /// before it.
    pub fn with_files(files: &[impl AsRef<Path>]) -> Result<Catalog, CatalogError> {
        let mut catalog = Self::builtin().clone();
        for path in files {
            let path = path.as_ref();
            let text = std::fs::read_to_string(path).map_err(|e| {
                CatalogError(format!("cannot read catalog file {}: {e}", path.display()))
            })?;
            catalog.add_text(&text, &path.display().to_string())?;
        }
        Ok(catalog)
    }

    /// Adds the entries of catalog file `text` (named `origin` in errors).
    pub fn add_text(&mut self, text: &str, origin: &str) -> Result<(), CatalogError> {
        let parsed: CatalogFile = file::parse(text, origin)?;
        let origin = intern(origin);
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        for spec in &parsed.library {
            let rule = spec.get_ref();
            self.libraries.push(LibraryRule {
                matcher: glob(&rule.name)?,
                domain: domain(rule.domain),
            });
        }
        for spec in &parsed.function {
            let origin = Origin {
                file: origin,
                line: line_of(spec.span().start),
            };
            let entry = entry(spec.get_ref(), origin)?;
            let index = self.entries.len();
            match entry.symbols {
                Symbols::Exact(name) => self.exact.entry(name).or_default().push(index),
                Symbols::Glob { .. } => self.globs.push(index),
            }
            self.entries.push(entry);
        }
        let header = &parsed.catalog;
        let mut source = origin.to_owned();
        if let Some(release) = &header.cann {
            source += &format!(" (CANN {release})");
        }
        if let Some(description) = &header.description {
            source += &format!(": {description}");
        }
        self.releases.push(source);
        self.library_patterns
            .extend(known_libraries(&parsed).map(str::to_owned));
        self.known_libraries = glob_set(&self.library_patterns)?;
        Ok(())
    }

    /// Every entry, in precedence order (later overrides earlier).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The files the catalog was read from.
    pub fn sources(&self) -> &[String] {
        &self.releases
    }

    /// The entry function `symbol` of library file `library` is traced as: an exact entry
    /// before a glob, and among those the last one read.
    pub fn entry_for(&self, library: &str, symbol: &str) -> Option<&Entry> {
        Some(&self.entries[self.entry_index(library, symbol)?])
    }

    /// The index in [`Catalog::entries`] of [`Catalog::entry_for`]'s entry.
    pub fn entry_index(&self, library: &str, symbol: &str) -> Option<usize> {
        let exact = self.exact.get(symbol).into_iter().flatten();
        exact
            .rev()
            .chain(self.globs.iter().rev())
            .copied()
            .find(|&i| {
                let e = &self.entries[i];
                e.names_library(library) && e.symbols.matches(symbol)
            })
    }

    /// What function `symbol` of library file `library` is traced as, if an entry names it.
    pub fn resolve(&self, library: &str, symbol: &str) -> Option<ProbeDef> {
        let entry = self.entry_for(library, symbol)?;
        Some(ProbeDef {
            library: intern(library_base_name(library)),
            symbol: intern(symbol),
            ..entry.def
        })
    }

    /// A function of `library` that no entry names: its raw arguments, in the library's
    /// domain.
    pub fn generic(&self, library: &str, symbol: &str) -> ProbeDef {
        ProbeDef::generic(
            intern(library_base_name(library)),
            intern(symbol),
            self.library_domain(library),
        )
    }

    /// The domain of functions known only by name in library file `library`.
    pub fn library_domain(&self, library: &str) -> Domain {
        let name = library_base_name(library);
        self.libraries
            .iter()
            .rev()
            .find(|rule| rule.matcher.is_match(name))
            .map_or(Domain::Other, |rule| rule.domain)
    }

    /// Whether discovery looks for library file `file_name`: a `[[library]]` rule or an
    /// entry names it.
    pub fn knows_library(&self, file_name: &str) -> bool {
        self.known_libraries.is_match(library_base_name(file_name))
    }

    /// The library names and glob patterns [`Catalog::knows_library`] matches base names
    /// against (the agent's kernel-side prefilter is built from them).
    pub fn library_patterns(&self) -> &[String] {
        &self.library_patterns
    }

    /// The exact entry of function `symbol`, whatever its library (tests, replays, the
    /// report's questions about a function name).
    pub fn find(&self, symbol: &str) -> Option<&ProbeDef> {
        let index = *self.exact.get(symbol)?.last()?;
        Some(&self.entries[index].def)
    }

    /// The library file name of the driver: the one whose function submits device tasks.
    pub fn driver_library(&self) -> Option<&'static str> {
        self.entries
            .iter()
            .find(|e| e.def.device_role == ProbeRole::SqSend)
            .map(|e| e.def.library)
    }
}

/// The library names and patterns of a file's rules and entries.
fn known_libraries(file: &CatalogFile) -> impl Iterator<Item = &str> {
    let rules = file.library.iter().map(|l| l.get_ref().name.as_str());
    let entries = file
        .function
        .iter()
        .flat_map(|f| f.get_ref().library.names());
    rules.chain(entries.map(String::as_str))
}

fn glob_set(patterns: &[String]) -> Result<GlobSet, CatalogError> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        set.add(
            Glob::new(pattern).map_err(|e| CatalogError(format!("'{pattern}': {}", e.kind())))?,
        );
    }
    set.build().map_err(|e| CatalogError(e.to_string()))
}

fn glob(pattern: &str) -> Result<GlobMatcher, CatalogError> {
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| CatalogError(format!("'{pattern}': {}", e.kind())))
}

fn entry(f: &FunctionSpec, origin: Origin) -> Result<Entry, CatalogError> {
    let symbols = if file::is_glob(&f.symbol) {
        let exclude = if f.exclude.is_empty() {
            None
        } else {
            let mut set = GlobSetBuilder::new();
            for pattern in &f.exclude {
                set.add(
                    Glob::new(pattern)
                        .map_err(|e| CatalogError(format!("{origin}: {}", e.kind())))?,
                );
            }
            Some(
                set.build()
                    .map_err(|e| CatalogError(format!("{origin}: {}", e.kind())))?,
            )
        };
        Symbols::Glob {
            matcher: glob(&f.symbol)?,
            exclude,
        }
    } else {
        Symbols::Exact(intern(&f.symbol))
    };
    // An argument past the registers' is read into the last slot (the file check keeps
    // that slot free for it).
    let far_arg = f.args.iter().map(|a| a.at).find(|&at| at >= MAX_ARGS);
    let args: Vec<Arg> = f
        .args
        .iter()
        .map(|a| Arg {
            index: if a.at >= MAX_ARGS {
                FAR_ARG_SLOT as u8
            } else {
                a.at
            },
            name: intern(&a.name),
            column: column(a.column),
        })
        .collect();
    let def = ProbeDef {
        library: intern(f.library.first()),
        symbol: intern(&f.symbol),
        domain: domain(f.domain),
        mspti: f.mspti.map(|m| {
            let domain = match m.domain {
                MsptiName::Runtime => MsptiDomain::Runtime,
                MsptiName::Hccl => MsptiDomain::Hccl,
            };
            (domain, m.cbid)
        }),
        args: Box::leak(args.into_boxed_slice()),
        text: f.text.map(|t| {
            let kind = match t.kind {
                TextName::KernelName | TextName::KernelNameFromHandle => Text::KernelName,
                TextName::Message => Text::Message,
                TextName::DevBinary => Text::DevBinary,
                TextName::OpType => Text::OpType,
            };
            (t.at, kind)
        }),
        text_from_handle: f
            .text
            .is_some_and(|t| t.kind == TextName::KernelNameFromHandle),
        out: f.out.map(|o| Out {
            index: o.at,
            size: o.size,
            column: column(o.column),
        }),
        ret: match (f.ret, f.ret_column) {
            (RetName::Status, _) => Ret::Status,
            (RetName::Void, _) => Ret::Void,
            (RetName::Raw, _) => Ret::Raw,
            (RetName::Value, Some(c)) => Ret::Value(column(c)),
            // Refused by the file check.
            (RetName::Value, None) => Ret::Raw,
        },
        role: role(f.role),
        task: f.task.map(|t| match t {
            TaskName::Kernel => TaskKind::Kernel,
            TaskName::Memcpy => TaskKind::Memcpy,
            TaskName::Memset => TaskKind::Memset,
            TaskName::Collective => TaskKind::Collective,
            TaskName::Sync => TaskKind::Sync,
            TaskName::Model => TaskKind::Model,
        }),
        is_async: f.is_async,
        payload: match f.payload {
            PayloadName::Count => Payload::Count,
            PayloadName::PerPeer => Payload::PerPeer,
            PayloadName::Nothing => Payload::Nothing,
        },
        device_role: match f.device_role {
            DeviceRoleName::Api => ProbeRole::Api,
            DeviceRoleName::SqSend => ProbeRole::SqSend,
            DeviceRoleName::CqRecv => ProbeRole::CqRecv,
            DeviceRoleName::ChannelRead => ProbeRole::ChannelRead,
            DeviceRoleName::CaptureBinary => ProbeRole::CaptureBinary,
            DeviceRoleName::StreamFill => ProbeRole::StreamFill,
        },
        op: f.op.as_ref().map(|op| match op.name {
            OpNameFrom::Symbol => OpNaming::Symbol {
                strip_prefix: intern(op.strip_prefix.as_deref().unwrap_or("")),
                strip_suffix: intern(op.strip_suffix.as_deref().unwrap_or("")),
            },
            OpNameFrom::Text => OpNaming::Text,
            OpNameFrom::Column => OpNaming::Column {
                column: column(op.column.unwrap_or(ColumnName::Value)),
                prefix: intern(op.prefix.as_deref().unwrap_or("")),
            },
        }),
        raw_args: false,
        far_arg,
    };
    Ok(Entry {
        def,
        symbols,
        exclude: f.exclude.iter().map(|x| intern(x)).collect(),
        libraries: f.library.names().iter().map(|x| intern(x)).collect(),
        library: glob_set(f.library.names())?,
        origin,
    })
}

fn domain(d: DomainName) -> Domain {
    match d {
        DomainName::Acl => Domain::Acl,
        DomainName::Runtime => Domain::Runtime,
        DomainName::Hccl => Domain::Hccl,
        DomainName::Mstx => Domain::Mstx,
        DomainName::Driver => Domain::Driver,
        DomainName::Op => Domain::Op,
        DomainName::Other => Domain::Other,
    }
}

fn column(c: ColumnName) -> Column {
    match c {
        ColumnName::DeviceId => Column::DeviceId,
        ColumnName::Stream => Column::Stream,
        ColumnName::Bytes => Column::Bytes,
        ColumnName::Count => Column::Count,
        ColumnName::AclMemcpyKind => Column::AclMemcpyKind,
        ColumnName::RtMemcpyKind => Column::RtMemcpyKind,
        ColumnName::Address => Column::Address,
        ColumnName::SrcAddress => Column::SrcAddress,
        ColumnName::Value => Column::Value,
        ColumnName::BlockDim => Column::BlockDim,
        ColumnName::Handle => Column::Handle,
        ColumnName::DataType => Column::DataType,
        ColumnName::ReduceOp => Column::ReduceOp,
        ColumnName::Rank => Column::Rank,
        ColumnName::RangeId => Column::RangeId,
    }
}

fn role(r: RoleName) -> Role {
    match r {
        RoleName::Plain => Role::Plain,
        RoleName::AllocDevice => Role::Alloc(MemoryKind::Device),
        RoleName::AllocHost => Role::Alloc(MemoryKind::Host),
        RoleName::FreeDevice => Role::Free(MemoryKind::Device),
        RoleName::FreeHost => Role::Free(MemoryKind::Host),
        RoleName::CommInit => Role::CommInit,
        RoleName::RegisterStub => Role::RegisterStub,
        RoleName::RegisterFunction => Role::RegisterFunction,
        RoleName::RegisterAllKernels => Role::RegisterAllKernels,
        RoleName::LaunchByHandle => Role::LaunchByHandle,
        RoleName::LaunchByStub => Role::LaunchByStub,
        RoleName::LaunchByTilingKey => Role::LaunchByTilingKey,
        RoleName::Mark => Role::MarkA,
        RoleName::RangeStart => Role::RangeStartA,
        RoleName::RangeEnd => Role::RangeEnd,
        RoleName::DomainCreate => Role::DomainCreate,
        RoleName::DomainMark => Role::DomainMark,
        RoleName::DomainRangeStart => Role::DomainRangeStart,
        RoleName::DomainRangeEnd => Role::DomainRangeEnd,
        RoleName::OpPrepare => Role::OpPrepare,
        RoleName::OpLaunch => Role::OpLaunch,
        RoleName::OpCompileExecute => Role::OpCompileExecute,
        RoleName::OpModelExecute => Role::OpModelExecute,
        RoleName::OpExecutorRepeatable => Role::OpExecutorRepeatable,
        RoleName::OpExecutorDestroy => Role::OpExecutorDestroy,
        RoleName::OpExecutorCached => Role::OpExecutorCached,
    }
}
