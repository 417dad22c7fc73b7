//! The one ordered parallel-gzip pipeline of the pprof writers, whole and
//! streamed: gzip members compressed by a pool of worker threads and written
//! out in the order they were handed in ([`Pool`]).
//!
//! The threads live as long as the output, each with its own compressor, and
//! take members from one queue: when a member is done, the next one is
//! already waiting, whatever the thread that encodes them is doing. A thread
//! spawned per member (as before) left a core idle from the moment a member
//! was done until the encoding thread came back to start the next one.
//!
//! Each member is handed in whole ([`Pool::compress`]). A pool of no workers
//! compresses on the caller's thread (a small output, or one core).
//!
//! A member's bytes are a function of its input alone, whichever worker
//! makes it: each member is compressed into a buffer of its own whose
//! starting size the caller's rule gives from the input's size ([`Pool::new`]);
//! deflate's blocks depend on the room it is given, so a buffer that came
//! back from another member (of another size) would make other bytes.
//!
//! Memory: at most [`Pool::limit`] members, and beyond one per worker and
//! one more, at most [`POOL_BYTES`] of encoded bytes, are handed in and not
//! yet written (queued, being compressed, or compressed and waiting for an
//! older one), so the pool holds a few megabytes whatever the output's size.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::{self, JoinHandle};

/// Encoded bytes the members in the pool may add up to, once there is one
/// per worker and one more (so that large members still keep every worker
/// busy).
const POOL_BYTES: usize = 16 << 20;

/// A member to compress: its place in the output, its bytes, and a buffer
/// for the compressed ones.
struct Task {
    seq: u64,
    input: Vec<u8>,
    member: Vec<u8>,
}

/// A member compressed, with the buffers it came in (to be reused).
struct Done {
    member: Vec<u8>,
    encoded: Vec<u8>,
}

/// What a worker sends back: the member, or why there is none (an error of
/// the compressor, or a panic to resume on the owner's thread).
type Outcome = thread::Result<io::Result<Done>>;

/// Worker threads compressing gzip members, written to the output in order.
pub(super) struct Pool {
    /// The queue the workers take tasks from (`None` once closed).
    tasks: Option<mpsc::Sender<Task>>,
    done: mpsc::Receiver<(u64, Outcome)>,
    workers: Vec<JoinHandle<()>>,
    /// Members handed in, and members written out (the places of the next
    /// member handed in and of the next one to write).
    sent: u64,
    written: u64,
    /// Encoded bytes of each member in the pool (handed in, not yet
    /// written), oldest first.
    sizes: std::collections::VecDeque<usize>,
    /// Members compressed before an older one, by place.
    waiting: BTreeMap<u64, Done>,
    /// Buffers of written members' encoded bytes, for the next ones.
    spare_encoded: Vec<Vec<u8>>,
    /// The starting size of a member's buffer, from its encoded size.
    room: fn(usize) -> usize,
    limit: usize,
    threads: usize,
    /// [`POOL_BYTES`] (tests lower it).
    max_bytes: usize,
    /// The compressor of a pool of no workers.
    inline: Option<flate2::Compress>,
}

impl Pool {
    /// A pool of `threads` workers; none: members are compressed on the
    /// caller's thread as they are handed in. Each member is compressed into
    /// a new buffer of `room(encoded size)` bytes (0 for a member handed in
    /// as pieces).
    pub(super) fn new(threads: usize, room: fn(usize) -> usize) -> io::Result<Pool> {
        let (tasks, queue) = mpsc::channel::<Task>();
        let queue = Arc::new(Mutex::new(queue));
        let (report, done) = mpsc::channel();
        let mut workers = Vec::with_capacity(threads);
        for _ in 0..threads {
            let queue = Arc::clone(&queue);
            let report = report.clone();
            workers.push(
                thread::Builder::new()
                    .name("gzip".into())
                    .spawn(move || work(&queue, &report))?,
            );
        }
        Ok(Pool {
            tasks: Some(tasks),
            done,
            workers,
            sent: 0,
            written: 0,
            sizes: std::collections::VecDeque::new(),
            waiting: BTreeMap::new(),
            spare_encoded: Vec::new(),
            room,
            // Two members per worker: one being compressed, one queued for
            // when it is done; and one more being written or encoded.
            limit: 2 * threads + 1,
            inline: (threads == 0).then(super::member_deflate),
            max_bytes: POOL_BYTES,
            threads,
        })
    }

