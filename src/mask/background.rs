//! The background fill of [`Precompute::Background`](crate::Precompute::Background): after
//! a lazy compile has returned, the masks an eager compile would have computed (one per
//! mask class, the base walks of counted repetitions, the context masks) are computed on a
//! thread pool the caller controls, nearest the root's start first.
//!
//! The fill never blocks a matcher: masks are stored through the same `OnceLock`s a
//! matcher fills on first use, and neither side waits for the other (a matcher that needs
//! a mask the fill has not reached walks it itself; if both walk one mask, the first to
//! finish stores it and both masks are the same). The fill holds only a weak reference
//! between masks, so it stops at the next mask once the last `Arc<CompiledGrammar>` is
//! dropped, or once [`CompiledGrammar::cancel_background`] is called. It also stops,
//! keeping what it has, before the grammar's memory would pass
//! [`Limits::max_memory_bytes`](crate::Limits::max_memory_bytes).

use crate::compiler::CompiledGrammar;
use crate::limits::Deadline;
use rayon::prelude::*;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

/// Where a grammar's background fill stands
/// ([`CompiledGrammar::background_status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackgroundStatus {
    /// No fill was scheduled: the grammar was compiled with [`Precompute::Eager`] or
    /// [`Precompute::Lazy`] (or read back by `CompiledGrammar::deserialize`).
    ///
    /// [`Precompute::Eager`]: crate::Precompute::Eager
    /// [`Precompute::Lazy`]: crate::Precompute::Lazy
    NotScheduled,
    /// Scheduled or running.
    Running,
    /// Every mask an eager compile computes is computed.
    Finished,
    /// Stopped by [`CompiledGrammar::cancel_background`] before it finished.
    Cancelled,
    /// Stopped before the grammar's memory would pass
    /// [`Limits::max_memory_bytes`](crate::Limits::max_memory_bytes); the masks computed
    /// so far are kept, the rest are computed on first use.
    MemoryLimit,
    /// Stopped once its mask walks had taken
    /// [`Limits::compile_time`](crate::Limits::compile_time) (wall-clock time from each
    /// walk's start to its end, not the waits for a free core between walks; looked at
    /// between walks), the budget an eager compile has:
    /// a grammar whose masks would take longer does not hold the background thread from
    /// other grammars' fills. The masks computed so far are kept, the rest are computed on
    /// first use.
    TimeLimit,
}

/// A grammar's background fill: its status, and the flag that cancels it.
#[derive(Debug)]
pub(crate) struct BackgroundFill {
    cancelled: AtomicBool,
    status: Mutex<BackgroundStatus>,
    ended: Condvar,
}

impl Default for BackgroundFill {
    fn default() -> Self {
        BackgroundFill {
            cancelled: AtomicBool::new(false),
            status: Mutex::new(BackgroundStatus::NotScheduled),
            ended: Condvar::new(),
        }
    }
}

impl BackgroundFill {
    /// The current status.
    pub(crate) fn status(&self) -> BackgroundStatus {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks a scheduled fill to stop at its next mask (no effect once it ended).
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    fn set(&self, status: BackgroundStatus) {
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = status;
        self.ended.notify_all();
    }

    /// Blocks until the fill is no longer [`BackgroundStatus::Running`]; returns how it
    /// ended ([`BackgroundStatus::NotScheduled`] at once when none was scheduled).
    pub(crate) fn wait(&self) -> BackgroundStatus {
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        while *s == BackgroundStatus::Running {
            s = self.ended.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        *s
    }
}

/// The pool of compilers given none
/// ([`GrammarCompiler::with_background_pool`](crate::GrammarCompiler::with_background_pool)):
/// one thread, shared by every such compiler, started on first use, at the lowest
/// priority the system offers ([`yield_to_other_threads`]); on a machine of few cores its
/// fills also wait for foreground calls ([`default_gate`]). `None` when the thread could
/// not be started (the grammars then stay lazy).
pub(crate) fn default_pool() -> Option<Arc<rayon::ThreadPool>> {
    static POOL: OnceLock<Option<Arc<rayon::ThreadPool>>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|i| format!("tokensieve-background-{i}"))
            .start_handler(|_| yield_to_other_threads())
            .build()
            .ok()
            .map(Arc::new)
    })
    .clone()
}

