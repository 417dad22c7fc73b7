//! One long-lived thread that runs a task beside the caller's ([`join`]),
//! in place of a thread started (and ended) for each.
//!
//! A gprof conversion hands work to a second thread four times (the
//! gmon.out parser, the stack planner, the location builder, the pprof
//! writer's second half), a few hundred microseconds to milliseconds
//! apart. A new thread takes 35 µs to start at best; on the 2-CPU virtual
//! machines profconv is benchmarked on (whose kernel packs tasks onto few
//! CPUs), one was often put on its parent's busy CPU and waited there 0.3
//! to 1.2 ms while the other CPU was idle. The helper stays on its CPU
//! between tasks: after each it waits `SPIN` for the next, yielding to
//! anything else that would run there, and only then sleeps. Handing it a
//! task then takes a few microseconds: a conversion of 3000 functions went
//! from 7.8 to 6.7 ms (medians of 60 interleaved runs).
//!
//! When the helper is busy (a task of its own hands work on, or several
//! threads convert at once, as `profconv archive` does), [`join`] starts a
//! thread as before. Either way the two halves run at the same time, so a
//! task may wait for what the caller's half sends it, and the reverse.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// How long the helper waits, awake, for its next task.
const SPIN: Duration = Duration::from_millis(2);

/// How long a caller waits, awake, for the helper to finish its task before
/// sleeping until it does.
const CALLER_SPIN: Duration = Duration::from_micros(200);

/// How many threads can run at once here (`available_parallelism`, 1 when
/// unknown), found once: each look reads the cgroup's CPU quota and the
/// affinity mask, 60 to 100 µs.
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Runs `beside` on the helper thread (or a new one when it is busy) while
/// `here` runs on this one, and returns both results once both are done. A
/// panic in either is resumed here once both are done (`here`'s first).
pub fn join<A, B>(beside: impl FnOnce() -> A + Send, here: impl FnOnce() -> B) -> (A, B)
where
    A: Send,
{
    let Some(helper) = helper().filter(|h| h.claim()) else {
        return join_spawned(beside, here);
    };
    let task = Posted {
        run: UnsafeCell::new(Some(beside)),
        result: UnsafeCell::new(None),
        done: AtomicBool::new(false),
        caller: thread::current(),
        caller_cpu: cpu::current(),
    };
    helper.post(&task);
    let here = catch_unwind(AssertUnwindSafe(here));
    // The task borrows from this frame (and `task` itself is on it): nothing
    // returns, nor unwinds, before the helper is done with it.
    wait_until(&task.done, CALLER_SPIN);
    helper.release();
    let beside = task.result.into_inner().expect("a done task has a result");
    match (beside, here) {
        (_, Err(panic)) | (Err(panic), _) => resume_unwind(panic),
        (Ok(a), Ok(b)) => (a, b),
    }
}

/// [`join`] on a thread started for `beside`.
fn join_spawned<A: Send, B>(beside: impl FnOnce() -> A + Send, here: impl FnOnce() -> B) -> (A, B) {
    thread::scope(|scope| {
        let beside = scope.spawn(beside);
        let here = here();
        let beside = beside.join().unwrap_or_else(|p| resume_unwind(p));
        (beside, here)
    })
}

/// Starts the helper now rather than at the first [`join`]: a program's
/// spare thread calls it as the program starts. The helper then waits
/// awake (`SPIN`) on its CPU for the first task, which it takes at once,
/// instead of being started (≈ 60 µs) by the caller of the first `join`
/// and run on a CPU that may have been idle until then. On the 2-CPU
/// virtual machines profconv is benchmarked on, a CPU idle for a while is
/// slower to start again: a gprof conversion of 3000 functions run right
/// after `gprof -b` (the other CPU idle 30 ms) took 6.51 → 6.19 ms, and
/// 6.93 → 6.57 ms after 30 ms of sleep (medians of 150 and 250
/// interleaved runs).
pub fn start() {
    let _ = helper();
}

/// The helper, started on first use; `None` if no thread could be made.
fn helper() -> Option<&'static Helper> {
    static HELPER: OnceLock<Option<Helper>> = OnceLock::new();
    HELPER.get_or_init(Helper::start).as_ref()
}

/// A task posted to the helper, run once; `caller` is woken when `done`.
struct Posted<F, R> {
    run: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<thread::Result<R>>>,
    done: AtomicBool,
    caller: Thread,
    /// The CPU the caller posted it from, when known.
    caller_cpu: Option<usize>,
}

