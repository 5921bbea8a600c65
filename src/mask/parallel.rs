//! The batch fills' scheduler: the calling thread and the helpers of a rayon pool take
//! contiguous chunks of the batch through one atomic index.
//!
//! Why not `par_iter`: a warm fill is about a microsecond (one row copied), so a batch of 64
//! is tens of microseconds, the time a sleeping pool thread takes to wake. Under
//! `pool.install(par_iter)` the caller sleeps until the pool is done and every item goes
//! through rayon's binary splitting; here the caller starts on the first chunk at once, a
//! helper joins when it wakes, and one that wakes after the batch is done finds nothing and
//! is not waited for.
//!
//! Waking a parked pool thread takes 15–40 µs on a VM (measured with
//! `examples/threads_probe.rs`, issue 27): longer than a warm batch of 16. So a helper that
//! finished a batch lingers (spins, yielding, at most [`LINGER`]) on one process-wide
//! mailbox for the next batch, which every caller posts there before spawning its helpers:
//! back-to-back batches find a running helper instead of waiting for one to wake. A batch
//! has `threads - 1` helper slots; a lingering helper and a spawned one each claim a slot
//! first, so no batch ever runs on more threads than asked for, whichever pool the
//! lingering helper came from, and a spawned helper that finds no slot returns at once.
//!
//! Chunks are guided: each claim takes `1/(2 × threads)` of what is left (at least one
//! item), so a warm batch is claimed in a few large chunks and the last items of a cold
//! batch (masks computed by the fill, milliseconds each) are shared one by one.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a helper that finished a batch spins for the next one before returning to its
/// pool (where it parks): longer than the Python and bookkeeping time between two
/// back-to-back batch calls, short enough to cost little CPU when batches are milliseconds
/// apart (a model's forward pass).
pub(crate) const LINGER: Duration = Duration::from_micros(100);

/// Where the helpers of a batch come from.
#[derive(Clone, Copy)]
pub(crate) enum Helpers<'p> {
    /// Rayon's current pool (the global one outside `install`): `current_num_threads() - 1`
    /// helpers beside the caller.
    Current,
    /// This pool: all its threads help the caller.
    Pool(&'p rayon::ThreadPool),
    /// The caller alone.
    None,
}

impl Helpers<'_> {
    fn count(self) -> usize {
        match self {
            Helpers::Current => rayon::current_num_threads().saturating_sub(1),
            Helpers::Pool(p) => p.current_num_threads(),
            Helpers::None => 0,
        }
    }

    fn spawn(self, job: impl FnOnce() + Send + 'static) {
        match self {
            Helpers::Current => rayon::spawn(job),
            Helpers::Pool(p) => p.spawn(job),
            Helpers::None => {}
        }
    }
}

/// What the caller and its helpers share. `run` points at the caller's closure, which lives
/// until every claimed item is done (`done == n`): a helper dereferences it only after
/// claiming an item below `n`, and the caller returns only once `done == n`.
struct Shared {
    next: AtomicUsize,
    done: AtomicUsize,
    n: usize,
    /// The threads of the batch, the caller included: the guided chunk size divides by it.
    threads: usize,
    /// Helper slots still open (`threads - 1` at first): a helper claims one before working.
    slots: AtomicUsize,
    panicked: AtomicBool,
    run: *const (dyn Fn(usize) + Sync + 'static),
    /// Unparked by the helper that completes the batch.
    caller: std::thread::Thread,
}

// SAFETY: `run` is `Sync` and only called under the claim protocol described on `Shared`.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// Takes a helper slot of the batch; false when `threads - 1` helpers already have.
    fn claim_slot(&self) -> bool {
        self.slots
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| s.checked_sub(1))
            .is_ok()
    }

    /// The next chunk, guided: `1/(2 × threads)` of the items left, at least one.
    fn claim_chunk(&self) -> Option<(usize, usize)> {
        let mut start = self.next.load(Ordering::Relaxed);
        loop {
            if start >= self.n {
                return None;
            }
            let end = start + ((self.n - start) / (2 * self.threads)).max(1);
            match self
                .next
                .compare_exchange_weak(start, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some((start, end)),
                Err(now) => start = now,
            }
        }
    }

    /// Claims chunks until none is left, running each item of a claimed chunk.
    fn work(&self) {
        while let Some((start, end)) = self.claim_chunk() {
            // SAFETY: `start < n`, so the caller waits for this chunk and `run` is alive.
            let run = unsafe { &*self.run };
            if catch_unwind(AssertUnwindSafe(|| (start..end).for_each(run))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
            // Release: the chunk's writes are seen by the caller's Acquire load of `done`.
            if self.done.fetch_add(end - start, Ordering::Release) + (end - start) == self.n {
                self.caller.unpark();
            }
        }
    }
}

