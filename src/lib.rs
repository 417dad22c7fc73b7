//! profconv: turns legacy profiler output (GNU gprof `gmon.out`, mpatrol,
//! DCPI, APS) into pprof, folded stacks, flamegraph SVG and speedscope.
//!
//! Readers (`read`) fill the intermediate representation (`profile`);
//! `symbolize` turns addresses into functions, files and lines; writers
//! (`write`) emit the modern formats. Readers never use writers and the reverse.
//!
//! Inputs are opened once ([`read::Input`]: a mapped file, or the bytes of
//! a pipe, standard input or a gzip stream); [`read::READERS`] is the one
//! table of formats. The command line lives in the binary; build the library
//! with `default-features = false` to leave clap and indicatif out.
//!
//! ```
//! use profconv::read::{self, Input};
//! use profconv::write::{self, OutputFormat, WriteOptions};
//!
//! // A GNU gmon.out with one histogram bin of 3 ticks at 0x1000 and no arcs,
//! // read from bytes (no file needed).
//! let mut gmon = b"gmon".to_vec();
//! gmon.extend(1u32.to_le_bytes()); // version 1: a little-endian file
//! gmon.extend([0; 12]); // spare
//! gmon.push(0); // tag 0: histogram
//! gmon.extend(0x1000u64.to_le_bytes()); // low pc
//! gmon.extend(0x1002u64.to_le_bytes()); // high pc
//! gmon.extend(1u32.to_le_bytes()); // one bin
//! gmon.extend(100u32.to_le_bytes()); // 100 Hz
//! gmon.extend(b"seconds\0\0\0\0\0\0\0\0s");
//! gmon.extend(3u16.to_le_bytes()); // 3 ticks
//!
//! let input = Input::from_bytes("gmon.out", gmon);
//! assert_eq!(read::detect_input(&input), Some(read::Format::Gprof));
//! let profile = read::read_inputs(&[input], &read::ReadOptions::default())?;
//! assert_eq!(profile.check(), Ok(()));
//!
//! let mut folded = Vec::new();
//! write::write(&profile, OutputFormat::Folded, &WriteOptions::default(), &mut folded)?;
//! assert_eq!(String::from_utf8_lossy(&folded), "0x1000 30000000\n");
//! # Ok::<(), profconv::Error>(())
//! ```

#![warn(missing_docs)]

pub mod archive;
mod convert;
pub mod error;
pub mod profile;
mod radix;
pub mod read;
pub mod symbolize;
pub mod write;

#[cfg(test)]
mod test_rng;
#[cfg(test)]
mod testkit;

pub use convert::{convert, Options, Output};
pub use error::{Error, Result};
pub use profile::Profile;
pub use read::{read, Format, ReadOptions};
pub use write::{write, OutputFormat, WriteOptions};
