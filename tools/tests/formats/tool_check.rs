//! Shared checks of the tool-call formats (tests/formats/hermes.rs): BFCL tool lists, random
//! valid arguments, the grammar accepting rendered calls token by token on a real
//! vocabulary, constrained random walks, and streaming in random chunks.
#![allow(dead_code)]

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};
use tokensieve::mask::is_token_allowed;
use tokensieve::{CompiledGrammar, GrammarMatcher};
use tokensieve_tools::{ParsedOutput, StreamEvent, Tool, ToolCall, ToolCallFormat, ToolChoice};

use crate::common::{self, RealTokenizer};

/// The `function` lists of a BFCL file (`../shared/testdata/toolcalls/bfcl/<file>`), as
/// tools; lists with a tool that does not convert are skipped.
pub fn bfcl_tool_lists(file: &str) -> Option<Vec<Vec<Tool>>> {
    let path = common::testdata_path(&format!("toolcalls/bfcl/{file}"))?;
    let text = std::fs::read_to_string(&path).expect("reads BFCL file");
    let mut lists = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(fs) = v.get("function").and_then(Value::as_array) else {
            continue;
        };
        let tools: Result<Vec<Tool>, _> = fs.iter().map(Tool::from_bfcl_function).collect();
        if let Ok(tools) = tools {
            let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            names.sort();
            names.dedup();
            if names.len() == tools.len() && !tools.is_empty() {
                lists.push(tools);
            }
        }
    }
    Some(lists)
}

/// The two tools of the format notes' running example.
pub fn weather_tools() -> Vec<Tool> {
    Tool::list_from_openai(&json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather",
         "parameters": {"type": "object", "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "description": "Time",
         "parameters": {"type": "object", "properties": {"tz": {"type": "string"}},
         "required": ["tz"]}}}
    ]))
    .expect("tools")
}

const STRING_CHARS: &[&str] = &[
    "a", "b", "Z", "0", "7", " ", "-", "_", ".", ",", "é", "\"", "\\", "\n", "}", "{", "[", "]",
    "<", ">", "/", "'", "=", "ü", "東", "😀",
];

/// A random value valid under `schema` (a subset: types, enum, const, properties/required,
/// items, min/max bounds, anyOf/oneOf), or `None` when the schema uses what this generator
/// does not know (pattern, format, ...).
pub fn random_value(schema: &Value, rng: &mut StdRng, depth: usize) -> Option<Value> {
    let obj = match schema {
        Value::Bool(true) => return Some(json!(rng.gen_range(0..100))),
        Value::Object(o) => o,
        _ => return None,
    };
    for k in [
        "pattern",
        "format",
        "$ref",
        "allOf",
        "not",
        "patternProperties",
        "multipleOf",
    ] {
        if obj.contains_key(k) {
            return None;
        }
    }
    if let Some(Value::Array(options)) = obj.get("enum") {
        return options.get(rng.gen_range(0..options.len().max(1))).cloned();
    }
    if let Some(c) = obj.get("const") {
        return Some(c.clone());
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = obj.get(k) {
            if options.is_empty() {
                return None;
            }
            return random_value(&options[rng.gen_range(0..options.len())], rng, depth);
        }
    }
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts[rng.gen_range(0..ts.len().max(1))].as_str()?.to_owned(),
        None => "string".to_owned(),
        _ => return None,
    };
    let num = |k: &str| obj.get(k).and_then(Value::as_f64);
    Some(match ty.as_str() {
        "string" => {
            let min = obj.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max = obj.get("maxLength").and_then(Value::as_u64).unwrap_or(12) as usize;
            let len = rng.gen_range(min..=max.max(min).min(min + 12));
            Value::String(
                (0..len)
                    .map(|_| STRING_CHARS[rng.gen_range(0..STRING_CHARS.len())])
                    .collect(),
            )
        }
        "integer" => {
            let lo = num("minimum").map(|v| v.ceil() as i64).unwrap_or(-1000);
            let hi = num("maximum").map(|v| v.floor() as i64).unwrap_or(100_000);
            if lo > hi || num("exclusiveMinimum").is_some() || num("exclusiveMaximum").is_some() {
                return None;
            }
            json!(rng.gen_range(lo..=hi))
        }
        "number" => {
            let lo = num("minimum").unwrap_or(-1000.0);
            let hi = num("maximum").unwrap_or(1000.0);
            if lo > hi || num("exclusiveMinimum").is_some() || num("exclusiveMaximum").is_some() {
                return None;
            }
            let x: f64 = rng.gen_range(lo..=hi);
            json!((x * 100.0).round() / 100.0)
        }
        "boolean" => json!(rng.gen_bool(0.5)),
        "null" => Value::Null,
        "array" => {
            if depth > 3 {
                return None;
            }
            let min = obj.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max = obj.get("maxItems").and_then(Value::as_u64).unwrap_or(3) as usize;
            let n = rng.gen_range(min..=max.max(min).min(min + 3));
            let items = obj.get("items").cloned().unwrap_or(Value::Bool(true));
            let mut out = Vec::new();
            for _ in 0..n {
                out.push(random_value(&items, rng, depth + 1)?);
            }
            Value::Array(out)
        }
        "object" => {
            if depth > 3 {
                return None;
            }
            let mut out = Map::new();
            let required: Vec<&str> = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(Value::Object(props)) = obj.get("properties") {
                for (k, s) in props {
                    if required.contains(&k.as_str()) || rng.gen_bool(0.5) {
                        out.insert(k.clone(), random_value(s, rng, depth + 1)?);
                    }
                }
            }
            if required.iter().any(|r| !out.contains_key(*r)) {
                return None;
            }
            Value::Object(out)
        }
        _ => return None,
    })
}

