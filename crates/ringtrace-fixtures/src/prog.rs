//! The kernel producer: a hand-assembled socket filter that writes one numbered record into
//! a ring buffer map per run, driven by `BPF_PROG_TEST_RUN`.

use std::fmt::Display;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::asm::*;
use crate::sys;

/// `bpf_ringbuf_output`/`submit`/`discard` flag: do not wake the consumer.
pub const BPF_RB_NO_WAKEUP: u64 = 1;
/// `bpf_ringbuf_output`/`submit`/`discard` flag: wake the consumer whether or not it has
/// caught up.
pub const BPF_RB_FORCE_WAKEUP: u64 = 2;

// Helper ids (`enum bpf_func_id`).
pub(crate) const MAP_LOOKUP_ELEM: i32 = 1;
pub(crate) const RINGBUF_OUTPUT: i32 = 130;
const RINGBUF_RESERVE: i32 = 131;
const RINGBUF_SUBMIT: i32 = 132;
const RINGBUF_DISCARD: i32 = 133;

/// Offsets of the counters in the counters map's one value.
const ATTEMPTS: i16 = 0;
const DROPS: i16 = 8;
const DISCARDS: i16 = 16;
const COUNTERS_SIZE: u32 = 24;

/// The multiplier of the payload's word index (2^64 / φ).
const WORD_MUL: u64 = 0x9E37_79B9_7F4A_7C15;

/// The packet each test run gets (socket filters need at least an Ethernet header).
pub(crate) const PACKET: [u8; 64] = [0; 64];

/// Size of the verifier log buffer of a failed load.
pub(crate) const LOG_SIZE: usize = 64 * 1024;

/// How the program writes its record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Method {
    /// `bpf_ringbuf_output` of the payload built on the stack (one copy).
    #[default]
    Output,
    /// `bpf_ringbuf_reserve`, the payload stored in place, then `bpf_ringbuf_submit` (or
    /// `bpf_ringbuf_discard`, see [`ProgSpec::discard_every`]).
    ReserveSubmit,
}

/// What [`SeqProgram::load`] assembles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgSpec {
    /// Record payload bytes: a multiple of 8 in `8..=128`.
    pub payload: u32,
    /// How the record is written.
    pub method: Method,
    /// 0: never discard. Else ([`Method::ReserveSubmit`] only) the record with
    /// `seq % discard_every == discard_every - 1` is discarded with `bpf_ringbuf_discard`
    /// instead of submitted.
    pub discard_every: u32,
    /// Flags of `bpf_ringbuf_output`/`submit`/`discard`: 0 (adaptive),
    /// [`BPF_RB_NO_WAKEUP`] or [`BPF_RB_FORCE_WAKEUP`].
    pub wakeup_flags: u64,
}

impl Default for ProgSpec {
    fn default() -> ProgSpec {
        ProgSpec { payload: 8, method: Method::Output, discard_every: 0, wakeup_flags: 0 }
    }
}

/// The program's counters (one ARRAY map value), read with [`SeqProgram::counters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Runs so far; each run's sequence number is the value before its increment.
    pub attempts: u64,
    /// Runs whose `bpf_ringbuf_output` failed or whose `bpf_ringbuf_reserve` returned NULL
    /// (ring full).
    pub drops: u64,
    /// Records reserved and then discarded.
    pub discards: u64,
}

/// The payload the program writes for sequence number `seq`: `payload / 8` native-endian
/// u64 words, word `i` = `seq ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15)` (word 0 = `seq`).
pub fn expected_payload(seq: u64, payload: u32) -> Vec<u8> {
    (0..u64::from(payload / 8)).flat_map(|i| (seq ^ i.wrapping_mul(WORD_MUL)).to_ne_bytes()).collect()
}

/// A socket-filter program, hand-assembled (no clang), that writes one record into a ring
/// buffer map per run: sequence number `seq` (from the attempts counter) with payload
/// [`expected_payload`]`(seq, spec.payload)`.
#[derive(Debug)]
pub struct SeqProgram {
    prog: OwnedFd,
    counters: OwnedFd,
}

