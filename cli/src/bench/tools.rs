//! `tokensieve bench --tools N[,N…]`: the cold path of tool calling (issue 24). For each N,
//! a family's structural tag (`tool_choice` auto, parallel calls) over N distinct tools
//! taken from MaskBench's `BFCL_*` collections is compiled with a fresh compiler, then one
//! rendered call (`render_calls` of the family, with the arguments of a valid BFCL
//! instance) and the stop token are teacher-forced twice: the first pass meets every mask
//! cold, the second shows the steady state.
//!
//! A BFCL record's schema is an object with one property per function (or, for the
//! `multiple` collections, an `anyOf` of such objects), whose schema is the function's
//! parameters; its valid instance holds the arguments of one of them. Tools are taken in
//! file order (collections sorted by name), each name once.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tokensieve::{GrammarCompiler, Precompute, StructuralTag, Vocabulary};
use tokensieve_tools::{Tool, ToolCall, ToolCallFormat, ToolChoice};

use super::engine::{Engine, Tokensieve};
use super::records::{load_records, record_files};
use super::{BenchError, Encode};

/// One tool, with a call of it that its schema accepts when its record has one.
#[derive(Clone, Debug)]
pub struct ToolCase {
    /// The tool (name, parameters).
    pub tool: Tool,
    /// A valid call (the BFCL instance's arguments), when the record's instance calls it.
    pub call: Option<ToolCall>,
}

/// The distinct tools of the `BFCL_*` collections under `dir` (a MaskBench folder), in
/// file order, each with its record's valid call when the instance calls it.
///
/// # Errors
/// [`BenchError::NoRecords`] when no BFCL record gives a tool with a valid call; the I/O
/// and parse errors of the record reader.
pub fn load_tools(dir: &Path) -> Result<Vec<ToolCase>, BenchError> {
    let files: Vec<_> = record_files(dir)?
        .into_iter()
        .filter(|f| {
            f.components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with("BFCL_"))
        })
        .collect();
    let records = load_records(&files)?;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for r in records {
        let data = r
            .instances
            .first()
            .and_then(|t| serde_json::from_str::<Value>(t).ok());
        let branches: Vec<&Value> = match r.schema.get("anyOf").and_then(Value::as_array) {
            Some(list) => list.iter().collect(),
            None => vec![&r.schema],
        };
        for branch in branches {
            let Some(props) = branch.get("properties").and_then(Value::as_object) else {
                continue;
            };
            for (name, params) in props {
                if seen.contains(name) {
                    continue;
                }
                let Ok(tool) = Tool::new(name.clone(), String::new(), params.clone()) else {
                    continue;
                };
                seen.insert(name.clone());
                let call = data
                    .as_ref()
                    .and_then(|d| d.get(name))
                    .filter(|a| a.is_object())
                    .map(|a| ToolCall::new(name.clone(), a.clone()));
                out.push(ToolCase { tool, call });
            }
        }
    }
    if !out.iter().any(|c| c.call.is_some()) {
        return Err(BenchError::NoRecords {
            path: dir.to_path_buf(),
        });
    }
    Ok(out)
}

/// The figures of one tag under one engine.
#[derive(Clone, Debug, Serialize)]
pub struct ToolRun {
    /// The engine (`tokensieve`, `llguidance`).
    pub engine: &'static str,
    /// Tools in the tag.
    pub tools: usize,
    /// Tokens teacher-forced (the rendered call, then the stop token).
    pub tokens: usize,
    /// ms from the tag to the first mask (compile, matcher, first fill).
    pub compile_ms: f64,
    /// First pass (cold): mean, p99 and max of the masks after the first, µs.
    pub first_mean_us: f64,
    /// See `first_mean_us`.
    pub first_p99_us: f64,
    /// See `first_mean_us`.
    pub first_max_us: f64,
    /// Second pass, a fresh matcher on the same grammar: mean mask time, µs.
    pub second_mean_us: f64,
    /// The compiled grammar's heap bytes after both passes, when the engine says.
    pub memory_bytes: Option<usize>,
    /// Steps whose mask disagreed with `accept` on the forced token.
    pub mask_mismatches: usize,
    /// Every token and the stop token were accepted.
    pub accepted: bool,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() as f64 * p).ceil() as usize).clamp(1, s.len()) - 1]
}

