//! Library files as real installs have them: stripped to their dynamic symbols, installed
//! somewhere else, replaced on disk while a trace runs.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use object::{Object, ObjectSection};
use tests::{Recording, scratch_dir, sim_home, tracer_command, truth::assert_api_matches};

/// A copy of the simulator's install tree under `at` (different files, different inodes).
fn copy_sim_tree(at: &Path) -> PathBuf {
    let home = at.join("npu-sim");
    let _ = fs::remove_dir_all(&home);
    let status = Command::new("cp")
        .arg("-a")
        .arg(sim_home())
        .arg(&home)
        .status()
        .expect("running cp");
    assert!(status.success(), "copying the simulator tree");
    home
}

/// The shared libraries of the tree at `home`.
fn libraries(home: &Path) -> Vec<PathBuf> {
    ["ascend-toolkit/latest/lib64", "driver/lib64"]
        .iter()
        .flat_map(|dir| fs::read_dir(home.join(dir)).expect("library directory"))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "so"))
        .collect()
}

/// Whether the ELF file at `path` has a section named `name`.
fn has_section(path: &Path, name: &str) -> bool {
    let bytes = fs::read(path).expect("reading a library");
    let file = object::File::parse(&*bytes).expect("an ELF library");
    file.sections().any(|s| s.name() == Ok(name))
}

/// `record -- npu-sim-app ARGS` with the simulator tree at `home` instead of the built one.
fn record_in(home: &Path, name: &str, args: &[&str]) -> Recording {
    let scratch = scratch_dir(name);
    let (dir, truth) = (scratch.join("trace"), scratch.join("truth"));
    fs::create_dir_all(&truth).expect("truth dir");
    let lib = format!(
        "{}:{}",
        home.join("ascend-toolkit/latest/lib64").display(),
        home.join("driver/lib64").display()
    );
    let output = tracer_command(&truth)
        .env("LD_LIBRARY_PATH", lib)
        .env("ASCEND_HOME_PATH", home.join("ascend-toolkit/latest"))
        .arg("record")
        .arg("--out")
        .arg(&dir)
        .arg("--")
        .arg(home.join("bin/npu-sim-app"))
        .args(args)
        .output()
        .expect("running npu-bpftrace");
    assert!(
        output.status.success(),
        "npu-bpftrace record failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Recording { dir, truth, output }
}

/// Installed CANN libraries carry only `.dynsym` (their exported functions): every call is
/// still recorded, and kernels are still named.
#[test]
fn stripped_libraries_are_traced_through_their_dynamic_symbols() {
    let home = copy_sim_tree(&scratch_dir("stripped-tree"));
    let libs = libraries(&home);
    assert!(libs.len() >= 8, "simulator libraries: {libs:?}");
    let status = Command::new("strip")
        .arg("--strip-all")
        .args(&libs)
        .status()
        .expect("running strip");
    assert!(status.success(), "strip failed");
    for lib in &libs {
        assert!(
            !has_section(lib, ".symtab") && has_section(lib, ".dynsym"),
            "{} is not stripped to .dynsym",
            lib.display()
        );
    }

    let recording = record_in(&home, "stripped", &["train", "--steps", "2"]);
    let truth = recording.truth_api();
    assert!(truth.len() > 100, "the workload ran: {} calls", truth.len());
    let rows = recording.table("api");
    assert_api_matches(&rows, &truth);
    let kernels = recording.table("kernel");
    assert!(!kernels.is_empty(), "kernels recorded");
    let unnamed: Vec<_> = kernels.iter().filter(|k| k["name"].is_null()).collect();
    assert!(unnamed.is_empty(), "unnamed kernels: {unnamed:?}");
    assert_eq!(recording.session().total_drops(), 0);
}
