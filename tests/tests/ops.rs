//! Operators: the `eager` workload (torch_npu's way: first phases on the producer thread,
//! second phases on its queue thread, executor-cache hits, aclop calls, a repeatable executor)
//! against the simulator's `op` truth lines; globs over the operator libraries; catalog files
//! given with `--catalog`.
use std::collections::HashMap;

use serde_json::Value;
use tests::{
    Recording, Row,
    device::{assert_aligned, check_tasks},
    read_truth, record, sim_bin, sim_home,
    truth::assert_api_matches,
};
use tracer_catalog::{Catalog, Domain};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

/// Truth `op` lines, each with the pid of its process.
fn truth_ops(recording: &Recording) -> Vec<(u64, Value)> {
    read_truth(&recording.truth)
        .into_iter()
        .flat_map(|(pid, lines)| {
            lines
                .into_iter()
                .filter(|l| l["type"] == "op")
                .map(move |l| (pid, l))
        })
        .collect()
}

/// Truth `api` lines of the functions the default selection traces.
fn traced_truth_api(recording: &Recording) -> Vec<Value> {
    let catalog = Catalog::builtin();
    recording
        .truth_api()
        .into_iter()
        .filter(|l| {
            let (lib, name) = (l["lib"].as_str().unwrap(), l["fn"].as_str().unwrap());
            catalog
                .resolve(lib, name)
                .is_some_and(|d| Domain::DEFAULT.contains(&d.domain))
        })
        .collect()
}

/// The op row of truth line `op`: the one of its process and second-phase thread whose call
/// brackets the second phase's entry.
fn op_row<'a>(rows: &'a [Row], pid: u64, op: &Value) -> &'a Row {
    let phase2 = &op["phase2"];
    let enter = u(&phase2["enter_ns"]);
    let found: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            u(&r["pid"]) == pid
                && r["tid"] == phase2["tid"]
                && u(&r["start_ns"]) <= enter
                && r["end_ns"].as_u64().is_some_and(|end| enter <= end)
        })
        .collect();
    assert_eq!(found.len(), 1, "one op row for {op}: {found:?}");
    found[0]
}

