//! The aclnn argument objects (`include/nnopbase/aclnn/acl_meta.h`): aclTensor, aclScalar,
//! aclIntArray, aclFloatArray, aclBoolArray, aclTensorList and aclScalarList. A handle is the
//! address of an object this library owns; it is only ever looked up in the registry, never
//! dereferenced, so a stale or forged handle is an error, not a crash.
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{LazyLock, Mutex, MutexGuard};

use npu_sim_common::trace::api;
use npu_sim_opdev::dtype;
use npu_sim_opdev::status::{ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS};

use crate::LIB;

/// More dimensions than any tensor has (nnopbase's vectors hold 25 inline).
const MAX_DIMS: u64 = 64;
/// Arrays and lists longer than this are refused.
const MAX_ELEMS: u64 = 1 << 20;

pub(crate) struct Tensor {
    pub view: Vec<i64>,
    pub strides: Vec<i64>,
    pub offset: i64,
    /// Kept as nnopbase keeps it; the simulator's kernels never read it.
    #[allow(dead_code)]
    pub storage: Vec<i64>,
    pub dtype: i32,
    pub format: i32,
    pub data: u64,
}

impl Tensor {
    pub(crate) fn numel(&self) -> u64 {
        self.view
            .iter()
            .map(|d| u64::try_from(*d).unwrap_or(0))
            .fold(1u64, u64::saturating_mul)
    }

    /// Whether the strides are the row-major strides of the view.
    pub(crate) fn contiguous(&self) -> bool {
        let mut expect = 1i64;
        for (d, s) in self.view.iter().zip(&self.strides).rev() {
            if *d != 1 && *s != expect {
                return false;
            }
            expect = expect.saturating_mul(*d);
        }
        true
    }
}

fn row_major(view: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; view.len()];
    for i in (0..view.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(view[i + 1]);
    }
    s
}

pub(crate) enum Object {
    Tensor(Tensor),
    /// The value (kept as nnopbase keeps it; the simulator's kernels never read it).
    #[allow(dead_code)]
    Scalar {
        dtype: i32,
        bytes: [u8; 16],
    },
    IntArray(Vec<i64>),
    FloatArray(Vec<f32>),
    BoolArray(Vec<bool>),
    /// Handles of the tensors it owns.
    TensorList(Vec<usize>),
    /// Handles of the scalars it owns.
    ScalarList(Vec<usize>),
}

pub(crate) type Registry = HashMap<usize, Box<Object>>;

pub(crate) fn registry() -> MutexGuard<'static, Registry> {
    static R: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);
    R.lock().unwrap_or_else(|e| e.into_inner())
}

fn add(o: Object) -> *mut c_void {
    let b = Box::new(o);
    let h = &*b as *const Object as usize;
    registry().insert(h, b);
    h as *mut c_void
}

/// Removes `h` if it is an object `is_kind` accepts (and what a list owns).
fn destroy(h: *const c_void, is_kind: fn(&Object) -> bool) -> i32 {
    if h.is_null() {
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    let mut r = registry();
    if !r.get(&(h as usize)).is_some_and(|o| is_kind(o)) {
        return ACLNN_ERR_PARAM_INVALID;
    }
    if let Some(o) = r.remove(&(h as usize))
        && let Object::TensorList(owned) | Object::ScalarList(owned) = *o
    {
        for t in owned {
            r.remove(&t);
        }
    }
    ACLNN_SUCCESS
}

/// `n` values at `p` (NULL only when `n` is 0).
// SAFETY: unsafe because callers must pass NULL or `n` readable values at `p`.
unsafe fn slice<'a, T>(p: *const T, n: u64, max: u64) -> Option<&'a [T]> {
    if n > max {
        return None;
    }
    if n == 0 {
        return Some(&[]);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: `n` readable values at `p`.
    Some(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

// SAFETY: the C caller's contract: each array is NULL or holds its count of values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclCreateTensor(
    viewDims: *const i64,
    viewDimsNum: u64,
    dataType: i32,
    stride: *const i64,
    offset: i64,
    format: i32,
    storageDims: *const i64,
    storageDimsNum: u64,
    tensorData: *mut c_void,
) -> *mut c_void {
    api(
        LIB,
        "aclCreateTensor",
        || {
            // SAFETY: the caller's contract for each array and its count.
            let (Some(view), Some(storage)) =
                (unsafe { slice(viewDims, viewDimsNum, MAX_DIMS) }, unsafe {
                    slice(storageDims, storageDimsNum, MAX_DIMS)
                })
            else {
                return std::ptr::null_mut();
            };
            let strides = if stride.is_null() {
                row_major(view)
            } else {
                // SAFETY: a non-null stride array has one entry per view dimension.
                unsafe { std::slice::from_raw_parts(stride, view.len()) }.to_vec()
            };
            add(Object::Tensor(Tensor {
                view: view.to_vec(),
                strides,
                offset,
                storage: storage.to_vec(),
                dtype: dataType,
                format,
                data: tensorData as u64,
            }))
        },
        |a| {
            a.u64("viewDims", viewDims as u64)
                .u64("viewDimsNum", viewDimsNum)
                .i64("dataType", dataType.into());
            a.u64("stride", stride as u64)
                .i64("offset", offset)
                .i64("format", format.into());
            a.u64("storageDims", storageDims as u64)
                .u64("storageDimsNum", storageDimsNum)
                .u64("tensorData", tensorData as u64);
        },
    )
}

// SAFETY: the C caller's contract: `value` is NULL or points to one value of `dataType`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclCreateScalar(value: *mut c_void, dataType: i32) -> *mut c_void {
    api(
        LIB,
        "aclCreateScalar",
        || {
            if value.is_null() {
                return std::ptr::null_mut();
            }
            let mut bytes = [0u8; 16];
            let n = dtype::size_of(dataType) as usize;
            // SAFETY: `value` points to one value of `dataType`, of `n` <= 16 bytes.
            unsafe { std::ptr::copy_nonoverlapping(value.cast::<u8>(), bytes.as_mut_ptr(), n) };
            add(Object::Scalar {
                dtype: dataType,
                bytes,
            })
        },
        |a| {
            a.u64("value", value as u64)
                .i64("dataType", dataType.into());
        },
    )
}

// SAFETY: the C caller's contract: `value` is NULL or holds `size` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclCreateIntArray(value: *const i64, size: u64) -> *mut c_void {
    api(
        LIB,
        "aclCreateIntArray",
        // SAFETY: the caller's contract for `value` and `size`.
        || match unsafe { slice(value, size, MAX_ELEMS) } {
            Some(v) => add(Object::IntArray(v.to_vec())),
            None => std::ptr::null_mut(),
        },
        |a| {
            a.u64("value", value as u64).u64("size", size);
        },
    )
}

// SAFETY: the C caller's contract: `value` is NULL or holds `size` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclCreateFloatArray(value: *const f32, size: u64) -> *mut c_void {
    api(
        LIB,
        "aclCreateFloatArray",
        // SAFETY: the caller's contract for `value` and `size`.
        || match unsafe { slice(value, size, MAX_ELEMS) } {
            Some(v) => add(Object::FloatArray(v.to_vec())),
            None => std::ptr::null_mut(),
        },
        |a| {
            a.u64("value", value as u64).u64("size", size);
        },
    )
}

