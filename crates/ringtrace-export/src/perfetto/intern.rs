//! A sequence's intern tables: strings numbered (iids) as the sequence first sends them.

use foldhash::HashMap;

/// Strings each intern table of a sequence holds at most: past it, a string is written
/// in full in each packet that uses it (events named by formatted messages would
/// otherwise make the tables grow with the trace).
pub(super) const MAX_INTERNED: usize = 4096;

/// Addresses remembered per table (a direct-mapped cache, see [`Table::intern`]).
const SLOTS: usize = 32;

/// A remembered string: its address, length, iid, and its bytes as [`words`] (for one
/// of at most 16 bytes).
#[derive(Clone, Copy, Default)]
struct Slot {
    ptr: usize,
    len: usize,
    iid: u32,
    words: (u64, u64),
}

/// An intern table of a sequence.
pub(super) struct Table {
    /// The strings by iid - 1 (iids start at 1: 0 means "none").
    texts: Vec<Box<str>>,
    by_text: HashMap<Box<str>, u32>,
    /// Recent strings by their address and length, and their iid: a name handed again
    /// from where it lives (a callsite's, a constant) is found without hashing its
    /// text. Its bytes are compared before the iid is taken (a short one's with the
    /// copy the slot keeps), so an address that now holds another string is no more
    /// than a miss.
    slots: [Slot; SLOTS],
    /// The iid of the last string found or added: an event's message repeats from event
    /// to event, each time at another address.
    last: u32,
}

impl Table {
    pub(super) fn new() -> Self {
        Table { texts: Vec::new(), by_text: HashMap::default(), slots: [Slot::default(); SLOTS], last: 0 }
    }

    #[inline]
    fn slot(s: &str) -> usize {
        let key = (s.as_ptr() as usize as u64) ^ ((s.len() as u64) << 48);
        // Fibonacci hashing: the top bits of the product index the slots.
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize
    }

    /// Whether `iid` is `s`.
    fn is(&self, iid: u32, s: &str) -> bool {
        self.texts.get((iid as usize).wrapping_sub(1)).is_some_and(|t| **t == *s)
    }

    /// Interns `s`: its iid and whether it is new (to be sent in this packet); `None`
    /// once the table is full and `s` is not in it.
    #[inline]
    pub(super) fn intern(&mut self, s: &str) -> Option<(u64, bool)> {
        let at = Self::slot(s);
        let slot = self.slots[at];
        let b = s.as_bytes();
        if slot.ptr == b.as_ptr() as usize
            && slot.len == b.len()
            && slot.iid != 0
            && if b.len() <= 16 { slot.words == words(b) } else { self.is(slot.iid, s) }
        {
            return Some((u64::from(slot.iid), false));
        }
        self.intern_slow(s, at)
    }

    fn intern_slow(&mut self, s: &str, at: usize) -> Option<(u64, bool)> {
        let (iid, new) = if self.is(self.last, s) {
            (self.last, false)
        } else if let Some(&iid) = self.by_text.get(s) {
            (iid, false)
        } else if self.texts.len() >= MAX_INTERNED {
            return None;
        } else {
            self.texts.push(s.into());
            let iid = self.texts.len() as u32;
            self.by_text.insert(s.into(), iid);
            (iid, true)
        };
        let b = s.as_bytes();
        let words = if b.len() <= 16 { words(b) } else { (0, 0) };
        self.slots[at] = Slot { ptr: b.as_ptr() as usize, len: b.len(), iid, words };
        self.last = iid;
        Some((u64::from(iid), new))
    }
}

/// The bytes of `s`, of at most 16, as two words: two strings of the same length up
/// to 16 are equal if and only if their words are (a string of 8 to 16 bytes is read
/// as its first 8 and its last 8, overlapping; 4 to 7 as its first 4 and last 4;
/// fewer byte by byte), read without a call to `memcmp`.
#[inline]
fn words(s: &[u8]) -> (u64, u64) {
    let n = s.len();
    let at = |i: usize, w: usize| s[i..i + w].iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    match n {
        0..4 => (at(0, n), 0),
        4..8 => (at(0, 4), at(n - 4, 4)),
        _ => {
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&s[i..i + 8]);
                u64::from_le_bytes(w)
            };
            (word(0), word(n - 8))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holding_another_text_is_a_miss_not_a_wrong_iid() {
        let mut t = Table::new();
        let mut s = String::from("alpha");
        assert_eq!(t.intern(&s), Some((1, true)));
        assert_eq!(t.intern(&s), Some((1, false)));
        // The same bytes, rewritten in place: same address and length, other text.
        s.replace_range(.., "gamma");
        assert_eq!(t.intern(&s), Some((2, true)));
        assert_eq!(t.intern("alpha"), Some((1, false)));
        assert_eq!(t.intern(&s), Some((2, false)));
    }

    #[test]
    fn words_are_equal_for_equal_strings_only() {
        let texts: Vec<String> = (0..=16).map(|n| "abcdefghijklmnopqrstuvwxyz"[..n].to_owned()).collect();
        for a in &texts {
            for b in texts.iter().filter(|b| b.len() == a.len()) {
                assert_eq!(words(a.as_bytes()) == words(b.as_bytes()), a == b);
                // One bit changed, at each place.
                for i in 0..b.len() {
                    let mut c = b.clone().into_bytes();
                    c[i] ^= 1;
                    assert_ne!(words(a.as_bytes()), words(&c), "{a:?} and {c:?}");
                }
            }
        }
    }

    #[test]
    fn a_full_table_interns_no_more_but_finds_what_it_has() {
        let mut t = Table::new();
        for i in 0..MAX_INTERNED {
            assert_eq!(t.intern(&format!("n{i}")), Some((i as u64 + 1, true)));
        }
        assert_eq!(t.intern("one more"), None);
        assert_eq!(t.intern("n7"), Some((8, false)));
    }
}
