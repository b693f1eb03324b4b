//! iproute2's JSON output (`-j`, pretty with `-p`): the list of objects
//! its `json_writer` prints, one object per line of the text output.
//!
//! The shape is iproute2 6.1's byte for byte: compact
//! `[{"ifindex":0,"ifname":"rxe0"},{...}]`, pretty
//! `[ {\n        "ifindex": 0,\n ...\n    },{\n ...\n    } ]`, and a
//! newline at the end. Strings are escaped as its `jsonw_puts` escapes
//! them (C escapes, quote and backslash).

use core::fmt::{self, Write};

/// A JSON list being written: [`JsonList::object`] per object, then
/// [`JsonList::finish`].
pub struct JsonList<'a> {
    out: &'a mut dyn Write,
    pretty: bool,
    /// Whether something precedes the next item at this level (a comma is due).
    sep: bool,
    depth: usize,
}

impl<'a> JsonList<'a> {
    /// Opens the list.
    pub fn new(out: &'a mut dyn Write, pretty: bool) -> Result<Self, fmt::Error> {
        out.write_str(if pretty { "[ " } else { "[" })?;
        Ok(JsonList { out, pretty, sep: false, depth: 1 })
    }

    fn eol(&mut self) -> fmt::Result {
        if self.pretty {
            self.out.write_char('\n')?;
            for _ in 0..self.depth {
                self.out.write_str("    ")?;
            }
        }
        Ok(())
    }

    fn eor(&mut self) -> fmt::Result {
        if core::mem::replace(&mut self.sep, true) {
            self.out.write_char(',')?;
        }
        Ok(())
    }

    /// Opens an object, calls `f` for its members, closes it.
    pub fn object(&mut self, f: impl FnOnce(&mut JsonObject<'_, 'a>) -> fmt::Result) -> fmt::Result {
        self.eor()?;
        self.out.write_char('{')?;
        self.depth += 1;
        self.sep = false;
        f(&mut JsonObject { list: self })?;
        self.depth -= 1;
        if self.sep {
            self.eol()?;
        }
        self.out.write_char('}')?;
        self.sep = true;
        Ok(())
    }

    /// Closes the list and ends the line.
    pub fn finish(self) -> fmt::Result {
        self.out.write_str(if self.pretty { " ]\n" } else { "]\n" })
    }
}

/// The members of one object of a [`JsonList`].
pub struct JsonObject<'l, 'a> {
    list: &'l mut JsonList<'a>,
}

impl JsonObject<'_, '_> {
    fn name(&mut self, name: &str) -> fmt::Result {
        self.list.eor()?;
        self.list.eol()?;
        quoted(self.list.out, name)?;
        self.list.out.write_str(if self.list.pretty { ": " } else { ":" })
    }

    /// A number member.
    pub fn uint(&mut self, name: &str, v: u64) -> fmt::Result {
        self.name(name)?;
        write!(self.list.out, "{v}")
    }

    /// A string member.
    pub fn str(&mut self, name: &str, v: &str) -> fmt::Result {
        self.name(name)?;
        quoted(self.list.out, v)
    }

    /// A boolean member (iproute2's `print_on_off` in JSON).
    pub fn bool(&mut self, name: &str, v: bool) -> fmt::Result {
        self.name(name)?;
        self.list.out.write_str(if v { "true" } else { "false" })
    }

    /// An array of strings, on one line (as `rdma -j -d dev` prints caps).
    pub fn strs(&mut self, name: &str, vs: &[&str]) -> fmt::Result {
        self.name(name)?;
        self.list.out.write_char('[')?;
        for (i, v) in vs.iter().enumerate() {
            if i > 0 {
                self.list.out.write_char(',')?;
            }
            quoted(self.list.out, v)?;
        }
        self.list.out.write_char(']')
    }
}

/// `s` as `jsonw_puts` writes it.
fn quoted(out: &mut dyn Write, s: &str) -> fmt::Result {
    out.write_char('"')?;
    for c in s.chars() {
        match c {
            '\t' => out.write_str("\\t")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\u{c}' => out.write_str("\\f")?,
            '\u{8}' => out.write_str("\\b")?,
            '\\' => out.write_str("\\\\")?,
            '"' => out.write_str("\\\"")?,
            c => out.write_char(c)?,
        }
    }
    out.write_char('"')
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    fn two(pretty: bool) -> String {
        let mut s = String::new();
        let mut l = JsonList::new(&mut s, pretty).unwrap();
        l.object(|o| {
            o.uint("ifindex", 0)?;
            o.str("ifname", "rxe0")
        })
        .unwrap();
        l.object(|o| o.bool("on", false)).unwrap();
        l.finish().unwrap();
        s
    }

    #[test]
    fn compact_and_pretty_are_iproute2s() {
        assert_eq!(two(false), "[{\"ifindex\":0,\"ifname\":\"rxe0\"},{\"on\":false}]\n");
        assert_eq!(
            two(true),
            "[ {\n        \"ifindex\": 0,\n        \"ifname\": \"rxe0\"\n    },{\n        \"on\": false\n    } ]\n"
        );
        let mut s = String::new();
        quoted(&mut s, "a\"b\\c\n").unwrap();
        assert_eq!(s, "\"a\\\"b\\\\c\\n\"");
    }
}
