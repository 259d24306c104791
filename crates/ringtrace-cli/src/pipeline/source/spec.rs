//! What a SOURCE argument names ([`Spec`]): the library's grammar
//! ([`ringtrace::source`]), with the command's own `kafka://` scheme tested first.

use std::ffi::OsStr;
use std::path::PathBuf;

use ringtrace::source::{self, Head};

use crate::failure::Failure;

/// What a SOURCE argument names, before it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// A file or a directory, told apart by [`source::Kind::of`].
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
        if let Some(rest) = arg.to_str().and_then(|s| s.strip_prefix(crate::fleet::SCHEME)) {
            return crate::fleet::Topic::parse(rest).map(Spec::Kafka);
        }
        Ok(match source::Spec::parse(arg).map_err(|e| Failure::msg(e.to_string()))? {
            source::Spec::Path(p) => Spec::File(p),
            source::Spec::BpfPin(p) => Spec::BpfPin(p),
            source::Spec::BpfId(id) => Spec::BpfId(id),
        })
    }

    /// The library's spec of a BPF map (`bpf-pin:`, `bpf-id:`), to open it with.
    pub fn map(&self) -> Option<source::Spec> {
        match self {
            Spec::BpfPin(p) => Some(source::Spec::BpfPin(p.clone())),
            Spec::BpfId(id) => Some(source::Spec::BpfId(*id)),
            Spec::File(_) | Spec::Kafka(_) => None,
        }
    }
}

/// What a file none of whose magics match is said to be.
pub fn not_ours(head: &Head) -> Failure {
    Failure::msg(format!("not a ringtrace file (ring, channel, snapshot or trace): {head}"))
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
        assert!(matches!(parse("kafka://b:9092/t").unwrap(), Spec::Kafka(_)));
        assert!(parse("bpf-id:x").is_err());
        assert!(parse("bpf-id:-1").is_err());
        assert!(parse("bpf-pin:").is_err());
    }

    /// The library's recorder directory is `ringtrace-tracing`'s.
    #[test]
    fn the_recorder_directory_files_are_the_tracing_layers() {
        assert_eq!(source::RECORDER_RINGS, ringtrace_tracing::RINGS_FILE);
        assert_eq!(source::RECORDER_CATALOG, ringtrace_tracing::CATALOG_FILE);
    }
}
