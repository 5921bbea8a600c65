//! Deferred compiles (issue 24, item 1; [`GrammarCompiler::with_deferred_tool_rules`], on
//! by default).
//!
//! What is deferred: the rules a structural tag's root reaches only through an embedded
//! tool schema (`structural_tag::lower` marks their roots, the *deferral roots*;
//! `automaton::defer::stub_rules` finds the rest). The compile builds the *stub grammar*:
//! the tag's IR with every deferral root's body replaced by a one-byte stub and the rules
//! behind it left out, *before* inlining and lowering. So compile → first mask runs no
//! per-tool inlining, lowering, automaton, minimization or mask-class work; only the JSON
//! Schema front end has run for each tool (its errors are the compile's).
//!
//! When the tools are built: the first time a matcher's chart holds an item from which
//! some token can enter a stub (`automaton::defer::near_stubs`), the matcher asks for the
//! grammar in which the stubs that tokens can enter are built as well (the tools already
//! built stay built): [`Deferred::expand`]. Each such grammar is compiled once per set of
//! built tools and shared by every matcher of the stub grammar (a `OnceLock` per set:
//! matchers on other threads wait for the one build, then share it). A build lowers and
//! builds the tools' rules alone and splices their automata into a copy of the stub
//! grammar's ([`Automaton::splice`]), whose mask classes and near-stub bounds it starts
//! from; when the stub grammar's pruning removed an edge, it lowers the whole with the
//! tools built and assembles it again instead. The matcher replays its accepted input on
//! it (`matcher`). A call of a second tool expands again, from the grammar the matcher is
//! on.
//!
//! Why masks stay exact: before a switch, no token from the current state can enter a
//! stub, and the grammars agree on every other path, so the masks are those of the whole
//! grammar; after it, the matcher runs a grammar whose stubs it cannot reach either. A
//! compile whose first state is already near a stub, or whose IR has unproductive rules (a
//! stub is always productive), is not deferred.

use super::pipeline::{KeyChecks, Source};
use super::{CompileError, CompiledGrammar, GrammarCompiler};
use crate::automaton::defer::{near_stubs, stub_rules, stubbed, NearStubs};
use crate::automaton::lower::{inline_rules, inline_rules_of, lower_repeats, simplify_repeats};
use crate::automaton::{Automaton, ClassSeed, Seeded};
use crate::grammar::{Expr, Grammar, RulesView, TokenRef};
use crate::limits::Deadline;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Sets of tools built, past which a matcher that needs another tool gets the grammar
/// with every tool built: memory stays within a few copies of the tag's own rules plus
/// the whole grammar, however many tools calls combine.
const MAX_BUILT_SETS: usize = 8;

/// One build per set of deferral roots built, shared by every matcher.
type Build = Arc<OnceLock<Result<Arc<CompiledGrammar>, CompileError>>>;

/// What every grammar of one deferring compile shares: the IR, and the grammars built
/// from it so far, by set of deferral roots built.
#[derive(Debug)]
struct Shared {
    /// The grammar as given (what [`CompiledGrammar::grammar`] prints).
    source: Arc<Grammar>,
    /// The grammar with token terminals of ordinary tokens rewritten to their text, when
    /// it names any (`GrammarCompiler::prepare`); `None`: `source` itself.
    rewritten: Option<Grammar>,
    /// `roots[r]`: rule `r` of the IR is a deferral root.
    roots: Vec<bool>,
    /// `always[r]`: rule `r` of the IR is inlined whatever its size (`inline_rules`).
    always: Vec<bool>,
    /// The deferral roots by name (lowering renumbers rules but keeps the names of kept
    /// rules, so a lowered rule is a deferral root's stub by its name).
    root_ids: FxHashMap<String, u32>,
    resolved: FxHashMap<TokenRef, u32>,
    /// The compiler that made it, without its whole-grammar cache (which holds compiled
    /// grammars: no reference cycle).
    compiler: GrammarCompiler,
    /// By the ascending IR rule ids of the deferral roots built (at most
    /// [`MAX_BUILT_SETS`] sets, then every tool at once).
    builds: Mutex<FxHashMap<Vec<u32>, Build>>,
    /// The stub grammar still exists (else builds are made for the caller alone).
    kept: AtomicBool,
    /// The stub grammar lowered (set by the compile): what a build without `spliceable`
    /// splices its tools' lowered rules into, in place (the stub grammar of hundreds of
    /// tools is not copied for each build), and takes them out of again ([`Spliced`]).
    /// Such builds of different tool sets therefore take turns (each waits for the one
    /// assembling; the wait does not count against its compile-time budget).
    base: OnceLock<Mutex<Lowered>>,
    /// The stub grammar's mask classes (set by the compile): builds refine from them.
    seed: OnceLock<ClassSeed>,
    /// The stub grammar's automaton and near-stub analysis, with its stub rules by IR rule
    /// id (set by the compile when its pruning removed nothing): builds splice their tools'
    /// automata into a copy of it ([`Automaton::splice`]) instead of assembling every rule
    /// of the tag again. A copy, counted in the stub grammar's memory (a few KiB a tool).
    spliceable: OnceLock<Spliceable>,
}

