//! The `profconv` command: parse arguments, run, map errors to exit codes
//! (0 ok, 1 bad input, 2 usage). The command line lives in [`cli`]; the
//! library (`profconv`) knows no flags.

mod cli;

fn main() {
    keep_freed_memory();
    let next = heap_in_huge_pages();
    keep_a_second_cpu_in_use(next);
    let code = cli::main();
    exit_without_freeing(code);
}

/// Ends the process as `std::process::exit` does (standard output flushed
/// first), but without what the C library's `exit` runs before: the
/// destructors of thread-local values, among them the opened binaries a
/// gprof conversion keeps (`Binary::open_cached`: tens of thousands of
/// symbol names, freed one by one only for the process to end). Every
/// output is complete and renamed into place by then; the system frees the
/// memory at once. A gprof conversion of 20 000 functions: 69 -> 64.5 ms.
fn exit_without_freeing(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    #[cfg(unix)]
    {
        extern "C" {
            fn _exit(status: std::os::raw::c_int) -> !;
        }
        write_pgo_counts();
        // SAFETY: _exit ends the process; nothing runs after it.
        unsafe { _exit(code) }
    }
    #[cfg(not(unix))]
    std::process::exit(code)
}

/// In a build instrumented for profile-guided optimization
/// (`benches/pgo.sh`), writes the run's counts, which the instrumentation
/// leaves to an `atexit` handler that `_exit` skips.
#[cfg(unix)]
fn write_pgo_counts() {
    #[cfg(profconv_pgo_generate)]
    {
        extern "C" {
            fn __llvm_profile_write_file() -> std::os::raw::c_int;
        }
        // SAFETY: the instrumentation's runtime is linked in this build;
        // the call writes the counters to the file LLVM_PROFILE_FILE names.
        unsafe { __llvm_profile_write_file() };
    }
}

/// The C library's `pow`, for the command's one caller of it: indicatif
/// (progress bars' rates and times left). build.rs links with
/// `--wrap=pow`, so that the calls come here and `libm.so.6` is not
/// loaded at every start (≈ 0.1 ms of a 7 ms conversion) for them; the
/// `libm` crate's `pow` is musl's.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[no_mangle]
extern "C" fn __wrap_pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" {
    /// glibc's allocator parameters.
    fn mallopt(param: std::os::raw::c_int, value: std::os::raw::c_int) -> std::os::raw::c_int;
    /// How a range of memory is backed.
    fn madvise(
        addr: *mut std::os::raw::c_void,
        length: usize,
        advice: std::os::raw::c_int,
    ) -> std::os::raw::c_int;
}

