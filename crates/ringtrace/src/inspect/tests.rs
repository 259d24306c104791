//! Unit tests of the ring-file reader on hand-built images.

use super::image::{self, ImageBuilder};
use super::*;

fn payloads(r: &Records) -> Vec<Vec<u8>> {
    r.iter().map(|r| r.payload.to_vec()).collect()
}

fn open(img: Vec<u8>) -> Result<RingFile<Vec<u8>>, FormatError> {
    RingFile::from_source(img)
}

fn err(img: Vec<u8>) -> String {
    match open(img).and_then(|r| r.records()) {
        Ok(r) => panic!("expected an error, got {r:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn reads_records_in_both_modes() {
    for mode in [RingMode::Discard, RingMode::Overwrite] {
        let img = ImageBuilder::new(4096, mode).record(b"a").record(b"").record(&[7; 100]).build();
        let ring = open(img).unwrap();
        assert_eq!(ring.header().mode, mode);
        assert_eq!(ring.header().kind, RingKind::Mpsc);
        assert!(ring.header().futex());
        let r = ring.records().unwrap();
        assert_eq!(payloads(&r), [b"a".to_vec(), vec![], vec![7; 100]]);
        let positions: Vec<u64> = r.iter().map(|r| r.pos).collect();
        assert_eq!(positions, [0, 16, 24]);
        assert_eq!(r.end(), 24 + 8 + 104);
        assert_eq!(r.iter().next_back().unwrap().payload, &[7; 100]);
        let s = ring.state().unwrap();
        assert_eq!((s.committed, s.producer_pos, s.attached_producers()), (3, 136, 1));
    }
}

#[test]
fn wrapped_records_are_joined() {
    // Starts 16 bytes before the end: the second record's header is the last word, its
    // payload continues at data offset 0.
    for mode in [RingMode::Discard, RingMode::Overwrite] {
        let start = 3 * 4096 - 16;
        let img = ImageBuilder::new(4096, mode).start(start).record(b"12345678").record(b"wrapped around!").build();
        let r = open(img).unwrap().records().unwrap();
        assert_eq!(payloads(&r), [b"12345678".to_vec(), b"wrapped around!".to_vec()]);
        assert_eq!(r.iter().nth(1).unwrap().pos, start + 16);
    }
}

#[test]
fn skips_discarded_busy_and_zero_claims() {
    let img = ImageBuilder::new(8192, RingMode::Overwrite)
        .record(b"one")
        .discarded(b"gone")
        .pid(99)
        .busy(20)
        .zero_claim(40)
        .pid(5)
        .record(b"two")
        .build();
    let r = open(img).unwrap().records().unwrap();
    assert_eq!(payloads(&r), [b"one".to_vec(), b"two".to_vec()]);
    assert_eq!((r.discarded(), r.unfinished_count()), (1, 2));
    let u = r.unfinished();
    assert_eq!((u[0].pid, u[0].bytes), (Some(99), 32));
    assert_eq!((u[1].pid, u[1].bytes), (None, 48));
    assert_eq!(r.iter().nth(1).unwrap().pid, 5);
    assert!(r.corrupt().is_none());
}

#[test]
fn spsc_zero_header_is_the_last_claim() {
    let img = ImageBuilder::new(4096, RingMode::Discard).kind(RingKind::Spsc).record(b"x").zero_claim(30).build();
    let mut img = img;
    // The single producer writes its payload before the header: make it look like one.
    image::set_u64(&mut img, image::DATA_AT + 24, crate::format::record::pack(8, 1));
    let r = open(img).unwrap().records().unwrap();
    assert_eq!((r.len(), r.unfinished_count()), (1, 1));
    assert_eq!(r.unfinished()[0].bytes, 40);
}

#[test]
fn follower_stops_at_unfinished_and_resumes() {
    let img = ImageBuilder::new(4096, RingMode::Discard).record(b"a").busy(3).record(b"b").build();
    let ring = open(img).unwrap();
    let r = ring.records_from(0, true).unwrap();
    assert_eq!(payloads(&r), [b"a".to_vec()]);
    assert_eq!(r.resume_at(), 16);
    let r = ring.records_from(16, false).unwrap();
    assert_eq!(payloads(&r), [b"b".to_vec()]);
    assert!(matches!(ring.records_from(4, true), Err(FormatError::Unaligned(4))));
    assert!(matches!(ring.records_from(1 << 20, true), Err(FormatError::PastEnd { .. })));
}

#[test]
fn follower_learns_what_it_missed() {
    let img = ImageBuilder::new(4096, RingMode::Overwrite).start(4096).record(b"late").build();
    let r = open(img).unwrap().records_from(1024, true).unwrap();
    assert_eq!(r.missed_bytes(), 3072);
    assert_eq!(r.retired_before(), Some(64));
    assert_eq!(payloads(&r), [b"late".to_vec()]);
}

#[test]
fn corrupt_header_stops_the_walk() {
    let mut img = ImageBuilder::new(4096, RingMode::Discard).record(b"ok").record(b"bad").record(b"after").build();
    // Second header: a length running past the producer position.
    image::set_u64(&mut img, image::DATA_AT + 16, crate::format::record::pack(4000, 1));
    let r = open(img.clone()).unwrap().records().unwrap();
    assert_eq!(payloads(&r), [b"ok".to_vec()]);
    assert_eq!(r.corrupt().map(|c| c.pos), Some(16));
    // A header with pid 0.
    image::set_u64(&mut img, image::DATA_AT + 16, crate::format::record::pack(3, 0));
    assert_eq!(open(img).unwrap().records().unwrap().corrupt().map(|c| c.pos), Some(16));
}

#[test]
fn header_errors_have_clear_messages() {
    let good = || ImageBuilder::new(65536, RingMode::Discard).record(b"x").build();
    assert_eq!(err(vec![0; 100]), "ring file is 100 bytes, the header alone needs 8192");
    let mut img = good();
    img[..8].copy_from_slice(b"NOTARING");
    assert_eq!(err(img), "not a ringtrace ring file: magic is 0x474e495241544f4e, expected \"RINGTRC\\0\"");
    let mut img = good();
    image::set_u64(&mut img, image::MAGIC_AT, 0);
    assert!(err(img).contains("not initialized"));
    let mut img = good();
    image::set_u32(&mut img, image::VERSION_AT, 3);
    assert_eq!(
        err(img),
        "layout version 3 is not supported (this ringtrace reads version 6, and version 5 for single-producer and \
         overwrite rings)"
    );
    // Version 5: a multi-producer discard ring is refused (its consumer zeroed what it
    // read; producers of version 6 zero ahead themselves), the other kinds are read.
    let mut img = good();
    image::set_u32(&mut img, image::VERSION_AT, 5);
    assert!(err(img).starts_with("layout version 5 is not supported"));
    for (kind, mode) in [(RingKind::Spsc, RingMode::Discard), (RingKind::Mpsc, RingMode::Overwrite)] {
        let mut img = ImageBuilder::new(65536, mode).kind(kind).record(b"x").build();
        image::set_u32(&mut img, image::VERSION_AT, 5);
        assert_eq!(payloads(&open(img).unwrap().records().unwrap()), [b"x".to_vec()], "{kind:?} {mode:?}");
    }
    let mut img = good();
    img.truncate(12288);
    assert_eq!(err(img), "file is 12288 bytes but capacity 65536 needs 73728 (truncated?)");
    let mut img = good();
    image::set_u64(&mut img, image::CAPACITY_AT, 5000);
    assert!(err(img).contains("capacity is 5000"));
    let mut img = good();
    image::set_u32(&mut img, image::MODE_AT, 9);
    assert!(err(img).contains("mode is 9"));
    let mut img = good();
    image::set_u32(&mut img, image::FLAGS_AT, 6);
    assert!(err(img).contains("flags is 6"));
    let mut img = good();
    image::set_u64(&mut img, image::DATA_OFFSET_AT, 100);
    assert!(err(img).contains("data offset is 100"));
}

#[test]
fn hostile_positions_are_refused() {
    // (field, value, consumer position to set too, expected message)
    let cases: [(usize, u64, Option<u64>, &str); 5] = [
        (image::CONSUMER_POS_AT, 800, None, "consumer 800 is past producer 640"),
        (image::CONSUMER_READ_AT, 804, None, "consumer read position 804 is not a multiple of 8"),
        (image::PRODUCER_POS_AT, u64::MAX - 7, None, "producer 18446744073709551608 is more than the capacity 4096"),
        (image::PRODUCER_POS_AT, 5, None, "producer position 5 is not a multiple of 8"),
        (image::CONSUMER_READ_AT, 8, Some(16), "consumer 16 is past its read position 8"),
    ];
    for (at, value, cons, msg) in cases {
        let mut img = ImageBuilder::new(4096, RingMode::Discard).record(&[1; 632]).build();
        image::set_u64(&mut img, at, value);
        if let Some(c) = cons {
            image::set_u64(&mut img, image::CONSUMER_POS_AT, c);
        }
        let e = err(img);
        assert!(e.starts_with("positions are inconsistent: ") && e.contains(msg), "{e}");
    }
    let mut img = ImageBuilder::new(4096, RingMode::Overwrite).record(b"x").build();
    image::set_u64(&mut img, image::OVER_POS_AT, 800);
    assert_eq!(err(img), "positions are inconsistent: overwrite 800 is past producer 16");
}

#[test]
fn paused_bit_and_lock_are_reported() {
    let mut img = ImageBuilder::new(4096, RingMode::Overwrite).record(b"x").build();
    image::set_u64(&mut img, image::PRODUCER_POS_AT, 16 | 1);
    image::set_u64(&mut img, image::ZEROED_AT, 4096 | 1);
    let ring = open(img).unwrap();
    let s = ring.state().unwrap();
    assert!(s.paused && s.retire_locked);
    assert_eq!((s.producer_pos, s.zeroed), (16, 4096));
    assert_eq!(ring.records().unwrap().len(), 1);
}

#[test]
fn header_change_is_detected() {
    // A source whose header changes after opening (a ring re-created under the path).
    struct Swap(std::cell::Cell<u32>, Vec<u8>, Vec<u8>);
    impl Source for Swap {
        fn size(&self) -> std::io::Result<u64> {
            self.1.size()
        }
        fn read_at(&self, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
            self.0.set(self.0.get() + 1);
            if self.0.get() == 1 { &self.1 } else { &self.2 }.read_at(off, buf)
        }
    }
    let a = ImageBuilder::new(4096, RingMode::Discard).build();
    let b = ImageBuilder::new(4096, RingMode::Overwrite).build();
    let ring = RingFile::from_source(Swap(0.into(), a, b)).unwrap();
    assert!(matches!(ring.state(), Err(FormatError::HeaderChanged)));
}

#[test]
fn records_reclaimed_during_the_read_are_dropped() {
    // The second state read sees the overwrite position past the first record.
    struct Moving(std::cell::Cell<u32>, Vec<u8>);
    impl Source for Moving {
        fn size(&self) -> std::io::Result<u64> {
            self.1.size()
        }
        fn read_at(&self, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
            self.1.read_at(off, buf)?;
            // Reads: the meta line (open), the control block and the producer line
            // (first state), the data, the control block (second state): move `O` there.
            if off == image::PRODUCER_POS_AT as u64 {
                self.0.set(self.0.get() + 1);
            }
            if off == 0 && self.0.get() >= 1 && buf.len() > image::OVER_POS_AT + 8 {
                image::set_u64(buf, image::OVER_POS_AT, 16);
                image::set_u64(buf, image::RETIRED_AT, 1);
            }
            Ok(())
        }
    }
    let img = ImageBuilder::new(4096, RingMode::Overwrite).record(b"a").record(b"b").build();
    let ring = RingFile::from_source(Moving(0.into(), img)).unwrap();
    let r = ring.records_from(0, false).unwrap();
    assert_eq!(payloads(&r), [b"b".to_vec()]);
    assert_eq!((r.gone_during_read(), r.missed_bytes(), r.retired_before()), (1, 16, Some(1)));
}

#[test]
fn byte_sources_refuse_reads_past_the_end() {
    let v = vec![0u8; 10];
    let mut buf = [0u8; 4];
    assert!(v.read_at(7, &mut buf).is_err());
    assert!(v.read_at(u64::MAX, &mut buf).is_err());
    assert!(v.read_at(6, &mut buf).is_ok());
}

/// `img` at `offset` in a file of garbage, followed by `trailer` bytes of garbage.
fn embedded(img: &[u8], offset: usize, trailer: usize) -> Vec<u8> {
    let garbage = |n: usize| (0..n).map(|i| (i * 7 + 3) as u8).collect::<Vec<u8>>();
    let mut file = garbage(offset);
    file.extend_from_slice(img);
    file.extend(garbage(trailer));
    file
}

#[test]
fn an_image_at_an_offset_reads_as_at_offset_zero() {
    for mode in [RingMode::Discard, RingMode::Overwrite] {
        let img = ImageBuilder::new(4096, mode)
            .start(3 * 4096 - 16)
            .record(b"12345678")
            .record(b"wrapped around!")
            .discarded(b"gone")
            .record(&[9; 300])
            .build();
        let alone = open(img.clone()).unwrap();
        for trailer in [0, 5000] {
            let file = embedded(&img, 8192, trailer);
            for ring in
                [RingFile::from_source_at(&file, 8192).unwrap(), RingFile::from_source(At::new(&file, 8192)).unwrap()]
            {
                assert_eq!(ring.header(), alone.header());
                assert_eq!(ring.state().unwrap(), alone.state().unwrap());
                let (a, b) = (ring.records().unwrap(), alone.records().unwrap());
                assert_eq!(payloads(&a), payloads(&b));
                assert_eq!(format!("{a:?}"), format!("{b:?}"));
                assert_eq!(payloads(&a)[1], b"wrapped around!");
            }
        }
    }
}

#[test]
fn offsets_outside_the_file_are_errors() {
    let img = ImageBuilder::new(4096, RingMode::Discard).record(b"x").build();
    let file = embedded(&img, 4096, 0);
    let len = file.len() as u64;
    for offset in [len, len + 1, 1 << 40, u64::MAX] {
        match RingFile::from_source_at(&file, offset) {
            Err(e @ FormatError::OffsetPastEnd { .. }) => assert!(e.to_string().contains("past the end")),
            other => panic!("offset {offset}: expected OffsetPastEnd, got {other:?}"),
        }
        // The bare window: empty, its reads fail.
        let at = At::new(&file, offset);
        assert_eq!(at.size().unwrap(), 0);
        assert!(at.read_at(0, &mut [0u8; 8]).is_err());
        assert!(matches!(RingFile::from_source(at), Err(FormatError::TooSmall { len: 0, .. })));
    }
    // Inside the file but not a ring: garbage, or the image cut short.
    assert!(matches!(RingFile::from_source_at(&file, 0), Err(FormatError::BadMagic { .. })));
    assert!(matches!(RingFile::from_source_at(&file, len - 100), Err(FormatError::TooSmall { len: 100, .. })));
    let cut = &file[..file.len() - 8];
    assert!(matches!(RingFile::from_source_at(cut, 4096), Err(FormatError::Truncated { .. })));
    // A read whose offset overflows past the base fails.
    let at = At::new(&file, 4096);
    assert!(at.read_at(u64::MAX - 10, &mut [0u8; 4]).is_err());
    assert!(at.read_at(len - 4096 - 4, &mut [0u8; 4]).is_ok());
    assert!(at.read_at(len - 4096 - 3, &mut [0u8; 4]).is_err());
}

#[test]
fn open_at_reads_a_ring_image_in_a_file() {
    let img = ImageBuilder::new(8192, RingMode::Overwrite).record(b"in a file").build();
    let path = std::env::temp_dir().join(format!("inspect-open-at-{}.bin", std::process::id()));
    std::fs::write(&path, embedded(&img, 12288, 4096)).unwrap();
    let ring = RingFile::open_at(&path, 12288);
    let past = RingFile::open_at(&path, 1 << 30);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(payloads(&ring.unwrap().records().unwrap()), [b"in a file".to_vec()]);
    assert!(matches!(past, Err(FormatError::OffsetPastEnd { .. })));
}
