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
//! - [`Placement::Adaptive`]: inline for requests up to `--offload-above` bytes, pool above:
//!   small messages skip the hop, large ones stop stalling the connection.

use bytes::Bytes;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

use super::grpc::{run_call, CallHead, Outcome};

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
    /// Every placement with its command-line name.
    pub const ALL: [(&'static str, Placement); 4] = [
        ("inline", Placement::Inline),
        ("task", Placement::Task),
        ("pool", Placement::Pool),
        ("adaptive", Placement::Adaptive),
    ];

    /// The placement with this command-line name.
    pub fn from_name(name: &str) -> Option<Placement> {
        Placement::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, placement)| *placement)
    }

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

/// A call ready to run: its head, its whole body, and the way back.
pub struct Job<R> {
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
        let outcome = run_call(&self.head, &self.body, self.implementation);
        self.responder.respond(outcome);
    }
}

/// A fixed set of threads taking jobs from one bounded queue.
pub struct Pool<R> {
    sender: mpsc::Sender<Job<R>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl<R: Responder> Pool<R> {
    /// Starts `threads` workers behind a queue of `queue` jobs.
    pub fn start(threads: usize, queue: usize) -> std::io::Result<Pool<R>> {
        let (sender, receiver) = mpsc::channel::<Job<R>>(queue.max(1));
        let receiver = Arc::new(Mutex::new(receiver));
        let threads = (0..threads.max(1))
            .map(|index| {
                let receiver = Arc::clone(&receiver);
                std::thread::Builder::new()
                    .name(format!("grpclab-pool-{index}"))
                    .spawn(move || loop {
                        // Only one idle worker waits on the queue at a time; the others wait
                        // for the lock. A job is run after the lock is released.
                        let job = match receiver.lock() {
                            Ok(mut receiver) => receiver.blocking_recv(),
                            Err(_) => None,
                        };
                        match job {
                            Some(job) => job.run(),
                            None => return,
                        }
                    })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Pool { sender, threads })
    }

    /// A handle for submitting jobs.
    pub fn sender(&self) -> mpsc::Sender<Job<R>> {
        self.sender.clone()
    }

    /// Stops taking jobs and waits for the workers once every sender is gone.
    pub fn join(self) {
        drop(self.sender);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}
