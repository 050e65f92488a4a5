//! Device binaries and the kernels in them. Any blob is accepted; kernel names come from
//! rtFunctionRegister's `kernelInfoExt` (stub path), rtBinaryGetFunctionByName (handle path),
//! the kernel symbols of an ELF blob (one kernel each, found by its tiling key or function
//! entry: rtRegisterAllKernel + rtKernelLaunchWithHandleV2, rtsFuncGetByEntry), or the AI CPU
//! launch itself. Functions are immortal, so the name pointers put in SQEs stay valid.
use std::collections::HashMap;
use std::ffi::{CString, c_char, c_void};
use std::sync::{LazyLock, Mutex, MutexGuard};

use npu_sim_common::abi::{self, engine};

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
    /// What the kernel runs on (`engine::*`: AI Core, AI Vector, AI CPU).
    pub engine: u32,
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
    /// Registered by rtRegisterAllKernel: a tiling key must be one a kernel symbol carries.
    all_kernels: bool,
    /// Functions registered by stub or by a name that is no kernel symbol, in registration
    /// order; on other binaries than rtRegisterAllKernel's, a tiling key no kernel symbol
    /// carries indexes this list (binaries of rtDevBinaryRegister / rtBinaryLoad).
    funcs: Vec<&'static Func>,
    /// The kernel symbols of the blob, if it is an ELF with any, in symbol-table order.
    symbols: Vec<String>,
    /// Tiling key (function entry) -> the first kernel symbol that carries it.
    entries: HashMap<u64, usize>,
    /// The kernels of this binary by name: the kernel of each symbol (made when first looked
    /// up) and the first function registered under each other name.
    named: HashMap<String, &'static Func>,
}

impl Binary {
    /// The kernel of symbol or function `name`, made on first use (pushed to `funcs` unless it
    /// is a kernel symbol).
    fn kernel_named(&mut self, name: &str) -> &'static Func {
        if let Some(f) = self.named.get(name) {
            return f;
        }
        let f = new_func(name, engine_of(self.magic), 0);
        if !self.symbols.iter().any(|s| s == name) {
            self.funcs.push(f);
        }
        self.named.insert(name.to_string(), f);
        f
    }

    /// The kernel of the symbol whose tiling key (function entry) is `key`, if any.
    fn by_entry(&mut self, key: u64) -> Option<&'static Func> {
        let i = *self.entries.get(&key)?;
        let name = self.symbols.get(i)?.clone();
        Some(self.kernel_named(&name))
    }
}

#[derive(Default)]
struct Registry {
    binaries: HashMap<usize, Binary>,
    /// stubFunc address -> function.
    stubs: HashMap<usize, &'static Func>,
    /// rtFuncHandle values handed out.
    handles: HashMap<usize, &'static Func>,
    /// Func address -> its rtFuncHandle (one handle per kernel).
    handle_of: HashMap<usize, usize>,
    /// Kernels named only at launch: AI CPU kernels, unknown tiling keys.
    by_name: HashMap<(u32, String), &'static Func>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static R: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);
    R.lock().unwrap_or_else(|e| e.into_inner())
}

fn new_func(name: &str, engine: u32, pc: u64) -> &'static Func {
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
        engine,
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

fn engine_of(magic: u32) -> u32 {
    match magic {
        abi::RT_DEV_BINARY_MAGIC_PLAIN_AICPU | abi::RT_DEV_BINARY_MAGIC_ELF_AICPU => engine::AICPU,
        abi::RT_DEV_BINARY_MAGIC_PLAIN_AIVEC | abi::RT_DEV_BINARY_MAGIC_ELF_AIVEC => engine::AIV,
        _ => engine::AIC,
    }
}

