//! Text in CTF: strings in event payloads, identifiers and string literals in the
//! metadata.

use std::fmt::Write as _;

/// Appends `s` as a CTF string. A CTF 1.8 string ends at its first NUL, so a NUL
/// cannot be carried inside one: it is written as the two characters `\0`, and so that
/// this cannot be mistaken for a backslash followed by a `0`, a backslash is written as
/// the two characters `\\`. Every other byte is written as it is, then the terminating
/// NUL. A reader gets the text back by reading `\\` as a backslash and `\0` as a NUL.
pub fn put_string(buf: &mut Vec<u8>, s: &str) {
    if !s.bytes().any(|b| b == b'\\' || b == 0) {
        buf.extend_from_slice(s.as_bytes());
    } else {
        for b in s.bytes() {
            match b {
                b'\\' => buf.extend_from_slice(b"\\\\"),
                0 => buf.extend_from_slice(b"\\0"),
                b => buf.push(b),
            }
        }
    }
    buf.push(0);
}

/// `s` as a TSDL identifier.
pub(super) fn ident(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// `s` as a TSDL string literal.
pub(super) fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
