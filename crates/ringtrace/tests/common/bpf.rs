//! What the tests of real BPF ring buffer maps (`tests/kernel_bpf*.rs`) share: the
//! skip where BPF is not available, the records' check, a map with its program.

use std::os::fd::AsFd;

use ringtrace::kernel::bpf::BpfRingBuf;
use ringtrace_fixtures::{expected_payload, ProgSpec, RingMap, SeqProgram};

/// Returns from the test, saying why, where BPF is not available (no CAP_BPF); fails it
/// instead where `RINGTRACE_REQUIRE` lists `bpf` ([`ringtrace_fixtures::skip`]).
#[allow(unused_macros)]
macro_rules! need_bpf {
    () => {
        if !::ringtrace_fixtures::have_bpf() {
            return;
        }
    };
}

pub fn seq(rec: &[u8]) -> u64 {
    u64::from_ne_bytes(rec[..8].try_into().unwrap())
}

/// Checks each record against the program's payload: seqs strictly increase, skipping
/// only discarded seqs and (counted in `gaps`) seqs the kernel dropped for want of
/// space, which the program counts too.
pub struct Checker {
    pub next: u64,
    pub payload: u32,
    pub discard_every: u64,
    pub seen: u64,
    pub gaps: u64,
}

impl Checker {
    pub fn new(payload: u32, discard_every: u32) -> Checker {
        Checker { next: 0, payload, discard_every: discard_every as u64, seen: 0, gaps: 0 }
    }
    pub fn check(&mut self, rec: &[u8]) {
        while self.discard_every != 0 && self.next % self.discard_every == self.discard_every - 1 {
            self.next += 1;
        }
        let s = seq(rec);
        assert!(s >= self.next, "records in order, each once: {s} after {}", self.next);
        self.gaps += s - self.next;
        self.next = s;
        assert_eq!(rec, &expected_payload(self.next, self.payload)[..], "record {} bytes", self.next);
        self.next += 1;
        self.seen += 1;
    }
}

pub fn setup(size: u32, spec: ProgSpec) -> (BpfRingBuf, SeqProgram) {
    let map = RingMap::create(size).expect("create ring map");
    let prog = SeqProgram::load(map.as_fd(), spec).expect("load program");
    let ring = BpfRingBuf::from_fd(map.into()).expect("attach");
    (ring, prog)
}
