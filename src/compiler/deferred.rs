//! Deferred compiles (issue 24, item 1; internal switch
//! [`GrammarCompiler::with_deferred_tool_rules`], off by default).
//!
//! What is deferred: the rules a structural tag's root reaches only through an embedded
//! tool schema (`structural_tag::lower` marks their roots; `automaton::defer::stub_rules`
//! finds the rest). The compile builds the *stub grammar*, where those rules are two-node
//! stubs, with its own mask tables, so compile → first mask does no per-tool automaton,
//! minimization or mask-class work.
//!
//! When the full grammar is built: the first time a matcher's chart holds an item near a
//! stub (`automaton::defer::near_stubs`: within one token of a stub call), that matcher
//! asks for [`Deferred::full`], which compiles the whole lowered grammar once (a
//! `OnceLock`: matchers on other threads wait for the one build, then share it; the rule
//! automata of the stub grammar's rules are hits of the compiler's rule cache), and replays
//! its accepted input on it (`matcher`).
//!
//! Why masks stay exact: before the switch, no token from the current state can enter a
//! stub, and the two grammars agree on every other path, so the stub grammar's masks are
//! the full grammar's; after it, the matcher runs the full grammar itself. A compile whose
//! first state is already near a stub, or whose lowered grammar has unproductive rules (a
//! stub is always productive), is not deferred.

use super::{CompileError, CompiledGrammar, GrammarCompiler};
use crate::automaton::defer::{near_stubs, stub_rules, stubbed, NearStubs};
use crate::grammar::{Grammar, TokenRef};
use crate::limits::Deadline;
use rustc_hash::FxHashMap;
use std::sync::{Arc, OnceLock};

/// What a deferring compile keeps to build the full grammar later.
#[derive(Debug)]
pub(crate) struct Deferred {
    /// The lowered grammar, with its counted rules and token ids.
    lowered: Grammar,
    counted: Vec<u32>,
    resolved: FxHashMap<TokenRef, u32>,
    /// The compiler that made it, without its whole-grammar cache (which holds compiled
    /// grammars: no reference cycle).
    compiler: GrammarCompiler,
    /// Which items of the stub grammar are near a stub.
    pub(crate) near: NearStubs,
    /// Rules of the lowered grammar that are stubs.
    pub(crate) stubs: usize,
    full: OnceLock<Result<Arc<CompiledGrammar>, CompileError>>,
}

impl Deferred {
    /// The full grammar of `grammar` (the stub grammar's [`CompiledGrammar::grammar`]),
    /// compiled on the first call (under a fresh compile-time budget); its error, if that
    /// compile failed, on every call.
    pub(crate) fn full(&self, grammar: &Grammar) -> Result<&Arc<CompiledGrammar>, &CompileError> {
        self.full
            .get_or_init(|| {
                let c = &self.compiler;
                let deadline = Deadline::start(c.limits.compile_time);
                let compiled = c.assemble(
                    grammar,
                    &self.lowered,
                    &self.counted,
                    &self.resolved,
                    false,
                    &[],
                    &deadline,
                    &[],
                )?;
                c.finish(compiled, &deadline)
            })
            .as_ref()
    }

    /// Heap bytes of the analysis and, once built, of the full grammar (the lowered IR
    /// kept is not counted).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.near.memory_bytes()
            + match self.full.get() {
                Some(Ok(full)) => full.memory_bytes(),
                _ => 0,
            }
    }

    /// True once [`Deferred::full`] has been built.
    pub(crate) fn is_built(&self) -> bool {
        self.full.get().is_some_and(|r| r.is_ok())
    }
}

impl GrammarCompiler {
    /// The stub grammar of `lowered` (the lowered `grammar`), when deferring pays: some
    /// rules are reached only through the rules `defer` marks (by index into `grammar`;
    /// found in `lowered` by name) and the first state is not near a stub. `Err(lowered)`
    /// (inside `Ok`): compile it whole.
    pub(super) fn compile_deferring(
        &self,
        grammar: &Grammar,
        defer: &[bool],
        lowered: Grammar,
        counted: &[u32],
        resolved: &FxHashMap<TokenRef, u32>,
        deadline: &Deadline,
    ) -> Result<Result<Arc<CompiledGrammar>, Grammar>, CompileError> {
        let names: rustc_hash::FxHashSet<&str> = grammar
            .rules
            .iter()
            .zip(defer)
            .filter(|(_, &d)| d)
            .map(|(r, _)| r.name.as_str())
            .collect();
        let roots: Vec<bool> = lowered
            .rules
            .iter()
            .map(|r| names.contains(r.name.as_str()))
            .collect();
        let stub = stub_rules(&lowered, &roots);
        let stubs = stub.iter().filter(|&&s| s).count();
        if stubs == 0 || !lowered.unproductive_rules().is_empty() {
            return Ok(Err(lowered));
        }
        let stub_grammar = stubbed(&lowered, &stub);
        let stub_counted: Vec<u32> = counted
            .iter()
            .copied()
            .filter(|&r| !stub[r as usize])
            .collect();
        let mut compiled = self.assemble(
            grammar,
            &stub_grammar,
            &stub_counted,
            resolved,
            false,
            &[],
            deadline,
            &stub,
        )?;
        // No text token reaches a stub call from a node farther than the longest token.
        let reach = compiled.max_token_len.saturating_add(1);
        let near = near_stubs(&compiled.aut, &stub, reach);
        let aut = &compiled.aut;
        if near.is_near(aut, &self.trie, aut.rule_start[aut.root as usize]) {
            return Ok(Err(lowered));
        }
        let mut compiler = self.clone();
        compiler.grammar_cache = Arc::new(super::cache::GrammarCache::new(false, None));
        compiled.deferred = Some(Box::new(Deferred {
            lowered,
            counted: counted.to_vec(),
            resolved: resolved.clone(),
            compiler,
            near,
            stubs,
            full: OnceLock::new(),
        }));
        self.finish(compiled, deadline).map(Ok)
    }
}
