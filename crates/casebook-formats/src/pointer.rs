//! JSON Pointers (RFC 6901) built lazily: a chain of borrowed segments on the stack that is only
//! rendered to text when a diagnostic needs it, so the happy path allocates nothing.

use std::fmt;

#[derive(Clone, Copy)]
pub struct Ptr<'a> {
    parent: Option<&'a Ptr<'a>>,
    segment: Segment<'a>,
}

#[derive(Clone, Copy)]
enum Segment<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> Ptr<'a> {
    pub const ROOT: Ptr<'static> = Ptr { parent: None, segment: Segment::Root };

    pub fn key(&'a self, key: &'a str) -> Ptr<'a> {
        Ptr { parent: Some(self), segment: Segment::Key(key) }
    }

    pub fn index(&'a self, index: usize) -> Ptr<'a> {
        Ptr { parent: Some(self), segment: Segment::Index(index) }
    }
}

impl fmt::Display for Ptr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(parent) = self.parent {
            parent.fmt(f)?;
        }
        match self.segment {
            Segment::Root => Ok(()),
            Segment::Index(i) => write!(f, "/{i}"),
            Segment::Key(key) => {
                f.write_str("/")?;
                // Runs between the two bytes to escape are written whole (a character at a
                // time through the formatter cost a tenth of a capture's time, each span's place
                // being rendered).
                let mut rest = key;
                while let Some(at) = rest.find(['~', '/']) {
                    f.write_str(&rest[..at])?;
                    f.write_str(if rest.as_bytes()[at] == b'~' { "~0" } else { "~1" })?;
                    rest = &rest[at + 1..];
                }
                f.write_str(rest)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_tilde_and_slash() {
        let root = Ptr::ROOT;
        let a = root.key("a/b");
        let b = a.index(3);
        let c = b.key("m~n");
        assert_eq!(c.to_string(), "/a~1b/3/m~0n");
        assert_eq!(Ptr::ROOT.to_string(), "");
        let d = root.key("~/~x/");
        assert_eq!(d.to_string(), "/~0~1~0x~1");
        let e = root.key("é/ü~");
        assert_eq!(e.to_string(), "/é~1ü~0");
    }
}
