//! The pipeline's outputs: records written one a line ([`text`], [`hex`], [`json`],
//! chosen by [`Format`] in [`Format::lines`]), or a source read whole written as a
//! trace other tools open ([`export`]).
//!
//! A line output is a [`LineFormat`]; [`Lines`] writes its lines to stdout or a file
//! through a buffer, the [`Sink`] that sources and the runner write records into.

pub mod export;
mod hex;
mod json;
#[cfg(feature = "otlp")]
pub mod otlp;
mod text;

use std::io::{self, Write};

use clap::ValueEnum;

use super::record::{Record, Shape};
use crate::failure::Failure;

/// How records are printed, one per line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The payload as text: valid UTF-8 as is, with `\n`, `\r`, `\t`, `\\` and
    /// `\u{..}` escapes for other control characters and `\xNN` for bytes that are not
    /// UTF-8.
    #[default]
    Text,
    /// The payload as lowercase hex digits (one line per record; `xxd -r -p` reads it).
    /// Channel files: text and hex lines start with the slot and the timestamp.
    Hex,
    /// One JSON object per line: "pos", "pid", "len", and "data" (the payload as UTF-8
    /// text), or "hex" (its hex digits) instead of "data" when it is not UTF-8.
    /// Channel files: "slot" and "ts" first ("ts" a decimal string, or null).
    Json,
}

impl Format {
    /// The line output of this format: the one place that names them.
    pub fn lines(self) -> &'static dyn LineFormat {
        match self {
            Format::Text => &text::Text,
            Format::Hex => &hex::Hex,
            Format::Json => &json::Json,
        }
    }
}

/// A way of writing a record as one line.
pub trait LineFormat {
    /// Refuses records of a shape it does not write.
    fn accepts(&self, _shape: Shape) -> Result<(), Failure> {
        Ok(())
    }

    /// Appends `r` as one line, without its newline.
    fn line(&self, r: &Record<'_>, out: &mut String) -> io::Result<()>;
}

/// Where records go, one at a time: what sources that consume and follow write into.
pub trait Sink {
    /// Writes one record (buffered).
    fn write(&mut self, r: &Record<'_>) -> io::Result<()>;
    /// Writes through what is buffered.
    fn flush(&mut self) -> io::Result<()>;
    /// Drops what is buffered and not yet written (a consumer that puts the records
    /// back).
    fn forget(&mut self);
}

/// The buffer's size: past it, lines are written through.
const BUFFER: usize = 8 << 10;

/// A [`LineFormat`]'s lines written to `W` through a buffer (what is buffered is
/// written when it is dropped, errors ignored, as `BufWriter` does).
pub struct Lines<W: Write> {
    w: W,
    format: &'static dyn LineFormat,
    buf: Vec<u8>,
    line: String,
}

impl<W: Write> Lines<W> {
    pub fn new(w: W, format: &'static dyn LineFormat) -> Self {
        Lines { w, format, buf: Vec::with_capacity(BUFFER), line: String::new() }
    }
}

impl<W: Write> Sink for Lines<W> {
    fn write(&mut self, r: &Record<'_>) -> io::Result<()> {
        self.line.clear();
        self.format.line(r, &mut self.line)?;
        self.line.push('\n');
        if self.buf.len() + self.line.len() > BUFFER {
            self.flush()?;
        }
        if self.line.len() >= BUFFER {
            return self.w.write_all(self.line.as_bytes());
        }
        self.buf.extend_from_slice(self.line.as_bytes());
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        // Taken out first: a failed write leaves nothing to write again on drop.
        let buf = std::mem::take(&mut self.buf);
        let r = self.w.write_all(&buf).and_then(|()| self.w.flush());
        self.buf = buf;
        self.buf.clear();
        r
    }

    fn forget(&mut self) {
        self.buf.clear();
    }
}

impl<W: Write> Drop for Lines<W> {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            let _ = self.flush();
        }
    }
}

impl<W: Write> std::fmt::Debug for Lines<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lines").field("buffered", &self.buf.len()).finish()
    }
}