/// Random calls (1..=max) to random tools of `tools`, with arguments that the tools' input
/// schemas accept (checked with the `jsonschema` crate); `None` when no tool could be
/// given arguments.
pub fn random_calls(tools: &[Tool], max: usize, rng: &mut StdRng) -> Option<Vec<ToolCall>> {
    let n = rng.gen_range(1..=max);
    let mut calls = Vec::new();
    for _ in 0..n * 4 {
        if calls.len() == n {
            break;
        }
        let t = &tools[rng.gen_range(0..tools.len())];
        let Some(args) = random_value(&t.input_schema, rng, 0) else {
            continue;
        };
        if t.validate_arguments(&args).is_err() {
            continue;
        }
        calls.push(ToolCall::new(t.name.clone(), args));
    }
    if calls.is_empty() {
        None
    } else {
        Some(calls)
    }
}

/// Token ids of `text` by the real tokenizer, special tokens recognised (their text
/// becomes their id); the ids' bytes must give back `text` exactly.
pub fn encode_with_specials(tok: &RealTokenizer, text: &str) -> Vec<u32> {
    let enc = tok.tokenizer.encode(text, false).expect("encodes");
    let ids = enc.get_ids().to_vec();
    let mut ids = if tok.vocab.decode_bytes(&ids) == text.as_bytes() {
        ids
    } else {
        // Llama 2-style prefix space: fall back to encode_exact on the plain text.
        tok.encode_exact(text)
    };
    ids.retain(|_| true);
    ids
}

/// Feeds `ids` through a fresh matcher of `grammar`, checking that the mask allows every
/// token before it is accepted; then the stop token must be allowed and accepted.
pub fn accepts_ids(
    grammar: &Arc<CompiledGrammar>,
    tok: &RealTokenizer,
    ids: &[u32],
) -> Result<(), String> {
    let mut m = GrammarMatcher::new(grammar.clone());
    let mut mask = vec![0u32; m.bitmask_words()];
    for (i, &id) in ids.iter().enumerate() {
        m.fill_next_token_bitmask(&mut mask)
            .map_err(|e| e.to_string())?;
        let prefix = String::from_utf8_lossy(&tok.vocab.decode_bytes(&ids[..i])).into_owned();
        if !is_token_allowed(&mask, id) {
            return Err(format!(
                "token {id} ({:?}) masked after {prefix:?}",
                String::from_utf8_lossy(tok.vocab.token_bytes(id).unwrap_or(b""))
            ));
        }
        if !m.accept_token(id) {
            return Err(format!("token {id} rejected after {prefix:?}"));
        }
    }
    m.fill_next_token_bitmask(&mut mask)
        .map_err(|e| e.to_string())?;
    let stop = tok.stop();
    if !is_token_allowed(&mask, stop) || !m.accept_token(stop) {
        return Err("the stop token is not allowed at the end".into());
    }
    Ok(())
}

