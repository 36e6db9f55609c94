//! Stopping a client's transfer from outside: another thread, a signal
//! handler, or a dropped future of the tokio API sets a flag, and the
//! transfer returns [`NetError::Interrupted`] at its next turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use convoy_proto::Endpoint;

use crate::driver::{Application, Step};
use crate::error::NetError;

/// Runs `app` until it is done or `flag` is set.
///
/// The flag is read once per turn. Turns come at least every 100 ms (the
/// driver's longest sleep), and at once when the driver has a waker that
/// the code setting the flag also wakes.
pub(crate) struct Interruptible<'a, A> {
    pub app: &'a mut A,
    pub flag: &'a AtomicBool,
}

impl<A: Application> Application for Interruptible<'_, A> {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        if self.flag.load(Ordering::Acquire) {
            return Err(NetError::Interrupted);
        }
        self.app.step(ep, now)
    }

    fn wake_at(&self) -> Option<Duration> {
        self.app.wake_at()
    }
}
