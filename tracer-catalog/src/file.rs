//! The catalog file format: TOML, one file per CANN release line (`catalogs/cann-8.toml`),
//! and the files `--catalog` adds. Parsing checks every entry, so a mistake is one line with
//! the file and the line it is on, not a wrong trace.
//!
//! This module is self-contained (serde, toml, globset): the build script includes it to
//! check the built-in catalogs, so a broken catalog fails `cargo build`.
use std::collections::HashMap;

use serde::Deserialize;
use toml::Spanned;

/// The format version this build reads (`[catalog] format`).
pub(crate) const FORMAT: u32 = 1;
/// Integer arguments the probes capture (`tracer_common::MAX_ARGS`, checked by a test).
pub(crate) const MAX_ARGS: u8 = 8;
/// Integer arguments an entry may name: one past [`MAX_ARGS`] is read from the stack
/// (`tracer_common::SCAN_ARGS`, checked by a test).
pub(crate) const MAX_FAR_ARG: u8 = 16;

/// A parsed, checked catalog file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CatalogFile {
    pub(crate) catalog: Header,
    /// Libraries discovery looks for, with the domain of their functions known only by name.
    #[serde(default)]
    pub(crate) library: Vec<Spanned<LibrarySpec>>,
    #[serde(default)]
    pub(crate) function: Vec<Spanned<FunctionSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Header {
    pub(crate) format: u32,
    /// The CANN release line the file describes (e.g. "8").
    #[serde(default)]
    pub(crate) cann: Option<String>,
    #[serde(default)]
    pub(crate) description: Option<String>,
}

/// One library name or glob, or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Libraries {
    One(String),
    Many(Vec<String>),
}

impl Libraries {
    pub(crate) fn names(&self) -> &[String] {
        match self {
            Self::One(name) => std::slice::from_ref(name),
            Self::Many(names) => names,
        }
    }

    /// The first name: where the function's calls are said to come from.
    pub(crate) fn first(&self) -> &str {
        self.names().first().map_or("", String::as_str)
    }
}

/// `[[library]]`: a library file name (or glob) discovery attaches to.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LibrarySpec {
    pub(crate) name: String,
    pub(crate) domain: DomainName,
}