/// A [`Posted`] task of any type, as the helper sees it.
trait Task {
    /// The CPU the caller posted it from, when known.
    fn caller_cpu(&self) -> Option<usize>;
    /// Runs the task and marks it done; it may be gone as soon as it is.
    fn run_once(&self);
}

impl<F: FnOnce() -> R, R> Task for Posted<F, R> {
    fn caller_cpu(&self) -> Option<usize> {
        self.caller_cpu
    }

    fn run_once(&self) {
        // SAFETY: between posting and `done`, only the helper touches
        // `run` and `result`; the caller reads `result` after `done`.
        let result = match unsafe { (*self.run.get()).take() } {
            Some(run) => catch_unwind(AssertUnwindSafe(run)),
            None => Err(Box::new("a task is run once") as Box<dyn std::any::Any + Send>),
        };
        unsafe { *self.result.get() = Some(result) };
        // Once `done` is set the caller may return and the task be gone.
        let caller = self.caller.clone();
        self.done.store(true, Ordering::Release);
        caller.unpark();
    }
}

/// A posted task, its lifetime erased: [`join`] waits for it to be done
/// before the frame it borrows from ends.
struct TaskPtr(*const (dyn Task + 'static));

// SAFETY: the task is `Send` (its closure and result are), and [`join`]
// keeps it alive until the helper is done with it.
unsafe impl Send for TaskPtr {}

/// What the caller and the helper thread share.
struct Shared {
    /// The task to run next.
    task: Mutex<Option<TaskPtr>>,
    /// Set when a task is posted, cleared when the helper takes it.
    posted: AtomicBool,
}

/// The helper thread and what it shares with callers.
struct Helper {
    shared: Arc<Shared>,
    thread: Thread,
    /// Held by the caller whose task the helper runs.
    claimed: AtomicBool,
}

impl Helper {
    fn start() -> Option<Helper> {
        let shared = Arc::new(Shared {
            task: Mutex::new(None),
            posted: AtomicBool::new(false),
        });
        let theirs = shared.clone();
        let handle = thread::Builder::new()
            .name("profconv-helper".into())
            .spawn(move || serve(&theirs))
            .ok()?;
        Some(Helper {
            shared,
            thread: handle.thread().clone(),
            claimed: AtomicBool::new(false),
        })
    }

    /// True when this caller now holds the helper.
    fn claim(&self) -> bool {
        self.claimed
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    fn release(&self) {
        self.claimed.store(false, Ordering::Release);
    }

    /// Hands `task` to the helper thread.
    fn post<F: FnOnce() -> R + Send, R: Send>(&self, task: &Posted<F, R>) {
        let task: *const (dyn Task + '_) = task;
        // SAFETY: only the lifetime changes; see TaskPtr.
        let task: *const (dyn Task + 'static) = unsafe { std::mem::transmute(task) };
        *lock(&self.shared.task) = Some(TaskPtr(task));
        self.shared.posted.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// The helper thread: runs each task posted, waiting awake [`SPIN`] for the
/// next before sleeping.
fn serve(shared: &Shared) {
    loop {
        wait_until(&shared.posted, SPIN);
        // No task is posted again before this one is done (its caller holds
        // the helper until then).
        shared.posted.store(false, Ordering::Relaxed);
        if let Some(TaskPtr(task)) = lock(&shared.task).take() {
            // SAFETY: the caller keeps the task alive until it is done.
            let task = unsafe { &*task };
            // Put on the caller's CPU (as a new thread often is here), the
            // helper would share it with the caller until the system
            // balanced them: a conversion of 3000 functions once ran all
            // its tasks there, 16 ms instead of 7.
            if let Some(theirs) = task.caller_cpu().filter(|&c| Some(c) == cpu::current()) {
                cpu::leave(theirs);
            }
            task.run_once();
        }
    }
}

/// Waits until `flag` is set: awake for `spin` (yielding to anything else
/// that would run on this CPU), then asleep until woken.
fn wait_until(flag: &AtomicBool, spin: Duration) {
    let started = Instant::now();
    while !flag.load(Ordering::Acquire) {
        if started.elapsed() < spin {
            thread::yield_now();
        } else {
            thread::park();
        }
    }
}

/// Which CPU a thread runs on, and moving off one.
#[cfg(target_os = "linux")]
mod cpu {
    use std::os::raw::c_int;

    extern "C" {
        fn sched_getcpu() -> c_int;
        fn sched_getaffinity(pid: c_int, size: usize, mask: *mut u64) -> c_int;
        fn sched_setaffinity(pid: c_int, size: usize, mask: *const u64) -> c_int;
    }

    /// A `cpu_set_t`: 1024 CPUs.
    type Mask = [u64; 16];

    /// The CPU this thread runs on now.
    pub(super) fn current() -> Option<usize> {
        // SAFETY: no arguments; -1 on failure.
        usize::try_from(unsafe { sched_getcpu() }).ok()
    }

    /// Moves this thread to another of the CPUs it may run on (none: it
    /// stays), then lets it run on all of them again.
    pub(super) fn leave(cpu: usize) {
        let size = std::mem::size_of::<Mask>();
        let mut all: Mask = [0; 16];
        // SAFETY: the masks are `size` bytes; pid 0 is this thread.
        if unsafe { sched_getaffinity(0, size, all.as_mut_ptr()) } != 0 || cpu >= 1024 {
            return;
        }
        let mut others = all;
        others[cpu / 64] &= !(1 << (cpu % 64));
        if others.iter().all(|&w| w == 0) {
            return;
        }
        // SAFETY: as above.
        unsafe {
            if sched_setaffinity(0, size, others.as_ptr()) == 0 {
                sched_setaffinity(0, size, all.as_ptr());
            }
        }
    }
}

/// Where the CPU is not known, the helper stays where it is.
#[cfg(not(target_os = "linux"))]
mod cpu {
    pub(super) fn current() -> Option<usize> {
        None
    }

    pub(super) fn leave(_: usize) {}
}

/// The lock's value, whether or not a thread panicked holding it (nothing
/// panics while holding it).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn both_halves_run_at_once_and_return() {
        // Each half waits for what the other sends: run one after the
        // other, they would wait in vain.
        let wait = Duration::from_secs(10);
        for _ in 0..100 {
            let (to_beside, from_here) = mpsc::channel();
            let (to_here, from_beside) = mpsc::channel();
            let (a, b) = join(
                move || {
                    to_here.send(1).unwrap();
                    from_here
                        .recv_timeout(wait)
                        .expect("the halves run at once")
                        + 10
                },
                move || {
                    to_beside.send(2).unwrap();
                    from_beside
                        .recv_timeout(wait)
                        .expect("the halves run at once")
                        + 20
                },
            );
            assert_eq!((a, b), (12, 21));
        }
    }

    #[test]
    fn a_busy_helper_leaves_the_task_to_a_new_thread() {
        // The inner join runs on the helper (or a new thread), whose
        // helper is then held by the outer one.
        let (a, b) = join(|| join(|| 1, || 2), || 3);
        assert_eq!((a, b), ((1, 2), 3));
        let sums: Vec<(u64, u64)> = thread::scope(|scope| {
            let workers: Vec<_> = (0..4u64)
                .map(|k| scope.spawn(move || join(|| (0..1000 * k).sum(), || k)))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        assert_eq!(sums, vec![(0, 0), (499500, 1), (1999000, 2), (4498500, 3)]);
    }

    #[test]
    fn borrowed_data_is_read_and_written_by_both_halves() {
        let input: Vec<u64> = (0..10_000).collect();
        let mut left = Vec::new();
        let mut right = 0u64;
        join(
            || left.extend(input.iter().map(|x| x * 2)),
            || right = input.iter().sum(),
        );
        assert_eq!(left.len(), 10_000);
        assert_eq!(left[9_999], 19_998);
        assert_eq!(right, 49_995_000);
    }

    #[test]
    fn a_panic_in_either_half_reaches_the_caller_after_both_are_done() {
        let finished = AtomicBool::new(false);
        let caught = catch_unwind(AssertUnwindSafe(|| {
            join(
                || {
                    thread::sleep(Duration::from_millis(20));
                    finished.store(true, Ordering::SeqCst);
                },
                || panic!("here"),
            )
        }));
        assert!(caught.is_err());
        assert!(finished.load(Ordering::SeqCst), "waited for the helper");
        let caught = catch_unwind(|| join(|| panic!("beside"), || 1));
        let message = caught.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"beside"));
        // The helper still serves.
        assert_eq!(join(|| 5, || 6), (5, 6));
    }
}