/// What [`Shared::spliceable`] keeps.
#[derive(Debug)]
struct Spliceable {
    aut: Automaton,
    near: NearStubs,
    /// The automaton rule of each deferral root's stub, by IR rule id.
    slots: FxHashMap<u32, u32>,
}

/// A lowered grammar with its counted rules and, per rule, whether it is a stub.
#[derive(Debug)]
struct Lowered {
    grammar: Grammar,
    counted: Vec<u32>,
    stub: Vec<bool>,
    /// Per rule, whether it differs from the stub grammar's rule of that index (a built
    /// tool's rule); empty for the stub grammar itself.
    rebuilt: Vec<bool>,
}

/// The stub grammar with tools spliced in (`compile_built`); dropping it takes them out
/// again, whatever the build's outcome: the stub grammar is as it was before.
struct Spliced<'a> {
    /// The stub grammar, locked.
    lowered: &'a mut Lowered,
    /// The stub grammar's numbers of rules and of counted rules.
    rules: usize,
    counted: usize,
    /// Per tool spliced in: its slot, and the stub's body and flag taken from there.
    taken: Vec<(usize, Expr, bool)>,
}

impl Drop for Spliced<'_> {
    fn drop(&mut self) {
        let lowered = &mut *self.lowered;
        lowered.grammar.rules.truncate(self.rules);
        lowered.stub.truncate(self.rules);
        lowered.counted.truncate(self.counted);
        lowered.rebuilt = Vec::new();
        for (slot, body, stub) in self.taken.drain(..) {
            lowered.grammar.rules[slot].body = body;
            lowered.stub[slot] = stub;
        }
    }
}

impl Shared {
    fn ir(&self) -> &Grammar {
        self.rewritten.as_ref().unwrap_or(&self.source)
    }

    /// The grammar with the deferral roots `built` (ascending IR rule ids) built and the
    /// others stubs, compiled on the first call (under a fresh compile-time budget).
    fn build(self: &Arc<Self>, built: Vec<u32>) -> Result<Arc<CompiledGrammar>, String> {
        let cell: Build = if self.kept.load(Ordering::Acquire) {
            let mut builds = self.builds.lock().unwrap_or_else(|e| e.into_inner());
            builds.entry(built.clone()).or_default().clone()
        } else {
            Build::default()
        };
        cell.get_or_init(|| {
            let c = &self.compiler;
            let deadline = Deadline::start(c.limits.compile_time);
            let (mut compiled, parts) = c.compile_built(self, &built, &deadline)?;
            compiled.deferred = parts.map(|(near, stub_roots)| {
                Box::new(Deferred {
                    shared: self.clone(),
                    owner: false,
                    near,
                    stub_roots,
                    built,
                })
            });
            c.finish(compiled, &deadline)
        })
        .as_ref()
        .map(Arc::clone)
        .map_err(|e| e.to_string())
    }
}

/// What a grammar with stubs keeps to build its tools later.
#[derive(Debug)]
pub(crate) struct Deferred {
    /// What the grammars of the compile share.
    shared: Arc<Shared>,
    /// Set on the stub grammar the compile returned: while it lives, builds are kept in
    /// `shared` for every matcher; when it is dropped, they are let go (`Drop`), which
    /// breaks the cycle of builds holding `shared` holding builds.
    owner: bool,
    /// Which items are near a stub.
    pub(crate) near: NearStubs,
    /// Per stub rule of the automaton: the IR rule id of the deferral root it stands for.
    stub_roots: FxHashMap<u32, u32>,
    /// The IR rule ids of the deferral roots built in this grammar, ascending.
    built: Vec<u32>,
}

