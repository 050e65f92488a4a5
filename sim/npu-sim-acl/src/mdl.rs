//! `aclmdl*`: graph (model) loading and execution. Real ACL hands an offline model to GE, which
//! builds the model's tasks on streams bound to a runtime model and loads them; the simulator
//! reads a model blob of its own format and does the same through libruntime's exports
//! (`rtModelCreate`, `rtStreamCreate`, `rtModelBindStream`, the launches and copies, which the
//! runtime captures, `rtModelLoadComplete`), so the nested calls and the bulk
//! `halStreamTaskFill` appear under `aclmdlLoadFromMem`.
//!
//! Blob format (little-endian): "NPUSIMG1", u32 version = 1, u32 task count, then 64 bytes per
//! task: u32 op (1 kernel, 2 memcpy), u32 blockDim (kernel) or rtMemcpyKind_t (memcpy), u64
//! src, u64 dst, u64 bytes (memcpy), 32 bytes NUL-terminated kernel name (kernel). Addresses
//! are fixed in the blob; input and output datasets are not used.
use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::sync::{LazyLock, Mutex, MutexGuard};

use npu_sim_common::abi::{self, RT_DEV_BINARY_MAGIC_ELF, RtArgsEx, RtDevBinary};

use crate::rt;

pub(crate) const MAGIC: &[u8; 8] = b"NPUSIMG1";
const HEADER: usize = 16;
const ENTRY: usize = 64;
const OP_KERNEL: u32 = 1;
const OP_MEMCPY: u32 = 2;

/// A loaded model: its runtime handle and the stream bound to it.
#[derive(Clone, Copy)]
pub(crate) struct Loaded {
    pub model: usize,
    pub stream: usize,
}

fn loaded() -> MutexGuard<'static, HashMap<u32, Loaded>> {
    static M: LazyLock<Mutex<HashMap<u32, Loaded>>> = LazyLock::new(Mutex::default);
    M.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn find(id: u32) -> Option<Loaded> {
    loaded().get(&id).copied()
}

pub(crate) fn remove(id: u32) -> Option<Loaded> {
    loaded().remove(&id)
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// One task of a blob.
enum Entry {
    Kernel {
        name: CString,
        block_dim: u32,
    },
    Memcpy {
        src: u64,
        dst: u64,
        bytes: u64,
        kind: u32,
    },
}

fn parse(blob: &[u8]) -> Option<Vec<Entry>> {
    if blob.get(..8)? != MAGIC || u32_at(blob, 8)? != 1 {
        return None;
    }
    let count = u32_at(blob, 12)? as usize;
    let mut out = Vec::with_capacity(count.min(4096));
    for i in 0..count {
        let e = blob.get(HEADER + i * ENTRY..HEADER + (i + 1) * ENTRY)?;
        match u32_at(e, 0)? {
            OP_KERNEL => {
                let raw = &e[32..64];
                let end = raw.iter().position(|&b| b == 0)?;
                if end == 0 {
                    return None;
                }
                out.push(Entry::Kernel {
                    name: CString::new(&raw[..end]).ok()?,
                    block_dim: u32_at(e, 4)?,
                });
            }
            OP_MEMCPY => out.push(Entry::Memcpy {
                kind: u32_at(e, 4)?,
                src: u64_at(e, 8)?,
                dst: u64_at(e, 16)?,
                bytes: u64_at(e, 24)?,
            }),
            _ => return None,
        }
    }
    Some(out)
}

/// Loads `blob`; returns the model id. Errors are ACL/rt codes.
pub(crate) fn load(blob: &[u8]) -> Result<u32, i32> {
    let entries = parse(blob).ok_or(abi::ACL_ERROR_INVALID_PARAM)?;
    let r = rt::Rt::get();
    let ok = |rc: i32| if rc == 0 { Ok(()) } else { Err(rc) };
    let mut model: *mut c_void = std::ptr::null_mut();
    let mut stream: *mut c_void = std::ptr::null_mut();
    // SAFETY: (whole block) libruntime calls with valid out-pointers, handles it returned, and
    // C strings that outlive the calls.
    unsafe {
        ok((r.rtModelCreate)(&mut model, 0))?;
        ok((r.rtStreamCreate)(&mut stream, 0))?;
        ok((r.rtModelBindStream)(model, stream, 0))?;
        let mut bin_handle: *mut c_void = std::ptr::null_mut();
        let bin = RtDevBinary {
            magic: RT_DEV_BINARY_MAGIC_ELF,
            version: 0,
            data: blob.as_ptr().cast(),
            length: blob.len() as u64,
        };
        ok((r.rtBinaryLoad)(&bin, &mut bin_handle))?;
        for e in &entries {
            match e {
                Entry::Kernel { name, block_dim } => {
                    let mut f: *mut c_void = std::ptr::null_mut();
                    ok((r.rtBinaryGetFunctionByName)(
                        bin_handle,
                        name.as_ptr(),
                        &mut f,
                    ))?;
                    let args = RtArgsEx {
                        args: std::ptr::null_mut(),
                        host_input_info_ptr: std::ptr::null_mut(),
                        args_size: 0,
                        tiling_addr_offset: 0,
                        tiling_data_offset: 0,
                        host_input_info_num: 0,
                        has_tiling: 0,
                        is_no_need_h2d_copy: 0,
                        reserved: [0; 4],
                    };
                    ok((r.rtLaunchKernelByFuncHandleV3)(
                        f,
                        *block_dim,
                        &args,
                        stream,
                        std::ptr::null(),
                    ))?;
                }
                Entry::Memcpy {
                    src,
                    dst,
                    bytes,
                    kind,
                } => ok((r.rtMemcpyAsync)(
                    *dst as *mut c_void,
                    *bytes,
                    *src as *const c_void,
                    *bytes,
                    *kind,
                    stream,
                ))?,
            }
        }
        ok((r.rtModelLoadComplete)(model))?;
        let mut id = 0u32;
        ok((r.rtModelGetId)(model, &mut id))?;
        loaded().insert(
            id,
            Loaded {
                model: model as usize,
                stream: stream as usize,
            },
        );
        Ok(id)
    }
}
