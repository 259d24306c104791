//! One module per subcommand. Each takes what the command line gave it (a
//! [`RecordSource`](crate::pipeline::source::RecordSource) for the commands that read
//! one) and imports no other subcommand: what they share lives in the modules beside
//! `commands`. The reading commands are each a run of the [`crate::pipeline`].

pub mod consume;
pub mod create;
pub mod decode;
pub mod demo;
pub mod docs;
pub mod export;
pub mod snapshot;
pub mod stat;
pub mod tail;
pub mod write;