/// `[[function]]`: one traced function, or a glob of functions.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FunctionSpec {
    /// Library file name (`libascendcl.so`), a glob (`libopapi*.so`), or a list of them
    /// (the first name is the function's home, the others where other releases put it).
    pub(crate) library: Libraries,
    /// Function name, or a glob (`aclnn*GetWorkspaceSize`).
    pub(crate) symbol: String,
    /// Globs of names a glob `symbol` leaves out.
    #[serde(default)]
    pub(crate) exclude: Vec<String>,
    pub(crate) domain: DomainName,
    #[serde(default)]
    pub(crate) mspti: Option<MsptiSpec>,
    #[serde(default)]
    pub(crate) args: Vec<ArgSpec>,
    #[serde(default)]
    pub(crate) text: Option<TextSpec>,
    #[serde(default)]
    pub(crate) out: Option<OutSpec>,
    #[serde(default)]
    pub(crate) ret: RetName,
    #[serde(default)]
    pub(crate) ret_column: Option<ColumnName>,
    #[serde(default)]
    pub(crate) role: RoleName,
    #[serde(default)]
    pub(crate) task: Option<TaskName>,
    #[serde(default, rename = "async")]
    pub(crate) is_async: bool,
    #[serde(default)]
    pub(crate) payload: PayloadName,
    #[serde(default)]
    pub(crate) device_role: DeviceRoleName,
    #[serde(default)]
    pub(crate) op: Option<OpSpec>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MsptiSpec {
    pub(crate) domain: MsptiName,
    pub(crate) cbid: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArgSpec {
    /// Position among the integer arguments (floating-point ones do not count).
    pub(crate) at: u8,
    /// Parameter name in the CANN header.
    pub(crate) name: String,
    pub(crate) column: ColumnName,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TextSpec {
    pub(crate) at: u8,
    pub(crate) kind: TextName,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutSpec {
    pub(crate) at: u8,
    pub(crate) size: u8,
    pub(crate) column: ColumnName,
}

/// How an operator call's operator is named.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpSpec {
    pub(crate) name: OpNameFrom,
    /// `symbol`: what the operator name leaves off the function name.
    #[serde(default)]
    pub(crate) strip_prefix: Option<String>,
    #[serde(default)]
    pub(crate) strip_suffix: Option<String>,
    /// `column`: the column whose value names it, after `prefix`.
    #[serde(default)]
    pub(crate) column: Option<ColumnName>,
    #[serde(default)]
    pub(crate) prefix: Option<String>,
}

macro_rules! names {
    ($(#[$doc:meta])* $name:ident $(default $default:ident)? { $($variant:ident,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub(crate) enum $name {
            $($variant,)+
        }

        $(impl Default for $name {
            fn default() -> Self {
                Self::$default
            }
        })?
    };
}

names! {
    /// `domain`.
    DomainName { Acl, Runtime, Hccl, Mstx, Driver, Op, Other, }
}
names! {
    /// `mspti.domain`.
    MsptiName { Runtime, Hccl, }
}
names! {
    /// `args[].column`, `out.column`, `ret_column`, `op.column`: the `api` column of a value.
    ColumnName {
        DeviceId, Stream, Bytes, Count, AclMemcpyKind, RtMemcpyKind, Address, SrcAddress,
        Value, BlockDim, Handle, DataType, ReduceOp, Rank, RangeId,
    }
}
names! {
    /// `text.kind`.
    TextName { KernelName, KernelNameFromHandle, Message, DevBinary, OpType, }
}
names! {
    /// `ret`.
    RetName default Status { Status, Void, Value, Raw, }
}
names! {
    /// `role`: what the pipeline does with the call beyond its `api` row.
    RoleName default Plain {
        Plain, AllocDevice, AllocHost, FreeDevice, FreeHost, CommInit, RegisterStub,
        RegisterFunction, RegisterAllKernels, LaunchByHandle, LaunchByStub, LaunchByTilingKey,
        Mark, RangeStart, RangeEnd, DomainCreate, DomainMark, DomainRangeStart, DomainRangeEnd,
        OpPrepare, OpLaunch, OpCompileExecute, OpModelExecute, OpExecutorRepeatable,
        OpExecutorDestroy, OpExecutorCached,
    }
}
names! {
    /// `task`.
    TaskName { Kernel, Memcpy, Memset, Collective, Sync, Model, }
}
names! {
    /// `payload`.
    PayloadName default Count { Count, PerPeer, Nothing, }
}
names! {
    /// `device_role`.
    DeviceRoleName default Api {
        Api, SqSend, CqRecv, ChannelRead, CaptureBinary, StreamFill,
    }
}
names! {
    /// `op.name`.
    OpNameFrom { Symbol, Text, Column, }
}

/// A catalog file that cannot be used: `file:line: what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileError {
    pub(crate) origin: String,
    /// 1-based; 0 when the error concerns the whole file.
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}:{}: {}", self.origin, self.line, self.message)
        }
    }
}

impl std::error::Error for FileError {}

/// Parses and checks catalog file `text`, named `origin` in errors.
pub(crate) fn parse(text: &str, origin: &str) -> Result<CatalogFile, FileError> {
    let error = |line: usize, message: String| FileError {
        origin: origin.to_owned(),
        line,
        message,
    };
    let file: CatalogFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(0, |s| line_of(text, s.start));
        // The message without the snippet toml draws under it: one line.
        let message = e.message().lines().next().unwrap_or("invalid TOML").trim();
        error(line, message.to_owned())
    })?;
    if file.catalog.format != FORMAT {
        return Err(error(
            0,
            format!(
                "catalog format {} is not the one this build reads ({FORMAT})",
                file.catalog.format
            ),
        ));
    }
    for library in &file.library {
        check_glob(&library.get_ref().name, "library name")
            .map_err(|m| error(line_of(text, library.span().start), m))?;
    }
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    for function in &file.function {
        let line = line_of(text, function.span().start);
        let f = function.get_ref();
        check_function(f).map_err(|m| error(line, format!("{}: {m}", f.symbol)))?;
        if let Some(first) = seen.insert((f.library.first(), &f.symbol), line) {
            return Err(error(
                line,
                format!(
                    "{} of {} is already listed on line {first}",
                    f.symbol,
                    f.library.first()
                ),
            ));
        }
    }
    Ok(file)
}

