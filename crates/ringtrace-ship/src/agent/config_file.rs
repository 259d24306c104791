//! The agent's configuration file (TOML): what `ship --config FILE` reads.
//!
//! ```toml
//! brokers = "k1:9092,k2:9092,k3:9092"   # Kafka's bootstrap servers
//! topic = "traces"
//! host = "web-1"                         # this host's name in every record
//! state = "/var/lib/ringtrace-ship/web-1.state"
//! sources = ["/dev/shm/app.ring", "/dev/shm/rings"]   # ring and channel files, directories
//!
//! # Optional, with their defaults:
//! compression = "lz4"        # "lz4", "zstd" or "none"
//! max_message = 1000000      # bytes; at most the topic's max.message.bytes
//! batch_bytes = 262144
//! round_bytes = 4194304
//! ack_timeout_ms = 30000
//!
//! # A spool directory (none by default): rounds Kafka did not take within
//! # spool_wait_ms wait there, up to spool_max bytes, instead of in the rings.
//! spool = "/var/lib/ringtrace-ship/spool"
//! spool_max = 1073741824
//! spool_wait_ms = 2000
//! ```
//!
//! Unknown keys are refused (a misspelt key would otherwise be a silent default), as
//! are values of the wrong type; the error names the key and the line. Options given on
//! the command line take precedence over the file's.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::kafka::Compression;

/// The largest configuration file read.
const MAX_FILE: u64 = 1 << 20;

/// The file's keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    brokers: Option<String>,
    topic: Option<String>,
    host: Option<String>,
    state: Option<PathBuf>,
    #[serde(default)]
    sources: Vec<PathBuf>,
    compression: Option<Codec>,
    max_message: Option<usize>,
    batch_bytes: Option<usize>,
    round_bytes: Option<usize>,
    ack_timeout_ms: Option<u64>,
    spool: Option<PathBuf>,
    spool_max: Option<u64>,
    spool_wait_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Codec {
    None,
    Lz4,
    Zstd,
}

/// What a configuration file says; each `None` leaves the command line's value (or the
/// default) in place.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FileConfig {
    /// `brokers`.
    pub brokers: Option<String>,
    /// `topic`.
    pub topic: Option<String>,
    /// `host`.
    pub host: Option<String>,
    /// `state`, relative paths taken from the file's directory.
    pub state: Option<PathBuf>,
    /// `sources`, relative paths taken from the file's directory (`bpf-pin:PATH` and
    /// `bpf-id:N` name BPF maps: a pin's path is taken as written).
    pub sources: Vec<PathBuf>,
    /// `compression`.
    pub compression: Option<Compression>,
    /// `max_message`.
    pub max_message: Option<usize>,
    /// `batch_bytes`.
    pub batch_bytes: Option<usize>,
    /// `round_bytes`.
    pub round_bytes: Option<usize>,
    /// `ack_timeout_ms`.
    pub ack_timeout: Option<Duration>,
    /// `spool`, a relative path taken from the file's directory.
    pub spool: Option<PathBuf>,
    /// `spool_max`.
    pub spool_max: Option<u64>,
    /// `spool_wait_ms`.
    pub spool_wait: Option<Duration>,
}

impl FileConfig {
    /// Reads and parses the file at `path` (at most 1 MiB).
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let read = |source| ConfigError::Read { path: path.to_path_buf(), source };
        let meta = std::fs::metadata(path).map_err(read)?;
        if !meta.is_file() || meta.len() > MAX_FILE {
            return Err(ConfigError::NotAFile { path: path.to_path_buf() });
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        let base = path.parent().unwrap_or(Path::new("."));
        FileConfig::parse(&text, base).map_err(|source| ConfigError::Parse { path: path.to_path_buf(), source })
    }