impl Deferred {
    /// The grammar in which the deferral roots of the automaton's stub rules `stubs` are
    /// built too (with those this one has built); every deferral root when `stubs` is
    /// `None` or names no stub. Built on first need and shared by every matcher.
    ///
    /// # Errors
    /// The build's compile error (a limit).
    pub(crate) fn expand(&self, stubs: Option<&[u32]>) -> Result<Arc<CompiledGrammar>, String> {
        let shared = &self.shared;
        let sets = shared.builds.lock().map_or(0, |b| b.len());
        let stubs = if sets >= MAX_BUILT_SETS { None } else { stubs };
        let mut built = self.built.clone();
        let named: Vec<u32> = stubs
            .unwrap_or(&[])
            .iter()
            .filter_map(|r| self.stub_roots.get(r).copied())
            .collect();
        if named.is_empty() {
            built = (0..shared.roots.len() as u32)
                .filter(|&r| shared.roots[r as usize])
                .collect();
        } else {
            built.extend(named);
            built.sort_unstable();
            built.dedup();
        }
        shared.build(built)
    }

    /// The grammar with every tool built (for serialization).
    pub(crate) fn full(&self) -> Result<Arc<CompiledGrammar>, String> {
        self.expand(None)
    }

    /// Number of deferral roots still stubs in this grammar.
    pub(crate) fn stubs(&self) -> usize {
        self.stub_roots.len()
    }

    /// True when a grammar with more tools built has been compiled from the stub grammar
    /// (always, for a grammar that is itself such a build).
    pub(crate) fn is_built(&self) -> bool {
        !self.owner
            || self
                .shared
                .builds
                .lock()
                .map(|b| b.values().any(|c| c.get().is_some_and(|r| r.is_ok())))
                .unwrap_or(false)
    }

    /// Heap bytes of the analysis and, on the stub grammar, of every grammar built from it
    /// and of the mask classes kept for them (the IR kept is not counted).
    pub(crate) fn memory_bytes(&self) -> usize {
        let builds = match self.owner {
            false => 0,
            true => self
                .shared
                .builds
                .lock()
                .map(|b| {
                    b.values()
                        .filter_map(|c| c.get().and_then(|r| r.as_ref().ok()))
                        .map(|g| g.memory_bytes())
                        .sum()
                })
                .unwrap_or(0),
        };
        let seed = match self.owner {
            true => {
                self.shared.seed.get().map_or(0, ClassSeed::memory_bytes)
                    + self
                        .shared
                        .spliceable
                        .get()
                        .map_or(0, |s| s.aut.memory_bytes() + s.near.memory_bytes())
            }
            false => 0,
        };
        self.near.memory_bytes() + self.stub_roots.len() * 16 + builds + seed
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if self.owner {
            self.shared.kept.store(false, Ordering::Release);
            // Builds still held by matchers keep what they need.
            let builds =
                std::mem::take(&mut *self.shared.builds.lock().unwrap_or_else(|e| e.into_inner()));
            drop(builds);
        }
    }
}

