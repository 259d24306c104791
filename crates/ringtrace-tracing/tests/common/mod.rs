//! Helpers shared by the integration tests (ringtrace-fixtures', shared with the other
//! crates' tests).
#![allow(unused_imports)]

pub use ringtrace_fixtures::{dispatch, TempDir};
