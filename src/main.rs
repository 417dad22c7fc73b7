//! The `profconv` command: parse arguments, run, map errors to exit codes
//! (0 ok, 1 bad input, 2 usage). The command line lives in [`cli`]; the
//! library (`profconv`) knows no flags.

mod cli;

fn main() {
    keep_freed_memory();
    keep_a_second_cpu_in_use();
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
        // SAFETY: _exit ends the process; nothing runs after it.
        unsafe { _exit(code) }
    }
    #[cfg(not(unix))]
    std::process::exit(code)
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
    extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
    }
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

/// Starts a thread that sleeps until the process ends, so that the process
/// never drops back to one thread while a conversion starts and ends its
/// own (the gmon.out loader, the stack planner, the location builder, the
/// writers).
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
/// it costs a thread start and a 16 KiB stack.
fn keep_a_second_cpu_in_use() {
    let _ = std::thread::Builder::new()
        .stack_size(16 << 10)
        .spawn(|| loop {
            std::thread::park();
        });
}
