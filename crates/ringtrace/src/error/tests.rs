//! Every error type's message is one line; the infallible `ConsumeError` works with `?`.

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
