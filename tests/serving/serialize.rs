//! Compiled grammars and vocabularies to bytes and back (issue 26): round trips give the
//! same masks step by step (MaskBench schemas and a Hermes tool-call tag on Llama 3.1,
//! eager and lazy), and every bad buffer is a typed error, never a panic: another
//! vocabulary, a truncated or corrupted buffer, a newer format version, another kind of
//! buffer, random damage (proptest).

use crate::common;
use crate::maskbench;

use proptest::prelude::*;
use std::sync::Arc;
use tokensieve::{
    CompiledGrammar, DeserializeError, GrammarCompiler, GrammarMatcher, Precompute, Vocabulary,
    FORMAT_VERSION,
};

fn small_vocab() -> Vocabulary {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for w in ["true", "false", "null", "\"a\"", "{\"", "\":", "12", ", "] {
        tokens.push(w.as_bytes().to_vec());
    }
    tokens.push(b"</s>".to_vec());
    let stop = tokens.len() as u32 - 1;
    Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap()
}

fn small_grammar() -> (GrammarCompiler, Arc<CompiledGrammar>) {
    let compiler = GrammarCompiler::new(small_vocab());
    // Several counted repetitions (bounded and not): their virtual node ranges follow
    // each other, which the reader checks.
    let schema = serde_json::json!({"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 40}, "b": {"type": "array", "items": {"type": "integer"}},
        "c": {"type": "string", "minLength": 30}, "d": {"type": "string", "minLength": 20, "maxLength": 90}
    }, "required": ["a"]});
    let g = compiler
        .compile_json_schema(&schema, &Default::default())
        .unwrap();
    // The default precompute fills the masks in the background: wait for every mask, so
    // that what is written does not depend on how far the fill got.
    g.wait_background();
    (compiler, g)
}

/// Masks of `a` and `b` along the token sequence `ids` (then the stop token): equal at
/// every step, and both accept every token.
fn same_masks(a: &Arc<CompiledGrammar>, b: &Arc<CompiledGrammar>, ids: &[u32], what: &str) {
    let (mut ma, mut mb) = (
        GrammarMatcher::new(a.clone()),
        GrammarMatcher::new(b.clone()),
    );
    let words = ma.bitmask_words();
    let (mut ka, mut kb) = (vec![0u32; words], vec![0u32; words]);
    for (step, &t) in ids.iter().enumerate() {
        ma.fill_next_token_bitmask(&mut ka).unwrap();
        mb.fill_next_token_bitmask(&mut kb).unwrap();
        assert!(ka == kb, "{what}: masks differ at step {step}");
        assert_eq!(
            ma.accept_token(t),
            mb.accept_token(t),
            "{what}: step {step}"
        );
    }
    ma.fill_next_token_bitmask(&mut ka).unwrap();
    mb.fill_next_token_bitmask(&mut kb).unwrap();
    assert!(ka == kb, "{what}: masks differ at the end");
}

#[test]
fn a_vocabulary_round_trips() {
    let v = small_vocab().with_vocab_size(300).unwrap();
    let bytes = v.serialize().unwrap();
    let back = Vocabulary::deserialize(&bytes).unwrap();
    assert_eq!(back.fingerprint(), v.fingerprint());
    assert_eq!(back.vocab_size(), 300);
    assert_eq!(back.tokenizer_size(), v.tokenizer_size());
    assert_eq!(back.stop_tokens(), v.stop_tokens());
    assert_eq!(
        back.special_tokens().collect::<Vec<_>>(),
        v.special_tokens().collect::<Vec<_>>()
    );
    for id in 0..v.tokenizer_size() as u32 {
        assert_eq!(back.token_bytes(id), v.token_bytes(id));
    }
    // The fingerprint sees the width, the stop tokens and the bytes.
    assert_ne!(small_vocab().fingerprint(), v.fingerprint());
    let other_stop = small_vocab().with_stop_tokens(&[0]).unwrap();
    assert_ne!(other_stop.fingerprint(), small_vocab().fingerprint());
}

