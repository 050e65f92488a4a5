//! The probe catalog: every traced CANN function as data. One generic BPF program pair
//! serves all of them; an entry's index is its probe id (the attach cookie) and says what
//! the BPF side captures (`ProbeSpec`) and how the agent turns the raw values into columns.
//!
//! Signatures follow the public CANN headers (`shared/reference/cann_abi.h`); msPTI
//! callback domains and ids follow `mspti_cbid.h`. The same catalog serves a real CANN host
//! and the simulator.
//!
//! - [`model`]: what an entry says (library, domain, arguments, roles, task kinds);
//! - [`cann`]: the entries;
//! - [`layout`]: layout descriptions of driver and device structures, per chip;
//! - [`decode`]: CANN enum values into schema vocabularies.
mod cann;
mod decode;
mod layout;
mod model;

pub use cann::CATALOG;
pub use decode::{acl_memcpy_kind, hccl_data_type, hccl_reduce_op, rt_memcpy_kind};
pub use layout::{
    CHIP_910B, CHIP_950, CHIPS, ChipLayout, DEFAULT_CHIP, DEVICE_ERRORS, SOC_FUNC_BEGIN,
    SOC_FUNC_END, SOC_LOG_CHANNEL, SocLogIds, SocLogLayout, SqeKind, chip_by_id,
    chip_id_of_version, soc_log_ids,
};
pub use model::{
    Arg, Column, Domain, Library, MsptiDomain, Out, Payload, ProbeDef, Ret, Role, TaskKind, Text,
};

/// Probe id of a catalog entry (its index; the catalog is far smaller than u16::MAX).
pub fn probe_id(index: usize) -> u16 {
    index as u16
}

/// The entry of probe id `probe`.
pub fn by_probe(probe: u16) -> Option<&'static ProbeDef> {
    CATALOG.get(probe as usize)
}

/// The probe id of function `symbol`.
pub fn find(symbol: &str) -> Option<u16> {
    CATALOG
        .iter()
        .position(|d| d.symbol == symbol)
        .map(probe_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use tracer_common::{MAX_ARGS, MAX_PROBES};

    #[test]
    fn catalog_is_consistent() {
        assert!(CATALOG.len() < MAX_PROBES as usize);
        let mut seen = HashSet::new();
        for def in CATALOG {
            assert!(seen.insert(def.symbol), "{} listed twice", def.symbol);
            for arg in def.args {
                assert!(
                    (arg.index as usize) < MAX_ARGS,
                    "{}: {}",
                    def.symbol,
                    arg.name
                );
            }
            if let Some((i, _)) = def.text {
                assert!((i as usize) < MAX_ARGS);
            }
            if let Some(out) = def.out {
                assert!((1..=8).contains(&out.size) && (out.index as usize) < MAX_ARGS);
            }
        }
    }

    #[test]
    fn decodes_memcpy_and_status() {
        let def = by_probe(find("aclrtMemcpyAsync").unwrap()).unwrap();
        let args = def.decode_args(&[0x10, 64, 0x20, 48, 1, 0x99, 0, 0], None, None);
        assert_eq!(args.address, Some(0x10));
        assert_eq!(args.src_address, Some(0x20));
        assert_eq!(args.bytes, Some(48));
        assert_eq!(
            args.memcpy_kind,
            Some(tracer_schema::vocab::MemcpyKind::HostToDevice)
        );
        assert_eq!(args.stream, Some(0x99));
        assert_eq!(def.return_value(u64::from(107_000u32)), Some(107_000));
        assert_eq!(
            def.return_value(u64::MAX),
            Some(-1),
            "status is a sign-extended i32"
        );
    }

    #[test]
    fn library_names_match_versioned_files() {
        assert_eq!(Library::from_file_name("libhccl.so"), Some(Library::Hccl));
        assert_eq!(
            Library::from_file_name("libhccl.so.8.0"),
            Some(Library::Hccl)
        );
        assert_eq!(Library::from_file_name("libhccl_plf.so"), None);
        assert_eq!(Domain::parse("acl"), Some(Domain::Acl));
    }
}