/// Samples uniformly among allowed tokens (after `bias_after` steps, the stop token when
/// allowed, else tokens that the mask allows and that are short) until the stop token or
/// `max_steps`; returns the text (special tokens as their text) and whether it stopped.
pub fn random_walk(
    grammar: &Arc<CompiledGrammar>,
    tok: &RealTokenizer,
    rng: &mut StdRng,
    max_steps: usize,
) -> (String, bool) {
    random_walk_hinted(grammar, tok, rng, max_steps, &[])
}

/// As [`random_walk`], with `hints`: token sequences (a family's closing strings, such as
/// `\n</parameter>\n`) that the walk tries as one macro step in raw-text states, where a
/// token-by-token walk would almost never spell them. A hint is taken only when the
/// matcher accepts all of it, so the walk stays a walk under the mask.
pub fn random_walk_hinted(
    grammar: &Arc<CompiledGrammar>,
    tok: &RealTokenizer,
    rng: &mut StdRng,
    max_steps: usize,
    hints: &[Vec<u32>],
) -> (String, bool) {
    let mut m = GrammarMatcher::new(grammar.clone());
    let mut mask = vec![0u32; m.bitmask_words()];
    let size = tok.vocab.vocab_size() as u32;
    let stop = tok.stop();
    let mut ids = Vec::new();
    let mut exits: Option<Vec<u32>> = None;
    for step in 0..max_steps {
        m.fill_next_token_bitmask(&mut mask).expect("mask");
        let allowed: Vec<u32> = (0..size).filter(|&t| is_token_allowed(&mask, t)).collect();
        assert!(
            !allowed.is_empty(),
            "dead end after {:?}",
            String::from_utf8_lossy(&tok.vocab.decode_bytes(&ids))
        );
        // A uniform pick over 150k tokens would almost never reach a marker in free text,
        // nor close a JSON string. So the walk mixes three pools: marker-like tokens
        // (special, or starting like a marker does), closers (only `"}])>`),
        // and short tokens; later on it prefers closers and the stop token.
        let late = step * 4 > max_steps;
        let pool_of = |keep: &dyn Fn(u32, &[u8]) -> bool| -> Vec<u32> {
            allowed
                .iter()
                .copied()
                .filter(|&t| keep(t, tok.vocab.token_bytes(t).unwrap_or(b"")))
                .collect()
        };
        let r: f64 = rng.gen();
        let free_text = allowed.len() > size as usize / 2;
        if free_text && exits.is_none() {
            exits = Some(exit_tokens(&m, tok, &allowed));
        }
        // An exit token leaves free text only where free text is what the grammar is in
        // (inside a JSON string the same token is just text): check by looking ahead.
        let exit = match &exits {
            Some(e) if free_text && r < 0.5 && !e.is_empty() => {
                let t = e[rng.gen_range(0..e.len())];
                let mut f = m.clone();
                let mut ahead = vec![0u32; m.bitmask_words()];
                let narrows = allowed.contains(&t)
                    && f.accept_token(t)
                    && f.fill_next_token_bitmask(&mut ahead).is_ok()
                    && (0..size).filter(|&x| is_token_allowed(&ahead, x)).count()
                        < allowed.len() / 4;
                narrows.then_some(t)
            }
            _ => None,
        };
        let pool = if late && allowed.contains(&stop) {
            vec![stop]
        } else if let Some(t) = exit {
            vec![t]
        } else if r < if late { 0.5 } else { 0.1 } {
            pool_of(&|_, b| !b.is_empty() && b.iter().all(|c| b"\"}])>".contains(c)))
        } else if r < 0.75 {
            pool_of(&|t, b| {
                tok.vocab.is_special(t)
                    || (b.len() >= 3 && matches!(b[0], b'<' | b'[' | b'{' | 0xEF))
            })
        } else if r < 0.9 {
            pool_of(&|_, b| b.len() <= 2)
        } else {
            Vec::new()
        };
        let pool = if pool.is_empty() { &allowed } else { &pool };
        if free_text && !hints.is_empty() && rng.gen_bool(if late { 0.6 } else { 0.2 }) {
            let hint = &hints[rng.gen_range(0..hints.len())];
            let mut f = m.clone();
            if hint.iter().all(|&t| f.accept_token(t)) {
                for &t in hint {
                    assert!(m.accept_token(t), "hint token {t} rejected");
                    ids.push(t);
                }
                continue;
            }
        }
        let pick = pool[rng.gen_range(0..pool.len())];
        if pick == stop {
            assert!(m.accept_token(stop));
            return (
                String::from_utf8_lossy(&tok.vocab.decode_bytes(&ids)).into_owned(),
                true,
            );
        }
        assert!(m.accept_token(pick), "allowed token {pick} rejected");
        ids.push(pick);
    }
    (
        String::from_utf8_lossy(&tok.vocab.decode_bytes(&ids)).into_owned(),
        false,
    )
}

