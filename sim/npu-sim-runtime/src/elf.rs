//! The kernel symbols of a device ELF, as the runtime takes them (RT
//! `src/runtime/core/src/kernel/elf.cc` `CheckKernelAttr`): global, non-hidden function symbols
//! with a name. Only 64-bit little-endian ELFs are read; anything malformed yields no symbols.
//! The blob is user input: every offset is bounds-checked.

const SHT_SYMTAB: u32 = 2;
const STT_FUNC: u8 = 2;
const STB_GLOBAL: u8 = 1;
const STV_HIDDEN: u8 = 2;
const SYM_SIZE: usize = 24;

fn bytes(d: &[u8], off: usize, n: usize) -> Option<&[u8]> {
    d.get(off..off.checked_add(n)?)
}
fn u16_at(d: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes(d, off, 2)?.try_into().ok()?))
}
fn u32_at(d: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes(d, off, 4)?.try_into().ok()?))
}
fn u64_at(d: &[u8], off: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(bytes(d, off, 8)?.try_into().ok()?)).ok()
}

/// The kernel function names of `elf`, in symbol-table order.
pub(crate) fn kernel_symbols(elf: &[u8]) -> Vec<String> {
    symbols(elf).unwrap_or_default()
}

fn symbols(d: &[u8]) -> Option<Vec<String>> {
    // e_ident: magic, ELFCLASS64 (2), ELFDATA2LSB (1).
    if bytes(d, 0, 4)? != b"\x7fELF" || *d.get(4)? != 2 || *d.get(5)? != 1 {
        return None;
    }
    let shoff = u64_at(d, 0x28)?;
    let shentsize = usize::from(u16_at(d, 0x3a)?);
    let shnum = usize::from(u16_at(d, 0x3c)?);
    if shentsize < 0x40 {
        return None;
    }
    let section = |i: usize| -> Option<(u32, usize, usize, usize)> {
        let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
        // The whole header must lie in the blob before any field is read.
        bytes(d, h, 0x40)?;
        // (sh_type, sh_offset, sh_size, sh_link)
        Some((
            u32_at(d, h + 4)?,
            u64_at(d, h + 0x18)?,
            u64_at(d, h + 0x20)?,
            u32_at(d, h + 0x28)? as usize,
        ))
    };
    let mut names = Vec::new();
    for i in 0..shnum {
        let (ty, off, size, link) = section(i)?;
        if ty != SHT_SYMTAB {
            continue;
        }
        let (_, str_off, str_size, _) = section(link)?;
        let strtab = bytes(d, str_off, str_size)?;
        let syms = bytes(d, off, size)?;
        for s in syms.chunks_exact(SYM_SIZE) {
            let name_off = u32_at(s, 0)? as usize;
            let (info, other) = (s[4], s[5]);
            if name_off == 0
                || info & 0xf != STT_FUNC
                || info >> 4 != STB_GLOBAL
                || other & 0x3 == STV_HIDDEN
            {
                continue;
            }
            let rest = strtab.get(name_off..)?;
            let end = rest.iter().position(|&b| b == 0)?;
            names.push(String::from_utf8_lossy(&rest[..end]).into_owned());
        }
    }
    Some(names)
}

/// The tiling key a kernel name carries: the digits after its last `_` (RT program.cc
/// `ElfProgram::ParseTilingKey`), else 0.
pub(crate) fn tiling_key(name: &str) -> u64 {
    name.rsplit_once('_')
        .map(|(_, k)| k)
        .filter(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|k| k.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiling_keys_come_from_trailing_digits() {
        assert_eq!(tiling_key("MatMulV2_1002"), 1002);
        assert_eq!(tiling_key("add_custom"), 0);
        assert_eq!(tiling_key("plain"), 0);
        assert_eq!(tiling_key("x_"), 0);
    }

    #[test]
    fn malformed_blobs_have_no_symbols() {
        assert!(kernel_symbols(b"").is_empty());
        assert!(kernel_symbols(b"\x7fELF\x02\x01\x01\x00").is_empty());
        let mut h = vec![0u8; 64];
        h[..6].copy_from_slice(b"\x7fELF\x02\x01");
        h[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        h[0x3a] = 0x40;
        h[0x3c] = 5;
        assert!(kernel_symbols(&h).is_empty());
    }
}
