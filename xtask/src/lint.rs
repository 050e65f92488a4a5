//! `cargo xtask lint`: every static check CI runs before the tests: formatting, clippy for
//! the host crates and for the BPF programs on the BPF target (per architecture whose
//! argument reading differs), rustdoc, unused dependencies, and import cycles.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::{cargo, setup, workspace_root};

/// cargo-shear releases after this one need a newer rustc than the workspace's.
const CARGO_SHEAR_VERSION: &str = "1.5.0";
/// Warnings are errors; links to private items are fine, since those are documented too.
const RUSTDOCFLAGS: &str = "-D warnings -A rustdoc::private-intra-doc-links";
/// Architectures whose BPF argument reading is compiled differently (`bpf_target_arch`).
const BPF_ARCHES: &[&str] = &["x86_64", "aarch64"];

pub(crate) fn run() -> Result<()> {
    setup::run()?;
    step("rustfmt", cargo().args(["fmt", "--all", "--", "--check"]))?;
    step(
        "clippy (host crates)",
        cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    for arch in BPF_ARCHES {
        step(
            &format!("clippy (BPF programs, {arch})"),
            &mut bpf_clippy(arch),
        )?;
    }
    step(
        "rustdoc",
        cargo()
            .args([
                "doc",
                "--workspace",
                "--no-deps",
                "--document-private-items",
            ])
            .env("RUSTDOCFLAGS", RUSTDOCFLAGS),
    )?;
    step("unused dependencies (cargo-shear)", &mut cargo_shear()?)?;
    check_import_cycles(&workspace_root())?;
    println!("lint: all checks passed");
    Ok(())
}

/// Runs `cmd`, failing with `what` when it fails.
fn step(what: &str, cmd: &mut Command) -> Result<()> {
    println!("lint: {what}");
    let status = cmd.status().with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed");
    }
    Ok(())
}

/// Clippy of `tracer-ebpf` for `bpfel-unknown-none`, as the build script compiles it for an
/// agent of architecture `arch`. Debian's toolchain (the one with a precompiled BPF core)
/// runs it, so PATH puts /usr/bin first, ahead of rustup's proxies.
fn bpf_clippy(arch: &str) -> Command {
    let root = workspace_root();
    let path = std::env::var("PATH").unwrap_or_default();
    let mut cmd = Command::new("/usr/bin/cargo");
    cmd.current_dir(&root)
        .args([
            "clippy",
            "-p",
            "tracer-ebpf",
            "--target",
            "bpfel-unknown-none",
        ])
        .arg("--target-dir")
        .arg(root.join("target/bpf-clippy"))
        .args(["--", "-D", "warnings"])
        .env("PATH", format!("/usr/bin:{path}"))
        .env("RUSTC", "/usr/bin/rustc")
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            format!("--cfg\x1fbpf_target_arch=\"{arch}\""),
        )
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CARGO");
    cmd
}

/// `cargo shear`, installed at its pinned version when missing.
fn cargo_shear() -> Result<Command> {
    // `cargo shear --version` says only "dev"; cargo's install list has the version.
    let wanted = format!("cargo-shear v{CARGO_SHEAR_VERSION}:");
    let installed = Command::new("cargo")
        .args(["install", "--list"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&wanted));
    if !installed {
        step(
            "installing cargo-shear",
            Command::new("cargo").args([
                "install",
                "--locked",
                "--version",
                CARGO_SHEAR_VERSION,
                "cargo-shear",
            ]),
        )?;
    }
    let mut cmd = cargo();
    cmd.arg("shear");
    Ok(cmd)
}

/// Fails when a module of any crate imports, directly or through others, a module that
/// imports it back: data flows one way, and a cycle is where a concern was split wrong.
pub(crate) fn check_import_cycles(root: &Path) -> Result<()> {
    println!("lint: import cycles");
    let mut cycles = Vec::new();
    for src in source_trees(root)? {
        let graph = module_graph(&src)?;
        if let Some(cycle) = find_cycle(&graph) {
            cycles.push(format!("{}: {}", src.display(), cycle.join(" -> ")));
        }
    }
    if !cycles.is_empty() {
        bail!("import cycles:\n  {}", cycles.join("\n  "));
    }
    Ok(())
}

/// Every crate's `src/` directory.
fn source_trees(root: &Path) -> Result<Vec<PathBuf>> {
    let mut trees = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !path.is_dir() || name.starts_with('.') || name == "target" {
                continue;
            }
            if name == "src"
                && path
                    .parent()
                    .is_some_and(|p| p.join("Cargo.toml").is_file())
            {
                trees.push(path);
            } else {
                dirs.push(path);
            }
        }
    }
    trees.sort();
    Ok(trees)
}

