//! The engines under test, behind one trait, and the teacher-forcing driver that times them.

use std::sync::Arc;
use std::time::Instant;

use indicatif::ProgressBar;
use rayon::prelude::*;
use serde_json::Value;
use tokensieve::{
    CompiledGrammar, GrammarCompiler, GrammarMatcher, JsonSchemaOptions, StructuralTag,
};

use super::BenchError;

/// A schema with its valid instances already tokenised (the stop token not included).
#[derive(Clone, Debug)]
pub struct Case {
    /// `<collection>/<file>`.
    pub name: String,
    /// The JSON Schema.
    pub schema: Value,
    /// Token ids of each valid instance.
    pub instances: Vec<Vec<u32>>,
}

/// A constrained-decoding engine, as the bench drives it. Only `compile`, `matcher`, `fill`
/// and `accept` are timed; the other methods run outside the timed regions.
pub trait Engine: Sync {
    /// A compiled grammar, shared by the matchers of its instances.
    type Grammar;
    /// One sequence's state.
    type Matcher;
    /// Where `fill` leaves the mask.
    type Mask;
    /// A structural tag in the engine's own grammar language.
    type TagSource;

    /// The engine's name in tables.
    fn name(&self) -> &'static str;
    /// A mask buffer.
    fn new_mask(&self) -> Self::Mask;
    /// Compiles a schema (given by value: cloning it is not timed).
    fn compile(&self, schema: Value) -> Result<Self::Grammar, String>;
    /// `tag` in the engine's grammar language (not timed: the bench's harness, not the
    /// engine's work).
    fn tag_source(&self, tag: &StructuralTag) -> Result<Self::TagSource, String>;
    /// Compiles a structural tag given by [`Engine::tag_source`].
    fn compile_tag(&self, source: Self::TagSource) -> Result<Self::Grammar, String>;
    /// A fresh matcher at the start of the grammar.
    fn matcher(&self, grammar: &Self::Grammar) -> Result<Self::Matcher, String>;
    /// Computes the mask of the next token.
    fn fill(&self, matcher: &mut Self::Matcher, mask: &mut Self::Mask) -> Result<(), String>;
    /// How many tokens the last filled mask allows.
    fn allowed_count(&self, mask: &Self::Mask) -> usize;
    /// Whether the last filled mask allows `token`.
    fn is_allowed(&self, mask: &Self::Mask, token: u32) -> bool;
    /// Advances by `token`; false when the engine rejects it.
    fn accept(&self, matcher: &mut Self::Matcher, token: u32) -> bool;
    /// Heap bytes of a compiled grammar (after its instances ran), when the engine says.
    fn memory_bytes(&self, grammar: &Self::Grammar) -> Option<usize>;
}

/// How an instance ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every token and then the stop token were accepted.
    Accepted,
    /// The token at this step (0-based; the stop token is step `tokens.len()`) was rejected.
    Rejected { step: usize },
    /// The mask at this step could not be computed.
    MaskError { step: usize },
}

/// One instance, teacher-forced: per step, the mask time and the accept time.
#[derive(Clone, Debug)]
pub struct InstanceRun {
    /// µs of each `fill` (one per step reached).
    pub mask_us: Vec<f32>,
    /// Per step: the mask allowed exactly one token.
    pub forced: Vec<bool>,
    /// µs of each `accept` (one per step reached, the failing one included).
    pub accept_us: Vec<f32>,
    /// Steps whose mask disagreed with `accept` on the forced token (bit clear but
    /// accepted, or bit set but rejected).
    pub mask_mismatches: usize,
    /// How it ended.
    pub outcome: Outcome,
}

/// One schema under one engine.
#[derive(Clone, Debug)]
pub struct SchemaRun {
    /// The schema (`<collection>/<file>`), so a report's runs can be read alone.
    pub schema: String,
    /// ms from the schema to the first mask (compile, matcher, first fill); `None` when the
    /// engine refused the schema or failed on its first mask.
    pub compile_ms: Option<f64>,
    /// Why it failed (first line of the engine's message).
    pub error: Option<String>,
    /// [`Engine::memory_bytes`] after every instance ran.
    pub memory_bytes: Option<usize>,
    /// One per instance of the case (empty when the schema failed).
    pub instances: Vec<InstanceRun>,
}

fn micros(t: Instant) -> f32 {
    (t.elapsed().as_secs_f64() * 1e6) as f32
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    let mut out: String = line.chars().take(160).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    out
}