#[test]
fn eager_operators_match_truth() {
    let workload = [
        vec![sim_bin("npu-sim-app")],
        args(&["eager", "--ops", "2000", "--aclop-every", "400"]),
    ]
    .concat();
    let recording = record("ops-eager", &[], &workload);
    let session = recording.session();
    assert_eq!(session.total_drops(), 0, "drops: {:?}", session.drops);

    let ops = truth_ops(&recording);
    let rows = recording.table("op");
    let kernels = recording.table("kernel");
    let mut by_op: HashMap<u64, Vec<&Row>> = HashMap::new();
    for k in &kernels {
        if let Some(op) = k["op_correlation_id"].as_u64() {
            by_op.entry(op).or_default().push(k);
        }
    }
    let (mut hits, mut aclop, mut repeated) = (0, 0, 0);
    let mut phase1_seen: HashMap<u64, u32> = HashMap::new();
    for (pid, op) in &ops {
        let row = op_row(&rows, *pid, op);
        let ctx = format!("truth {op}\nrow {row:?}");
        assert_eq!(row["name"], op["op"], "operator: {ctx}");
        assert_eq!(row["kind"], op["kind"], "{ctx}");
        assert_eq!(row["api_name"], op["api"], "{ctx}");
        assert_eq!(row["library"], op["lib"], "{ctx}");
        assert_eq!(row["return_value"], op["ret"], "{ctx}");
        let phase1 = &op["phase1"];
        if phase1.is_null() {
            assert!(
                row["prepare_correlation_id"].is_null(),
                "no first phase: {ctx}"
            );
            hits += usize::from(op["cache_hit"] == true);
        } else {
            let enter = u(&phase1["enter_ns"]);
            assert_eq!(
                row["prepare_tid"], phase1["tid"],
                "first phase thread: {ctx}"
            );
            assert_eq!(row["prepare_api_name"], phase1["fn"], "{ctx}");
            assert!(
                u(&row["prepare_start_ns"]) <= enter && enter <= u(&row["prepare_end_ns"]),
                "first phase times: {ctx}"
            );
            let n = phase1_seen.entry(enter).or_default();
            *n += 1;
            repeated += usize::from(*n > 1);
        }
        if op["kind"] == "aclnn" {
            assert_eq!(row["workspace_bytes"], op["workspace_size"], "{ctx}");
            assert_eq!(row["executor"], op["executor"], "{ctx}");
            assert_eq!(row["stream"], op["stream"], "{ctx}");
        } else {
            // aclopCompileAndExecuteV2's twelfth argument, read from the stack.
            assert_eq!(row["stream"], op["stream"], "{ctx}");
            aclop += 1;
        }
        let mut launched = by_op
            .get(&u(&row["correlation_id"]))
            .cloned()
            .unwrap_or_default();
        launched.sort_by_key(|k| u(&k["submit_ns"]));
        let names: Vec<&Value> = launched.iter().map(|k| &k["name"]).collect();
        let want: Vec<&Value> = op["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| &k["name"])
            .collect();
        assert_eq!(names, want, "the operator's kernels: {ctx}");
        for k in launched {
            assert_eq!(k["op_name"], op["op"], "{ctx}");
        }
    }
    assert!(
        hits > 100 && aclop >= 3 && repeated >= 1,
        "hits {hits}, aclop {aclop}, repeated {repeated}"
    );
    // Every successful operator call is a truth call; the others failed.
    let ok_rows = rows.iter().filter(|r| r["return_value"] == 0).count();
    let ok_truth = ops.iter().filter(|(_, o)| o["ret"] == 0).count();
    assert_eq!(ok_rows, ok_truth, "operator calls");
    assert!(
        kernels.iter().all(|k| !k["op_name"].is_null()),
        "every kernel of the eager workload ran in an operator"
    );
    assert_api_matches(&recording.table("api"), &traced_truth_api(&recording));
    assert_aligned("eager", check_tasks(&recording));
    let report = recording.report("table");
    assert!(report.contains("Operators by total host time"), "{report}");
}

/// Every function a glob names in each operator library is attached, less the excluded ones.
#[test]
fn globs_attach_every_export_they_name() {
    let workload = [
        vec![sim_bin("npu-sim-app")],
        args(&["eager", "--ops", "300"]),
    ]
    .concat();
    let recording = record(
        "ops-glob",
        &["--function", "aclnn*,!*GetWorkspaceSize"],
        &workload,
    );
    let session = recording.session();
    let lib64 = sim_home().join("ascend-toolkit/latest/lib64");
    for lib in ["libopapi.so", "libopapi_math.so", "libcust_opapi.so"] {
        let exports = npu_bpftrace::symbols::SymbolTable::read(&lib64.join(lib)).unwrap();
        let mut want: Vec<&str> = exports
            .exported()
            .iter()
            .map(String::as_str)
            .filter(|s| s.starts_with("aclnn") && !s.ends_with("GetWorkspaceSize"))
            .collect();
        want.sort_unstable();
        let file = session
            .attached
            .iter()
            .find(|f| f.library == lib)
            .unwrap_or_else(|| panic!("{lib} attached"));
        let mut got: Vec<&str> = file.functions.iter().map(String::as_str).collect();
        got.sort_unstable();
        assert!(!want.is_empty(), "{lib} exports operators");
        assert_eq!(got, want, "{lib}");
    }
    let api = recording.table("api");
    assert!(!api.is_empty());
    assert!(
        api.iter().all(|r| {
            let name = r["name"].as_str().unwrap();
            name.starts_with("aclnn") && !name.ends_with("GetWorkspaceSize")
        }),
        "only what the patterns select"
    );
    let ops = recording.table("op");
    assert!(!ops.is_empty() && ops.iter().all(|r| r["prepare_correlation_id"].is_null()));
}

/// A catalog file given with --catalog adds entries (a glob with an exclusion), overrides a
/// built-in one, and a function known only by name is traced with its raw arguments.
#[test]
fn catalog_files_take_effect() {
    let scratch = tests::scratch_dir("ops-catalog-file");
    std::fs::create_dir_all(&scratch).unwrap();
    let file = scratch.join("mine.toml");
    std::fs::write(
        &file,
        "[catalog]\nformat = 1\n\n\
         [[function]]\nlibrary = \"libnnopbase.so\"\nsymbol = \"aclCreate*\"\n\
         exclude = [\"aclCreateScalar\"]\ndomain = \"op\"\n\n\
         [[function]]\nlibrary = \"libnnopbase.so\"\nsymbol = \"aclDestroyAclOpExecutor\"\n\
         domain = \"mstx\"\nargs = [{ at = 0, name = \"executor\", column = \"address\" }]\n",
    )
    .unwrap();
    let workload = [
        vec![sim_bin("npu-sim-app")],
        args(&["eager", "--ops", "200"]),
    ]
    .concat();
    let catalog = file.display().to_string();
    let recording = record(
        "ops-catalog",
        &[
            "--catalog",
            &catalog,
            "--domain",
            "op,mstx",
            "--function",
            "aclDestroyTensor",
        ],
        &workload,
    );
    let api = recording.table("api");
    let count = |name: &str| api.iter().filter(|r| r["name"] == name).count();
    assert!(
        count("aclCreateTensor") > 0 && count("aclCreateIntArray") + count("aclCreateTensor") > 0
    );
    assert_eq!(count("aclCreateScalar"), 0, "excluded");
    let destroy: Vec<&Row> = api
        .iter()
        .filter(|r| r["name"] == "aclDestroyAclOpExecutor")
        .collect();
    assert!(!destroy.is_empty());
    for r in &destroy {
        assert_eq!(r["domain"], "MSTX", "overridden: {r:?}");
        assert!(r["address"].as_u64().is_some_and(|a| a != 0), "{r:?}");
    }
    let tensors: Vec<&Row> = api
        .iter()
        .filter(|r| r["name"] == "aclDestroyTensor")
        .collect();
    assert!(!tensors.is_empty());
    for r in &tensors {
        assert_eq!(r["domain"], "OP", "the library's domain: {r:?}");
        assert!(
            r["arg0"].as_u64().is_some_and(|a| a != 0),
            "raw argument: {r:?}"
        );
        assert!(!r["return_value"].is_null(), "{r:?}");
    }
}

/// Attached to a running process before it loads its operator libraries (torch_npu dlopens
/// them when it is imported; GE's libacl_op_compiler.so at the first aclop call): each is
/// traced from when it appeared, every operator call after its probes were in place is a row.
#[test]
fn libraries_loaded_after_attach_are_traced_from_then_on() {
    let scratch = tests::scratch_dir("ops-late-dlopen");
    let (truth, dir, gate) = (
        scratch.join("truth"),
        scratch.join("trace"),
        scratch.join("go"),
    );
    std::fs::create_dir_all(&truth).unwrap();
    let mut cmd = tests::sim_command("npu-sim-app", &truth);
    cmd.args([
        "eager",
        "--ops",
        "4000",
        "--aclop-every",
        "300",
        "--wait-file",
    ])
    .arg(&gate);
    let (app, pid) = tests::attach::spawn_workload(&mut cmd, &scratch.join("app.log"));
    let mut agent = tests::tracer_command(&truth)
        .args(["attach", "--pid", &pid.to_string(), "--out"])
        .arg(&dir)
        .stderr(std::fs::File::create(scratch.join("agent.log")).unwrap())
        .spawn()
        .expect("npu-bpftrace attach");
    // The agent writes session.json once its probes are attached.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !dir.join("session.json").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(&gate, b"").unwrap();
    tests::attach::stop_when_done(app);
    let status = agent.wait().unwrap();
    let log = std::fs::read_to_string(scratch.join("agent.log")).unwrap_or_default();
    assert!(status.success(), "agent: {status}\n{log}");

    let session = tests::attach::session(&dir);
    let attached_at = |lib: &str| {
        let file = session
            .attached
            .iter()
            .find(|f| f.library == lib && !f.functions.is_empty())
            .unwrap_or_else(|| panic!("{lib} attached once loaded: {:?}", session.attached));
        file.attached_ns.expect("attach time")
    };
    let rows = tests::read_table(&dir, "op");
    let lines = read_truth(&truth).remove(&u64::from(pid)).unwrap();
    let (mut checked, mut missed) = (0, 0);
    for op in lines.iter().filter(|l| l["type"] == "op") {
        let since = attached_at(op["lib"].as_str().unwrap());
        let first = &op["phase1"];
        // A call that began before its library's probes were in place is not seen.
        if u(&op["phase2"]["enter_ns"]) <= since
            || (!first.is_null() && u(&first["enter_ns"]) <= since)
        {
            missed += 1;
            continue;
        }
        let row = op_row(&rows, u64::from(pid), op);
        assert_eq!(row["name"], op["op"], "{op}\n{row:?}");
        assert_eq!(row["prepare_tid"], first["tid"], "{op}\n{row:?}");
        checked += 1;
    }
    println!("late libraries: {checked} operator calls after their probes, {missed} before");
    // The process is held at its dlopen of each library until the library's probes are
    // attached: nothing is missed (without holds, calls until the next rescan are).
    assert!(
        !session.holds.enabled || missed == 0,
        "{missed} operator calls before their library's probes despite holds: {:?}",
        session.holds
    );
    assert!(
        checked > 1000 && lines.iter().any(|l| l["kind"] == "aclop"),
        "{checked} checked"
    );
}