impl SeqProgram {
    /// Assembles and loads the program for `ring` (a `BPF_MAP_TYPE_RINGBUF` map) and a new
    /// counters map. A verifier rejection is an error whose message holds the verifier log.
    pub fn load(ring: BorrowedFd<'_>, spec: ProgSpec) -> io::Result<SeqProgram> {
        let invalid = |msg: String| Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        if spec.payload % 8 != 0 || !(8..=128).contains(&spec.payload) {
            return invalid(format!("payload {} is not a multiple of 8 in 8..=128", spec.payload));
        }
        if spec.discard_every != 0 && spec.method != Method::ReserveSubmit {
            return invalid("discard_every needs Method::ReserveSubmit".to_string());
        }
        let counters = crate::create_array_map(COUNTERS_SIZE, 1)?;
        let insns = assemble(ring.as_raw_fd(), counters.as_raw_fd(), &spec);
        let prog = load_socket_filter(&insns, None, format_args!("{spec:?}"))?;
        Ok(SeqProgram { prog, counters })
    }

    /// Runs the program `repeat` times in the calling thread with `BPF_PROG_TEST_RUN`
    /// (`data_in`: a 64-byte zeroed packet). `repeat` 0 runs it once, as the kernel does.
    ///
    /// The kernel runs the repetitions with migration disabled; it stops early with
    /// `EINTR` if a signal is pending (runs done so far are counted in [`Self::counters`]).
    pub fn run(&self, repeat: u32) -> io::Result<()> {
        sys::prog_test_run(self.prog.as_fd(), &PACKET, repeat).map(drop)
    }

    /// Reads the counters.
    pub fn counters(&self) -> io::Result<Counters> {
        let mut value = [0u8; COUNTERS_SIZE as usize];
        sys::map_lookup_elem(self.counters.as_fd(), &0u32.to_ne_bytes(), &mut value)?;
        let word = |i: usize| u64::from_ne_bytes(value[i * 8..i * 8 + 8].try_into().unwrap());
        Ok(Counters { attempts: word(0), drops: word(1), discards: word(2) })
    }
}

/// Loads `insns` as a socket filter (with `btf`, if given); a verifier rejection is an
/// error whose message holds the verifier log (and names the program `what`).
pub(crate) fn load_socket_filter(
    insns: &[Insn],
    btf: Option<sys::ProgBtf<'_>>,
    what: impl Display,
) -> io::Result<OwnedFd> {
    let err = match sys::prog_load(sys::BPF_PROG_TYPE_SOCKET_FILTER, insns, c"GPL", btf, None) {
        Ok(prog) => return Ok(prog),
        Err(err) => err,
    };
    // Load again for the log (kept off the success path: logging slows the verifier down,
    // and a full buffer fails a load that would pass).
    let mut log = vec![0u8; LOG_SIZE];
    let retry = sys::prog_load(sys::BPF_PROG_TYPE_SOCKET_FILTER, insns, c"GPL", btf, Some(&mut log));
    Err(io::Error::new(
        err.kind(),
        format!(
            "BPF_PROG_LOAD of the {what} program failed: {err}{}\nverifier log:\n{}",
            match retry {
                Ok(_) => " (the retry with a log succeeded)".to_string(),
                Err(e) if e.raw_os_error() != err.raw_os_error() => format!(" (retry: {e})"),
                Err(_) => String::new(),
            },
            log_text(&log)
        ),
    ))
}

/// The text of a log buffer the kernel filled (up to its NUL).
pub(crate) fn log_text(log: &[u8]) -> std::borrow::Cow<'_, str> {
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    String::from_utf8_lossy(&log[..end])
}