// SAFETY: the C caller's contract: `value` is NULL or holds `size` C bools.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclCreateBoolArray(value: *const u8, size: u64) -> *mut c_void {
    api(
        LIB,
        "aclCreateBoolArray",
        // SAFETY: the caller's contract for `value` and `size`.
        || match unsafe { slice(value, size, MAX_ELEMS) } {
            Some(v) => add(Object::BoolArray(v.iter().map(|b| *b != 0).collect())),
            None => std::ptr::null_mut(),
        },
        |a| {
            a.u64("value", value as u64).u64("size", size);
        },
    )
}

/// A list owning `size` existing objects of one kind.
// SAFETY: unsafe because callers must pass NULL or `size` readable handles at `value`.
unsafe fn create_list(
    value: *const *const c_void,
    size: u64,
    is_kind: fn(&Object) -> bool,
    make: fn(Vec<usize>) -> Object,
) -> *mut c_void {
    // SAFETY: the caller's contract for `value` and `size`.
    let Some(v) = (unsafe { slice(value, size, MAX_ELEMS) }) else {
        return std::ptr::null_mut();
    };
    let handles: Vec<usize> = v.iter().map(|h| *h as usize).collect();
    let known = {
        let r = registry();
        handles.iter().all(|h| r.get(h).is_some_and(|o| is_kind(o)))
    };
    if known {
        add(make(handles))
    } else {
        std::ptr::null_mut()
    }
}

fn is_tensor(o: &Object) -> bool {
    matches!(o, Object::Tensor(_))
}
fn is_scalar(o: &Object) -> bool {
    matches!(o, Object::Scalar { .. })
}

// SAFETY: the C caller's contract: `value` is NULL or holds `size` tensor handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclCreateTensorList(
    value: *const *const c_void,
    size: u64,
) -> *mut c_void {
    api(
        LIB,
        "aclCreateTensorList",
        // SAFETY: forwarded caller contract.
        || unsafe { create_list(value, size, is_tensor, Object::TensorList) },
        |a| {
            a.u64("value", value as u64).u64("size", size);
        },
    )
}

// SAFETY: the C caller's contract: `value` is NULL or holds `size` scalar handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclCreateScalarList(
    value: *const *const c_void,
    size: u64,
) -> *mut c_void {
    api(
        LIB,
        "aclCreateScalarList",
        // SAFETY: forwarded caller contract.
        || unsafe { create_list(value, size, is_scalar, Object::ScalarList) },
        |a| {
            a.u64("value", value as u64).u64("size", size);
        },
    )
}

macro_rules! destroyer {
    ($name:ident, $arg:ident, $pat:pat) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($arg: *const c_void) -> i32 {
            api(
                LIB,
                stringify!($name),
                || destroy($arg, |o| matches!(o, $pat)),
                |a| {
                    a.u64(stringify!($arg), $arg as u64);
                },
            )
        }
    };
}

