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
mod tests {
    use super::Seeded;
    use crate::{GrammarCompiler, Precompute, Vocabulary};
    use std::sync::Arc;

    /// Bytes, every pair of printable ASCII characters (past the token count at which
    /// masks are shared, so mask classes are refined) and a stop token.
    fn wide_vocabulary() -> Arc<Vocabulary> {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for a in b' '..=b'~' {
            for b in b' '..=b'~' {
                tokens.push(vec![a, b]);
            }
        }
        let stop = tokens.len() as u32;
        tokens.push(b"</s>".to_vec());
        Arc::new(Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap())
    }

    /// A tag over `tools` tools of three properties each (no others), whitespace capped at 12 characters
    /// with one line feed (what the tool families set), compiled deferring its tools.
    fn capped_whitespace_tag(tools: usize) -> crate::StructuralTag {
        capped_whitespace_tag_with(tools, serde_json::json!({}))
    }

    /// [`capped_whitespace_tag`] with the optional properties `more` in every tool.
    fn capped_whitespace_tag_with(tools: usize, more: serde_json::Value) -> crate::StructuralTag {
        let schemas = (0..tools).map(|i| {
            let mut properties = serde_json::json!({
                format!("p{i}"): {"type": "string"},
                "n": {"type": "integer"},
                "flag": {"type": "boolean"}
            });
            for (k, v) in more.as_object().into_iter().flatten() {
                properties[k] = v.clone();
            }
            serde_json::json!({
                "type": "object",
                "properties": properties,
                "required": [format!("p{i}"), "n"],
                "additionalProperties": false
            })
        });
        capped_tag(schemas, &[])
    }

    /// A tag over tools `tool_{i}` of the arguments schemas `schemas`, whitespace capped
    /// as [`capped_whitespace_tag`]'s, strings free of `excludes` (as Hermes's are of
    /// `</tool_call>`).
    fn capped_tag(
        schemas: impl Iterator<Item = serde_json::Value>,
        excludes: &[&str],
    ) -> crate::StructuralTag {
        let tags: Vec<serde_json::Value> = schemas
            .enumerate()
            .map(|(i, schema)| {
                serde_json::json!({
                    "type": "tag",
                    "begin": format!("<tool_call>\n{{\"name\": \"tool_{i}\", \"arguments\": "),
                    "content": {
                        "type": "json_schema",
                        "json_schema": schema,
                        "max_whitespace": 12,
                        "max_whitespace_newlines": 1,
                        "string_excludes": excludes
                    },
                    "end": "}\n</tool_call>",
                })
            })
            .collect();
        crate::StructuralTag::from_json(&serde_json::json!({
            "type": "structural_tag",
            "format": {
                "type": "triggered_tags",
                "triggers": ["<tool_call>"],
                "tags": tags,
                "at_least_one": false,
                "stop_after_first": false,
            }
        }))
        .unwrap()
    }

    /// A Hermes-like tag over four tools `tool_{i}`, each an object of a required string
    /// `p{i}` and the properties `more`.
    fn four_tool_tag(more: serde_json::Value) -> crate::StructuralTag {
        let tools: Vec<(String, serde_json::Value)> = (0..4)
            .map(|i| {
                let mut properties = more.clone();
                properties[format!("p{i}")] = serde_json::json!({"type": "string"});
                let schema = serde_json::json!({
                    "type": "object",
                    "properties": properties,
                    "required": [format!("p{i}")]
                });
                (format!("tool_{i}"), schema)
            })
            .collect();
        crate::structural_tag::hermes_like_tag(&tools, false)
    }

