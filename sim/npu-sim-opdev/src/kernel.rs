//! Operator kernels: their names, tiling keys, and the device binaries that hold them.
//!
//! An operator's kernel binary is an ELF object with one function symbol per tiling key, named
//! `<OpType>_<hash>_<tilingKey>`: the runtime registers one kernel per symbol and finds a kernel
//! by its function entry, the trailing number (hicann/runtime `rts_kernel.h`, `rtsFuncGetByEntry`:
//! "E.g., kernel_foo_123, `123` is the function entry"). `<hash>` stands for the 32 hex digits
//! real op kernels carry after the op type; here it is derived from the op type alone.

/// Where an operator's kernels run.
pub mod engine {
    /// AI Vector cores (`ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE`).
    pub const VECTOR: u8 = 0;
    /// AI Cube cores (`ACL_RT_BINARY_MAGIC_ELF_CUBE_CORE`).
    pub const CUBE: u8 = 1;
    /// AI CPU (launched by op type, `rtAicpuKernelLaunchExWithArgs`).
    pub const AICPU: u8 = 2;
    /// AI Core (`ACL_RT_BINARY_MAGIC_ELF_AICORE`): the aclop path's TBE kernels.
    pub const AICORE: u8 = 3;
}

pub const ACL_RT_BINARY_MAGIC_ELF_AICORE: u32 = 0x4355_4245;
pub const ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE: u32 = 0x4141_5246;
pub const ACL_RT_BINARY_MAGIC_ELF_CUBE_CORE: u32 = 0x4149_4343;

/// The binary magic nnopbase passes with `ACL_RT_BINARY_LOAD_OPT_MAGIC` for an engine
/// (hicann/opbase `op_kernel.cpp`, `OpKernelBin::BinLoadImpl`).
pub fn binary_magic(engine: u8) -> u32 {
    match engine {
        engine::VECTOR => ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE,
        engine::CUBE => ACL_RT_BINARY_MAGIC_ELF_CUBE_CORE,
        _ => ACL_RT_BINARY_MAGIC_ELF_AICORE,
    }
}

pub fn engine_name(engine: u8) -> &'static str {
    match engine {
        engine::VECTOR => "AI_VECTOR",
        engine::CUBE => "AI_CUBE",
        engine::AICPU => "AI_CPU",
        _ => "AI_CORE",
    }
}

/// Largest aclDataType value (ACL_FLOAT4_E1M2).
const MAX_DTYPE: u64 = 41;
/// Tiling keys of kernels for tensors of more than this many elements are offset by
/// [`LARGE_KEY_OFFSET`].
pub const LARGE_NUMEL: u64 = 1 << 20;
pub const LARGE_KEY_OFFSET: u64 = 1000;

/// The tiling key a kernel of data type `dtype` (aclDataType; undefined counts as float) over
/// `numel` elements is selected with: `dtype + 1`, plus 1000 for large tensors.
pub fn tiling_key(dtype: i32, numel: u64) -> u64 {
    let d = u64::try_from(dtype).unwrap_or(0).min(MAX_DTYPE);
    d + 1
        + if numel > LARGE_NUMEL {
            LARGE_KEY_OFFSET
        } else {
            0
        }
}

/// Every tiling key an operator binary has a kernel for.
pub fn tiling_keys() -> impl Iterator<Item = u64> {
    (1..=MAX_DTYPE + 1).chain((1..=MAX_DTYPE + 1).map(|k| k + LARGE_KEY_OFFSET))
}

