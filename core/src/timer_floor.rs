//! A floor under tokio's timer wheel, so that a per-request timeout does not
//! wake the worker's event loop.
//!
//! tokio wakes its driver (a `write(2)` to an eventfd, then one more
//! `epoll_wait(2)`) whenever a timer is registered with a deadline earlier
//! than the driver's next wake-up, even on the driver's own thread while it
//! runs tasks and cannot be asleep (tokio#5207; a fix, tokio#8383, is not
//! merged). An upstream exchange arms its read timeout (60 s by default) per
//! request; with a `keep-alive` longer than that (the benchmarks' 65 s,
//! nginx's default 75 s) it is sooner than every client's keep-alive timer,
//! so each proxied or FastCGI request paid those two syscalls (seen with
//! strace: `write(13, "\1\0\0\0\0\0\0\0", 8)` after every request sent
//! upstream).
//!
//! While exchanges run, [`touch`] keeps one timer per worker armed at most
//! [`STEP`] ahead: a later deadline is then never the earliest, and only that
//! timer wakes the loop, once per [`STEP`]. A worker with no exchange for a
//! whole [`STEP`] drops it, so an idle server sleeps as before.

use std::cell::Cell;
use std::time::Duration;

/// How far ahead the floor timer is armed: 1 s. Timeouts shorter than this
/// still wake the loop once each when armed (none of the upstream timeouts'
/// defaults is).
pub const STEP: Duration = Duration::from_secs(1);

thread_local! {
    /// Whether an exchange began since the floor last fired.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// Whether this worker's floor task runs.
    static RUNNING: Cell<bool> = const { Cell::new(false) };
}

/// Called before arming a per-request timeout of [`STEP`] or more (an
/// upstream exchange): starts this worker's floor task if it is not running
/// (one spawn per busy spell), else only marks the worker busy. Off an
/// actix worker (a thread of tokio's blocking pool, where a vhost whose
/// plugins may block runs its requests) it does nothing: no task can be
/// spawned there, and no event loop is woken.
pub fn touch() {
    BUSY.with(|b| b.set(true));
    if !RUNNING.with(Cell::get) && actix_rt::Arbiter::try_current().is_some() {
        RUNNING.with(|r| r.set(true));
        actix_rt::spawn(floor());
    }
}

/// The floor task: one timer armed [`STEP`] ahead, again and again while
/// [`touch`] is called in between; it ends after a quiet [`STEP`].
async fn floor() {
    loop {
        actix_rt::time::sleep(STEP).await;
        if !stepped() {
            return;
        }
    }
}

/// One step of the floor has passed: whether to arm it again (an exchange
/// began during the step), else it stops.
fn stepped() -> bool {
    let busy = BUSY.with(|b| b.replace(false));
    if !busy {
        RUNNING.with(|r| r.set(false));
    }
    busy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_a_worker_nothing_is_spawned() {
        // a plain thread, as tokio's blocking pool's: no LocalSet, no arbiter
        std::thread::spawn(|| {
            touch();
            assert!(!RUNNING.with(Cell::get));
        })
        .join()
        .expect("touch off a worker does not panic");
    }

    #[actix_rt::test]
    async fn the_floor_runs_while_touched_and_stops_after_a_quiet_step() {
        touch();
        assert!(RUNNING.with(Cell::get));
        touch();
        assert!(stepped(), "an exchange began during the step: armed again");
        assert!(RUNNING.with(Cell::get));
        assert!(!stepped(), "a quiet step stops it");
        assert!(!RUNNING.with(Cell::get));
        touch();
        assert!(RUNNING.with(Cell::get), "the next exchange starts it again");
    }
}
