//! A minimal JSON-object writer for ground-truth lines (no allocation beyond the line itself,
//! since it runs inside every traced API call).
use std::ffi::{CStr, c_char};
use std::fmt::Write;

/// Builds one JSON object: `{"k":v,...}`.
pub struct Obj<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Obj<'a> {
    pub fn begin(out: &'a mut String) -> Obj<'a> {
        out.push('{');
        Obj { out, first: true }
    }
    fn key(&mut self, k: &str) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        self.out.push('"');
        self.out.push_str(k);
        self.out.push_str("\":");
    }
    pub fn u64(&mut self, k: &str, v: u64) -> &mut Self {
        self.key(k);
        let _ = write!(self.out, "{v}");
        self
    }
    pub fn i64(&mut self, k: &str, v: i64) -> &mut Self {
        self.key(k);
        let _ = write!(self.out, "{v}");
        self
    }
    pub fn f64(&mut self, k: &str, v: f64) -> &mut Self {
        self.key(k);
        let _ = write!(self.out, "{v:?}");
        self
    }
    pub fn bool(&mut self, k: &str, v: bool) -> &mut Self {
        self.key(k);
        self.out.push_str(if v { "true" } else { "false" });
        self
    }
    pub fn null(&mut self, k: &str) -> &mut Self {
        self.key(k);
        self.out.push_str("null");
        self
    }
    pub fn str(&mut self, k: &str, v: &str) -> &mut Self {
        self.key(k);
        escape_into(self.out, v);
        self
    }
    /// A C string argument; `null` for a null pointer.
    ///
    /// # Safety
    /// `v` is null or a NUL-terminated string.
    // SAFETY: unsafe because `v` must be null or a NUL-terminated string (see # Safety).
    pub unsafe fn cstr(&mut self, k: &str, v: *const c_char) -> &mut Self {
        if v.is_null() {
            return self.null(k);
        }
        // SAFETY: caller guarantees a NUL-terminated string.
        let s = unsafe { CStr::from_ptr(v) }.to_string_lossy();
        self.str(k, &s)
    }
    /// Raw JSON for the value (the caller guarantees it is valid).
    pub fn raw(&mut self, k: &str, v: &str) -> &mut Self {
        self.key(k);
        self.out.push_str(v);
        self
    }
    /// A nested object.
    pub fn obj(&mut self, k: &str, f: impl FnOnce(&mut Obj)) -> &mut Self {
        self.key(k);
        let mut o = Obj::begin(self.out);
        f(&mut o);
        o.end();
        self
    }
    pub fn end(self) {
        self.out.push('}');
    }
}

/// Appends `s` as a JSON string literal.
pub fn escape_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_escaped_object() {
        let mut s = String::new();
        let mut o = Obj::begin(&mut s);
        o.u64("a", 1).str("b", "q\"\\\n\u{1}").obj("c", |o| {
            o.i64("d", -2).null("e");
        });
        o.end();
        assert_eq!(s, r#"{"a":1,"b":"q\"\\\n\u0001","c":{"d":-2,"e":null}}"#);
    }
}
