//! A bound on the bytes held by in-flight reads (D-4.6): excess work waits, it is not dropped.
//!
//! The budget also recycles body buffers. Large buffers freed by many threads are exactly what
//! a general-purpose allocator is worst at returning to the OS, so buffers go back to the pool
//! instead, and the pool is trimmed so that pooled plus borrowed bytes never exceed the
//! capacity: the process's read buffers stay within one budget whatever the load.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// The cores the planes size their work for when none is set: 2. The crate reads nothing to
/// learn the machine's (D-15.8); a runtime that knows it says so with
/// `CapsuleConfig::cores`, as the binary does once at start.
pub const DEFAULT_CORES: usize = 2;

/// Buffers smaller than this are left to the allocator.
const POOLED_MIN: u64 = 64 * 1024;

/// `capacity = free + borrowed + pooled`, always.
#[derive(Debug)]
struct State {
    free: u64,
    pooled: Vec<Vec<u8>>,
    pooled_bytes: u64,
    /// Threads blocked in `acquire_blocking`: a returned permit wakes them only when there are
    /// any, so the common case (nobody waiting) costs no `futex` system call.
    waiting: usize,
    /// Waiters are served first come, first served: each takes the next ticket, and only the
    /// one whose ticket is `now_serving` may borrow. Without the queue a large read could wait
    /// for ever while small reads kept slipping past it.
    next_ticket: u64,
    now_serving: u64,
    /// Tickets whose holders stopped waiting (an async borrower whose client left) before
    /// their turn: skipped when their turn comes.
    abandoned: std::collections::BTreeSet<u64>,
    /// Borrowers waiting on the async side: a returned permit notifies them only when there
    /// are any.
    async_waiting: usize,
}

impl State {
    /// Whether anyone is queued for bytes: newcomers then queue behind them.
    fn queued(&self) -> bool {
        self.next_ticket != self.now_serving
    }

    /// The turn passes to the next ticket still held.
    fn next_turn(&mut self) {
        self.now_serving += 1;
        while self.abandoned.remove(&self.now_serving) {
            self.now_serving += 1;
        }
    }

    /// The holder of `ticket` stopped waiting for its turn.
    fn abandon(&mut self, ticket: u64) {
        if ticket == self.now_serving {
            self.next_turn();
        } else if ticket > self.now_serving {
            self.abandoned.insert(ticket);
        }
    }
}

impl State {
    /// Reserves `want` bytes if possible: reusing the smallest pooled buffer that fits, else
    /// evicting pooled buffers until the free bytes suffice. Returns the bytes charged and the
    /// reused buffer, if any.
    fn reserve(&mut self, want: u64) -> Option<(u64, Option<Vec<u8>>)> {
        if want >= POOLED_MIN {
            let fit = self
                .pooled
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() as u64 >= want)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            if let Some(index) = fit {
                let buffer = self.pooled.swap_remove(index);
                let bytes = buffer.capacity() as u64;
                self.pooled_bytes -= bytes;
                return Some((bytes, Some(buffer)));
            }
        }
        if self.free + self.pooled_bytes < want {
            return None;
        }
        while self.free < want {
            let smallest = (0..self.pooled.len()).min_by_key(|i| self.pooled[*i].capacity())?;
            let evicted = self.pooled.swap_remove(smallest);
            self.pooled_bytes -= evicted.capacity() as u64;
            self.free += evicted.capacity() as u64;
        }
        self.free -= want;
        Some((want, None))
    }
}

/// A pool of bytes that reads and listings borrow from for as long as their body is in
/// memory, the slots that bound how many blocking reads fill their buffers at once, the slots
/// that bound how many threads hash for listings, and the gate listings walk through one at a
/// time.
#[derive(Debug, Clone)]
pub struct ByteBudget {
    inner: Arc<(Mutex<State>, Condvar)>,
    /// Wakes borrowers waiting on the async side when bytes come back or the turn moves.
    returned: Arc<tokio::sync::Notify>,
    capacity: u64,
    fills: Arc<Slots>,
    hashing: Arc<Slots>,
    hashing_count: usize,
    walking: Arc<Mutex<()>>,
}

/// A counted set of slots, taken and returned one at a time.
///
/// As fill slots: blocking reads opening, copying and hashing at once, one per core. More only
/// take turns on the same cores, each evicting the others' buffers from cache: with 32 clients
/// of 1 MiB reads, CPU per read fell from about 1,290 µs unbounded to about 1,230 µs. A read
/// gives its slot up while it waits for bytes, and a slot is never held while a client reads:
/// a client that stops reading holds bytes, not slots, so it cannot stall other reads.
///
/// As hashing slots: the threads that open and hash files for listings, twice the cores in
/// all however many listings run (D-4.6; a cold cache keeps more files in flight than there
/// are cores, so that the disk stays busy).
#[derive(Debug)]
struct Slots {
    state: Mutex<FillState>,
    freed: Condvar,
}