/// Registers a device binary; returns its handle. Its kernel symbols are read if it is an ELF
/// (each a kernel, found by the tiling key its name carries: rtKernelLaunchWithHandle*,
/// rtsFuncGetByEntry); otherwise any content is accepted. With `all_kernels`
/// (rtRegisterAllKernel) the blob must have kernel symbols, and a tiling key must be one of
/// theirs.
pub(crate) fn load_binary(
    magic: u32,
    data: *const c_void,
    length: u64,
    all_kernels: bool,
) -> Result<*mut c_void, i32> {
    if data.is_null() || length == 0 || !KNOWN_MAGICS.contains(&magic) {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    let len = usize::try_from(length).map_err(|_| abi::ACL_ERROR_RT_PARAM_INVALID)?;
    // SAFETY: the caller's rtDevBinary_t says `data` holds `length` readable bytes (the runtime
    // copies the whole binary to the device, so it reads them all as well).
    let blob = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    let symbols = crate::elf::kernel_symbols(blob);
    if all_kernels && symbols.is_empty() {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    let mut entries = HashMap::new();
    for (i, n) in symbols.iter().enumerate() {
        entries.entry(crate::elf::tiling_key(n)).or_insert(i);
    }
    let mut binary = Binary {
        magic,
        all_kernels,
        funcs: Vec::new(),
        symbols,
        entries,
        named: HashMap::new(),
    };
    if all_kernels {
        // RT ElfProgram::BuildNewKernel: every kernel is registered with the binary.
        for i in 0..binary.symbols.len() {
            let name = binary.symbols[i].clone();
            binary.kernel_named(&name);
        }
    }
    // The handle is a distinct heap address; the registry owns what it stands for.
    let handle = Box::leak(Box::new(0u8)) as *mut u8 as usize;
    registry().binaries.insert(handle, binary);
    Ok(handle as *mut c_void)
}

/// How many kernels rtRegisterAllKernel registered for `bin` (one per kernel symbol).
pub(crate) fn kernel_count(bin: *mut c_void) -> usize {
    registry()
        .binaries
        .get(&(bin as usize))
        .filter(|b| b.all_kernels)
        .map_or(0, |b| b.symbols.len())
}

/// rtFunctionRegister: `stub` (a host symbol of the application) now launches the kernel named
/// `name` (the device function name, `kernelInfoExt`: RT `Runtime::KernelRegister`); without
/// one, the binary's first kernel symbol (RT: "historical" case), or else `stub_name`. Returns
/// the kernel's name.
pub(crate) fn register_stub(
    bin: *mut c_void,
    stub: *const c_void,
    name: Option<&str>,
    stub_name: &str,
) -> Result<&'static Func, i32> {
    if stub.is_null() {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    let mut r = registry();
    let b = r
        .binaries
        .get_mut(&(bin as usize))
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)?;
    let name = match name.filter(|n| !n.is_empty()) {
        Some(n) => n.to_string(),
        None => b
            .symbols
            .first()
            .cloned()
            .unwrap_or_else(|| stub_name.to_string()),
    };
    if name.is_empty() {
        return Err(abi::ACL_ERROR_RT_PARAM_INVALID);
    }
    let f = new_func(&name, engine_of(b.magic), stub as u64);
    b.funcs.push(f);
    b.named.entry(name).or_insert(f);
    r.stubs.insert(stub as usize, f);
    Ok(f)
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
    let f = r
        .binaries
        .get_mut(&(bin as usize))
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)?
        .kernel_named(name);
    Ok(handle_for(&mut r, f))
}

/// rtsFuncGetByEntry: the handle of the kernel of `bin` whose function entry (tiling key) is
/// `entry`; a binary without such a kernel symbol: ACL_ERROR_RT_PARAM_INVALID.
pub(crate) fn function_by_entry(bin: *mut c_void, entry: u64) -> Result<*mut c_void, i32> {
    let mut r = registry();
    let f = r
        .binaries
        .get_mut(&(bin as usize))
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)?
        .by_entry(entry)
        .ok_or(abi::ACL_ERROR_RT_PARAM_INVALID)?;
    Ok(handle_for(&mut r, f))
}

/// The rtFuncHandle of `f`, handed out on first use.
fn handle_for(r: &mut Registry, f: &'static Func) -> *mut c_void {
    let key = f as *const Func as usize;
    if let Some(&h) = r.handle_of.get(&key) {
        return h as *mut c_void;
    }
    let h = if wrapped_handles() {
        let wrapper = Box::leak(Box::new(InnerObject {
            magic: FUNC_MAGIC,
            object: f,
        }));
        wrapper as *const InnerObject as usize
    } else {
        key
    };
    r.handles.insert(h, f);
    r.handle_of.insert(key, h);
    h as *mut c_void
}

pub(crate) fn by_handle(h: *mut c_void) -> Result<&'static Func, i32> {
    registry()
        .handles
        .get(&(h as usize))
        .copied()
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)
}

