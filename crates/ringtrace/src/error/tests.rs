//! Every error type's message is one line; an error's cause is in its `source()`, not in
//! its message; the infallible `ConsumeError` works with `?`.

use std::convert::Infallible;
use std::io;

use super::*;

fn one_line(e: &dyn std::error::Error) {
    let msg = e.to_string();
    assert!(!msg.is_empty() && !msg.contains('\n'), "{msg:?}");
}

#[test]
fn every_type_formats_to_one_line() {
    let io = || io::Error::other("cause");
    one_line(&Error::PauseBusy { waited: std::time::Duration::from_millis(5) });
    one_line(&Error::TscCalibration("0 ticks in 20000000 ns".into()));
    one_line(&Error::Io { what: "mapping the ring", source: io() });
    one_line(&Error::NoSpace { bytes: 1 << 20, path: "/dev/shm/r".into(), source: io() });
    one_line(&Error::Sparse { path: "/dev/shm/r".into(), offset: 0, bytes: 4096, source: io() });
    one_line(&ReserveError::OutOfBounds { offset: 8, len: 16, record_len: 16 });
    one_line(&ConsumeError::<Infallible>::Busy);
    one_line(&ConsumeError::<io::Error>::Callback(io()));
    one_line(&ConsumeError::<Infallible>::Kernel(KernelError::BadSize { size: 12288 }));
    one_line(&FormatError::InvalidSnapshot("truncated in the header".into()));
    one_line(&FormatError::Checksum { part: "header", start: 0, end: 88, stored: 1, computed: 2 });
    one_line(&KernelError::Corrupt { offset: 8, pos: 8, size: 0, reason: CorruptReason::Zero });
    one_line(&KernelError::NotPinned { path: "/sys/fs/bpf/x".into(), source: io() });
}

#[test]
fn consume_error_defaults_to_infallible() {
    let e: ConsumeError = ConsumeError::Corrupt { pos: 16, header: 0xdead };
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert_eq!(boxed.to_string(), "corrupt record header 0x000000000000dead at position 16");
    fn take() -> Result<(), ConsumeError> {
        Err(ConsumeError::Busy)
    }
    fn caller() -> Result<(), Box<dyn std::error::Error>> {
        take()?;
        Ok(())
    }
    assert!(caller().unwrap_err().to_string().contains("16 attempts"));
}

/// The cause's text, distinct enough not to be part of any message by chance.
const CAUSE: &str = "the cause of the test";

fn cause() -> io::Error {
    io::Error::other(CAUSE)
}

/// `e` returns its cause from `source()` and leaves it out of its message; the message
/// with its causes names it once.
fn cause_once(e: &(dyn std::error::Error + 'static)) {
    let msg = e.to_string();
    let source = e.source().unwrap_or_else(|| panic!("no source: {msg}"));
    let cause = source.to_string();
    assert!(!msg.contains(&cause), "the message repeats its source {cause:?}: {msg}");
    let full = with_causes(e);
    assert_eq!(full.matches(CAUSE).count(), 1, "{full}");
    assert!(full.starts_with(&msg) && full.ends_with(CAUSE), "{full}");
}

#[test]
fn a_cause_is_a_source_and_not_in_the_message() {
    let path = std::path::PathBuf::from("/dev/shm/ring");
    cause_once(&Error::File { what: "opening", path: path.clone(), source: cause() });
    cause_once(&Error::Io { what: "mapping the ring", source: cause() });
    cause_once(&KernelError::NotPinned { path: path.clone(), source: cause() });
    cause_once(&KernelError::Permission { what: "BPF_OBJ_GET".into(), needs: "CAP_BPF", source: cause() });
    cause_once(&KernelError::Io { what: "BPF_MAP_GET_FD_BY_ID", source: cause() });
    cause_once(&KernelError::Open { event: "cpu-clock", source: cause(), hint: "see perf_event_open(2)".into() });
    cause_once(&KernelError::Map { bytes: 8192, source: cause(), hint: "see mmap(2)".into() });
    cause_once(&KernelError::Dup(cause()));
    cause_once(&KernelError::Ioctl { op: "PERF_EVENT_IOC_ENABLE", source: cause() });
    cause_once(&FormatError::Io { what: "reading the header".into(), source: cause() });
    cause_once(&ConsumeError::<Infallible>::Io(cause()));
    // Transparent wrappers forward both the message and the source.
    cause_once(&ConsumeError::<Infallible>::Kernel(KernelError::Dup(cause())));
}

#[test]
fn a_callback_error_is_the_message_not_a_source() {
    // Either one or the other: the callback's error is shown in the message, so a
    // reporter walking the chain does not print it again.
    let e = ConsumeError::<io::Error>::Callback(cause());
    assert!(e.to_string().contains(CAUSE));
    assert!(std::error::Error::source(&e).is_none());
    assert_eq!(with_causes(&e).matches(CAUSE).count(), 1);
}

#[test]
fn with_causes_does_not_repeat_a_cause_the_message_holds() {
    #[derive(Debug)]
    struct Embeds(io::Error);
    impl std::fmt::Display for Embeds {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "outer: {}", self.0)
        }
    }
    impl std::error::Error for Embeds {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    assert_eq!(with_causes(&Embeds(cause())), format!("outer: {CAUSE}"));
    assert_eq!(with_causes(&Error::AlreadyPaused), "the ring is already paused");
}

#[test]
fn sizes_read_as_whole_units() {
    assert_eq!(size_text(1 << 20), "1 MiB");
    assert_eq!(size_text((1 << 20) + 4096), "1028 KiB");
    assert_eq!(size_text(4097), "4097 bytes");
    let e = Error::NoSpace { bytes: 1 << 20, path: "/mnt/x/big.ring".into(), source: io::Error::from_raw_os_error(28) };
    assert_eq!(with_causes(&e), "reserving 1 MiB for /mnt/x/big.ring: No space left on device (os error 28)");
}
