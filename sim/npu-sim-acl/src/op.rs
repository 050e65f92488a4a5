//! What an `aclop` call is described with (`acl_base.h`, `acl_op.h`; CANN ships them in
//! libascendcl.so): tensor descriptions, data buffers and operator attributes. Handles are
//! looked up in a registry, never dereferenced. `libacl_op_compiler.so` reads them through the
//! `npu_sim_acl_*` internal calls (in CANN it shares the C++ types), which are never recorded.
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
use std::sync::{LazyLock, Mutex, MutexGuard};

use npu_sim_common::abi;
use npu_sim_common::trace::api;

use crate::LIB;

/// More dimensions than any description has.
const MAX_DIMS: usize = 64;

enum Object {
    TensorDesc {
        dtype: i32,
        format: i32,
        dims: Vec<i64>,
    },
    DataBuffer {
        data: u64,
        size: u64,
    },
    Attr(Vec<(String, String)>),
}

fn registry() -> MutexGuard<'static, HashMap<usize, Box<Object>>> {
    static R: LazyLock<Mutex<HashMap<usize, Box<Object>>>> = LazyLock::new(Mutex::default);
    R.lock().unwrap_or_else(|e| e.into_inner())
}

fn add(o: Object) -> *mut c_void {
    let b = Box::new(o);
    let h = &*b as *const Object as usize;
    registry().insert(h, b);
    h as *mut c_void
}

fn remove(h: *const c_void, is_kind: fn(&Object) -> bool) -> bool {
    let mut r = registry();
    if r.get(&(h as usize)).is_some_and(|o| is_kind(o)) {
        r.remove(&(h as usize));
        true
    } else {
        false
    }
}

