//! Structural-tag compile: any input gives a compiled grammar or a typed error, never a
//! panic or a stack overflow; a tag that compiles gives masks whose bits agree with
//! `accept_token` along a random walk.
//!
//! Input: a mode byte, then either JSON text (even mode) or bytes that drive a generator
//! of format trees over XGrammar's format types (odd mode), so that deep and odd
//! combinations come up without the fuzzer having to spell JSON (`FUZZ_PRINT=1` prints the
//! generated tag).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokensieve::{GrammarCompiler, GrammarMatcher, Limits, Precompute, Vocabulary};

const SPECIALS: &[&str] = &["<|im_end|>", "<|tool_call|>", "<eos>"];

/// Every byte as a token, a few markers as ordinary tokens, and special tokens (the last
/// one is the stop token).
fn vocab() -> &'static Arc<Vocabulary> {
    static V: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    V.get_or_init(|| {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for w in [
            "<tool_call>",
            "</tool_call>",
            "<function=",
            "</function>",
            "<think>",
            "</think>",
            "{\"",
            "\":",
            "ab",
            ">\n",
            "</",
        ] {
            tokens.push(w.as_bytes().to_vec());
        }
        let first = tokens.len() as u32;
        for s in SPECIALS {
            tokens.push(s.as_bytes().to_vec());
        }
        let special: Vec<u32> = (first..tokens.len() as u32).collect();
        let eos = tokens.len() as u32 - 1;
        Arc::new(Vocabulary::from_token_bytes(&tokens, &special, &[eos]).unwrap())
    })
}

fn limits() -> Limits {
    Limits {
        max_ir_nodes: 200_000,
        max_rule_states: 50_000,
        max_automaton_nodes: 200_000,
        max_memory_bytes: 256 << 20,
        compile_time: Some(Duration::from_secs(2)),
        ..Limits::default()
    }
}

/// Reads choices from the input bytes (zeros once they run out).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.byte() as usize % from.len()]
    }
}

const TEXTS: &[&str] = &[
    "",
    "a",
    "ab",
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "<function=f>",
    "</function>",
    "<think>",
    "</think>",
    "<|im_end|>",
    "<|tool_call|>",
    "<eos>",
    "\n",
    "{",
    "é",
    "<",
    ">",
];
const PATTERNS: &[&str] = &[
    "[a-z]+",
    "a|ab",
    "[0-9]{1,3}",
    "(?s).*",
    "x*",
    "[^<]{0,4}>",
    "é?",
];
const GRAMMARS: &[&str] = &[
    r#"root ::= "a" root | "b""#,
    r#"root ::= [a-c]* "<""#,
    r#"root ::= <|im_end|>"#,
    r#"root ::= "#,
];

