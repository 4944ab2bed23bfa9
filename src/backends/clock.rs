//! Wall-clock time in Unix milliseconds, injectable so expiry can be tested without sleeping.

use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of the current time, in Unix milliseconds. Handle expiry, the freshness of redeem
/// proofs, trace timestamps and the listener's `date` header all read it, so a runtime that
/// keeps its own notion of time (a corrected clock, a simulation) hands it in here.
///
/// ```
/// use resource_plane::backends::{Clock, ManualClock};
/// use std::sync::Arc;
///
/// /// A runtime's clock: another clock corrected by a fixed offset.
/// #[derive(Debug)]
/// struct Corrected {
///     inner: Arc<dyn Clock>,
///     offset_ms: i64,
/// }
///
/// impl Clock for Corrected {
///     fn now_ms(&self) -> i64 {
///         self.inner.now_ms() + self.offset_ms
///     }
/// }
///
/// let base = Arc::new(ManualClock::new(1_000));
/// let clock: Arc<dyn Clock> = Arc::new(Corrected { inner: base.clone(), offset_ms: 250 });
/// assert_eq!(clock.now_ms(), 1_250);
/// base.advance(1_000);
/// assert_eq!(clock.now_ms(), 2_250);
/// ```
pub trait Clock: Debug + Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The operating system's wall clock: what a capsule and the listener use when given no other.
///
/// ```
/// use resource_plane::backends::{Clock, SystemClock};
///
/// let now = SystemClock.now_ms();
/// assert!(now > 1_577_836_800_000, "the wall clock reads after 2020-01-01");
/// assert!(SystemClock.now_ms() >= now - 60_000, "and does not run far back");
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // the one place the wall clock is read
    fn now_ms(&self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A clock that moves only when told to: the test double, with which a test crosses a handle's
/// expiry or a proof's freshness window without sleeping, or jumps the clock backwards. The
/// test keeps one `Arc` and hands the capsule a clone.
///
/// ```
/// use resource_plane::backends::{Clock, ManualClock};
/// use std::sync::Arc;
///
/// let clock = Arc::new(ManualClock::new(1_700_000_000_000));
/// let held_by_the_capsule: Arc<dyn Clock> = clock.clone();
/// clock.advance(61_000); // past a 60-second handle's expiry
/// assert_eq!(held_by_the_capsule.now_ms(), 1_700_000_061_000);
/// clock.advance(-120_000); // a step backwards, as a clock resync can make
/// assert_eq!(held_by_the_capsule.now_ms(), 1_699_999_941_000);
/// clock.set(0);
/// assert_eq!(held_by_the_capsule.now_ms(), 0);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicI64,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        ManualClock {
            now: AtomicI64::new(now_ms),
        }
    }

    /// Sets the reading (either direction, to model a clock jump).
    pub fn set(&self, now_ms: i64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the reading by `delta_ms` (negative moves it back).
    pub fn advance(&self, delta_ms: i64) {
        self.now.fetch_add(delta_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_both_ways() {
        let c = ManualClock::new(1_000);
        c.advance(500);
        assert_eq!(c.now_ms(), 1_500);
        c.advance(-2_000);
        assert_eq!(c.now_ms(), -500);
        c.set(7);
        assert_eq!(c.now_ms(), 7);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_ms() > 1_577_836_800_000);
    }
}
