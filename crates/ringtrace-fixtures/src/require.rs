//! The one way a test skips for want of BPF, `perf_event_open`, an invariant TSC, a
//! Kafka cluster, a Jaeger, root, libbpf or babeltrace2, and the variable that turns those skips into failures: [`REQUIRE_VAR`].

use std::fmt::Display;

/// The environment variable naming, comma-separated, the features a run requires:
/// `RINGTRACE_REQUIRE=bpf,perf,tsc,root,libbpf,babeltrace2,kafka,jaeger`. A test that needs a listed feature the machine
/// lacks fails with the reason instead of skipping; unset or empty, every such test
/// skips. The test command sets it, so that CI cannot pass by skipping.
pub const REQUIRE_VAR: &str = "RINGTRACE_REQUIRE";

/// What a kernel or clock test may need that a machine may lack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// BPF ring buffer maps (the `bpf` system call, CAP_BPF or root) and a private bpffs
    /// to pin them in (CAP_SYS_ADMIN): `bpf`.
    Bpf,
    /// `perf_event_open` of software events and their ring buffers
    /// (`perf_event_paranoid`, CAP_PERFMON or root, `perf_event_mlock_kb`): `perf`.
    Perf,
    /// An invariant TSC (x86-64; CPUID leaf `0x8000_0007`, EDX bit 8): `tsc`.
    Tsc,
    /// A Kafka cluster to ship to, named by `RINGTRACE_KAFKA_BROKERS` (and, for the
    /// tests that stop its nodes, its `scripts/kafka.sh` directory in
    /// `RINGTRACE_KAFKA_DIR`): `kafka`.
    Kafka,
    /// A Jaeger (v2, OTLP receivers and query API; `scripts/jaeger.sh start DIR`) to
    /// deliver OTLP to, named by `RINGTRACE_JAEGER_GRPC`, `RINGTRACE_JAEGER_HTTP` (each
    /// `HOST:PORT`) and `RINGTRACE_JAEGER_QUERY` (`http://HOST:PORT`): `jaeger`.
    Jaeger,
    /// Running as root (effective uid 0): giving a file to another user (`chown`),
    /// mounting a small tmpfs, running a reader as another user: `root`.
    Root,
    /// libbpf's shared library (`libbpf.so.1`, Debian's `libbpf1`), whose `ring_buffer`
    /// consumer the `kernel-bpf` bench compares: `libbpf`. Apart from [`Feature::Bpf`]:
    /// a machine may create BPF maps without having libbpf installed.
    Libbpf,
    /// `babeltrace2` (EfficiOS's CTF reader, Debian's `babeltrace2`), which reads the CTF
    /// exports back in the tests: `babeltrace2`.
    Babeltrace2,
}

impl Feature {
    /// Its name in [`REQUIRE_VAR`].
    pub fn name(self) -> &'static str {
        match self {
            Feature::Bpf => "bpf",
            Feature::Perf => "perf",
            Feature::Tsc => "tsc",
            Feature::Kafka => "kafka",
            Feature::Jaeger => "jaeger",
            Feature::Root => "root",
            Feature::Libbpf => "libbpf",
            Feature::Babeltrace2 => "babeltrace2",
        }
    }

    /// Every feature, in the order [`REQUIRE_VAR`]'s error lists them.
    pub const ALL: [Feature; 8] = [
        Feature::Bpf,
        Feature::Perf,
        Feature::Tsc,
        Feature::Root,
        Feature::Libbpf,
        Feature::Babeltrace2,
        Feature::Kafka,
        Feature::Jaeger,
    ];
}

/// Whether [`REQUIRE_VAR`] lists `feature`. Panics on a name it does not know: a
/// misspelt requirement would otherwise let the tests skip.
pub fn required(feature: Feature) -> bool {
    let list = std::env::var(REQUIRE_VAR).unwrap_or_default();
    let mut found = false;
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match Feature::ALL.into_iter().find(|f| f.name() == name) {
            Some(f) => found |= f == feature,
            None => {
                let known: Vec<&str> = Feature::ALL.into_iter().map(Feature::name).collect();
                panic!("{REQUIRE_VAR}={list:?}: unknown feature {name:?} (known: {})", known.join(", "))
            }
        }
    }
    found
}

