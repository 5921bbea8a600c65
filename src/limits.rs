//! Resource limits for compiling grammars from untrusted input.
//!
//! A server that compiles schemas and grammars sent by anyone must turn a hostile input
//! into an error, fast, instead of a stack overflow, an exhausted memory or a compile that
//! never ends. [`Limits`] gathers every bound the compiler enforces; a
//! [`GrammarCompiler`](crate::GrammarCompiler) holds one
//! ([`GrammarCompiler::with_limits`](crate::GrammarCompiler::with_limits)), and exceeding
//! any of them is a [`LimitExceeded`] error naming the limit, its value and the input's
//! value.
//!
//! The defaults ([`Limits::default`]) are generous: every schema of the shared MaskBench /
//! JSONSchemaBench corpora compiles within them, as do grammars such as
//! `[a-z]{2,20000}` or a string of `maxLength: 524288`.

use std::fmt;
use std::time::{Duration, Instant};

/// Bounds on what one compile may take (see the [module documentation](self)).
///
/// Every field is public; build one with struct-update syntax:
///
/// ```
/// use std::time::Duration;
/// use tokensieve::Limits;
///
/// let strict = Limits {
///     compile_time: Some(Duration::from_millis(500)),
///     max_automaton_nodes: 50_000,
///     ..Limits::default()
/// };
/// assert_eq!(strict.max_rule_states, Limits::default().max_rule_states);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest grammar IR, in expression nodes summed over all rules, a literal of `n` bytes
    /// counting `n` (it becomes `n` automaton states). Checked before anything else is
    /// built. Default 2,000,000.
    pub max_ir_nodes: u64,
    /// Deepest expression nesting in one rule (a leaf is depth 1). Values above
    /// [`Grammar::MAX_DEPTH`](crate::Grammar::MAX_DEPTH) (1,000), the hard limit of the IR,
    /// act as that limit. Default 1,000.
    pub max_nesting_depth: usize,
    /// Largest repetition bound `{m,n}` written in the input (the larger of `m` and `n`).
    /// Large bounds are lowered compactly, so the cost grows with the logarithm of the
    /// bound, not the bound; the limit guards against bounds that are only a typing
    /// accident. Directly nested repetitions that the compiler merges into one
    /// (`([a-z]{0,1001}){0,1000}` is `[a-z]{0,1001000}`) are not held to it, only to what a
    /// repetition's counter holds (`u32::MAX / 2`,
    /// [`AutomatonError::RepeatTooLarge`](crate::AutomatonError::RepeatTooLarge)).
    /// Default 1,000,000 (as the EBNF parser's own bound; JSON Schema `maxLength: 524288`
    /// fits).
    pub max_repeat_bound: u32,
    /// Most automaton states of one rule (after subset construction, or of its ε-free NFA
    /// when the DFA would be exponential). Default 500,000: the largest MaskBench schema
    /// (`Github_ultra` o43012, a union of many object shapes) needs one rule of about
    /// 350,000 states.
    pub max_rule_states: usize,
    /// Most automaton nodes over all rules (the real nodes that get a token mask each;
    /// virtual nodes of counted repetitions share masks and are not counted). Default
    /// 4,000,000 (MaskBench's `JsonSchemaStore---detekt-1.22.0` needs about 1,000,000 with
    /// properties in declared order).
    pub max_automaton_nodes: usize,
    /// Most heap memory of one compiled grammar, in bytes, as
    /// [`CompiledGrammar::memory_bytes`](crate::CompiledGrammar::memory_bytes) reports it:
    /// checked on the working memory of each rule's automaton construction (its stored
    /// state sets, or the edges of its ε-free automaton: `[a-z]?` written 300,000 times
    /// needs about as many squared), on the automata before masks are computed, and on the
    /// whole grammar after
    /// [`Precompute::Eager`](crate::Precompute::Eager) has computed them (masks computed
    /// later, under [`Precompute::Lazy`](crate::Precompute::Lazy), are not bounded; the
    /// fill of [`Precompute::Background`](crate::Precompute::Background) stops before
    /// passing it, without an error, and matchers compute the rest on first use).
    /// Default 4 GiB.
    pub max_memory_bytes: u64,
    /// Wall-clock budget of one compile from grammar IR to its precomputed masks, or `None`
    /// for none. Checked cooperatively (a clock read, never a thread kill) between rules and
    /// states of the automaton construction, every round of the mask-class refinement and
    /// every 1,024 trie nodes of each mask walk, so a compile stops soon after the deadline
    /// (the linear passes between those checks take well under a second on inputs within
    /// the size limits). The front ends' own work (schema or grammar text → IR) is not
    /// timed: it is linear or near-linear in the input, which the size limits bound.
    /// Default 20 seconds: about eight times the slowest shared MaskBench schema's eager
    /// compile with the Llama 3.1 vocabulary (2.4 s). Ambiguous grammars (such as
    /// `([a-z]{0,1000} "x"?){0,1000}`, 5 s with o200k) and very long literals (a 40 KB
    /// string literal, 4 s) approach it; a server that compiles requests from anyone may
    /// want a tighter one. A mask computed after the compile, during a matcher call (under
    /// [`Precompute::Lazy`](crate::Precompute::Lazy) or before the background fill of
    /// [`Precompute::Background`](crate::Precompute::Background) reached it, and masks of
    /// counted repetitions), gets the same budget per call, from its walk's first look at
    /// the clock (the background fill's walks run unbounded one by one, and the fill stops
    /// with `BackgroundStatus::TimeLimit` once they have taken this budget in all); past it the
    /// call fails with [`MatcherError::Limit`](crate::MatcherError::Limit). The matcher's
    /// own Earley work is bounded by [`Limits::max_step_items`], not by time.
    pub compile_time: Option<Duration>,
    /// Deepest nesting of JSON Schema subschemas (checked on the document before
    /// compiling) and longest chain of `$ref`s followed while compiling, for front ends
    /// that honour it. Default 200 (the JSON Schema compiler also stops at 200 nested
    /// compilations whatever this says).
    pub max_schema_depth: usize,
    /// Most values of one JSON Schema `enum`, for front ends that honour it. Default
    /// 200,000 (a 100,000-value enum of short values fits; each value's bytes also count
    /// towards [`Limits::max_ir_nodes`], so 100,000 values of 23 characters do not).
    pub max_enum_values: usize,
    /// Most Earley work one matcher call may spend: one
    /// [`fill_next_token_bitmask`](crate::GrammarMatcher::fill_next_token_bitmask),
    /// [`accept_token`](crate::GrammarMatcher::accept_token) or
    /// [`accept_string`](crate::GrammarMatcher::accept_string), counted in work units (an
    /// Earley item added to a set, or a caller item looked at when a rule completes; a
    /// byte stepped inside one rule's DFA costs one). The compiled grammar keeps the value
    /// its compiler had. Past it the call fails with this limit
    /// ([`MatcherError::Limit`](crate::MatcherError::Limit),
    /// [`TokenRejection::StepLimit`](crate::TokenRejection::StepLimit)) and the matcher's
    /// state is as before the call, like llguidance's per-step "fuel": ambiguous grammars
    /// (`x ::= x x | [a-z] | ""`) need work that grows with the square of the text so far
    /// at every byte, and one mask pushes thousands of bytes. Default 20,000,000: 60–80 ms
    /// of work on the 2-core machine of `docs/benchmarks.md`, and about 360 times the most
    /// any step spent over 1,000 MaskBench schemas' instances with Llama 3.1 (55,095).
    pub max_step_items: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_ir_nodes: 2_000_000,
            max_nesting_depth: 1_000,
            max_repeat_bound: 1_000_000,
            max_rule_states: 500_000,
            max_automaton_nodes: 4_000_000,
            max_memory_bytes: 4 << 30,
            compile_time: Some(Duration::from_secs(20)),
            max_schema_depth: 200,
            max_enum_values: 200_000,
            max_step_items: 20_000_000,
        }
    }
}

