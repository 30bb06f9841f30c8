//! Letting the host interrupt a consumer that waits on pipeline threads.
//!
//! A consumer blocked in `next()` on a prefetch thread, parallel-map workers or background
//! readers wakes at least every [`TICK`] and runs the check its thread installed with
//! [`with_check`]; an error from the check ends the wait, and `next()` returns it. The Python
//! bindings install one that runs Python's signal handlers, so Ctrl-C raises `KeyboardInterrupt`
//! while a training loop waits for data, instead of after the next element arrives (or never).
//! Nothing is lost: the element being waited for stays queued, the iterator's state is unchanged,
//! and the next `next()` returns that element.

use std::cell::Cell;
use std::sync::{Condvar, MutexGuard};
use std::time::Duration;

use crate::error::Result;

/// The longest a waiting consumer goes without running its check.
pub const TICK: Duration = Duration::from_millis(100);

/// A check: `Err` interrupts the wait (typically [`crate::Error::Interrupted`]).
pub type Check = fn() -> Result<()>;

thread_local! {
    static CHECK: Cell<Option<Check>> = const { Cell::new(None) };
}

/// Runs `f` with `check` installed on this thread (restored afterwards, even on panic).
pub fn with_check<R>(check: Check, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Check>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CHECK.set(self.0);
        }
    }
    let _restore = Restore(CHECK.replace(Some(check)));
    f()
}

/// Runs this thread's check, if one is installed: waiting loops call it at every [`TICK`].
pub fn check() -> Result<()> {
    CHECK.get().map_or(Ok(()), |c| c())
}

/// Waits on `cv` for at most a [`TICK`]; when that passes with no wake-up, runs this thread's
/// check without holding the lock (the check may take the host's lock, Python's GIL, which a
/// thread that would wake `cv` may hold while it waits for this lock), then `relock`s.
pub fn wait<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    relock: impl FnOnce() -> MutexGuard<'a, T>,
) -> Result<MutexGuard<'a, T>> {
    let (guard, wait) = cv
        .wait_timeout(guard, TICK)
        .unwrap_or_else(|e| e.into_inner());
    if !wait.timed_out() {
        return Ok(guard);
    }
    drop(guard);
    check()?;
    Ok(relock())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn refuse() -> Result<()> {
        Err(Error::Cancelled("refused".into()))
    }

    #[test]
    fn check_is_scoped_to_the_call_and_the_thread() {
        assert!(check().is_ok());
        with_check(refuse, || {
            assert!(check().is_err());
            std::thread::spawn(|| assert!(check().is_ok()))
                .join()
                .unwrap();
        });
        assert!(check().is_ok());
        let _ = std::panic::catch_unwind(|| with_check(refuse, || panic!("boom")));
        assert!(check().is_ok(), "restored after a panic");
    }
}