/// Where callers post their batch for lingering helpers.
struct Mailbox {
    /// The latest batch posted (kept after it is done: its `next` is then past `n`).
    batch: Mutex<Option<Arc<Shared>>>,
    /// Bumped at each post: the lingering helpers poll it, not the lock.
    posts: AtomicUsize,
}

static MAILBOX: Mailbox = Mailbox {
    batch: Mutex::new(None),
    posts: AtomicUsize::new(0),
};

impl Mailbox {
    /// Posts `batch` for the lingering helpers.
    fn post(&self, batch: &Arc<Shared>) {
        *self.batch.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(batch));
        self.posts.fetch_add(1, Ordering::Release);
    }

    /// The batch of the latest post.
    fn latest(&self) -> Option<Arc<Shared>> {
        self.batch.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Drops the posted batch if it is still `batch` (the caller is done with it).
    fn withdraw(&self, batch: &Arc<Shared>) {
        let mut slot = self.batch.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_some_and(|b| Arc::ptr_eq(b, batch)) {
            *slot = None;
        }
    }

    /// Run by a helper after its batch: spins up to [`LINGER`] for the next post, helps it
    /// if a slot is open, and lingers again after; returns when nothing came for `LINGER`.
    /// Every 64 spins it yields its core (a no-op on an idle one): on a loaded machine a
    /// lingering helper must not hold a core another process, or the caller, is waiting for.
    fn linger(&self) {
        let mut seen = self.posts.load(Ordering::Acquire);
        let mut since = Instant::now();
        let mut spins = 0u32;
        loop {
            let now = self.posts.load(Ordering::Acquire);
            if now != seen {
                seen = now;
                if let Some(b) = self.latest().filter(|b| b.claim_slot()) {
                    b.work();
                }
                since = Instant::now();
                continue;
            }
            spins = spins.wrapping_add(1);
            if spins % 64 == 0 {
                if since.elapsed() >= LINGER {
                    return;
                }
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    }
}

/// Runs `f` on every item of `items`, on the calling thread and the helpers, in contiguous
/// guided chunks (each `1/(2 × threads)` of the items left, so a late or slow thread is
/// balanced by the others). Helpers lingering after an earlier batch take the slots they
/// find open; spawned pool threads take the rest, if any. The caller never waits for a helper
/// that has not started: it runs every chunk nobody claimed. Every item is run even when
/// some fail.
///
/// # Errors
/// The error of the failing item of lowest index, with that index.
///
/// # Panics
/// When `f` panicked on some item (after every other item has run).
pub(crate) fn for_each_mut<T: Send, E: Send>(
    helpers: Helpers<'_>,
    items: &mut [T],
    f: impl Fn(&mut T) -> Result<(), E> + Sync,
) -> Result<(), (usize, E)> {
    let n = items.len();
    let threads = helpers.count().min(n.saturating_sub(1)) + 1;
    if threads == 1 {
        // A batch of one, or no helpers: no pool, no atomics.
        return items
            .iter_mut()
            .enumerate()
            .try_fold((), |(), (i, it)| f(it).map_err(|e| (i, e)));
    }
    let first_err: Mutex<Option<(usize, E)>> = Mutex::new(None);
    let base = items.as_mut_ptr() as usize;
    let run_item = |i: usize| {
        // SAFETY: `i < n`, and each index is claimed by exactly one thread (the atomic
        // `next`), so this is the only reference to item `i`.
        let item = unsafe { &mut *(base as *mut T).add(i) };
        if let Err(e) = f(item) {
            let mut slot = first_err.lock().unwrap_or_else(|p| p.into_inner());
            if slot.as_ref().map_or(true, |(j, _)| i < *j) {
                *slot = Some((i, e));
            }
        }
    };
    let run: &(dyn Fn(usize) + Sync + '_) = &run_item;
    // SAFETY: only the lifetime is erased; see `Shared` for why `run` outlives its uses.
    let run: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(run) };
    let shared = Arc::new(Shared {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        n,
        threads,
        slots: AtomicUsize::new(threads - 1),
        panicked: AtomicBool::new(false),
        run,
        caller: std::thread::current(),
    });
    // Posted for the lingering helpers, and spawned all the same: a helper counted as
    // lingering may be descheduled (a loaded machine), and a spawned job that finds every
    // slot taken returns at once.
    MAILBOX.post(&shared);
    for _ in 1..threads {
        let s = Arc::clone(&shared);
        helpers.spawn(move || {
            if s.claim_slot() {
                s.work();
                drop(s);
                MAILBOX.linger();
            }
        });
    }
    shared.work();
    // The helpers still running hold claimed chunks; wait for those only. A warm chunk is a
    // few microseconds: spin up to `SPIN` (cheaper than a sleep and a wake-up), then sleep
    // until the helper that completes the batch unparks this thread (cold chunks, a
    // descheduled helper on a loaded machine).
    const SPIN: Duration = Duration::from_micros(20);
    let spin_start = Instant::now();
    let mut spins = 0u32;
    while shared.done.load(Ordering::Acquire) < n {
        spins = spins.wrapping_add(1);
        if spins % 64 != 0 || spin_start.elapsed() < SPIN {
            std::hint::spin_loop();
        } else {
            // `park` may return spuriously (or for an earlier unpark): the loop checks again.
            std::thread::park();
        }
    }
    MAILBOX.withdraw(&shared);
    if shared.panicked.load(Ordering::Relaxed) {
        panic!("a fill of the batch panicked");
    }
    match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    /// Every item is run exactly once, whatever the helpers and the batch size.
    #[test]
    fn every_item_once() {
        let p = pool(3);
        for helpers in [Helpers::None, Helpers::Current, Helpers::Pool(&p)] {
            for n in [0, 1, 2, 7, 64, 1000] {
                let mut items = vec![0u32; n];
                for_each_mut(helpers, &mut items, |x| {
                    *x += 1;
                    Ok::<_, ()>(())
                })
                .unwrap();
                assert!(items.iter().all(|&x| x == 1), "n = {n}");
            }
        }
    }

    /// The failure of lowest index is returned, and the other items are still run.
    #[test]
    fn lowest_failing_index_and_the_rest_run() {
        let p = pool(2);
        let mut items: Vec<(usize, bool)> = (0..200).map(|i| (i, false)).collect();
        let err = for_each_mut(Helpers::Pool(&p), &mut items, |(i, seen)| {
            *seen = true;
            if *i % 50 == 37 {
                Err(format!("item {i}"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert_eq!(err, (37, "item 37".to_string()));
        assert!(items.iter().all(|&(_, seen)| seen));
    }

    /// Both the caller and a pool thread take part in a batch of slow items.
    #[test]
    fn the_caller_and_the_pool_both_work() {
        let p = pool(1);
        let caller = std::thread::current().id();
        let mut items = vec![None; 32];
        for_each_mut(Helpers::Pool(&p), &mut items, |x| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            *x = Some(std::thread::current().id());
            Ok::<_, ()>(())
        })
        .unwrap();
        let by_caller = items.iter().filter(|t| **t == Some(caller)).count();
        assert!(
            by_caller > 0 && by_caller < 32,
            "caller ran {by_caller} of 32"
        );
    }

    /// Guided chunks: large first, single items at the end, covering the batch once.
    #[test]
    fn guided_chunks_shrink_to_single_items() {
        let noop: &'static (dyn Fn(usize) + Sync) = &|_: usize| {};
        let shared = Shared {
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            n: 100,
            threads: 2,
            slots: AtomicUsize::new(1),
            panicked: AtomicBool::new(false),
            run: noop,
            caller: std::thread::current(),
        };
        let chunks: Vec<(usize, usize)> = std::iter::from_fn(|| shared.claim_chunk()).collect();
        assert_eq!(&chunks[..3], &[(0, 25), (25, 43), (43, 57)]);
        assert_eq!(chunks.last(), Some(&(99, 100)));
        assert!(chunks.windows(2).all(|w| w[0].1 == w[1].0));
    }

    /// A helper that finished a batch takes part in the next one posted at once, even when
    /// the next batch's own pool cannot give a thread (its only thread is blocked): it
    /// lingers for the post instead of going back to its pool. Tried a few times: on a
    /// loaded machine the lingering helper may be descheduled past `LINGER` once.
    #[test]
    fn a_lingering_helper_takes_the_next_batch() {
        let (busy, blocker) = (pool(1), std::sync::mpsc::channel::<()>());
        let (release, wait) = blocker;
        let wait = Mutex::new(wait);
        busy.spawn(move || {
            let _ = wait.lock().unwrap().recv();
        });
        let first = pool(1);
        let caller = std::thread::current().id();
        let slow = |x: &mut Option<std::thread::ThreadId>| {
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            }
            *x = Some(std::thread::current().id());
            Ok::<_, ()>(())
        };
        let helped = (0..20).any(|_| {
            let mut a = vec![None; 16];
            for_each_mut(Helpers::Pool(&first), &mut a, slow).unwrap();
            let mut b = vec![None; 16];
            for_each_mut(Helpers::Pool(&busy), &mut b, slow).unwrap();
            b.iter().any(|t| *t != Some(caller))
        });
        release.send(()).unwrap();
        assert!(
            helped,
            "no lingering helper joined a batch whose pool was blocked"
        );
    }

    /// A batch runs on at most the threads it asked for, even when more helpers linger
    /// (here three, from a batch of four threads just before).
    #[test]
    fn lingering_helpers_take_only_the_open_slots() {
        let (wide, narrow) = (pool(3), pool(1));
        for _ in 0..10 {
            let mut a = vec![None; 32];
            let mut b = vec![None; 32];
            let slow = |x: &mut Option<std::thread::ThreadId>| {
                std::thread::sleep(Duration::from_micros(300));
                *x = Some(std::thread::current().id());
                Ok::<_, ()>(())
            };
            for_each_mut(Helpers::Pool(&wide), &mut a, slow).unwrap();
            for_each_mut(Helpers::Pool(&narrow), &mut b, slow).unwrap();
            let threads: std::collections::HashSet<_> = b.iter().flatten().collect();
            assert!(
                threads.len() <= 2,
                "{} threads ran a batch of 2",
                threads.len()
            );
            assert!(b.iter().all(Option::is_some));
        }
    }

    /// A panicking item is reported as a panic of the call, after the batch is done.
    #[test]
    fn a_panic_is_raised_by_the_caller() {
        let p = pool(2);
        let mut items: Vec<(usize, bool)> = (0..64).map(|i| (i, false)).collect();
        let r = catch_unwind(AssertUnwindSafe(|| {
            for_each_mut(Helpers::Pool(&p), &mut items, |(i, seen)| {
                assert_ne!(*i, 10, "boom");
                *seen = true;
                Ok::<_, ()>(())
            })
        }));
        assert!(r.is_err());
        // Item 63 is in another chunk than item 10 (the first guided chunk is items 0..10,
        // the last ones are single items): it ran.
        assert!(items[63].1 && !items[10].1);
    }
}