/// Compiles `case.schema` (timing compile → first mask), then teacher-forces each instance
/// followed by `stop`, timing every `fill` and `accept`.
pub fn run_case<E: Engine>(engine: &E, case: &Case, stop: u32) -> SchemaRun {
    let schema = case.schema.clone();
    let mut mask = engine.new_mask();
    let t = Instant::now();
    let first = engine.compile(schema).and_then(|g| {
        let mut m = engine.matcher(&g)?;
        engine.fill(&mut m, &mut mask)?;
        Ok(g)
    });
    let compile_ms = t.elapsed().as_secs_f64() * 1e3;
    let grammar = match first {
        Ok(g) => g,
        Err(e) => {
            return SchemaRun {
                schema: case.name.clone(),
                compile_ms: None,
                error: Some(first_line(&e)),
                memory_bytes: None,
                instances: Vec::new(),
            }
        }
    };
    let mut instances = Vec::with_capacity(case.instances.len());
    for ids in &case.instances {
        instances.push(run_instance(engine, &grammar, &mut mask, ids, stop));
    }
    SchemaRun {
        schema: case.name.clone(),
        compile_ms: Some(compile_ms),
        error: None,
        memory_bytes: engine.memory_bytes(&grammar),
        instances,
    }
}

fn run_instance<E: Engine>(
    engine: &E,
    grammar: &E::Grammar,
    mask: &mut E::Mask,
    ids: &[u32],
    stop: u32,
) -> InstanceRun {
    let steps = ids.len() + 1;
    let mut run = InstanceRun {
        mask_us: Vec::with_capacity(steps),
        forced: Vec::with_capacity(steps),
        accept_us: Vec::with_capacity(steps),
        mask_mismatches: 0,
        outcome: Outcome::Accepted,
    };
    let mut m = match engine.matcher(grammar) {
        Ok(m) => m,
        Err(_) => {
            run.outcome = Outcome::MaskError { step: 0 };
            return run;
        }
    };
    for (step, &token) in ids.iter().chain(std::iter::once(&stop)).enumerate() {
        let t = Instant::now();
        let filled = engine.fill(&mut m, mask);
        let us = micros(t);
        if filled.is_err() {
            run.outcome = Outcome::MaskError { step };
            return run;
        }
        run.mask_us.push(us);
        run.forced.push(engine.allowed_count(mask) == 1);
        let bit = engine.is_allowed(mask, token);
        let t = Instant::now();
        let ok = engine.accept(&mut m, token);
        run.accept_us.push(micros(t));
        if bit != ok {
            run.mask_mismatches += 1;
        }
        if !ok {
            run.outcome = Outcome::Rejected { step };
            return run;
        }
    }
    run
}

/// Runs every case on a rayon pool of `threads` threads (each call still timed alone),
/// advancing `progress` once per schema. Results are in the order of `cases`.
pub fn run_all<E: Engine>(
    engine: &E,
    cases: &[Case],
    stop: u32,
    threads: usize,
    progress: &ProgressBar,
) -> Result<Vec<SchemaRun>, BenchError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| BenchError::Pool(e.to_string()))?;
    Ok(pool.install(|| {
        cases
            .par_iter()
            .map(|case| {
                let r = run_case(engine, case, stop);
                progress.inc(1);
                r
            })
            .collect()
    }))
}

/// tokensieve through its public API: `compile_json_schema`, `GrammarMatcher`.
pub struct Tokensieve {
    compiler: GrammarCompiler,
    options: JsonSchemaOptions,
}

impl Tokensieve {
    /// An engine compiling with `compiler` (its vocabulary and precompute mode) and `options`.
    pub fn new(compiler: GrammarCompiler, options: JsonSchemaOptions) -> Self {
        Tokensieve { compiler, options }
    }
}

impl Engine for Tokensieve {
    type Grammar = Arc<CompiledGrammar>;
    type Matcher = GrammarMatcher;
    type Mask = Vec<u32>;
    type TagSource = StructuralTag;

    fn name(&self) -> &'static str {
        "tokensieve"
    }
    fn new_mask(&self) -> Vec<u32> {
        vec![0; self.compiler.vocabulary().bitmask_words()]
    }
    fn compile(&self, schema: Value) -> Result<Self::Grammar, String> {
        self.compiler
            .compile_json_schema(&schema, &self.options)
            .map_err(|e| e.to_string())
    }
    fn tag_source(&self, tag: &StructuralTag) -> Result<StructuralTag, String> {
        Ok(tag.clone())
    }
    fn compile_tag(&self, tag: StructuralTag) -> Result<Self::Grammar, String> {
        self.compiler
            .compile_structural_tag(&tag)
            .map_err(|e| e.to_string())
    }
    fn matcher(&self, grammar: &Self::Grammar) -> Result<GrammarMatcher, String> {
        Ok(GrammarMatcher::new(grammar.clone()))
    }
    fn fill(&self, matcher: &mut GrammarMatcher, mask: &mut Vec<u32>) -> Result<(), String> {
        matcher
            .fill_next_token_bitmask(mask)
            .map_err(|e| e.to_string())
    }
    fn allowed_count(&self, mask: &Vec<u32>) -> usize {
        mask.iter().map(|w| w.count_ones() as usize).sum()
    }
    fn is_allowed(&self, mask: &Vec<u32>, token: u32) -> bool {
        tokensieve::mask::is_token_allowed(mask, token)
    }
    fn accept(&self, matcher: &mut GrammarMatcher, token: u32) -> bool {
        matcher.accept_token(token)
    }
    fn memory_bytes(&self, grammar: &Self::Grammar) -> Option<usize> {
        Some(grammar.memory_bytes())
    }
}

