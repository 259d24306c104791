//! Reading a recorder directory's records in time order, in place in its rings: a
//! merge of the pieces `ring_scan` found, each read through a cursor holding a window
//! of its ring's bytes.
//!
//! The records come out in the order a stable sort by time of every ring's records,
//! ring after ring, would give: by time, then ring, then position in the ring. A piece
//! is taken into the merge when its first record may be next (the pieces are sorted by
//! their first records), and leaves it at its end: memory is a window per piece being
//! read, about one per ring whose records' times overlap.
//!
//! Every window read is checked against the ring's positions read after it: bytes the
//! ring reclaimed meanwhile (a live process overwriting its oldest records) are not
//! read, the reading going on at the oldest record the ring still holds, and the piece
//! is counted as unread. A record whose bytes are not what opening the directory found
//! (the file changed) ends its piece, counted the same way.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::ops::Range;

use ringtrace::inspect::{At, RingFile};

use super::rings::{self, Piece, RingRecords};

/// Bytes of windows read at once, all rings together (a window holds at least
/// [`MIN_WINDOW`] bytes, and the whole record it starts with).
const WINDOWS: u64 = 2 << 20;
const MIN_WINDOW: u64 = 4 << 10;
const MAX_WINDOW: u64 = 256 << 10;

/// A piece being read: where its next record lies, and a window of its ring's bytes.
struct Cursor {
    piece: usize,
    /// The next record's header.
    pos: u64,
    /// The ring's bytes from position `buf_at`.
    buf: Vec<u8>,
    buf_at: u64,
    /// The time of the last record met: a piece's times never decrease.
    last_ts: u64,
    /// Whether the piece was counted as unread.
    counted: bool,
}

/// A ring as the reading finds it again: opened, or why it cannot be.
enum RingNow<'a> {
    Unopened,
    Open(RingFile<At<&'a File>>),
    Failed(String),
}

/// A reading of a recorder directory's records.
pub(crate) struct RingsReading<'a> {
    records: &'a RingRecords,
    /// The pieces holding a record of the window, in the order of their first records.
    pieces: Vec<&'a Piece>,
    next_piece: usize,
    cursors: Vec<Option<Cursor>>,
    free: Vec<usize>,
    /// Each cursor's next record: (time, ring, position, cursor), earliest first.
    heads: BinaryHeap<Reverse<(u64, u32, u64, usize)>>,
    rings: Vec<RingNow<'a>>,
    /// The cursor whose record was given last: it steps past it on the next call.
    given: Option<usize>,
    spare: Vec<Vec<u8>>,
    window: u64,
    /// Pieces of which records could not be read again since the last call, and why
    /// the first could not.
    unread: u64,
    first_unread: Option<String>,
    kinds: Option<fn(u8) -> bool>,
    times: Range<u64>,
}

impl<'a> RingsReading<'a> {
    /// The records of times `times`; with `kinds`, only those whose kind byte it accepts.
    pub fn new(records: &'a RingRecords, times: Range<u64>, kinds: Option<fn(u8) -> bool>) -> Self {
        let pieces: Vec<&Piece> =
            records.pieces.iter().filter(|p| p.max_ts >= times.start && p.min_ts < times.end).collect();
        let per_ring = WINDOWS / (records.rings.len() as u64).max(1);
        RingsReading {
            records,
            pieces,
            next_piece: 0,
            cursors: Vec::new(),
            free: Vec::new(),
            heads: BinaryHeap::new(),
            rings: records.rings.iter().map(|_| RingNow::Unopened).collect(),
            given: None,
            spare: Vec::new(),
            window: per_ring.clamp(MIN_WINDOW, MAX_WINDOW),
            unread: 0,
            first_unread: None,
            kinds,
            times,
        }
    }

    /// The next record of the window and kinds wanted, in place: its time, lane and
    /// bytes after the stamp (which may not decode: opening counted those). Pieces not
    /// all read again are added to `unread`, and why the first was not to `first`.
    pub fn next_bytes(&mut self, unread: &mut u64, first: &mut Option<String>) -> Option<(u64, u32, &[u8])> {
        let got = self.next_head();
        *unread += std::mem::take(&mut self.unread);
        if first.is_none() {
            *first = self.first_unread.take();
        }
        let (ts, ring, pos, c) = got?;
        let cur = self.cursors[c].as_ref().expect("a head names a cursor");
        let off = (pos - cur.buf_at) as usize;
        // `step` found the whole record in the window.
        let (len, _) = rings::committed(&cur.buf, off).unwrap_or((0, 0));
        let payload = cur.buf.get(off + 8..off + 8 + len as usize).unwrap_or(&[]);
        Some((ts, self.records.rings[ring as usize].slot, payload.get(8..).unwrap_or(&[])))
    }

    /// The next record's head, its cursor's window holding it.
    fn next_head(&mut self) -> Option<(u64, u32, u64, usize)> {
        if let Some(c) = self.given.take() {
            self.step(c, true);
        }
        // Each turn takes a piece into the merge or gives a record: bounded by both.
        loop {
            let top = self.heads.peek().map(|Reverse((ts, ring, pos, _))| (*ts, *ring, *pos));
            if let Some(p) = self.pieces.get(self.next_piece) {
                if top.is_none_or(|t| p.first_key() < t) {
                    let p = self.next_piece;
                    self.next_piece += 1;
                    self.start(p);
                    continue;
                }
            }
            let Reverse(head) = self.heads.pop()?;
            self.given = Some(head.3);
            return Some(head);
        }
    }

