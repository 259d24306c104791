//! The agent's command line, `ship`: the same in `ringtrace-ship ship` and in
//! `ringtrace ship` (the command built with its `kafka` feature), which take
//! [`ShipArgs`] as their `ship` subcommand's and call [`ShipArgs::run_until_signalled`]:
//! a first SIGINT, SIGTERM or SIGHUP ends the round in flight, the counters are
//! printed, and the command exits 128 + the signal's number (130 for Ctrl-C, 143 for
//! SIGTERM); a second signal kills it at once (safe too: see [`crate::agent`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::agent::{self, Compression, Config, FileConfig, ShipStats};

/// Compression of the batches on the wire.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Codec {
    None,
    Lz4,
    Zstd,
}

/// `ship`'s arguments: drains a host's rings into a topic, exactly once across
/// restarts; each slot of a channel file, and each ring of a recorder directory, is a
/// source of its own, PATH#SLOT.
#[derive(Debug, Args)]
pub struct ShipArgs {
    /// A configuration file (TOML: brokers, topic, host, state, sources and the
    /// options below); the options given here take precedence, and the sources
    /// given here are added to its.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Kafka's bootstrap servers, host:port,... (here or in --config).
    #[arg(long)]
    pub brokers: Option<String>,
    /// The topic (here or in --config).
    #[arg(long)]
    pub topic: Option<String>,
    /// This host's name in every record, at most 255 bytes (here or in --config).
    #[arg(long)]
    pub host: Option<String>,
    /// The agent's state file: each source's next sequence number, position and
    /// counters (here or in --config).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Compression of the batches on the wire [default: lz4].
    #[arg(long, value_enum)]
    pub compression: Option<Codec>,
    /// Stop once every ring's producers are gone and its records shipped (a channel
    /// file: every slot that ever had a producer).
    #[arg(long)]
    pub until_disconnected: bool,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Seconds a message may wait for its acknowledgement before its round fails
    /// [default: 30].
    #[arg(long)]
    pub ack_timeout: Option<f64>,
    /// The largest message sent, in bytes (at most the topic's max.message.bytes). A
    /// record too large for it is not shipped: a marker keeps its place and length,
    /// and `too_large` counts it [default: 1000000].
    #[arg(long)]
    pub max_message: Option<usize>,
    /// A spool directory (created 0700 if missing; another user's or a shared one is
    /// refused): a round Kafka did not acknowledge within --spool-wait is kept
    /// there, and the rings get its space back, until Kafka takes it.
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// The most bytes the spool holds; past it, records stay in the rings
    /// [default: 1073741824].
    #[arg(long, value_name = "BYTES")]
    pub spool_max: Option<u64>,
    /// Seconds a round waits for its acknowledgements before it is spooled
    /// [default: 2].
    #[arg(long, value_name = "SECONDS")]
    pub spool_wait: Option<f64>,
    /// The ring files (discard rings and flight recorders) and channel files, and
    /// directories of them, ringtrace-tracing recorder directories, and BPF ring
    /// buffer maps (bpf-pin:PATH, bpf-id:N) (here or in --config).
    pub rings: Vec<PathBuf>,
}

fn seconds(s: f64, what: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|_| format!("{what}: {s} is not a number of seconds"))
}

