//! profconv: turns legacy profiler output (GNU gprof `gmon.out`, mpatrol,
//! DCPI, APS) into pprof, folded stacks, flamegraph SVG, speedscope and
//! callgrind.
//!
//! One call does a whole conversion: [`convert`] reads the inputs once and
//! writes every [`Output`], part by part as the inputs are read when every
//! output is pprof (a DCPI database larger than memory), else from the
//! whole profile. A gmon.out, symbolized with its executable, to pprof:
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! # let out = dir.path().join("callgraph.pb.gz");
//! let mut options = profconv::Options::default();
//! options.read.binary = Some("tests/fixtures/gprof/callgraph-nopie".into());
//! let output = profconv::Output::new(&out)?; // .pb.gz: gzip-compressed pprof
//! profconv::convert(&["tests/fixtures/gprof/callgraph-nopie.gmon"], &[output], &options)?;
//! # assert!(std::fs::metadata(&out)?.len() > 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Reading and writing apart: readers ([`read()`], [`read::read_inputs`])
//! fill the intermediate representation ([`Profile`], leaf-first stacks of
//! interned locations, pprof's model); writers ([`write()`],
//! [`write::write_file`]) emit the modern formats from it. Readers never use
//! writers, and the reverse. Inputs can be files, directories (a DCPI
//! database, an APS capture), standard input, or bytes in memory:
//!
//! ```
//! use profconv::read::{self, Input};
//! use profconv::write::{self, OutputFormat, WriteOptions};
//!
//! // A GNU gmon.out with one histogram bin of 3 ticks at 0x1000 and no arcs.
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
//!
//! Whole archives of legacy profiles convert in parallel with
//! [`archive::run`]. The command line lives in the binary (`src/main.rs`,
//! `src/cli/`); build the library with `default-features = false` to leave
//! clap and indicatif out.

#![warn(missing_docs)]

pub mod archive;
mod convert;
pub mod error;
mod file;
pub mod profile;
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
