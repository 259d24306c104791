//! What a SOURCE argument names ([`Spec`]), and the first bytes that tell files apart.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::failure::Failure;

/// What a SOURCE argument names, before it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// A file: ring, channel or snapshot file (told by its first bytes).
    File(PathBuf),
    /// `bpf-pin:PATH`.
    BpfPin(PathBuf),
    /// `bpf-id:N`.
    BpfId(u32),
    /// `kafka://BROKERS/TOPIC`: a fleet's records (see [`crate::fleet`]).
    Kafka(crate::fleet::Topic),
}

impl Spec {
    /// Parses a SOURCE argument.
    pub fn parse(arg: &OsStr) -> Result<Spec, Failure> {
        let Some(s) = arg.to_str() else { return Ok(Spec::File(arg.into())) };
        if let Some(rest) = s.strip_prefix(crate::fleet::SCHEME) {
            return crate::fleet::Topic::parse(rest).map(Spec::Kafka);
        }
        if let Some(p) = s.strip_prefix("bpf-pin:") {
            if p.is_empty() {
                return Err(Failure::msg("bpf-pin: needs a path, as in bpf-pin:/sys/fs/bpf/events"));
            }
            return Ok(Spec::BpfPin(PathBuf::from(p)));
        }
        if let Some(n) = s.strip_prefix("bpf-id:") {
            return n.parse().map(Spec::BpfId).map_err(|_| {
                Failure::msg(format!("bpf-id:{n}: a map id is a number from 0 to {}, as in bpf-id:42", u32::MAX))
            });
        }
        Ok(Spec::File(arg.into()))
    }
}

/// The first 8 bytes of `path` (zeroes past its end) and its length.
pub fn first_bytes(path: &Path) -> Result<([u8; 8], u64), Failure> {
    let err = |e: std::io::Error| Failure::msg(format!("cannot read {}: {e}", path.display()));
    let file = File::open(path).map_err(err)?;
    let len = file.metadata().map_err(err)?.len();
    let mut head = [0u8; 8];
    let mut got = 0;
    let mut reader = file.take(8);
    while got < 8 {
        match reader.read(&mut head[got..]).map_err(err)? {
            0 => break,
            n => got += n,
        }
    }
    Ok((head, len))
}

/// What a file none of whose magics match is said to be.
pub fn not_ours(head: &[u8; 8], len: u64) -> Failure {
    const WHAT: &str = "not a ringtrace file (ring, channel, snapshot or trace)";
    if len == 0 {
        return Failure::msg(format!("{WHAT}: the file is empty"));
    }
    let shown = &head[..len.min(8) as usize];
    let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
    let text: String = shown.iter().map(|&b| if b.is_ascii_graphic() { b as char } else { '.' }).collect();
    Failure::msg(format!("{WHAT}: it is {len} bytes and starts with {} ({text:?})", hex.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Spec, Failure> {
        Spec::parse(OsStr::new(s))
    }

    #[test]
    fn sources_parse() {
        assert_eq!(parse("bpf-id:42").unwrap(), Spec::BpfId(42));
        assert_eq!(parse("bpf-pin:/sys/fs/bpf/x").unwrap(), Spec::BpfPin("/sys/fs/bpf/x".into()));
        assert_eq!(parse("/dev/shm/app.ring").unwrap(), Spec::File("/dev/shm/app.ring".into()));
        assert!(parse("bpf-id:x").is_err());
        assert!(parse("bpf-id:-1").is_err());
        assert!(parse("bpf-pin:").is_err());
    }
}