fn fnv1a(seed: u64, s: &str) -> u64 {
    s.bytes().fold(seed, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The name of `op_type`'s kernel for `tiling_key`.
pub fn kernel_symbol(op_type: &str, tiling_key: u64) -> String {
    let a = fnv1a(0xcbf2_9ce4_8422_2325, op_type);
    let b = fnv1a(a ^ 0x9e37_79b9_7f4a_7c15, op_type);
    format!("{op_type}_{a:016x}{b:016x}_{tiling_key}")
}

/// An ELF64 relocatable object with a 4-byte function per tiling key of `op_type`.
pub fn kernel_binary(op_type: &str) -> Vec<u8> {
    elf_object(
        &tiling_keys()
            .map(|k| kernel_symbol(op_type, k))
            .collect::<Vec<_>>(),
    )
}

fn push_u16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn push_u32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn push_u64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn align8(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(8) {
        v.push(0);
    }
}

/// An ELF64 little-endian relocatable object whose `.text` holds one 4-byte function per name.
pub fn elf_object(functions: &[String]) -> Vec<u8> {
    const FUNC_BYTES: u64 = 4;
    let mut strtab = vec![0u8];
    let mut name_offs = Vec::with_capacity(functions.len());
    for f in functions {
        name_offs.push(strtab.len() as u32);
        strtab.extend_from_slice(f.as_bytes());
        strtab.push(0);
    }
    let shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0";
    let (sh_text, sh_symtab, sh_strtab, sh_shstrtab) = (1u32, 7u32, 15u32, 23u32);

    let mut out = vec![0u8; 64];
    let text_off = out.len() as u64;
    let text_size = FUNC_BYTES * functions.len() as u64;
    out.resize(out.len() + text_size as usize, 0);
    let strtab_off = out.len() as u64;
    out.extend_from_slice(&strtab);
    let shstrtab_off = out.len() as u64;
    out.extend_from_slice(shstrtab);
    align8(&mut out);
    let symtab_off = out.len() as u64;
    out.extend_from_slice(&[0u8; 24]);
    for (i, off) in name_offs.iter().enumerate() {
        push_u32(&mut out, *off);
        out.push(0x12); // STB_GLOBAL, STT_FUNC
        out.push(0);
        push_u16(&mut out, 1); // .text
        push_u64(&mut out, FUNC_BYTES * i as u64);
        push_u64(&mut out, FUNC_BYTES);
    }
    let symtab_size = out.len() as u64 - symtab_off;
    align8(&mut out);
    let shoff = out.len() as u64;
    // Section headers: null, .text, .symtab, .strtab, .shstrtab.
    out.extend_from_slice(&[0u8; 64]);
    let mut sh =
        |name: u32, ty: u32, flags: u64, off: u64, size: u64, link: u32, info: u32, ent: u64| {
            push_u32(&mut out, name);
            push_u32(&mut out, ty);
            push_u64(&mut out, flags);
            push_u64(&mut out, 0);
            push_u64(&mut out, off);
            push_u64(&mut out, size);
            push_u32(&mut out, link);
            push_u32(&mut out, info);
            push_u64(&mut out, if ty == 2 { 8 } else { 4 });
            push_u64(&mut out, ent);
        };
    sh(sh_text, 1, 0x6, text_off, text_size, 0, 0, 0);
    sh(sh_symtab, 2, 0, symtab_off, symtab_size, 3, 1, 24);
    sh(sh_strtab, 3, 0, strtab_off, strtab.len() as u64, 0, 0, 0);
    sh(
        sh_shstrtab,
        3,
        0,
        shstrtab_off,
        shstrtab.len() as u64,
        0,
        0,
        0,
    );

    let mut hdr = Vec::with_capacity(64);
    hdr.extend_from_slice(b"\x7fELF\x02\x01\x01\0");
    hdr.extend_from_slice(&[0u8; 8]);
    push_u16(&mut hdr, 1); // ET_REL
    push_u16(&mut hdr, 0); // e_machine: not a published value for the AI Core
    push_u32(&mut hdr, 1);
    push_u64(&mut hdr, 0); // e_entry
    push_u64(&mut hdr, 0); // e_phoff
    push_u64(&mut hdr, shoff);
    push_u32(&mut hdr, 0); // e_flags
    push_u16(&mut hdr, 64); // e_ehsize
    push_u16(&mut hdr, 0);
    push_u16(&mut hdr, 0);
    push_u16(&mut hdr, 64); // e_shentsize
    push_u16(&mut hdr, 5); // e_shnum
    push_u16(&mut hdr, 4); // e_shstrndx
    out[..64].copy_from_slice(&hdr);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys() {
        let n = kernel_symbol("Add", 1);
        assert!(n.starts_with("Add_") && n.ends_with("_1"), "{n}");
        assert_eq!(n.len(), "Add_".len() + 32 + 2);
        assert_eq!(kernel_symbol("Add", 1), n);
        assert_ne!(kernel_symbol("Mul", 1), n);
        assert_eq!(tiling_key(0, 16), 1);
        assert_eq!(tiling_key(27, 1 << 21), 1028);
        assert_eq!(tiling_key(-1, 1), 1);
        assert_eq!(tiling_keys().count(), 84);
        assert!(tiling_keys().any(|k| k == tiling_key(41, 1 << 30)));
    }

    #[test]
    fn elf_layout() {
        let b = kernel_binary("Softmax");
        assert_eq!(&b[..4], b"\x7fELF");
        let shoff = u64::from_le_bytes(b[0x28..0x30].try_into().unwrap()) as usize;
        assert_eq!(b.len(), shoff + 5 * 64);
        let n = kernel_symbol("Softmax", 1000 + 42);
        assert!(b.windows(n.len()).any(|w| w == n.as_bytes()));
    }
}