/// rtKernelLaunchWithHandle*: tiling key `k` selects the kernel symbol whose name ends in
/// `_<k>` (the first one; key 0 also names symbols without such digits). On a binary of
/// rtRegisterAllKernel there must be one (else ACL_ERROR_RT_INVALID_HANDLE); on others, `k`
/// then selects the k-th function registered on `bin`, and a key past the end launches a
/// kernel named `tiling_key_<k>`.
pub(crate) fn by_tiling_key(bin: *mut c_void, key: u64) -> Result<&'static Func, i32> {
    let mut r = registry();
    let b = r
        .binaries
        .get_mut(&(bin as usize))
        .ok_or(abi::ACL_ERROR_RT_INVALID_HANDLE)?;
    if let Some(f) = b.by_entry(key) {
        return Ok(f);
    }
    if b.all_kernels {
        return Err(abi::ACL_ERROR_RT_INVALID_HANDLE);
    }
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
        .entry((engine::AICPU, name.to_string()))
        .or_insert_with(|| new_func(name, engine::AICPU, 0));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(f: &Func) -> String {
        // SAFETY: every Func name is a valid C string.
        unsafe { std::ffi::CStr::from_ptr(f.name.ptr) }
            .to_string_lossy()
            .into_owned()
    }

    fn load(blob: &[u8], all_kernels: bool) -> Result<*mut c_void, i32> {
        let magic = abi::RT_DEV_BINARY_MAGIC_ELF;
        load_binary(magic, blob.as_ptr().cast(), blob.len() as u64, all_kernels)
    }

    #[test]
    fn all_kernels_one_per_symbol_found_by_tiling_key_and_entry() {
        let blob = crate::elf::test_object(&[
            ("MatMulV2_1001", 0x12, 0),
            ("MatMulV2_1002", 0x12, 0),
            ("AddCustom", 0x12, 0),
            ("Other_1002", 0x12, 0),
        ]);
        let h = load(&blob, true).expect("rtRegisterAllKernel");
        assert_eq!(kernel_count(h), 4);
        let f = by_tiling_key(h, 1002).expect("key 1002");
        assert_eq!(name(f), "MatMulV2_1002");
        assert_eq!(name(by_tiling_key(h, 0).expect("key 0")), "AddCustom");
        assert!(matches!(
            by_tiling_key(h, 7),
            Err(abi::ACL_ERROR_RT_INVALID_HANDLE)
        ));
        // rtsFuncGetByEntry and rtBinaryGetFunctionByName reach the same kernel, one handle.
        let fh = function_by_entry(h, 1002).expect("entry 1002");
        assert!(std::ptr::eq(by_handle(fh).expect("handle"), f));
        assert_eq!(function_by_name(h, "MatMulV2_1002"), Ok(fh));
        assert_eq!(function_by_entry(h, 1002), Ok(fh));
        assert_eq!(
            function_by_entry(h, 5),
            Err(abi::ACL_ERROR_RT_PARAM_INVALID)
        );
    }

    #[test]
    fn other_loaders_find_elf_kernels_then_fall_back_to_registration_order() {
        let blob = crate::elf::test_object(&[("Add_0a1b_2", 0x12, 0)]);
        let b = load(&blob, false).expect("rtBinaryLoad");
        assert_eq!(kernel_count(b), 0);
        let fh = function_by_entry(b, 2).expect("entry 2");
        let f = by_tiling_key(b, 2).expect("key 2");
        assert!(std::ptr::eq(by_handle(fh).expect("handle"), f));
        assert_eq!(name(f), "Add_0a1b_2");
        // A key no symbol carries: the k-th function registered by name, else tiling_key_<k>.
        let g = function_by_name(b, "gelu_fwd").expect("by name");
        assert!(std::ptr::eq(
            by_tiling_key(b, 0).expect("key 0"),
            by_handle(g).expect("handle")
        ));
        assert_eq!(name(by_tiling_key(b, 5).expect("key 5")), "tiling_key_5");
    }

    #[test]
    fn blobs_without_kernel_symbols() {
        let junk = [
            0x7fu8, b'E', b'L', b'F', 2, 1, 1, 0, b'a', b'i', b'c', 0, 0, 0, 0, 0,
        ];
        assert_eq!(load(&junk, true), Err(abi::ACL_ERROR_RT_PARAM_INVALID));
        let b = load(&junk, false).expect("any blob loads");
        assert_eq!(
            function_by_entry(b, 0),
            Err(abi::ACL_ERROR_RT_PARAM_INVALID)
        );
        assert_eq!(name(by_tiling_key(b, 3).expect("key 3")), "tiling_key_3");
    }
}
