//! Device binaries and the kernels in them. Any blob is accepted; kernel names come from
//! rtFunctionRegister (stub path), rtBinaryGetFunctionByName (handle path) or the AI CPU
//! launch itself. Functions are immortal, so the name pointers put in SQEs stay valid.
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::{LazyLock, Mutex, MutexGuard};

use npu_sim_common::abi::{self, sqe_type};

/// A kernel, laid out as the real runtime's `class Kernel` begins (hicann/runtime
/// `src/runtime/core/inc/kernel/kernel.hpp`, no vtable): `program_` @0, `aicpuKernelType_`
/// @8, `kernelAttrType_` @12, `stubFun_` @16, `std::string name_` @24 (libstdc++: data pointer,
/// length, then a 16-byte local buffer or the capacity). What follows is the simulator's own.
#[repr(C)]
pub(crate) struct Func {
    program: *const c_void,
    aicpu_kernel_type: u32,
    kernel_attr_type: u32,
    stub_fun: u64,
    pub name: StdString,
    /// What the SQE says the kernel runs on (AI Core, AI CPU, AI Vector).
    pub sqe_type: u8,
    /// The device "pc" reported in the SQE: the stub address, or the kernel itself.
    pub pc: u64,
}

/// libstdc++'s `std::string` (the pre-C++11 ABI is not used by CANN): a pointer to the
/// characters, the length, and the local buffer (short strings) or the capacity.
#[repr(C)]
pub(crate) struct StdString {
    pub ptr: *const c_char,
    len: usize,
    local: [u8; 16],
}

/// What an `rtFuncHandle` points to in runtimes since the "Prevent UAF" changes (2026-04,
/// hicann/runtime a22dab25/8ef28993): `rtInnerObject { uint64_t magic; void *object; }` with
/// magic "FUNC" (0x46554E43) and the `Kernel` as object. Before, the handle is the `Kernel*`.
#[repr(C)]
struct InnerObject {
    magic: u64,
    object: *const Func,
}

const FUNC_MAGIC: u64 = 0x4655_4E43;

/// Which runtime generation's handles to hand out (`NPU_SIM_CANN_RUNTIME`): `2026` (the
/// default: wrapped) or `2025` (the `Kernel*` itself).
fn wrapped_handles() -> bool {
    static WRAPPED: LazyLock<bool> = LazyLock::new(|| {
        npu_sim_common::env::string("NPU_SIM_CANN_RUNTIME").as_deref() != Some("2025")
    });
    *WRAPPED
}

// SAFETY: immutable after creation; `name` points to a leaked, immutable C string and
// `program` is never dereferenced, so the value may move to any thread.
unsafe impl Send for Func {}
// SAFETY: immutable after creation (no interior mutability), so shared references are fine.
unsafe impl Sync for Func {}

struct Binary {
    magic: u32,
    /// Functions in registration order; a tiling key indexes this list.
    funcs: Vec<&'static Func>,
    /// Function symbols of an ELF binary named `<kernel>_<entry>`: (entry, name).
    entries: Vec<(u64, String)>,
}

#[derive(Default)]
struct Registry {
    binaries: HashMap<usize, Binary>,
    /// stubFunc address -> function.
    stubs: HashMap<usize, &'static Func>,
    /// rtFuncHandle values handed out.
    handles: HashMap<usize, &'static Func>,
    /// Kernels named only at launch: AI CPU kernels, unknown tiling keys.
    by_name: HashMap<(u8, String), &'static Func>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static R: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);
    R.lock().unwrap_or_else(|e| e.into_inner())
}

fn new_func(name: &str, sqe_type: u8, pc: u64) -> &'static Func {
    let name = CString::new(name.replace('\0', "")).unwrap_or_default();
    let len = name.as_bytes().len();
    let f: &'static mut Func = Box::leak(Box::new(Func {
        program: std::ptr::null(),
        aicpu_kernel_type: 0,
        kernel_attr_type: 0,
        stub_fun: pc,
        name: StdString {
            ptr: name.into_raw(),
            len,
            local: [0; 16],
        },
        sqe_type,
        pc,
    }));
    if f.pc == 0 {
        f.pc = f as *const Func as u64;
    }
    f
}

const KNOWN_MAGICS: [u32; 7] = [
    abi::RT_DEV_BINARY_MAGIC_PLAIN,
    abi::RT_DEV_BINARY_MAGIC_PLAIN_AICPU,
    abi::RT_DEV_BINARY_MAGIC_PLAIN_AIVEC,
    abi::RT_DEV_BINARY_MAGIC_ELF,
    abi::RT_DEV_BINARY_MAGIC_ELF_AICPU,
    abi::RT_DEV_BINARY_MAGIC_ELF_AIVEC,
    abi::RT_DEV_BINARY_MAGIC_ELF_AICUBE,
];