#[test]
fn a_grammar_round_trips_with_the_same_masks() {
    let (compiler, g) = small_grammar();
    let bytes = g.serialize().unwrap();
    let back = CompiledGrammar::deserialize(&bytes, &compiler).unwrap();
    assert_eq!(back.grammar().to_string(), g.grammar().to_string());
    assert_eq!(back.node_count(), g.node_count());
    let text = r#"{"a": "xyz", "b": [12, 3]}"#;
    let ids: Vec<u32> = text.bytes().map(u32::from).collect();
    same_masks(&g, &back, &ids, "small");
    // The keys checked when they end come back with it: `a`, declared before `b`, is
    // not an extra key after it.
    assert_eq!(back.checked_keys(), g.checked_keys());
    assert_eq!(g.checked_keys()[0].1, ["a", "b", "c", "d"]);
    let late = r#"{"b": [1], "a": "x"}"#;
    for grammar in [&g, &back] {
        assert!(!GrammarMatcher::new(grammar.clone()).accept_string(late));
    }
    // A fresh compiler of an equal vocabulary reads it too.
    let fresh =
        GrammarCompiler::new(Vocabulary::deserialize(&small_vocab().serialize().unwrap()).unwrap());
    let back2 = CompiledGrammar::deserialize(&bytes, &fresh).unwrap();
    same_masks(&g, &back2, &ids, "fresh compiler");
    // After the same walks, the loaded grammar and the original write the same bytes.
    assert_eq!(back2.serialize().unwrap(), g.serialize().unwrap());
}