    /// A tool build keeps capped whitespace as one rule that the tool's automata call,
    /// instead of writing it out at each of the arguments' places of whitespace (about 26
    /// states each): the tool's automata in the build have under a third of the nodes they
    /// have in the same tag compiled whole (whitespace inlined), and the build's rules hold
    /// the whitespace rule.
    #[test]
    fn a_tool_build_calls_its_whitespace_rule_instead_of_inlining_it() {
        let tag = capped_whitespace_tag(1);
        let vocab = wide_vocabulary();
        let lazy = GrammarCompiler::new(vocab.clone()).with_precompute(Precompute::Lazy);
        let whole = lazy
            .clone()
            .with_deferred_tool_rules(false)
            .compile_structural_tag(&tag)
            .unwrap();
        assert!(whole.deferred.is_none());
        let g = lazy
            .clone()
            .with_deferred_tool_rules(true)
            .compile_structural_tag(&tag)
            .unwrap();
        let d = g.deferred.as_deref().expect("the tag defers its tool");
        let built = d.expand(None).unwrap();
        assert!(built.deferred.is_none());
        let ws_rules = built
            .aut
            .rule_names
            .iter()
            .filter(|n| n.contains("_ws"))
            .count();
        assert_eq!(ws_rules, 1, "rules: {:?}", built.aut.rule_names);
        // The nodes of the tool's rules (the tag's own rules are the same in both).
        let tool_nodes = |aut: &crate::automaton::Automaton| {
            aut.nodes
                .iter()
                .filter(|n| aut.rule_names[n.rule as usize].starts_with("json_"))
                .count()
        };
        let (small, large) = (tool_nodes(&built.aut), tool_nodes(&whole.aut));
        assert!(
            3 * small < large,
            "{small} nodes built, {large} with the whitespace inlined"
        );
    }

    /// Builds leave the stub grammar as it was: its lowered IR (which the builds of a stub
    /// grammar with dead ends splice their tools into in place, and take them out of
    /// again) and the copy of its automaton that builds splice into, after a build of one
    /// tool, of three (from a grammar with one built), and after a build that fails on a
    /// limit. These builds are spliced into the automaton (their stubs' nodes are left
    /// in rules of their own).
    #[test]
    fn a_build_leaves_the_stub_grammar_as_it_was() {
        let tag = four_tool_tag(serde_json::json!({"n": {"type": "integer"}}));
        let compile = |limits: crate::Limits| {
            GrammarCompiler::new(wide_vocabulary())
                .with_precompute(Precompute::Lazy)
                .with_limits(limits)
                .with_deferred_tool_rules(true)
                .compile_structural_tag(&tag)
                .unwrap()
        };
        let base = |g: &crate::CompiledGrammar| {
            let d = g.deferred.as_deref().expect("the tag defers its tools");
            let base = d.shared.base.get().expect("kept by the compile");
            let aut = &d.shared.spliceable.get().expect("kept by the compile").aut;
            format!("{:?} {aut:?}", base.lock().unwrap())
        };
        let g = compile(crate::Limits::default());
        let before = base(&g);
        let d = g.deferred.as_deref().unwrap();
        let mut stubs: Vec<u32> = d.stub_roots.keys().copied().collect();
        stubs.sort_unstable();
        let one = d.expand(Some(&stubs[1..2])).unwrap();
        assert!(one.aut.nodes.len() > g.aut.nodes.len());
        assert!(one.aut.rule_names.iter().any(|n| n.ends_with("#stub")));
        assert_eq!(base(&g), before, "after a build of one tool");
        let more = one.deferred.as_deref().unwrap();
        let mut left: Vec<u32> = more.stub_roots.keys().copied().collect();
        left.sort_unstable();
        let three = more.expand(Some(&left[..2])).unwrap();
        assert_eq!(three.deferred.as_deref().unwrap().stubs(), 1);
        assert_eq!(base(&g), before, "after a build of three tools");
        // A limit that the stub grammar meets and every build exceeds.
        let limits = crate::Limits {
            max_automaton_nodes: g.aut.nodes.len(),
            ..crate::Limits::default()
        };
        let tight = compile(limits);
        let before = base(&tight);
        let d = tight.deferred.as_deref().unwrap();
        let mut stubs: Vec<u32> = d.stub_roots.keys().copied().collect();
        stubs.sort_unstable();
        let err = d.expand(Some(&stubs[..1])).unwrap_err();
        assert!(err.contains("automaton"), "{err}");
        assert_eq!(base(&tight), before, "after a build that failed");
    }

    /// A deferring compile builds into the compiler's cache the automata of what its tools
    /// share (the tag's JSON string and generic value rules, the capped whitespace and the
    /// integer rule of each tool), so that the first build of a tool builds only the rules
    /// of its own schema; the warm-up leaves the tag's language as it was.
    #[test]
    fn the_compile_builds_what_the_tools_share_so_a_build_builds_only_its_own_rules() {
        let more = serde_json::json!({"s": {"type": "string"}, "meta": {}});
        let g = build_counting(capped_whitespace_tag_with(4, more), 2, (8, 2));
        // Found: the tag's string rule, both whitespace rules (the tool's and the generic
        // value's), the generic value (which the untyped `meta` calls) and its object and
        // array, the integer, and one of the arguments' rules (its body is that of one
        // built just before it). Built: the tool's root and its arguments' object rule.
        let mut m = crate::GrammarMatcher::new(g);
        assert!(m.accept_string("<tool_call>\n{\"name\": \"tool_2\", \"arguments\": {\"p2\": \"x\", \"n\": 1, \"s\": \"y\", \"meta\": [{\"k\": null}]}}\n</tool_call>"));
    }

