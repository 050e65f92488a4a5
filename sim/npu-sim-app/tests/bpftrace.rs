//! An independent uprobe tool sees the same calls as the ground truth: bpftrace counts
//! HcclAllReduce and the rtKernelLaunch family in the installed libraries while the 2-rank train
//! workload runs, per pid, and the counts equal the truth's.
use std::collections::BTreeMap;
use std::ffi::{CString, c_void};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use npu_sim_app::*;

const LAUNCHES: [&str; 4] = [
    "rtKernelLaunch",
    "rtKernelLaunchWithHandleV2",
    "rtLaunchKernelByFuncHandleV3",
    "rtCpuKernelLaunch",
];

#[test]
fn bpftrace_uprobe_counts_equal_truth() {
    if std::env::var_os("NPU_SIM_SKIP_BPFTRACE").is_some() {
        eprintln!("NPU_SIM_SKIP_BPFTRACE set: skipping the bpftrace comparison");
        return;
    }
    let home = sim_home();
    let hccl = home.join("ascend-toolkit/latest/lib64/libhccl.so");
    let rt = home.join("ascend-toolkit/latest/lib64/libruntime.so");
    let me = std::process::id();
    // A canary call from this process tells when the probes are live.
    let mut script = format!(
        "uprobe:{h}:HcclAllReduce /pid == {me}/ {{ printf(\"READY\\n\"); }}\n\
         uprobe:{h}:HcclAllReduce /pid != {me}/ {{ @calls[pid, \"HcclAllReduce\"] = count(); }}\n",
        h = hccl.display()
    );
    for f in LAUNCHES {
        script += &format!(
            "uprobe:{}:{f} {{ @calls[pid, \"{f}\"] = count(); }}\n",
            rt.display()
        );
    }
    let mut bt = Command::new("bpftrace")
        .arg("-e")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bpftrace (Debian package `bpftrace`, run as root) is needed; set NPU_SIM_SKIP_BPFTRACE=1 to skip");
    let (tx, rx) = mpsc::channel();
    let stdout = bt.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all += &line;
            all.push('\n');
        }
        all
    });

    // SAFETY: loading the installed libhccl and calling HcclAllReduce with a NULL communicator,
    // which only returns HCCL_E_PTR.
    let canary = unsafe {
        let path = CString::new(hccl.to_str().unwrap()).unwrap();
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW);
        assert!(!h.is_null(), "dlopen libhccl.so");
        let f = libc::dlsym(h, c"HcclAllReduce".as_ptr());
        std::mem::transmute::<
            *mut c_void,
            unsafe extern "C" fn(
                *mut c_void,
                *mut c_void,
                u64,
                u32,
                u32,
                *mut c_void,
                *mut c_void,
            ) -> i32,
        >(f)
    };
    'wait: loop {
        assert_eq!(
            // SAFETY: HcclAllReduce with a NULL communicator only checks it and returns
            // HCCL_E_PTR; no pointer is dereferenced.
            unsafe {
                canary(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    1,
                    4,
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            },
            2
        );
        while let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            if line.contains("READY") {
                break 'wait;
            }
        }
        // No deadline: attaching takes as long as it takes on a loaded machine, and a bpftrace
        // that cannot attach exits, which ends the wait.
        if bt.try_wait().unwrap().is_some() {
            let mut err = String::new();
            let _ = bt.stderr.take().unwrap().read_to_string(&mut err);
            panic!("bpftrace did not attach: {err}");
        }
    }

    let dir = scratch_dir("bpftrace");
    run_ok(sim_command("npu-sim-run", &dir).args([
        "--nproc",
        "2",
        "--",
        "npu-sim-app",
        "train",
        "--steps",
        "5",
    ]));
    // SAFETY: signalling the bpftrace child we started; it prints its maps and exits.
    unsafe { libc::kill(bt.id() as i32, libc::SIGINT) };
    bt.wait().unwrap();
    let output = reader.join().unwrap();

    // Lines like `@calls[1234, rtKernelLaunch]: 10`.
    let mut seen: BTreeMap<(u64, String), usize> = BTreeMap::new();
    for line in output.lines().filter_map(|l| l.strip_prefix("@calls[")) {
        let (key, n) = line.split_once("]: ").expect("map line");
        let (pid, f) = key.split_once(", ").expect("map key");
        seen.insert(
            (pid.parse().unwrap(), f.trim_matches('"').to_string()),
            n.trim().parse().unwrap(),
        );
    }
    let truth = read_truth(&dir);
    assert_eq!(truth.len(), 2);
    for (pid, lines) in &truth {
        for f in LAUNCHES.iter().chain(&["HcclAllReduce"]) {
            let want = api_count(lines, f);
            let got = seen.get(&(*pid, f.to_string())).copied().unwrap_or(0);
            assert_eq!(
                got, want,
                "pid {pid} {f}: bpftrace saw {got}, truth has {want}\n{output}"
            );
        }
        assert!(
            api_count(lines, "rtKernelLaunch") > 0 && api_count(lines, "rtCpuKernelLaunch") > 0
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