impl GrammarCompiler {
    /// Compiles a structural tag's IR `grammar` whose rules with `roots[r]` set are tool
    /// schemas' roots, deferring them (the module docs). Falls back to the whole compile
    /// (with the roots kept from inlining) when deferring cannot be exact or saves nothing.
    pub(super) fn compile_deferring(
        &self,
        grammar: Grammar,
        roots: Vec<bool>,
        always: Vec<bool>,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        let deadline = Deadline::start(self.limits.compile_time);
        let (resolved, rewritten) = self.prepare(&grammar)?;
        let rewritten = match rewritten {
            std::borrow::Cow::Owned(g) => Some(g),
            std::borrow::Cow::Borrowed(_) => None,
        };
        let ir = rewritten.as_ref().unwrap_or(&grammar);
        let deferrable = roots.iter().any(|&r| r) && ir.unproductive_rules().is_empty();
        if !deferrable {
            return self.compile_on_pool(
                Source::Shared(Arc::new(grammar)),
                &roots,
                &always,
                false,
                KeyChecks::default(),
            );
        }
        let root_ids = (0..ir.rules.len())
            .filter(|&r| roots[r])
            .map(|r| (ir.rules[r].name.clone(), r as u32))
            .collect();
        let mut compiler = self.clone();
        compiler.grammar_cache = Arc::new(super::cache::GrammarCache::new(false, None));
        // Under eager precompute, the stub grammar and every build fill their masks in the
        // background (a matcher computes the few it needs first itself): compile → first
        // mask does not wait for the masks of every tool name, and reaching a tool never
        // stalls the step on the whole grammar's masks.
        if compiler.precompute == super::Precompute::Eager {
            compiler.precompute = super::Precompute::Background;
        }
        let shared = Arc::new(Shared {
            source: Arc::new(grammar),
            rewritten,
            roots,
            always,
            root_ids,
            resolved,
            compiler,
            builds: Mutex::new(FxHashMap::default()),
            kept: AtomicBool::new(true),
            base: OnceLock::new(),
            seed: OnceLock::new(),
            spliceable: OnceLock::new(),
        });
        let (mut compiled, parts) = self.compile_stubbed(&shared, &deadline)?;
        let Some((near, stub_roots)) = parts else {
            return self.finish(compiled, &deadline);
        };
        let aut = &compiled.aut;
        if near.is_near(aut, &self.trie, aut.rule_start[aut.root as usize]) {
            // The first token may already enter a tool: nothing to gain.
            return self.compile_on_pool(
                Source::Shared(shared.source.clone()),
                &shared.roots,
                &shared.always,
                false,
                KeyChecks::default(),
            );
        }
        // What every tool's build would build first, built once here (`machinery`).
        let ir = shared.ir();
        let machinery = super::machinery::shared_tool_rules(ir, &shared.roots, &shared.always);
        let token = |t: &TokenRef| shared.resolved.get(t).copied().unwrap_or(0);
        self.build_shared_tool_rules(ir, &shared.always, &machinery, &token, &deadline);
        compiled.deferred = Some(Box::new(Deferred {
            shared: shared.clone(),
            owner: true,
            near,
            stub_roots,
            built: Vec::new(),
        }));
        shared.compiler.finish(compiled, &deadline)
    }

    /// The stub grammar of `shared`'s IR: every deferral root (and every rule reached only
    /// through one) a stub, inlined, lowered (kept in `shared.base` for the builds) and
    /// assembled (masks not computed); with the near-stub analysis and the stubs' deferral
    /// roots (by automaton rule) when some stub is left.
    #[allow(clippy::type_complexity)]
    fn compile_stubbed(
        &self,
        shared: &Shared,
        deadline: &Deadline,
    ) -> Result<(CompiledGrammar, Option<(NearStubs, FxHashMap<u32, u32>)>), CompileError> {
        let ir = shared.ir();
        let stub = stub_rules(ir, &shared.roots);
        let (stubbed_ir, kept) = stubbed(ir, &stub);
        let flags = |of: &[bool]| -> Vec<bool> {
            kept.iter()
                .map(|&r| of.get(r as usize).copied().unwrap_or(false))
                .collect()
        };
        // Every deferral root stays a rule of its own, built or not (as without deferral).
        let (roots, always) = (flags(&shared.roots), flags(&shared.always));
        let simplified = simplify_repeats(inline_rules(&stubbed_ir, &roots, &always))?;
        let (grammar, counted) = lower_repeats(simplified);
        let stub = grammar
            .rules
            .iter()
            .map(|r| shared.root_ids.contains_key(&r.name))
            .collect();
        let base = shared.base.get_or_init(|| {
            let lowered = Lowered {
                grammar,
                counted,
                stub,
                rebuilt: Vec::new(),
            };
            Mutex::new(lowered)
        });
        let base = base.lock().unwrap_or_else(|e| e.into_inner());
        self.assemble_lowered(shared, &base, deadline)
    }

