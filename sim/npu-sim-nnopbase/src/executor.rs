//! Executors (`aclOpExecutor`): what a first phase plans and a second phase runs, and the PTA
//! executor cache torch_npu uses to skip first phases (hicann/opbase
//! `src/nnopbase/common/utils/op_cache.cpp`, `composite_op/aclnn_engine/op_executor.cpp`;
//! Ascend/op-plugin `op_plugin/utils/op_api_common.h`, `hit_cache`):
//!
//! - `InitPTACacheThreadLocal()` + `SetPTAHashKey(hash)` (or `SetPTACacheHashKey(buf, len)`) on
//!   the calling thread make the next first phase on that thread store its executor's plan in
//!   the thread's cache under that key;
//! - the entry becomes usable once that executor's second phase has run (its launches are then
//!   known);
//! - `PTAGetExecCache(hash, &workspaceSize)` / `PTAFindExecCache(buf, len, &workspaceSize)` on
//!   the same thread then return a new executor wrapping the entry (one per hit, as nnopbase's
//!   `OpExecCacheWrap`), whose second phase replays the launches with the tensor addresses given
//!   by `AddTensorAddrToCachedList` since the last `InitPTACacheThreadLocal`.
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock};

use npu_sim_common::trace::{Ret, api};
use npu_sim_opdev::status::{ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS};
use npu_sim_opdev::truth::PhaseRef;

use crate::LIB;
use crate::objects;

/// A kernel a second phase launches.
#[derive(Clone)]
pub(crate) struct Planned {
    pub op_type: String,
    pub engine: u8,
    pub tiling_key: u64,
    pub block_dim: u32,
}

/// A launch as the first run of an executor made it, replayed by cache hits.
#[derive(Clone)]
pub(crate) struct CachedLaunch {
    pub planned: Planned,
    pub func_handle: u64,
}

/// What an executor plans, shared with a cache entry.
pub(crate) struct Plan {
    pub id: u64,
    /// `aclnnAdd`.
    pub api: String,
    pub kernels: Vec<Planned>,
    pub workspace_size: u64,
    pub phase1: Option<PhaseRef>,
}

pub(crate) struct CacheEntry {
    pub plan: Arc<Plan>,
    pub launches: OnceLock<Vec<CachedLaunch>>,
}

impl CacheEntry {
    fn ready(&self) -> bool {
        self.launches.get().is_some()
    }
}

pub(crate) struct ExecState {
    pub plan: Arc<Plan>,
    /// (tensor handle, device address) of every tensor argument, inputs first.
    pub tensors: Vec<(usize, u64)>,
    /// How many of `tensors` are inputs.
    pub inputs: usize,
    pub repeatable: bool,
    pub cache: Option<Arc<CacheEntry>>,
}

pub(crate) enum Exec {
    Plain(Mutex<ExecState>),
    Wrap {
        id: u64,
        entry: Arc<CacheEntry>,
        addrs: Vec<u64>,
    },
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

fn registry() -> MutexGuard<'static, HashMap<usize, Arc<Exec>>> {
    static R: LazyLock<Mutex<HashMap<usize, Arc<Exec>>>> = LazyLock::new(Mutex::default);
    R.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn add(e: Exec) -> *mut c_void {
    let e = Arc::new(e);
    let h = Arc::as_ptr(&e) as usize;
    registry().insert(h, e);
    h as *mut c_void
}

pub(crate) fn get(h: *mut c_void) -> Option<Arc<Exec>> {
    registry().get(&(h as usize)).cloned()
}

pub(crate) fn remove(h: *mut c_void) -> Option<Arc<Exec>> {
    registry().remove(&(h as usize))
}

/// Cache entries a thread keeps at most (nnopbase's `K_CACHE_LIMIT`; past it nnopbase stops
/// adding hash-keyed entries and evicts byte-keyed ones, the simulator stops adding both).
const CACHE_LIMIT: usize = 10_000;

#[derive(Default)]
struct PtaTls {
    use_pta: bool,
    hash: u64,
    key: Option<Vec<u8>>,
    addrs: Vec<u64>,
    by_hash: HashMap<u64, Arc<CacheEntry>>,
    by_key: HashMap<Vec<u8>, Arc<CacheEntry>>,
}

thread_local! {
    static PTA: RefCell<PtaTls> = RefCell::new(PtaTls::default());
}

/// Called by a first phase: a new cache entry for `plan` under the thread's PTA key, if one is
/// set and no entry has that key yet (nnopbase's `OpExecCacheManager::AddOpExecCache` keeps the
/// first entry of a key, usable or not).
pub(crate) fn cache_entry_for(plan: &Arc<Plan>) -> Option<Arc<CacheEntry>> {
    PTA.try_with(|p| {
        let mut p = p.borrow_mut();
        if !p.use_pta || (p.hash == 0 && p.key.is_none()) {
            return None;
        }
        if p.by_hash.len() + p.by_key.len() >= CACHE_LIMIT {
            return None;
        }
        let entry = Arc::new(CacheEntry {
            plan: plan.clone(),
            launches: OnceLock::new(),
        });
        if let Some(k) = p.key.clone() {
            if p.by_key.contains_key(&k) {
                return None;
            }
            p.by_key.insert(k, entry.clone());
        } else {
            let h = p.hash;
            if p.by_hash.contains_key(&h) {
                return None;
            }
            p.by_hash.insert(h, entry.clone());
        }
        Some(entry)
    })
    .ok()
    .flatten()
}

/// A wrap executor for a usable entry, with the thread's cached tensor addresses.
fn hit(entry: Option<Arc<CacheEntry>>, workspace_size: *mut u64) -> *mut c_void {
    let Some(entry) = entry.filter(|e| e.ready()) else {
        return std::ptr::null_mut();
    };
    if workspace_size.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: non-null out-parameter of the caller.
    unsafe { workspace_size.write(entry.plan.workspace_size) };
    let addrs = PTA
        .try_with(|p| p.borrow().addrs.clone())
        .unwrap_or_default();
    add(Exec::Wrap {
        id: next_id(),
        entry,
        addrs,
    })
}

// SAFETY: the C caller's contract: `workspaceSize` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PTAGetExecCache(hash: u64, workspaceSize: *mut u64) -> *mut c_void {
    api(
        LIB,
        "PTAGetExecCache",
        || {
            let entry = PTA
                .try_with(|p| p.borrow().by_hash.get(&hash).cloned())
                .ok()
                .flatten();
            hit(entry, workspaceSize)
        },
        |a| {
            a.u64("hash", hash)
                .u64("workspaceSize", workspaceSize as u64);
        },
    )
}