/// The 1-based line of byte `offset`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Characters that make a name a glob (globset syntax).
pub(crate) fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', '{'])
}

fn check_glob(pattern: &str, what: &str) -> Result<(), String> {
    if pattern.trim().is_empty() {
        return Err(format!("empty {what}"));
    }
    globset::Glob::new(pattern)
        .map(|_| ())
        .map_err(|e| format!("{what} '{pattern}' is not a valid glob: {}", e.kind()))
}

/// Checks that one entry says something the pipeline can act on.
fn check_function(f: &FunctionSpec) -> Result<(), String> {
    if f.library.names().is_empty() {
        return Err("an empty library list".into());
    }
    for library in f.library.names() {
        check_glob(library, "library")?;
    }
    check_glob(&f.symbol, "symbol")?;
    for exclude in &f.exclude {
        check_glob(exclude, "exclude")?;
    }
    if !f.exclude.is_empty() && !is_glob(&f.symbol) {
        return Err("exclude only applies to a glob symbol".into());
    }
    let mut positions = Vec::new();
    let far: Vec<u8> = f
        .args
        .iter()
        .map(|a| a.at)
        .filter(|&at| at >= MAX_ARGS)
        .collect();
    if let Some(&at) = far.iter().find(|&&at| at >= MAX_FAR_ARG) {
        return Err(format!(
            "argument at {at}: the probes read the first {MAX_FAR_ARG} integer arguments"
        ));
    }
    if far.len() > 1 {
        return Err(format!(
            "arguments at {far:?}: one argument past the first {MAX_ARGS} per function"
        ));
    }
    // The far argument takes the last slot's place.
    let last = MAX_ARGS - 1;
    if !far.is_empty()
        && (f.args.iter().any(|a| a.at == last)
            || f.text.is_some_and(|t| t.at == last)
            || f.out.is_some_and(|o| o.at == last))
    {
        return Err(format!(
            "argument at {}: an argument past the first {MAX_ARGS} needs argument {last} unused",
            far[0]
        ));
    }
    for arg in &f.args {
        if arg.name.trim().is_empty() {
            return Err(format!("argument at {} has no name", arg.at));
        }
        if positions.contains(&arg.at) {
            return Err(format!("two arguments at {}", arg.at));
        }
        positions.push(arg.at);
    }
    if let Some(text) = f.text
        && text.at >= MAX_ARGS
    {
        return Err(format!("text at {}: beyond argument {MAX_ARGS}", text.at));
    }
    if let Some(out) = f.out {
        if out.at >= MAX_ARGS {
            return Err(format!("out at {}: beyond argument {MAX_ARGS}", out.at));
        }
        if !(1..=8).contains(&out.size) {
            return Err(format!("out size {}: 1 to 8 bytes", out.size));
        }
    }
    match (f.ret, f.ret_column) {
        (RetName::Value, None) => return Err("ret = \"value\" needs ret_column".into()),
        (RetName::Value, Some(_)) | (_, None) => {}
        (_, Some(_)) => return Err("ret_column goes with ret = \"value\"".into()),
    }
    if f.is_async && f.task.is_none() {
        return Err("async without a task".into());
    }
    if f.payload != PayloadName::Count && f.task != Some(TaskName::Collective) {
        return Err("payload applies to collectives (task = \"collective\")".into());
    }
    check_role(f)
}

/// The columns an entry fills: its arguments, out-parameter and return value.
fn columns(f: &FunctionSpec) -> Vec<ColumnName> {
    let mut filled: Vec<ColumnName> = f.args.iter().map(|a| a.column).collect();
    filled.extend(f.out.map(|o| o.column));
    filled.extend(f.ret_column);
    filled
}

