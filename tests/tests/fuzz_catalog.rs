//! Property test of catalog files (`--catalog FILE`) on hostile input: whatever a file
//! holds, adding it gives the catalog or an error naming the file, never a panic. The
//! inputs are mutations of the built-in catalog (lines dropped, doubled or moved, values
//! swapped, bytes changed, cut short), so they reach deep into entry checking. Seeded: a
//! failure names its seed.
use std::panic::{AssertUnwindSafe, catch_unwind};

use tests::fuzz::Rng;
use tracer_catalog::Catalog;

const BUILTIN: &str = include_str!("../../tracer-catalog/catalogs/cann-8.toml");
const RUNS: u64 = 300;

/// Values that are valid somewhere in a catalog file, to put where they do not belong.
const VALUES: &[&str] = &[
    "\"\"",
    "\"*\"",
    "\"lib*.so\"",
    "0",
    "-1",
    "255",
    "99999999999",
    "true",
    "[]",
    "{}",
    "\"op_launch\"",
    "\"handle\"",
    "\"kernel\"",
    "\"text\"",
    "{ at = 200 }",
    "\"\u{1F600}\"",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for _ in 0..1 + rng.below(4) {
        let i = rng.below(lines.len());
        match rng.below(6) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let (line, at) = (lines[i].clone(), rng.below(lines.len()));
                lines.insert(at, line);
            }
            2 => {
                if let Some((key, _)) = lines[i].split_once(" = ") {
                    lines[i] = format!("{key} = {}", VALUES[rng.below(VALUES.len())]);
                }
            }
            3 => {
                let mut bytes = lines[i].clone().into_bytes();
                if !bytes.is_empty() {
                    let at = rng.below(bytes.len());
                    bytes[at] = rng.word() as u8;
                }
                lines[i] = String::from_utf8_lossy(&bytes).into_owned();
            }
            4 => lines.truncate(i),
            _ => {
                let j = rng.below(lines.len());
                lines.swap(i, j);
            }
        }
        if lines.is_empty() {
            break;
        }
    }
    lines.join("\n")
}

#[test]
fn hostile_catalog_files_give_errors_not_panics() {
    let (mut accepted, mut refused) = (0, 0);
    for seed in 1..=RUNS {
        let mut rng = Rng::for_seed(seed);
        let text = mutate(&mut rng, BUILTIN);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let mut catalog = Catalog::builtin().clone();
            catalog
                .add_text(&text, "fuzz.toml")
                .map_err(|e| e.to_string())
        }));
        match outcome {
            Ok(Ok(())) => accepted += 1,
            Ok(Err(message)) => {
                assert!(
                    message.contains("fuzz.toml"),
                    "seed {seed}: the error does not name the file: {message}"
                );
                refused += 1;
            }
            Err(_) => panic!("seed {seed}: adding a catalog file panicked"),
        }
    }
    println!("{accepted} mutated files accepted, {refused} refused");
    assert!(refused > RUNS as usize / 10, "mutations reach the checks");
}