    /// Takes piece `p` into the merge.
    fn start(&mut self, p: usize) {
        let piece = self.pieces[p];
        let cur = Cursor {
            piece: p,
            pos: piece.start,
            buf: self.spare.pop().unwrap_or_default(),
            buf_at: piece.start,
            last_ts: 0,
            counted: false,
        };
        let c = match self.free.pop() {
            Some(c) => {
                self.cursors[c] = Some(cur);
                c
            }
            None => {
                self.cursors.push(Some(cur));
                self.cursors.len() - 1
            }
        };
        if let Some(c) = self.cursors[c].as_mut() {
            c.buf.clear();
        }
        self.step(c, false);
    }

    /// Moves cursor `c` to its next record wanted (past the one it is at, if `past`),
    /// and puts it among the heads; at its piece's end, retires it.
    fn step(&mut self, c: usize, mut past: bool) {
        let Some(mut cur) = self.cursors[c].take() else { return };
        let piece = *self.pieces[cur.piece];
        // Each turn moves `pos` on by a record, or reads a window holding the next
        // record whole (then the turn after moves on), or ends the piece.
        while cur.pos < piece.end {
            let off = (cur.pos - cur.buf_at) as usize;
            let Some((len, fp)) = rings::committed(&cur.buf, off) else {
                if !past && off + 8 > cur.buf.len() {
                    if !self.fill(&mut cur, &piece, 8) {
                        break;
                    }
                    continue;
                }
                self.changed(&mut cur, &piece, "a record is not where it was");
                break;
            };
            let Some(end) = cur.pos.checked_add(fp).filter(|&e| e <= piece.end) else {
                self.changed(&mut cur, &piece, "a record is not where it was");
                break;
            };
            if off as u64 + fp > cur.buf.len() as u64 {
                // Not whole in the window (never the record just given: it was).
                if past || !self.fill(&mut cur, &piece, fp) {
                    break;
                }
                continue;
            }
            if past {
                past = false;
                cur.pos = end;
                continue;
            }
            let payload = &cur.buf[off + 8..][..len as usize];
            let Some((ts, body)) = rings::stamped(&self.records.channel, payload) else {
                // No stamp: counted when the directory was opened.
                cur.pos = end;
                continue;
            };
            if ts < cur.last_ts {
                self.changed(&mut cur, &piece, "its records' times are not what they were");
                break;
            }
            cur.last_ts = ts;
            let kind = body.first().copied();
            if !self.times.contains(&ts) || !self.kinds.is_none_or(|k| kind.is_some_and(k)) {
                cur.pos = end;
                continue;
            }
            self.heads.push(Reverse((ts, piece.ring, cur.pos, c)));
            self.cursors[c] = Some(cur);
            return;
        }
        self.spare.push(std::mem::take(&mut cur.buf));
        self.free.push(c);
    }

    /// Reads the window of `cur`'s ring from its next record, at least `want` bytes of
    /// it, then checks that the ring did not reclaim them meanwhile: if it did, the
    /// cursor moves to the oldest record the ring holds. False if the piece ends.
    fn fill(&mut self, cur: &mut Cursor, piece: &Piece, want: u64) -> bool {
        let ring = &self.records.rings[piece.ring as usize];
        // Each turn reads a window, and ends or moves `pos` on to where the ring now
        // starts.
        loop {
            let n = self.window.max(want).min(piece.end - cur.pos);
            cur.buf.resize(n as usize, 0);
            cur.buf_at = cur.pos;
            if let Err(e) = rings::read_data(&self.records.file, ring, cur.pos, &mut cur.buf) {
                cur.buf.clear();
                self.changed(cur, piece, &format!("cannot read it: {e}"));
                return false;
            }
            if ring.held.is_some() {
                return true;
            }
            let lo = match self.ring_start(piece.ring as usize) {
                Ok(lo) => lo,
                Err(why) => {
                    cur.buf.clear();
                    self.changed(cur, piece, &why);
                    return false;
                }
            };
            if lo <= cur.pos {
                return true;
            }
            // Overwritten since the directory was opened: what is left starts at `lo`.
            cur.buf.clear();
            self.changed(cur, piece, "overwritten since the directory was opened");
            if lo >= piece.end || lo % 8 != 0 {
                return false;
            }
            cur.pos = lo;
        }
    }

    /// Where ring `i`'s oldest record is now (the start of its window).
    fn ring_start(&mut self, i: usize) -> Result<u64, String> {
        let at = &self.records.rings[i];
        if let RingNow::Unopened = self.rings[i] {
            self.rings[i] = match RingFile::from_source(At::new(&self.records.file, at.image)) {
                Ok(r) if *r.header() == at.header => RingNow::Open(r),
                Ok(_) => RingNow::Failed("its header changed since the directory was opened".into()),
                Err(e) => RingNow::Failed(crate::error::with_causes(&e)),
            };
        }
        match &self.rings[i] {
            RingNow::Open(r) => {
                r.state().map(|s| s.window(at.header.mode).0).map_err(|e| crate::error::with_causes(&e))
            }
            RingNow::Failed(why) => Err(why.clone()),
            RingNow::Unopened => Err("not opened".into()),
        }
    }

    /// Counts `cur`'s piece as unread (once), with why if it is the first; the cursor's
    /// records up to where it goes on next are not read.
    fn changed(&mut self, cur: &mut Cursor, piece: &Piece, why: &str) {
        if !cur.counted {
            cur.counted = true;
            self.unread += 1;
            if self.first_unread.is_none() {
                let slot = self.records.rings[piece.ring as usize].slot;
                self.first_unread = Some(format!("ring {slot}, records from position {}: {why}", cur.pos));
            }
        }
    }
}

impl std::fmt::Debug for RingsReading<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RingsReading(piece {} of {}, {} being read)", self.next_piece, self.pieces.len(), self.heads.len())
    }
}
