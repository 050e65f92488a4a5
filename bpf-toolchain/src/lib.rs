//! Chooses the toolchain that compiles `tracer-ebpf` for the BPF target.
//!
//! Used by `npu-bpftrace`'s build script (to build and embed the BPF object) and by
//! `cargo xtask setup` (to install what is missing), so the choice is made in one place.
//!
//! Preference: `$NPU_BPF_TOOLCHAIN` when set; else rustup's nightly with `rust-src`
//! (`-Z build-std=core`); else Debian's rustc with its precompiled `core` for
//! `bpfel-unknown-none` (`/usr/bin/rustc`, packages `rustc-web libstd-rust-web-dev-bpf`).

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

/// Environment variable that forces a toolchain: `nightly`, another rustup toolchain
/// name, or a toolchain prefix directory such as `/usr`.
pub const OVERRIDE_VAR: &str = "NPU_BPF_TOOLCHAIN";

/// Debian packages that provide the offline BPF toolchain and LLVM for bpf-linker.
pub const DEBIAN_PACKAGES: &[&str] = &[
    "rustc-web",
    "cargo-web",
    "libstd-rust-web-dev-bpf",
    "llvm-22-dev",
    "libpolly-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
];

/// LLVM that bpf-linker is built against when using Debian's toolchain.
pub const DEBIAN_LLVM_PREFIX: &str = "/usr/lib/llvm-22";

/// A toolchain able to compile `tracer-ebpf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Toolchain {
    /// A rustup toolchain with `rust-src`: core is built with `-Z build-std=core`.
    Rustup(String),
    /// A toolchain installed under a prefix (e.g. Debian's `/usr`) that ships a
    /// precompiled `core` for `bpfel-unknown-none`.
    Prefix(PathBuf),
}

impl Toolchain {
    /// The name `aya_build::Toolchain::Custom` expects (`rustup run` accepts a path).
    pub fn rustup_name(&self) -> String {
        match self {
            Self::Rustup(name) => name.clone(),
            Self::Prefix(prefix) => prefix.display().to_string(),
        }
    }

    /// Whether this toolchain needs `-Z build-std=core` (it has no precompiled BPF core).
    pub fn builds_core(&self) -> bool {
        matches!(self, Self::Rustup(_))
    }
}

/// Why no toolchain could be chosen, with what to install.
#[derive(Debug)]
pub struct Missing(pub String);

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Missing {}

/// Picks the BPF toolchain according to the preference order above.
pub fn detect() -> Result<Toolchain, Missing> {
    if let Some(forced) = env::var_os(OVERRIDE_VAR).filter(|v| !v.is_empty()) {
        let forced = PathBuf::from(forced);
        return Ok(if forced.is_absolute() {
            Toolchain::Prefix(forced)
        } else {
            Toolchain::Rustup(forced.display().to_string())
        });
    }
    if rustup_has_rust_src("nightly") {
        return Ok(Toolchain::Rustup("nightly".into()));
    }
    if prefix_has_bpf_core(Path::new("/usr")) {
        return Ok(Toolchain::Prefix("/usr".into()));
    }
    Err(Missing(format!(
        "no toolchain can build BPF programs: install rustup nightly with rust-src \
         (`rustup toolchain install nightly --component rust-src`) or Debian's \
         `apt-get install {}`; `cargo xtask setup` does the latter",
        DEBIAN_PACKAGES.join(" ")
    )))
}

/// True when `rustup run <name>` has the standard library sources needed by build-std.
pub fn rustup_has_rust_src(name: &str) -> bool {
    let Ok(out) = Command::new("rustup")
        .args(["run", name, "rustc", "--print", "sysroot"])
        .output()
    else {
        return false;
    };
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    out.status.success()
        && Path::new(&sysroot)
            .join("lib/rustlib/src/rust/library/core")
            .is_dir()
}

/// True when `prefix` has a rustc and cargo and a precompiled `core` for the BPF target.
pub fn prefix_has_bpf_core(prefix: &Path) -> bool {
    prefix.join("bin/rustc").is_file()
        && prefix.join("bin/cargo").is_file()
        && prefix
            .join("lib/rustlib/bpfel-unknown-none/lib")
            .read_dir()
            .map(|mut entries| {
                entries.any(|e| {
                    e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libcore-"))
                })
            })
            .unwrap_or(false)
}

/// Locates `bpf-linker`: on PATH, or in cargo's install directory.
pub fn find_bpf_linker() -> Option<PathBuf> {
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    env::var_os("PATH")
        .map(|p| env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(cargo_home.map(|h| h.join("bin")))
        .map(|dir| dir.join("bpf-linker"))
        .find(|candidate| candidate.is_file())
}