    /// A tag without string excludes writes its JSON string out in one rule, which a tool
    /// with two strings calls from both: the compile builds it as a rule too (it calls it
    /// twice; called once, it was inlined there and built by each such tool).
    #[test]
    fn the_compile_builds_the_string_rule_that_tools_call_twice() {
        let more = serde_json::json!({"s": {"type": "string"}});
        // Found: the string, the whitespace and the integer. Built: the tool's root and
        // object rule.
        build_counting(capped_whitespace_tag_with(4, more), 2, (3, 1));
    }

    /// Compiles `tag` deferring its tools, builds tool `tool` alone, and asserts that the
    /// build found `want.0` rule automata in the compiler's cache and built `want.1`.
    /// Returns the compiled tag.
    fn build_counting(
        tag: crate::StructuralTag,
        tool: usize,
        want: (u64, u64),
    ) -> std::sync::Arc<crate::CompiledGrammar> {
        let compiler = GrammarCompiler::new(wide_vocabulary())
            .with_precompute(Precompute::Lazy)
            .with_deferred_tool_rules(true);
        let g = compiler.compile_structural_tag(&tag).unwrap();
        let d = g.deferred.as_deref().expect("the tag defers its tools");
        let mut stubs: Vec<u32> = d.stub_roots.keys().copied().collect();
        stubs.sort_unstable();
        let before = compiler.rule_automaton_cache_stats();
        let built = d.expand(Some(&stubs[tool..tool + 1])).unwrap();
        let after = compiler.rule_automaton_cache_stats();
        let (hits, fresh) = (after.hits - before.hits, after.builds - before.builds);
        let names = &built.aut.rule_names;
        assert_eq!((hits, fresh), want, "{before:?} then {after:?}; {names:?}");
        g
    }

    /// As above, for tools whose members are untyped but one string (BFCL's
    /// `FireBirdUtils.getViewSourceWithHeader`), with strings that avoid the end marker
    /// (so the tag's string is a small rule that calls its body): the compile lowers the
    /// generic value as a build does, inlining the string's small rule into it (the
    /// compile kept that rule, so a build built the generic value again: 6% of the first
    /// build of BFCL's tool, 7.6M instructions), and the untyped members call the generic
    /// value (they wrote every JSON type out, most of the tool's states).
    #[test]
    fn a_build_finds_the_generic_value_of_tools_with_untyped_members() {
        let schemas = (0..4).map(|i| {
            serde_json::json!({
                "type": "object",
                "properties": {format!("m{i}"): {}, "view": {}, "source": {"type": "string"}},
                "required": [format!("m{i}"), "view", "source"],
                "additionalProperties": false
            })
        });
        // Built: the tool's root (its arguments object). Found: the string's body, the
        // generic value and its object and array, and the two whitespace rules.
        let g = build_counting(capped_tag(schemas, &["</tool_call>"]), 1, (6, 1));
        let mut m = crate::GrammarMatcher::new(g);
        assert!(m.accept_string("<tool_call>\n{\"name\": \"tool_1\", \"arguments\": {\"m1\": {\"a\": [1, \"b\"]}, \"view\": \"v\", \"source\": \"s\"}}\n</tool_call>"));
    }