#[derive(Debug)]
struct FillState {
    free: usize,
    waiting: usize,
}

impl Slots {
    fn new(count: usize) -> Arc<Self> {
        Arc::new(Slots {
            state: Mutex::new(FillState {
                free: count.max(1),
                waiting: 0,
            }),
            freed: Condvar::new(),
        })
    }

    /// A slot, blocking the calling thread until one is free.
    fn take(self: &Arc<Self>) -> Slot {
        let mut state = lock(&self.state);
        while state.free == 0 {
            state.waiting += 1;
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
            state.waiting -= 1;
        }
        state.free -= 1;
        Slot {
            slots: self.clone(),
        }
    }

    /// A slot if one is free right now.
    fn try_take(self: &Arc<Self>) -> Option<Slot> {
        let mut state = lock(&self.state);
        if state.free == 0 {
            return None;
        }
        state.free -= 1;
        Some(Slot {
            slots: self.clone(),
        })
    }
}

/// One slot of a [`ByteBudget`]'s fill or hashing slots, returned on drop.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
}

/// A fill slot (see [`ByteBudget::fill_slot`]).
pub type FillSlot = Slot;

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = lock(&self.slots.state);
        state.free += 1;
        if state.waiting > 0 {
            self.slots.freed.notify_one();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ByteBudget {
    /// A budget of `capacity` bytes, its slots sized for
    /// `DEFAULT_CORES` (2) cores. Reads nothing.
    pub fn new(capacity: u64) -> Self {
        Self::with_cores(capacity, DEFAULT_CORES)
    }

    /// A budget of `capacity` bytes, with one fill slot per core and two hashing slots per
    /// core of `cores` (0 is read as 1). Reads nothing.
    pub fn with_cores(capacity: u64, cores: usize) -> Self {
        let capacity = capacity.max(1);
        let cores = cores.max(1);
        ByteBudget {
            returned: Arc::new(tokio::sync::Notify::new()),
            fills: Slots::new(cores),
            hashing: Slots::new(cores * 2),
            hashing_count: cores * 2,
            walking: Arc::new(Mutex::new(())),
            inner: Arc::new((
                Mutex::new(State {
                    free: capacity,
                    pooled: Vec::new(),
                    pooled_bytes: 0,
                    waiting: 0,
                    next_ticket: 0,
                    now_serving: 0,
                    abandoned: std::collections::BTreeSet::new(),
                    async_waiting: 0,
                }),
                Condvar::new(),
            )),
            capacity,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.0)
    }

    /// A slot to open, fill and hash a buffer in, blocking the calling thread until one is
    /// free (one per core). Drop it before waiting for bytes and as soon as the buffer is
    /// hashed. Call from blocking threads only.
    pub fn fill_slot(&self) -> FillSlot {
        self.fills.take()
    }

    /// Slots for a listing's hashing threads: one, waiting for it if every slot is taken, then
    /// up to `more` others that are free right now. A listing never waits for a slot while
    /// holding one, so listings cannot wait on each other for ever. Call from blocking threads
    /// only.
    pub fn hashing_slots(&self, more: usize) -> Vec<Slot> {
        let mut slots = vec![self.hashing.take()];
        slots.extend((0..more).map_while(|_| self.hashing.try_take()));
        slots
    }

    /// The gate a listing's walk passes alone: it holds the walk's paths, not yet charged to
    /// the budget, and is held until the listing has borrowed its bytes, so that however many
    /// listings start, at most one holds uncharged memory.
    pub fn walk_gate(&self) -> MutexGuard<'_, ()> {
        lock(&self.walking)
    }

    /// How many hashing slots there are: twice the cores.
    pub fn hashing_capacity(&self) -> usize {
        self.hashing_count
    }

    /// The configured capacity.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes neither borrowed nor pooled.
    pub fn available(&self) -> u64 {
        let state = self.state();
        state.free + state.pooled_bytes
    }

    /// Bytes held in recycled buffers.
    pub fn pooled(&self) -> u64 {
        self.state().pooled_bytes
    }

    fn permit(&self, (bytes, buffer): (u64, Option<Vec<u8>>), want: u64) -> BudgetPermit {
        BudgetPermit {
            budget: self.clone(),
            bytes,
            want,
            buffer,
        }
    }

    /// Borrows `bytes` (capped at the whole budget) only if they are free right now, even
    /// ahead of queued borrowers: for small reads on an async worker, which must never wait,
    /// and must not be held up behind large reads waiting for bytes that clients who stopped
    /// reading hold.
    pub fn try_acquire(&self, bytes: u64) -> Option<BudgetPermit> {
        let want = bytes.min(self.capacity);
        let reserved = self.state().reserve(want)?;
        Some(self.permit(reserved, want))
    }

    /// Borrows `bytes` (capped at the whole budget) only if they are free right now and no
    /// borrower is queued for bytes: a blocking read's first try, which never slips past a
    /// queued one.
    pub fn try_acquire_in_turn(&self, bytes: u64) -> Option<BudgetPermit> {
        let want = bytes.min(self.capacity);
        let mut state = self.state();
        if state.queued() {
            return None;
        }
        let reserved = state.reserve(want)?;
        drop(state);
        Some(self.permit(reserved, want))
    }

    /// Borrows `bytes` (capped at the whole budget, so one huge read still proceeds alone),
    /// blocking the calling thread until they are free. Call from blocking threads only.
    pub fn acquire_blocking(&self, bytes: u64) -> BudgetPermit {
        self.acquire_blocking_within(bytes, None)
            .expect("a wait without a deadline ends with the bytes")
    }

    /// [`acquire_blocking`](Self::acquire_blocking), giving up after `patience` (when set): then
    /// `None`, and the borrower's place in the queue goes to the next. For a borrower that
    /// holds something others queued for bytes may wait on (a blocking lane), so that it
    /// cannot wait for them for ever.
    pub fn acquire_blocking_within(
        &self,
        bytes: u64,
        patience: Option<std::time::Duration>,
    ) -> Option<BudgetPermit> {
        let deadline = patience.map(|patience| std::time::Instant::now() + patience);
        let want = bytes.min(self.capacity);
        let (_, ready) = &*self.inner;
        let mut state = self.state();
        if !state.queued()
            && let Some(reserved) = state.reserve(want)
        {
            drop(state);
            return Some(self.permit(reserved, want));
        }
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        loop {
            if state.now_serving == ticket
                && let Some(reserved) = state.reserve(want)
            {
                state.next_turn();
                // The next in line may find its bytes free already.
                self.wake_borrowers(&state);
                drop(state);
                return Some(self.permit(reserved, want));
            }
            state.waiting += 1;
            state = match deadline {
                None => ready.wait(state).unwrap_or_else(|e| e.into_inner()),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        state.waiting -= 1;
                        state.abandon(ticket);
                        self.wake_borrowers(&state);
                        return None;
                    }
                    ready
                        .wait_timeout(state, left)
                        .map(|(state, _)| state)
                        .unwrap_or_else(|e| e.into_inner().0)
                }
            };
            state.waiting -= 1;
        }
    }
}

