//! The CTF writer over the record model, with named tracks (a fleet's layout): a
//! stream's bytes as documented, times that never go back, and what it refuses.
#![cfg(feature = "ctf")]

use std::io;

use ringtrace_export::ctf::{Class, CtfArgs, Event, Files, Kind, Layout, Shape, Tracks, Writer};
use ringtrace_export::record::{Plain, Record};

struct Two(u64, &'static str);

impl CtfArgs for Two {
    fn write_ctf(&self, ev: &mut Event<'_>) -> io::Result<()> {
        ev.u64(self.0);
        ev.text(self.1);
        let kinds = [Kind::U64, Kind::Text];
        ev.class(7, Shape::of(kinds.into_iter()), || Class {
            name: "app:two".into(),
            loglevel: None,
            fields: vec![("n".into(), Kind::U64), ("s".into(), Kind::Text)],
        });
        Ok(())
    }
}

fn layout() -> Layout<'static> {
    Layout {
        tracks: Tracks::Named,
        files: Files::New,
        uuid: None,
        tracer: "test",
        clock: "realtime",
        clock_description: "wall clock",
        clock_offset_ns: 0,
        clock_absolute: true,
    }
}

struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(name: &str) -> Dir {
    Dir(std::env::temp_dir().join(format!("ringtrace-ctf-writer-{name}-{}", std::process::id())))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn named_tracks_write_names_in_the_packet_context_and_never_go_back_in_time() {
    let d = dir("named");
    let mut w = Writer::new(&d.0, layout()).unwrap();
    w.put(&Plain::Process { pid: 1, tid: 2, name: "web-1", sort_index: None, category: None }).unwrap();
    w.put(&Plain::Thread { pid: 1, tid: 2, name: "/run/a\\b", sort_index: None, category: None }).unwrap();
    for (ts_ns, n) in [(500, 1), (400, 2)] {
        let args = Two(n, "x");
        w.put(&Record::Instant { ts_ns, pid: 1, tid: 2, name: "two", category: "app", args }).unwrap();
    }
    w.finish().unwrap();
    let b = std::fs::read(d.0.join("stream-1-2")).unwrap();
    // Magic, stream id; begin, end, content size, packet size; pid, tid; the names.
    assert_eq!(u32::from_le_bytes(b[..4].try_into().unwrap()), 0xC1FC_1FC1);
    assert_eq!((u64_at(&b, 8), u64_at(&b, 16)), (500, 500), "the earlier record is stamped at the last time");
    assert_eq!(u64_at(&b, 24), b.len() as u64 * 8);
    let mut at = 4 + 4 + 8 * 4 + 4 + 4;
    let names = b"web-1\0/run/a\\\\b\0";
    assert_eq!(&b[at..at + names.len()], names);
    at += names.len();
    for n in [1, 2] {
        assert_eq!(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()), 2, "the first class after the spans'");
        assert_eq!((u64_at(&b, at + 4), u64_at(&b, at + 12)), (500, n));
        assert_eq!(&b[at + 20..at + 22], b"x\0");
        at += 22;
    }
    assert_eq!(at, b.len());
    let meta = std::fs::read_to_string(d.0.join("metadata")).unwrap();
    assert!(meta.contains("host_1 = \"web-1\";") && meta.contains("name = \"app:two\";"), "{meta}");
    assert!(meta.contains("uint64_t n;") && meta.contains("string s;"), "{meta}");
    // Written again into the same directory: refused.
    let w = Writer::new(&d.0, layout()).unwrap();
    assert_eq!(w.finish().unwrap_err().kind(), io::ErrorKind::AlreadyExists);
}

#[test]
fn what_named_tracks_cannot_hold_is_an_error_not_a_panic() {
    let d = dir("refused");
    let mut w = Writer::new(&d.0, layout()).unwrap();
    let lost = w.put(&Plain::Lost { ts_ns: 1, pid: 1, tid: 2, count: 3 }).unwrap_err();
    assert!(lost.to_string().contains("events lost"), "{lost}");
    // Arguments without a CTF form.
    let plain = w.put(&Plain::Instant { ts_ns: 1, pid: 1, tid: 2, name: "e", category: "", args: () }).unwrap_err();
    assert!(plain.to_string().contains("no CTF form"), "{plain}");
}