    /// A build whose tool calls the number and integer rules (a number ends where the next
    /// byte says, so a token such as `2}` or `5,` crosses the rule's end) masks as the
    /// whole grammar at every byte of calls into two of the tools, and along seeded random
    /// walks into each.
    #[test]
    fn a_build_with_number_calls_masks_as_the_whole_grammar() {
        let more = serde_json::json!({
            "x": {"type": "number"},
            "k": {"type": "array", "items": {"type": "integer"}}
        });
        let tag = capped_whitespace_tag_with(3, more);
        let vocab = wide_vocabulary();
        let lazy = GrammarCompiler::new(vocab.clone()).with_precompute(Precompute::Lazy);
        let whole = lazy
            .clone()
            .with_deferred_tool_rules(false)
            .compile_structural_tag(&tag)
            .unwrap();
        let deferred = lazy
            .with_deferred_tool_rules(true)
            .compile_structural_tag(&tag)
            .unwrap();
        assert!(deferred.deferred.is_some(), "the tag defers its tools");
        let masks = |m: &mut crate::GrammarMatcher| {
            let mut k = vec![0u32; vocab.bitmask_words()];
            m.fill_next_token_bitmask(&mut k).unwrap();
            k
        };
        let calls = [
            "<tool_call>\n{\"name\": \"tool_0\", \"arguments\": {\"p0\": \"a\", \"n\": -120, \"flag\": true, \"x\": 0.25e-3, \"k\": [1, 22,333]}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"tool_2\", \"arguments\": {\"p2\": \"b\",\n \"n\": 7.00,\"x\": -0,\"k\": [0 ]}}\n</tool_call>",
        ];
        for call in calls {
            let mut a = crate::GrammarMatcher::new(whole.clone());
            let mut b = crate::GrammarMatcher::new(deferred.clone());
            for (i, byte) in call.bytes().enumerate() {
                assert_eq!(masks(&mut a), masks(&mut b), "{call:?} at byte {i}");
                let t = byte as u32;
                assert!(
                    a.accept_token(t) && b.accept_token(t),
                    "{call:?} at byte {i}"
                );
            }
            assert_eq!(masks(&mut a), masks(&mut b), "{call:?} at its end");
        }
        let mut rand = crate::automaton::minimize::tests::xorshift(0x9e37_79b9_7f4a_7c15);
        for tool in 0..3 {
            for _ in 0..6 {
                let mut a = crate::GrammarMatcher::new(whole.clone());
                let mut b = crate::GrammarMatcher::new(deferred.clone());
                let prefix = format!(
                    "<tool_call>\n{{\"name\": \"tool_{tool}\", \"arguments\": {{\"p{tool}\": \"v\", \"n\": "
                );
                assert!(a.accept_string(&prefix) && b.accept_string(&prefix));
                for step in 0..60 {
                    let ka = masks(&mut a);
                    assert_eq!(ka, masks(&mut b), "tool {tool}, step {step}");
                    let allowed: Vec<u32> = (0..vocab.tokenizer_size() as u32)
                        .filter(|&t| ka[(t / 32) as usize] >> (t % 32) & 1 == 1)
                        .filter(|&t| vocab.token_bytes(t).is_some_and(|b| !b.is_empty()))
                        .collect();
                    if allowed.is_empty() {
                        break;
                    }
                    let t = allowed[rand(allowed.len() as u64) as usize];
                    assert!(
                        a.accept_token(t) && b.accept_token(t),
                        "tool {tool}, step {step}"
                    );
                }
            }
        }
    }

    /// A build's mask classes are refined from the stub grammar's, starting at the tool
    /// built: they are stable (nodes of a class have equal masks), about as coarse as a
    /// refinement of the whole built grammar, and the stub grammar's classes of the rules
    /// left as they were are kept.
    #[test]
    fn a_build_refines_its_mask_classes_from_the_stub_grammars() {
        let tag = four_tool_tag(serde_json::json!({"n": {"type": "integer"}, "any": {}}));
        let compiler = GrammarCompiler::new(wide_vocabulary())
            .with_precompute(Precompute::Lazy)
            .with_deferred_tool_rules(true);
        let g = compiler.compile_structural_tag(&tag).unwrap();
        let d = g.deferred.as_deref().expect("the tag defers its tools");
        assert!(
            d.shared.seed.get().is_some(),
            "the stub grammar keeps its classes"
        );
        assert!(g.aut.is_stable_partition(&g.mask_class));
        let mut stubs: Vec<u32> = d.stub_roots.keys().copied().collect();
        stubs.sort_unstable();
        assert_eq!(stubs.len(), 4);
        let built = d.expand(Some(&stubs[1..2])).unwrap();
        assert!(built.deferred.is_some(), "three tools are still stubs");
        assert!(built.aut.is_stable_partition(&built.mask_class));
        let deadline = crate::limits::Deadline::never();
        let (_, coarsest) = built.aut.mask_classes(&deadline).unwrap();
        let classes = built.masks.len();
        assert!(
            classes >= coarsest && classes <= coarsest + coarsest / 20,
            "{classes} classes, the coarsest has {coarsest}"
        );
        // The build took the seeded refinement (not its fallback): the tool's slot and
        // the rules after the stub grammar's are the rebuilt ones.
        let slot = &g.aut.rule_names[stubs[1] as usize];
        let old_rules = g.aut.rule_names.len();
        let rebuilt: Vec<bool> = (0..built.aut.rule_names.len())
            .map(|r| r >= old_rules || &built.aut.rule_names[r] == slot)
            .collect();
        let seed = d.shared.seed.get().unwrap();
        assert!(d.shared.spliceable.get().is_some(), "the build was spliced");
        let seeded = Seeded {
            seed,
            rebuilt: &rebuilt[..old_rules],
            spliced: true,
        };
        let (class, count) = built
            .aut
            .mask_classes_seeded(seeded, &deadline)
            .unwrap()
            .expect("a splice always refines");
        assert_eq!(count, classes);
        assert_eq!(class, built.mask_class);
        // Every tool built, from the stub grammar too.
        let all = d.expand(None).unwrap();
        assert!(all.deferred.is_none());
        assert!(all.aut.is_stable_partition(&all.mask_class));
    }

