//! The BPF pipeline end to end: the embedded program loads, a uprobe and a uretprobe attach
//! to a function of a shared library built by this workspace, a separate process calls it,
//! and the ENTER and EXIT records arrive through the ring buffer with the caller's pid,
//! tid, argument and return value.
use std::{
    io::Write,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use npu_bpftrace::{bpf::Probes, symbols::SymbolTable};
use tracer_common::{Config, ProbeSpec};
use tracer_core::decode::{Decoded, Record, decode};

const PROBE_ID: u16 = 7;

#[test]
fn uprobe_enter_and_exit_reach_userspace() {
    let lib = Path::new(env!("SMOKE_LIB"));
    let offset = SymbolTable::read(lib)
        .expect("read fixture library")
        .file_offset("npu_smoke_add")
        .expect("npu_smoke_add is exported");

    let mut probes = Probes::load(1 << 20).expect("BPF programs load (run as root)");
    probes.set_probe_spec(PROBE_ID, ProbeSpec::NONE).unwrap();
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
    probes
        .attach(lib, offset, PROBE_ID)
        .expect("attach uprobe and uretprobe");
    let mut events = probes.take_events().unwrap();

    caller.stdin.take().unwrap().write_all(b"g").unwrap();
    let output = caller.wait_with_output().unwrap();
    assert!(output.status.success(), "caller failed: {output:?}");
    let printed = String::from_utf8(output.stdout).unwrap();
    let mut fields = printed
        .split_whitespace()
        .map(|f| f.parse::<u32>().unwrap());
    let (tid, result) = (fields.next().unwrap(), fields.next().unwrap());
    assert_eq!(result, 42);

    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while records.len() < 2 && Instant::now() < deadline {
        while let Some(item) = events.next() {
            records.push(decode(&item).expect("well-formed record"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let [
        Decoded::Record(Record::Enter(enter)),
        Decoded::Record(Record::Exit(exit)),
    ] = records.as_slice()
    else {
        panic!("expected ENTER then EXIT, got {records:?}");
    };
    assert_eq!(enter.header.pid, caller_pid, "ENTER pid");
    assert_eq!(enter.header.tid, tid, "ENTER tid");
    assert_eq!(
        enter.header.probe, PROBE_ID,
        "attach cookie selects the probe"
    );
    assert_eq!(enter.args[0], 41, "first argument");
    assert_eq!(enter.args[1], 1, "second argument");
    assert_eq!(enter.parent_correlation_id, 0);
    assert_ne!(enter.correlation_id, 0);
    assert_eq!(
        exit.correlation_id, enter.correlation_id,
        "EXIT joins its ENTER"
    );
    assert_eq!((exit.header.pid, exit.header.tid), (caller_pid, tid));
    assert_eq!(exit.ret, 42, "return value");
    assert!(exit.header.ts_ns >= enter.header.ts_ns);
}
