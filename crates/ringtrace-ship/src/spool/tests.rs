use std::collections::VecDeque;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use proptest::prelude::*;

use super::layout::VERSION;
use super::*;

/// A directory of its own for each test case, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(what: &str) -> Dir {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("ringtrace-spool-{what}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(&base).unwrap();
        Dir(base)
    }

    fn spool(&self) -> PathBuf {
        self.0.join("spool")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn part() -> impl Strategy<Value = SpoolPart> {
    ("[a-z/#0-9]{0,12}", 0u64..1_000_000, prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..4))
        .prop_map(|(source, records, messages)| SpoolPart { source, records, messages })
}

fn round() -> impl Strategy<Value = SpoolRound> {
    ("[a-z0-9]{0,8}", any::<u64>(), prop::collection::vec(part(), 0..4)).prop_map(|(host, serial, parts)| SpoolRound {
        host,
        serial,
        parts,
    })
}

proptest! {
    #[test]
    fn rounds_round_trip(r in round()) {
        prop_assert_eq!(SpoolRound::decode(&r.encode()).unwrap(), r);
    }

    /// Every byte of a file matters: any single change is refused, never misread.
    #[test]
    fn every_single_byte_change_is_refused(r in round(), at in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let mut bytes = r.encode();
        let i = at.index(bytes.len());
        bytes[i] ^= flip;
        prop_assert!(SpoolRound::decode(&bytes).is_err());
    }

    /// Cut anywhere, a file is refused.
    #[test]
    fn truncated_files_are_refused(r in round(), at in any::<prop::sample::Index>()) {
        let bytes = r.encode();
        let n = at.index(bytes.len());
        prop_assert!(SpoolRound::decode(&bytes[..n]).is_err());
    }

    /// Bytes from anywhere (lengths announcing more than follows included, behind a
    /// valid checksum) are refused or read, never a panic or an allocation past them.
    #[test]
    fn any_bytes_behind_a_valid_checksum_never_panic(mut body in prop::collection::vec(any::<u8>(), 0..256),
                                                     prefix in any::<bool>()) {
        if prefix && body.len() >= 12 {
            body[..8].copy_from_slice(&MAGIC);
            body[8..12].copy_from_slice(&VERSION.to_le_bytes());
        }
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        let _ = SpoolRound::decode(&body);
    }
}

