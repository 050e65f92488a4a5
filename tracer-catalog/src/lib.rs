//! The probe catalog: every traced CANN function as data. One generic BPF program pair
//! serves all of them; a function's probe id (the attach cookie) indexes the probe table,
//! which says what the BPF side captures (`ProbeSpec`) and how the agent turns the raw
//! values into columns.
//!
//! The catalog of a CANN release line is a TOML file (`catalogs/cann-8.toml`), embedded in
//! the binary and checked by the build script; `--catalog FILE` adds or overrides entries at
//! run time. Signatures follow the public CANN headers (`shared/reference/cann_abi.h`);
//! msPTI callback domains and ids follow `mspti_cbid.h`. The same catalog serves a real CANN
//! host and the simulator.
//!
//! - [`model`]: what an entry says (library, domain, arguments, roles, task kinds);
//! - [`catalog`]: the entries of the built-in and added files, and what a function of a
//!   library resolves to (exact entries, globs, or a generic entry for a function known only
//!   by name);
//! - [`FunctionPatterns`]: `--function` names, globs and `!` exclusions;
//! - [`table`]: probe ids, handed out as libraries are attached;
//! - [`layout`]: layout descriptions of driver and device structures, per chip;
//! - [`decode`]: CANN enum values into schema vocabularies.
pub mod catalog;
mod decode;
mod file;
mod layout;
mod model;
mod pattern;
pub mod table;

pub use catalog::{Catalog, CatalogError, Entry, Origin, Symbols, intern};
pub use decode::{acl_memcpy_kind, hccl_data_type, hccl_reduce_op, rt_memcpy_kind};
pub use layout::{
    CHIP_910B, CHIP_950, CHIPS, ChipLayout, DEFAULT_CHIP, DEVICE_ERRORS, SOC_FUNC_BEGIN,
    SOC_FUNC_END, SOC_LOG_CHANNEL, SocLogIds, SocLogLayout, SqeKind, chip_by_id,
    chip_id_of_version, soc_log_ids,
};
pub use model::{
    Arg, Column, Domain, MsptiDomain, OpNaming, Out, Payload, ProbeDef, Ret, Role, TaskKind, Text,
    library_base_name,
};
pub use pattern::FunctionPatterns;
pub use table::{ProbeTable, TableFull};