impl ByteBudget {
    /// Borrows `bytes` (capped at the whole budget) in turn, as
    /// [`acquire_blocking`](Self::acquire_blocking) does, but waiting on the async side: a
    /// waiting borrower holds no thread (D-4.6.1). Dropping the future before it answers gives
    /// up its place in the queue, and the next borrower's turn comes.
    pub async fn acquire(&self, bytes: u64) -> BudgetPermit {
        let want = bytes.min(self.capacity);
        let ticket = {
            let mut state = self.state();
            if !state.queued()
                && let Some(reserved) = state.reserve(want)
            {
                drop(state);
                return self.permit(reserved, want);
            }
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            state.async_waiting += 1;
            ticket
        };
        let mut place = QueuePlace {
            budget: self,
            ticket: Some(ticket),
        };
        loop {
            let returned = self.returned.notified();
            tokio::pin!(returned);
            returned.as_mut().enable();
            {
                let (_, ready) = &*self.inner;
                let mut state = self.state();
                if state.now_serving == ticket
                    && let Some(reserved) = state.reserve(want)
                {
                    state.next_turn();
                    state.async_waiting -= 1;
                    place.ticket = None;
                    if state.waiting > 0 {
                        ready.notify_all();
                    }
                    let others_wait = state.async_waiting > 0;
                    drop(state);
                    if others_wait {
                        self.returned.notify_waiters();
                    }
                    return self.permit(reserved, want);
                }
            }
            returned.await;
        }
    }

    /// Wakes every borrower: bytes came back, or the turn moved.
    fn wake_borrowers(&self, state: &State) {
        let (_, ready) = &*self.inner;
        if state.waiting > 0 {
            ready.notify_all();
        }
        if state.async_waiting > 0 {
            self.returned.notify_waiters();
        }
    }
}