/// What the agent does to the spool, drawn.
#[derive(Clone, Debug)]
enum Op {
    /// Spool a round of these parts; the state is stored (the tail advances) unless
    /// the agent "crashes" before that.
    Write(Vec<SpoolPart>, bool),
    /// The oldest round was delivered: the state's head passes it (stored), then the
    /// file goes, unless the agent "crashes" between.
    Deliver(bool),
    /// The agent restarts on the stored state.
    Reopen,
    /// Something damages the oldest pending file, then the agent restarts.
    Damage,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (prop::collection::vec(part(), 1..3), prop::bool::weighted(0.9)).prop_map(|(p, s)| Op::Write(p, s)),
        3 => prop::bool::weighted(0.8).prop_map(Op::Deliver),
        1 => Just(Op::Reopen),
        1 => Just(Op::Damage),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The spool against a model: what the stored state says is pending is exactly
    /// what the spool holds after any sequence of writes, deliveries, crashes between
    /// a step and its state store, restarts and damaged files; a damaged file is
    /// reported, never read as records; nothing past the stored tail survives a
    /// restart (its records are still in the rings).
    #[test]
    fn the_spool_keeps_exactly_what_the_stored_state_says(ops in prop::collection::vec(op(), 1..24)) {
        let dir = Dir::new("model");
        // The stored state's head and tail, and the model's pending rounds.
        let (mut head, mut tail) = (0u64, 0u64);
        let mut model: VecDeque<(u64, Vec<(String, u64)>)> = VecDeque::new();
        let (mut spool, _) = Spool::open(&dir.spool(), "h", 1 << 30, head, tail).unwrap();
        for op in ops {
            match op {
                Op::Write(parts, stored) => {
                    let counts: Vec<_> = parts.iter().map(|p| (p.source.clone(), p.records)).collect();
                    let serial = spool.write(parts).unwrap();
                    prop_assert_eq!(serial, tail);
                    if stored {
                        tail += 1;
                        model.push_back((serial, counts));
                    } else {
                        // Crash before the state store: a restart on the old tail.
                        drop(spool);
                        let (s, opened) = Spool::open(&dir.spool(), "h", 1 << 30, head, tail).unwrap();
                        prop_assert_eq!(opened.removed, 1);
                        spool = s;
                    }
                }
                Op::Deliver(removed) => {
                    if model.pop_front().is_none() { continue; }
                    head += 1;
                    if removed {
                        prop_assert!(spool.pop(false).is_some());
                    } else {
                        // Crash after storing the head, before removing the file.
                        drop(spool);
                        let (s, opened) = Spool::open(&dir.spool(), "h", 1 << 30, head, tail).unwrap();
                        prop_assert_eq!(opened.removed, 1);
                        spool = s;
                    }
                }
                Op::Reopen => {
                    drop(spool);
                    let (s, opened) = Spool::open(&dir.spool(), "h", 1 << 30, head, tail).unwrap();
                    prop_assert_eq!(opened.removed, 0);
                    prop_assert!(opened.damaged.is_empty());
                    spool = s;
                }
                Op::Damage => {
                    let Some(&(serial, _)) = model.front() else { continue };
                    drop(spool);
                    let path = dir.spool().join(format!("{serial:020}.spool"));
                    let mut bytes = fs::read(&path).unwrap();
                    let last = bytes.len() - 1;
                    bytes[last] ^= 1;
                    fs::write(&path, bytes).unwrap();
                    let (s, opened) = Spool::open(&dir.spool(), "h", 1 << 30, head, tail).unwrap();
                    prop_assert_eq!(opened.damaged.len(), 1, "{:?}", opened.damaged);
                    let aside = dir.spool().join(format!("{serial:020}.spool.damaged"));
                    prop_assert!(aside.exists());
                    // The agent counts the loss and stores the head past it.
                    model.pop_front();
                    head += 1;
                    spool = s;
                }
            }
            let got: Vec<_> = spool.pending().iter().map(|p| (p.serial, p.counts.clone())).collect();
            let want: Vec<_> = model.iter().cloned().collect();
            prop_assert_eq!(got, want);
            prop_assert_eq!((spool.head(), spool.tail()), (head, tail));
            for (serial, counts) in &model {
                let r = spool.read(*serial).unwrap();
                prop_assert_eq!(&r.counts(), counts);
            }
        }
    }
}

#[test]
fn a_full_spool_refuses_a_round_and_keeps_what_it_has() {
    let dir = Dir::new("full");
    let (mut spool, _) = Spool::open(&dir.spool(), "h", 400, 0, 0).unwrap();
    let part = |n: usize| vec![SpoolPart { source: "s".into(), records: 1, messages: vec![vec![7; n]] }];
    spool.write(part(200)).unwrap();
    assert!(matches!(spool.write(part(200)), Err(SpoolError::Full { .. })));
    assert_eq!((spool.pending().len(), spool.tail()), (1, 1));
    spool.pop(false).unwrap();
    spool.write(part(200)).unwrap();
    assert_eq!(spool.bytes(), spool.pending()[0].bytes);
}

#[test]
fn a_directory_others_can_write_or_a_link_is_refused() {
    let dir = Dir::new("unsafe");
    let shared = dir.0.join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
    let e = Spool::open(&shared, "h", 1 << 20, 0, 0).unwrap_err();
    assert!(matches!(e, SpoolError::Unsafe { .. }), "{e}");
    assert!(e.to_string().contains("writable by other users"), "{e}");
    let link = dir.0.join("link");
    std::os::unix::fs::symlink(dir.spool(), &link).unwrap();
    fs::create_dir(dir.spool()).unwrap();
    let e = Spool::open(&link, "h", 1 << 20, 0, 0).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
    // A new directory is private.
    let (_spool, _) = Spool::open(&dir.0.join("new"), "h", 1 << 20, 0, 0).unwrap();
    assert_eq!(fs::metadata(dir.0.join("new")).unwrap().permissions().mode() & 0o777, 0o700);
}

