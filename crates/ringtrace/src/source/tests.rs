use std::path::PathBuf;

use proptest::prelude::*;

use super::*;

/// A directory of its own, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(what: &str) -> Dir {
        let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let dir = std::env::temp_dir().join(format!("ringtrace-source-{what}-{}-{nonce}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_grammar_parses_maps_and_paths() {
    assert_eq!(Spec::parse("bpf-id:42").unwrap(), Spec::BpfId(42));
    assert_eq!(Spec::parse("bpf-pin:/sys/fs/bpf/x").unwrap(), Spec::BpfPin("/sys/fs/bpf/x".into()));
    assert_eq!(Spec::parse("/dev/shm/app.ring").unwrap(), Spec::Path("/dev/shm/app.ring".into()));
    assert_eq!(Spec::parse("kafka://b:9092/t").unwrap(), Spec::Path("kafka://b:9092/t".into()));
    let e = Spec::parse("bpf-id:x").unwrap_err().to_string();
    assert_eq!(e, "bpf-id:x: a map id is a number from 0 to 4294967295, as in bpf-id:42");
    assert!(Spec::parse("bpf-id:-1").is_err());
    assert!(Spec::parse("bpf-id:4294967296").is_err());
    assert_eq!(
        Spec::parse("bpf-pin:").unwrap_err().to_string(),
        "bpf-pin: needs a path, as in bpf-pin:/sys/fs/bpf/events"
    );
    assert!(Spec::parse("bpf-id:7").unwrap().open_bpf().is_some());
    assert!(Spec::parse("x.ring").unwrap().open_bpf().is_none());
}

proptest! {
    /// Every argument parses or is refused, never panics; a map id round-trips, and
    /// what has neither prefix is the path it was.
    #[test]
    fn any_argument_parses_or_is_refused(s in ".{0,40}", id in any::<u32>()) {
        prop_assert_eq!(Spec::parse(format!("bpf-id:{id}")).unwrap(), Spec::BpfId(id));
        match Spec::parse(&s) {
            Ok(Spec::Path(p)) => prop_assert_eq!(p, PathBuf::from(&s)),
            Ok(Spec::BpfPin(p)) => prop_assert_eq!(Some(p.as_path()), s.strip_prefix("bpf-pin:").map(Path::new)),
            Ok(Spec::BpfId(n)) => prop_assert_eq!(s.strip_prefix("bpf-id:").and_then(|n| n.parse().ok()), Some(n)),
            Err(_) => prop_assert!(s == "bpf-pin:" || s.starts_with("bpf-id:")),
        }
    }
}

#[test]
fn directories_are_recorder_directories_only_with_rings_and_catalog() {
    let dir = Dir::new("dirs");
    assert_eq!(Kind::of(&dir.0).unwrap(), Kind::Directory);
    std::fs::write(dir.0.join(RECORDER_RINGS), b"").unwrap();
    assert_eq!(Kind::of(&dir.0).unwrap(), Kind::Directory, "rings without a catalog");
    std::fs::create_dir(dir.0.join(RECORDER_CATALOG)).unwrap();
    assert_eq!(Kind::of(&dir.0).unwrap(), Kind::Directory, "a catalog that is a directory");
    std::fs::remove_dir(dir.0.join(RECORDER_CATALOG)).unwrap();
    std::fs::write(dir.0.join(RECORDER_CATALOG), b"").unwrap();
    assert_eq!(Kind::of(&dir.0).unwrap(), Kind::RecorderDir);
}

#[test]
fn files_are_told_apart_by_their_first_bytes() {
    let dir = Dir::new("files");
    let ring = dir.0.join("a.ring");
    let _r = crate::MpscRing::builder(1 << 16).create(&ring).unwrap();
    assert_eq!(Kind::of(&ring).unwrap(), Kind::Ring);
    let chan = dir.0.join("a.chan");
    let _c = crate::Channel::<crate::config::Discard, crate::clock::Monotonic>::builder(4096)
        .max_producers(2)
        .create(&chan, crate::clock::Monotonic)
        .unwrap();
    assert_eq!(Kind::of(&chan).unwrap(), Kind::Channel);
    let snap = dir.0.join("a.snap");
    std::fs::write(&snap, crate::format::snapshot::SNAPSHOT_MAGIC).unwrap();
    assert_eq!(Kind::of(&snap).unwrap(), Kind::Snapshot);
    let other = dir.0.join("trace");
    std::fs::write(&other, b"RTTRACE\0and more").unwrap();
    let Kind::Unknown(head) = Kind::of(&other).unwrap() else { panic!("not unknown") };
    assert_eq!((head.bytes, head.len), (*b"RTTRACE\0", 16));
    assert_eq!(head.to_string(), "it is 16 bytes and starts with 52 54 54 52 41 43 45 00 (\"RTTRACE.\")");
    let empty = dir.0.join("empty");
    std::fs::write(&empty, b"").unwrap();
    let Kind::Unknown(head) = Kind::of(&empty).unwrap() else { panic!("not unknown") };
    assert_eq!(head.to_string(), "the file is empty");
    let e = Kind::of(&dir.0.join("missing")).unwrap_err().to_string();
    assert!(e.starts_with(&format!("cannot open {}: ", dir.0.join("missing").display())), "{e}");
    let e = Kind::of(Path::new("/dev/null")).unwrap_err().to_string();
    assert!(e.contains("character device"), "{e}");
}

proptest! {
    /// [`Reader::read`] of a channel (a reader without a count of its own) delivers at
    /// most `max` records, in order; a callback that fails stops the read after that
    /// record (counted as read); what is left comes on the next reads, none twice.
    #[test]
    fn a_channel_read_delivers_at_most_max_and_stops_at_a_failure(
        n in 0u32..40,
        max in 0usize..48,
        fail_at in proptest::option::of(0usize..48),
    ) {
        let channel = crate::Channel::<crate::config::Discard, crate::clock::NoClock>::builder(1 << 16)
            .build(crate::clock::NoClock)
            .unwrap();
        let mut reader = channel.reader().unwrap();
        for i in 0..n {
            channel.output(&i.to_le_bytes(), crate::Wakeup::Default).unwrap();
        }
        let mut seen = Vec::new();
        let got = Reader::read(&mut reader, max, |rec: crate::channel::ChannelRecord<'_>| {
            seen.push(u32::from_le_bytes(rec.data.try_into().unwrap()));
            if fail_at == Some(seen.len() - 1) { Err(seen.len()) } else { Ok(()) }
        });
        let delivered = (n as usize).min(max);
        match fail_at.filter(|&k| k < delivered) {
            Some(k) => {
                prop_assert!(matches!(got, Err(crate::error::ConsumeError::Callback(c)) if c == k + 1), "{got:?}");
                prop_assert_eq!(seen.len(), k + 1);
            }
            None => {
                prop_assert_eq!(got.unwrap(), delivered);
                prop_assert_eq!(seen.len(), delivered);
            }
        }
        while let Some(item) = Reader::take(&mut reader).unwrap() {
            seen.push(u32::from_le_bytes(item.data.try_into().unwrap()));
        }
        prop_assert_eq!(seen, (0..n).collect::<Vec<_>>());
    }
}