/// An async borrower's place in the queue, given up if the borrower stops waiting.
struct QueuePlace<'a> {
    budget: &'a ByteBudget,
    ticket: Option<u64>,
}

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            let mut state = self.budget.state();
            state.abandon(ticket);
            state.async_waiting -= 1;
            self.budget.wake_borrowers(&state);
        }
    }
}

/// Bytes borrowed from a [`ByteBudget`], returned on drop.
#[derive(Debug)]
pub struct BudgetPermit {
    budget: ByteBudget,
    bytes: u64,
    want: u64,
    buffer: Option<Vec<u8>>,
}

impl BudgetPermit {
    /// Whether this permit paid for at least `bytes`: a read may use it for a borrow of that
    /// size instead of borrowing again.
    pub fn covers(&self, bytes: u64) -> bool {
        self.want >= bytes.min(self.budget.capacity)
    }

    /// The buffer this permit pays for, of at least `capacity` bytes: a recycled one when the
    /// pool had one that fits, holding the bytes of its last use, else a new one, zeroed. Its
    /// bytes up to its length are initialised either way, so a read can fill it in place
    /// without zeroing it first (see [`page_aligned::read_into`](crate::page_aligned::read_into));
    /// what they hold is no concern of the caller's.
    pub fn buffer(&mut self, capacity: usize) -> Vec<u8> {
        match self.buffer.take() {
            Some(buffer) if buffer.capacity() >= capacity => buffer,
            // Zeroed by the allocator: pages fresh from the OS are not written at all.
            _ => vec![0; capacity],
        }
    }

    /// Returns the bytes, and `buffer` to the pool when it is worth keeping, as it is: its bytes
    /// are kept, so the next read into it writes over them instead of zeroing them first. The
    /// pool keeps what the permit paid for, so pooled plus borrowed bytes never exceed the
    /// capacity.
    pub fn recycle(mut self, buffer: Vec<u8>) {
        let size = buffer.capacity() as u64;
        if size >= POOLED_MIN && size <= self.bytes.max(self.want) && size >= self.want {
            let mut state = self.budget.state();
            state.pooled_bytes += size;
            state.pooled.push(buffer);
            // The rest of what the permit paid for goes back to the free bytes.
            state.free += self.bytes.saturating_sub(size);
            self.bytes = 0;
        }
    }
}

impl Drop for BudgetPermit {
    fn drop(&mut self) {
        let mut state = self.budget.state();
        state.free += self.bytes;
        self.budget.wake_borrowers(&state);
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
    fn a_large_borrower_is_served_in_turn_while_small_ones_keep_coming() {
        let budget = ByteBudget::new(1 << 20);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Four borrowers of 200 KiB each, overlapping, so the budget is never all free.
        let small: Vec<_> = (0..4)
            .map(|n| {
                let (budget, stop) = (budget.clone(), stop.clone());
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(3 * n));
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let permit = budget.acquire_blocking(200 << 10);
                        std::thread::sleep(Duration::from_millis(12));
                        drop(permit);
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        let b2 = budget.clone();
        let large = std::thread::spawn(move || b2.acquire_blocking(1 << 20).bytes);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !large.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let finished = large.is_finished();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in small {
            thread.join().expect("small borrower");
        }
        assert!(finished, "the whole-budget borrower must get its turn");
        assert_eq!(large.join().expect("large borrower"), 1 << 20);
        assert_eq!(budget.available(), 1 << 20);
    }

    /// Polls `future` once: its output if it is ready at once.
    fn poll_once<F: std::future::Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        match future.poll(&mut std::task::Context::from_waker(waker)) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        }
    }

    /// An async borrower queues in turn with blocking ones, holding no thread, and gets its
    /// bytes when they come back.
    #[tokio::test(flavor = "current_thread")]
    async fn an_async_borrower_waits_in_turn_on_the_async_side() {
        let budget = ByteBudget::new(100);
        let held = budget.acquire_blocking(80);
        let waiting = budget.acquire(50);
        tokio::pin!(waiting);
        assert!(poll_once(waiting.as_mut()).is_none(), "30 bytes free of 50");
        assert!(
            budget.try_acquire_in_turn(10).is_none(),
            "an async borrower is queued first"
        );
        drop(held);
        let permit = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when the bytes came back");
        assert_eq!(permit.bytes, 50);
        assert_eq!(budget.available(), 50);
    }

