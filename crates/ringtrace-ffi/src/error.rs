//! The error model: every Rust error becomes one negative errno-style code (mapped here,
//! in one place), and its message with its causes (`source()`, `: ` joined) is kept for
//! `ringtrace_last_error`.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::io;

use ringtrace::error::{with_causes, KernelError};
use ringtrace::kernel::bpf::UserReserveError;
use ringtrace::{ConsumeError, Error, FormatError, ReserveError};

/// A failure on its way to C: the negative code and the message behind it.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) code: c_int,
    pub(crate) message: String,
}

impl Fail {
    /// A failure with code `-errno`.
    pub(crate) fn new(errno: c_int, message: impl Into<String>) -> Fail {
        Fail { code: -errno, message: message.into() }
    }

    /// `-EINVAL`: a bad argument or a misused handle.
    pub(crate) fn inval(message: impl Into<String>) -> Fail {
        Fail::new(libc::EINVAL, message)
    }

    /// The same failure, its message naming `path` first (unless it names it already):
    /// "No such file or directory" alone does not say which file.
    pub(crate) fn about(mut self, path: &std::path::Path) -> Fail {
        let p = path.display().to_string();
        if !self.message.contains(&p) {
            self.message = format!("{p}: {}", self.message);
        }
        self
    }
}

/// The errno of the first `io::Error` in an error's source chain, if it carries one.
fn os_errno(e: &(dyn std::error::Error + 'static)) -> Option<c_int> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return Some(io_errno(io));
        }
        cur = err.source();
    }
    None
}

/// The errno of an `io::Error`: its OS code, or one for its kind.
pub(crate) fn io_errno(e: &io::Error) -> c_int {
    if let Some(code) = e.raw_os_error() {
        return code;
    }
    match e.kind() {
        io::ErrorKind::NotFound => libc::ENOENT,
        io::ErrorKind::PermissionDenied => libc::EACCES,
        io::ErrorKind::AlreadyExists => libc::EEXIST,
        io::ErrorKind::InvalidInput => libc::EINVAL,
        io::ErrorKind::InvalidData => libc::EBADMSG,
        io::ErrorKind::OutOfMemory => libc::ENOMEM,
        io::ErrorKind::TimedOut => libc::ETIMEDOUT,
        io::ErrorKind::Unsupported => libc::ENOTSUP,
        io::ErrorKind::WouldBlock => libc::EAGAIN,
        io::ErrorKind::BrokenPipe => libc::EPIPE,
        io::ErrorKind::UnexpectedEof => libc::EBADMSG,
        _ => libc::EIO,
    }
}

fn errno_of_reserve(e: &ReserveError) -> c_int {
    match e {
        ReserveError::Full { .. } | ReserveError::Pending { .. } | ReserveError::Paused { .. } => libc::ENOSPC,
        ReserveError::Timeout { .. } => libc::ETIMEDOUT,
        ReserveError::Disconnected { .. } => libc::EPIPE,
        ReserveError::TooLarge { .. } => libc::EMSGSIZE,
        ReserveError::OutOfBounds { .. } => libc::EINVAL,
        _ => libc::EIO,
    }
}

fn errno_of_setup(e: &Error) -> c_int {
    match e {
        Error::InvalidCapacity { .. }
        | Error::InvalidWatermark { .. }
        | Error::InvalidRetireAhead { .. }
        | Error::InvalidBatch { .. } => libc::EINVAL,
        Error::ConsumerAttached { .. }
        | Error::ReaderAttached { .. }
        | Error::ProducerAttached { .. }
        | Error::PauseBusy { .. } => libc::EBUSY,
        Error::InvalidRing { .. } => libc::EBADMSG,
        Error::ReadOnly { .. } => libc::EPERM,
        Error::Reserve(r) => errno_of_reserve(r),
        Error::NoInvariantTsc => libc::ENOTSUP,
        Error::AlreadyPaused => libc::EALREADY,
        Error::ChannelFull { .. } => libc::ENOSPC,
        other => os_errno(other).unwrap_or(libc::EIO),
    }
}