// SAFETY: the C caller's contract: `buf` is NULL or holds `len` bytes; `workspaceSize` is NULL or
// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PTAFindExecCache(
    buf: *const u8,
    len: usize,
    workspaceSize: *mut u64,
) -> *mut c_void {
    api(
        LIB,
        "PTAFindExecCache",
        || {
            if buf.is_null() {
                return std::ptr::null_mut();
            }
            // SAFETY: the caller's contract: `len` readable bytes at `buf`.
            let key = unsafe { std::slice::from_raw_parts(buf, len) };
            let entry = PTA
                .try_with(|p| p.borrow().by_key.get(key).cloned())
                .ok()
                .flatten();
            hit(entry, workspaceSize)
        },
        |a| {
            a.u64("buf", buf as u64)
                .u64("len", len as u64)
                .u64("workspaceSize", workspaceSize as u64);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn InitPTACacheThreadLocal() {
    api(
        LIB,
        "InitPTACacheThreadLocal",
        || {
            let _ = PTA.try_with(|p| {
                let mut p = p.borrow_mut();
                p.use_pta = true;
                p.hash = 0;
                p.key = None;
                p.addrs.clear();
            });
        },
        |_| {},
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn UnInitPTACacheThreadLocal() {
    api(
        LIB,
        "UnInitPTACacheThreadLocal",
        || {
            let _ = PTA.try_with(|p| p.borrow_mut().use_pta = false);
        },
        |_| {},
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn SetPTAHashKey(hash: u64) {
    api(
        LIB,
        "SetPTAHashKey",
        || {
            let _ = PTA.try_with(|p| p.borrow_mut().hash = hash);
        },
        |a| {
            a.u64("hash", hash);
        },
    )
}

// SAFETY: the C caller's contract: `key` is NULL or holds `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn SetPTACacheHashKey(key: *const u8, len: usize) {
    api(
        LIB,
        "SetPTACacheHashKey",
        || {
            let k = (!key.is_null()).then(|| {
                // SAFETY: the caller's contract: `len` readable bytes at `key`.
                unsafe { std::slice::from_raw_parts(key, len) }.to_vec()
            });
            let _ = PTA.try_with(|p| p.borrow_mut().key = k);
        },
        |a| {
            a.u64("key", key as u64).u64("len", len as u64);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn AddTensorAddrToCachedList(addr: *mut c_void) {
    api(
        LIB,
        "AddTensorAddrToCachedList",
        || {
            let _ = PTA.try_with(|p| p.borrow_mut().addrs.push(addr as u64));
        },
        |a| {
            a.u64("addr", addr as u64);
        },
    )
}

/// A C `bool` return value.
#[derive(Clone, Copy)]
pub(crate) struct CBool(pub bool);

impl Ret for CBool {
    fn from_code(_: i32) -> Self {
        CBool(false)
    }
    fn write(&self, o: &mut npu_sim_common::json::Obj) {
        o.bool("ret", self.0);
    }
}

// SAFETY: the C caller's contract: `api` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn CanUsePTACache(api_name: *const std::ffi::c_char) -> bool {
    api(
        LIB,
        "CanUsePTACache",
        || CBool(!api_name.is_null()),
        |a| {
            // SAFETY: NULL or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("api", api_name) };
        },
    )
    .0
}

#[unsafe(no_mangle)]
pub extern "C" fn aclSetAclOpExecutorRepeatable(executor: *mut c_void) -> i32 {
    api(
        LIB,
        "aclSetAclOpExecutorRepeatable",
        || {
            if executor.is_null() {
                return ACLNN_ERR_PARAM_NULLPTR;
            }
            match get(executor).as_deref() {
                Some(Exec::Plain(s)) => {
                    s.lock().unwrap_or_else(|e| e.into_inner()).repeatable = true;
                    ACLNN_SUCCESS
                }
                _ => ACLNN_ERR_PARAM_INVALID,
            }
        },
        |a| {
            a.u64("executor", executor as u64);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclDestroyAclOpExecutor(executor: *mut c_void) -> i32 {
    api(
        LIB,
        "aclDestroyAclOpExecutor",
        || {
            if executor.is_null() {
                return ACLNN_ERR_PARAM_NULLPTR;
            }
            match remove(executor) {
                Some(_) => ACLNN_SUCCESS,
                None => ACLNN_ERR_PARAM_INVALID,
            }
        },
        |a| {
            a.u64("executor", executor as u64);
        },
    )
}

/// Sets the address of the `index`-th tensor of `executor`: among its inputs, its outputs
/// (`outputs`), or all of them (`None`).
fn set_addr(
    executor: *mut c_void,
    index: usize,
    tensor: *mut c_void,
    addr: *mut c_void,
    outputs: Option<bool>,
) -> i32 {
    if executor.is_null() || tensor.is_null() {
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    let Some(e) = get(executor) else {
        return ACLNN_ERR_PARAM_INVALID;
    };
    let Exec::Plain(s) = &*e else {
        return ACLNN_ERR_PARAM_INVALID;
    };
    let rc = objects::set_tensor_addr(tensor, addr);
    if rc != ACLNN_SUCCESS {
        return rc;
    }
    let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
    let n_in = s.inputs;
    let slot = match outputs {
        None => Some(index),
        Some(false) => (index < n_in).then_some(index),
        Some(true) => index.checked_add(n_in),
    };
    match slot.and_then(|i| s.tensors.get_mut(i)) {
        Some(t) if t.0 == tensor as usize => {
            t.1 = addr as u64;
            ACLNN_SUCCESS
        }
        _ => ACLNN_ERR_PARAM_INVALID,
    }
}

macro_rules! addr_setter {
    ($name:ident, $outputs:expr) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(
            executor: *mut c_void,
            index: usize,
            tensor: *mut c_void,
            addr: *mut c_void,
        ) -> i32 {
            api(
                LIB,
                stringify!($name),
                || set_addr(executor, index, tensor, addr, $outputs),
                |a| {
                    a.u64("executor", executor as u64)
                        .u64("index", index as u64);
                    a.u64("tensor", tensor as u64).u64("addr", addr as u64);
                },
            )
        }
    };
}

addr_setter!(aclSetInputTensorAddr, Some(false));
addr_setter!(aclSetOutputTensorAddr, Some(true));
addr_setter!(aclSetTensorAddr, None);

/// nnopbase's huge-memory pool hooks torch_npu calls around every first phase; the simulator
/// has no pool.
#[unsafe(no_mangle)]
pub extern "C" fn InitHugeMemThreadLocal(arg: *mut c_void, sync: bool) -> i32 {
    api(
        LIB,
        "InitHugeMemThreadLocal",
        || ACLNN_SUCCESS,
        |a| {
            a.u64("arg", arg as u64).bool("sync", sync);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn UnInitHugeMemThreadLocal(arg: *mut c_void, sync: bool) {
    api(
        LIB,
        "UnInitHugeMemThreadLocal",
        || {},
        |a| {
            a.u64("arg", arg as u64).bool("sync", sync);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn ReleaseHugeMem(arg: *mut c_void, sync: bool) {
    api(
        LIB,
        "ReleaseHugeMem",
        || {},
        |a| {
            a.u64("arg", arg as u64).bool("sync", sync);
        },
    )
}

static INITIALIZED: AtomicBool = AtomicBool::new(false);

// SAFETY: the C caller's contract: `configPath` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnnInit(configPath: *const std::ffi::c_char) -> i32 {
    api(
        LIB,
        "aclnnInit",
        || {
            INITIALIZED.store(true, Ordering::SeqCst);
            ACLNN_SUCCESS
        },
        |a| {
            // SAFETY: NULL or a NUL-terminated string, per the prototype.
            unsafe { a.cstr("configPath", configPath) };
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclnnFinalize() -> i32 {
    api(
        LIB,
        "aclnnFinalize",
        || {
            INITIALIZED.store(false, Ordering::SeqCst);
            ACLNN_SUCCESS
        },
        |_| {},
    )
}