impl ShipArgs {
    /// The agent's configuration: `--config`'s file, then the options given here over
    /// it, the sources given here added to its. Errs naming what is missing or wrong.
    pub fn config(self) -> Result<Config, String> {
        let ShipArgs {
            config: file,
            brokers,
            topic,
            host,
            state,
            compression,
            until_disconnected,
            duration,
            ack_timeout,
            max_message,
            spool,
            spool_max,
            spool_wait,
            rings,
        } = self;
        let mut config = Config::new("", "", "", PathBuf::new());
        if let Some(file) = file {
            config.apply(&FileConfig::load(&file).map_err(|e| e.to_string())?);
        }
        let or = |given: Option<String>, had: &mut String| {
            if let Some(v) = given {
                *had = v;
            }
        };
        or(brokers, &mut config.brokers);
        or(topic, &mut config.topic);
        or(host, &mut config.host);
        config.state = state.unwrap_or(std::mem::take(&mut config.state));
        config.sources.extend(rings);
        for (what, missing) in [
            ("--brokers", config.brokers.is_empty()),
            ("--topic", config.topic.is_empty()),
            ("--host", config.host.is_empty()),
            ("--state", config.state.as_os_str().is_empty()),
            ("a ring (or sources in --config)", config.sources.is_empty()),
        ] {
            if missing {
                return Err(format!("ship needs {what}, on the command line or in --config"));
            }
        }
        if let Some(c) = compression {
            config.compression = match c {
                Codec::None => Compression::None,
                Codec::Lz4 => Compression::Lz4,
                Codec::Zstd => Compression::Zstd,
            };
        }
        config.until_disconnected = until_disconnected;
        config.duration = duration.map(|d| seconds(d, "--duration")).transpose()?;
        if let Some(t) = ack_timeout {
            config.ack_timeout = seconds(t, "--ack-timeout")?;
        }
        config.max_message = max_message.unwrap_or(config.max_message);
        if spool.is_some() {
            config.spool = spool;
        }
        config.spool_max = spool_max.unwrap_or(config.spool_max);
        if let Some(w) = spool_wait {
            config.spool_wait = seconds(w, "--spool-wait")?;
        }
        if config.spool_max == 0 || config.spool_wait.is_zero() {
            return Err("--spool-max and --spool-wait must be above 0".into());
        }
        Ok(config)
    }

    /// Runs the agent until `signalled` returns the number of a signal that asked it to
    /// stop (or `--duration`, `--until-disconnected`), prints its report on stdout, and
    /// returns that signal, if one stopped it: the caller exits 128 + its number.
    /// `signalled` is [`stop_signals`]'s in `ringtrace-ship`, and the `ringtrace`
    /// command's own signal thread's in `ringtrace ship`.
    pub fn run_until_signalled(self, signalled: impl Fn() -> Option<i32>) -> Result<Option<i32>, String> {
        self.run(|| signalled().is_some())?;
        Ok(signalled())
    }

    /// Runs the agent until `stop` says so (or `--duration`, `--until-disconnected`),
    /// then prints its report on stdout, one line of `name=value`.
    pub fn run(self, stop: impl Fn() -> bool) -> Result<ShipStats, String> {
        let config = self.config()?;
        let s = agent::run(&config, stop).map_err(|e| e.to_string())?;
        println!(
            "shipped={} batches={} failed_rounds={} recovered={} ring_lost={} overwritten={} too_large={} \
             spooled={} unspooled={} spool_lost={}",
            s.shipped,
            s.batches,
            s.failed_rounds,
            s.recovered,
            s.ring_lost,
            s.overwritten,
            s.too_large,
            s.spooled,
            s.unspooled,
            s.spool_lost
        );
        Ok(s)
    }
}

/// Takes SIGINT, SIGTERM and SIGHUP on a thread of its own: the first asks the agent to
/// stop after its round (the returned function gives its number from then on), a second
/// kills the process as that signal does. A signal the process was started with ignored
/// (`nohup` ignores SIGHUP) stays ignored. If the signals cannot be taken, the default
/// actions stay (stopping at once is safe too).
pub fn stop_signals() -> impl Fn() -> Option<i32> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let stop = Arc::new(AtomicI32::new(0));
    let ignored = ignored_signals();
    let wanted = [SIGINT, SIGTERM, SIGHUP].into_iter().filter(|&s| ignored & (1 << (s - 1)) == 0);
    if let Ok(mut signals) = signal_hook::iterator::Signals::new(wanted) {
        let first = stop.clone();
        let _ = std::thread::Builder::new().name("ringtrace-ship-signals".into()).spawn(move || {
            for signal in signals.forever() {
                if first.load(Relaxed) == 0 {
                    first.store(signal, Relaxed);
                    continue;
                }
                // Dies of the signal, as without the handler.
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                std::process::exit(128 + signal);
            }
        });
    }
    move || match stop.load(Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// The signals this process ignores (bit `n - 1` for signal `n`), from the `SigIgn`
/// mask of `/proc/self/status` (see proc(5)); none if it cannot be read.
fn ignored_signals() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap_or(0)
}
