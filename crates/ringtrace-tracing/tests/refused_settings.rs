//! A recorder's settings are checked before anything is made: a build refused for a
//! setting is a typed error ([`Error::Config`], or [`Error::Ring`] with
//! `InvalidCapacity` for a ring size that is not one) and leaves no file or directory
//! behind, so that the corrected build then succeeds.

mod common;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use common::TempDir;
use proptest::prelude::*;
use ringtrace_tracing::{Builder, Error};

/// Where the recorder is made.
#[derive(Clone, Copy, Debug)]
enum Place {
    Memory,
    /// A recorder directory that does not exist.
    NewDirectory,
    /// One whose parent does not exist either.
    NestedNewDirectory,
    /// One that exists, empty, mode 0700.
    EmptyDirectory,
    Stream,
}

/// Every path under `dir`, relative, sorted.
fn listing(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
            if p.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn builder(place: Place, base: &TempDir) -> Builder {
    match place {
        Place::Memory => Builder::flight_recorder(),
        Place::NewDirectory | Place::EmptyDirectory => Builder::flight_recorder().directory(base.join("rec")),
        Place::NestedNewDirectory => Builder::flight_recorder().directory(base.join("a/b/rec")),
        Place::Stream => Builder::stream(base.join("stream.rtt")),
    }
}

#[derive(Clone, Copy, Debug)]
struct Settings {
    per_thread: u64,
    max_threads: u32,
    max_record: Option<usize>,
    max_value: usize,
}

impl Settings {
    fn apply(self, b: Builder) -> Builder {
        let b = b.per_thread_bytes(self.per_thread).max_threads(self.max_threads).max_value_bytes(self.max_value);
        match self.max_record {
            Some(n) => b.max_record_bytes(n),
            None => b,
        }
    }

    /// Whether every setting is in its documented range (the record bounds chosen are
    /// far inside or far outside what a ring of 4 to 64 KiB holds).
    fn valid(self) -> bool {
        let ring = self.per_thread.is_power_of_two() && (4096..=1 << 16).contains(&self.per_thread);
        let record = match self.max_record {
            None => true,
            Some(n) => (64..=1000).contains(&n),
        };
        ring && (1..=4096).contains(&self.max_threads) && record && (1..=65535).contains(&self.max_value)
    }
}

fn settings() -> impl Strategy<Value = Settings> {
    (
        prop::sample::select(vec![0u64, 1000, 4096, 3 << 12, 1 << 16]),
        prop::sample::select(vec![0u32, 1, 3, 4097, u32::MAX]),
        prop::sample::select(vec![None, Some(10usize), Some(64), Some(1000), Some(100_000_000)]),
        prop::sample::select(vec![0usize, 1, 1024, 65535, 65536]),
    )
        .prop_map(|(per_thread, max_threads, max_record, max_value)| Settings {
            per_thread,
            max_threads,
            max_record,
            max_value,
        })
}

fn place() -> impl Strategy<Value = Place> {
    prop::sample::select(vec![
        Place::Memory,
        Place::NewDirectory,
        Place::NestedNewDirectory,
        Place::EmptyDirectory,
        Place::Stream,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Any settings, anywhere: a valid build succeeds; an invalid one fails with a
    /// setting's typed error and leaves the file system as it was.
    #[test]
    fn a_refused_setting_is_a_typed_error_and_makes_nothing(place in place(), s in settings()) {
        let base = TempDir::new("settings");
        if let Place::EmptyDirectory = place {
            std::fs::DirBuilder::new().mode(0o700).create(base.join("rec")).unwrap();
        }
        let before = listing(&base.0);
        match s.apply(builder(place, &base)).build() {
            Ok((_layer, recorder)) => {
                prop_assert!(s.valid(), "{s:?} was accepted");
                drop(recorder);
            }
            Err(e) => {
                prop_assert!(!s.valid(), "{s:?} was refused: {e}");
                prop_assert!(
                    matches!(e, Error::Config(_) | Error::Ring(ringtrace::Error::InvalidCapacity { .. })),
                    "{s:?}: not a setting's error: {e:?}"
                );
                prop_assert_eq!(listing(&base.0), before, "{:?} {:?} refused ({}), and left files", place, s, e);
            }
        }
    }
}

#[test]
fn too_many_threads_for_a_directory_is_a_config_error_and_the_corrected_build_succeeds() {
    let base = TempDir::new("threads");
    let dir = base.join("rec");
    let e = Builder::flight_recorder().directory(&dir).max_threads(4097).build().unwrap_err();
    assert!(matches!(&e, Error::Config(m) if m.contains("max_threads 4097")), "{e:?}");
    assert!(!dir.exists(), "the refused build made {}", dir.display());
    let (_layer, recorder) = Builder::flight_recorder().directory(&dir).max_threads(4).build().unwrap();
    drop(recorder);
    assert_eq!(listing(&dir), [PathBuf::from("catalog.rtt"), PathBuf::from("rings.chan")]);
}