    /// An empty buffer with room for `room` bytes, for the next member's
    /// encoded bytes: one a written member came in, when there is one (its
    /// pages already the process's).
    pub(super) fn buffer(&mut self, room: usize) -> Vec<u8> {
        let mut buffer = self.spare_encoded.pop().unwrap_or_default();
        buffer.reserve(room);
        buffer
    }

    /// Hands in the next member's encoded bytes. Writes out the members
    /// that are done and in order; waits first while the pool is full
    /// ([`Pool::limit`] members, or [`POOL_BYTES`] beyond one member per
    /// worker and one more). A pool of no workers compresses and writes the
    /// member here.
    pub(super) fn compress(&mut self, encoded: Vec<u8>, out: &mut dyn Write) -> io::Result<()> {
        if let Some(deflate) = &mut self.inline {
            let member = Vec::with_capacity((self.room)(encoded.len()));
            let member = super::gzip_member_into(&encoded, member, deflate)?;
            out.write_all(&member)?;
            let mut encoded = encoded;
            encoded.clear();
            self.spare_encoded.push(encoded);
            return Ok(());
        }
        let size = encoded.len();
        self.make_room(size, out)?;
        self.send(encoded, size, out)
    }

    /// Waits while the pool is full for a member of `size` encoded bytes.
    fn make_room(&mut self, size: usize, out: &mut dyn Write) -> io::Result<()> {
        while self.in_pool() >= self.limit
            || (self.in_pool() > self.threads && self.bytes_in_pool() + size > self.max_bytes)
        {
            self.wait(out)?;
        }
        Ok(())
    }

    /// Queues a member of `size` encoded bytes, and writes out the members
    /// done by then.
    fn send(&mut self, input: Vec<u8>, size: usize, out: &mut dyn Write) -> io::Result<()> {
        let task = Task {
            seq: self.sent,
            input,
            member: Vec::with_capacity((self.room)(size)),
        };
        let tasks = self.tasks.as_ref().ok_or_else(closed)?;
        tasks.send(task).map_err(|_| closed())?;
        self.sizes.push_back(size);
        self.sent += 1;
        while let Ok((seq, outcome)) = self.done.try_recv() {
            self.arrived(seq, outcome, out)?;
        }
        Ok(())
    }

    /// Writes out every member handed in, and stops the workers.
    pub(super) fn finish(mut self, out: &mut dyn Write) -> io::Result<()> {
        self.tasks = None;
        while self.written < self.sent {
            self.wait(out)?;
        }
        for worker in self.workers.drain(..) {
            worker.join().unwrap_or_else(|p| panic::resume_unwind(p));
        }
        Ok(())
    }

    /// Members handed in and not yet written.
    fn in_pool(&self) -> usize {
        self.sizes.len()
    }

    /// Encoded bytes of the members handed in and not yet written.
    fn bytes_in_pool(&self) -> usize {
        self.sizes.iter().sum()
    }

    /// Waits for a member to be compressed, and writes what is in order.
    fn wait(&mut self, out: &mut dyn Write) -> io::Result<()> {
        let (seq, outcome) = self.done.recv().map_err(|_| closed())?;
        self.arrived(seq, outcome, out)
    }

    /// Takes in a worker's outcome for member `seq`, and writes out the
    /// members that are next in order.
    fn arrived(&mut self, seq: u64, outcome: Outcome, out: &mut dyn Write) -> io::Result<()> {
        let done = outcome.unwrap_or_else(|p| panic::resume_unwind(p))?;
        self.waiting.insert(seq, done);
        while let Some(mut done) = self.waiting.remove(&self.written) {
            out.write_all(&done.member)?;
            self.written += 1;
            self.sizes.pop_front();
            done.encoded.clear();
            self.spare_encoded.push(done.encoded);
        }
        Ok(())
    }
}

/// A worker: compresses tasks from `queue` until it is closed, sending each
/// outcome to `report`.
fn work(queue: &Mutex<mpsc::Receiver<Task>>, report: &mpsc::Sender<(u64, Outcome)>) {
    let mut deflate = super::member_deflate();
    loop {
        // The lock is held only to take a task, not while compressing.
        let task = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok(task) = task else { return };
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            let encoded = task.input;
            let member = super::gzip_member_into(&encoded, task.member, &mut deflate)?;
            Ok(Done { member, encoded })
        }));
        if report.send((task.seq, outcome)).is_err() {
            return;
        }
    }
}