/// Lowers the calling thread below every ordinary thread: on Linux, the `SCHED_IDLE`
/// policy (sched(7)), under which it runs mostly on a core no other thread wants (a
/// matcher never waits for the fill: it walks a missing mask itself). Not always: the
/// kernel still lends such a thread a slice now and then, hence [`ForegroundCall`].
/// Elsewhere, nothing.
fn yield_to_other_threads() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid `sched_param` for the call's duration; pid 0 is the
        // calling thread. Lowering needs no privilege; on failure the thread keeps its
        // priority, which is only slower, never wrong.
        let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    }
}

/// Foreground calls in progress in the process (matcher steps and compiles, each thread's
/// outermost call once), counted while [`COUNTING`] is set.
static FOREGROUND: AtomicUsize = AtomicUsize::new(0);

/// Set once some fill may wait for foreground calls ([`default_gate`]); until then a
/// foreground call costs one relaxed load.
static COUNTING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Nesting depth of this thread's foreground calls, and whether the outermost counted.
    static DEPTH: Cell<(u32, bool)> = const { Cell::new((0, false)) };
}

/// Most cores on which the default pool's fill waits for foreground calls: on more, some
/// core is free often enough, and counting would cost every step an atomic that all
/// decoding threads share.
const MAX_GATED_CORES: usize = 2;

/// How long a fill that waits for foreground calls sleeps between looks at them.
const GATE_POLL: Duration = Duration::from_millis(1);

/// A foreground call in progress (a matcher step or a compile), for the time the value
/// lives: a fill scheduled with a gate of `k` cores starts no mask while `k` or more are
/// in progress. Why: `SCHED_IDLE` lowers the fill's thread, but on a core shared with a
/// decoding loop the kernel still gives it a time slice now and then (Linux's EEVDF
/// scheduler gives an idle-policy task that has just woken a slice of a few milliseconds
/// within one slice of the loop's), which stalled a step by 4 ms under `taskset -c 1`.
pub(crate) struct ForegroundCall(());

impl ForegroundCall {
    /// Marks this thread as in a foreground call until the value is dropped (nested calls
    /// count once).
    pub(crate) fn enter() -> Self {
        DEPTH.with(|d| {
            let (depth, counted) = d.get();
            if depth == 0 {
                let count = COUNTING.load(Ordering::Relaxed);
                if count {
                    FOREGROUND.fetch_add(1, Ordering::Relaxed);
                }
                d.set((1, count));
            } else {
                d.set((depth + 1, counted));
            }
        });
        ForegroundCall(())
    }
}

impl Drop for ForegroundCall {
    fn drop(&mut self) {
        DEPTH.with(|d| {
            let (depth, counted) = d.get();
            if depth == 1 && counted {
                FOREGROUND.fetch_sub(1, Ordering::Relaxed);
            }
            d.set((
                depth.saturating_sub(1),
                if depth == 1 { false } else { counted },
            ));
        });
    }
}

/// The gate of fills on the default pool: the cores this process may run on
/// (`available_parallelism`, which follows the CPU affinity mask and cgroup quota) when
/// they are at most [`MAX_GATED_CORES`], else none. Turns counting on when it gates.
pub(crate) fn default_gate() -> Option<usize> {
    static GATE: OnceLock<Option<usize>> = OnceLock::new();
    *GATE.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores <= MAX_GATED_CORES).then(|| {
            COUNTING.store(true, Ordering::Relaxed);
            cores
        })
    })
}

/// Waits while `cores` or more foreground calls are in progress, or until the grammar is
/// dropped or its fill cancelled (which the fill's next look reports).
fn wait_for_a_free_core(weak: &Weak<CompiledGrammar>, cores: usize) {
    while FOREGROUND.load(Ordering::Relaxed) >= cores {
        match weak.upgrade() {
            Some(g) if !g.background_fill.is_cancelled() => {}
            _ => return,
        }
        std::thread::sleep(GATE_POLL);
    }
}

/// Masks per look at the weak reference and the cancel flag.
const CHUNK: usize = 8;

/// Schedules `grammar`'s fill on `pool`, which starts no mask while `gate` or more
/// foreground calls are in progress (`None`: it never waits). Returns at once.
pub(crate) fn schedule(
    grammar: &Arc<CompiledGrammar>,
    pool: &rayon::ThreadPool,
    gate: Option<usize>,
) {
    grammar.background_fill.set(BackgroundStatus::Running);
    let weak = Arc::downgrade(grammar);
    pool.spawn(move || {
        let end = fill(&weak, gate);
        if let Some(g) = weak.upgrade() {
            g.background_fill.set(end);
        }
    });
}