    /// `tag` compiled deferring its tools on `vocab` (lazily), the stub grammar keeping its
    /// automaton for builds to splice into; with its stub rules, ascending.
    fn stub_grammar(
        tag: &crate::StructuralTag,
        vocab: Arc<Vocabulary>,
    ) -> (Arc<crate::CompiledGrammar>, Vec<u32>) {
        let g = GrammarCompiler::new(vocab)
            .with_precompute(Precompute::Lazy)
            .with_deferred_tool_rules(true)
            .compile_structural_tag(tag)
            .unwrap();
        let d = g.deferred.as_deref().expect("the tag defers its tools");
        assert!(
            d.shared.spliceable.get().is_some(),
            "the compile keeps its automaton"
        );
        let mut stubs: Vec<u32> = d.stub_roots.keys().copied().collect();
        stubs.sort_unstable();
        (g, stubs)
    }

    /// A build keeps the stub grammar's nullability and follow bytes and solves only its
    /// tools' (`Automaton::solve_appended`; in tests, each such splice is checked against
    /// the whole computation: same nullability, follow sets that hold the exact ones).
    /// Builds of one tool, of a second from there, and of every tool take that path.
    #[test]
    fn a_build_solves_follow_bytes_over_its_tools_alone() {
        use crate::automaton::splice::APPENDED;
        let optional = serde_json::json!({"type": "array", "items": {"type": "integer"}});
        let tag = four_tool_tag(serde_json::json!({ "list": optional, "n": {"type": "number"} }));
        let (g, stubs) = stub_grammar(&tag, wide_vocabulary());
        let d = g.deferred.as_deref().unwrap();
        let before = APPENDED.with(|c| c.get());
        let one = d.expand(Some(&stubs[1..2])).unwrap();
        let two = one
            .deferred
            .as_deref()
            .unwrap()
            .expand(Some(&stubs[2..3]))
            .unwrap();
        let all = d.expand(None).unwrap();
        assert_eq!(APPENDED.with(|c| c.get()) - before, 3);
        assert_eq!(two.deferred.as_deref().map(|d| d.stubs()), Some(2));
        // Mask classes refined from the stub grammar's over the tools alone are stable.
        for built in [&one, &two, &all] {
            assert!(built.aut.is_stable_partition(&built.mask_class));
        }
        assert!(all.deferred.is_none());
        let mut m = crate::GrammarMatcher::new(all.clone());
        assert!(m.accept_string(
            "<tool_call>\n{\"name\": \"tool_2\", \"arguments\": {\"list\": [1, 2], \"n\": 1.5, \"p2\": \"x\"}}\n</tool_call>"
        ));
    }