/// The error of a pool whose workers are gone.
fn closed() -> io::Error {
    io::Error::other("the gzip compression threads stopped")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces of different sizes and contents, compressed by the pool,
    /// come out as one gzip member each, in order, and as the very members
    /// `gzip_member_into` makes of them, whichever thread makes each.
    #[test]
    fn members_come_out_in_order() {
        let pieces = super::super::test_pieces(40);
        for (threads, max_bytes) in [
            (1, POOL_BYTES),
            (2, POOL_BYTES),
            (3, POOL_BYTES),
            (1, 60_000),
            (2, 60_000),
        ] {
            let mut pool = Pool::new(threads, |_| 0).unwrap();
            pool.max_bytes = max_bytes;
            let mut out = Vec::new();
            for piece in &pieces {
                let mut buffer = pool.buffer(piece.len());
                assert!(buffer.is_empty() && buffer.capacity() >= piece.len());
                buffer.extend_from_slice(piece);
                pool.compress(buffer, &mut out).unwrap();
                assert!(pool.in_pool() <= pool.limit);
                assert!(pool.in_pool() <= threads + 1 || pool.bytes_in_pool() <= max_bytes);
            }
            pool.finish(&mut out).unwrap();
            let members = super::super::decoded_members(&out);
            assert!(members == pieces, "{threads} threads: the pieces, in order");
            let mut expected = Vec::new();
            let mut deflate = super::super::member_deflate();
            for piece in &pieces {
                let member =
                    super::super::gzip_member_into(piece, Vec::new(), &mut deflate).unwrap();
                expected.extend_from_slice(&member);
            }
            assert!(out == expected, "{threads} threads: the same members");
        }
    }

    /// A pool of no workers writes the very members a pool of workers
    /// does.
    #[test]
    fn inline_members_are_the_members_workers_make() {
        let pieces = super::super::test_pieces(12);
        let mut deflate = super::super::member_deflate();
        let mut expected = Vec::new();
        for piece in &pieces {
            let member = super::super::gzip_member_into(piece, Vec::new(), &mut deflate).unwrap();
            expected.extend_from_slice(&member);
        }
        let mut inline = Pool::new(0, |_| 0).unwrap();
        let mut out = Vec::new();
        for piece in &pieces {
            inline.compress(piece.clone(), &mut out).unwrap();
        }
        inline.finish(&mut out).unwrap();
        assert!(out == expected, "inline: the same members");
    }

    /// Members that compress badly (deflate runs out of room in its buffer
    /// and ends blocks where it does) are the same bytes whatever worker
    /// makes them and whatever it made before: each gets a buffer of the
    /// size the rule gives.
    #[test]
    fn members_are_the_same_bytes_whichever_worker_makes_them() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let pieces: Vec<Vec<u8>> = (0..24u64)
            .map(|i| {
                let len = 20_000 + (i as usize * 7919) % 90_000;
                (0..len)
                    .map(|j| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        // Noise, with some runs: compresses to 60-100 %.
                        if j % 5 == 0 {
                            0
                        } else {
                            state as u8
                        }
                    })
                    .collect()
            })
            .collect();
        let room = |len: usize| len / 4;
        let mut expected = Vec::new();
        for piece in &pieces {
            let mut deflate = super::super::member_deflate();
            let buffer = Vec::with_capacity(room(piece.len()));
            let member = super::super::gzip_member_into(piece, buffer, &mut deflate).unwrap();
            expected.extend_from_slice(&member);
        }
        for threads in [0, 1, 2, 3] {
            let mut pool = Pool::new(threads, room).unwrap();
            let mut out = Vec::new();
            for piece in &pieces {
                pool.compress(piece.clone(), &mut out).unwrap();
            }
            pool.finish(&mut out).unwrap();
            assert!(out == expected, "{threads} threads: the same bytes");
        }
    }

    /// A write error reaches the caller.
    #[test]
    fn write_errors_are_returned() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut pool = Pool::new(2, |_| 0).unwrap();
        let mut result = Ok(());
        for _ in 0..10 {
            result = result.and_then(|()| pool.compress(vec![1; 1000], &mut Full));
        }
        let result = result.and_then(|()| pool.finish(&mut Full));
        assert_eq!(result.unwrap_err().to_string(), "disk full");
    }
}
