use std::error::Error;

use super::*;
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh directory under the system's temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ringtrace-ship-state-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }

    /// The names in the directory, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(&self.0).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn entry(source: &str, n: u64) -> SourceState {
    let counts =
        SourceCounts { shipped: n + 4, too_large: n + 5, ring_lost: n + 6, spooled: 0, spool_lost: 0, overwritten: n };
    let (consumed, skipped) = (n + 7, n + 8);
    SourceState {
        source: source.to_string(),
        dev: n,
        ino: n + 1,
        position: n + 2,
        next_seq: n + 3,
        consumed,
        skipped,
        counts,
    }
}

fn state_of(host: &str, names: &[&str]) -> State {
    let sources = names.iter().zip(0..).map(|(s, n)| entry(s, n * 10)).collect();
    State { host: host.to_string(), sources, updated_ns: 7, failed_rounds: 8, spool_head: 0, spool_tail: 0 }
}

/// The bytes with the checksum recomputed after `change` (to get past the checksum).
fn rechecksummed(mut bytes: Vec<u8>, change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    bytes.truncate(bytes.len() - CRC);
    change(&mut bytes);
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

fn damaged_message(result: Result<State, StateError>) -> String {
    match result {
        Err(StateError::Damaged { damage, .. }) => damage.to_string(),
        other => panic!("expected Damaged, got {other:?}"),
    }
}

fn arb_entry() -> impl Strategy<Value = SourceState> {
    // Short ASCII names collide, so `set` replaces some entries.
    let name = prop_oneof!["[a-c]{0,3}", "\\PC{0,40}"];
    let counts = prop::array::uniform6(any::<u64>()).prop_map(
        |[shipped, too_large, ring_lost, spooled, spool_lost, overwritten]| SourceCounts {
            shipped,
            too_large,
            ring_lost,
            spooled,
            spool_lost,
            overwritten,
        },
    );
    (name, prop::array::uniform6(any::<u64>()), counts).prop_map(
        |(source, [dev, ino, position, next_seq, consumed, skipped], counts)| SourceState {
            source,
            dev,
            ino,
            position,
            next_seq,
            consumed,
            skipped,
            counts,
        },
    )
}

fn arb_state() -> impl Strategy<Value = State> {
    ("\\PC{0,60}", prop::collection::vec(arb_entry(), 0..20), any::<u64>(), any::<u64>(), any::<(u64, u64)>()).prop_map(
        |(host, entries, updated_ns, failed_rounds, (a, b))| {
            let (spool_head, spool_tail) = (a.min(b), a.max(b));
            let mut state = State { host, sources: Vec::new(), updated_ns, failed_rounds, spool_head, spool_tail };
            for e in entries {
                state.set(e);
            }
            state
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn encode_decode_round_trip(state in arb_state()) {
        let bytes = state.encode();
        let names: usize = state.sources.iter().map(|s| s.source.len()).sum();
        prop_assert_eq!(bytes.len(), HEADER + state.host.len() + ENTRY * state.sources.len() + names + CRC);
        prop_assert_eq!(State::decode(&bytes).unwrap(), state);
    }

    #[test]
    fn store_load_round_trip(first in arb_state(), second in arb_state()) {
        let dir = TempDir::new("prop");
        let path = dir.0.join("state");
        first.store(&path).unwrap();
        prop_assert_eq!(State::load(&path).unwrap(), Some(first));
        second.store(&path).unwrap();
        prop_assert_eq!(State::load(&path).unwrap(), Some(second));
        prop_assert_eq!(dir.names(), vec!["state".to_string()]);
    }

    #[test]
    fn truncation_is_refused(state in arb_state(), cut in any::<prop::sample::Index>()) {
        let bytes = state.encode();
        let len = cut.index(bytes.len());
        prop_assert!(State::decode(&bytes[..len]).is_err(), "prefix of {} bytes of {} accepted", len, bytes.len());
    }

    #[test]
    fn single_byte_change_is_refused(state in arb_state(), at in any::<prop::sample::Index>(), flip in 1..=255u8) {
        let mut bytes = state.encode();
        let i = at.index(bytes.len());
        bytes[i] ^= flip;
        prop_assert!(State::decode(&bytes).is_err(), "byte {} xor {:#04x} accepted", i, flip);
    }

    #[test]
    fn junk_is_refused(junk in prop::collection::vec(any::<u8>(), 0..512), magic in any::<bool>()) {
        let mut bytes = if magic { [&MAGIC[..], &VERSION.to_le_bytes()].concat() } else { Vec::new() };
        bytes.extend_from_slice(&junk);
        prop_assert!(State::decode(&bytes).is_err());
    }

    /// Bytes changed, inserted or removed behind a recomputed checksum may decode (a
    /// changed number); if they do, they are exactly what the decoded state encodes to.
    #[test]
    fn edits_behind_a_valid_checksum_decode_only_canonically(
        state in arb_state(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4),
    ) {
        let bytes = rechecksummed(state.encode(), |body| {
            for (at, byte, op) in edits {
                match op {
                    0 => {
                        let i = at.index(body.len());
                        body[i] = byte;
                    }
                    1 => body.insert(at.index(body.len() + 1), byte),
                    _ => {
                        body.remove(at.index(body.len()));
                    }
                }
            }
        });
        if let Ok(decoded) = State::decode(&bytes) {
            prop_assert_eq!(decoded.encode(), bytes);
        }
    }
}

#[test]
fn encoding_matches_documented_layout() {
    let mut ab = entry("ab", 0x0102);
    (ab.counts.spooled, ab.counts.spool_lost, ab.counts.overwritten) = (0x0109, 0x010a, 0x010b);
    (ab.consumed, ab.skipped) = (0x010c, 0x010d);
    let state = State {
        host: "hé".to_string(),
        sources: vec![ab],
        updated_ns: 9,
        failed_rounds: 10,
        spool_head: 11,
        spool_tail: 12,
    };
    let bytes = state.encode();
    let mut expected = b"RTSHIPST".to_vec();
    for n in [4u32, 3, 1] {
        expected.extend_from_slice(&n.to_le_bytes());
    }
    for n in [9u64, 10, 11, 12] {
        expected.extend_from_slice(&n.to_le_bytes());
    }
    expected.extend_from_slice("hé".as_bytes());
    expected.extend_from_slice(&2u32.to_le_bytes());
    for n in 0x0102u64..=0x010d {
        expected.extend_from_slice(&n.to_le_bytes());
    }
    expected.extend_from_slice(b"ab");
    let crc = crc32c::crc32c(&expected);
    expected.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(bytes, expected);
}

#[test]
fn set_keeps_sorted_and_replaces() {
    let mut state = State::default();
    for (name, n) in [("m", 1), ("b", 2), ("z", 3), ("é", 4), ("a", 5)] {
        state.set(entry(name, n));
    }
    let names: Vec<&str> = state.sources.iter().map(|s| s.source.as_str()).collect();
    assert_eq!(names, ["a", "b", "m", "z", "é"]);
    state.set(entry("m", 100));
    assert_eq!(state.sources.len(), 5);
    assert_eq!(state.get("m"), Some(&entry("m", 100)));
    assert_eq!(state.get("é"), Some(&entry("é", 4)));
    assert_eq!(state.get("c"), None);
    assert_eq!(state.sources[2], entry("m", 100));
}

#[test]
fn load_of_missing_file_is_none() {
    let dir = TempDir::new("missing");
    assert!(State::load(&dir.0.join("state")).unwrap().is_none());
    assert!(State::load(&dir.0.join("no-such-dir").join("state")).unwrap().is_none());
}

#[test]
fn store_replaces_file_and_leaves_no_temporary() {
    let dir = TempDir::new("replace");
    let path = dir.0.join("state");
    let old = state_of("host-a", &["one", "two"]);
    old.store(&path).unwrap();
    let new = state_of("host-b", &["three"]);
    new.store(&path).unwrap();
    assert_eq!(State::load(&path).unwrap(), Some(new));
    assert_eq!(dir.names(), ["state"]);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o077, 0);
}

#[test]
fn store_removes_stale_temporary_of_same_pid() {
    let dir = TempDir::new("stale");
    let path = dir.0.join("state");
    let stale = dir.0.join(format!(".state.tmp.{}", std::process::id()));
    fs::write(&stale, b"left by a crashed run").unwrap();
    let state = state_of("host", &["a"]);
    state.store(&path).unwrap();
    assert_eq!(State::load(&path).unwrap(), Some(state));
    assert_eq!(dir.names(), ["state"]);
}

#[test]
fn store_refuses_invalid_state_and_keeps_the_file() {
    let dir = TempDir::new("invalid");
    let path = dir.0.join("state");
    let good = state_of("host", &["a", "b"]);
    good.store(&path).unwrap();
    let long_name = "n".repeat(MAX_NAME + 1);
    let invalid = [
        state_of(&"h".repeat(MAX_HOST + 1), &[]),
        state_of("host", &[&long_name]),
        state_of("host", &["b", "a"]),
        state_of("host", &["a", "a"]),
    ];
    for state in invalid {
        let err = state.store(&path).unwrap_err();
        assert!(matches!(err, StateError::Invalid { .. }), "{err:?}");
        assert!(err.to_string().contains(&path.display().to_string()), "{err}");
        // Encoded anyway, such a state is refused when read back.
        assert!(State::decode(&state.encode()).is_err(), "{state:?}");
    }
    assert_eq!(State::load(&path).unwrap(), Some(good));
    assert_eq!(dir.names(), ["state"]);
    // The longest host and name are accepted.
    let longest = state_of(&"h".repeat(MAX_HOST), &[&"n".repeat(MAX_NAME)]);
    longest.store(&path).unwrap();
    assert_eq!(State::load(&path).unwrap(), Some(longest));
}

#[test]
fn decode_refuses_bad_structure_behind_a_valid_checksum() {
    let bytes = state_of("host", &["a", "b"]).encode();
    let trailing = rechecksummed(bytes.clone(), |b| b.push(0));
    assert!(damaged_message(State::decode(&trailing)).contains("after the last entry"));
    let too_many = rechecksummed(bytes.clone(), |b| b[16..20].copy_from_slice(&u32::MAX.to_le_bytes()));
    assert!(damaged_message(State::decode(&too_many)).contains("sources announced"));
    // The host name starts at 52, the first entry's name length at 56.
    let bad_utf8 = rechecksummed(bytes.clone(), |b| b[HEADER] = 0xff);
    assert!(damaged_message(State::decode(&bad_utf8)).contains("not UTF-8"));
    let at = HEADER + 4;
    let long_name = rechecksummed(bytes.clone(), |b| b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes()));
    assert!(damaged_message(State::decode(&long_name)).contains("more than 4096"));
    let mut version = bytes.clone();
    version[8] = 5;
    assert!(damaged_message(State::decode(&version)).contains("unsupported version 5"));
    let inverted = rechecksummed(bytes.clone(), |b| b[36..44].copy_from_slice(&u64::MAX.to_le_bytes()));
    assert!(damaged_message(State::decode(&inverted)).contains("past its tail"));
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert!(damaged_message(State::decode(&magic)).contains("bad magic"));
    let mut crc = bytes;
    *crc.last_mut().unwrap() ^= 1;
    assert!(damaged_message(State::decode(&crc)).contains("checksum mismatch"));
}

#[test]
fn damaged_file_error_names_the_path() {
    let dir = TempDir::new("damaged");
    let path = dir.0.join("state");
    let mut bytes = state_of("host", &["a"]).encode();
    bytes[25] ^= 0x10;
    fs::write(&path, &bytes).unwrap();
    let err = State::load(&path).unwrap_err();
    assert!(matches!(err, StateError::Damaged { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()) && message.contains("checksum"), "{message}");
}

#[test]
fn load_refuses_file_over_size_cap_and_directories() {
    let dir = TempDir::new("big");
    let path = dir.0.join("state");
    // Sparse: no gigabyte is written or read.
    File::create(&path).unwrap().set_len(MAX_FILE + 1).unwrap();
    let message = State::load(&path).unwrap_err().to_string();
    assert!(message.contains("1 GiB") && message.contains(&path.display().to_string()), "{message}");
    let message = State::load(&dir.0).unwrap_err().to_string();
    assert!(message.contains("not a regular file"), "{message}");
}

#[test]
fn io_error_names_the_path_and_has_a_source() {
    let dir = TempDir::new("io");
    let file = dir.0.join("file");
    fs::write(&file, b"").unwrap();
    let path = file.join("state"); // a path under a regular file: ENOTDIR
    let err = State::load(&path).unwrap_err();
    assert!(matches!(err, StateError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    assert!(err.source().is_some());
    let err = state_of("host", &[]).store(&path).unwrap_err();
    assert!(matches!(err, StateError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains(&dir.0.display().to_string()), "{err}");
    assert!(err.source().is_some());
    assert_eq!(dir.names(), ["file"]);
}

#[test]
fn failed_store_removes_its_temporary() {
    let dir = TempDir::new("rename");
    let path = dir.0.join("state");
    // A directory in the way: the temporary file is written, the rename fails.
    fs::create_dir(&path).unwrap();
    fs::write(path.join("inside"), b"").unwrap();
    let err = state_of("host", &["a"]).store(&path).unwrap_err();
    assert!(matches!(err, StateError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("renaming"), "{err}");
    assert_eq!(dir.names(), ["state"]);
}

/// A version 2 file (an agent before the spool) reads, its spool fields 0.
#[test]
fn version_2_reads_without_the_spools_fields() {
    let mut v2 = b"RTSHIPST".to_vec();
    for n in [2u32, 1, 1] {
        v2.extend_from_slice(&n.to_le_bytes());
    }
    for n in [9u64, 10] {
        v2.extend_from_slice(&n.to_le_bytes());
    }
    v2.extend_from_slice(b"h");
    v2.extend_from_slice(&1u32.to_le_bytes());
    for n in [1u64, 2, 3, 4, 5, 6, 7] {
        v2.extend_from_slice(&n.to_le_bytes());
    }
    v2.extend_from_slice(b"a");
    let crc = crc32c::crc32c(&v2);
    v2.extend_from_slice(&crc.to_le_bytes());
    let state = State::decode(&v2).unwrap();
    assert_eq!((state.host.as_str(), state.updated_ns, state.failed_rounds), ("h", 9, 10));
    assert_eq!((state.spool_head, state.spool_tail), (0, 0));
    let c = state.sources[0].counts;
    assert_eq!((c.shipped, c.too_large, c.ring_lost, c.spooled, c.spool_lost), (5, 6, 7, 0, 0));
    assert_eq!((state.sources[0].position, state.sources[0].next_seq), (3, 4));
    // Cut anywhere, refused.
    for n in 0..v2.len() {
        assert!(State::decode(&v2[..n]).is_err(), "{n}");
    }
}

/// A version 3 file (an agent before flight recorders) reads, the new fields 0.
#[test]
fn version_3_reads_without_the_flight_recorders_fields() {
    let state = state_of("h", &["a", "b"]);
    let v4 = state.encode();
    // Version 3: the same header, entries without their last 24 bytes.
    let mut v3 = v4[..HEADER + 1].to_vec();
    v3[8..12].copy_from_slice(&3u32.to_le_bytes());
    let mut at = HEADER + 1;
    for s in &state.sources {
        v3.extend_from_slice(&v4[at..at + ENTRY_V3]);
        v3.extend_from_slice(s.source.as_bytes());
        at += ENTRY + s.source.len();
    }
    let crc = crc32c::crc32c(&v3);
    v3.extend_from_slice(&crc.to_le_bytes());
    let read = State::decode(&v3).unwrap();
    let want: Vec<SourceState> = state
        .sources
        .iter()
        .map(|s| SourceState {
            consumed: 0,
            skipped: 0,
            counts: SourceCounts { overwritten: 0, ..s.counts },
            ..s.clone()
        })
        .collect();
    assert_eq!(read.sources, want);
    for n in 0..v3.len() {
        assert!(State::decode(&v3[..n]).is_err(), "{n}");
    }
}

#[test]
fn version_1_is_refused_with_what_to_do() {
    let bytes = rechecksummed(state_of("h", &["a"]).encode(), |b| b[8..12].copy_from_slice(&1u32.to_le_bytes()));
    let what = damaged_message(State::decode(&bytes));
    assert!(what.contains("version 1") && what.contains("move it aside"), "{what}");
}

#[test]
fn the_state_reads_for_people() {
    let mut state = state_of("web-1", &["/dev/shm/a.ring"]);
    state.updated_ns = 1_700_000_000_000_000_000;
    assert_eq!(
        state.to_string(),
        "host \"web-1\": stored 2023-11-14T22:13:20Z, 8 failed rounds\n  \"/dev/shm/a.ring\": 4 shipped, 5 too large \
         to ship, 6 refused by the ring; next sequence 3, position 2\n"
    );
    (state.spool_head, state.spool_tail) = (4, 6);
    state.sources[0].counts.spooled = 30;
    state.sources[0].counts.spool_lost = 2;
    assert_eq!(
        state.to_string(),
        "host \"web-1\": stored 2023-11-14T22:13:20Z, 8 failed rounds, 2 round(s) in the spool\n  \"/dev/shm/a.ring\": 4 \
         shipped, 5 too large to ship, 6 refused by the ring, 30 in the spool, 2 lost from the spool; next sequence 3, \
         position 2\n"
    );
}

/// The wording of what is wrong, in full: people and scripts read it.
#[test]
fn damage_messages_keep_their_wording() {
    let bytes = state_of("host", &["a", "b"]).encode();
    assert_eq!(
        damaged_message(State::decode(&bytes[..10])),
        "truncated: 10 bytes, fewer than the 40 of an empty state"
    );
    let trailing = rechecksummed(bytes.clone(), |b| b.push(0));
    assert_eq!(damaged_message(State::decode(&trailing)), "1 bytes after the last entry");
    let too_many = rechecksummed(bytes.clone(), |b| b[16..20].copy_from_slice(&u32::MAX.to_le_bytes()));
    assert_eq!(damaged_message(State::decode(&too_many)), "4294967295 sources announced, but only 202 bytes follow");
    let at = HEADER + 4;
    let long_name = rechecksummed(bytes.clone(), |b| b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes()));
    assert_eq!(damaged_message(State::decode(&long_name)), "source #0: name of 4294967295 bytes, more than 4096");
    let long_host = rechecksummed(bytes.clone(), |b| b[12..16].copy_from_slice(&256u32.to_le_bytes()));
    assert_eq!(damaged_message(State::decode(&long_host)), "host name of 256 bytes, more than 255");
    let mut version = bytes.clone();
    version[8] = 5;
    assert_eq!(damaged_message(State::decode(&version)), "unsupported version 5 (this agent reads versions 2 to 4)");
    let version_1 = rechecksummed(bytes.clone(), |b| b[8..12].copy_from_slice(&1u32.to_le_bytes()));
    assert_eq!(
        damaged_message(State::decode(&version_1)),
        "version 1, written by an earlier ringtrace-ship (this one reads versions 2 to 4): move it aside to start \
         the sources over from their rings' positions"
    );
    let inverted = rechecksummed(bytes.clone(), |b| b[36..44].copy_from_slice(&7u64.to_le_bytes()));
    assert_eq!(damaged_message(State::decode(&inverted)), "the spool's head 7 is past its tail 0");
    let mut magic = bytes;
    magic[0] = b'\n';
    assert_eq!(damaged_message(State::decode(&magic)), "bad magic \"\\nTSHIPST\", not a ringtrace-ship state file");
    let unsorted = state_of("host", &["b", "a"]);
    assert_eq!(
        damaged_message(State::decode(&unsorted.encode())),
        "source #1: \"a\" after \"b\": unsorted or repeated"
    );
    let why = |state: &State| match state.store(Path::new("/nonexistent/state")) {
        Err(StateError::Invalid { why, .. }) => why.to_string(),
        other => panic!("expected Invalid, got {other:?}"),
    };
    assert_eq!(why(&unsorted), "source \"a\" after \"b\": unsorted or repeated");
    assert_eq!(why(&state_of(&"h".repeat(256), &[])), "host name of 256 bytes, more than 255");
    assert_eq!(why(&state_of("h", &[&"n".repeat(4097)])), "source name of 4097 bytes, more than 4096");
    let mut head = state_of("h", &[]);
    head.spool_head = 3;
    assert_eq!(why(&head), "the spool's head 3 is past its tail 0");
}