/// Why a phase of the fill stopped early.
enum Stop {
    /// The grammar was dropped (nobody is left to tell).
    Dropped,
    /// Cancelled, or out of memory or time budget: the status to report.
    Status(BackgroundStatus),
}

/// Time the fill's walks have taken (`spent`, nanoseconds) and may take (`budget`; `None`:
/// no bound). Looked at between walks: a walk itself runs unbounded, as a matcher's would
/// (a bounded walk that ran out of time would make the grammar refuse every later bounded
/// walk, `CompiledGrammar::walked`, and the fill must not do that to the matchers).
/// The time is wall-clock time from each walk's start to its end (a walk preempted by
/// other threads counts its wait; the waits for a free core between walks do not).
struct WalkTime {
    spent: AtomicU64,
    budget: Option<Duration>,
}

impl WalkTime {
    /// True once the walks have taken the budget.
    fn spent(&self) -> bool {
        self.budget
            .is_some_and(|b| Duration::from_nanos(self.spent.load(Ordering::Relaxed)) >= b)
    }
}

/// Runs `work` on every item, `CHUNK` at a time, upgrading the weak reference and looking
/// at the cancel flag before each chunk, and waiting at `gate` before each item; `work`
/// returns the bytes it added to the grammar. Stops at the memory limit and once `time`
/// is spent.
fn phase<T: Sync + Copy>(
    weak: &Weak<CompiledGrammar>,
    gate: Option<usize>,
    items: &[T],
    used: &AtomicU64,
    limit: u64,
    time: &WalkTime,
    work: impl Fn(&CompiledGrammar, T) -> usize + Sync,
) -> Result<(), Stop> {
    items.par_chunks(CHUNK).try_for_each(|chunk| {
        let mut g = weak.upgrade().ok_or(Stop::Dropped)?;
        for &item in chunk {
            if let Some(cores) = gate.filter(|&c| FOREGROUND.load(Ordering::Relaxed) >= c) {
                // Wait without holding the grammar, so that dropping it ends the fill.
                drop(g);
                wait_for_a_free_core(weak, cores);
                g = weak.upgrade().ok_or(Stop::Dropped)?;
            }
            if g.background_fill.is_cancelled() {
                return Err(Stop::Status(BackgroundStatus::Cancelled));
            }
            if used.load(Ordering::Relaxed) > limit {
                return Err(Stop::Status(BackgroundStatus::MemoryLimit));
            }
            if time.spent() {
                return Err(Stop::Status(BackgroundStatus::TimeLimit));
            }
            let start = std::time::Instant::now();
            used.fetch_add(work(&g, item) as u64, Ordering::Relaxed);
            let took = start.elapsed().as_nanos().min(u64::MAX as u128) as u64;
            time.spent.fetch_add(took, Ordering::Relaxed);
        }
        Ok(())
    })
}

