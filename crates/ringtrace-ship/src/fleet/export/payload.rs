//! What every trace format shows of a record: its event's name and category, its
//! payload's first bytes in hex, and its text where it is text (see the
//! [mapping](super#the-mapping-the-same-in-the-three-trace-formats)).

/// The event name of a record.
pub(super) const NAME: &str = "record";
/// The category (target) of a record's event.
pub(super) const CATEGORY: &str = "ringtrace";
/// Payload bytes shown in hex (`head`).
pub(super) const HEAD_BYTES: usize = 16;
/// Characters of a text payload shown (`text`).
pub(super) const TEXT_CHARS: usize = 64;

/// The first [`HEAD_BYTES`] of a payload in lowercase hex.
pub(super) struct Head {
    hex: [u8; 2 * HEAD_BYTES],
    len: usize,
}

impl Head {
    pub(super) fn of(payload: &[u8]) -> Head {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut h = Head { hex: [0; 2 * HEAD_BYTES], len: 0 };
        for (pair, &b) in h.hex.chunks_exact_mut(2).zip(payload.iter().take(HEAD_BYTES)) {
            pair[0] = DIGITS[usize::from(b >> 4)];
            pair[1] = DIGITS[usize::from(b & 15)];
            h.len += 2;
        }
        h
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.hex[..self.len]
    }

    pub(super) fn as_str(&self) -> &str {
        // Hex digits: always ASCII.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
}

/// The text a payload shows (see the module docs): its first [`TEXT_CHARS`]
/// characters where it is text, else `None`.
pub(super) fn text_of(payload: &[u8]) -> Option<&str> {
    let p = payload.strip_suffix(b"\n").map_or(payload, |p| p.strip_suffix(b"\r").unwrap_or(p));
    let s = std::str::from_utf8(p).ok()?;
    if s.is_empty() || s.chars().any(|c| c.is_control() && c != '\t') {
        return None;
    }
    Some(s.char_indices().nth(TEXT_CHARS).map_or(s, |(at, _)| &s[..at]))
}
