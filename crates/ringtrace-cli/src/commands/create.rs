//! `ringtrace create`: a new ring file, of the producer kind and mode asked for.

use std::path::Path;

use clap::ValueEnum;
use ringtrace::config::{Discard, Mode, Mpsc, Overwrite, ProducerKind, Spsc};
use ringtrace::RingBuf;

use crate::destination::create_file;
use crate::failure::{chain, Failure};
use crate::output::eprint_line;
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
    let replace = match std::fs::symlink_metadata(path) {
        Ok(m) if !force => {
            let what = if m.is_dir() { "a directory" } else { "a file" };
            return Err(Failure::msg(format!(
                "{} exists ({what}); create makes a new ring file (--force replaces a regular file)",
                path.display()
            )));
        }
        Ok(m) if !m.file_type().is_file() => {
            return Err(Failure::msg(format!(
                "{} is {}: --force replaces regular files only",
                path.display(),
                file_kind(&m.file_type())
            )));
        }
        Ok(_) => true,
        Err(_) => false,
    };
    // Made under a temporary name and renamed into place: nobody attaches to a ring
    // being initialised, and a failure leaves the old file as it was.
    let max_record = create_file(path, replace, |tmp| match (producers, mode) {
        (ProducersArg::Mpsc, ModeArg::Discard) => create::<Mpsc, Discard>(tmp, capacity),
        (ProducersArg::Mpsc, ModeArg::Overwrite) => create::<Mpsc, Overwrite>(tmp, capacity),
        (ProducersArg::Spsc, ModeArg::Discard) => create::<Spsc, Discard>(tmp, capacity),
        (ProducersArg::Spsc, ModeArg::Overwrite) => create::<Spsc, Overwrite>(tmp, capacity),
    })
    .map_err(|e| e.about(path))?;
    let kind = producers.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default();
    let mode = mode.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default();
    eprint_line(format_args!(
        "created {}: {kind} {mode} ring of {}, records of at most {}",
        path.display(),
        bytes(capacity),
        bytes(max_record as u64)
    ));
    Ok(())
}

/// What a file that is not a regular file is, for messages.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Creates the ring file; returns the largest record it takes.
fn create<K: ProducerKind, M: Mode>(path: &Path, capacity: u64) -> Result<usize, Failure> {
    let ring = RingBuf::<K, M>::builder(capacity).create(path).map_err(|e| match &e {
        // The library names the temporary file it was making; the message names the
        // ring file asked for (`Failure::about`).
        ringtrace::Error::NoSpace { bytes: size, source, .. } => {
            Failure::msg(format!("cannot create it: reserving {} for it: {source}", bytes(*size)))
        }
        _ => Failure::msg(format!("cannot create it: {}", chain(&e))),
    })?;
    Ok(ring.max_record_len())
}
