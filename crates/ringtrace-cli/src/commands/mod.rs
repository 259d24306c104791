//! One module per subcommand. Each takes what the command line gave it (a
//! [`Source`](crate::source::Source) for the reading commands) and imports no other
//! subcommand: what they share lives in the modules beside `commands`.

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
