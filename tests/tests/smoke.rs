//! The BPF pipeline end to end: the embedded program loads, the generic ENTER/EXIT pair
//! attaches to two functions of a shared library built by this workspace, a separate process
//! calls them, and the ENTER and EXIT records arrive through the ring buffer with the
//! caller's pid, tid, arguments, return values and each function's attach cookie. Once with
//! uprobe_multi links (what the kernel offers by default from Linux 6.6), once with the
//! perf-event uprobes of the fallback.
use std::{
    io::Write,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use npu_bpftrace::{
    bpf::{AttachKind, Probes, UprobeMode},
    symbols::SymbolTable,
};
use tracer_common::{Config, ProbeSpec};
use tracer_core::decode::{Decoded, Record, decode};

/// The attach cookies of the two functions: distinct, so a record names which one fired.
const PROBE_ADD: u16 = 7;
const PROBE_MUL: u16 = 9;

#[test]
fn uprobe_multi_enter_and_exit_reach_userspace() {
    let kind = enter_and_exit_reach_userspace(UprobeMode::Auto);
    if tests::kernel_at_least(6, 6) {
        assert_eq!(
            kind,
            AttachKind::UprobeMulti,
            "Linux >= 6.6 has uprobe_multi"
        );
    } else {
        assert_eq!(kind, AttachKind::PerfEvent, "older kernels fall back");
    }
}

#[test]
fn perf_event_uprobes_enter_and_exit_reach_userspace() {
    let kind = enter_and_exit_reach_userspace(UprobeMode::PerfEvent);
    assert_eq!(kind, AttachKind::PerfEvent);
}

/// Attaches in `mode`, runs the caller, checks every record; returns how the file was
/// attached.
fn enter_and_exit_reach_userspace(mode: UprobeMode) -> AttachKind {
    let lib = Path::new(env!("SMOKE_LIB"));
    let symbols = SymbolTable::read(lib).expect("read fixture library");
    let offset = |name| {
        symbols
            .file_offset(name)
            .unwrap_or_else(|| panic!("{name} is exported"))
    };

    let mut probes = Probes::load(1 << 20, mode).expect("BPF programs load (run as root)");
    probes.set_probe_spec(PROBE_ADD, ProbeSpec::NONE).unwrap();
    probes.set_probe_spec(PROBE_MUL, ProbeSpec::NONE).unwrap();
    let mut caller = Command::new(env!("SMOKE_CALLER"))
        .arg("41")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start smoke caller");
    // Only the caller is traced: the kernel-side filter is part of what is tested.
    probes
        .set_config(Config {
            filter_targets: 1,
            ..Default::default()
        })
        .unwrap();
    let caller_pid = caller.id();
    probes.add_target(caller_pid).unwrap();
    let kind = probes
        .attach_file(
            lib,
            &[
                (offset("npu_smoke_add"), PROBE_ADD),
                (offset("npu_smoke_mul"), PROBE_MUL),
            ],
        )
        .expect("attach the uprobe and uretprobe pair");
    assert_eq!(probes.attached(), 2);
    let mut events = probes.take_events().unwrap();

    caller.stdin.take().unwrap().write_all(b"g").unwrap();
    let output = caller.wait_with_output().unwrap();
    assert!(output.status.success(), "caller failed: {output:?}");
    let printed = String::from_utf8(output.stdout).unwrap();
    let fields: Vec<u32> = printed
        .split_whitespace()
        .map(|f| f.parse::<u32>().unwrap())
        .collect();
    let [tid, sum, product] = fields[..] else {
        panic!("caller printed {printed:?}");
    };
    assert_eq!((sum, product), (42, 123));

    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while records.len() < 4 && Instant::now() < deadline {
        while let Some(item) = events.next() {
            records.push(decode(&item).expect("well-formed record"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let [
        Decoded::Record(Record::Enter(enter_add)),
        Decoded::Record(Record::Exit(exit_add)),
        Decoded::Record(Record::Enter(enter_mul)),
        Decoded::Record(Record::Exit(exit_mul)),
    ] = records.as_slice()
    else {
        panic!("expected ENTER, EXIT, ENTER, EXIT ({kind:?}), got {records:?}");
    };
    for (probe, enter, exit, ret) in [
        (PROBE_ADD, enter_add, exit_add, 42),
        (PROBE_MUL, enter_mul, exit_mul, 123),
    ] {
        assert_eq!(enter.header.pid, caller_pid, "ENTER pid");
        assert_eq!(enter.header.tid, tid, "ENTER tid");
        assert_eq!(enter.header.probe, probe, "attach cookie selects the probe");
        assert_eq!(exit.header.probe, probe, "attach cookie at return");
        assert_eq!(enter.args[0], 41, "first argument");
        assert_eq!(enter.parent_correlation_id, 0);
        assert_ne!(enter.correlation_id, 0);
        assert_eq!(
            exit.correlation_id, enter.correlation_id,
            "EXIT joins its ENTER"
        );
        assert_eq!((exit.header.pid, exit.header.tid), (caller_pid, tid));
        assert_eq!(exit.ret, ret, "return value");
        assert!(exit.header.ts_ns >= enter.header.ts_ns);
    }
    assert_eq!(enter_add.args[1], 1, "second argument of add");
    assert_eq!(enter_mul.args[1], 3, "second argument of mul");
    assert!(enter_mul.header.ts_ns >= exit_add.header.ts_ns);
    kind
}