/// glibc's malloc gives large blocks (from 128 KiB, rising as they are
/// freed) their own `mmap` and returns them to the system when freed, and
/// trims the heap's top past 128 KiB free: the next large allocation then
/// takes fresh pages, each a page fault and a zeroed page (≈ 2 µs per 4 KiB
/// on these machines). A conversion allocates and frees large buffers in
/// turn (symbol tables, samples, encoded pieces): kept in the heap when
/// below 4 MiB, freed memory is reused instead. A gprof conversion of 20 000
/// functions took 10 000 page faults, 8 000 this way (≈ 8 % of its time);
/// peak RSS is unchanged (freed memory is what the next allocation takes).
/// The process is short-lived; a library user keeps its own allocator's
/// settings.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    use std::os::raw::c_int;
    const M_TRIM_THRESHOLD: c_int = -1;
    const M_MMAP_THRESHOLD: c_int = -3;
    // Blocks of 4 MiB or more still get their own mapping, returned when
    // freed: the streamed writers' members (a DCPI image, 8.5 MB) would
    // otherwise stay in the arenas of the threads that freed them (a DCPI
    // database of 57 M addresses peaked at 126 MiB instead of 71 with
    // 32 MiB here). gprof's blocks are below it at 20 000 functions.
    const MMAP_THRESHOLD: c_int = 4 << 20;
    // SAFETY: mallopt only sets the allocator's parameters; called before
    // any other thread exists.
    unsafe {
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        mallopt(M_TRIM_THRESHOLD, c_int::MAX);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() {}

/// The heap grows this much at a time (glibc's `M_TOP_PAD`), and the first
/// such growth is asked to be backed by huge pages.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HEAP_STEP: usize = 32 << 20;

/// Asks for the heap in 2 MiB pages (transparent huge pages, where the
/// system allows them for regions that ask: `madvise`, the common setting,
/// or `always`). A page fault costs ≈ 2.2 µs on the machines profconv is
/// benchmarked on, and a conversion touches most of its memory once: a gprof
/// conversion of 3000 functions took 1 320 page faults (≈ 2.9 ms of its
/// 13 ms of CPU), one of 20 000 functions 6 700; in huge pages, 210 and 280
/// (wall time 9.0 → 8.2 and 45 → 42 ms, medians of interleaved runs; an
/// APS conversion of 308 MB 97 → 84 ms). Peak RSS grows by up to the last
/// huge page's unused part: 33 → 37 MiB at 20 000 functions, and a DCPI
/// database of 57 M addresses 71 → 85 MiB.
///
/// Every thread allocates from the one heap (`M_ARENA_MAX` 1): glibc would
/// otherwise give each thread that allocates its own arena, in 4 KiB pages.
/// The heap then grows [`HEAP_STEP`] at a time (address space only: memory
/// comes as it is touched), and its first step, made here, is advised
/// `MADV_HUGEPAGE`. Growth past it is in 4 KiB pages, as before. Where huge
/// pages are off, or anything here fails, the heap is as it was. Returns
/// the heap past the first huge page, to be made ready beside
/// ([`HeapAhead`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap_in_huge_pages() -> Option<HeapAhead> {
    use std::os::raw::{c_int, c_void};
    extern "C" {
        fn malloc(size: usize) -> *mut c_void;
        fn free(ptr: *mut c_void);
        fn sbrk(increment: isize) -> *mut c_void;
    }
    const M_TOP_PAD: c_int = -2;
    const M_ARENA_MAX: c_int = -8;
    const MADV_HUGEPAGE: c_int = 14;
    const HUGE_PAGE: usize = 2 << 20;
    const PROBE: usize = 256 << 10;
    // SAFETY: mallopt sets the allocator's parameters, before any other
    // thread exists; the probe is freed at once, the filler never used nor
    // freed; sbrk(0) only reads the break; madvise changes how memory is
    // backed, not what it holds.
    unsafe {
        mallopt(M_ARENA_MAX, 1);
        mallopt(M_TOP_PAD, HEAP_STEP as c_int);
        // More than the heap has free, less than M_MMAP_THRESHOLD: the heap
        // grows by it and HEAP_STEP.
        let probe = std::hint::black_box(malloc(PROBE));
        if probe.is_null() {
            return None;
        }
        let (top, end) = (probe as usize, sbrk(0) as usize);
        // Only a huge page's worth of memory wholly inside the advised range,
        // and untouched when advised, can be one. Past the probe (and the
        // free top's header that malloc wrote after it) nothing is touched
        // yet: from the next 2 MiB boundary, the heap is advised. (glibc
        // maps the heap's memory elsewhere when the break cannot move: then
        // nothing is.)
        let boundary = (top + PROBE + 64).next_multiple_of(HUGE_PAGE);
        if top >= end || end - top > 2 * HEAP_STEP || end < boundary + HUGE_PAGE {
            free(probe);
            return None;
        }
        madvise(boundary as *mut c_void, end - boundary, MADV_HUGEPAGE);
        // Freed, the probe is the start of the heap's free top, where the
        // next blocks are cut from. The blocks up to the boundary would be in
        // 4 KiB pages, and they are the first used, the most touched: a
        // filler takes them, never touched (address space only), so that the
        // next block starts at the boundary. A block of n bytes is a chunk of
        // n + 8 rounded up to 16, after a 16-byte header.
        free(probe);
        // (Kept from the optimizer, which drops a block never used.)
        std::hint::black_box(malloc(boundary - top + 8));
        Some(HeapAhead {
            start: boundary + HUGE_PAGE,
            len: (end - boundary - HUGE_PAGE).min(PREFAULTED),
        })
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap_in_huge_pages() -> Option<HeapAhead> {
    None
}

/// Heap memory the next allocations will take, past the huge page the
/// first ones are in: [`PREFAULTED`] bytes, or what is left of the step.
struct HeapAhead {
    start: usize,
    len: usize,
}

/// How much of the heap ahead is made ready on another CPU while the
/// command starts: two huge pages. Zeroing one takes ≈ 0.22 ms; a gprof
/// conversion of 3000 functions uses three (the first is made ready by
/// [`heap_in_huge_pages`]), and took 5.96 instead of 6.99 ms with the next
/// two ready (medians of 60 interleaved runs). A conversion that uses less
/// holds them anyway: 4 MiB of RSS.
const PREFAULTED: usize = 4 << 20;

impl HeapAhead {
    /// Has the system back this memory now (`MADV_POPULATE_WRITE`, Linux
    /// 5.14: as if written, without writing), on the thread that calls.
    /// Where the call is not known, nothing happens.
    fn populate(self) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            const MADV_POPULATE_WRITE: std::os::raw::c_int = 23;
            // SAFETY: the range is the heap's, mapped; populating changes
            // how it is backed, not what it holds (malloc may hand it out
            // meanwhile: nothing is written).
            unsafe { madvise(self.start as *mut _, self.len, MADV_POPULATE_WRITE) };
        }
    }
}

/// Starts a thread that sleeps until the process ends, so that the process
/// never drops back to one thread while a conversion starts its own (the
/// library's helper, `profconv::helper`, at its first task; the streaming
/// writers' compressors).
///
/// On the 2-CPU virtual machines profconv is benchmarked on (Firecracker,
/// whose guest kernel packs tasks onto few virtual CPUs), those threads were
/// often put on their parent's busy CPU and waited there, 4 ms tick after
/// tick, while the other CPU was idle: `perf sched latency` over 20 gprof
/// conversions of 20 000 functions showed 1.33 ms of delay per switch; with
/// this thread, 0.22 ms, and the conversion took 43 instead of 57 ms
/// (medians of 30 interleaved runs), the same CPU time. Why the kernel then
/// places threads otherwise was not found out: a thread that ends at once
/// changes nothing, one asleep does, pinned to either CPU or not. Elsewhere
/// it costs a thread start and a 64 KiB stack.
///
/// Before it sleeps, it starts the library's helper thread
/// (`profconv::helper::start`: waiting awake for its first task, it keeps
/// the second CPU running), has the heap ahead backed (`next`), on its CPU
/// while this one goes on, asks how many CPUs there are
/// (`profconv::helper::cores`: 60 to 100 µs that the pprof writer would
/// otherwise spend first), and opens ISA-L's library
/// (`profconv::write::pprof::load_compressor`: ≈ 0.1 ms that, while the
/// library was linked, the loader spent before `main`).
fn keep_a_second_cpu_in_use(next: Option<HeapAhead>) {
    let _ = std::thread::Builder::new()
        .stack_size(64 << 10)
        .spawn(move || {
            profconv::helper::start();
            if let Some(next) = next {
                next.populate();
            }
            profconv::helper::cores();
            profconv::write::pprof::load_compressor();
            loop {
                std::thread::park();
            }
        });
}
