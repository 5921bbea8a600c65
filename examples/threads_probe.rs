//! Who fills the rows of back-to-back warm batch fills, and when the helper joins (issue 27).
//!
//! Each "matcher" copies a cached row of a 128,256-token vocabulary (16 KB: what a warm fill
//! does) and records its thread and the time. For gaps of 0, 20, 100 and 1000 µs between
//! batches (a busy wait standing for the caller's own work), a batch of N (default 16) is
//! filled 2,000 times by the caller alone and by the caller and a pool of one helper; prints
//! the time per batch, the share of rows the helper filled, in how many batches it took
//! part, and the median time from the call to its first row.
//!
//! ```text
//! taskset -c 0,1 cargo run --release --example threads_probe -- 16
//! ```
use std::time::{Duration, Instant};
use tokensieve::mask::{batch_fill_next_token_bitmask_with, FillNextTokenBitmask};

/// A warm matcher: its mask is `cached`; it notes who filled it and when.
struct Fake {
    cached: Vec<u32>,
    by_caller: bool,
    at: Option<Instant>,
    caller: std::thread::ThreadId,
}

impl FillNextTokenBitmask for Fake {
    type Error = std::fmt::Error;
    fn bitmask_words(&self) -> usize {
        self.cached.len()
    }
    fn fill_next_token_bitmask(&mut self, row: &mut [u32]) -> Result<(), Self::Error> {
        row.copy_from_slice(&self.cached);
        self.by_caller = std::thread::current().id() == self.caller;
        self.at = Some(Instant::now());
        Ok(())
    }
}

fn main() {
    let words = 128_256usize.div_ceil(32);
    let n: usize = std::env::args().nth(1).map_or(16, |s| s.parse().unwrap());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let caller = std::thread::current().id();
    let mut ms: Vec<Fake> = (0..n)
        .map(|i| Fake {
            cached: vec![i as u32; words],
            by_caller: false,
            at: None,
            caller,
        })
        .collect();
    let mut bitmask = vec![0u32; n * words];
    for gap_us in [0u64, 20, 100, 1000] {
        for helpers in [None, Some(&pool)] {
            let steps = 2000;
            let mut helper_rows = 0usize;
            let mut helper_first = Vec::new();
            let mut total = Duration::ZERO;
            for _ in 0..steps {
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_micros(gap_us) {
                    std::hint::spin_loop();
                }
                let start = Instant::now();
                batch_fill_next_token_bitmask_with(
                    helpers,
                    ms.iter_mut().enumerate().map(|(i, m)| (m, i)),
                    &mut bitmask,
                )
                .unwrap();
                total += start.elapsed();
                let h: Vec<_> = ms.iter().filter(|m| !m.by_caller).collect();
                helper_rows += h.len();
                if let Some(f) = h.iter().filter_map(|m| m.at).min() {
                    helper_first.push(f.duration_since(start).as_nanos() as f64 / 1e3);
                }
            }
            helper_first.sort_by(f64::total_cmp);
            let med = helper_first
                .get(helper_first.len() / 2)
                .copied()
                .unwrap_or(f64::NAN);
            println!(
                "n {n} gap {gap_us:>4} us threads {}: {:.2} us/batch, helper rows {:.1}%, helper joined in {}/{} batches, median first helper row at {med:.1} us",
                1 + helpers.map_or(0, |p| p.current_num_threads()),
                total.as_secs_f64() * 1e6 / steps as f64,
                100.0 * helper_rows as f64 / (steps * n) as f64,
                helper_first.len(),
                steps
            );
        }
    }
}
