//! The ground truth's `op` line: one per operator call (the second phase of an aclnn operator,
//! or an `aclopCompileAndExecuteV2`), naming the operator, the API calls of its phases and the
//! device tasks it launched.
use npu_sim_common::json::Obj;
use npu_sim_common::time::{pid, tid};

/// The outermost API call in progress on a thread when a phase ran; the same (tid, fn,
/// enter_ns) identifies its `api` line, and task lines name it in `tid` / `api_fn` /
/// `api_enter_ns`.
#[derive(Clone, Debug)]
pub struct PhaseRef {
    pub tid: u32,
    pub func: String,
    pub enter_ns: u64,
}

impl PhaseRef {
    /// The outermost API call in progress on this thread (None when ground truth is off).
    pub fn current() -> Option<PhaseRef> {
        npu_sim_common::core::outermost_api().map(|(func, enter_ns)| PhaseRef {
            tid: tid(),
            func,
            enter_ns,
        })
    }

    fn write(this: Option<&PhaseRef>, o: &mut Obj, key: &str) {
        match this {
            Some(p) => {
                o.obj(key, |o| {
                    o.u64("tid", p.tid.into())
                        .str("fn", &p.func)
                        .u64("enter_ns", p.enter_ns);
                });
            }
            None => {
                o.null(key);
            }
        }
    }
}

/// A kernel an operator call launched, and the device task it became.
#[derive(Clone, Debug)]
pub struct KernelRecord {
    pub name: String,
    pub op_type: String,
    pub tiling_key: u64,
    pub block_dim: u32,
    pub engine: u8,
    /// The API that launched it (`aclrtLaunchKernelWithHostArgs`, ...).
    pub launch_fn: &'static str,
    pub func_handle: u64,
    pub device: u32,
    pub stream: u32,
    pub task: u32,
}

/// One operator call.
pub struct OpRecord<'a> {
    /// `aclnn` or `aclop`.
    pub kind: &'a str,
    pub lib: &'a str,
    /// The function called for the (second) phase.
    pub api: &'a str,
    /// The operator: `Add` for aclnnAdd, the op type for aclop.
    pub op: &'a str,
    pub executor: u64,
    pub executor_id: u64,
    pub cache_hit: bool,
    /// Whether the executor stays usable after the call (aclSetAclOpExecutorRepeatable).
    pub repeatable: bool,
    /// For a cache hit, the executor whose first phase planned what ran.
    pub origin_executor_id: u64,
    pub workspace: u64,
    pub workspace_size: u64,
    pub stream: u64,
    pub ret: i32,
    pub phase1: Option<&'a PhaseRef>,
    pub phase2: Option<&'a PhaseRef>,
    pub kernels: &'a [KernelRecord],
}

impl OpRecord<'_> {
    /// The JSON line (with its newline).
    pub fn line(&self) -> String {
        let mut kernels = String::from("[");
        for (i, k) in self.kernels.iter().enumerate() {
            if i > 0 {
                kernels.push(',');
            }
            let mut o = Obj::begin(&mut kernels);
            o.str("name", &k.name)
                .str("op_type", &k.op_type)
                .u64("tiling_key", k.tiling_key);
            o.u64("block_dim", k.block_dim.into())
                .str("engine", crate::kernel::engine_name(k.engine))
                .str("launch_fn", k.launch_fn);
            o.u64("func_handle", k.func_handle)
                .u64("device", k.device.into())
                .u64("stream", k.stream.into())
                .u64("task", k.task.into());
            o.end();
        }
        kernels.push(']');
        let mut line = String::with_capacity(256 + kernels.len());
        let mut o = Obj::begin(&mut line);
        o.str("type", "op")
            .str("kind", self.kind)
            .u64("pid", pid().into());
        o.str("lib", self.lib)
            .str("api", self.api)
            .str("op", self.op);
        o.u64("executor", self.executor)
            .u64("executor_id", self.executor_id)
            .bool("cache_hit", self.cache_hit)
            .bool("repeatable", self.repeatable)
            .u64("origin_executor_id", self.origin_executor_id);
        o.u64("workspace", self.workspace)
            .u64("workspace_size", self.workspace_size)
            .u64("stream", self.stream)
            .i64("ret", self.ret.into());
        PhaseRef::write(self.phase1, &mut o, "phase1");
        PhaseRef::write(self.phase2, &mut o, "phase2");
        o.raw("kernels", &kernels);
        o.end();
        line.push('\n');
        line
    }

    /// Appends the line to the ground truth.
    pub fn write(&self) {
        npu_sim_common::core::write_truth(&self.line());
    }
}