fn engine_of(magic: u32) -> u8 {
    match magic {
        abi::RT_DEV_BINARY_MAGIC_PLAIN_AICPU | abi::RT_DEV_BINARY_MAGIC_ELF_AICPU => {
            sqe_type::AICPU
        }
        abi::RT_DEV_BINARY_MAGIC_PLAIN_AIVEC | abi::RT_DEV_BINARY_MAGIC_ELF_AIVEC => sqe_type::AIV,
        _ => sqe_type::AICORE,
    }
}

/// Registers a device binary (its contents are not interpreted); returns its handle.
pub(crate) fn load_binary(
    magic: u32,
    data: *const c_void,
    length: u64,
) -> Result<*mut c_void, i32> {
    if data.is_null() || length == 0 || !KNOWN_MAGICS.contains(&magic) {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    let entries = crate::elf::elf_entries(data, length);
    // The handle is a distinct heap address; the registry owns what it stands for.
    let handle = Box::leak(Box::new(0u8)) as *mut u8 as usize;
    registry().binaries.insert(
        handle,
        Binary {
            magic,
            funcs: Vec::new(),
            entries,
        },
    );
    Ok(handle as *mut c_void)
}

/// rtFunctionRegister: `stub` (a host symbol of the application) now launches kernel `name`.
pub(crate) fn register_stub(bin: *mut c_void, stub: *const c_void, name: &str) -> Result<(), i32> {
    if stub.is_null() || name.is_empty() {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    let mut r = registry();
    let b = r
        .binaries
        .get_mut(&(bin as usize))
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)?;
    let f = new_func(name, engine_of(b.magic), stub as u64);
    b.funcs.push(f);
    r.stubs.insert(stub as usize, f);
    Ok(())
}

pub(crate) fn by_stub(stub: *const c_void) -> Result<&'static Func, i32> {
    registry()
        .stubs
        .get(&(stub as usize))
        .copied()
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)
}

/// rtBinaryGetFunctionByName: the kernel `name` of `bin` (one handle per name and binary).
pub(crate) fn function_by_name(bin: *mut c_void, name: &str) -> Result<*mut c_void, i32> {
    if name.is_empty() {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    let mut r = registry();
    let b = r
        .binaries
        .get_mut(&(bin as usize))
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)?;
    // SAFETY: every Func name is a valid C string.
    let existing = b
        .funcs
        .iter()
        .find(|f| unsafe { CStr::from_ptr(f.name.ptr) }.to_bytes() == name.as_bytes());
    let f = match existing {
        Some(f) => *f,
        None => {
            let f = new_func(name, engine_of(b.magic), 0);
            b.funcs.push(f);
            f
        }
    };
    let known = r.handles.iter().find(|(_, g)| std::ptr::eq(**g, f));
    if let Some((&h, _)) = known {
        return Ok(h as *mut c_void);
    }
    let h = if wrapped_handles() {
        let wrapper = Box::leak(Box::new(InnerObject {
            magic: FUNC_MAGIC,
            object: f,
        }));
        wrapper as *const InnerObject as usize
    } else {
        f as *const Func as usize
    };
    r.handles.insert(h, f);
    Ok(h as *mut c_void)
}

pub(crate) fn by_handle(h: *mut c_void) -> Result<&'static Func, i32> {
    registry()
        .handles
        .get(&(h as usize))
        .copied()
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)
}

/// The name of the kernel whose function entry is `key` in binary `bin`, if its ELF has one.
pub(crate) fn entry_name(bin: *mut c_void, key: u64) -> Result<Option<String>, i32> {
    let r = registry();
    let b = r
        .binaries
        .get(&(bin as usize))
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)?;
    Ok(b.entries
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, n)| n.clone()))
}

/// rtKernelLaunchWithHandle*: tiling key `k` selects the kernel whose function entry is `k` in
/// an ELF binary, else the k-th function registered on `bin`; a key past the end launches a
/// kernel named `tiling_key_<k>`.
pub(crate) fn by_tiling_key(bin: *mut c_void, key: u64) -> Result<&'static Func, i32> {
    if let Some(name) = entry_name(bin, key)? {
        let h = function_by_name(bin, &name)?;
        return by_handle(h);
    }
    let mut r = registry();
    let b = r
        .binaries
        .get(&(bin as usize))
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)?;
    if let Some(f) = usize::try_from(key).ok().and_then(|k| b.funcs.get(k)) {
        return Ok(f);
    }
    let ty = engine_of(b.magic);
    let name = format!("tiling_key_{key}");
    Ok(*r
        .by_name
        .entry((ty, name.clone()))
        .or_insert_with(|| new_func(&name, ty, 0)))
}

/// An AI CPU kernel named at launch.
pub(crate) fn aicpu(name: &str) -> &'static Func {
    let mut r = registry();
    let f: &&'static Func = r
        .by_name
        .entry((sqe_type::AICPU, name.to_string()))
        .or_insert_with(|| new_func(name, sqe_type::AICPU, 0));
    f
}