/// The fill itself: node masks (one per mask class, nearest the root first), then the
/// base walks of counted repetitions, then the context masks, as an eager compile does.
fn fill(weak: &Weak<CompiledGrammar>, gate: Option<usize>) -> BackgroundStatus {
    let run = || -> Result<(), Stop> {
        let (nodes, limit, used, time) = {
            let g = weak.upgrade().ok_or(Stop::Dropped)?;
            // Stop before the next mask could pass the limit: leave room for one bitset.
            let room = g.vocabulary().bitmask_words() as u64 * 4;
            let limit = g.max_memory_bytes.saturating_sub(room);
            (
                g.fill_order(),
                limit,
                AtomicU64::new(g.memory_bytes() as u64),
                WalkTime {
                    spent: AtomicU64::new(0),
                    budget: g.lazy_budget,
                },
            )
        };
        let never = Deadline::never();
        phase(weak, gate, &nodes, &used, limit, &time, |g, n| {
            g.precompute_node_mask(n, &never).unwrap_or(0)
        })?;
        let bases = weak.upgrade().ok_or(Stop::Dropped)?.counted_base_states();
        phase(weak, gate, &bases, &used, limit, &time, |g, (k, s)| {
            g.precompute_counted_base(k, s, &never).unwrap_or(0)
        })?;
        let pairs = weak.upgrade().ok_or(Stop::Dropped)?.context_pairs();
        phase(weak, gate, &pairs, &used, limit, &time, |g, (n, m)| {
            g.precompute_pair_mask(n, m, &never).unwrap_or(0)
        })?;
        Ok(())
    };
    match run() {
        Ok(()) => {
            if let Some(g) = weak.upgrade() {
                g.fill_finished();
            }
            BackgroundStatus::Finished
        }
        Err(Stop::Dropped) => BackgroundStatus::Cancelled,
        Err(Stop::Status(s)) => s,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::mask::cache::{or_token_set, NodeMask};
    use crate::{GrammarCompiler, Precompute, Vocabulary};
    use serde_json::Value;
    use std::io::BufRead;
    use std::path::PathBuf;
    use std::sync::mpsc;

    /// The default pool's thread yields its core to every ordinary thread (Linux's
    /// `SCHED_IDLE`), and only it.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_default_pool_runs_at_idle_priority() {
        let pool = default_pool().expect("the default pool starts");
        // SAFETY: `sched_getscheduler(0)` reads the calling thread's policy; no memory is
        // passed.
        let policy = pool.install(|| unsafe { libc::sched_getscheduler(0) });
        assert_eq!(policy, libc::SCHED_IDLE);
        // SAFETY: as above, on the test's own thread.
        let here = unsafe { libc::sched_getscheduler(0) };
        assert_eq!(here, libc::SCHED_OTHER, "only the pool's thread is lowered");
    }

    fn shared() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared")
    }

    /// The Llama 3.1 vocabulary of `../shared` (`None` when missing, outside CI).
    pub(crate) fn llama() -> Option<Arc<Vocabulary>> {
        let path = shared().join("tokenizers/llama3_1/tokenizer.json");
        if !path.is_file() {
            assert!(std::env::var("CI").is_err(), "missing {}", path.display());
            return None;
        }
        Some(Arc::new(Vocabulary::from_tokenizer_json(path).unwrap()))
    }

    /// The schemas of the first `n` records of a MaskBench collection.
    fn maskbench(collection: &str, n: usize) -> Vec<Value> {
        let path = shared()
            .join("testdata/jsonschemabench")
            .join(collection)
            .join(format!("{collection}.jsonl.gz"));
        let file = std::fs::File::open(path).expect("MaskBench collection");
        std::io::BufReader::new(flate2::read::GzDecoder::new(file))
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
            .map(|r| r["schema"].clone())
            .take(n)
            .collect()
    }

    /// A mask's accepted tokens as a bitset, and its uncertain trie positions.
    fn bits(g: &CompiledGrammar, m: &NodeMask) -> (Vec<u32>, Vec<u32>) {
        let mut out = vec![0u32; g.vocab.bitmask_words()];
        let mut blank = true;
        or_token_set(
            &mut out,
            &mut blank,
            &m.accepted,
            &g.text_bits,
            &g.trie.sorted,
            &mut Vec::new(),
        );
        (out, m.uncertain.clone())
    }

    /// Waits for `bg`'s fill, checks that it computed every class, then compares every
    /// node mask and every context mask of `bg` with those of `eager` (the same grammar).
    fn assert_same_masks(what: &str, bg: &CompiledGrammar, eager: &CompiledGrammar) {
        assert_eq!(bg.wait_background(), BackgroundStatus::Finished, "{what}");
        assert_eq!(eager.background_status(), BackgroundStatus::NotScheduled);
        assert_eq!(
            bg.aut.nodes.len(),
            eager.aut.nodes.len(),
            "{what}: node count"
        );
        for n in bg.fill_order() {
            assert!(bg.mask_known(n), "{what}: node {n} not filled");
        }
        for n in 0..bg.aut.nodes.len() as u32 {
            let a = bg.node_mask(n).map(|m| bits(bg, &m));
            let b = eager.node_mask(n).map(|m| bits(eager, &m));
            assert!(a == b, "{what}: node {n}: masks differ");
        }
        let pairs = eager.context_pairs();
        assert_eq!(bg.context_pairs(), pairs, "{what}: context pairs");
        for (n, caller) in pairs {
            let a = bg.pair_mask(n, caller).map(|m| bits(bg, &m));
            let b = eager.pair_mask(n, caller).map(|m| bits(eager, &m));
            assert!(
                a == b,
                "{what}: node {n} from {caller}: context masks differ"
            );
        }
    }

    /// The background fill's masks equal eager masks on every node of a sample of
    /// MaskBench grammars and of a Hermes tool tag over BFCL tools (Llama 3.1).
    #[test]
    fn background_masks_equal_eager_masks() {
        let Some(vocab) = llama() else { return };
        // Separate compilers: masks shared across grammars must not make them agree. Tags
        // whole, so that every node of the tools' arguments is compared.
        let bg = GrammarCompiler::new(vocab.clone())
            .with_precompute(Precompute::Background)
            .with_deferred_tool_rules(false);
        let eager = GrammarCompiler::new(vocab)
            .with_precompute(Precompute::Eager)
            .with_deferred_tool_rules(false);
        let mut schemas = Vec::new();
        for (c, n) in [("Github_easy", 4), ("Glaiveai2K", 3), ("Kubernetes", 1)] {
            schemas.extend(maskbench(c, n).into_iter().map(|s| (c, s)));
        }
        let options = crate::JsonSchemaOptions::default();
        let mut compared = 0;
        for (i, (c, schema)) in schemas.iter().enumerate() {
            let (Ok(a), Ok(b)) = (
                bg.compile_json_schema(schema, &options),
                eager.compile_json_schema(schema, &options),
            ) else {
                continue;
            };
            assert_same_masks(&format!("{c} #{i}"), &a, &b);
            compared += 1;
        }
        assert!(compared >= 6, "only {compared} schemas compiled");
        // Five BFCL functions' parameters (MaskBench's JSON Schema form of them).
        let tools: Vec<(String, Value)> = maskbench("BFCL_multiple", 5)
            .into_iter()
            .enumerate()
            .map(|(i, s)| (format!("f{i}"), s))
            .collect();
        assert_eq!(tools.len(), 5);
        let tag = crate::structural_tag::hermes_like_tag(&tools, false);
        let a = bg.compile_structural_tag(&tag).unwrap();
        let b = eager.compile_structural_tag(&tag).unwrap();
        assert_same_masks("Hermes-style tag over 5 BFCL tools", &a, &b);
    }

    /// A grammar holds one copy of each large mask, however many of its mask classes have
    /// it (nodes that are not bisimilar often accept the same tokens: the states of an
    /// enum's values, of a pattern's repeated groups), under the fill and under an eager
    /// compile, and its memory counts that copy once.
    #[test]
    fn a_grammar_holds_each_large_mask_once() {
        let Some(vocab) = llama() else { return };
        let options = crate::JsonSchemaOptions::default();
        let schemas = maskbench("Github_medium", 12);
        let mut shared = 0;
        for precompute in [Precompute::Background, Precompute::Eager] {
            let compiler = GrammarCompiler::new(vocab.clone()).with_precompute(precompute);
            for (i, schema) in schemas.iter().enumerate() {
                let Ok(g) = compiler.compile_json_schema(schema, &options) else {
                    continue;
                };
                g.wait_background();
                let mut by_content: Vec<&Arc<NodeMask>> = Vec::new();
                let mut distinct = rustc_hash::FxHashMap::default();
                let mut large = 0;
                for m in g.masks.iter().filter_map(|m| m.get()) {
                    distinct.insert(Arc::as_ptr(m), m.memory_bytes());
                    if m.memory_bytes() < crate::mask::intern::MIN_BYTES {
                        continue;
                    }
                    large += 1;
                    match by_content.iter().find(|o| ****o == **m) {
                        Some(o) => assert!(
                            Arc::ptr_eq(o, m),
                            "{precompute:?} Github_medium #{i}: two copies of one mask"
                        ),
                        None => by_content.push(m),
                    }
                }
                // Classes holding a large mask another class holds too.
                shared += large - by_content.len();
                let slots =
                    g.masks.len() * std::mem::size_of::<std::sync::OnceLock<Arc<NodeMask>>>();
                assert_eq!(
                    g.node_mask_bytes(),
                    slots + distinct.values().sum::<usize>(),
                    "{precompute:?} Github_medium #{i}: memory counts each copy once"
                );
            }
        }
        assert!(
            shared > 100,
            "only {shared} classes share a large mask's copy"
        );
    }

    /// The default precompute is the background fill: a compiler given no choice compiles
    /// lazily, schedules the fill, and ends with the masks of an eager compile.
    #[test]
    fn the_default_precompute_fills_in_the_background() {
        assert_eq!(Precompute::default(), Precompute::Background);
        let Some(vocab) = llama() else { return };
        let default = GrammarCompiler::new(vocab.clone());
        let eager = GrammarCompiler::new(vocab).with_precompute(Precompute::Eager);
        let options = crate::JsonSchemaOptions::default();
        let schema = &maskbench("Github_easy", 1)[0];
        let a = default.compile_json_schema(schema, &options).unwrap();
        assert_ne!(a.background_status(), BackgroundStatus::NotScheduled);
        let b = eager.compile_json_schema(schema, &options).unwrap();
        assert_same_masks("Github_easy 0 under the default precompute", &a, &b);
    }

    /// A pool whose only thread is held until the returned sender is dropped.
    fn blocked_pool() -> (Arc<rayon::ThreadPool>, mpsc::Sender<()>) {
        let pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap(),
        );
        let (tx, rx) = mpsc::channel::<()>();
        pool.spawn(move || {
            let _ = rx.recv();
        });
        (pool, tx)
    }

    /// A small object schema with a string and an integer property.
    fn small_schema() -> Value {
        serde_json::json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            "required": ["a"]
        })
    }

    /// A fill gated at one core starts no mask while a foreground call is in progress
    /// (a matcher step or a compile on a thread sharing its core), and finishes once none
    /// is; nested calls count once.
    #[test]
    fn a_gated_fill_waits_for_foreground_calls() {
        let Some(vocab) = llama() else { return };
        let schema = small_schema();
        let compiler = GrammarCompiler::new(vocab)
            .with_precompute(Precompute::Lazy)
            .with_cache_enabled(false);
        let g = compiler
            .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
            .unwrap();
        let order = g.fill_order();
        assert!(order.len() > 2, "{order:?}");
        assert!(
            order.iter().all(|&n| !g.mask_known(n)),
            "lazy: nothing computed"
        );
        COUNTING.store(true, Ordering::Relaxed);
        // This thread's depth (other tests' threads move the process-wide count): only
        // the outermost call counts, and it is counted once counting is on.
        let here = || DEPTH.with(|d| d.get());
        assert_eq!(here(), (0, false));
        let call = ForegroundCall::enter();
        assert_eq!(here(), (1, true));
        assert!(FOREGROUND.load(Ordering::Relaxed) >= 1);
        let nested = ForegroundCall::enter();
        assert_eq!(here(), (2, true), "nested calls count once");
        drop(nested);
        assert_eq!(here(), (1, true));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        schedule(&g, &pool, Some(1));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(g.background_status(), BackgroundStatus::Running);
        assert!(
            order.iter().all(|&n| !g.mask_known(n)),
            "a mask was computed during a foreground call"
        );
        drop(call);
        assert_eq!(here(), (0, false));
        assert_eq!(g.wait_background(), BackgroundStatus::Finished);
        assert!(order.iter().all(|&n| g.mask_known(n)));
        // A gated fill whose grammar is cancelled while it waits ends as cancelled.
        let h = compiler
            .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
            .unwrap();
        let call = ForegroundCall::enter();
        schedule(&h, &pool, Some(1));
        h.cancel_background();
        assert_eq!(h.wait_background(), BackgroundStatus::Cancelled);
        drop(call);
    }

    /// A caller that needs a mask (a matcher, on first use) never waits for the fill;
    /// cancelling stops it; dropping the last `Arc` frees the grammar even while its fill
    /// is queued.
    #[test]
    fn the_fill_never_blocks_and_stops_on_cancel_or_drop() {
        let Some(vocab) = llama() else { return };
        let schema = small_schema();
        let options = crate::JsonSchemaOptions::default();
        let (pool, release) = blocked_pool();
        // Without the whole-grammar cache: each compile below is a new grammar.
        let compiler = GrammarCompiler::new(vocab)
            .with_precompute(Precompute::Background)
            .with_background_pool(pool.clone())
            .with_cache_enabled(false);
        let g = compiler.compile_json_schema(&schema, &options).unwrap();
        assert_eq!(g.background_status(), BackgroundStatus::Running);
        // The pool is busy: the caller computes the masks it needs itself (the first
        // steps' masks, in the order the fill would have computed them).
        let first: Vec<u32> = g.fill_order().into_iter().take(16).collect();
        assert!(first.len() > 1, "{first:?}");
        for &n in &first {
            assert!(g.node_mask(n).is_some(), "node {n}");
            assert!(g.mask_known(n), "node {n}");
        }
        assert_eq!(g.background_status(), BackgroundStatus::Running);
        g.cancel_background();
        let dropped = compiler.compile_json_schema(&schema, &options).unwrap();
        let weak = Arc::downgrade(&dropped);
        drop(dropped);
        assert!(
            weak.upgrade().is_none(),
            "the queued fill keeps the grammar alive"
        );
        drop(release);
        assert_eq!(g.wait_background(), BackgroundStatus::Cancelled);
        // A fill that runs to its end.
        let done = compiler.compile_json_schema(&schema, &options).unwrap();
        assert_eq!(done.wait_background(), BackgroundStatus::Finished);
    }
}
