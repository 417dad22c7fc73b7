//! profconv: turns legacy profiler output (GNU gprof `gmon.out`, mpatrol,
//! DCPI, APS) into pprof, folded stacks, flamegraph SVG and speedscope.
//!
//! Readers (`read`) fill the intermediate representation (`profile`);
//! `symbolize` turns addresses into functions, files and lines; writers
//! (`write`) emit the modern formats. Readers never use writers and the reverse.

pub mod archive;
pub mod error;
pub mod profile;
pub mod read;
pub mod symbolize;
pub mod write;

pub use write::pprof::pb;

pub use error::{Error, Result};
pub use profile::Profile;
pub use read::{read, Format, ReadOptions};
pub use write::{write, OutputFormat, WriteOptions};