/// Module path (`a`, `a::b`) -> the modules of the same crate it names.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn module_graph(src: &Path) -> Result<Graph> {
    let mut files = Vec::new();
    collect_rs(src, &mut files)?;
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(src, f)).collect();
    let mut graph = Graph::new();
    for file in &files {
        let Some(module) = module_of(src, file) else {
            continue;
        };
        let text =
            fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let code = strip_comments(&text);
        let edges = graph.entry(module.clone()).or_default();
        for path in referenced_paths(&code) {
            let target = resolve(&module, &path, &modules);
            if let Some(target) = target.filter(|t| !related(t, &module)) {
                edges.insert(target);
            }
        }
    }
    Ok(graph)
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect_rs(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// `src/a/b.rs` and `src/a/b/mod.rs` -> `a::b`; the crate root (`lib.rs`, `main.rs`) and
/// binaries under `src/bin` are not modules others import.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    let root_file = parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main");
    (!parts.is_empty() && !root_file && parts[0] != "bin").then(|| parts.join("::"))
}

/// Removes `//` comments (doc comments mention modules without importing them).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split_once("//").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::x::y` and `super::x` path, with grouped imports (`crate::{a, b::c}`)
/// expanded to their first segments.
fn referenced_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for prefix in ["crate::", "super::"] {
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            let after = &rest[at + prefix.len()..];
            let head = if prefix == "crate::" {
                "crate"
            } else {
                "super"
            };
            if let Some(group) = after.strip_prefix('{') {
                for item in top_level_items(group) {
                    paths.push(
                        std::iter::once(head.to_owned())
                            .chain(segments(&item))
                            .collect(),
                    );
                }
            } else {
                paths.push(
                    std::iter::once(head.to_owned())
                        .chain(segments(after))
                        .collect(),
                );
            }
            rest = after;
        }
    }
    paths
}

/// The comma-separated items of a `{...}` group (its text after `{`), nested groups kept.
fn top_level_items(group: &str) -> Vec<String> {
    let (mut items, mut current, mut depth) = (Vec::new(), String::new(), 0);
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    items.push(current);
    items
}

/// The leading `a::b::c` identifiers of `text`.
fn segments(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    loop {
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        out.push(rest[..end].to_owned());
        match rest[end..].strip_prefix("::") {
            Some(next) if !next.starts_with('{') => rest = next,
            _ => break,
        }
    }
    out
}

/// The longest existing module a path names, relative to the module it is used in.
fn resolve(module: &str, path: &[String], modules: &BTreeSet<String>) -> Option<String> {
    let (head, tail) = path.split_first()?;
    let mut base: Vec<String> = if head == "crate" {
        Vec::new()
    } else {
        // `super` in `a/b.rs` is `a`; in `a/b/mod.rs` (module `a::b`) it is `a` too.
        let mut parts: Vec<String> = module.split("::").map(str::to_owned).collect();
        parts.pop();
        parts
    };
    let mut found = None;
    for segment in tail {
        base.push(segment.clone());
        let candidate = base.join("::");
        if modules.contains(&candidate) {
            found = Some(candidate);
        } else {
            break;
        }
    }
    found
}

/// A module and its own submodules or parents are one concern: `a` using `a::b` (or the
/// reverse, as tests do with `super::*`) is no cycle.
fn related(a: &str, b: &str) -> bool {
    a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Visiting,
        Done,
    }
    fn visit<'a>(
        node: &'a str,
        graph: &'a Graph,
        marks: &mut BTreeMap<&'a str, Mark>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Visiting) => {
                let from = stack.iter().position(|n| *n == node).unwrap_or(0);
                let mut cycle: Vec<String> = stack[from..].iter().map(|s| s.to_string()).collect();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node, Mark::Visiting);
        stack.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, marks, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        marks.insert(node, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    let mut stack = Vec::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut marks, &mut stack))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut g = Graph::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    }

    #[test]
    fn finds_cycles_and_only_cycles() {
        assert_eq!(find_cycle(&graph(&[("a", "b"), ("b", "c")])), None);
        let cycle = find_cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])).unwrap();
        assert_eq!(cycle, ["a", "b", "c", "a"]);
    }

    #[test]
    fn reads_grouped_and_nested_imports() {
        let code = "use crate::{a::X, b::{c::Y, Z}, d};\nfn f() { super::e::g(); }";
        let paths = referenced_paths(code);
        let firsts: Vec<String> = paths.iter().map(|p| p[..2].join("::")).collect();
        assert_eq!(firsts, ["crate::a", "crate::b", "crate::d", "super::e"]);
    }

    /// This workspace itself has no cycle (the check CI runs, on the real tree).
    #[test]
    fn workspace_has_no_import_cycle() {
        check_import_cycles(&workspace_root()).unwrap();
    }
}