/// Tag-like tokens (special, or `<…>` / `[…]` spelled) after which far fewer tokens are
/// allowed than in free text: the tokens that begin a call from free text.
fn exit_tokens(m: &GrammarMatcher, tok: &RealTokenizer, allowed: &[u32]) -> Vec<u32> {
    let mut mask = vec![0u32; m.bitmask_words()];
    let size = tok.vocab.vocab_size() as u32;
    let mut out = Vec::new();
    for &t in allowed {
        let b = tok.vocab.token_bytes(t).unwrap_or(b"");
        let tag_like = tok.vocab.is_special(t)
            || (b.len() >= 3
                && ((b[0] == b'<' && b[b.len() - 1] == b'>')
                    || (b[0] == b'[' && b[b.len() - 1] == b']')));
        if !tag_like {
            continue;
        }
        let mut f = m.clone();
        if !f.accept_token(t) || f.fill_next_token_bitmask(&mut mask).is_err() {
            continue;
        }
        let n = (0..size).filter(|&x| is_token_allowed(&mask, x)).count();
        if n < allowed.len() / 4 {
            out.push(t);
        }
    }
    out
}

/// The calls a streaming parse of `text` in random chunks (1..=max_chunk bytes, cut on
/// character boundaries) reports at their ends.
pub fn stream_calls(
    format: &dyn ToolCallFormat,
    tools: &[Tool],
    text: &str,
    rng: &mut StdRng,
    max_chunk: usize,
) -> Vec<ToolCall> {
    let mut p = format.streaming_parser(tools);
    let mut events = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let mut j = (i + rng.gen_range(1..=max_chunk)).min(text.len());
        while !text.is_char_boundary(j) {
            j += 1;
        }
        events.extend(p.push(&text[i..j]));
        i = j;
    }
    events.extend(p.finish());
    events
        .into_iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallEnd { call, .. } => Some(call),
            _ => None,
        })
        .collect()
}

/// Calls compared by name and arguments (ids are the format's business).
pub fn names_and_args(calls: &[ToolCall]) -> Vec<(String, Value)> {
    calls
        .iter()
        .map(|c| (c.name.clone(), c.arguments.clone()))
        .collect()
}

/// The BFCL files whose `function` lists are the tools every family's checks draw from.
pub const BFCL_FILES: &[&str] = &[
    "BFCL_v4_simple_python.json",
    "BFCL_v4_multiple.json",
    "BFCL_v4_parallel.json",
    "BFCL_v4_parallel_multiple.json",
];

/// [`round_trip`] over [`BFCL_FILES`]: `cases` single calls with seed `seeds[0]`, then
/// `cases` parallel calls with seed `seeds[1]`; panics, naming the format and vocabulary,
/// when fewer cases could be checked.
pub fn round_trips(
    format: &dyn ToolCallFormat,
    tok: &RealTokenizer,
    cases: usize,
    seeds: [u64; 2],
) {
    for (parallel, seed) in [(false, seeds[0]), (true, seeds[1])] {
        let checked = round_trip(format, tok, BFCL_FILES, cases, parallel, seed);
        assert_eq!(
            checked,
            cases,
            "{} on {}: {checked} of {cases} round trips (parallel: {parallel})",
            format.name(),
            tok.name
        );
    }
}

/// [`constrained_walks_hinted`] over [`BFCL_FILES`] with seed `seeds[0]`: all `walks.0`
/// walks must stop (panics naming the format otherwise); then [`none_never_calls`] with
/// `walks.1` walks and seed `seeds[1]`.
pub fn walks_and_none(
    format: &dyn ToolCallFormat,
    tok: &RealTokenizer,
    walks: (usize, usize),
    seeds: [u64; 2],
    hints: &[&str],
) {
    let done = constrained_walks_hinted(format, tok, BFCL_FILES, walks.0, seeds[0], hints);
    assert!(
        done >= walks.0,
        "{} on {}: only {done} of {} walks stopped",
        format.name(),
        tok.name,
        walks.0
    );
    none_never_calls(format, tok, walks.1, seeds[1]);
}