impl Limits {
    /// No practical bound: every field at its maximum and no compile-time budget. For
    /// trusted input only. Bounds that are part of a format's syntax or of the IR still
    /// apply: the IR's nesting depth ([`Grammar::MAX_DEPTH`](crate::Grammar::MAX_DEPTH)),
    /// the counter range of one repetition (`u32::MAX / 2`, nested bounds multiplied), the
    /// EBNF parser's [`MAX_REPEAT_BOUND`](crate::grammar::ebnf::MAX_REPEAT_BOUND) and
    /// [`MAX_NESTING_DEPTH`](crate::grammar::ebnf::MAX_NESTING_DEPTH), the JSON Schema
    /// compiler's 200 nested compilations, the regex parser's
    /// nesting limit and the structural-tag reader's
    /// [`MAX_FORMAT_DEPTH`](crate::structural_tag::MAX_FORMAT_DEPTH).
    pub fn unlimited() -> Self {
        Limits {
            max_ir_nodes: u64::MAX,
            max_nesting_depth: usize::MAX,
            max_repeat_bound: u32::MAX,
            max_rule_states: usize::MAX,
            max_automaton_nodes: usize::MAX,
            max_memory_bytes: u64::MAX,
            compile_time: None,
            max_schema_depth: usize::MAX,
            max_enum_values: usize::MAX,
            max_step_items: u64::MAX,
        }
    }
}

