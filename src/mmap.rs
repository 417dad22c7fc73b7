//! The one place profconv maps a file into memory: inputs
//! ([`crate::read::Input`]), executables and their debug files
//! ([`crate::symbolize::Binary`]) and the DWARF the line lookups read
//! ([`crate::symbolize::lines`]). Nothing is copied; the map lives as long as
//! the value returned.

use std::fs::File;
use std::io;

/// Maps all of `file`, read-only and private to this process. Mapping
/// rather than reading is what lets a DCPI database or APS capture of
/// hundreds of megabytes, and an executable's debug information, be read
/// without copying them into memory first: a user converting a large input
/// needs memory for what it holds, not for the file.
pub(crate) fn map(file: &File) -> io::Result<memmap2::Mmap> {
    // SAFETY: the map is read-only and private, and profconv never writes
    // to the files it reads. Like every tool that maps its inputs
    // (addr2line's loader maps the same files), it assumes no other program
    // truncates a file while it is read: that would be a SIGBUS, which a
    // converter cannot guard against.
    unsafe { memmap2::Mmap::map(file) }
}
