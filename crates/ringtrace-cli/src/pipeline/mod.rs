//! The reading commands' one pipeline: sources that yield records, outputs that write
//! them, and the run that joins them (see the crate's docs for its shape).
//!
//! Imports run down: [`run`], [`source`], [`output`], [`record`].

pub mod output;
pub mod record;
pub mod run;
pub mod source;
