//! [`SourceError`]: why a source could not be opened or read, naming it.

use std::io;

use ringtrace::error::KernelError;

use crate::frame::FrameError;

/// Why a source could not be opened or read: the source as named (a path, `PATH#SLOT`,
/// `DIR#SLOT`, `bpf-pin:PATH`, `bpf-id:N`) and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{}", shown(.name, .kind))]
pub struct SourceError {
    /// The source, as its records name it (or the file that could not be read).
    pub name: String,
    /// What went wrong.
    #[source]
    pub kind: SourceErrorKind,
}

/// `NAME: KIND`, or the kind alone where it names the source itself (a SOURCE argument
/// that does not parse: `bpf-id:x: a map id is a number ...`).
fn shown(name: &str, kind: &SourceErrorKind) -> String {
    match kind {
        SourceErrorKind::Spec(_) => kind.to_string(),
        _ => format!("{name}: {kind}"),
    }
}

/// The error of opening the source `name`, from a library error: for `map_err`.
pub(crate) fn opening<E: std::error::Error + Send + Sync + 'static>(
    name: impl std::fmt::Display,
) -> impl FnOnce(E) -> SourceError {
    move |e| SourceError::new(name, SourceErrorKind::open(e))
}

impl SourceError {
    /// `kind`, about the source named `name`.
    pub(crate) fn new(name: impl std::fmt::Display, kind: impl Into<SourceErrorKind>) -> SourceError {
        SourceError { name: name.to_string(), kind: kind.into() }
    }
}

/// What went wrong with a source: the [`SourceError::kind`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceErrorKind {
    /// The SOURCE argument is not one of the library's grammar (`bpf-id:x`).
    #[error(transparent)]
    Spec(#[from] ringtrace::source::SourceError),
    /// A BPF map could not be opened, or another reader holds it.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A ring file, a channel file or a recorder's catalog could not be opened or
    /// attached to (the library's error).
    #[error(transparent)]
    Open(Box<dyn std::error::Error + Send + Sync>),
    /// Reading the records failed (the library's error).
    #[error(transparent)]
    Read(Box<dyn std::error::Error + Send + Sync>),
    /// A batch could not be framed.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A file or directory could not be read.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A slot of a channel file.
    #[error("slot {slot}: {kind}")]
    Slot {
        /// The slot.
        slot: u32,
        /// What went wrong with it.
        #[source]
        kind: Box<SourceErrorKind>,
    },
    /// An overwrite-mode BPF map, whose records the agent cannot hold until Kafka has
    /// them.
    #[error("an overwrite-mode BPF map (BPF_F_RB_OVERWRITE): its records cannot be held")]
    OverwriteMap,
    /// A recorder directory whose rings file is a discard-mode channel.
    #[error("not a recorder's rings (a discard-mode channel)")]
    NotRecorderRings,
    /// A recorder directory's catalog has no trace file header.
    #[error("not a catalog (no trace file header)")]
    NotCatalog,
    /// Reading a catalog's header failed.
    #[error("reading its header: {0}")]
    CatalogHeader(#[source] io::Error),
    /// A channel has no such slot.
    #[error("no slot {0}")]
    NoSlot(u32),
    /// A directory of sources holds too many files.
    #[error("more than {0} files: name the rings instead")]
    TooManyFiles(usize),
    /// After a restart, the records Kafka acknowledged before it could not be stepped
    /// over by the deadline.
    #[error("records acknowledged before the restart not readable at position {0} by the deadline")]
    Unrecovered(u64),
}

impl SourceErrorKind {
    /// A library error of opening or attaching.
    pub(crate) fn open(e: impl std::error::Error + Send + Sync + 'static) -> SourceErrorKind {
        SourceErrorKind::Open(Box::new(e))
    }

    /// This, about slot `slot`.
    pub(crate) fn slot(self, slot: u32) -> SourceErrorKind {
        SourceErrorKind::Slot { slot, kind: Box::new(self) }
    }
}
