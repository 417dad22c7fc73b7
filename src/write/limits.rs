//! What the viewers of each format can open, said when an output passes it:
//! the output is still written, and a warning names the limit and the way
//! out (a coarser `--granularity`, or the pprof output).

use std::io::Write;
use std::path::Path;

use super::OutputFormat;

/// The longest JSON text speedscope imports: it reads the file as one
/// JavaScript string, and V8's strings end at 2^29 - 24 characters
/// (speedscope issues #340 and #372: "Invalid string length" past it).
pub const SPEEDSCOPE_BYTES: u64 = (1 << 29) - 24;

/// The SVG size past which a browser takes a minute or more to open a
/// flamegraph. A browser draws any SVG inferno writes (inferno drops frames
/// narrower than `--minwidth`, 0.01 % of the width by default, so a level
/// holds at most 10 000 frames, 2 MB: 64 levels of them are 123 MB), but its
/// time grows with the frames: headless Chromium 156 on the 2-core machine
/// the tests run on drew 31 MB (160 000 frames) in 48 s, 62 MB (320 000
/// frames) in 104 s and 123 MB (640 000 frames) in 269 s.
pub const SVG_SLOW_BYTES: u64 = 32 << 20;

/// The warning for an output of `bytes` bytes in `format` at `path` that its
/// viewer cannot open, or opens only slowly, if so.
pub fn warning(format: OutputFormat, bytes: u64, path: &Path) -> Option<String> {
    match format {
        OutputFormat::Svg if bytes > SVG_SLOW_BYTES => Some(format!(
            "{}: {} MB of SVG takes a browser a minute or more to draw (about 1.5 s per MB); \
             a coarser --granularity (functions, files) or a larger --minwidth draws fewer \
             frames, or the pprof output (.pb.gz) opens in go tool pprof -http at any size",
            path.display(),
            bytes / 1_000_000,
        )),
        OutputFormat::Speedscope if bytes > SPEEDSCOPE_BYTES => Some(format!(
            "{}: {} MB of speedscope JSON is more than speedscope opens ({} MB: it reads \
             the file as one JavaScript string); a coarser --granularity (functions, files) \
             or the pprof output (.pb.gz) opens",
            path.display(),
            bytes / 1_000_000,
            SPEEDSCOPE_BYTES / 1_000_000
        )),
        _ => None,
    }
}

/// A writer that counts the bytes written through it.
pub struct Counted<'a> {
    inner: &'a mut dyn Write,
    /// The bytes written so far.
    pub bytes: u64,
}

impl<'a> Counted<'a> {
    /// Counts what goes to `inner`.
    pub fn new(inner: &'a mut dyn Write) -> Self {
        Counted { inner, bytes: 0 }
    }
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speedscope_past_its_string_limit_is_said_with_the_way_out() {
        let path = Path::new("big.speedscope.json");
        let at = warning(OutputFormat::Speedscope, SPEEDSCOPE_BYTES, path);
        assert_eq!(at, None);
        let past = warning(OutputFormat::Speedscope, SPEEDSCOPE_BYTES + 1, path).unwrap();
        assert!(past.starts_with("big.speedscope.json: 536 MB"), "{past}");
        assert!(past.contains("--granularity"), "{past}");
        let other = warning(OutputFormat::Folded, u64::MAX, path);
        assert_eq!(other, None);
    }

    #[test]
    fn a_slow_svg_is_said_with_the_way_out() {
        let path = Path::new("big.svg");
        assert_eq!(warning(OutputFormat::Svg, SVG_SLOW_BYTES, path), None);
        let past = warning(OutputFormat::Svg, 62_000_000, path).unwrap();
        assert!(past.starts_with("big.svg: 62 MB of SVG"), "{past}");
        assert!(past.contains("--granularity"), "{past}");
    }

    #[test]
    fn counted_counts_what_is_written() {
        let mut sink = Vec::new();
        let mut counted = Counted::new(&mut sink);
        counted.write_all(b"hello").unwrap();
        write!(counted, " {}", 42).unwrap();
        assert_eq!(counted.bytes, 8);
        assert_eq!(sink, b"hello 42");
    }
}
