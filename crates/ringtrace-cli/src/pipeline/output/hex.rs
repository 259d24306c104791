//! `--format hex`: a record's payload in hex digits, after what `text` puts before it
//! (a channel's slot and timestamp, a fleet's time, host, source and sequence number).
//! A trace's events have no hex form.

use std::io;

use super::text::with_payload;
use super::LineFormat;
use crate::escape::hex;
use crate::failure::Failure;
use crate::pipeline::record::{Record, Shape};

pub struct Hex;

impl LineFormat for Hex {
    fn accepts(&self, shape: Shape) -> Result<(), Failure> {
        match shape {
            Shape::Events => Err(Failure::msg("a trace's events print as text or json, not hex")),
            _ => Ok(()),
        }
    }

    fn line(&self, r: &Record<'_>, out: &mut String) -> io::Result<()> {
        if let Record::Traced { .. } = r {
            return Err(io::Error::other("a trace's events print as text or json, not hex"));
        }
        with_payload(r, out, hex);
        Ok(())
    }
}