/// What each role reads from the call, so an entry cannot claim a role it gives no data for.
fn check_role(f: &FunctionSpec) -> Result<(), String> {
    use ColumnName as C;
    use RoleName as R;
    let filled = columns(f);
    let text = f.text.map(|t| t.kind);
    let (needs, needs_text): (&[ColumnName], &[TextName]) = match f.role {
        R::Plain => (&[], &[]),
        R::AllocDevice | R::AllocHost => (&[C::Address, C::Bytes], &[]),
        R::FreeDevice | R::FreeHost => (&[C::Address], &[]),
        R::CommInit => (&[C::Handle, C::Count], &[]),
        R::RegisterStub | R::RegisterFunction => (&[C::Handle], &[TextName::KernelName]),
        R::RegisterAllKernels => (&[C::Handle], &[TextName::DevBinary]),
        R::LaunchByHandle | R::LaunchByStub | R::LaunchByTilingKey => (&[C::Handle], &[]),
        R::Mark | R::RangeStart | R::DomainCreate => (&[], &[TextName::Message]),
        R::RangeEnd => (&[C::RangeId], &[]),
        R::DomainMark | R::DomainRangeStart => (&[C::Handle], &[TextName::Message]),
        R::DomainRangeEnd => (&[C::Handle, C::RangeId], &[]),
        R::OpPrepare | R::OpCompileExecute | R::OpModelExecute => (&[], &[]),
        R::OpLaunch | R::OpExecutorRepeatable | R::OpExecutorDestroy | R::OpExecutorCached => {
            (&[C::Handle], &[])
        }
    };
    if let Some(missing) = needs.iter().find(|c| !filled.contains(c)) {
        return Err(format!(
            "role {:?} needs a value in column {missing:?} (args, out or ret_column)",
            f.role
        ));
    }
    if !needs_text.is_empty() && !text.is_some_and(|t| needs_text.contains(&t)) {
        return Err(format!(
            "role {:?} needs a text argument of kind {:?}",
            f.role, needs_text
        ));
    }
    let names_op = matches!(
        f.role,
        R::OpPrepare | R::OpLaunch | R::OpCompileExecute | R::OpModelExecute
    );
    match (&f.op, names_op) {
        (None, true) => Err(format!(
            "role {:?} needs `op` (how its operator is named)",
            f.role
        )),
        (Some(_), false) => Err(format!("`op` goes with an operator role, not {:?}", f.role)),
        (None, false) => Ok(()),
        (Some(op), true) => check_op(op, f, &filled),
    }
}

