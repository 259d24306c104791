//! `ringtrace create`: a new ring file, of the producer kind and mode asked for.

use std::path::Path;

use clap::ValueEnum;
use ringtrace::config::{Discard, Mode, Mpsc, Overwrite, ProducerKind, Spsc};
use ringtrace::RingBuf;

use crate::failure::Failure;
use crate::output::print;
use crate::units::bytes;

/// What a ring does when it is full (the library's `Discard` and `Overwrite`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Refuse new records while the ring is full (each refusal is counted as lost).
    #[default]
    Discard,
    /// Give up the oldest records to make room: a flight recorder.
    Overwrite,
}

/// Who writes the ring (the library's `Mpsc` and `Spsc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ProducersArg {
    /// Any number of producers, in any processes.
    #[default]
    Mpsc,
    /// One producer at a time.
    Spsc,
}

pub fn run(path: &Path, capacity: u64, mode: ModeArg, producers: ProducersArg, force: bool) -> Result<(), Failure> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !force => {
            let what = if m.is_dir() { "a directory" } else { "a file" };
            return Err(Failure::msg(format!(
                "{} exists ({what}); create makes a new ring file (--force replaces a file)",
                path.display()
            )));
        }
        Ok(m) if m.is_dir() => {
            return Err(Failure::msg(format!("{} is a directory: --force replaces files only", path.display())));
        }
        Ok(_) => std::fs::remove_file(path)
            .map_err(|e| Failure::msg(format!("cannot remove {} to replace it: {e}", path.display())))?,
        Err(_) => {}
    }
    let max_record = match (producers, mode) {
        (ProducersArg::Mpsc, ModeArg::Discard) => create::<Mpsc, Discard>(path, capacity)?,
        (ProducersArg::Mpsc, ModeArg::Overwrite) => create::<Mpsc, Overwrite>(path, capacity)?,
        (ProducersArg::Spsc, ModeArg::Discard) => create::<Spsc, Discard>(path, capacity)?,
        (ProducersArg::Spsc, ModeArg::Overwrite) => create::<Spsc, Overwrite>(path, capacity)?,
    };
    let kind = producers.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default();
    let mode = mode.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default();
    print(&format!(
        "created {}: {kind} {mode} ring of {}, records of at most {}\n",
        path.display(),
        bytes(capacity),
        bytes(max_record as u64)
    ))
}

/// Creates the ring file; returns the largest record it takes.
fn create<K: ProducerKind, M: Mode>(path: &Path, capacity: u64) -> Result<usize, Failure> {
    let ring = RingBuf::<K, M>::builder(capacity)
        .create(path)
        .map_err(|e| Failure::msg(format!("cannot create {}: {e}", path.display())))?;
    Ok(ring.max_record_len())
}
