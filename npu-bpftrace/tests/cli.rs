//! The command line: help, version, and one clear line plus a non-zero exit for each kind
//! of bad input.
use std::process::{Command, Output};

fn npu_bpftrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_npu-bpftrace"))
        .args(args)
        .output()
        .expect("run npu-bpftrace")
}

/// Asserts failure with exactly one stderr line containing `expected`.
fn assert_error(output: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "should fail: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "one line expected:\n{stderr}"
    );
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in {stderr:?}"
    );
}

#[test]
fn help_and_version() {
    let help = npu_bpftrace(&["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for word in ["record", "attach", "probes", "Examples"] {
        assert!(text.contains(word), "--help lacks {word}:\n{text}");
    }
    let version = npu_bpftrace(&["--version"]);
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("npu-bpftrace {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn no_such_pid() {
    assert_error(
        &npu_bpftrace(&["attach", "--pid", "999999999"]),
        "no such process: 999999999",
    );
}

#[test]
fn pid_without_cann_libraries() {
    let mut sleeper = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("start sleep");
    let pid = sleeper.id().to_string();
    let output = npu_bpftrace(&["attach", "--pid", &pid]);
    sleeper.kill().ok();
    sleeper.wait().ok();
    assert_error(&output, "maps no CANN library");
}

#[test]
fn unknown_domain_and_function() {
    assert_error(
        &npu_bpftrace(&["record", "--domain", "gpu", "--", "true"]),
        "unknown domain 'gpu'",
    );
    // A library given with --lib is attached whatever its name; this one has no cudaMalloc.
    let lib = env!("CARGO_BIN_EXE_npu-bpftrace");
    let out = std::env::temp_dir().join(format!("npu-cli-unknown-{}", std::process::id()));
    let out_arg = out.display().to_string();
    assert_error(
        &npu_bpftrace(&[
            "record",
            "--out",
            &out_arg,
            "--lib",
            lib,
            "--function",
            "cudaMalloc",
            "--",
            "true",
        ]),
        "unknown function 'cudaMalloc'",
    );
    let _ = std::fs::remove_dir_all(&out);
    assert_error(
        &npu_bpftrace(&["record", "--function", "!", "--", "true"]),
        "empty function pattern '!'",
    );
}

#[test]
fn unwritable_output_directory() {
    assert_error(
        &npu_bpftrace(&["record", "--out", "/proc/npu-bpftrace-test", "--", "true"]),
        "cannot create output directory /proc/npu-bpftrace-test",
    );
}

#[test]
fn record_needs_a_command() {
    assert_error(&npu_bpftrace(&["record"]), "record needs a command");
}

#[test]
fn not_root() {
    let output = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_npu-bpftrace"))
        .args(["record", "--out", "/tmp", "--", "true"])
        .output()
        .expect("run setpriv (util-linux)");
    assert_error(&output, "needs root");
}