/// Which of the [`Limits`] an input exceeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`Limits::max_ir_nodes`].
    IrNodes,
    /// [`Limits::max_nesting_depth`].
    NestingDepth,
    /// [`Limits::max_repeat_bound`].
    RepeatBound,
    /// [`Limits::max_rule_states`].
    RuleStates,
    /// [`Limits::max_automaton_nodes`].
    AutomatonNodes,
    /// [`Limits::max_memory_bytes`].
    MemoryBytes,
    /// [`Limits::compile_time`] (values in milliseconds).
    CompileTime,
    /// [`Limits::max_schema_depth`].
    SchemaDepth,
    /// [`Limits::max_enum_values`].
    EnumValues,
    /// [`Limits::max_step_items`] (a matcher call, not a compile).
    StepItems,
}

impl Limit {
    /// The name of the [`Limits`] field, such as `max_ir_nodes`.
    pub fn field(self) -> &'static str {
        match self {
            Limit::IrNodes => "max_ir_nodes",
            Limit::NestingDepth => "max_nesting_depth",
            Limit::RepeatBound => "max_repeat_bound",
            Limit::RuleStates => "max_rule_states",
            Limit::AutomatonNodes => "max_automaton_nodes",
            Limit::MemoryBytes => "max_memory_bytes",
            Limit::CompileTime => "compile_time",
            Limit::SchemaDepth => "max_schema_depth",
            Limit::EnumValues => "max_enum_values",
            Limit::StepItems => "max_step_items",
        }
    }

    /// What the limit measures, with its unit, for messages.
    fn what(self) -> &'static str {
        match self {
            Limit::IrNodes => "grammar size (IR nodes)",
            Limit::NestingDepth => "expression nesting depth",
            Limit::RepeatBound => "repetition bound",
            Limit::RuleStates => "automaton states of one rule",
            Limit::AutomatonNodes => "automaton nodes",
            Limit::MemoryBytes => "compiled grammar memory (bytes)",
            Limit::CompileTime => "compile time (ms)",
            Limit::SchemaDepth => "schema nesting depth",
            Limit::EnumValues => "enum size (values)",
            Limit::StepItems => "Earley work of one matcher call (items)",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field())
    }
}

/// An input exceeded one of the [`Limits`].
///
/// Displays as, for example, `limit max_automaton_nodes exceeded in rule \`root\`: automaton
/// nodes 1200000 > 1000000 (simplify the grammar or raise Limits::max_automaton_nodes)`; a
/// JSON Schema's limits add the place, as `limit max_rule_states exceeded in rule
/// \`obj_member_4\`, at schema #/properties/a: …`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct LimitExceeded {
    /// The limit.
    pub limit: Limit,
    /// Its value.
    pub value: u64,
    /// The input's value: the measured amount, or, for limits checked while something
    /// grows (states, time), the amount reached when the check stopped it, so at least
    /// `value + 1`.
    pub actual: u64,
    /// The rule where it was exceeded, when one rule is to blame.
    pub rule: Option<String>,
    /// The JSON pointer (RFC 6901, as `#/properties/a`) of the schema place to blame, when
    /// the input was a JSON Schema: the place whose rule exceeded the limit, or the
    /// keyword itself for limits the front end checks (`max_enum_values`,
    /// `max_schema_depth`).
    pub pointer: Option<String>,
}

impl fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "limit {} exceeded", self.limit)?;
        if let Some(rule) = &self.rule {
            write!(f, " in rule `{rule}`")?;
        }
        if let Some(pointer) = &self.pointer {
            let sep = if self.rule.is_some() { "," } else { "" };
            write!(f, "{sep} at schema {pointer}")?;
        }
        write!(
            f,
            ": {} {} > {} (simplify the input or raise Limits::{})",
            self.limit.what(),
            self.actual,
            self.value,
            self.limit.field()
        )
    }
}

impl LimitExceeded {
    /// A new error (crate-internal shorthand).
    pub(crate) fn new(limit: Limit, value: u64, actual: u64, rule: Option<&str>) -> Self {
        LimitExceeded {
            limit,
            value,
            actual,
            rule: rule.map(str::to_string),
            pointer: None,
        }
    }
}

/// A compile's deadline, checked cooperatively.
#[derive(Clone, Debug)]
pub(crate) struct Deadline {
    /// When the clock started: at [`Deadline::start`], or at the first look for
    /// [`Deadline::on_first_look`].
    start: std::sync::OnceLock<Instant>,
    budget: Option<Duration>,
}

impl Deadline {
    /// Starts the clock for `budget` (`None`: never expires).
    pub(crate) fn start(budget: Option<Duration>) -> Self {
        Deadline {
            start: Instant::now().into(),
            budget,
        }
    }

