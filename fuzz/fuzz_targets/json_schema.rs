//! JSON Schema compile from arbitrary JSON: any input gives a compiled grammar or a typed
//! error, never a panic or a stack overflow. A schema that compiles prints to EBNF that
//! parses back, and a random walk under its masks (every step: mask bit ⇔ `accept_token`)
//! that reaches the stop token has produced text that `serde_json` parses.
//!
//! Input: one byte of flags (options; bit 64: precompute every mask at compile time), then
//! the schema as JSON text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokensieve::grammar::parse_ebnf;
use tokensieve::{
    json_schema_to_grammar, GrammarCompiler, GrammarMatcher, JsonSchemaOptions, Limits, Precompute,
    Vocabulary,
};

/// Every byte as a token, a few JSON words, and a stop token (the last id).
fn vocab() -> &'static Arc<Vocabulary> {
    static V: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    V.get_or_init(|| {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for w in [
            "{\"", "\":", "\": ", "\",", "\"}", "true", "false", "null", "12", "0.5", "e+",
            "\\u00", "é", "  ", "\n  ", "[]", "{}", ", ",
        ] {
            tokens.push(w.as_bytes().to_vec());
        }
        let eos = tokens.len() as u32;
        tokens.push(b"<eos>".to_vec());
        Arc::new(Vocabulary::from_token_bytes(&tokens, &[eos], &[eos]).unwrap())
    })
}

/// Small bounds, so that one input stays fast; exceeding them is a typed error too.
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

/// A deterministic random stream derived from the input (so a crash reproduces).
struct Rng(u64);

impl Rng {
    fn new(data: &[u8]) -> Self {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for &b in data {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        Rng(h | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, text)) = data.split_first() else {
        return;
    };
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(text) else {
        return;
    };
    let options = JsonSchemaOptions {
        any_whitespace: flags & 1 == 0,
        max_whitespace: (flags & 2 != 0).then_some(2),
        any_order: flags & 4 != 0,
        strict: flags & 8 != 0,
        ignore_unknown_keywords: flags & 16 != 0,
        lenient: flags & 32 != 0,
        ..JsonSchemaOptions::default()
    };
    let Ok(grammar) = json_schema_to_grammar(&schema, &options) else {
        return;
    };
    let printed = grammar.to_string();
    if let Err(e) = parse_ebnf(&printed, "root") {
        panic!("printed grammar does not parse: {e}\n{printed}");
    }
    // Masks on first use (the walk visits few nodes), or all at compile time (flag 64).
    let precompute = if flags & 64 != 0 {
        Precompute::Eager
    } else {
        Precompute::Lazy
    };
    let compiler = GrammarCompiler::new(vocab().clone())
        .with_limits(limits())
        .with_precompute(precompute);
    let Ok(compiled) = compiler.compile_json_schema(&schema, &options) else {
        return;
    };
    let vocab = vocab();
    let n = vocab.vocab_size() as u32;
    let eos = n - 1;
    let mut m = GrammarMatcher::new(compiled);
    let mut mask = vec![0u32; m.bitmask_words()];
    let mut rng = Rng::new(data);
    let mut out: Vec<u32> = Vec::new();
    for step in 0..96 {
        m.fill_next_token_bitmask(&mut mask).unwrap();
        let allowed: Vec<u32> = (0..n)
            .filter(|&t| mask[(t / 32) as usize] >> (t % 32) & 1 == 1)
            .collect();
        if step % 8 == 0 {
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
        if allowed.is_empty() {
            return;
        }
        // The stop token when it is allowed, half the time (always after 64 steps).
        let t = if allowed.contains(&eos) && (step >= 64 || rng.next().is_multiple_of(2)) {
            eos
        } else {
            allowed[(rng.next() % allowed.len() as u64) as usize]
        };
        assert!(
            m.accept_token(t),
            "masked token {t} rejected at step {step}"
        );
        if t == eos {
            assert!(m.is_terminated());
            let bytes = vocab.decode_bytes(&out);
            match serde_json::from_slice::<serde_json::Value>(&bytes) {
                Ok(_) => {}
                // Valid JSON (RFC 8259 sets no range) that serde_json cannot hold in an f64.
                Err(e) if e.to_string().starts_with("number out of range") => {}
                Err(e) => panic!(
                    "walk output is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(&bytes)
                ),
            }
            return;
        }
        out.push(t);
    }
});