    /// Parses `text`; relative paths are taken from `base`.
    pub fn parse(text: &str, base: &Path) -> Result<FileConfig, ParseError> {
        let f: File = toml::from_str(text)?;
        if f.batch_bytes == Some(0) || f.round_bytes == Some(0) || f.ack_timeout_ms == Some(0) {
            return Err(ParseError::Zero("batch_bytes, round_bytes and ack_timeout_ms"));
        }
        if f.spool_max == Some(0) || f.spool_wait_ms == Some(0) {
            return Err(ParseError::Zero("spool_max and spool_wait_ms"));
        }
        Ok(FileConfig {
            brokers: f.brokers,
            topic: f.topic,
            host: f.host,
            state: f.state.map(|p| base.join(p)),
            // A BPF map (`bpf-pin:PATH`, `bpf-id:N`) is not a path of the file's.
            sources: (f.sources.into_iter())
                .map(|p| if p.to_string_lossy().starts_with("bpf-") { p } else { base.join(p) })
                .collect(),
            compression: f.compression.map(|c| match c {
                Codec::None => Compression::None,
                Codec::Lz4 => Compression::Lz4,
                Codec::Zstd => Compression::Zstd,
            }),
            max_message: f.max_message,
            batch_bytes: f.batch_bytes,
            round_bytes: f.round_bytes,
            ack_timeout: f.ack_timeout_ms.map(Duration::from_millis),
            spool: f.spool.map(|p| base.join(p)),
            spool_max: f.spool_max,
            spool_wait: f.spool_wait_ms.map(Duration::from_millis),
        })
    }
}

/// Why a configuration file could not be used: each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// It could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// It is not a regular file, or too large.
    #[error("{}: not a regular file of at most 1 MiB", path.display())]
    NotAFile {
        /// The file.
        path: PathBuf,
    },
    /// What it says is not a configuration.
    #[error("{}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: ParseError,
    },
}

/// What is wrong in a configuration's text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// Not TOML, an unknown key or a value of the wrong type (the key and line named,
    /// on one line).
    #[error("{}", one_line(.0))]
    Toml(#[from] toml::de::Error),
    /// Keys that must be above 0 (named).
    #[error("{0} must be above 0")]
    Zero(&'static str),
}

/// TOML's message, which spans lines (a snippet of the file), on one.
fn one_line(e: &toml::de::Error) -> String {
    e.to_string().trim_end().replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let doc = include_str!("config_file.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| *l != "//! ```toml")
            .skip(1)
            .take_while(|l| *l != "//! ```")
            .map(|l| format!("{}\n", l.trim_start_matches("//!").trim_start()))
            .collect();
        let f = FileConfig::parse(&example, Path::new("/etc")).unwrap();
        assert_eq!(f.brokers.as_deref(), Some("k1:9092,k2:9092,k3:9092"));
        assert_eq!(f.sources, [PathBuf::from("/dev/shm/app.ring"), PathBuf::from("/dev/shm/rings")]);
        assert_eq!((f.compression, f.max_message), (Some(Compression::Lz4), Some(1_000_000)));
        assert_eq!(f.ack_timeout, Some(Duration::from_secs(30)));
        assert_eq!((f.topic.as_deref(), f.host.as_deref()), (Some("traces"), Some("web-1")));
        assert_eq!(f.state, Some(PathBuf::from("/var/lib/ringtrace-ship/web-1.state")));
        assert_eq!(f.spool, Some(PathBuf::from("/var/lib/ringtrace-ship/spool")));
        assert_eq!((f.spool_max, f.spool_wait), (Some(1 << 30), Some(Duration::from_secs(2))));
    }

    #[test]
    fn relative_paths_are_the_files_and_mistakes_are_named() {
        let f = FileConfig::parse("state = \"s\"\nsources = [\"r.ring\"]", Path::new("/etc/rt")).unwrap();
        assert_eq!((f.state, f.sources), (Some("/etc/rt/s".into()), vec![PathBuf::from("/etc/rt/r.ring")]));
        for (bad, says) in [
            ("topik = \"t\"", "unknown field `topik`"),
            ("max_message = \"big\"", "max_message"),
            ("compression = \"gzip\"", "gzip"),
            ("batch_bytes = 0", "above 0"),
            ("spool_max = 0", "above 0"),
            ("sources = \"one\"", "sources"),
            ("brokers = ", "brokers"),
        ] {
            let e = FileConfig::parse(bad, Path::new(".")).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(!e.contains('\n'));
        }
    }
}