fn check_op(op: &OpSpec, f: &FunctionSpec, filled: &[ColumnName]) -> Result<(), String> {
    let symbol_only = op.strip_prefix.is_some() || op.strip_suffix.is_some();
    match op.name {
        OpNameFrom::Symbol if op.column.is_some() || op.prefix.is_some() => {
            Err("op.column and op.prefix go with op.name = \"column\"".into())
        }
        OpNameFrom::Symbol => Ok(()),
        _ if symbol_only => {
            Err("op.strip_prefix and op.strip_suffix go with op.name = \"symbol\"".into())
        }
        OpNameFrom::Text if f.text.is_none() => {
            Err("op.name = \"text\" needs a text argument".into())
        }
        OpNameFrom::Text => Ok(()),
        OpNameFrom::Column => match op.column {
            None => Err("op.name = \"column\" needs op.column".into()),
            Some(c) if !filled.contains(&c) => {
                Err(format!("op.column {c:?} is not a column the entry fills"))
            }
            Some(_) => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "[catalog]\nformat = 1\n";

    fn parse_str(body: &str) -> Result<CatalogFile, FileError> {
        parse(&format!("{HEADER}{body}"), "test.toml")
    }

    #[test]
    fn max_args_is_the_probes() {
        assert_eq!(MAX_ARGS as usize, tracer_common::MAX_ARGS);
        assert_eq!(MAX_FAR_ARG as usize, tracer_common::SCAN_ARGS);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let err =
            parse_str("\n[[function]]\nlibrary = \"libx.so\"\nsymbol = \"f\"\ndomain = \"gpu\"\n")
                .unwrap_err();
        assert_eq!(err.line, 7, "{err}");
        assert!(
            err.to_string()
                .starts_with("test.toml:7: unknown variant `gpu`"),
            "{err}"
        );
        assert!(!err.to_string().contains('\n'), "one line: {err}");

        let err = parse_str(
            "[[function]]\nlibrary = \"libx.so\"\nsymbol = \"f\"\ndomain = \"acl\"\n\
             args = [{ at = 19, name = \"a\", column = \"bytes\" }]\n",
        )
        .unwrap_err();
        assert_eq!(err.line, 3, "{err}");
        assert!(err.message.contains("first 16 integer arguments"), "{err}");

        let err =
            parse_str("[[function]]\nlibrary = \"libx.so\"\nsymbol = \"f[\"\ndomain = \"acl\"\n")
                .unwrap_err();
        assert!(err.message.contains("not a valid glob"), "{err}");

        let err = parse("[catalog]\nformat = 2\n", "v2.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "v2.toml: catalog format 2 is not the one this build reads (1)"
        );
    }

    #[test]
    fn roles_need_their_data() {
        let err = parse_str(
            "[[function]]\nlibrary = \"libx.so\"\nsymbol = \"m\"\ndomain = \"acl\"\n\
             role = \"alloc_device\"\nargs = [{ at = 1, name = \"size\", column = \"bytes\" }]\n",
        )
        .unwrap_err();
        assert!(err.message.contains("column Address"), "{err}");
        let err = parse_str(
            "[[function]]\nlibrary = \"libx.so\"\nsymbol = \"aclnn*\"\ndomain = \"op\"\n\
             role = \"op_prepare\"\n",
        )
        .unwrap_err();
        assert!(err.message.contains("needs `op`"), "{err}");
        let ok = parse_str(
            "[[function]]\nlibrary = \"libopapi*.so\"\nsymbol = \"aclnn*\"\n\
             exclude = [\"*GetWorkspaceSize\"]\ndomain = \"op\"\nrole = \"op_launch\"\n\
             op = { name = \"symbol\", strip_prefix = \"aclnn\" }\n\
             args = [{ at = 2, name = \"executor\", column = \"handle\" }]\n",
        )
        .unwrap();
        assert_eq!(ok.function.len(), 1);
    }

    #[test]
    fn duplicates_are_refused() {
        let one = "[[function]]\nlibrary = \"libx.so\"\nsymbol = \"f\"\ndomain = \"acl\"\n";
        let err = parse_str(&format!("{one}{one}")).unwrap_err();
        assert_eq!(err.line, 7);
        assert!(err.message.contains("already listed on line 3"), "{err}");
    }

    #[test]
    fn one_argument_past_the_registers_in_place_of_the_last() {
        let entry = |args: &str| {
            parse_str(&format!(
                "[[function]]\nlibrary = \"libx.so\"\nsymbol = \"f\"\ndomain = \"op\"\n\
                 args = [{args}]\n"
            ))
        };
        assert!(entry("{ at = 11, name = \"stream\", column = \"stream\" }").is_ok());
        let err = entry("{ at = 16, name = \"s\", column = \"stream\" }").unwrap_err();
        assert!(err.message.contains("first 16"), "{err}");
        let err = entry(
            "{ at = 8, name = \"a\", column = \"count\" }, \
             { at = 9, name = \"b\", column = \"stream\" }",
        )
        .unwrap_err();
        assert!(err.message.contains("one argument past"), "{err}");
        let err = entry(
            "{ at = 7, name = \"a\", column = \"count\" }, \
             { at = 9, name = \"b\", column = \"stream\" }",
        )
        .unwrap_err();
        assert!(err.message.contains("argument 7 unused"), "{err}");
    }
}
