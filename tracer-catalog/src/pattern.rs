//! Function patterns, as `--function` takes them: names or globs (`aclnn*`, `Hccl*`) that
//! select functions, and `!`-prefixed ones (`!*GetWorkspaceSize`) that leave them out.
use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::catalog::CatalogError;

/// A set of function patterns.
#[derive(Debug, Clone, Default)]
pub struct FunctionPatterns {
    include: GlobSet,
    exclude: GlobSet,
    /// The selecting patterns, as written (in `include`'s order).
    included: Vec<String>,
}

impl FunctionPatterns {
    /// Patterns as the user wrote them; an empty or malformed one is an error that says why.
    pub fn new(patterns: &[String]) -> Result<Self, CatalogError> {
        let (mut include, mut exclude) = (GlobSetBuilder::new(), GlobSetBuilder::new());
        let mut included = Vec::new();
        for written in patterns {
            let (set, pattern) = match written.trim().strip_prefix('!') {
                Some(rest) => (&mut exclude, rest.trim()),
                None => (&mut include, written.trim()),
            };
            if pattern.is_empty() {
                return Err(CatalogError::new(format!(
                    "empty function pattern '{written}' (e.g. aclnn*, !*GetWorkspaceSize)"
                )));
            }
            let glob = Glob::new(pattern).map_err(|e| {
                CatalogError::new(format!(
                    "function pattern '{written}' is not a valid glob: {}",
                    e.kind()
                ))
            })?;
            set.add(glob);
            if !written.trim().starts_with('!') {
                included.push(pattern.to_owned());
            }
        }
        let build = |set: GlobSetBuilder| {
            set.build()
                .map_err(|e| CatalogError::new(format!("function patterns: {e}")))
        };
        Ok(Self {
            include: build(include)?,
            exclude: build(exclude)?,
            included,
        })
    }

    /// Whether a selecting pattern names `symbol` and no `!` pattern leaves it out.
    pub fn includes(&self, symbol: &str) -> bool {
        self.include.is_match(symbol) && !self.excludes(symbol)
    }

    /// Whether a `!` pattern leaves `symbol` out.
    pub fn excludes(&self, symbol: &str) -> bool {
        self.exclude.is_match(symbol)
    }

    /// Whether any pattern selects (rather than only leaves out).
    pub fn selects(&self) -> bool {
        !self.included.is_empty()
    }

    /// The selecting patterns that name none of `symbols`.
    pub fn unmatched<'a>(&self, symbols: impl IntoIterator<Item = &'a str>) -> Vec<&str> {
        let mut hit = vec![false; self.included.len()];
        for symbol in symbols {
            for i in self.include.matches(symbol) {
                hit[i] = true;
            }
        }
        self.included
            .iter()
            .zip(hit)
            .filter(|(_, hit)| !hit)
            .map(|(p, _)| p.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(p: &[&str]) -> FunctionPatterns {
        FunctionPatterns::new(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn globs_select_and_exclusions_leave_out() {
        let p = patterns(&["aclnn*", "HcclAllReduce", "!*GetWorkspaceSize"]);
        assert!(p.includes("aclnnAdd") && p.includes("HcclAllReduce"));
        assert!(!p.includes("aclnnAddGetWorkspaceSize") && p.excludes("aclnnAddGetWorkspaceSize"));
        assert!(!p.includes("HcclBroadcast"));
        assert!(p.selects());
        assert_eq!(p.unmatched(["aclnnMul"]), ["HcclAllReduce"]);
        assert!(!patterns(&["!aclrt*"]).selects());
        assert!(!patterns(&[]).includes("aclrtMalloc"));
    }

    #[test]
    fn bad_patterns_say_why() {
        let bad = |p: &str| {
            FunctionPatterns::new(&[p.to_string()])
                .unwrap_err()
                .to_string()
        };
        assert!(bad("!").contains("empty function pattern"), "{}", bad("!"));
        assert!(bad("acl[").contains("not a valid glob"), "{}", bad("acl["));
    }
}