/// Whether `pattern` is a glob (has `*`, `?`, `[` or `{`) rather than a name.
pub fn is_glob(pattern: &str) -> bool {
    file::is_glob(pattern)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use tracer_common::{MAX_ARGS, MAX_PROBES};

    #[test]
    fn builtin_catalog_is_consistent() {
        let catalog = Catalog::builtin();
        assert!(catalog.entries().len() < MAX_PROBES as usize);
        let mut seen = HashSet::new();
        for entry in catalog.entries() {
            let def = &entry.def;
            assert!(
                seen.insert((def.library, def.symbol)),
                "{} listed twice",
                def.symbol
            );
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
        assert_eq!(catalog.driver_library(), Some("libascend_hal.so"));
    }

    #[test]
    fn decodes_memcpy_and_status() {
        let def = Catalog::builtin().find("aclrtMemcpyAsync").unwrap();
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
        let catalog = Catalog::builtin();
        assert_eq!(library_base_name("libhccl.so.8.0"), "libhccl.so");
        assert!(catalog.knows_library("libhccl.so"));
        assert!(catalog.knows_library("libhccl.so.8.0"));
        assert!(!catalog.knows_library("libhccl_plf.so"));
        let def = catalog.resolve("libhccl.so.8", "HcclAllReduce").unwrap();
        assert_eq!((def.library, def.symbol), ("libhccl.so", "HcclAllReduce"));
        assert!(catalog.resolve("libhccl.so", "aclrtMalloc").is_none());
        assert_eq!(Domain::parse("acl"), Some(Domain::Acl));
        // Newer releases: AscendCL's runtime part and HCCL's communication library.
        let moved = catalog.resolve("libacl_rt.so", "aclrtMalloc").unwrap();
        assert_eq!(moved.library, "libacl_rt.so");
        assert_eq!(
            catalog.find("aclrtMalloc").unwrap().library,
            "libascendcl.so"
        );
        assert!(catalog.resolve("libhcomm.so", "HcclAllReduce").is_some());
        // Operator libraries: every feature library, phase by phase.
        assert!(catalog.knows_library("libopapi_nn.so") && catalog.knows_library("libnnopbase.so"));
        let run = catalog.resolve("libopapi_nn.so", "aclnnMatmul").unwrap();
        assert_eq!((run.domain, run.role), (Domain::Op, Role::OpLaunch));
        let prepare = catalog
            .resolve("libcust_opapi.so", "aclnnAddCustomGetWorkspaceSize")
            .unwrap();
        assert_eq!(prepare.role, Role::OpPrepare);
        let args = tracer_schema::rows::ApiArgs::default();
        assert_eq!(
            prepare.operator_name(b"", &args).as_deref(),
            Some("AddCustom")
        );
        assert_eq!(run.operator_name(b"", &args).as_deref(), Some("Matmul"));
        let aclop = catalog
            .resolve("libacl_op_compiler.so", "aclopCompileAndExecuteV2")
            .unwrap();
        assert_eq!(aclop.operator_name(b"Add", &args).as_deref(), Some("Add"));
    }

    #[test]
    fn added_files_override_and_add() {
        let mut catalog = Catalog::builtin().clone();
        let added = "[catalog]\nformat = 1\n\n\
            [[function]]\nlibrary = \"libhccl.so\"\nsymbol = \"HcclAllReduce\"\ndomain = \"mstx\"\n\n\
            [[function]]\nlibrary = \"libfoo*.so\"\nsymbol = \"foo*\"\nexclude = [\"foo_internal*\"]\n\
            domain = \"other\"\nargs = [{ at = 1, name = \"n\", column = \"count\" }]\n";
        catalog.add_text(added, "mine.toml").unwrap();
        let overridden = catalog.resolve("libhccl.so", "HcclAllReduce").unwrap();
        assert_eq!(overridden.domain, Domain::Mstx);
        let entry = catalog.entry_for("libfoo_v2.so", "foo_run").unwrap();
        assert_eq!(entry.origin.to_string(), "mine.toml:9");
        assert!(
            catalog
                .entry_for("libfoo_v2.so", "foo_internal_x")
                .is_none()
        );
        assert!(catalog.knows_library("libfoo_v2.so"));
        let generic = catalog.generic("libascendcl.so", "aclrtGetVersion");
        assert_eq!(generic.domain, Domain::Acl);
        let args = generic.decode_args(&[1, 2, 3, 4, 5, 6, 7, 8], None, Some(9));
        assert_eq!(args.raw, Some([1, 2, 3, 4, 5, 6]));
        assert_eq!(generic.return_value(9), Some(9));
        assert_eq!(
            catalog.generic("libunknown.so", "f").domain,
            Domain::Other,
            "a library no rule names"
        );
    }

    #[test]
    fn probe_ids_are_given_once_per_function() {
        let table = ProbeTable::new();
        let catalog = Catalog::builtin();
        let a = table
            .insert(catalog.resolve("libhccl.so", "HcclAllReduce").unwrap())
            .unwrap();
        let b = table
            .insert(catalog.resolve("libhccl.so.8", "HcclAllReduce").unwrap())
            .unwrap();
        let c = table.insert(catalog.generic("libx.so", "f")).unwrap();
        assert_eq!((a, b, c), (0, 0, 1));
        assert_eq!(table.get(1).map(|d| d.symbol), Some("f"));
        assert_eq!(table.find("HcclAllReduce"), Some(0));
        assert_eq!(table.len(), 2);
        let builtin = ProbeTable::builtin();
        let exact = catalog
            .entries()
            .iter()
            .filter(|e| !e.symbols.is_glob() && !is_glob(e.def.library))
            .count();
        assert_eq!(builtin.len(), exact);
        assert!(builtin.find("aclrtMalloc").is_some() && builtin.find("aclnnAdd").is_none());
    }
}