    /// A deadline for `budget` whose clock starts when it is first looked at (no clock
    /// read on paths that never look, such as a matcher step whose masks are all known).
    pub(crate) fn on_first_look(budget: Option<Duration>) -> Self {
        Deadline {
            start: std::sync::OnceLock::new(),
            budget,
        }
    }

    fn elapsed(&self) -> Duration {
        self.start.get_or_init(Instant::now).elapsed()
    }

    /// A deadline that never passes (mask walks outside a compile).
    pub(crate) fn never() -> Self {
        Deadline::start(None)
    }

    /// The error for this deadline having passed (as [`Deadline::error`] with its budget).
    pub(crate) fn exceeded(&self) -> LimitExceeded {
        self.error(self.budget.unwrap_or_default())
    }

    /// True when the deadline has a budget (it can pass).
    pub(crate) fn is_bounded(&self) -> bool {
        self.budget.is_some()
    }

    /// True once the budget is spent.
    pub(crate) fn expired(&self) -> bool {
        self.budget.is_some_and(|b| self.elapsed() > b)
    }

    /// `Err` once the budget is spent.
    pub(crate) fn check(&self) -> Result<(), LimitExceeded> {
        match self.budget {
            Some(b) if self.elapsed() > b => Err(self.error(b)),
            _ => Ok(()),
        }
    }

    /// The error for an expired budget.
    pub(crate) fn error(&self, budget: Duration) -> LimitExceeded {
        LimitExceeded::new(
            Limit::CompileTime,
            budget.as_millis() as u64,
            self.elapsed().as_millis().max(budget.as_millis() + 1) as u64,
            None,
        )
    }

    /// The budget, if any.
    pub(crate) fn budget(&self) -> Option<Duration> {
        self.budget
    }

    /// This deadline with its clock held back by `paused`: time spent waiting for another
    /// compile (a tool build waiting for the stub grammar), which is not this one's work.
    pub(crate) fn paused_for(&self, paused: Duration) -> Deadline {
        let start = std::sync::OnceLock::new();
        if let Some(&s) = self.start.get() {
            let _ = start.set(s.checked_add(paused).unwrap_or(s));
        }
        Deadline {
            start,
            budget: self.budget,
        }
    }
}

/// The IR-level limits (size, nesting depth, repetition bounds), checked one expression at
/// a time during the compile's one walk of the IR (`Grammar::validate_visiting`): the
/// first limit exceeded in walk order, else the size.
pub(crate) struct IrLimits<'l> {
    limits: &'l Limits,
    size: u64,
    first: Option<LimitExceeded>,
}

impl<'l> IrLimits<'l> {
    pub(crate) fn new(limits: &'l Limits) -> Self {
        IrLimits {
            limits,
            size: 0,
            first: None,
        }
    }

    /// Counts `e`, at `depth` in rule `rule`.
    pub(crate) fn visit(&mut self, e: &crate::grammar::Expr, depth: usize, rule: &str) {
        use crate::grammar::Expr;
        if self.first.is_some() {
            return;
        }
        let limits = self.limits;
        if depth > limits.max_nesting_depth {
            self.first = Some(LimitExceeded::new(
                Limit::NestingDepth,
                limits.max_nesting_depth as u64,
                depth as u64,
                Some(rule),
            ));
            return;
        }
        self.size = self.size.saturating_add(match e {
            Expr::Bytes(b) => b.len().max(1) as u64,
            _ => 1,
        });
        if let Expr::Repeat { min, max, .. } = e {
            let bound = max.unwrap_or(*min).max(*min);
            if bound > limits.max_repeat_bound {
                self.first = Some(LimitExceeded::new(
                    Limit::RepeatBound,
                    limits.max_repeat_bound as u64,
                    bound as u64,
                    Some(rule),
                ));
            }
        }
    }

    /// The first limit exceeded, or the size over [`Limits::max_ir_nodes`].
    pub(crate) fn finish(self) -> Result<(), LimitExceeded> {
        if let Some(e) = self.first {
            return Err(e);
        }
        if self.size > self.limits.max_ir_nodes {
            return Err(LimitExceeded::new(
                Limit::IrNodes,
                self.limits.max_ir_nodes,
                self.size,
                None,
            ));
        }
        Ok(())
    }
}

/// Checks [`Limits::max_memory_bytes`] against a compiled grammar's size.
pub(crate) fn check_memory(limits: &Limits, bytes: usize) -> Result<(), LimitExceeded> {
    if bytes as u64 > limits.max_memory_bytes {
        return Err(LimitExceeded::new(
            Limit::MemoryBytes,
            limits.max_memory_bytes,
            bytes as u64,
            None,
        ));
    }
    Ok(())
}