// SAFETY: the C caller's contract: `dims` is NULL or holds `numDims` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclCreateTensorDesc(
    dataType: i32,
    numDims: i32,
    dims: *const i64,
    format: i32,
) -> *mut c_void {
    api(
        LIB,
        "aclCreateTensorDesc",
        || {
            // A negative count is an unknown rank (no dimensions known).
            let n = usize::try_from(numDims).unwrap_or(0);
            if n > MAX_DIMS || (n > 0 && dims.is_null()) {
                return std::ptr::null_mut();
            }
            let dims = if n == 0 {
                Vec::new()
            } else {
                // SAFETY: the caller's contract: `numDims` values at `dims`.
                unsafe { std::slice::from_raw_parts(dims, n) }.to_vec()
            };
            add(Object::TensorDesc {
                dtype: dataType,
                format,
                dims,
            })
        },
        |a| {
            a.i64("dataType", dataType.into())
                .i64("numDims", numDims.into())
                .u64("dims", dims as u64)
                .i64("format", format.into());
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclDestroyTensorDesc(desc: *const c_void) {
    api(
        LIB,
        "aclDestroyTensorDesc",
        || {
            remove(desc, |o| matches!(o, Object::TensorDesc { .. }));
        },
        |a| {
            a.u64("desc", desc as u64);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclCreateDataBuffer(data: *mut c_void, size: usize) -> *mut c_void {
    api(
        LIB,
        "aclCreateDataBuffer",
        || {
            add(Object::DataBuffer {
                data: data as u64,
                size: size as u64,
            })
        },
        |a| {
            a.u64("data", data as u64).u64("size", size as u64);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclDestroyDataBuffer(dataBuffer: *const c_void) -> i32 {
    api(
        LIB,
        "aclDestroyDataBuffer",
        || {
            if remove(dataBuffer, |o| matches!(o, Object::DataBuffer { .. })) {
                abi::ACL_SUCCESS
            } else {
                abi::ACL_ERROR_INVALID_PARAM
            }
        },
        |a| {
            a.u64("dataBuffer", dataBuffer as u64);
        },
    )
}

fn data_buffer(h: *const c_void) -> Option<(u64, u64)> {
    match registry().get(&(h as usize)).map(|b| &**b) {
        Some(Object::DataBuffer { data, size }) => Some((*data, *size)),
        _ => None,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn aclGetDataBufferAddr(dataBuffer: *const c_void) -> *mut c_void {
    api(
        LIB,
        "aclGetDataBufferAddr",
        || data_buffer(dataBuffer).map_or(std::ptr::null_mut(), |(d, _)| d as *mut c_void),
        |a| {
            a.u64("dataBuffer", dataBuffer as u64);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclGetDataBufferSizeV2(dataBuffer: *const c_void) -> u64 {
    api(
        LIB,
        "aclGetDataBufferSizeV2",
        || data_buffer(dataBuffer).map_or(0, |(_, s)| s),
        |a| {
            a.u64("dataBuffer", dataBuffer as u64);
        },
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclopCreateAttr() -> *mut c_void {
    api(
        LIB,
        "aclopCreateAttr",
        || add(Object::Attr(Vec::new())),
        |_| {},
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn aclopDestroyAttr(attr: *const c_void) {
    api(
        LIB,
        "aclopDestroyAttr",
        || {
            remove(attr, |o| matches!(o, Object::Attr(_)));
        },
        |a| {
            a.u64("attr", attr as u64);
        },
    )
}

/// Sets attribute `name` of `attr` to `value` (its text form).
// SAFETY: unsafe because callers must pass NULL or a NUL-terminated `name`.
unsafe fn set_attr(attr: *mut c_void, name: *const c_char, value: String) -> i32 {
    if attr.is_null() || name.is_null() {
        return abi::ACL_ERROR_INVALID_PARAM;
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    let name = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    match registry().get_mut(&(attr as usize)).map(|b| &mut **b) {
        Some(Object::Attr(v)) => {
            match v.iter_mut().find(|(n, _)| *n == name) {
                Some(e) => e.1 = value,
                None => v.push((name, value)),
            }
            abi::ACL_SUCCESS
        }
        _ => abi::ACL_ERROR_INVALID_PARAM,
    }
}

macro_rules! attr_setter {
    ($name:ident, $t:ty, $text:expr, $rec:ident) => {
        // SAFETY: the C caller's contract: `attrName` is NULL or NUL-terminated.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            attr: *mut c_void,
            attrName: *const c_char,
            attrValue: $t,
        ) -> i32 {
            api(
                LIB,
                stringify!($name),
                // SAFETY: forwarded caller contract for `attrName`.
                || unsafe { set_attr(attr, attrName, $text(attrValue)) },
                |a| {
                    a.u64("attr", attr as u64);
                    // SAFETY: NULL or a NUL-terminated string, per the prototype.
                    unsafe { a.cstr("attrName", attrName) };
                    a.$rec("attrValue", attrValue.into());
                },
            )
        }
    };
}

attr_setter!(aclopSetAttrBool, u8, |v: u8| (v != 0).to_string(), u64);
attr_setter!(aclopSetAttrInt, i64, |v: i64| v.to_string(), i64);
attr_setter!(aclopSetAttrFloat, f32, |v: f32| v.to_string(), f64);

// SAFETY: the C caller's contract: `attrName` and `attrValue` are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclopSetAttrString(
    attr: *mut c_void,
    attrName: *const c_char,
    attrValue: *const c_char,
) -> i32 {
    api(
        LIB,
        "aclopSetAttrString",
        || {
            if attrValue.is_null() {
                return abi::ACL_ERROR_INVALID_PARAM;
            }
            // SAFETY: non-null and NUL-terminated by the caller's contract.
            let v = unsafe { CStr::from_ptr(attrValue) }
                .to_string_lossy()
                .into_owned();
            // SAFETY: forwarded caller contract for `attrName`.
            unsafe { set_attr(attr, attrName, v) }
        },
        |a| {
            a.u64("attr", attr as u64);
            // SAFETY: NULL or NUL-terminated strings, per the prototype.
            unsafe {
                a.cstr("attrName", attrName).cstr("attrValue", attrValue);
            }
        },
    )
}

/// The data type, format and element count of tensor description `desc`; non-zero if it is
/// not one. Not a CANN API.
// SAFETY: the C caller's contract: the out-pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_sim_acl_tensor_desc(
    desc: *const c_void,
    dtype: *mut i32,
    format: *mut i32,
    numel: *mut u64,
) -> i32 {
    let r = registry();
    let Some(Object::TensorDesc {
        dtype: d,
        format: f,
        dims,
    }) = r.get(&(desc as usize)).map(|b| &**b)
    else {
        return abi::ACL_ERROR_INVALID_PARAM;
    };
    if dtype.is_null() || format.is_null() || numel.is_null() {
        return abi::ACL_ERROR_INVALID_PARAM;
    }
    let n = dims
        .iter()
        .map(|d| u64::try_from(*d).unwrap_or(0))
        .fold(1u64, u64::saturating_mul);
    // SAFETY: non-null out-pointers of the caller.
    unsafe {
        dtype.write(*d);
        format.write(*f);
        numel.write(n);
    }
    abi::ACL_SUCCESS
}

/// The device address of data buffer `buf`; non-zero if it is not one. Not a CANN API.
// SAFETY: the C caller's contract: `addr` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_sim_acl_data_buffer(buf: *const c_void, addr: *mut u64) -> i32 {
    match data_buffer(buf) {
        Some((d, _)) if !addr.is_null() => {
            // SAFETY: non-null out-pointer of the caller.
            unsafe { addr.write(d) };
            abi::ACL_SUCCESS
        }
        _ => abi::ACL_ERROR_INVALID_PARAM,
    }
}

/// Whether `attr` is an operator attribute set. Not a CANN API.
#[unsafe(no_mangle)]
pub extern "C" fn npu_sim_acl_is_attr(attr: *const c_void) -> bool {
    matches!(
        registry().get(&(attr as usize)).map(|b| &**b),
        Some(Object::Attr(_))
    )
}
