//! A bound on the bytes held by in-flight reads (D-4.6): excess work waits, it is not dropped.

use std::sync::{Arc, Condvar, Mutex};

/// A pool of bytes that reads borrow from for as long as their body is in memory.
#[derive(Debug, Clone)]
pub struct ByteBudget {
    inner: Arc<(Mutex<u64>, Condvar)>,
    capacity: u64,
}

impl ByteBudget {
    /// A budget of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        ByteBudget {
            inner: Arc::new((Mutex::new(capacity), Condvar::new())),
            capacity: capacity.max(1),
        }
    }

    /// The configured capacity.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes not currently borrowed.
    pub fn available(&self) -> u64 {
        *self.inner.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Borrows `bytes` (capped at the whole budget) only if they are free right now: for work
    /// running on an async worker, which must never wait.
    pub fn try_acquire(&self, bytes: u64) -> Option<BudgetPermit> {
        let want = bytes.min(self.capacity);
        let mut available = self.inner.0.lock().unwrap_or_else(|e| e.into_inner());
        if *available < want {
            return None;
        }
        *available -= want;
        Some(BudgetPermit {
            budget: self.clone(),
            bytes: want,
        })
    }

    /// Borrows `bytes` (capped at the whole budget, so one huge read still proceeds alone),
    /// blocking the calling thread until they are free. Call from blocking threads only.
    pub fn acquire_blocking(&self, bytes: u64) -> BudgetPermit {
        let want = bytes.min(self.capacity);
        let (lock, ready) = &*self.inner;
        let mut available = lock.lock().unwrap_or_else(|e| e.into_inner());
        while *available < want {
            available = ready.wait(available).unwrap_or_else(|e| e.into_inner());
        }
        *available -= want;
        BudgetPermit {
            budget: self.clone(),
            bytes: want,
        }
    }
}

/// Bytes borrowed from a [`ByteBudget`], returned on drop.
#[derive(Debug)]
pub struct BudgetPermit {
    budget: ByteBudget,
    bytes: u64,
}

impl Drop for BudgetPermit {
    fn drop(&mut self) {
        let (lock, ready) = &*self.budget.inner;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) += self.bytes;
        ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn waits_until_returned() {
        let budget = ByteBudget::new(100);
        let first = budget.acquire_blocking(80);
        assert_eq!(budget.available(), 20);
        let b2 = budget.clone();
        let waiter = std::thread::spawn(move || b2.acquire_blocking(50).bytes);
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "must wait for bytes");
        drop(first);
        assert_eq!(waiter.join().unwrap(), 50);
        assert_eq!(budget.available(), 100);
    }

    #[test]
    fn oversized_request_takes_whole_budget() {
        let budget = ByteBudget::new(10);
        let p = budget.acquire_blocking(1_000);
        assert_eq!(budget.available(), 0);
        drop(p);
        assert_eq!(budget.available(), 10);
    }
}
