//! Output: record formats (text, hex, JSON lines), JSON string escaping, and the error
//! type every command returns (a broken pipe is not an error to report).

use std::fmt::Write as _;
use std::io::{self, Write};

use clap::ValueEnum;
use ringtrace::inspect::{InspectError, Record};

/// Why a command stopped.
#[derive(Debug)]
pub enum Failure {
    /// Report this one-line message and exit 1.
    Message(String),
    /// The reader of stdout went away (`| head`): exit quietly.
    BrokenPipe,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Message(m) => f.write_str(m),
            Failure::BrokenPipe => f.write_str("the reader of stdout went away"),
        }
    }
}

impl Failure {
    /// Names `source` (the path or kernel source a command was given) in the message,
    /// unless it already does: every error says what it is about.
    pub fn about(self, source: &std::path::Path) -> Failure {
        match self {
            Failure::Message(m) => {
                let name = source.display().to_string();
                if m.contains(&name) {
                    Failure::Message(m)
                } else {
                    Failure::Message(format!("{name}: {m}"))
                }
            }
            other => other,
        }
    }
}

impl From<InspectError> for Failure {
    fn from(e: InspectError) -> Self {
        Failure::Message(e.to_string())
    }
}

/// Whether process `pid` exists and has not exited (a zombie, exited and not yet
/// reaped, counts as exited); true if `/proc` is not mounted and it cannot be told. A
/// pid the kernel has since given to another process counts as alive: pids are what
/// ring files record.
pub fn alive(pid: impl Into<u64>) -> bool {
    let pid = pid.into();
    if pid == 0 || pid > u64::from(u32::MAX) {
        return false;
    }
    if !std::path::Path::new("/proc/self/stat").exists() {
        return true;
    }
    let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else { return false };
    // "pid (comm) S ...": the state follows the last ')'.
    let state = stat.iter().rposition(|&b| b == b')').and_then(|i| stat.get(i + 2));
    !matches!(state, Some(b'Z' | b'X'))
}

/// `1234`, or `1234 (exited)` for a process that is gone; `none` for 0.
pub fn pid_text(pid: u32) -> String {
    match pid {
        0 => "none".into(),
        p if alive(p) => p.to_string(),
        p => format!("{p} (exited)"),
    }
}

/// Writes one line to stderr; a failure to write it is ignored (`eprintln!` would
/// panic).
pub fn eprint_line(args: std::fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// Maps a write error on stdout: a broken pipe ends the command quietly.
/// Writes `text` to stdout and flushes it.
pub fn print(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(stdout_err)
}

pub fn stdout_err(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Failure::BrokenPipe
    } else {
        Failure::Message(format!("cannot write the output: {e}"))
    }
}

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
    /// One JSON object per line: {"pos":..,"pid":..,"len":..,"data":"<UTF-8 text>"},
    /// or "hex":"<hex digits>" instead of "data" when the payload is not UTF-8.
    /// Channel files: "slot" and "ts" first.
    Json,
}

/// Where a channel's record comes from: its slot, and its timestamp if the channel
/// stamps records (`r.payload` is then the payload past the stamp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    pub slot: u32,
    pub ts: Option<u64>,
}

/// Writes one record in `format`, newline included.
pub fn write_record(w: &mut impl Write, format: Format, r: &Record<'_>) -> io::Result<()> {
    write_line(w, format, r, None)
}

/// Writes one channel record in `format`, newline included: text and hex lines start
/// with the slot and the timestamp (`-` without one), JSON objects with `slot` and `ts`
/// (`null` without one).
pub fn write_channel_record(w: &mut impl Write, format: Format, r: &Record<'_>, o: Origin) -> io::Result<()> {
    write_line(w, format, r, Some(o))
}

fn write_line(w: &mut impl Write, format: Format, r: &Record<'_>, origin: Option<Origin>) -> io::Result<()> {
    let mut line = String::with_capacity(r.payload.len() + 64);
    if let (Some(o), Format::Text | Format::Hex) = (origin, format) {
        match o.ts {
            Some(ts) => _ = write!(line, "{} {ts} ", o.slot),
            None => _ = write!(line, "{} - ", o.slot),
        }
    }
    match format {
        Format::Text => escape_text(&mut line, r.payload),
        Format::Hex => hex(&mut line, r.payload),
        Format::Json => {
            line.push('{');
            if let Some(o) = origin {
                match o.ts {
                    Some(ts) => _ = write!(line, "\"slot\":{},\"ts\":{ts},", o.slot),
                    None => _ = write!(line, "\"slot\":{},\"ts\":null,", o.slot),
                }
            }
            let _ = write!(line, "\"pos\":{},\"pid\":{},\"len\":{},", r.pos, r.pid, r.payload.len());
            match std::str::from_utf8(r.payload) {
                Ok(s) => {
                    line.push_str("\"data\":");
                    json_string(&mut line, s);
                }
                Err(_) => {
                    line.push_str("\"hex\":\"");
                    hex(&mut line, r.payload);
                    line.push('"');
                }
            }
            line.push('}');
        }
    }
    line.push('\n');
    w.write_all(line.as_bytes())
}

/// Appends `bytes` as text on one line (see [`Format::Text`]).
pub fn escape_text(out: &mut String, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
}

/// Appends `bytes` as lowercase hex.
pub fn hex(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
}

/// Appends `s` as a JSON string literal (quotes included).
pub fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(payload: &[u8]) -> String {
        let mut v = Vec::new();
        let r = Record { pos: 8, pid: 3, payload };
        for f in [Format::Text, Format::Hex, Format::Json] {
            write_record(&mut v, f, &r).unwrap();
        }
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn channel_formats() {
        let mut v = Vec::new();
        let r = Record { pos: 8, pid: 3, payload: b"hi" };
        for (f, ts) in [(Format::Text, Some(5)), (Format::Hex, None), (Format::Json, Some(5)), (Format::Json, None)] {
            write_channel_record(&mut v, f, &r, Origin { slot: 2, ts }).unwrap();
        }
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "2 5 hi\n2 - 6869\n{\"slot\":2,\"ts\":5,\"pos\":8,\"pid\":3,\"len\":2,\"data\":\"hi\"}\n\
             {\"slot\":2,\"ts\":null,\"pos\":8,\"pid\":3,\"len\":2,\"data\":\"hi\"}\n"
        );
    }

    #[test]
    fn formats() {
        assert_eq!(rec(b"hi"), "hi\n6869\n{\"pos\":8,\"pid\":3,\"len\":2,\"data\":\"hi\"}\n");
        assert_eq!(
            rec(b"a\n\"\x1b\\"),
            "a\\n\"\\u{1b}\\\\\n610a221b5c\n{\"pos\":8,\"pid\":3,\"len\":5,\"data\":\"a\\n\\\"\\u001b\\\\\"}\n"
        );
        assert_eq!(rec(b"\xffz\xc3\xa9"), "\\xffzé\nff7ac3a9\n{\"pos\":8,\"pid\":3,\"len\":4,\"hex\":\"ff7ac3a9\"}\n");
    }
}
