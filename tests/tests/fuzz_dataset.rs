//! Property test of dataset reading on hostile files: whatever a Parquet part or
//! session.json holds, `report` gives a report or an error, never a panic. The dataset is a
//! real recording; each run damages one part (bytes changed in its footer, its pages or
//! anywhere, or the file cut short) or session.json. Seeded: a failure names its seed.
use std::{
    fs,
    panic::{AssertUnwindSafe, catch_unwind},
    path::{Path, PathBuf},
};

use npu_bpftrace::report::{self, Filter, Format};
use tests::{fuzz::Rng, record, scratch_dir, sim_bin};

const RUNS: u64 = 200;

/// Every file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).expect("dataset directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn damage(rng: &mut Rng, bytes: &mut Vec<u8>) {
    let len = bytes.len();
    for _ in 0..1 + rng.below(6) {
        // Parquet readers start at the footer (its last bytes), then the pages it names.
        let at = match rng.below(3) {
            0 => len - 1 - rng.below(len.min(512)),
            _ => rng.below(len),
        };
        bytes[at] = rng.word() as u8;
    }
    if rng.below(6) == 0 {
        bytes.truncate(rng.below(len));
    }
}

#[test]
fn damaged_datasets_give_errors_not_panics() {
    let recording = record(
        "fuzz-dataset",
        &[],
        &[
            sim_bin("npu-sim-app"),
            "train".into(),
            "--steps".into(),
            "2".into(),
        ],
    );
    let originals = files(&recording.dir);
    assert!(originals.len() > 5, "a dataset: {originals:?}");
    let work = scratch_dir("fuzz-dataset-copy");
    let (mut reported, mut refused) = (0, 0);
    for seed in 1..=RUNS {
        let mut rng = Rng::for_seed(seed);
        let dir = work.join("dataset");
        let _ = fs::remove_dir_all(&dir);
        for file in &originals {
            let to = dir.join(
                file.strip_prefix(&recording.dir)
                    .expect("inside the dataset"),
            );
            fs::create_dir_all(to.parent().expect("a parent")).expect("copy directory");
            fs::copy(file, &to).expect("copying the dataset");
        }
        let victim = dir.join(
            originals[rng.below(originals.len())]
                .strip_prefix(&recording.dir)
                .expect("inside the dataset"),
        );
        let mut bytes = fs::read(&victim).expect("reading a file");
        damage(&mut rng, &mut bytes);
        fs::write(&victim, &bytes).expect("writing the damaged file");
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            report::report(&dir, Format::Json, &Filter::default()).is_ok()
        }));
        match outcome {
            Ok(true) => reported += 1,
            Ok(false) => refused += 1,
            Err(_) => panic!(
                "seed {seed}: report panicked on a damaged {}",
                victim.display()
            ),
        }
    }
    println!("{reported} damaged datasets reported, {refused} refused");
    assert!(refused > 0, "damage reaches the checks");
}
