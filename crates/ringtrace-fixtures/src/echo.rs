//! The user ring buffer's consumer: a hand-assembled socket filter that drains a
//! `BPF_MAP_TYPE_USER_RINGBUF` map with `bpf_user_ringbuf_drain` and echoes every sample,
//! byte for byte, into a `BPF_MAP_TYPE_RINGBUF` map, driven by `BPF_PROG_TEST_RUN`.
//!
//! What the kernel requires (Linux 6.18, `kernel/bpf/verifier.c`):
//! - `bpf_user_ringbuf_drain` (helper 209) and `bpf_dynptr_read` (helper 201) come from
//!   `bpf_base_func_proto`, which gives them to any program type, socket filters
//!   included, whose loader has CAP_BPF;
//! - the callback is a subprogram whose address is loaded with a `BPF_PSEUDO_FUNC` 64-bit
//!   immediate; `check_ld_imm` refuses that without BTF `func_info` ("missing btf
//!   func_info") and unless the callback's BTF `FUNC` is static ("callback function not
//!   static"). So the load carries a minimal hand-written BTF ([`crate::btf`]): an `int`,
//!   a `void *`, the two prototypes and the two `FUNC`s, one `struct bpf_func_info` each.
//!
//! The sample's length: `bpf_dynptr_size` is a kfunc (it would need BTF ids of the
//! running kernel), so the callback finds the length with helpers alone: a
//! `bpf_dynptr_read` of 0 bytes at offset `k` succeeds exactly when `k <= size`
//! (`bpf_dynptr_check_off_len`), so 13 such probes, one a bit from bit 12 down, binary
//! search the size (up to 8191) without a branch the verifier would have to follow both
//! ways: each probe's result `(r0 >> 63) ^ 1` (1 when it succeeded) is shifted into place
//! and or-ed in. The samples need no length prefix: any bytes are echoed.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::asm::*;
use crate::btf::{Btf, Linkage};
use crate::prog::{load_socket_filter, MAP_LOOKUP_ELEM, PACKET, RINGBUF_OUTPUT};
use crate::sys;

// Helper ids (`enum bpf_func_id`).
const DYNPTR_READ: i32 = 201;
const USER_RINGBUF_DRAIN: i32 = 209;

/// The longest sample [`EchoProgram`] echoes (its per-CPU copy buffer, a
/// `BPF_MAP_TYPE_PERCPU_ARRAY` value); a longer one is counted in
/// [`EchoCounters::bad_length`] and dropped.
pub const ECHO_MAX_SAMPLE: u32 = 4096;

/// Probes of the size search: sizes up to `2^SEARCH_BITS - 1` are found exactly, longer
/// ones read as that, which is over [`ECHO_MAX_SAMPLE`].
const SEARCH_BITS: i32 = 13;
const _: () = assert!(ECHO_MAX_SAMPLE < (1 << SEARCH_BITS) - 1);

/// Offsets of the counters in the counters map's one value.
const ECHOED: i16 = 0;
const BAD_LENGTH: i16 = 8;
const READ_FAILED: i16 = 16;
const OUTPUT_FAILED: i16 = 24;
const COUNTERS_SIZE: u32 = 32;

/// The callback's counters (one ARRAY map value), read with [`EchoProgram::counters`].
/// Every sample the callback is called with (every sample drained, discarded ones aside)
/// is counted in exactly one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EchoCounters {
    /// Samples written to the output ring (`bpf_ringbuf_output` succeeded).
    pub echoed: u64,
    /// Samples longer than [`ECHO_MAX_SAMPLE`], dropped.
    pub bad_length: u64,
    /// Samples whose copy out of the user ring (`bpf_dynptr_read`) failed: never expected,
    /// as the length read is the length found.
    pub read_failed: u64,
    /// Samples `bpf_ringbuf_output` refused (the output ring full), dropped.
    pub output_failed: u64,
}

