use super::*;

fn sample() -> Vec<u8> {
    let mut f = header().to_vec();
    write_chunk(&mut f, chunk::PROCESS, &Process::now().encode()).unwrap();
    let mut recs = Vec::new();
    put_record(&mut recs, 3, 42, b"abc");
    write_chunk(&mut f, chunk::RECORDS, &recs).unwrap();
    f
}

#[test]
fn chunks_read_back() {
    let f = sample();
    let (cs, losses) = chunks(&f).unwrap();
    assert_eq!(losses, Losses::default());
    assert_eq!(cs.len(), 2);
    assert_eq!(records(cs[1].1).unwrap(), vec![(3, 42, &b"abc"[..])]);
}

#[test]
fn every_cut_and_every_flipped_bit_is_an_error_or_a_reported_damage() {
    let f = sample();
    for n in 0..f.len() {
        match chunks(&f[..n]) {
            Err(_) => assert!(n < HEADER_LEN),
            Ok((cs, losses)) => {
                assert!(losses.damaged.is_empty(), "cut at {n}");
                assert!(n == HEADER_LEN || losses.cut.is_some() || cs.len() == 1, "cut at {n}");
            }
        }
    }
    for bit in 0..f.len() * 8 {
        let mut g = f.clone();
        g[bit / 8] ^= 1 << (bit % 8);
        match chunks(&g) {
            Err(_) => assert!(bit < HEADER_LEN * 8),
            Ok((_, losses)) => {
                assert!(!losses.damaged.is_empty() || losses.cut.is_some(), "bit {bit} went unnoticed")
            }
        }
    }
}

#[test]
fn a_chunk_failing_its_checksum_is_skipped_where_a_sound_chunk_follows() {
    let mut f = header().to_vec();
    write_chunk(&mut f, chunk::PROCESS, &Process::now().encode()).unwrap();
    let mut recs = Vec::new();
    let (enter, n) = wire::simple_bytes(wire::kind::ENTER, 7, None);
    put_record(&mut recs, 3, 42, &enter[..n]);
    write_chunk(&mut f, chunk::RECORDS, &recs).unwrap();
    write_chunk(&mut f, chunk::STATS, &encode_stats(&[("lost", 0)])).unwrap();
    write_chunk(&mut f, chunk::END, &[]).unwrap();
    let (heads, _) = walk::<std::convert::Infallible>(f.len() as u64, |at, h| {
        h.copy_from_slice(&f[at as usize..][..CHUNK_HEAD]);
        Ok(())
    })
    .unwrap();
    let r = &heads[1];
    // A bit of the records chunk's payload: that chunk alone is skipped.
    let mut g = f.clone();
    g[r.head as usize + CHUNK_HEAD + 1] ^= 1;
    let (cs, losses) = chunks(&g).unwrap();
    assert_eq!(cs.iter().map(|c| c.0).collect::<Vec<_>>(), [chunk::PROCESS, chunk::STATS, chunk::END]);
    assert_eq!(losses.cut, None);
    let d = &losses.damaged[..];
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].offset, d[0].bytes, d[0].stopped), (r.head, CHUNK_HEAD as u64 + u64::from(r.len), false));
    assert_eq!((d[0].what, d[0].records, d[0].events), ("records chunk", Some(1), Some(0)));
    // Its length: no sound chunk where it leads, and reading stops.
    let mut g = f.clone();
    g[r.head as usize + 4] ^= 1;
    let (cs, losses) = chunks(&g).unwrap();
    assert_eq!(cs.len(), 1);
    assert_eq!(losses.damaged.len(), 1);
    let d = &losses.damaged[0];
    assert_eq!((d.offset, d.bytes, d.stopped), (r.head, g.len() as u64 - r.head, true));
    assert_eq!(chunks(&[]).unwrap_err(), NotATrace::Empty);
}
