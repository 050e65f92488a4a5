//! Finding the CANN libraries to attach to: in the memory maps of running processes
//! (through `/proc/PID/root`, so processes in containers resolve their own files), and in
//! install locations for processes that have not started yet. Which file names are CANN
//! libraries is the catalog's to say: its `[[library]]` rules (`libopapi_*.so`, ...) and the
//! libraries its entries name.
use std::{
    collections::HashSet,
    env, fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use tracer_catalog::{Catalog, intern, library_base_name};

/// CANN's default install roots, after `$ASCEND_HOME_PATH`.
const DEFAULT_DIRS: &[&str] = &[
    "/usr/local/Ascend/ascend-toolkit/latest/lib64",
    "/usr/local/Ascend/driver/lib64",
    "/usr/local/Ascend/driver/lib64/driver",
    "/usr/local/Ascend/driver/lib64/common",
];

/// A CANN library file to attach to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryFile {
    /// The file name without its version suffix (`libhccl.so` for `libhccl.so.8`).
    pub name: &'static str,
    /// A path that reaches the file from this (the agent's) mount namespace.
    pub path: PathBuf,
    /// (device, inode): the same file reached by two paths is attached once.
    pub id: (u64, u64),
}

impl LibraryFile {
    /// The file at `path` (followed through symlinks), named by its own file name.
    pub fn probe(path: PathBuf) -> Option<Self> {
        let meta = fs::metadata(&path).ok()?;
        let name = intern(library_base_name(path.file_name()?.to_str()?));
        meta.is_file().then(|| Self {
            name,
            id: (meta.dev(), meta.ino()),
            path,
        })
    }
}

/// Keeps one entry per file.
#[derive(Debug, Default)]
pub struct LibrarySet {
    files: Vec<LibraryFile>,
    seen: HashSet<(u64, u64)>,
}

impl LibrarySet {
    /// Adds `file`; returns true when it was not known yet.
    pub fn insert(&mut self, file: LibraryFile) -> bool {
        if !self.seen.insert(file.id) {
            return false;
        }
        self.files.push(file);
        true
    }

    /// Whether `file` (by device and inode) is in the set.
    pub fn contains(&self, file: &LibraryFile) -> bool {
        self.seen.contains(&file.id)
    }

    pub fn files(&self) -> &[LibraryFile] {
        &self.files
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// CANN libraries (those `catalog` knows) mapped by process `pid`.
pub fn mapped_libraries(pid: u32, catalog: &Catalog) -> Result<Vec<LibraryFile>> {
    let maps_path = format!("/proc/{pid}/maps");
    let maps = fs::read_to_string(&maps_path).with_context(|| format!("reading {maps_path}"))?;
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let mut found: Vec<LibraryFile> = Vec::new();
    for path in maps.lines().filter_map(mapped_path) {
        if !is_cann_library(Path::new(path), catalog) {
            continue;
        }
        let inside = root.join(path.trim_start_matches('/'));
        if let Some(file) = LibraryFile::probe(inside)
            && !found.iter().any(|f| f.id == file.id)
        {
            found.push(file);
        }
    }
    Ok(found)
}

/// The path column of a `/proc/PID/maps` line, if it names a file.
fn mapped_path(line: &str) -> Option<&str> {
    // address perms offset dev inode path — the path may contain spaces.
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start().split_once(char::is_whitespace)?.1;
    }
    let path = rest.trim();
    path.starts_with('/').then_some(path)
}

fn is_cann_library(path: &Path, catalog: &Catalog) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|name| catalog.knows_library(name))
}

/// Directories where CANN libraries of processes not yet started are found:
/// `$ASCEND_HOME_PATH/lib64`, the CANN default install paths, and `LD_LIBRARY_PATH`.
pub fn install_dirs(ld_library_path: Option<&str>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(home) = env::var_os("ASCEND_HOME_PATH") {
        dirs.push(PathBuf::from(home).join("lib64"));
    }
    dirs.extend(DEFAULT_DIRS.iter().map(PathBuf::from));
    if let Some(paths) = ld_library_path {
        dirs.extend(env::split_paths(paths));
    }
    dirs
}

/// CANN libraries (those `catalog` knows) in `dirs` and in the directories of `extra`,
/// plus the files `extra` names (`--lib`), whatever their names.
pub fn installed_libraries(
    dirs: &[PathBuf],
    extra: &[PathBuf],
    catalog: &Catalog,
) -> Vec<LibraryFile> {
    let mut found = Vec::new();
    for dir in dirs.iter().chain(extra.iter().filter(|p| p.is_dir())) {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_cann_library(p, catalog))
            .collect();
        paths.sort();
        found.extend(paths.into_iter().filter_map(LibraryFile::probe));
    }
    found.extend(
        extra
            .iter()
            .filter(|p| p.is_file())
            .filter_map(|p| LibraryFile::probe(p.clone())),
    );
    found
}

/// Every process on the host that maps a CANN library, with those libraries.
pub fn scan_processes(catalog: &Catalog) -> Vec<(u32, Vec<LibraryFile>)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let own = std::process::id();
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own)
        .filter_map(|pid| {
            let libs = mapped_libraries(pid, catalog).ok()?;
            (!libs.is_empty()).then_some((pid, libs))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_maps_lines() {
        let line =
            "7f3b2c000000-7f3b2c021000 r-xp 00001000 fd:01 1234   /opt/cann/lib64/libascendcl.so";
        assert_eq!(mapped_path(line), Some("/opt/cann/lib64/libascendcl.so"));
        let spaced = "7f3b-7f3c r--p 00000000 fd:01 99 /opt/my dir/libhccl.so";
        assert_eq!(mapped_path(spaced), Some("/opt/my dir/libhccl.so"));
        assert_eq!(mapped_path("7f3b-7f3c rw-p 00000000 00:00 0 "), None);
        assert_eq!(
            mapped_path("7f3b-7f3c rw-p 00000000 00:00 0   [heap]"),
            None
        );
    }

    #[test]
    fn own_process_maps_no_cann_library() {
        let libs =
            mapped_libraries(std::process::id(), Catalog::builtin()).expect("own maps readable");
        assert!(libs.is_empty());
    }

    #[test]
    fn install_dirs_hold_the_libraries_the_catalog_knows() {
        let dir = std::env::temp_dir().join(format!("npu-discovery-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        for name in ["libhccl.so.8", "libhccl_plf.so", "libfoo.so"] {
            fs::write(dir.join(name), b"").unwrap();
        }
        let found = installed_libraries(
            std::slice::from_ref(&dir),
            &[dir.join("libfoo.so")],
            Catalog::builtin(),
        );
        let names: Vec<&str> = found.iter().map(|f| f.name).collect();
        assert_eq!(
            names,
            ["libhccl.so", "libfoo.so"],
            "--lib names a file whatever its name"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
