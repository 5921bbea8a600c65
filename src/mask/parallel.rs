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
//! Waking a parked pool thread takes 15–40 µs on this VM (`examples/threads_probe.rs`,
//! issue 27): longer than a warm batch of 16, whose helper then joins after the caller has
//! done it all. Helpers that spun (yielding) up to 100 µs for the next batch were tried
//! (branch threads27, commit 5ca7b28) and not kept: at load averages of 7 to 13 on the 2
//! cores, neither they nor this plain spawn let the helper fill more than 0.1% of the rows
//! of back-to-back warm batches, so no gain could be shown; a quiet machine is needed.
//!
//! Chunks are guided: each claim takes `1/(2 × threads)` of what is left (at least one
//! item), so a warm batch is claimed in a few large chunks and the last items of a cold
//! batch (masks computed by the fill, milliseconds each) are shared one by one.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    panicked: AtomicBool,
    run: *const (dyn Fn(usize) + Sync + 'static),
    /// Unparked by the helper that completes the batch.
    caller: std::thread::Thread,
}

// SAFETY: `run` is `Sync` and only called under the claim protocol described on `Shared`.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
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

/// Runs `f` on every item of `items`, on the calling thread and the helpers, in contiguous
/// guided chunks (each `1/(2 × threads)` of the items left, so a late or slow thread is
/// balanced by the others). The caller never waits for a helper
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
        panicked: AtomicBool::new(false),
        run,
        caller: std::thread::current(),
    });
    for _ in 1..threads {
        let s = Arc::clone(&shared);
        helpers.spawn(move || s.work());
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
            panicked: AtomicBool::new(false),
            run: noop,
            caller: std::thread::current(),
        };
        let chunks: Vec<(usize, usize)> = std::iter::from_fn(|| shared.claim_chunk()).collect();
        assert_eq!(&chunks[..3], &[(0, 25), (25, 43), (43, 57)]);
        assert_eq!(chunks.last(), Some(&(99, 100)));
        assert!(chunks.windows(2).all(|w| w[0].1 == w[1].0));
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