#[test]
fn another_vocabulary_is_a_typed_error() {
    let (_, g) = small_grammar();
    let bytes = g.serialize().unwrap();
    let other = GrammarCompiler::new(small_vocab().with_vocab_size(512).unwrap());
    let err = CompiledGrammar::deserialize(&bytes, &other).unwrap_err();
    assert!(
        matches!(err, DeserializeError::VocabularyMismatch { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("fingerprint"), "{err}");
}

#[test]
fn truncated_corrupted_other_version_and_foreign_buffers_are_typed_errors() {
    let (compiler, g) = small_grammar();
    let bytes = g.serialize().unwrap();
    let read = |b: &[u8]| CompiledGrammar::deserialize(b, &compiler).map(|_| ());
    assert_eq!(
        read(&bytes[..10]),
        Err(DeserializeError::TooShort { got: 10 })
    );
    let payload = (bytes.len() - 40) as u64;
    assert_eq!(
        read(&bytes[..bytes.len() - 7]),
        Err(DeserializeError::Truncated {
            expected: payload,
            got: payload - 7
        })
    );
    let mut flipped = bytes.clone();
    let mid = 40 + (bytes.len() - 40) / 2;
    flipped[mid] ^= 0x10;
    assert!(matches!(
        read(&flipped),
        Err(DeserializeError::Checksum { .. })
    ));
    let mut newer = bytes.clone();
    newer[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    assert_eq!(
        read(&newer),
        Err(DeserializeError::NewerVersion {
            found: FORMAT_VERSION + 1,
            supported: FORMAT_VERSION
        })
    );
    let mut older = bytes.clone();
    older[8..12].copy_from_slice(&(FORMAT_VERSION - 1).to_le_bytes());
    assert_eq!(
        read(&older),
        Err(DeserializeError::OlderVersion {
            found: FORMAT_VERSION - 1,
            supported: FORMAT_VERSION
        })
    );
    let vocab_bytes = small_vocab().serialize().unwrap();
    assert!(matches!(
        read(&vocab_bytes),
        Err(DeserializeError::BadMagic { .. })
    ));
    assert!(matches!(
        Vocabulary::deserialize(&bytes),
        Err(DeserializeError::BadMagic { .. })
    ));
    let mut reserved = bytes.clone();
    reserved[13] = 1;
    assert!(matches!(
        read(&reserved),
        Err(DeserializeError::Malformed(_))
    ));
    // Every truncation.
    for len in 0..bytes.len() {
        assert!(read(&bytes[..len]).is_err(), "{len} bytes");
    }
    for len in 0..vocab_bytes.len() {
        assert!(Vocabulary::deserialize(&vocab_bytes[..len]).is_err());
    }
}

/// Rewrites the header of `bytes` so that its length and checksum fit `payload`.
fn with_payload(bytes: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = bytes[..40].to_vec();
    out[24..32].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    out[32..40].copy_from_slice(&xxh3(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// XXH3-64, the checksum the header carries (the library's own hash crate).
fn xxh3(payload: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(payload)
}

proptest! {
    #![proptest_config(common::proptest_config(64))]

    /// Flipping random bytes or cutting at a random length never panics: the result is
    /// an error, or (a flip that changed nothing checked) a grammar with the same masks.
    #[test]
    fn random_damage_never_panics(flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6),
                                  cut in any::<prop::sample::Index>()) {
        let (compiler, g) = small_grammar();
        let bytes = g.serialize().unwrap();
        let mut damaged = bytes.clone();
        for (i, x) in &flips {
            let i = i.index(damaged.len());
            damaged[i] ^= x;
        }
        if let Ok(back) = CompiledGrammar::deserialize(&damaged, &compiler) {
            let ids: Vec<u32> = br#"{"a": "q"}"#.iter().map(|&b| u32::from(b)).collect();
            same_masks(&g, &back, &ids, "damaged");
        }
        let n = cut.index(bytes.len());
        prop_assert!(CompiledGrammar::deserialize(&bytes[..n], &compiler).is_err());
        let v = small_vocab().serialize().unwrap();
        let mut dv = v.clone();
        for (i, x) in &flips {
            let i = i.index(dv.len());
            dv[i] ^= x;
        }
        let _ = Vocabulary::deserialize(&dv);
    }

    /// A payload that passes the checksum but is damaged (random bytes flipped, then the
    /// header rewritten to fit) is still refused or read safely: the range checks, not the
    /// checksum, stand between it and an out-of-bounds index.
    #[test]
    fn damage_under_a_valid_checksum_never_panics(flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
                                                  cut in any::<prop::sample::Index>()) {
        let (compiler, g) = small_grammar();
        let bytes = g.serialize().unwrap();
        let mut payload = bytes[40..].to_vec();
        for (i, x) in &flips {
            let i = i.index(payload.len());
            payload[i] ^= x;
        }
        let forged = with_payload(&bytes, &payload);
        if let Ok(back) = CompiledGrammar::deserialize(&forged, &compiler) {
            // Whatever it reads as, a matcher on it must not panic.
            let mut m = GrammarMatcher::new(back);
            let mut mask = vec![0u32; m.bitmask_words()];
            for &b in br#"{"a": "q"}"# {
                let _ = m.fill_next_token_bitmask(&mut mask);
                let _ = m.accept_token(u32::from(b));
            }
        }
        let short = &payload[..cut.index(payload.len())];
        let _ = CompiledGrammar::deserialize(&with_payload(&bytes, short), &compiler);
    }
}

/// MaskBench schemas (the first of the bench's 100-schema sample that compile) and a
/// Hermes tool-call tag on Llama 3.1: the grammar read back gives the same masks at every
/// step of each valid instance, eager (all masks written) and lazy (a few masks written,
/// the rest computed after loading).
#[cfg(feature = "hf")]
#[test]
fn maskbench_and_tool_tags_round_trip_on_llama() {
    use tokensieve_tools::{Hermes, Tool, ToolCallFormat, ToolChoice};
    let Some(rt) = common::RealTokenizer::load("llama3_1") else {
        return;
    };
    let Some(records) = maskbench::bench_sample(100) else {
        return;
    };
    let eager = rt.compiler.clone().with_precompute(Precompute::Eager);
    let lazy = rt.compiler.clone().with_precompute(Precompute::Lazy);
    let mut checked = 0;
    for rec in records.iter().filter(|r| !r.valid.is_empty()) {
        if checked >= 12 || rec.schema.to_string().len() > 3000 {
            continue;
        }
        let Ok(ge) = eager.compile_json_schema(&rec.schema, &maskbench::bench_options()) else {
            continue;
        };
        let text = &rec.valid[0];
        if !GrammarMatcher::new(ge.clone()).accept_string(text) {
            continue;
        }
        let ids = rt.encode_exact(text);
        let be = CompiledGrammar::deserialize(&ge.serialize().unwrap(), &eager).unwrap();
        same_masks(&ge, &be, &ids, &rec.name);
        // Lazy: walk half the instance first, so some masks are written and some not.
        let gl = lazy
            .compile_json_schema(&rec.schema, &maskbench::bench_options())
            .unwrap();
        let mut m = GrammarMatcher::new(gl.clone());
        let mut mask = vec![0u32; m.bitmask_words()];
        for &t in &ids[..ids.len() / 2] {
            m.fill_next_token_bitmask(&mut mask).unwrap();
            assert!(m.accept_token(t));
        }
        let bl = CompiledGrammar::deserialize(&gl.serialize().unwrap(), &lazy).unwrap();
        same_masks(&ge, &bl, &ids, &format!("{} (lazy)", rec.name));
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} schemas");

    let tools = Tool::list_from_openai(&serde_json::json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
            "properties": {"query": {"type": "string"}}, "required": ["query"]}}}
    ]))
    .unwrap();
    let tag = Hermes::default()
        .structural_tag(&tools, &ToolChoice::Auto, true)
        .unwrap();
    let g = eager.compile_structural_tag(&tag).unwrap();
    let back = CompiledGrammar::deserialize(&g.serialize().unwrap(), &eager).unwrap();
    let text = "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>";
    assert!(GrammarMatcher::new(g.clone()).accept_string(text));
    let ids = rt.encode_exact(text);
    same_masks(&g, &back, &ids, "hermes tag");
}