/// A socket-filter program, hand-assembled (no clang), that drains a user ring buffer map
/// into a ring buffer map: each run calls `bpf_user_ringbuf_drain(user_ring, echo_sample,
/// NULL, 0)` once and returns its result; the callback copies each sample (up to
/// [`ECHO_MAX_SAMPLE`] bytes, any length from 0) with `bpf_dynptr_read` into a per-CPU
/// buffer and writes it to the output ring with `bpf_ringbuf_output(out, buf, len, 0)`:
/// the same bytes, the same length, in order.
///
/// What a drain does with the samples (`bpf_user_ringbuf_drain` and
/// `__bpf_user_ringbuf_peek` in `kernel/bpf/ringbuf.c`):
/// - it stops at the producer position, at a sample whose header has
///   `BPF_RINGBUF_BUSY_BIT` set (not yet committed: the consumer position stays at that
///   sample, which the next drain after the commit starts with), or after
///   `BPF_MAX_USER_RINGBUF_SAMPLES` (128 * 1024) samples, discarded ones included;
/// - a sample with `BPF_RINGBUF_DISCARD_BIT` is skipped (the consumer position moves past
///   it) without a callback and is not counted in the return value;
/// - it returns the samples handed to the callback, or a negative errno: `-EBUSY` if
///   another drain of the map is under way, `-EINVAL` for a producer position not a
///   multiple of 8 or a sample header whose length runs past it, `-E2BIG` for a sample
///   longer than the ring (samples consumed before the error stay consumed);
/// - each sample's space is released (consumer position stored with release) once its
///   callback returns.
#[derive(Debug)]
pub struct EchoProgram {
    prog: OwnedFd,
    counters: OwnedFd,
}

impl EchoProgram {
    /// Assembles and loads the program for `user_ring` (a `BPF_MAP_TYPE_USER_RINGBUF`
    /// map, see [`crate::UserRingMap`]) and `out_ring` (a `BPF_MAP_TYPE_RINGBUF` map, see
    /// [`crate::RingMap`]), with a new counters map and copy buffer. A verifier rejection
    /// is an error whose message holds the verifier log.
    pub fn load(user_ring: BorrowedFd<'_>, out_ring: BorrowedFd<'_>) -> io::Result<EchoProgram> {
        let counters = crate::create_array_map(COUNTERS_SIZE, 1)?;
        let buffer = sys::map_create(sys::MapCreateAttr {
            map_type: sys::BPF_MAP_TYPE_PERCPU_ARRAY,
            key_size: 4,
            value_size: ECHO_MAX_SAMPLE,
            max_entries: 1,
            map_flags: 0,
        })?;
        let (insns, callback) =
            assemble(user_ring.as_raw_fd(), out_ring.as_raw_fd(), counters.as_raw_fd(), buffer.as_raw_fd());
        let (btf, func_info) = load_btf(callback)?;
        let btf = sys::ProgBtf { btf: btf.as_fd(), func_info: &func_info };
        // The program holds its own references to the maps and the BTF from here on.
        let prog = load_socket_filter(&insns, Some(btf), "user ring echo")?;
        Ok(EchoProgram { prog, counters })
    }

    /// Runs the program once with `BPF_PROG_TEST_RUN` (`data_in`: a 64-byte zeroed
    /// packet): one `bpf_user_ringbuf_drain`. Returns its result, carried out as the
    /// program's return value (`attr.test.retval`, sign-extended from 32 bits): the
    /// samples handed to the callback (0 for an empty ring), or a negative errno.
    pub fn run(&self) -> io::Result<i64> {
        let retval = sys::prog_test_run(self.prog.as_fd(), &PACKET, 1)?;
        Ok(i64::from(retval as i32))
    }

    /// Reads the callback's counters.
    pub fn counters(&self) -> io::Result<EchoCounters> {
        let mut value = [0u8; COUNTERS_SIZE as usize];
        sys::map_lookup_elem(self.counters.as_fd(), &0u32.to_ne_bytes(), &mut value)?;
        let word = |off: i16| {
            let off = off as usize;
            u64::from_ne_bytes(value[off..off + 8].try_into().unwrap())
        };
        Ok(EchoCounters {
            echoed: word(ECHOED),
            bad_length: word(BAD_LENGTH),
            read_failed: word(READ_FAILED),
            output_failed: word(OUTPUT_FAILED),
        })
    }
}

/// Loads the program's BTF: `int echo(void *ctx)` (global, the main program) and
/// `static int echo_sample(void *sample, void *ctx)` (the callback, at instruction
/// `callback`). Returns it with the two `func_info` records.
fn load_btf(callback: usize) -> io::Result<(OwnedFd, [sys::FuncInfo; 2])> {
    let mut btf = Btf::new();
    let int = btf.signed_int("int", 4);
    let void_ptr = btf.ptr(0);
    let main_proto = btf.func_proto(int, &[("ctx", void_ptr)]);
    let main = btf.func("echo", main_proto, Linkage::Global);
    let cb_proto = btf.func_proto(int, &[("sample", void_ptr), ("ctx", void_ptr)]);
    let cb = btf.func("echo_sample", cb_proto, Linkage::Static);
    let blob = btf.finish();
    let fd = match sys::btf_load(&blob, None) {
        Ok(fd) => fd,
        Err(err) => {
            let mut log = vec![0u8; crate::prog::LOG_SIZE];
            let _ = sys::btf_load(&blob, Some(&mut log));
            let log = crate::prog::log_text(&log);
            return Err(io::Error::new(err.kind(), format!("BPF_BTF_LOAD failed: {err}\nBTF log:\n{log}")));
        }
    };
    let func_info =
        [sys::FuncInfo { insn_off: 0, type_id: main }, sys::FuncInfo { insn_off: callback as u32, type_id: cb }];
    Ok((fd, func_info))
}