fn errno_of_kernel(e: &KernelError) -> c_int {
    match e {
        KernelError::NotAMap { .. } | KernelError::NotRingBuf { .. } | KernelError::NotUserRingBuf { .. } => {
            libc::EINVAL
        }
        KernelError::NoSuchMap { .. } => libc::ENOENT,
        KernelError::Permission { .. } => libc::EPERM,
        KernelError::BadSize { .. } | KernelError::BadPositions { .. } => libc::EBADMSG,
        // Another reader holds the map's reader lock.
        KernelError::MapBusy { .. } => libc::EBUSY,
        // Another handle produces into the user ring buffer map.
        KernelError::ProducerBusy { .. } => libc::EBUSY,
        other => os_errno(other).unwrap_or(libc::EIO),
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::new(errno_of_setup(&e), with_causes(&e))
    }
}

impl From<ReserveError> for Fail {
    fn from(e: ReserveError) -> Fail {
        Fail::new(errno_of_reserve(&e), e.to_string())
    }
}

impl From<KernelError> for Fail {
    fn from(e: KernelError) -> Fail {
        Fail::new(errno_of_kernel(&e), with_causes(&e))
    }
}

/// A sample a BPF user ring buffer did not reserve: the errno libbpf's
/// `user_ring_buffer__reserve` and `__reserve_blocking` set for the same.
impl From<UserReserveError> for Fail {
    fn from(e: UserReserveError) -> Fail {
        let errno = match &e {
            UserReserveError::Full { .. } => libc::ENOSPC,
            UserReserveError::Timeout { .. } => libc::ETIMEDOUT,
            UserReserveError::TooLarge { .. } => libc::E2BIG,
            UserReserveError::Empty => libc::EINVAL,
            UserReserveError::Wait(io) => io_errno(io),
            _ => libc::EIO,
        };
        Fail::new(errno, with_causes(&e))
    }
}

impl From<FormatError> for Fail {
    fn from(e: FormatError) -> Fail {
        let errno = match &e {
            FormatError::Io { .. } => os_errno(&e).unwrap_or(libc::EIO),
            _ => libc::EBADMSG,
        };
        Fail::new(errno, with_causes(&e))
    }
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Fail {
        Fail::new(io_errno(&e), e.to_string())
    }
}

/// A consume callback that returned nonzero: the C code it returned.
#[derive(Debug)]
pub(crate) struct Stopped(pub(crate) c_int);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the record callback returned {}", self.0)
    }
}

impl From<ConsumeError<Stopped>> for Fail {
    fn from(e: ConsumeError<Stopped>) -> Fail {
        match &e {
            ConsumeError::Callback(Stopped(code)) => {
                Fail::new(libc::ECANCELED, format!("the record callback returned {code}"))
            }
            _ => Fail::new(consume_errno(&e), with_causes(&e)),
        }
    }
}

/// The errno of a reading error other than a callback's.
fn consume_errno<E>(e: &ConsumeError<E>) -> c_int {
    match e {
        ConsumeError::Corrupt { .. } | ConsumeError::Positions { .. } => libc::EBADMSG,
        ConsumeError::Busy => libc::EBUSY,
        ConsumeError::Disconnected => libc::EPIPE,
        ConsumeError::Io(io) => io_errno(io),
        ConsumeError::Kernel(k) => errno_of_kernel(k),
        _ => libc::EIO,
    }
}

impl From<ConsumeError> for Fail {
    fn from(e: ConsumeError) -> Fail {
        Fail::new(consume_errno(&e), with_causes(&e))
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Keeps `message` as this thread's last error.
pub(crate) fn set_last_error(message: &str) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // `try_with`: during thread teardown the slot may be gone; the message is then lost.
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = c);
}

/// Pointer to this thread's last error message (empty if none).
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR.try_with(|slot| slot.borrow().as_ptr()).unwrap_or(c"".as_ptr())
}

