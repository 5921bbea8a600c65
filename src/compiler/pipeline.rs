//! The one compile pipeline every entry point ends in: validate the IR → resolve token
//! terminals against the vocabulary → lower (inline, counted repetitions) → build the
//! rule automata → plan the masks (`crate::mask::plan`) and, under
//! [`Precompute::Eager`], compute them.

use super::{CompileError, CompiledGrammar, GrammarCompiler, Precompute};
use crate::automaton::lower::{inline_rules, lower_repeats, simplify_repeats};
use crate::automaton::Automaton;
use crate::grammar::{Expr, Grammar, TokenRef};
use crate::limits::{check_memory, Deadline, IrLimits};
use crate::mask::background::{self, BackgroundFill};
use crate::mask::cache::SubtreeMemo;
use crate::mask::counted::derivable;
use crate::mask::intern::MaskInterner;
use crate::mask::plan;
use crate::parser::key_filter::KeyFilters;
use rustc_hash::FxHashMap;
use std::sync::{Arc, OnceLock, RwLock};

/// What a matcher checks of a JSON Schema grammar's keys beside the grammar, by rule name:
/// the closed objects whose keys it narrows to the names not yet written
/// (`matcher::keys`), and the key rules of undeclared properties whose completions its
/// chart drops when they decode to a declared name (`parser::key_filter`).
#[derive(Clone, Copy, Default)]
pub(crate) struct KeyChecks<'a> {
    pub closed: &'a [(String, Vec<String>)],
    pub filters: &'a [(String, Vec<String>)],
}

/// The grammar a compile starts from: one the compiled grammar keeps as it is (a front
/// end's output, moved), or the caller's, copied once it has been validated.
pub(crate) enum Source<'g> {
    Shared(Arc<Grammar>),
    Borrowed(&'g Grammar),
}

