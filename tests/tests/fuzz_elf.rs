//! Property test of the ELF symbol reader on hostile input: whatever a library file
//! holds, reading its symbols gives them or an error, never a panic. The inputs are
//! mutations of a real ELF file (the C library this test maps): bytes changed in the ELF
//! header, the section and program header tables and the dynamic symbol data, and files cut
//! short. Seeded: a failure names its seed.
use std::panic::{AssertUnwindSafe, catch_unwind};

use npu_bpftrace::symbols::SymbolTable;
use tests::fuzz::Rng;

const RUNS: u64 = 400;

fn u64_at(data: &[u8], at: usize) -> usize {
    let mut word = [0u8; 8];
    word.copy_from_slice(&data[at..at + 8]);
    u64::from_le_bytes(word) as usize
}

/// Where the section header table starts (`e_shoff`, a 64-bit little-endian ELF).
fn section_headers(data: &[u8]) -> usize {
    u64_at(data, 0x28)
}

#[test]
fn hostile_elf_files_give_errors_not_panics() {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("own memory maps");
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so"))
        .expect("the C library is mapped");
    let original = std::fs::read(libc).expect("reading the C library");
    assert!(
        SymbolTable::parse(&original).is_ok(),
        "the unmutated file parses"
    );
    let shoff = section_headers(&original).min(original.len());
    let (mut parsed, mut refused) = (0, 0);
    for seed in 1..=RUNS {
        let mut rng = Rng::for_seed(seed);
        let mut data = original.clone();
        for _ in 0..1 + rng.below(8) {
            // Mostly the headers and tables the reader walks.
            let at = match rng.below(3) {
                0 => rng.below(0x40),
                1 => shoff + rng.below(data.len() - shoff),
                _ => rng.below(data.len()),
            };
            data[at] = rng.word() as u8;
        }
        if rng.below(5) == 0 {
            data.truncate(rng.below(data.len()));
        }
        match catch_unwind(AssertUnwindSafe(|| SymbolTable::parse(&data).is_ok())) {
            Ok(true) => parsed += 1,
            Ok(false) => refused += 1,
            Err(_) => panic!("seed {seed}: reading symbols panicked"),
        }
    }
    println!("{parsed} mutated files parsed, {refused} refused");
    assert!(refused > 0, "mutations reach the checks");
}