/// The program; returns it with the callback's first instruction. Callback registers:
/// r6 = the sample's dynptr, r7 = the counters value, r8 = the copy buffer, r9 = the
/// sample's length.
fn assemble(user_ring: i32, out_ring: i32, counters: i32, buffer: i32) -> (Vec<Insn>, usize) {
    let mut a = Asm::new();

    // Main: return bpf_user_ringbuf_drain(user_ring, echo_sample, NULL, 0).
    a.ld_map_fd(R1, user_ring);
    let echo_sample = a.ld_func(R2);
    a.mov64_imm(R3, 0).mov64_imm(R4, 0).call(USER_RINGBUF_DRAIN).exit();

    // echo_sample(r1 = sample dynptr, r2 = NULL): returns 0 (go on) whatever happens.
    let callback = a.len();
    a.bind_func(echo_sample);
    a.mov64_reg(R6, R1);
    // r7 = bpf_map_lookup_elem(counters, &(u32)0), r8 = the same in buffer; if NULL
    // return 0.
    a.st_imm(BPF_W, R10, -4, 0);
    for (map, reg) in [(counters, R7), (buffer, R8)] {
        a.mov64_reg(R2, R10).alu64_imm(BPF_ADD, R2, -4);
        a.ld_map_fd(R1, map).call(MAP_LOOKUP_ELEM);
        let found = a.jmp_imm(BPF_JNE, R0, 0);
        a.mov64_imm(R0, 0).exit();
        a.bind(found);
        a.mov64_reg(reg, R0);
    }

    // r9 = the sample's size (at most 2^SEARCH_BITS - 1): for each bit from the top,
    // r9 |= bit if bpf_dynptr_read(buffer, 0, sample, r9 | bit, 0) == 0.
    a.mov64_imm(R9, 0);
    for bit in (0..SEARCH_BITS).rev() {
        a.mov64_reg(R1, R8).mov64_imm(R2, 0).mov64_reg(R3, R6);
        a.mov64_reg(R4, R9).alu64_imm(BPF_OR, R4, 1 << bit);
        a.mov64_imm(R5, 0).call(DYNPTR_READ);
        // r0 = 0 or a negative errno: r0 >> 63 is 1 on failure.
        a.alu64_imm(BPF_RSH, R0, 63).alu64_imm(BPF_XOR, R0, 1).alu64_imm(BPF_LSH, R0, bit);
        a.alu64_reg(BPF_OR, R9, R0);
    }

    // *(u64 *)(r7 + counter) += 1; return 0.
    let count_and_return = |a: &mut Asm, counter: i16| {
        a.mov64_imm(R1, 1).atomic(BPF_DW, R7, counter, R1, i32::from(BPF_ADD));
        a.mov64_imm(R0, 0).exit();
    };

    let too_long = a.jmp_imm(BPF_JGT, R9, ECHO_MAX_SAMPLE as i32);
    // if (bpf_dynptr_read(buffer, r9, sample, 0, 0) < 0) { read_failed += 1; return 0 }.
    a.mov64_reg(R1, R8).mov64_reg(R2, R9).mov64_reg(R3, R6).mov64_imm(R4, 0).mov64_imm(R5, 0);
    a.call(DYNPTR_READ);
    let read = a.jmp_imm(BPF_JSGE, R0, 0);
    count_and_return(&mut a, READ_FAILED);
    a.bind(read);
    // if (bpf_ringbuf_output(out_ring, buffer, r9, 0) < 0) { output_failed += 1; return 0 }.
    a.ld_map_fd(R1, out_ring).mov64_reg(R2, R8).mov64_reg(R3, R9).mov64_imm(R4, 0);
    a.call(RINGBUF_OUTPUT);
    let output = a.jmp_imm(BPF_JSGE, R0, 0);
    count_and_return(&mut a, OUTPUT_FAILED);
    a.bind(output);
    count_and_return(&mut a, ECHOED);
    a.bind(too_long);
    count_and_return(&mut a, BAD_LENGTH);

    (a.finish(), callback)
}