    /// The grammar with the deferral roots `built` (ascending IR rule ids) built: each
    /// one's rules lowered on their own and spliced into the lowered stub grammar in its
    /// stub's place (a tool's rules call no rule outside its schema, and deferral roots
    /// are never inlined, so this is the lowering of the whole with those tools built).
    #[allow(clippy::type_complexity)]
    fn compile_built(
        &self,
        shared: &Shared,
        built: &[u32],
        deadline: &Deadline,
    ) -> Result<(CompiledGrammar, Option<(NearStubs, FxHashMap<u32, u32>)>), CompileError> {
        let Some(base) = shared.base.get() else {
            return self.compile_stubbed(shared, deadline);
        };
        if let Some(spliceable) = shared.spliceable.get() {
            return self.compile_spliced(shared, spliceable, built, deadline);
        }
        let ir = shared.ir();
        let waiting = std::time::Instant::now();
        let mut base = base.lock().unwrap_or_else(|e| e.into_inner());
        // Builds of other tool sets take turns here: the wait is not this build's time.
        let deadline = &deadline.paused_for(waiting.elapsed());
        let rules = base.grammar.rules.len();
        let mut spliced = Spliced {
            counted: base.counted.len(),
            rules,
            taken: Vec::new(),
            lowered: &mut base,
        };
        let lowered = &mut *spliced.lowered;
        lowered.rebuilt = vec![false; rules];
        for &r in built {
            let name = ir.rules[r as usize].name.as_str();
            let Some(slot) = lowered.grammar.rules[..rules]
                .iter()
                .position(|x| x.name == name)
            else {
                continue;
            };
            let (tool, tool_counted) = lowered_component(ir, r, &shared.always)?;
            // The tool's root takes the stub's place; its other rules go at the end.
            let mut next = lowered.grammar.rules.len() as u32;
            let new_id: Vec<u32> = (0..tool.rules.len())
                .map(|i| {
                    if i == tool.root.index() {
                        slot as u32
                    } else {
                        next += 1;
                        next - 1
                    }
                })
                .collect();
            lowered
                .counted
                .extend(tool_counted.iter().map(|&c| new_id[c as usize]));
            for (i, mut rule) in tool.rules.into_iter().enumerate() {
                rule.body.rename_rules(|c| new_id[c as usize]);
                if i == tool.root.index() {
                    let body = std::mem::replace(&mut rule.body, Expr::Empty);
                    let stub = std::mem::replace(&mut lowered.grammar.rules[slot].body, body);
                    spliced.taken.push((slot, stub, lowered.stub[slot]));
                    lowered.stub[slot] = false;
                    lowered.rebuilt[slot] = true;
                } else {
                    lowered.grammar.rules.push(rule);
                    lowered.stub.push(false);
                    lowered.rebuilt.push(true);
                }
            }
        }
        self.assemble_lowered(shared, spliced.lowered, deadline)
    }

    /// Assembles `lowered`, with the near-stub analysis and the stubs' deferral roots
    /// when it has stubs.
    #[allow(clippy::type_complexity)]
    fn assemble_lowered(
        &self,
        shared: &Shared,
        lowered: &Lowered,
        deadline: &Deadline,
    ) -> Result<(CompiledGrammar, Option<(NearStubs, FxHashMap<u32, u32>)>), CompileError> {
        let any = lowered.stub.iter().any(|&s| s);
        // A build refines its mask classes from the stub grammar's (same rules but the
        // tools built); the stub grammar keeps its classes for them.
        let seed = match shared.seed.get() {
            Some(seed) if !lowered.rebuilt.is_empty() => Some(Seeded {
                seed,
                rebuilt: &lowered.rebuilt[..],
                spliced: false,
            }),
            _ => None,
        };
        let compiled = self.assemble(
            &shared.source,
            &lowered.grammar,
            &lowered.counted,
            &shared.resolved,
            false,
            KeyChecks::default(),
            deadline,
            if any { &lowered.stub } else { &[] },
            seed,
        )?;
        if lowered.rebuilt.is_empty() && compiled.key_basis.is_some() {
            let classes = compiled.masks.len();
            let _ = shared
                .seed
                .set(compiled.aut.class_seed(&compiled.mask_class, classes));
        }
        if !any {
            return Ok((compiled, None));
        }
        // No text token reaches a stub call from a node farther than the longest token.
        let reach = compiled.max_token_len.saturating_add(1);
        let near = near_stubs(&compiled.aut, &lowered.stub, reach);
        let stub_roots: FxHashMap<u32, u32> = (0..lowered.grammar.rules.len())
            .filter(|&r| lowered.stub[r])
            .filter_map(|r| {
                let root = shared.root_ids.get(&lowered.grammar.rules[r].name)?;
                Some((r as u32, *root))
            })
            .collect();
        if lowered.rebuilt.is_empty() && !compiled.aut.had_dead_ends {
            let _ = shared.spliceable.set(Spliceable {
                aut: compiled.aut.clone(),
                near: near.without_memo(),
                slots: stub_roots.iter().map(|(&a, &r)| (r, a)).collect(),
            });
        }
        Ok((compiled, Some((near, stub_roots))))
    }