/// llguidance 1.9.1: `ParserFactory::create_parser`, `Matcher::compute_mask_or_eos` /
/// `consume_token`. A compiled grammar is a fresh `Matcher`; each instance runs on a
/// (shallow) clone of it, which shares its lexer caches, as tokensieve's matchers share
/// their compiled grammar.
#[cfg(feature = "llguidance")]
pub struct Llguidance {
    factory: llguidance::ParserFactory,
    stop: u32,
    /// The tokens llguidance counts as special (`(text, id)`), for the Lark form of tags.
    specials: Vec<(String, u32)>,
}

#[cfg(feature = "llguidance")]
impl Llguidance {
    /// Loads `tokenizer.json` with `toktrie_hf_tokenizers`, with `stop` as its one end of
    /// sequence token (so both engines end on the same token).
    pub fn new(tokenizer: &std::path::Path, stop: u32) -> Result<Self, BenchError> {
        let fail = |e: String| BenchError::Llguidance {
            path: tokenizer.to_path_buf(),
            message: e,
        };
        let mut bt = toktrie_hf_tokenizers::ByteTokenizer::from_file(tokenizer)
            .map_err(|e| fail(format!("{e:#}")))?;
        if stop >= bt.tokrx_info().vocab_size {
            return Err(fail(format!("stop token {stop} is past its vocabulary")));
        }
        bt.set_eos_token(stop);
        let env = bt.into_tok_env(None).map_err(|e| fail(format!("{e:#}")))?;
        let trie = env.tok_trie();
        let specials = (0..trie.vocab_size() as u32)
            .filter_map(|id| match trie.token(id) {
                [marker, text @ ..]
                    if *marker == llguidance::toktrie::TokTrie::SPECIAL_TOKEN_MARKER
                        && !text.is_empty() =>
                {
                    Some((String::from_utf8_lossy(text).into_owned(), id))
                }
                _ => None,
            })
            .collect();
        let mut factory =
            llguidance::ParserFactory::new_simple(&env).map_err(|e| fail(format!("{e:#}")))?;
        factory.quiet();
        Ok(Llguidance {
            factory,
            stop,
            specials,
        })
    }
}

#[cfg(feature = "llguidance")]
impl Engine for Llguidance {
    type Grammar = llguidance::Matcher;
    type Matcher = llguidance::Matcher;
    type Mask = Option<llguidance::toktrie::SimpleVob>;
    type TagSource = String;

    fn name(&self) -> &'static str {
        "llguidance"
    }
    fn new_mask(&self) -> Self::Mask {
        None
    }
    fn compile(&self, schema: Value) -> Result<Self::Grammar, String> {
        let grammar = llguidance::api::TopLevelGrammar::from_json_schema(schema);
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| format!("{e:#}"))?;
        Ok(llguidance::Matcher::new(Ok(parser)))
    }
    fn tag_source(&self, tag: &StructuralTag) -> Result<String, String> {
        super::lark::structural_tag_to_lark(tag, &self.specials)
    }
    fn compile_tag(&self, lark: String) -> Result<Self::Grammar, String> {
        let grammar = llguidance::api::TopLevelGrammar::from_lark(lark);
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| format!("{e:#}"))?;
        Ok(llguidance::Matcher::new(Ok(parser)))
    }
    fn matcher(&self, grammar: &Self::Grammar) -> Result<Self::Matcher, String> {
        Ok(grammar.clone())
    }
    fn fill(&self, matcher: &mut Self::Matcher, mask: &mut Self::Mask) -> Result<(), String> {
        // Once the grammar cannot go on, llguidance stops the parser and `compute_mask`
        // fails; `compute_mask_or_eos` then gives the stop token alone, as a server does.
        *mask = Some(
            matcher
                .compute_mask_or_eos()
                .map_err(|e| format!("{e:#}"))?,
        );
        Ok(())
    }
    fn allowed_count(&self, mask: &Self::Mask) -> usize {
        mask.as_ref().map_or(0, |m| m.num_set())
    }
    fn is_allowed(&self, mask: &Self::Mask, token: u32) -> bool {
        mask.as_ref()
            .is_some_and(|m| (token as usize) < m.len() && m.is_allowed(token))
    }
    fn accept(&self, matcher: &mut Self::Matcher, token: u32) -> bool {
        // A stopped parser (the grammar cannot go on) takes no more tokens, not even the
        // stop token its mask allows: a server ends the sequence there.
        if matcher.is_stopped() && !matcher.is_error() {
            return token == self.stop;
        }
        matcher.consume_token(token).is_ok()
    }
    fn memory_bytes(&self, _: &Self::Grammar) -> Option<usize> {
        None
    }
}