/// One pass over `tokens` on a fresh matcher: the mask times (µs), mismatches, and
/// whether every token was accepted.
pub fn pass<E: Engine>(
    engine: &E,
    grammar: &E::Grammar,
    tokens: &[u32],
) -> (Vec<f64>, usize, bool) {
    let Ok(mut m) = engine.matcher(grammar) else {
        return (Vec::new(), 0, false);
    };
    let mut mask = engine.new_mask();
    let mut times = Vec::with_capacity(tokens.len());
    let mut mismatches = 0;
    for &t in tokens {
        let start = Instant::now();
        if engine.fill(&mut m, &mut mask).is_err() {
            return (times, mismatches, false);
        }
        times.push(start.elapsed().as_secs_f64() * 1e6);
        let allowed = engine.is_allowed(&mask, t);
        let ok = engine.accept(&mut m, t);
        if ok != allowed {
            mismatches += 1;
        }
        if !ok {
            return (times, mismatches, false);
        }
    }
    (times, mismatches, true)
}

/// One tag to bench: the family's tag over the first `tools` tools, and the tokens of one
/// rendered call followed by the stop token.
#[derive(Clone, Debug)]
pub struct ToolBench {
    /// Tools in the tag.
    pub tools: usize,
    /// The structural tag (`tool_choice` auto, parallel calls).
    pub tag: StructuralTag,
    /// The rendered call's token ids, then the stop token.
    pub tokens: Vec<u32>,
}

/// The tag over the first `n` of `cases` (all of them when fewer), with the call of the
/// last of those tools that has one, rendered by `format` and encoded by `encoder`,
/// followed by `stop`.
///
/// # Errors
/// None of the tools has a call; the family's or the encoder's message.
pub fn prepare(
    format: &dyn ToolCallFormat,
    cases: &[ToolCase],
    n: usize,
    encoder: &dyn Encode,
    stop: u32,
) -> Result<ToolBench, String> {
    let n = n.min(cases.len());
    let tools: Vec<Tool> = cases[..n].iter().map(|c| c.tool.clone()).collect();
    // The call: of the last tool among the n that has one, so that a grammar slow in the
    // number of tools shows it.
    let call = cases[..n]
        .iter()
        .rev()
        .find_map(|c| c.call.as_ref())
        .ok_or("none of these tools has a valid call in its record")?;
    let text = format.render_calls(std::slice::from_ref(call));
    let mut tokens = encoder.encode_text(&text)?;
    tokens.push(stop);
    let tag = format
        .structural_tag(&tools, &ToolChoice::Auto, true)
        .map_err(|e| e.to_string())?;
    Ok(ToolBench {
        tools: n,
        tag,
        tokens,
    })
}

/// Compiles `bench.tag` on `engine` (timing compile → first mask), then teacher-forces
/// its tokens twice on fresh matchers: the first pass meets the masks cold, the second
/// warm.
///
/// # Errors
/// The engine's message when the tag does not compile or its first mask fails.
pub fn run_engine<E: Engine>(engine: &E, bench: &ToolBench) -> Result<ToolRun, String> {
    let source = engine.tag_source(&bench.tag)?;
    let start = Instant::now();
    let grammar = compile_first_mask(engine, source)?;
    let compile_ms = start.elapsed().as_secs_f64() * 1e3;
    let (first, mm1, ok1) = pass(engine, &grammar, &bench.tokens);
    let (second, mm2, ok2) = pass(engine, &grammar, &bench.tokens);
    // The first mask of the first pass is the one compile → first mask already counted
    // (cold); the figures are over the rest.
    let first_rest = first.get(1..).unwrap_or(&[]);
    Ok(ToolRun {
        engine: engine.name(),
        tools: bench.tools,
        tokens: bench.tokens.len(),
        compile_ms,
        first_mean_us: mean(first_rest),
        first_p99_us: pct(first_rest, 0.99),
        first_max_us: first_rest.iter().copied().fold(0.0, f64::max),
        second_mean_us: mean(&second),
        memory_bytes: engine.memory_bytes(&grammar),
        mask_mismatches: mm1 + mm2,
        accepted: ok1 && ok2,
    })
}