#[test]
fn one_agent_at_a_time_and_never_another_hosts_rounds() {
    let dir = Dir::new("owners");
    let (mut first, _) = Spool::open(&dir.spool(), "a", 1 << 20, 0, 0).unwrap();
    let e = Spool::open(&dir.spool(), "a", 1 << 20, 0, 0).unwrap_err();
    assert!(e.to_string().contains("another agent holds"), "{e}");
    first.write(vec![SpoolPart { source: "s".into(), records: 3, messages: vec![vec![1, 2, 3]] }]).unwrap();
    drop(first);
    // Host b's state says nothing is pending: a's round is not b's to remove.
    let e = Spool::open(&dir.spool(), "b", 1 << 20, 0, 0).unwrap_err();
    assert!(e.to_string().contains("another agent's spool"), "{e}");
    assert!(dir.spool().join(format!("{:020}.spool", 0)).exists());
    // Nor is a file of another name.
    fs::write(dir.spool().join("notes.txt"), b"kept").unwrap();
    let (spool, _) = Spool::open(&dir.spool(), "a", 1 << 20, 0, 1).unwrap();
    assert_eq!(spool.pending().len(), 1);
    assert!(dir.spool().join("notes.txt").exists());
}

#[test]
fn a_state_naming_absurd_serials_is_refused_at_once() {
    let dir = Dir::new("absurd");
    let e = Spool::open(&dir.spool(), "h", 1 << 20, 0, u64::MAX).unwrap_err();
    assert!(e.to_string().contains("pending"), "{e}");
    let e = Spool::open(&dir.spool(), "h", 1 << 20, 5, 4).unwrap_err();
    assert!(e.to_string().contains("pending"), "{e}");
}

#[test]
fn missing_files_in_the_pending_range_are_reported() {
    let dir = Dir::new("missing");
    let (spool, opened) = Spool::open(&dir.spool(), "h", 1 << 20, 3, 5).unwrap();
    assert_eq!(opened.damaged.len(), 2, "{:?}", opened.damaged);
    assert!(opened.damaged[0].contains("missing"));
    assert!(spool.pending().is_empty());
    assert_eq!((spool.head(), spool.tail()), (5, 5));
}

/// The wording of what is wrong with a round's bytes, in full.
#[test]
fn round_damage_messages_keep_their_wording() {
    let message = |bytes: &[u8]| match SpoolRound::decode(bytes) {
        Err(SpoolError::Damaged { damage, .. }) => damage.to_string(),
        other => panic!("expected Damaged, got {other:?}"),
    };
    let checksummed = |mut body: Vec<u8>| {
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    };
    let part = SpoolPart { source: "s".into(), records: 1, messages: vec![b"m".to_vec()] };
    let bytes = SpoolRound { host: "h".into(), serial: 9, parts: vec![part] }.encode();
    assert_eq!(message(&bytes[..5]), "truncated: 5 bytes, fewer than the 32 of an empty round");
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_eq!(message(&magic), "bad magic \"XTSPOOL\\x01\", not a ringtrace-ship spool file");
    let mut version = bytes.clone();
    version[8] = 2;
    assert_eq!(message(&version), "unsupported version 2 (this agent reads version 1)");
    let body = &bytes[..bytes.len() - 4];
    let mut trailing = body.to_vec();
    trailing.extend_from_slice(b"xyz");
    assert_eq!(message(&checksummed(trailing)), "3 bytes after the last part");
    let mut parts = body.to_vec();
    parts[24..28].copy_from_slice(&9u32.to_le_bytes());
    assert_eq!(message(&checksummed(parts)), "9 parts announced, but only 22 bytes follow");
    let mut long = body.to_vec();
    long[29..33].copy_from_slice(&5000u32.to_le_bytes());
    assert_eq!(message(&checksummed(long)), "part #0: name of 5000 bytes, more than 4096");
}