destroyer!(aclDestroyTensor, tensor, Object::Tensor(_));
destroyer!(aclDestroyScalar, scalar, Object::Scalar { .. });
destroyer!(aclDestroyIntArray, array, Object::IntArray(_));
destroyer!(aclDestroyFloatArray, array, Object::FloatArray(_));
destroyer!(aclDestroyBoolArray, array, Object::BoolArray(_));
destroyer!(aclDestroyTensorList, array, Object::TensorList(_));
destroyer!(aclDestroyScalarList, array, Object::ScalarList(_));

/// Runs `f` on tensor `t` and writes its result to `out`.
// SAFETY: unsafe because callers must pass NULL or a writable `out`.
unsafe fn get_tensor<T>(t: *const c_void, out: *mut T, f: fn(&Tensor) -> T) -> i32 {
    if t.is_null() || out.is_null() {
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    let r = registry();
    let Some(Object::Tensor(tensor)) = r.get(&(t as usize)).map(|b| &**b) else {
        return ACLNN_ERR_PARAM_INVALID;
    };
    // SAFETY: non-null out-parameter of the caller.
    unsafe { out.write(f(tensor)) };
    ACLNN_SUCCESS
}

/// Writes the element count of object `h` to `out`.
// SAFETY: unsafe because callers must pass NULL or a writable `out`.
unsafe fn get_size(h: *const c_void, out: *mut u64, f: fn(&Object) -> Option<usize>) -> i32 {
    if h.is_null() || out.is_null() {
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    let r = registry();
    let Some(n) = r.get(&(h as usize)).and_then(|o| f(o)) else {
        return ACLNN_ERR_PARAM_INVALID;
    };
    // SAFETY: non-null out-parameter of the caller.
    unsafe { out.write(n as u64) };
    ACLNN_SUCCESS
}

macro_rules! getter {
    ($name:ident, $obj:ident, $out:ident: $t:ty, $how:expr, $call:ident) => {
        // SAFETY: the C caller's contract: the out-parameter is NULL or writable.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($obj: *const c_void, $out: *mut $t) -> i32 {
            api(
                LIB,
                stringify!($name),
                // SAFETY: forwarded caller contract.
                || unsafe { $call($obj, $out, $how) },
                |a| {
                    a.u64(stringify!($obj), $obj as u64)
                        .u64(stringify!($out), $out as u64);
                },
            )
        }
    };
}

getter!(aclGetViewOffset, tensor, offset: i64, |t| t.offset, get_tensor);
getter!(aclGetFormat, tensor, format: i32, |t| t.format, get_tensor);
getter!(aclGetDataType, tensor, dataType: i32, |t| t.dtype, get_tensor);
getter!(aclGetRawTensorAddr, tensor, addr: u64, |t| t.data, get_tensor);
getter!(aclGetIntArraySize, array, size: u64, |o| match o {
    Object::IntArray(v) => Some(v.len()),
    _ => None,
}, get_size);
getter!(aclGetFloatArraySize, array, size: u64, |o| match o {
    Object::FloatArray(v) => Some(v.len()),
    _ => None,
}, get_size);
getter!(aclGetBoolArraySize, array, size: u64, |o| match o {
    Object::BoolArray(v) => Some(v.len()),
    _ => None,
}, get_size);
getter!(aclGetTensorListSize, tensorList, size: u64, |o| match o {
    Object::TensorList(v) => Some(v.len()),
    _ => None,
}, get_size);
getter!(aclGetScalarListSize, scalarList, size: u64, |o| match o {
    Object::ScalarList(v) => Some(v.len()),
    _ => None,
}, get_size);

/// Sets the device address of tensor `t`.
pub(crate) fn set_tensor_addr(t: *const c_void, addr: *mut c_void) -> i32 {
    if t.is_null() {
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    match registry().get_mut(&(t as usize)).map(|b| &mut **b) {
        Some(Object::Tensor(tensor)) => {
            tensor.data = addr as u64;
            ACLNN_SUCCESS
        }
        _ => ACLNN_ERR_PARAM_INVALID,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn aclSetRawTensorAddr(tensor: *mut c_void, addr: *mut c_void) -> i32 {
    api(
        LIB,
        "aclSetRawTensorAddr",
        || set_tensor_addr(tensor, addr),
        |a| {
            a.u64("tensor", tensor as u64).u64("addr", addr as u64);
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity() {
        let t = |view: Vec<i64>, strides: Vec<i64>| Tensor {
            view,
            strides,
            offset: 0,
            storage: vec![],
            dtype: 0,
            format: 2,
            data: 0,
        };
        assert!(t(vec![2, 3], vec![3, 1]).contiguous());
        assert!(!t(vec![2, 3], vec![1, 2]).contiguous());
        assert!(t(vec![1, 3], vec![7, 1]).contiguous());
        assert_eq!(row_major(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(t(vec![2, 3], vec![3, 1]).numel(), 6);
        assert_eq!(t(vec![2, -1], vec![3, 1]).numel(), 0);
    }
}