/// A family's checks on its real vocabulary, where `tok` is loaded (`None`: the vocabulary is
/// missing outside CI, and the load said so): [`round_trips`] of 25 cases with
/// `round_trip_seeds`, then [`walks_and_none`] with 200 walks and 30 under `none`,
/// `walk_seeds` and `hints`.
pub fn check_family(
    tok: Option<&RealTokenizer>,
    format: &dyn ToolCallFormat,
    round_trip_seeds: [u64; 2],
    walk_seeds: [u64; 2],
    hints: &[&str],
) {
    let Some(tok) = tok else { return };
    round_trips(format, tok, 25, round_trip_seeds);
    walks_and_none(format, tok, (200, 30), walk_seeds, hints);
}

/// `format.parse(text, tools)`; panics, naming the format and the text, when the parse
/// reports an error.
pub fn parse_without_errors(
    format: &dyn ToolCallFormat,
    text: &str,
    tools: &[Tool],
) -> ParsedOutput {
    let parsed = format.parse(text, tools);
    assert!(
        parsed.errors.is_empty(),
        "{}: {:?} in {text:?}",
        format.name(),
        parsed.errors
    );
    parsed
}

/// The round-trip property for one format on one vocabulary: `cases` random BFCL tool
/// lists (from `files`) with random valid calls → render → the `required` grammar (and,
/// for one call, the named grammar) accepts the text token by token → parse and
/// streaming parse give the calls back. `parallel` says whether several calls are
/// rendered. Returns the number of cases checked.
pub fn round_trip(
    format: &dyn ToolCallFormat,
    tok: &RealTokenizer,
    files: &[&str],
    cases: usize,
    parallel: bool,
    seed: u64,
) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut lists = Vec::new();
    for f in files {
        if let Some(l) = bfcl_tool_lists(f) {
            lists.extend(l);
        }
    }
    assert!(!lists.is_empty() || !common::in_ci(), "no BFCL tool lists");
    // A pool of 12 tool lists, so that compiled grammars are reused across cases.
    while lists.len() > 12 {
        let i = rng.gen_range(0..lists.len());
        lists.swap_remove(i);
    }
    let mut cache: std::collections::HashMap<(usize, String), Option<Arc<CompiledGrammar>>> =
        std::collections::HashMap::new();
    let mut checked = 0;
    let mut attempts = 0;
    while checked < cases && attempts < cases * 20 && !lists.is_empty() {
        attempts += 1;
        let li = rng.gen_range(0..lists.len());
        let tools = &lists[li];
        let Some(calls) = random_calls(tools, if parallel { 3 } else { 1 }, &mut rng) else {
            continue;
        };
        let text = format.render_calls(&calls);
        let choices: Vec<ToolChoice> = if calls.len() == 1 {
            vec![
                ToolChoice::Required,
                ToolChoice::Auto,
                ToolChoice::Function(calls[0].name.clone()),
            ]
        } else {
            vec![ToolChoice::Required, ToolChoice::Auto]
        };
        for choice in &choices {
            let grammar = cache
                .entry((li, format!("{choice:?}")))
                .or_insert_with(|| {
                    let tag = match format.structural_tag(tools, choice, parallel) {
                        Ok(t) => t,
                        Err(e) => panic!("{}: tag for {choice:?}: {e}", format.name()),
                    };
                    match tok.compiler.compile_structural_tag(&tag) {
                        Ok(g) => Some(g),
                        Err(e) => {
                            // A schema the engine refuses is not a format failure.
                            eprintln!("{}: skipped a tool list: {e}", format.name());
                            None
                        }
                    }
                })
                .clone();
            let Some(grammar) = grammar else { continue };
            let ids = encode_with_specials(tok, &text);
            if let Err(e) = accepts_ids(&grammar, tok, &ids) {
                panic!(
                    "{} on {}: {choice:?} grammar rejects the rendered calls: {e}\ntext: {text}",
                    format.name(),
                    tok.name
                );
            }
        }
        let parsed = parse_without_errors(format, &text, tools);
        assert_eq!(
            names_and_args(&parsed.tool_calls),
            names_and_args(&calls),
            "{}: parse of {text:?}",
            format.name()
        );
        let streamed = stream_calls(format, tools, &text, &mut rng, 9);
        assert_eq!(
            names_and_args(&streamed),
            names_and_args(&calls),
            "{}: streaming {text:?}",
            format.name()
        );
        checked += 1;
    }
    checked
}