/// The calling test lacks `feature`, for the reason `why`: fails it (panics) if
/// [`REQUIRE_VAR`] lists the feature, else prints that it skips. The caller then returns
/// (or leaves out the part that needs the feature).
///
/// ```no_run
/// use ringtrace_fixtures::{skip, Feature};
///
/// fn tsc() -> Result<u64, String> {
///     Err("no invariant TSC on this CPU".into())
/// }
/// let Ok(hz) = tsc() else { return skip(Feature::Tsc, "no invariant TSC on this CPU") };
/// # let _ = hz;
/// ```
#[track_caller]
pub fn skip(feature: Feature, why: impl Display) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("test");
    if required(feature) {
        panic!("{test}: {why} ({REQUIRE_VAR} lists {}: required, not skipped)", feature.name());
    }
    eprintln!("skipped {test}: {why}");
}

/// The test command's Kafka cluster: its bootstrap list (`RINGTRACE_KAFKA_BROKERS`,
/// which `scripts/kafka.sh start` prints), or `None` after [`skip`] (which fails the
/// test instead where [`REQUIRE_VAR`] lists `kafka`, as the test command's does).
#[track_caller]
pub fn kafka_brokers() -> Option<String> {
    match std::env::var("RINGTRACE_KAFKA_BROKERS") {
        Ok(b) if !b.is_empty() => Some(b),
        _ => {
            skip(Feature::Kafka, "no Kafka cluster: RINGTRACE_KAFKA_BROKERS is not set (scripts/kafka.sh start DIR)");
            None
        }
    }
}

/// Whether this process runs as root (effective uid 0). If not, skips or fails the
/// calling test as [`skip`] does, for the reason `why` (what the test needs root for),
/// and returns false: `if !have_root("chown a ring file to another user") { return; }`.
#[track_caller]
pub fn have_root(why: &str) -> bool {
    required(Feature::Root);
    if rustix::process::geteuid().is_root() {
        return true;
    }
    skip(Feature::Root, format_args!("not root: {why}"));
    false
}

/// Whether `babeltrace2` runs here (`babeltrace2 --version`). If not, skips or fails
/// the calling test as [`skip`] does, and returns false: `if have_babeltrace2() { ... }`
/// around the part that reads a CTF export back with it.
#[track_caller]
pub fn have_babeltrace2() -> bool {
    required(Feature::Babeltrace2);
    match std::process::Command::new("babeltrace2").arg("--version").output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr).trim().to_owned();
            skip(Feature::Babeltrace2, format_args!("`babeltrace2 --version` failed ({}): {why}", o.status));
            false
        }
        Err(e) => {
            skip(Feature::Babeltrace2, format_args!("babeltrace2 does not run: {e}"));
            false
        }
    }
}

/// The test command's Jaeger, as [`Feature::Jaeger`] names it.
#[derive(Clone, Debug)]
pub struct Jaeger {
    /// OTLP/gRPC receiver, `HOST:PORT`.
    pub grpc: String,
    /// OTLP/HTTP receiver, `HOST:PORT`.
    pub http: String,
    /// The query service's HTTP API, `http://HOST:PORT`.
    pub query: String,
}

/// The test command's Jaeger, or `None` after [`skip`] (which fails the test instead
/// where [`REQUIRE_VAR`] lists `jaeger`).
#[track_caller]
pub fn jaeger() -> Option<Jaeger> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    match (var("RINGTRACE_JAEGER_GRPC"), var("RINGTRACE_JAEGER_HTTP"), var("RINGTRACE_JAEGER_QUERY")) {
        (Some(grpc), Some(http), Some(query)) => Some(Jaeger { grpc, http, query }),
        _ => {
            skip(
                Feature::Jaeger,
                "no Jaeger: RINGTRACE_JAEGER_GRPC, _HTTP and _QUERY are not set (scripts/jaeger.sh start DIR)",
            );
            None
        }
    }
}

/// Whether BPF ring buffer maps can be created here ([`bpf_skip_reason`](crate::bpf_skip_reason)
/// is `None`). If not, skips or fails the calling test as [`skip`] does, and returns false:
/// `if !have_bpf() { return; }`. Reads [`REQUIRE_VAR`] either way, so that a misspelt
/// list fails the BPF tests on a machine that has everything too.
#[track_caller]
pub fn have_bpf() -> bool {
    required(Feature::Bpf);
    match crate::bpf_skip_reason() {
        None => true,
        Some(why) => {
            skip(Feature::Bpf, why);
            false
        }
    }
}
