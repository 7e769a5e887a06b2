//! Decode placement: where a call's decode → handle → encode runs, once its body has arrived.
//!
//! - [`Placement::Inline`]: on the connection's I/O task, in the same poll that read the body
//!   (Armeria's event-loop default). No hop, no allocation; but a long decode stalls every
//!   other stream of that connection — and of every connection on that thread.
//! - [`Placement::Task`]: a task per call on the same runtime. The I/O task reads on; the
//!   call runs at the runtime's next turn. Costs a task (one allocation) per call, and the
//!   thread is still the same, so it only reorders work; it cannot add CPU.
//! - [`Placement::Pool`]: a bounded pool of `--pool-threads` threads behind a bounded queue
//!   (Armeria's blocking task executor). Costs a cross-thread hop (a queue push and a wake)
//!   per call; buys parallelism and keeps I/O threads responsive while large messages decode.
//!   A full queue is back-pressure: the call waits in its connection (bounded by the
//!   advertised SETTINGS_MAX_CONCURRENT_STREAMS) until the queue has room — memory never grows
//!   without bound.
//! - [`Placement::Adaptive`]: a large request (over `--offload-above` bytes) goes to the pool
//!   only when that can help: a pool worker is idle right now (so the call starts at once and
//!   no queue builds up between reading and decoding) and the process has a core beyond its
//!   I/O threads (so the worker adds CPU instead of taking turns with an I/O thread). Otherwise
//!   inline. Why (docs/studies/decode-placement.md): the hop costs about a third of the
//!   throughput on small messages; on large ones offloading buys CPU only where a core is idle,
//!   and a worker that is not idle would only add a queue between reading and decoding.

use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

use super::grpc::{run_call, run_ping_pong, CallHead, Outcome};

/// Where calls run; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On the I/O task.
    Inline,
    /// A task per call on the same runtime.
    Task,
    /// On the worker pool.
    Pool,
    /// Inline up to a size, pool above.
    Adaptive,
}

impl Placement {
    /// Whether this placement needs the worker pool.
    pub fn uses_pool(self) -> bool {
        matches!(self, Placement::Pool | Placement::Adaptive)
    }
}

/// Sends a call's outcome back through whatever transport received it.
pub trait Responder: Send + 'static {
    /// Sends the outcome; the call is over.
    fn respond(self, outcome: Outcome);
}

/// What a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// A unary call: its whole body.
    Call,
    /// One message of a bidi ping-pong stream, answered with this sequence number.
    PingPong {
        /// The message's position in its stream.
        sequence: u64,
    },
}

/// A call (or one message of a stream) ready to run: its head, its body, and the way back.
pub struct Job<R> {
    /// What to run.
    pub work: Work,
    /// The checked headers.
    pub head: CallHead,
    /// The body (one framed message).
    pub body: Bytes,
    /// Where the outcome goes.
    pub responder: R,
    /// The implementation name, for the admin reply.
    pub implementation: &'static str,
}

impl<R: Responder> Job<R> {
    /// Decodes, handles, encodes and responds.
    pub fn run(self) {
        let outcome = match self.work {
            Work::Call => run_call(&self.head, &self.body, self.implementation),
            Work::PingPong { sequence } => run_ping_pong(&self.head, &self.body, sequence),
        };
        self.responder.respond(outcome);
    }
}

