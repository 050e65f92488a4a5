//! Checks the built-in catalogs (`catalogs/*.toml`) with the parser the crate uses, so a
//! broken entry fails `cargo build` with its file and line.
#![allow(dead_code, unreachable_pub)]

#[path = "src/file.rs"]
mod file;

fn main() {
    let dir = std::path::Path::new("catalogs");
    println!("cargo::rerun-if-changed=catalogs");
    println!("cargo::rerun-if-changed=src/file.rs");
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("tracer-catalog/catalogs")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("a readable catalog file");
        let origin = format!("tracer-catalog/{}", path.display());
        if let Err(e) = file::parse(&text, &origin) {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