    /// The grammar with the deferral roots `built` (ascending IR rule ids) built, spliced
    /// into the stub grammar's automaton (`spliceable`): each tool's rules lowered and
    /// built alone (a tool's rules call no rule outside its schema), then appended in its
    /// stub's place ([`Automaton::splice`]); the mask classes refined from the stub
    /// grammar's, and the near-stub bounds carried over ([`NearStubs::spliced`]).
    #[allow(clippy::type_complexity)]
    fn compile_spliced(
        &self,
        shared: &Shared,
        spliceable: &Spliceable,
        built: &[u32],
        deadline: &Deadline,
    ) -> Result<(CompiledGrammar, Option<(NearStubs, FxHashMap<u32, u32>)>), CompileError> {
        let ir = shared.ir();
        let token = |t: &TokenRef| shared.resolved.get(t).copied().unwrap_or(0);
        let mut tools = Vec::with_capacity(built.len());
        for &r in built {
            let Some(&slot) = spliceable.slots.get(&r) else {
                continue;
            };
            let (tool, tool_counted) = lowered_component(ir, r, &shared.always)?;
            let cache = Some(&*self.rule_automata);
            let aut = Automaton::build(
                &tool,
                &tool_counted,
                &token,
                &self.limits,
                deadline,
                cache,
                &[],
            )?;
            tools.push((slot, aut));
        }
        let parts: Vec<(u32, &Automaton)> = tools.iter().map(|(s, a)| (*s, a)).collect();
        let (aut, splice) = spliceable.aut.splice(&parts, &self.limits)?;
        let mut rebuilt = vec![false; splice.base_rules as usize];
        for &(slot, _) in &splice.slots {
            rebuilt[slot as usize] = true;
        }
        let seed = shared.seed.get().map(|seed| Seeded {
            seed,
            rebuilt: &rebuilt[..],
            spliced: true,
        });
        let keys = KeyChecks::default();
        // No pruning when the tools lead into no dead end (their nodes alone are examined).
        let pruned = aut.appended_dead_free(&splice);
        #[cfg(test)]
        {
            let mut whole = aut.clone();
            whole.prune_unproductive(None);
            assert_eq!(pruned, !whole.had_dead_ends, "the tools' dead ends");
        }
        let compiled =
            self.assemble_automaton(aut, &shared.source, false, keys, deadline, seed, pruned)?;
        let stub_roots: FxHashMap<u32, u32> = spliceable
            .slots
            .iter()
            .filter(|(r, _)| built.binary_search(r).is_err())
            .map(|(&r, &a)| (a, r))
            .collect();
        if stub_roots.is_empty() {
            return Ok((compiled, None));
        }
        let near = match spliceable.near.spliced(&compiled.aut, &splice) {
            Some(near) => near,
            None => {
                let stub: Vec<bool> = (0..compiled.aut.rule_start.len() as u32)
                    .map(|a| stub_roots.contains_key(&a))
                    .collect();
                near_stubs(
                    &compiled.aut,
                    &stub,
                    compiled.max_token_len.saturating_add(1),
                )
            }
        };
        Ok((compiled, Some((near, stub_roots))))
    }
}

/// The rules of `ir` reachable from rule `root` (a deferral root), as a grammar of their
/// own rooted there, inlined and lowered: with its counted rules. The root is kept, and so
/// are the rules with `always[r]` set (capped JSON whitespace, any number, any integer),
/// which a whole compile inlines: a build is made while a matcher waits, and a member of
/// the arguments with its whitespace written out at each of its four places is about 200
/// automaton states where the calls leave a few dozen, as an integer capped at 24 digits
/// is about 50 (the build's automata, classes and masks shrink with it; masks stay exact
/// whatever the rule boundaries).
fn lowered_component(
    ir: &Grammar,
    root: u32,
    always: &[bool],
) -> Result<(Grammar, Vec<u32>), CompileError> {
    // Read in place, not copied: the component's rules are this grammar's (`order[0]` is
    // the root), their calls renamed as they are inlined.
    let (order, local) = ir.component_order(root);
    let keep: Vec<bool> = order
        .iter()
        .enumerate()
        .map(|(i, &r)| i == 0 || always.get(r as usize).copied().unwrap_or(false))
        .collect();
    let view = RulesView {
        grammar: ir,
        part: Some((&order, &local)),
    };
    let simplified = simplify_repeats(inline_rules_of(view, &keep, &[]))?;
    Ok(lower_repeats(simplified))
}

#[cfg(test)]
#[path = "deferred_tests.rs"]
mod tests;