fn schema(b: &mut Bytes) -> Value {
    match b.byte() % 6 {
        0 => json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
        1 => json!({"type": "string", "maxLength": 3}),
        2 => {
            json!({"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "number"}}})
        }
        3 => json!({"enum": ["x", 1, null]}),
        4 => json!(true),
        _ => json!({"type": "array", "items": {"type": "boolean"}, "maxItems": 2}),
    }
}

fn tag(b: &mut Bytes, depth: u32) -> Value {
    json!({"type": "tag", "begin": b.pick(TEXTS), "content": format(b, depth + 1), "end": b.pick(TEXTS)})
}

fn format(b: &mut Bytes, depth: u32) -> Value {
    let leaf = depth >= 6;
    let kind = b.byte() % if leaf { 7 } else { 20 };
    match kind {
        0 => json!({"type": "const_string", "value": b.pick(TEXTS)}),
        1 => {
            let style = b.pick(&["json", "qwen_xml", "yaml"]);
            json!({"type": "json_schema", "json_schema": schema(b), "style": style})
        }
        2 => json!({"type": "regex", "pattern": b.pick(PATTERNS)}),
        3 => json!({"type": "grammar", "grammar": b.pick(GRAMMARS)}),
        4 => {
            let n = b.byte() % 3;
            let excludes: Vec<&str> = (0..n).map(|_| b.pick(TEXTS)).collect();
            json!({"type": "any_text", "excludes": excludes})
        }
        5 => {
            let tokens = [
                json!("<|im_end|>"),
                json!("<eos>"),
                json!("a"),
                json!(256),
                json!(100000),
                json!("<none>"),
            ];
            let token = tokens[b.byte() as usize % tokens.len()].clone();
            json!({"type": "token", "token": token})
        }
        6 => json!({"type": "any_tokens"}),
        7 | 8 => {
            let n = b.byte() % 4;
            let elements: Vec<Value> = (0..n).map(|_| format(b, depth + 1)).collect();
            let ty = if kind == 7 { "sequence" } else { "or" };
            json!({"type": ty, "elements": elements})
        }
        9 => json!({"type": "optional", "content": format(b, depth + 1)}),
        10 => json!({"type": "plus", "content": format(b, depth + 1)}),
        11 => json!({"type": "star", "content": format(b, depth + 1)}),
        12 => {
            let (min, max) = (b.byte() % 4, b.byte() % 5);
            json!({"type": "repeat", "min": min, "max": max, "content": format(b, depth + 1)})
        }
        13 => tag(b, depth),
        14 | 15 => {
            let n = b.byte() % 3 + 1;
            let tags: Vec<Value> = (0..n).map(|_| tag(b, depth)).collect();
            if kind == 14 {
                let triggers: Vec<&str> = (0..b.byte() % 3).map(|_| b.pick(TEXTS)).collect();
                json!({"type": "triggered_tags", "triggers": triggers, "tags": tags,
                       "at_least_one": b.byte() & 1 == 1, "stop_after_first": b.byte() & 1 == 1})
            } else {
                json!({"type": "tags_with_separator", "separator": b.pick(TEXTS), "tags": tags,
                       "at_least_one": b.byte() & 1 == 1, "stop_after_first": b.byte() & 1 == 1})
            }
        }
        16 => {
            let n = b.byte() % 3;
            let rules: Vec<Value> = (0..n)
                .map(|_| json!([b.pick(TEXTS), format(b, depth + 1)]))
                .collect();
            json!({"type": "dispatch", "rules": rules, "loop": b.byte() & 1 == 1})
        }
        17 => {
            let tags: Vec<Value> = (0..b.byte() % 3).map(|_| tag(b, depth)).collect();
            json!({"type": "token_triggered_tags", "trigger_tokens": ["<|tool_call|>"], "tags": tags})
        }
        18 => json!({"type": "exclude_token", "tokens": ["<eos>"]}),
        _ => {
            json!({"type": b.pick(&["nope", "structural_tag", ""]), "content": format(b, depth + 1)})
        }
    }
}

/// Deterministic choices for the walk, from the input.
fn seed(data: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in data {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h | 1
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    // Masks on first use (the walk visits few nodes), or all at compile time (mode bit 4).
    let precompute = if mode & 4 != 0 {
        Precompute::Eager
    } else {
        Precompute::Lazy
    };
    let compiler = GrammarCompiler::new(vocab().clone())
        .with_limits(limits())
        .with_precompute(precompute);
    let compiled = if mode & 1 == 0 {
        let Ok(text) = std::str::from_utf8(rest) else {
            return;
        };
        compiler.compile_structural_tag(text)
    } else {
        let format = format(&mut Bytes(rest), 0);
        let tag = if mode & 2 == 0 {
            json!({"type": "structural_tag", "format": format})
        } else {
            format
        };
        if std::env::var_os("FUZZ_PRINT").is_some() {
            eprintln!("{tag}");
        }
        compiler.compile_structural_tag(&tag)
    };
    let Ok(compiled) = compiled else {
        return;
    };
    let n = vocab().vocab_size() as u32;
    let mut m = GrammarMatcher::new(compiled);
    let mut mask = vec![0u32; m.bitmask_words()];
    let mut rng = seed(data);
    for step in 0..48 {
        m.fill_next_token_bitmask(&mut mask).unwrap();
        let allowed: Vec<u32> = (0..n)
            .filter(|&t| mask[(t / 32) as usize] >> (t % 32) & 1 == 1)
            .collect();
        if step % 6 == 0 {
            // Accept then roll back (a fork per token would copy the chart each time, which
            // on ambiguous grammars costs O(length²)); the mask must come back exactly.
            for t in 0..=n {
                let bit = t < n && mask[(t / 32) as usize] >> (t % 32) & 1 == 1;
                let accepted = m.accept_token(t);
                assert_eq!(bit, accepted, "token {t} at step {step}");
                if accepted {
                    m.rollback(1).unwrap();
                }
            }
            let mut again = vec![0u32; mask.len()];
            m.fill_next_token_bitmask(&mut again).unwrap();
            assert_eq!(mask, again, "mask after accept + rollback at step {step}");
        }
        if allowed.is_empty() || m.is_terminated() {
            return;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let t = allowed[(rng % allowed.len() as u64) as usize];
        assert!(
            m.accept_token(t),
            "masked token {t} rejected at step {step}"
        );
    }
});