    /// A borrower that stops waiting (its client left) gives up its turn: the next in line,
    /// async or blocking, is served, and nothing stays charged.
    #[tokio::test(flavor = "current_thread")]
    async fn a_borrower_that_stops_waiting_gives_up_its_turn() {
        let budget = ByteBudget::new(100);
        let held = budget.acquire_blocking(100);
        let mut first = Box::pin(budget.acquire(60));
        assert!(poll_once(first.as_mut()).is_none());
        let second = budget.acquire(30);
        tokio::pin!(second);
        assert!(poll_once(second.as_mut()).is_none());
        let b2 = budget.clone();
        let third = std::thread::spawn(move || b2.acquire_blocking(70).bytes);
        std::thread::sleep(Duration::from_millis(50));
        drop(first);
        drop(held);
        let second = tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("the second borrower's turn came");
        assert_eq!(second.bytes, 30);
        assert_eq!(third.join().expect("the blocking borrower"), 70);
        drop(second);
        assert_eq!(budget.available(), 100, "nothing stays charged");
        assert!(
            budget.try_acquire_in_turn(1).is_some(),
            "the queue is empty again"
        );
    }

    /// A blocking borrower with a deadline gives up when it passes, and its place goes to the
    /// next in line.
    #[test]
    fn a_borrower_with_a_deadline_gives_up_its_place() {
        let budget = ByteBudget::new(100);
        let held = budget.acquire_blocking(90);
        let started = std::time::Instant::now();
        assert!(
            budget
                .acquire_blocking_within(50, Some(Duration::from_millis(100)))
                .is_none()
        );
        assert!(started.elapsed() >= Duration::from_millis(100));
        drop(held);
        assert!(
            budget.try_acquire_in_turn(100).is_some(),
            "nobody is queued any more"
        );
    }

    #[test]
    fn nobody_slips_past_a_queued_borrower() {
        let budget = ByteBudget::new(100);
        let held = budget.acquire_blocking(60);
        let b2 = budget.clone();
        let queued = std::thread::spawn(move || b2.acquire_blocking(80).bytes);
        std::thread::sleep(Duration::from_millis(50));
        assert!(!queued.is_finished());
        assert!(
            budget.try_acquire_in_turn(10).is_none(),
            "40 bytes are free, but a borrower is queued first"
        );
        // A small inline read may still take free bytes: it must never wait behind a queue.
        drop(budget.try_acquire(10).expect("free bytes, taken at once"));
        drop(held);
        assert_eq!(queued.join().expect("queued borrower"), 80);
        assert!(
            budget.try_acquire_in_turn(10).is_some(),
            "the queue is empty again"
        );
    }

    #[test]
    fn fill_slots_admit_one_read_per_core_and_wake_the_next() {
        let cores = 3;
        let budget = ByteBudget::with_cores(100, cores);
        let held: Vec<FillSlot> = (0..cores).map(|_| budget.fill_slot()).collect();
        let b2 = budget.clone();
        let waiter = std::thread::spawn(move || drop(b2.fill_slot()));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "one slot per core, no more");
        drop(held);
        waiter.join().expect("woken when a slot came back");
        // All slots are free again.
        let again: Vec<FillSlot> = (0..cores).map(|_| budget.fill_slot()).collect();
        assert_eq!(again.len(), cores);
    }

    #[test]
    fn buffers_are_recycled_within_the_budget() {
        let budget = ByteBudget::new(1 << 20);
        let mut permit = budget.acquire_blocking(300 << 10);
        let buffer = permit.buffer(300 << 10);
        let address = buffer.as_ptr();
        permit.recycle(buffer);
        assert_eq!(budget.available(), 1 << 20);
        assert!(budget.pooled() >= 300 << 10);
        let mut again = budget.acquire_blocking(200 << 10);
        let reused = again.buffer(200 << 10);
        assert_eq!(reused.as_ptr(), address, "the pooled buffer is reused");
        again.recycle(reused);
        assert_eq!(budget.pooled(), 300 << 10, "and kept again");
        // Borrowing almost everything evicts the pool: pooled + borrowed <= capacity.
        let big = budget.acquire_blocking(900 << 10);
        assert_eq!(budget.pooled(), 0, "pool evicted");
        assert_eq!(budget.available(), (1 << 20) - (900 << 10));
        drop(big);
        assert_eq!(budget.available(), 1 << 20);
    }

    #[test]
    fn small_buffers_are_not_pooled() {
        let budget = ByteBudget::new(1 << 20);
        let mut permit = budget.acquire_blocking(100);
        let buffer = permit.buffer(100);
        permit.recycle(buffer);
        assert_eq!(budget.pooled(), 0);
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
