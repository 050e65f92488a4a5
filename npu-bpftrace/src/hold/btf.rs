//! Offsets of kernel struct members, from the kernel's BTF (`/sys/kernel/btf/vmlinux`).
//!
//! The BPF programs are built without CO-RE relocations (Rust emits none), so the few
//! kernel structs they read (the current task's mount namespace) are read at offsets the
//! agent looks up here and passes in a map, as it does with tracepoint field offsets.
use std::collections::HashMap;

use anyhow::{Context, Result, bail};

const VMLINUX: &str = "/sys/kernel/btf/vmlinux";
const MAGIC: u16 = 0xeb9f;

const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_TYPE_TAG: u32 = 18;

/// A struct or union member.
#[derive(Debug, Clone)]
struct Member {
    /// Empty for an anonymous struct or union.
    name: String,
    type_id: u32,
    /// In bits from the start of the enclosing type.
    bit_offset: u32,
}

/// The kinds of type this reader needs: aggregates with their members, and the
/// qualifiers and typedefs that lead to them.
#[derive(Debug, Clone)]
enum Type {
    Aggregate(Vec<Member>),
    /// A typedef, `const`, `volatile`, `restrict` or type tag of the type it names.
    Alias(u32),
    Other,
}

/// The types of a BTF blob, by id, and its named structs.
pub(super) struct Btf {
    types: Vec<Type>,
    structs: HashMap<String, u32>,
}

impl Btf {
    /// The running kernel's types.
    pub(super) fn kernel() -> Result<Self> {
        let data = std::fs::read(VMLINUX).with_context(|| format!("reading {VMLINUX}"))?;
        Self::parse(&data).with_context(|| format!("parsing {VMLINUX}"))
    }

    fn parse(data: &[u8]) -> Result<Self> {
        let mut reader = Reader { data, at: 0 };
        if reader.u16()? != MAGIC {
            bail!("not BTF (or not in this machine's byte order)");
        }
        reader.at = 4;
        let hdr_len = reader.u32()? as usize;
        let (type_off, type_len) = (reader.u32()? as usize, reader.u32()? as usize);
        let (str_off, str_len) = (reader.u32()? as usize, reader.u32()? as usize);
        let strings = data
            .get(hdr_len + str_off..hdr_len + str_off + str_len)
            .context("string section out of bounds")?;
        let types_data = data
            .get(hdr_len + type_off..hdr_len + type_off + type_len)
            .context("type section out of bounds")?;
        let name = |off: u32| -> String {
            let tail = strings.get(off as usize..).unwrap_or_default();
            let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
            String::from_utf8_lossy(&tail[..end]).into_owned()
        };
        // Type id 0 is `void`.
        let mut btf = Self {
            types: vec![Type::Other],
            structs: HashMap::new(),
        };
        let mut reader = Reader {
            data: types_data,
            at: 0,
        };
        while reader.at < types_data.len() {
            let name_off = reader.u32()?;
            let info = reader.u32()?;
            let size_or_type = reader.u32()?;
            let (vlen, kind, kind_flag) = (info & 0xffff, (info >> 24) & 0x1f, info >> 31 != 0);
            let id = btf.types.len() as u32;
            let ty = match kind {
                KIND_STRUCT | KIND_UNION => {
                    let mut members = Vec::with_capacity(vlen as usize);
                    for _ in 0..vlen {
                        let (member_name, type_id, offset) =
                            (reader.u32()?, reader.u32()?, reader.u32()?);
                        members.push(Member {
                            name: name(member_name),
                            type_id,
                            // With kind_flag the top byte is a bitfield's size.
                            bit_offset: if kind_flag {
                                offset & 0xff_ffff
                            } else {
                                offset
                            },
                        });
                    }
                    if kind == KIND_STRUCT && name_off != 0 {
                        btf.structs.entry(name(name_off)).or_insert(id);
                    }
                    Type::Aggregate(members)
                }
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    Type::Alias(size_or_type)
                }
                _ => {
                    reader.skip(extra_bytes(kind, vlen)?)?;
                    Type::Other
                }
            };
            btf.types.push(ty);
        }
        Ok(btf)
    }

    /// The byte offset of `path` (a member, then members of that member's type) in
    /// `struct name`; anonymous structs and unions on the way are looked into.
    pub(super) fn member_offset(&self, name: &str, path: &[&str]) -> Result<u32> {
        let mut type_id = *self
            .structs
            .get(name)
            .with_context(|| format!("no struct {name} in the kernel's BTF"))?;
        let mut bits = 0;
        for member in path {
            let (offset, member_type) = self
                .find(type_id, member)
                .with_context(|| format!("no member {member} in struct {name}'s path {path:?}"))?;
            bits += offset;
            type_id = member_type;
        }
        if bits % 8 != 0 {
            bail!("{name}.{} is a bitfield", path.join("."));
        }
        Ok(bits / 8)
    }

    /// (bit offset, type) of member `name` of aggregate `type_id`, looking into anonymous
    /// members.
    fn find(&self, type_id: u32, name: &str) -> Option<(u32, u32)> {
        let Type::Aggregate(members) = self.types.get(self.resolve(type_id) as usize)? else {
            return None;
        };
        members.iter().find_map(|m| {
            if m.name == name {
                Some((m.bit_offset, m.type_id))
            } else if m.name.is_empty() {
                self.find(m.type_id, name)
                    .map(|(offset, ty)| (m.bit_offset + offset, ty))
            } else {
                None
            }
        })
    }

    /// The type behind typedefs and qualifiers.
    fn resolve(&self, mut type_id: u32) -> u32 {
        for _ in 0..32 {
            match self.types.get(type_id as usize) {
                Some(Type::Alias(next)) => type_id = *next,
                _ => break,
            }
        }
        type_id
    }
}

