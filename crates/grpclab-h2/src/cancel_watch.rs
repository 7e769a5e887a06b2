//! A cancellation token read cheaply on every turn of a connection loop.
//!
//! The token's own wait (`CancellationToken::cancelled`) locks the token and its `Notify` on
//! every poll, and so does `is_cancelled`; a connection loop's `select!` polled the wait on every
//! turn: ~280 instructions, as much as a call's HTTP/2 work where each read brings one request.
//! Here the wait is polled once, with a waker that raises a flag before it wakes the
//! connection's task. A pending future wakes the waker of its latest poll when it becomes
//! ready, so cancelling the token raises the flag and wakes the task, whose next turn reads the
//! flag with one atomic load.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// Watches one token for one task: [`CancelWatch::poll_cancelled`] in the task's `select!`
/// (with the token's `cancelled()`, pinned for the loop's life), [`CancelWatch::is_cancelled`]
/// between turns.
#[derive(Default)]
pub(crate) struct CancelWatch {
    /// Made at the first poll (it holds that poll's task waker).
    flag: Option<Arc<Flag>>,
}

struct Flag {
    raised: AtomicBool,
    task: Waker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.raised.store(true, Ordering::Release);
        self.task.wake_by_ref();
    }
}

impl CancelWatch {
    /// Ready once `wait` (the token's `cancelled()`) is; after the first poll, one atomic load.
    pub(crate) fn poll_cancelled(
        &mut self,
        wait: Pin<&mut WaitForCancellationFuture<'_>>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        match &self.flag {
            Some(flag) if flag.raised.load(Ordering::Acquire) => Poll::Ready(()),
            Some(_) => Poll::Pending,
            None => {
                let flag = Arc::new(Flag {
                    raised: AtomicBool::new(false),
                    task: cx.waker().clone(),
                });
                let waker = Waker::from(Arc::clone(&flag));
                let ready = wait.poll(&mut Context::from_waker(&waker));
                if ready.is_ready() {
                    flag.raised.store(true, Ordering::Release);
                }
                self.flag = Some(flag);
                ready
            }
        }
    }

    /// Whether `token` is cancelled: the flag once the watch has been polled, the token (a
    /// lock) before that.
    pub(crate) fn is_cancelled(&self, token: &CancellationToken) -> bool {
        match &self.flag {
            Some(flag) => flag.raised.load(Ordering::Acquire),
            None => token.is_cancelled(),
        }
    }
}
