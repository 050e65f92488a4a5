//! Finding the CANN libraries to attach to: in the memory maps of running processes
//! (through `/proc/PID/root`, so processes in containers resolve their own files), and in
//! install locations for processes that have not started yet.
use std::{
    collections::HashSet,
    env, fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use tracer_catalog::Library;

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
    pub library: Library,
    /// A path that reaches the file from this (the agent's) mount namespace.
    pub path: PathBuf,
    /// (device, inode): the same file reached by two paths is attached once.
    pub id: (u64, u64),
}

impl LibraryFile {
    fn probe(library: Library, path: PathBuf) -> Option<Self> {
        let meta = fs::metadata(&path).ok()?;
        meta.is_file().then(|| Self {
            library,
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

    pub fn files(&self) -> &[LibraryFile] {
        &self.files
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// CANN libraries mapped by process `pid`.
pub fn mapped_libraries(pid: u32) -> Result<Vec<LibraryFile>> {
    let maps_path = format!("/proc/{pid}/maps");
    let maps = fs::read_to_string(&maps_path).with_context(|| format!("reading {maps_path}"))?;
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let mut found: Vec<LibraryFile> = Vec::new();
    for path in maps.lines().filter_map(mapped_path) {
        let Some(library) = file_library(Path::new(path)) else {
            continue;
        };
        let inside = root.join(path.trim_start_matches('/'));
        if let Some(file) = LibraryFile::probe(library, inside)
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

fn file_library(path: &Path) -> Option<Library> {
    Library::from_file_name(path.file_name()?.to_str()?)
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

/// CANN libraries in `dirs`, plus user-given files or directories (`--lib`).
pub fn installed_libraries(dirs: &[PathBuf], extra: &[PathBuf]) -> Vec<LibraryFile> {
    let mut found = Vec::new();
    for dir in dirs.iter().chain(extra.iter().filter(|p| p.is_dir())) {
        for library in Library::ALL {
            if let Some(file) = LibraryFile::probe(library, dir.join(library.file_name())) {
                found.push(file);
            }
        }
    }
    for file in extra.iter().filter(|p| p.is_file()) {
        // A user may name a renamed or versioned copy; trust the name when it matches.
        if let Some(library) = file_library(file)
            && let Some(file) = LibraryFile::probe(library, file.clone())
        {
            found.push(file);
        }
    }
    found
}

/// Every process on the host that maps a CANN library, with those libraries.
pub fn scan_processes() -> Vec<(u32, Vec<LibraryFile>)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let own = std::process::id();
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own)
        .filter_map(|pid| {
            let libs = mapped_libraries(pid).ok()?;
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
        let libs = mapped_libraries(std::process::id()).expect("own maps readable");
        assert!(libs.is_empty());
    }
}
