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

/// The callgrind size past which KCachegrind needs gigabytes of memory and
/// most of a minute to open the file. It has no limit of its own: it holds
/// the whole file in memory, about 17 bytes per byte of file above a base
/// of 45 MB, and loads about 6 MB a second. KCachegrind 22.12
/// (`QT_QPA_PLATFORM=offscreen`) on the 2-core machine the tests run on:
/// 14 MB (a gprof program of 100 000 functions) 264 MB in 2.5 s of CPU,
/// 18 MB 360 MB in 2.7 s, 74 MB 1.3 GB in 11 s, 190 MB 3.2 GB in 27 s, 767 MB
/// 12.7 GB in 126 s.
pub const KCACHEGRIND_HEAVY_BYTES: u64 = 128 << 20;

/// The size of a Firefox Profiler document (its JSON text, before gzip)
/// past which the profiler needs most of its JavaScript heap and minutes to
/// open it: it parses the whole document and holds its tables in V8's heap
/// (4 GB in a browser tab and in Node). Measured with the profiler's own
/// command line (`@firefox-devtools/profiler-cli`, Node 24, a heap of 4288
/// MiB; `benches/firefox_profiler.sh`) on DCPI databases at `--granularity
/// addresses`, on the 2-core machine the tests run on: 240 MB opened in 19 s
/// at 2.5 GB of RSS, 493 MB in 38 s at 4.1 GB, 1000 MB in 156–213 s at 6.1
/// GB (the collector running at the heap's limit), and 1254 MB did not open
/// (JavaScript heap out of memory).
pub const FIREFOX_HEAVY_BYTES: u64 = 512 << 20;

/// The document size past which the profiler ran out of heap
/// ([`FIREFOX_HEAVY_BYTES`]).
const FIREFOX_FAILS_BYTES: u64 = 1_250_000_000;

/// Memory KCachegrind takes to hold a callgrind file of `bytes` bytes, as
/// measured ([`KCACHEGRIND_HEAVY_BYTES`]).
fn kcachegrind_memory(bytes: u64) -> u64 {
    (45 << 20) + bytes.saturating_mul(17)
}

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
        OutputFormat::Firefox | OutputFormat::FirefoxRaw if bytes > FIREFOX_HEAVY_BYTES => {
            let opens = if bytes >= FIREFOX_FAILS_BYTES {
                "is more than the Firefox Profiler opens (it ran out of its 4 GB JavaScript \
                 heap at 1254 MB)"
            } else {
                "takes the Firefox Profiler minutes and 4 to 7 GB of memory to open, at the \
                 end of its 4 GB JavaScript heap (it failed at 1254 MB)"
            };
            Some(format!(
                "{}: {} MB of Firefox Profiler document {opens}; a coarser --granularity \
                 (functions, files) or the pprof output (.pb.gz) opens",
                path.display(),
                bytes / 1_000_000,
            ))
        }
        OutputFormat::Callgrind if bytes > KCACHEGRIND_HEAVY_BYTES => Some(format!(
            "{}: {} MB of callgrind takes KCachegrind about {} GB of memory and {} s or more \
             to open (it holds the whole file, about 17 bytes per byte); a coarser \
             --granularity (lines, functions) makes a smaller file, or the pprof output \
             (.pb.gz) opens in go tool pprof -http at any size",
            path.display(),
            bytes / 1_000_000,
            (kcachegrind_memory(bytes) + 500_000_000) / 1_000_000_000,
            bytes / 6_000_000,
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
    fn a_firefox_document_past_the_profilers_heap_is_said_with_the_way_out() {
        for format in [OutputFormat::Firefox, OutputFormat::FirefoxRaw] {
            let path = Path::new("big.firefox.json.gz");
            assert_eq!(warning(format, FIREFOX_HEAVY_BYTES, path), None);
            let heavy = warning(format, 600_000_000, path).unwrap();
            assert!(heavy.starts_with("big.firefox.json.gz: 600 MB"), "{heavy}");
            assert!(heavy.contains("minutes and 4 to 7 GB"), "{heavy}");
            assert!(heavy.contains("--granularity"), "{heavy}");
            let failing = warning(format, 2_540_000_000, path).unwrap();
            assert!(failing.contains("is more than the Firefox Profiler opens"));
        }
    }

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
    fn a_heavy_callgrind_file_is_said_with_the_memory_kcachegrind_needs() {
        let path = Path::new("callgrind.out.big");
        let at = warning(OutputFormat::Callgrind, KCACHEGRIND_HEAVY_BYTES, path);
        assert_eq!(at, None);
        let past = warning(OutputFormat::Callgrind, 767_000_000, path).unwrap();
        assert!(
            past.starts_with("callgrind.out.big: 767 MB of callgrind"),
            "{past}"
        );
        assert!(past.contains("about 13 GB of memory and 127 s"), "{past}");
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
