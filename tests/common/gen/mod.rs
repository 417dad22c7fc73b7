//! Byte-level builders of the legacy formats, for tests that need a file
//! with exactly the fields they are about.

pub mod aps;
pub mod dcpi;
pub mod gprof;
pub mod mpatrol;