    /// The same with tools that call their own root (a tree of `$ref: "#"`) and a counted
    /// repetition (an array of 2 to 40 items): each build's follow bytes, pruning and
    /// classes are checked against the whole computations (in tests, inside the build).
    #[test]
    fn recursive_and_counted_tools_build_over_their_own_nodes() {
        use crate::automaton::splice::APPENDED;
        let tag = four_tool_tag(serde_json::json!({
            "children": {"type": "array", "items": {"$ref": "#"}},
            "ids": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 40}
        }));
        let (g, stubs) = stub_grammar(&tag, wide_vocabulary());
        let d = g.deferred.as_deref().unwrap();
        assert!(
            g.aut.counted.is_empty(),
            "the stub grammar has no counted rule"
        );
        let before = APPENDED.with(|c| c.get());
        let one = d.expand(Some(&stubs[3..4])).unwrap();
        assert_eq!(APPENDED.with(|c| c.get()) - before, 1);
        assert!(
            !one.aut.counted.is_empty(),
            "the build has the tool's counted rule"
        );
        assert!(one.aut.is_stable_partition(&one.mask_class));
        let mut m = crate::GrammarMatcher::new(g.clone());
        let ids: Vec<String> = (0..30).map(|i| i.to_string()).collect();
        let call = format!(
            "<tool_call>\n{{\"name\": \"tool_3\", \"arguments\": {{\"children\": [{{\"p3\": \"a\"}}, {{\"children\": [], \"p3\": \"b\"}}], \"ids\": [{}], \"p3\": \"c\"}}}}\n</tool_call>",
            ids.join(", ")
        );
        assert!(m.accept_string(&call), "{call}");
        let mut m = crate::GrammarMatcher::new(g);
        let refused = call.replace(&ids.join(", "), "1");
        assert!(!m.accept_string(&refused), "one id is too few");
    }

    /// A build splices its tool's automaton into a copy of the stub grammar's: the stub
    /// grammar's nodes keep their ids, rules and edges (but the stub's own, left with no
    /// edge in a rule of their own), the tool's nodes come after, in the stub's rule and
    /// new ones. The near-stub bounds carried over are lower bounds: at most those solved
    /// again on the whole automaton, and equal on the tool's nodes.
    #[test]
    fn a_build_splices_its_tool_into_the_stub_grammars_automaton() {
        let list = serde_json::json!({"type": "array", "items": {"type": "integer"}});
        let tag = four_tool_tag(serde_json::json!({ "list": list }));
        // A long token, so that bounds from the tool's nodes fall under the cap.
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for a in b' '..=b'~' {
            tokens.extend((b' '..=b'~').map(|b| vec![a, b]));
        }
        tokens.push(vec![b' '; 120]);
        let stop = tokens.len() as u32;
        tokens.push(b"</s>".to_vec());
        let vocab = Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap();
        let (g, stubs) = stub_grammar(&tag, Arc::new(vocab));
        let d = g.deferred.as_deref().unwrap();
        let slot = stubs[1];
        let one = d.expand(Some(&[slot])).unwrap();
        let (a, b) = (&g.aut, &one.aut);
        b.check_indices().unwrap();
        assert!(b.nodes.len() > a.nodes.len());
        for n in 0..a.nodes.len() as u32 {
            let (old, new) = (a.nodes[n as usize].rule, b.nodes[n as usize].rule);
            if old == slot {
                assert!(b.rule_names[new as usize].ends_with("#stub"), "node {n}");
                assert!(!b.has_edges(n) && !b.nodes[n as usize].is_final, "node {n}");
            } else {
                assert_eq!(new, old, "node {n}");
                assert_eq!(b.bytes_of(n), a.bytes_of(n), "node {n}");
                assert_eq!(b.calls_of(n), a.calls_of(n), "node {n}");
            }
        }
        let rules = a.rule_start.len() as u32;
        assert!(b.nodes[a.nodes.len()..]
            .iter()
            .all(|x| x.rule == slot || x.rule >= rules));
        assert_eq!(b.rule_start[slot as usize], a.nodes.len() as u32);
        // The bounds carried over against the same analysis solved on the whole.
        let near = &one.deferred.as_deref().expect("three tools left").near;
        let stub: Vec<bool> = (0..b.rule_start.len() as u32)
            .map(|r| near.is_stub(r))
            .collect();
        assert_eq!(stub.iter().filter(|&&s| s).count(), 3);
        let (dist, ret, reach) = near.bounds();
        let full = crate::automaton::defer::near_stubs(b, &stub, reach);
        let (full_dist, full_ret, _) = full.bounds();
        assert_eq!(dist.len(), full_dist.len());
        for n in 0..dist.len() {
            assert!(
                dist[n] <= full_dist[n],
                "node {n}: {} > {}",
                dist[n],
                full_dist[n]
            );
            if n >= a.nodes.len() {
                assert_eq!(dist[n], full_dist[n], "tool node {n}");
            }
        }
        assert!(ret.iter().zip(full_ret).all(|(x, y)| x <= y));
        assert!(dist[a.nodes.len()..].iter().any(|&x| x < reach));
    }
}