/// The constrained-walk property: `walks` random walks under the format's tag for
/// `required` (parallel) and for a named tool on BFCL tool lists; every output must parse
/// with no errors into at least one call naming an offered tool (the named one for a
/// named choice) whose arguments validate. Returns the number of walks that stopped.
pub fn constrained_walks(
    format: &dyn ToolCallFormat,
    tok: &RealTokenizer,
    files: &[&str],
    walks: usize,
    seed: u64,
) -> usize {
    constrained_walks_hinted(format, tok, files, walks, seed, &[])
}

/// As [`constrained_walks`], the walks trying `hints` (texts, tokenised with special tokens
/// recognised) as macro steps in raw-text states (see [`random_walk_hinted`]).
pub fn constrained_walks_hinted(
    format: &dyn ToolCallFormat,
    tok: &RealTokenizer,
    files: &[&str],
    walks: usize,
    seed: u64,
    hints: &[&str],
) -> usize {
    let hints: Vec<Vec<u32>> = hints.iter().map(|h| encode_with_specials(tok, h)).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut lists = Vec::new();
    for f in files {
        if let Some(l) = bfcl_tool_lists(f) {
            lists.extend(l);
        }
    }
    // Grammars for `required` and one named tool on up to 25 tool lists, reused by walks.
    let mut grammars: Vec<(usize, ToolChoice, Arc<CompiledGrammar>)> = Vec::new();
    let mut tried = 0;
    while grammars.len() < 50 && tried < 100 && !lists.is_empty() {
        tried += 1;
        let i = rng.gen_range(0..lists.len());
        let tools = &lists[i];
        let named = ToolChoice::Function(tools[rng.gen_range(0..tools.len())].name.clone());
        for choice in [ToolChoice::Required, named] {
            let tag = format.structural_tag(tools, &choice, true).expect("tag");
            if let Ok(g) = tok.compiler.compile_structural_tag(&tag) {
                grammars.push((i, choice, g));
            }
        }
    }
    assert!(
        !grammars.is_empty() || !common::in_ci(),
        "no grammar compiled"
    );
    let mut done = 0;
    let mut attempts = 0;
    while done < walks && attempts < walks * 4 && !grammars.is_empty() {
        attempts += 1;
        let (i, choice, grammar) = &grammars[rng.gen_range(0..grammars.len())];
        let tools = &lists[*i];
        let (text, stopped) = random_walk_hinted(grammar, tok, &mut rng, 600, &hints);
        if !stopped {
            if attempts <= 3 {
                eprintln!("{}: walk did not stop: {text:?}", format.name());
            }
            continue;
        }
        let parsed = parse_without_errors(format, &text, tools);
        assert!(
            !parsed.tool_calls.is_empty(),
            "{}: no call in {text:?}",
            format.name()
        );
        for c in &parsed.tool_calls {
            let t = tools
                .iter()
                .find(|t| t.name == c.name)
                .unwrap_or_else(|| panic!("unknown {}", c.name));
            if let ToolChoice::Function(n) = choice {
                assert_eq!(&c.name, n);
            }
            t.validate_arguments(&c.arguments)
                .unwrap_or_else(|e| panic!("{}: {e} in {text:?}", format.name()));
        }
        done += 1;
    }
    done
}

/// With `none`, no walk under the format's tag ever contains a call the parser finds.
pub fn none_never_calls(format: &dyn ToolCallFormat, tok: &RealTokenizer, walks: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let tools = weather_tools();
    let tag = format
        .structural_tag(&tools, &ToolChoice::None, true)
        .expect("tag");
    let grammar = tok.compiler.compile_structural_tag(&tag).expect("compiles");
    for _ in 0..walks {
        let (text, _) = random_walk(&grammar, tok, &mut rng, 60);
        let parsed = format.parse(&text, &tools);
        assert!(
            parsed.tool_calls.is_empty(),
            "{}: a call under none: {text:?}",
            format.name()
        );
    }
}

/// `call` rendered by `format` parses back to exactly `call` (panics with the text
/// otherwise).
pub fn parses_back(format: &dyn ToolCallFormat, call: ToolCall, tools: &[Tool]) {
    let text = format.render_calls(std::slice::from_ref(&call));
    assert_eq!(format.parse(&text, tools).tool_calls, vec![call], "{text}");
}
