//! Bytes on one line for people: as text with escapes, or as hex.

use std::fmt::Write as _;

/// Appends `bytes` as text on one line: valid UTF-8 as is, with `\n`, `\r`, `\t`, `\\`
/// and `\u{..}` escapes for other control characters and `\xNN` for bytes that are
/// not UTF-8.
pub fn escape_text(out: &mut String, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
}

/// Appends `bytes` as lowercase hex.
pub fn hex(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
}