/// A fixed set of threads taking jobs from one bounded queue.
pub struct Pool<R> {
    sender: mpsc::Sender<Job<R>>,
    idle_workers: Arc<AtomicUsize>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl<R: Responder> Pool<R> {
    /// Starts `threads` workers behind a queue of `queue` jobs.
    pub fn start(threads: usize, queue: usize) -> std::io::Result<Pool<R>> {
        let (sender, receiver) = mpsc::channel::<Job<R>>(queue.max(1));
        let receiver = Arc::new(Mutex::new(receiver));
        let idle_workers = Arc::new(AtomicUsize::new(0));
        let threads = (0..threads.max(1))
            .map(|index| {
                let receiver = Arc::clone(&receiver);
                let idle_workers = Arc::clone(&idle_workers);
                std::thread::Builder::new()
                    .name(format!("grpclab-pool-{index}"))
                    .spawn(move || loop {
                        // Idle from here until a job is in hand (waiting for the lock counts:
                        // the job would still start without queueing behind another).
                        idle_workers.fetch_add(1, Ordering::Relaxed);
                        // Only one idle worker waits on the queue at a time; the others wait
                        // for the lock. A job is run after the lock is released.
                        let job = match receiver.lock() {
                            Ok(mut receiver) => receiver.blocking_recv(),
                            Err(_) => None,
                        };
                        idle_workers.fetch_sub(1, Ordering::Relaxed);
                        match job {
                            Some(job) => job.run(),
                            None => return,
                        }
                    })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Pool {
            sender,
            idle_workers,
            threads,
        })
    }

    /// A handle for submitting jobs. `spare_cores`: whether the process has cores beyond its
    /// I/O threads (see [`PoolSender::adaptive_offload`]).
    pub fn sender(&self, spare_cores: bool) -> PoolSender<R> {
        PoolSender {
            sender: self.sender.clone(),
            idle_workers: Arc::clone(&self.idle_workers),
            spare_cores,
        }
    }

    /// Stops taking jobs and waits for the workers once every sender is gone.
    pub fn join(self) {
        drop(self.sender);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

/// A connection's way into the pool, and what adaptive needs to know about it.
pub struct PoolSender<R> {
    /// The queue.
    pub sender: mpsc::Sender<Job<R>>,
    idle_workers: Arc<AtomicUsize>,
    spare_cores: bool,
}

impl<R> Clone for PoolSender<R> {
    fn clone(&self) -> Self {
        PoolSender {
            sender: self.sender.clone(),
            idle_workers: Arc::clone(&self.idle_workers),
            spare_cores: self.spare_cores,
        }
    }
}

impl<R> PoolSender<R> {
    /// The adaptive placement's rule for a request of `body_len` bytes: offload when it is
    /// larger than `offload_above`, the process has a core beyond its I/O threads, and a
    /// worker is idle now. A race between I/O threads may queue one job briefly; the queue
    /// never grows, because busy workers mean inline.
    pub fn adaptive_offload(&self, body_len: usize, offload_above: usize) -> bool {
        self.spare_cores
            && body_len > offload_above
            && self.idle_workers.load(Ordering::Relaxed) > 0
    }
}

/// Whether a process with `io_threads` I/O threads has cores left for a pool: the cores it may
/// run on (affinity mask and cgroup CPU quota, as `available_parallelism` reads them) exceed
/// its I/O threads.
pub fn spare_cores(io_threads: usize) -> bool {
    std::thread::available_parallelism().map_or(1, usize::from) > io_threads
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Collect(std::sync::mpsc::Sender<Outcome>);

    impl Responder for Collect {
        fn respond(self, outcome: Outcome) {
            let _ = self.0.send(outcome);
        }
    }

    #[test]
    fn adaptive_offloads_large_requests_only_to_an_idle_worker_with_a_spare_core() {
        let pool = Pool::<Collect>::start(1, 4).unwrap();
        let with_core = pool.sender(true);
        // Wait until the worker is parked on the queue.
        while with_core.idle_workers.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        assert!(with_core.adaptive_offload(100_000, 16_384));
        assert!(!with_core.adaptive_offload(1_000, 16_384), "small: inline");
        assert!(
            !pool.sender(false).adaptive_offload(100_000, 16_384),
            "no core beyond the I/O threads: inline"
        );
        // A busy worker: inline, rather than a queue between reading and decoding.
        with_core.idle_workers.store(0, Ordering::Relaxed);
        assert!(!with_core.adaptive_offload(100_000, 16_384));
        drop(with_core);
        pool.join();
    }
}