/// The program. Registers: r6 = the counters value, r7 = seq, r8 = the reservation.
fn assemble(ring: i32, counters: i32, spec: &ProgSpec) -> Vec<Insn> {
    let words = (spec.payload / 8) as i16;
    let payload = spec.payload as i16;
    let mut a = Asm::new();

    // r6 = bpf_map_lookup_elem(counters, &(u32)0); if NULL return 0.
    a.st_imm(BPF_W, R10, -4, 0);
    a.mov64_reg(R2, R10).alu64_imm(BPF_ADD, R2, -4);
    a.ld_map_fd(R1, counters).call(MAP_LOOKUP_ELEM);
    let found = a.jmp_imm(BPF_JNE, R0, 0);
    a.mov64_imm(R0, 0).exit();
    a.bind(found);
    a.mov64_reg(R6, R0);

    // r7 = seq = fetch_add(&attempts, 1).
    a.mov64_imm(R7, 1).atomic(BPF_DW, R6, ATTEMPTS, R7, i32::from(BPF_ADD) | BPF_FETCH);

    // Stores word i of the payload at base + i * 8.
    let store_words = |a: &mut Asm, base: Reg, base_off: i16| {
        for i in 0..words {
            let off = base_off + i * 8;
            if i == 0 {
                a.stx(BPF_DW, base, off, R7);
            } else {
                a.ld_imm64(R1, (i as u64).wrapping_mul(WORD_MUL)).alu64_reg(BPF_XOR, R1, R7).stx(BPF_DW, base, off, R1);
            }
        }
    };
    // *(u64 *)(r6 + counter) += 1.
    let count = |a: &mut Asm, counter: i16| {
        a.mov64_imm(R1, 1).atomic(BPF_DW, R6, counter, R1, i32::from(BPF_ADD));
    };

    match spec.method {
        Method::Output => {
            // The payload on the stack at r10 - payload (over the dead key), then
            // if (bpf_ringbuf_output(ring, r10 - payload, payload, flags) < 0) drops += 1.
            store_words(&mut a, R10, -payload);
            a.ld_map_fd(R1, ring);
            a.mov64_reg(R2, R10).alu64_imm(BPF_ADD, R2, -i32::from(payload));
            a.mov64_imm(R3, i32::from(payload));
            a.ld_imm64(R4, spec.wakeup_flags);
            a.call(RINGBUF_OUTPUT);
            let ok = a.jmp_imm(BPF_JSGE, R0, 0);
            count(&mut a, DROPS);
            a.bind(ok);
        }
        Method::ReserveSubmit => {
            // r8 = bpf_ringbuf_reserve(ring, payload, 0); if NULL { drops += 1; return 0 }.
            a.ld_map_fd(R1, ring).mov64_imm(R2, i32::from(payload)).mov64_imm(R3, 0);
            a.call(RINGBUF_RESERVE);
            let reserved = a.jmp_imm(BPF_JNE, R0, 0);
            count(&mut a, DROPS);
            a.mov64_imm(R0, 0).exit();
            a.bind(reserved);
            a.mov64_reg(R8, R0);
            store_words(&mut a, R8, 0);
            let mut done = None;
            if spec.discard_every != 0 {
                // if (seq % discard_every == discard_every - 1) { discard; discards += 1 }.
                // 32-bit moves: the u32 constants zero-extended, not sign-extended.
                a.mov64_reg(R1, R7).mov32_imm(R2, spec.discard_every).alu64_reg(BPF_MOD, R1, R2);
                a.mov32_imm(R2, spec.discard_every - 1);
                let submit = a.jmp_reg(BPF_JNE, R1, R2);
                a.mov64_reg(R1, R8).ld_imm64(R2, spec.wakeup_flags).call(RINGBUF_DISCARD);
                count(&mut a, DISCARDS);
                done = Some(a.ja());
                a.bind(submit);
            }
            a.mov64_reg(R1, R8).ld_imm64(R2, spec.wakeup_flags).call(RINGBUF_SUBMIT);
            if let Some(done) = done {
                a.bind(done);
            }
        }
    }
    a.mov64_imm(R0, 0).exit();
    a.finish()
}
