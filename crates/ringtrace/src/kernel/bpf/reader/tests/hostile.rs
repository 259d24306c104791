//! Memory another process can write: the consumer page is writable by any process
//! that maps the map, and a simulated ring can hold anything. The reader must
//! return an error or records inside the positions, never panic or loop forever.

use super::*;
use proptest::prelude::*;

fn sim_with(words: &[u32], cons: u64, prod: u64, over: u64, overwrite: bool) -> Arc<Sim> {
    let sim = Sim::new(256, overwrite);
    for (i, w) in words.iter().enumerate() {
        sim.store(4 * i as u64, *w);
    }
    sim.cons.store(cons, Ordering::Relaxed);
    sim.prod.store(prod, Ordering::Relaxed);
    sim.over.store(over, Ordering::Relaxed);
    sim
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    #[test]
    fn garbage_never_panics_and_stays_in_bounds(
        words in proptest::collection::vec(prop_oneof![
            any::<u32>(),
            (0u32..300).prop_map(|l| l),
            (0u32..300).prop_map(|l| l | DISCARD_BIT),
            (0u32..300).prop_map(|l| l | BUSY_BIT),
        ], 64),
        // Near the wrap of the 64-bit positions too: a value the kernel
        // reaches only after 16 EiB, and a hostile writer at once.
        cons in prop_oneof![0u64..600, any::<u64>(), (u64::MAX - 600)..=u64::MAX],
        ahead in prop_oneof![0u64..600, any::<u64>()],
        over in prop_oneof![0u64..600, any::<u64>(), (u64::MAX - 600)..=u64::MAX],
        overwrite in any::<bool>(),
    ) {
        let prod = cons.wrapping_add(ahead);
        let sim = sim_with(&words, cons, prod, over, overwrite);
        let Ok(mut r) = Reader::new(sim.clone(), overwrite) else { return Ok(()) };
        for _ in 0..3 {
            let start = r.pos;
            let res = r.consume(usize::MAX, |pos, rec| {
                assert!(pos >= start.min(over) && pos + 8 + rec.len() as u64 <= prod.max(start), "record at {pos} outside the positions");
                assert!(rec.len() as u64 <= 256 - 8);
                Ok::<(), Never>(())
            });
            if res.is_err() {
                break;
            }
            let _ = r.ready();
            let _ = r.available();
            let _ = r.arm();
            let _ = r.snapshot();
        }
    }
}