impl GrammarCompiler {
    /// Validates `grammar`, checks it against the IR limits and resolves its token
    /// terminals; terminals that name ordinary (non-special) tokens become those tokens'
    /// text (`Cow::Owned`), so that mask and accept agree on one reading of them.
    pub(super) fn prepare<'g>(
        &self,
        grammar: &'g Grammar,
    ) -> Result<(FxHashMap<TokenRef, u32>, std::borrow::Cow<'g, Grammar>), CompileError> {
        // One walk: the IR's invariants, then its limits, then its token terminals (errors
        // in that order of priority, each the first in walk order).
        let mut limits = IrLimits::new(&self.limits);
        let mut resolved: FxHashMap<TokenRef, u32> = Default::default();
        let mut unresolved: Option<CompileError> = None;
        grammar.validate_visiting(|e, depth, rule| {
            limits.visit(e, depth, &rule.name);
            if let (Expr::Token(t), None) = (e, &unresolved) {
                match self.resolve_token(t, &rule.name) {
                    Ok(id) => {
                        resolved.insert(t.clone(), id);
                    }
                    Err(err) => unresolved = Some(err),
                }
            }
        })?;
        limits.finish()?;
        if let Some(err) = unresolved {
            return Err(err);
        }
        // A terminal naming an ordinary (non-special) token means that token's text: as
        // bytes, any tokenization of it matches, so mask and accept agree on one reading.
        // (No copy of the grammar when it names only special tokens, or none.)
        let ordinary = resolved.values().any(|&id| !self.vocab.is_special(id));
        let mut rewritten = std::borrow::Cow::Borrowed(grammar);
        let rules: &mut [crate::grammar::Rule] = if ordinary {
            &mut rewritten.to_mut().rules
        } else {
            &mut []
        };
        for rule in rules {
            let mut stack = vec![&mut rule.body];
            while let Some(e) = stack.pop() {
                match e {
                    Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter_mut()),
                    Expr::Repeat { expr, .. } => stack.push(expr),
                    Expr::Token(t) => {
                        let id = resolved[&*t];
                        if !self.vocab.is_special(id) {
                            let bytes = self.vocab.token_bytes(id).unwrap_or(&[]);
                            *e = if bytes.is_empty() {
                                Expr::Empty
                            } else {
                                Expr::Bytes(bytes.to_vec())
                            };
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok((resolved, rewritten))
    }

    /// [`Self::compile_ir_keeping`] on the current rayon pool.
    pub(super) fn compile_on_pool(
        &self,
        grammar: Source<'_>,
        keep: &[bool],
        always: &[bool],
        unique_keys: bool,
        keys: KeyChecks<'_>,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        let deadline = Deadline::start(self.limits.compile_time);
        let shared = match &grammar {
            Source::Shared(g) => Some(g.clone()),
            Source::Borrowed(_) => None,
        };
        let source: &Grammar = match &grammar {
            Source::Shared(g) => g,
            Source::Borrowed(g) => g,
        };
        let (resolved, rewritten) = self.prepare(source)?;
        // A borrowed grammar is copied only once `prepare` has checked its depth (the copy
        // recurses on it).
        let grammar = shared.unwrap_or_else(|| Arc::new(source.clone()));
        let simplified = simplify_repeats(inline_rules(&rewritten, keep, always))?;
        let (lowered, counted) = lower_repeats(simplified);
        let compiled = self.assemble(
            &grammar,
            &lowered,
            &counted,
            &resolved,
            unique_keys,
            keys,
            &deadline,
            &[],
            None,
        )?;
        self.finish(compiled, &deadline)
    }

    /// The automata and mask tables of `lowered` (the lowered form of `grammar`, with its
    /// counted rules `counted` and token terminals `resolved`), masks not computed yet;
    /// `stub` marks the stub rules of a deferring compile (`automaton::defer`); `seed`, the
    /// mask classes of its stub grammar and the rules rebuilt since (`plan::mask_classes`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn assemble(
        &self,
        grammar: &Arc<Grammar>,
        lowered: &Grammar,
        counted: &[u32],
        resolved: &FxHashMap<TokenRef, u32>,
        unique_keys: bool,
        keys: KeyChecks<'_>,
        deadline: &Deadline,
        stub: &[bool],
        seed: Option<crate::automaton::Seeded<'_>>,
    ) -> Result<CompiledGrammar, CompileError> {
        let aut = Automaton::build(
            lowered,
            counted,
            &|t| resolved.get(t).copied().unwrap_or(0),
            &self.limits,
            deadline,
            Some(&self.rule_automata),
            stub,
        )?;
        self.assemble_automaton(aut, grammar, unique_keys, keys, deadline, seed, false)
    }

    /// [`GrammarCompiler::assemble`] from the automaton `aut` of `grammar` (built, or
    /// spliced from a stub grammar's: `compiler::deferred`): pruned, with its mask tables.
    /// `pruned`: the caller found that no edge leads into a dead end
    /// (`Automaton::appended_dead_free`), so pruning is skipped.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn assemble_automaton(
        &self,
        mut aut: Automaton,
        grammar: &Arc<Grammar>,
        unique_keys: bool,
        keys: KeyChecks<'_>,
        deadline: &Deadline,
        seed: Option<crate::automaton::Seeded<'_>>,
        pruned: bool,
    ) -> Result<CompiledGrammar, CompileError> {
        if unique_keys {
            aut.key_filters = KeyFilters::resolve(&aut.rule_names, keys.filters)
                .map(|f| Arc::new(f.with_suspects(&self.trie, &self.vocab)));
        }
        // A build examines only its rules built when its stub grammar had no dead end.
        let only = seed.filter(|s| !s.seed.had_dead_ends()).map(|s| s.rebuilt);
        if pruned {
            aut.had_dead_ends = false;
        } else if !aut.prune_unproductive(only) {
            return Err(CompileError::EmptyLanguage {
                root: grammar.rules[grammar.root.index()].name.clone(),
            });
        }
        let has_mask = aut.real_nodes_with_edges();
        let (mask_class, classes, key_basis) =
            plan::mask_classes(&aut, &self.trie, deadline, seed)?;
        let masks = (0..classes).map(|_| OnceLock::new()).collect();
        let mut sites: Vec<Vec<u32>> = vec![Vec::new(); aut.rule_start.len()];
        for n in 0..aut.nodes.len() as u32 {
            for c in aut.calls_of(n) {
                sites[c.rule as usize].push(n);
            }
        }
        let pair_masks = (0..aut.nodes.len()).map(|_| OnceLock::new()).collect();
        let mut compiled = CompiledGrammar {
            sites,
            pair_masks,
            vocab: self.vocab.clone(),
            trie: self.trie.clone(),
            text_bits: self.text_bits.clone(),
            grammar: grammar.clone(),
            aut,
            masks,
            interned: MaskInterner::default(),
            key_basis,
            shared: self.shared.clone(),
            mask_class,
            has_mask,
            virtual_masks: RwLock::new(FxHashMap::default()),
            virtual_pair_masks: RwLock::new(FxHashMap::default()),
            counted_derivable: Vec::new(),
            counted_bases: RwLock::new(FxHashMap::default()),
            max_token_len: self.trie.max_depth as u32,
            max_step_items: self.limits.max_step_items,
            lazy_budget: self.limits.compile_time,
            walk_failed: OnceLock::new(),
            subtrees: SubtreeMemo::default(),
            unique_keys,
            closed_objects: None,
            background_fill: BackgroundFill::default(),
            max_memory_bytes: self.limits.max_memory_bytes,
            deferred: None,
        };
        if unique_keys {
            compiled.closed_objects =
                crate::matcher::ClosedObjects::resolve(&compiled.aut.rule_names, keys.closed)
                    .map(Arc::new);
        }
        compiled.counted_derivable = compiled.aut.counted.iter().map(derivable).collect();
        Ok(compiled)
    }

    /// Checks the memory limit, computes the masks [`Precompute::Eager`] asks for, and
    /// schedules the fill of [`Precompute::Background`].
    pub(super) fn finish(
        &self,
        mut compiled: CompiledGrammar,
        deadline: &Deadline,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        // Memory: the automata now, then a running total of the masks as they are computed.
        let used = std::sync::atomic::AtomicU64::new(compiled.memory_bytes() as u64);
        let add = |bytes: usize| {
            let total = used.fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
            check_memory(&self.limits, (total + bytes as u64) as usize)
        };
        add(0)?;
        if self.precompute == Precompute::Eager {
            compiled.precompute_eager(deadline, &add)?;
            check_memory(&self.limits, compiled.memory_bytes())?;
        }
        let compiled = Arc::new(compiled);
        if self.precompute == Precompute::Background {
            // The default pool waits for foreground calls on a machine of few cores; a
            // caller's pool is the caller's to place.
            match &self.background_pool {
                Some(pool) => background::schedule(&compiled, pool, None),
                None => {
                    if let Some(pool) = background::default_pool() {
                        background::schedule(&compiled, &pool, background::default_gate());
                    }
                }
            }
        }
        Ok(compiled)
    }

    fn resolve_token(&self, t: &TokenRef, rule: &str) -> Result<u32, CompileError> {
        let size = self.vocab.tokenizer_size();
        match t {
            TokenRef::Id(id) if (*id as usize) < size => Ok(*id),
            TokenRef::Id(id) => Err(CompileError::TokenOutOfRange {
                rule: rule.to_string(),
                id: *id,
                size,
            }),
            TokenRef::Text(text) => {
                if let Some(id) = self.vocab.special_token_id(text) {
                    return Ok(id);
                }
                // A text token spelled exactly so (such as an added but non-special token).
                let trie = &self.trie;
                let bytes = |p: usize| self.vocab.token_bytes(trie.sorted[p]).unwrap_or(&[]);
                let p = trie.sorted.partition_point(|&id| {
                    self.vocab.token_bytes(id).unwrap_or(&[]) < text.as_bytes()
                });
                if p < trie.sorted.len() && bytes(p) == text.as_bytes() {
                    return Ok(trie.sorted[p]);
                }
                Err(CompileError::UnknownToken {
                    rule: rule.to_string(),
                    text: text.clone(),
                })
            }
        }
    }
}