/// The static description of a code (negative or positive errno).
pub(crate) fn describe(code: c_int) -> &'static std::ffi::CStr {
    match code.checked_abs().unwrap_or(0) {
        0 => c"success",
        libc::EINVAL => c"invalid argument (null pointer, bad option, handle misuse or length out of range)",
        libc::ENOSPC => c"ring full: record refused and counted as lost",
        libc::EMSGSIZE => c"record larger than the ring takes",
        libc::E2BIG => c"sample larger than the BPF user ring buffer map takes",
        libc::ETIMEDOUT => c"timed out",
        libc::EPIPE => c"the other side is gone",
        libc::EBUSY => c"busy (ring overwritten while read, pause busy, or already attached)",
        libc::EALREADY => c"already paused",
        libc::EBADMSG => c"corrupt ring memory or file",
        libc::ENOMEM => c"out of memory",
        libc::EIO => c"input/output error",
        libc::EPERM => c"operation not permitted (read-only handle or missing privilege)",
        libc::ENOENT => c"no such file or object",
        libc::EEXIST => c"file exists",
        libc::EACCES => c"permission denied",
        libc::EBADF => c"bad file descriptor",
        libc::EAGAIN => c"try again",
        libc::ENOTSUP => c"not supported",
        libc::ECANCELED => c"stopped by the callback",
        libc::ENOTRECOVERABLE => c"internal error: a Rust panic was caught at the C boundary",
        _ => c"unknown error (an operating system errno)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_cause_once() {
        let cause = || io::Error::from_raw_os_error(libc::ENOMEM);
        let text = cause().to_string();
        let f = Fail::from(Error::Io { what: "mapping the ring", source: cause() });
        assert_eq!(f.code, -libc::ENOMEM);
        assert_eq!(f.message, format!("mapping the ring: {text}"));
        let f = Fail::from(KernelError::Dup(cause()));
        assert_eq!(f.message.matches(&text).count(), 1, "{}", f.message);
    }

    /// A map another reader holds: -EBUSY, the message naming the holder, from opening
    /// and from a consuming call alike.
    #[test]
    fn a_map_another_reader_holds_is_ebusy() {
        let busy = || KernelError::MapBusy { id: 7, holder: Some((42, 0)) };
        let f = Fail::from(busy());
        assert_eq!(f.code, -libc::EBUSY);
        assert!(f.message.starts_with("map 7 already has a reader (pid 42, uid 0)"), "{}", f.message);
        let f = Fail::from(ringtrace::ConsumeError::<std::convert::Infallible>::Kernel(busy()));
        assert_eq!(f.code, -libc::EBUSY);
    }

    /// A user ring buffer map: a second producer is -EBUSY, a map of another type
    /// -EINVAL; samples refused as libbpf's reserve sets errno.
    #[test]
    fn user_ring_buffer_errors() {
        let f = Fail::from(KernelError::ProducerBusy { id: 7, holder: None });
        assert_eq!(f.code, -libc::EBUSY);
        assert!(f.message.starts_with("user ring buffer map 7 already has a producer"), "{}", f.message);
        let not = KernelError::NotUserRingBuf { name: "m".into(), id: 3, map_type: 27, kind: "ringbuf", hint: "" };
        assert_eq!(Fail::from(not).code, -libc::EINVAL);
        let codes = [
            (UserReserveError::Full { len: 8 }, libc::ENOSPC),
            (UserReserveError::Timeout { len: 8 }, libc::ETIMEDOUT),
            (UserReserveError::TooLarge { len: 1 << 20, max: 4088 }, libc::E2BIG),
            (UserReserveError::Empty, libc::EINVAL),
            (UserReserveError::Wait(io::Error::from_raw_os_error(libc::EINTR)), libc::EINTR),
        ];
        for (e, errno) in codes {
            assert_eq!(Fail::from(e).code, -errno);
        }
    }
}