/// Bytes that follow the common header of a type of `kind` with `vlen` entries (the
/// aggregates and aliases are read by the caller).
fn extra_bytes(kind: u32, vlen: u32) -> Result<usize> {
    let vlen = vlen as usize;
    Ok(match kind {
        // INT, VAR, DECL_TAG: one u32.
        1 | 14 | 17 => 4,
        // PTR, FWD, FUNC, FLOAT.
        2 | 7 | 12 | 16 => 0,
        // ARRAY: element type, index type, count.
        3 => 12,
        // ENUM: name, value; FUNC_PROTO: name, type.
        6 | 13 => 8 * vlen,
        // DATASEC: type, offset, size; ENUM64: name, low, high.
        15 | 19 => 12 * vlen,
        _ => bail!("unknown BTF kind {kind}"),
    })
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let bytes = self
            .data
            .get(self.at..self.at + N)
            .context("truncated BTF")?
            .try_into()?;
        self.at += N;
        Ok(bytes)
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_ne_bytes(self.bytes()?))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_ne_bytes(self.bytes()?))
    }

    fn skip(&mut self, n: usize) -> Result<()> {
        if self.at + n > self.data.len() {
            bail!("truncated BTF");
        }
        self.at += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Btf;

    /// The offsets the hold programs read, in the running kernel (every supported kernel has
    /// BTF); `nsproxy` is a pointer member of `task_struct`, never at its start.
    #[test]
    fn finds_the_mount_namespace_offsets() {
        let btf = Btf::kernel().expect("kernel BTF");
        let nsproxy = btf.member_offset("task_struct", &["nsproxy"]).unwrap();
        assert!(nsproxy > 0 && nsproxy.is_multiple_of(8), "{nsproxy}");
        assert!(btf.member_offset("nsproxy", &["mnt_ns"]).unwrap() > 0);
        btf.member_offset("mnt_namespace", &["ns", "inum"]).unwrap();
        // Linux 6.18 moved the namespace's sequence number into an anonymous union of
        // `ns_common`; before, it is `seq`.
        let id = btf
            .member_offset("mnt_namespace", &["ns", "ns_id"])
            .or_else(|_| btf.member_offset("mnt_namespace", &["seq"]));
        assert!(id.as_ref().is_ok_and(|o| o.is_multiple_of(8)), "{id:?}");
        assert!(
            btf.member_offset("task_struct", &["no_such_member"])
                .is_err()
        );
    }
}