/// Compiles `source` and fills a first mask on a matcher of it (the span `bench --tools`
/// times as compile → first mask).
///
/// # Errors
/// The engine's message.
pub fn compile_first_mask<E: Engine>(
    engine: &E,
    source: E::TagSource,
) -> Result<E::Grammar, String> {
    let mut mask = engine.new_mask();
    let grammar = engine.compile_tag(source)?;
    let mut m = engine.matcher(&grammar)?;
    engine.fill(&mut m, &mut mask)?;
    Ok(grammar)
}

/// tokensieve with a fresh compiler on `vocab` (no masks, grammars or rule automata from an
/// earlier tag; the vocabulary's trie is the vocabulary's, built once), no whole-grammar
/// cache.
pub fn tokensieve_engine(vocab: &Arc<Vocabulary>, precompute: Precompute) -> Tokensieve {
    let compiler = GrammarCompiler::new(vocab.clone())
        .with_precompute(precompute)
        .with_cache_enabled(false);
    Tokensieve::new(compiler, super::schema_options())
}

/// The table `bench --tools` prints: one row per run (engine × tools), then, for each
/// tag both engines ran, tokensieve's figure over llguidance's. `load` is the header's
/// note of the machine's load.
pub fn render(
    format: &str,
    tokenizer: &str,
    precompute: &str,
    load: &str,
    runs: &[ToolRun],
) -> String {
    let mut s = format!(
        "# tool-call tags: {format} (auto, parallel), tokenizer {tokenizer}, tokensieve \
         precompute {precompute}, fresh compiler per tag, one rendered call + stop \
         teacher-forced twice; {load}\n\n\
         | engine | tools | tokens | compile → first mask ms | first pass mean µs | p99 µs | \
         max µs | second pass mean µs | memory MiB | KiB per tool | accepted |\n\
         |:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|\n"
    );
    for r in runs {
        let mib = r.memory_bytes.map(|b| b as f64 / (1 << 20) as f64);
        let per_tool = r
            .memory_bytes
            .map(|b| b as f64 / 1024.0 / r.tools.max(1) as f64);
        s.push_str(&format!(
            "| {} | {} | {} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} | {} |\n",
            r.engine,
            r.tools,
            r.tokens,
            r.compile_ms,
            r.first_mean_us,
            r.first_p99_us,
            r.first_max_us,
            r.second_mean_us,
            mib.map_or("-".into(), |m| format!("{m:.2}")),
            per_tool.map_or("-".into(), |k| format!("{k:.1}")),
            if r.accepted && r.mask_mismatches == 0 {
                "yes".to_string()
            } else {
                format!("NO ({} mismatches)", r.mask_mismatches)
            }
        ));
    }
    let pairs: Vec<(&ToolRun, &ToolRun)> = runs
        .iter()
        .filter(|a| a.engine == "tokensieve")
        .filter_map(|a| {
            runs.iter()
                .find(|b| b.engine == "llguidance" && b.tools == a.tools)
                .map(|b| (a, b))
        })
        .collect();
    if !pairs.is_empty() {
        s.push_str(
            "\ntokensieve / llguidance (targets of issue 24: compile → first mask ≤ 1.0×, \
             first-pass mean ≤ 0.5×)\n\n\
             | tools | compile → first mask | first pass mean | p99 | max | second pass mean |\n\
             |--:|--:|--:|--:|--:|--:|\n",
        );
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                format!("{:.2}×", a / b)
            } else {
                "-".to_string()
            }
        };
        for (a, b) in pairs {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                a.tools,
                ratio(a.compile_ms, b.compile_ms),
                ratio(a.first_mean_us, b.first_mean_us),
                ratio(a.first_p99_us, b.first_p99_us),
                ratio(a.first_max_us, b.first_max_us),
                ratio(a.second_mean_us, b.second_mean_us),
            ));
        }
    }
    s
}
