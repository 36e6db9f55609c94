//! Turning "this future was dropped" into "the driver thread stops the
//! work": a guard that the future holds while it waits, which sets the
//! work's interrupt flag and wakes the driver if it is dropped early.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::wake::Waker;

pub(super) struct CancelOnDrop {
    flag: Arc<AtomicBool>,
    waker: Arc<Waker>,
    armed: bool,
}

impl CancelOnDrop {
    /// Arms a guard over a fresh flag; the flag goes to the driver thread.
    pub(super) fn new(waker: Arc<Waker>) -> (CancelOnDrop, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(false));
        let guard = CancelOnDrop {
            flag: flag.clone(),
            waker,
            armed: true,
        };
        (guard, flag)
    }

    /// The work finished: dropping the guard now changes nothing.
    pub(super) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.flag.store(true, Ordering::Release);
            self.waker.wake();
        }
    }
}
