//! Fixtures for ringtrace's kernel-ring tests and benches: BPF ring buffer maps
//! ([`RingMap`]), a private bpffs to pin them in ([`BpfFs`]), and a hand-assembled BPF
//! program ([`SeqProgram`]) that writes numbered records with known payloads
//! ([`expected_payload`]) into a ring buffer map each time it is run with
//! `BPF_PROG_TEST_RUN`: a kernel producer without clang, libbpf or a BPF object file.
//! For user-space producers: user ring buffer maps ([`UserRingMap`]) and a hand-assembled
//! consumer ([`EchoProgram`]) that drains one and echoes each sample into a ring buffer map.
//!
//! Everything needs a kernel that lets this process create BPF maps; tests call
//! [`have_bpf`] first and return where it cannot (it says why, and fails the test
//! instead where `RINGTRACE_REQUIRE` lists `bpf`: see [`skip`]). Tests of perf events
//! and of the TSC skip through [`skip`] too.
//!
//! The integration tests' shared helpers live here as well: a fresh temporary
//! directory ([`TempDir`]), a registry with a test's layer on it ([`dispatch`]), a
//! local attacker's planted files ([`give_to_attacker`], [`plant_symlink`], [`Canary`]),
//! and what a test delivered to Jaeger, read back ([`Jaeger::traces`]).
//!
//! ```no_run
//! use std::os::fd::AsFd;
//! use ringtrace_fixtures::{have_bpf, Method, ProgSpec, RingMap, SeqProgram};
//!
//! if !have_bpf() {
//!     return Ok(());
//! }
//! let ring = RingMap::create(1 << 20)?;
//! let prog = SeqProgram::load(ring.as_fd(), ProgSpec { payload: 64, method: Method::ReserveSubmit, ..Default::default() })?;
//! prog.run(1000)?; // records seq 0..1000, payload expected_payload(seq, 64)
//! assert_eq!(prog.counters()?.attempts, 1000);
//! # Ok::<(), std::io::Error>(())
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod asm;
mod bpffs;
mod btf;
mod echo;
mod files;
mod jaeger;
mod map;
mod prog;
mod require;
mod subscriber;
mod sys;
mod tmpfs;

use std::sync::OnceLock;

pub use bpffs::BpfFs;
pub use echo::{EchoCounters, EchoProgram, ECHO_MAX_SAMPLE};
pub use files::{attacker_dir, euid, give_to_attacker, mode, plant_symlink, Canary, TempDir, ATTACKER};
pub use jaeger::{http_get, jaeger_spans, unique_name, JAEGER_WAIT};
pub use map::{create_array_map, pin_fd, RingMap, UserRingMap};
pub use prog::{expected_payload, Counters, Method, ProgSpec, SeqProgram, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP};
pub use require::{
    have_babeltrace2, have_bpf, have_root, jaeger, kafka_brokers, required, skip, Feature, Jaeger, REQUIRE_VAR,
};
pub use subscriber::dispatch;
pub use tmpfs::Tmpfs;

/// `None` when BPF ring buffer maps can be created here; else a one-line reason for a bench
/// or example to print when it leaves them out (a test calls [`have_bpf`]), e.g. "BPF unavailable: bpf(BPF_MAP_CREATE) of a ring buffer map
/// failed: Operation not permitted (os error 1) (needs CAP_BPF or root)".
///
/// Probes once per process (a one-page ring buffer map, closed again).
pub fn bpf_skip_reason() -> Option<String> {
    static REASON: OnceLock<Option<String>> = OnceLock::new();
    REASON
        .get_or_init(|| {
            let page = rustix::param::page_size() as u32;
            let err = RingMap::create(page).err()?;
            let hint = match err.raw_os_error() {
                Some(libc::EPERM) => " (needs CAP_BPF or root)",
                Some(libc::ENOSYS) => " (kernel built without CONFIG_BPF_SYSCALL)",
                Some(libc::EINVAL) => " (kernel older than 5.8, without ring buffer maps?)",
                _ => "",
            };
            Some(format!("BPF unavailable: bpf(BPF_MAP_CREATE) of a ring buffer map failed: {err}{hint}"))
        })
        .clone()
}
