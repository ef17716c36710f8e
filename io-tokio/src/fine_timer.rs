//! A timer finer than tokio's, for the core's deadlines (a batch's `linger.ms` above all).
//!
//! A tokio sleep ends on the runtime's millisecond tick after its deadline, and the runtime
//! parks until that tick plus the fraction of a millisecond at which it parked: measured on
//! tokio 1.54 (this machine, a 5 ms sleep armed at once, 300 times), it ended 1.11 ms late at
//! the median (0.09–1.54 ms). Every `linger.ms` would last about a millisecond more than set,
//! which is most of a low-rate record's latency beyond the linger itself. This thread waits
//! on a condition variable with the deadline's own precision (the kernel's timer slack, tens
//! of microseconds) and wakes the driver through [`Shared::wake`](crate::Shared). The tokio
//! sleep stays armed as well, so a deadline is never missed if this thread is not there
//! (it could not be started, or the runtime's clock is paused in a test: this thread reads
//! the real clock, and a wake-up before the driver's own clock reaches the deadline does
//! nothing).

use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::sync::Notify;

#[derive(Default)]
struct State {
    deadline: Option<Instant>,
    stop: bool,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    changed: Condvar,
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The thread, stopped when this is dropped (with the driver).
pub(crate) struct FineTimer {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

impl FineTimer {
    /// Starts the thread; it calls `wake.notify_one()` at each deadline set, for as long as
    /// `wake` lives. `None` if no thread could be started (tokio's sleep then does alone).
    pub(crate) fn start<T: Send + Sync + 'static>(
        owner: Weak<T>,
        wake: fn(&T) -> &Notify,
    ) -> Option<Self> {
        let inner = Arc::new(Inner::default());
        let theirs = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("kprod-timer".into())
            // It only waits and wakes a task: a small stack, not the default 2 MiB of address
            // space per producer.
            .stack_size(128 * 1024)
            .spawn(move || run(&theirs, &owner, wake))
            .ok()?;
        Some(FineTimer {
            inner,
            thread: Some(thread),
        })
    }

    /// The next deadline (`None`: none). The thread is woken only when it must wake earlier
    /// than it planned: one waiting for a deadline that has since moved later wakes then,
    /// finds the new one and waits again.
    pub(crate) fn set(&self, deadline: Option<Instant>) {
        let mut state = self.inner.lock();
        let earlier = match (deadline, state.deadline) {
            (Some(new), Some(old)) => new < old,
            (Some(_), None) => true,
            (None, _) => false,
        };
        state.deadline = deadline;
        drop(state);
        if earlier {
            self.inner.changed.notify_one();
        }
    }
}

impl Drop for FineTimer {
    fn drop(&mut self) {
        self.inner.lock().stop = true;
        self.inner.changed.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run<T>(inner: &Inner, owner: &Weak<T>, wake: fn(&T) -> &Notify) {
    let mut state = inner.lock();
    loop {
        if state.stop {
            return;
        }
        match state.deadline {
            None => {
                state = (inner.changed.wait(state)).unwrap_or_else(PoisonError::into_inner);
            }
            Some(deadline) => {
                let now = Instant::now();
                if now < deadline {
                    state = (inner.changed.wait_timeout(state, deadline - now))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    continue;
                }
                state.deadline = None;
                drop(state);
                match owner.upgrade() {
                    Some(owner) => wake(&owner).notify_one(),
                    None => return,
                }
                state = inner.lock();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    struct Owner(Notify);

    /// Waits at most `bound` for the owner's wake-up; whether it came.
    async fn woken(owner: &Owner, bound: Duration) -> bool {
        tokio::time::timeout(bound, owner.0.notified())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn wakes_at_the_deadline_not_before() {
        let owner = Arc::new(Owner(Notify::new()));
        let timer = FineTimer::start(Arc::downgrade(&owner), |o| &o.0).expect("thread");
        for _ in 0..20 {
            let deadline = Instant::now() + Duration::from_millis(3);
            // Set a later deadline first: the earlier one must still wake the thread.
            timer.set(Some(deadline + Duration::from_secs(60)));
            timer.set(Some(deadline));
            assert!(
                woken(&owner, Duration::from_secs(10)).await,
                "not woken 10 s after a deadline 3 ms away"
            );
            assert!(Instant::now() >= deadline, "woken before the deadline");
        }
        // Cleared (long before it comes): no wake-up, even well after it.
        timer.set(Some(Instant::now() + Duration::from_millis(200)));
        timer.set(None);
        assert!(
            !woken(&owner, Duration::from_millis(400)).await,
            "woken for a cleared deadline"
        );
        drop(timer);
    }

    #[test]
    fn stops_with_its_owner() {
        let owner = Arc::new(Owner(Notify::new()));
        let timer = FineTimer::start(Arc::downgrade(&owner), |o| &o.0).expect("thread");
        drop(owner);
        // The deadline finds the owner gone: the thread returns on its own (the timer, not
        // dropped yet, has not asked it to stop).
        timer.set(Some(Instant::now()));
        let thread = timer.thread.as_ref().expect("started");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !thread.is_finished() {
            assert!(
                Instant::now() < deadline,
                "the thread still runs 10 s after its owner was dropped"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(timer);
    }
}
