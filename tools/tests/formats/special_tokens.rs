//! Tool-call formats with special-token or full-width markers (DeepSeek, Kimi K2,
//! Mistral, gpt-oss Harmony) on their real vocabularies (see tests/tool_check): rendered
//! calls for random BFCL tools are accepted token by token by each family's grammar and
//! parse back (whole and streamed in random chunks); constrained random walks always give
//! calls that name offered tools and validate; under `none` no call appears; recorded
//! real outputs parse to the calls they contain.

use crate::common;
use crate::tool_check;

use common::RealTokenizer;
use serde_json::{json, Value};
use tokensieve_tools::{format_by_name, DeepSeek, Tool, ToolCall, ToolCallFormat};

use tool_check::BFCL_FILES as FILES;

/// Recovered / expected calls of one recorded source, printed as a table row.
fn report(source: &str, recovered: usize, expected: usize, failures: &[String]) {
    let rate = if expected == 0 {
        1.0
    } else {
        recovered as f64 / expected as f64
    };
    eprintln!(
        "| {source:<48} | {recovered:>4} / {expected:<4} | {:>6.1}% |",
        rate * 100.0
    );
    for f in failures {
        eprintln!("|   failure: {f}");
    }
}

/// A call's arguments as the OpenAI wire form carries them (a JSON string; functionary's
/// code calls carry raw code, read as `{"code": CODE}`).
fn wire_arguments(args: &str) -> Value {
    serde_json::from_str(args).unwrap_or_else(|_| json!({ "code": args }))
}

/// The calls of each assistant message of an OpenAI-style `messages` array, as (name,
/// arguments) pairs, the arguments read from the wire form by `arguments`.
fn assistant_calls(
    messages: &Value,
    arguments: impl Fn(&Value) -> Value,
) -> Vec<Vec<(String, Value)>> {
    let assistant = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant");
    assistant
        .map(|m| {
            let calls = m["tool_calls"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            calls
                .iter()
                .map(|c| {
                    let name = c["function"]["name"].as_str().unwrap().to_owned();
                    (name, arguments(&c["function"]["arguments"]))
                })
                .collect()
        })
        .collect()
}

fn names_and_args(calls: &[ToolCall]) -> Vec<(String, Value)> {
    tool_check::names_and_args(calls)
}

// ---------------------------------------------------------------- DeepSeek

/// DeepSeek V3 and V3.1 on the DeepSeek V3 vocabulary: round trips (single and parallel),
/// 200 constrained walks (required and named) whose calls validate, no call under `none`.
#[test]
fn deepseek_v3_and_v31() {
    let tok = RealTokenizer::load("deepseek_v3");
    for (f, seeds) in [
        (DeepSeek::v3(), [10, 11, 20, 21]),
        (DeepSeek::v31(), [12, 13, 30, 31]),
    ] {
        let [r0, r1, w0, w1] = seeds;
        tool_check::check_family(tok.as_ref(), &f, [r0, r1], [w0, w1], &[]);
    }
}

/// functionary's DeepSeek R1 rendered prompt: every assistant turn parses to the calls the
/// test case gives it (code-interpreter calls as `{"code": CODE}`).
#[test]
fn deepseek_r1_prompt_fixture() {
    let Some(dir) = common::testdata_path("toolcalls/functionary-prompt-fixtures") else {
        return;
    };
    let case: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("test_case.json")).unwrap())
            .unwrap();
    let mut tools_json: Vec<Value> = case["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "function")
        .cloned()
        .collect();
    tools_json.push(json!({"type": "function", "function": {"name": "python",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}));
    let tools = Tool::list_from_openai(&Value::Array(tools_json)).unwrap();
    let expected_turns =
        assistant_calls(&case["messages"], |a| wire_arguments(a.as_str().unwrap()));
    let f = DeepSeek::v3();
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("prompt_test_r1") && name.ends_with(".txt")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let turns: Vec<&str> = text
            .split("<\u{ff5c}Assistant\u{ff5c}>")
            .skip(1)
            .map(|t| {
                t.split("<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>")
                    .next()
                    .unwrap()
            })
            .collect();
        if !text.contains("<\u{ff5c}tool\u{2581}calls\u{2581}begin\u{ff5c}>") {
            // The distilled-model fixtures render calls in another family's syntax.
            eprintln!("{name}: no DeepSeek markers, skipped");
            continue;
        }
        files += 1;
        let (mut recovered, mut expected, mut failures) = (0, 0, Vec::new());
        assert_eq!(turns.len(), expected_turns.len(), "{name}");
        for (turn, want) in turns.iter().zip(&expected_turns) {
            let out = f.parse(turn, &tools);
            expected += want.len();
            let got = names_and_args(&out.tool_calls);
            recovered += want.iter().zip(&got).filter(|(a, b)| a == b).count();
            if &got != want {
                failures.push(format!("{turn:?} → {got:?} {:?}", out.errors));
            }
        }
        report(
            &format!("functionary {name}"),
            recovered,
            expected,
            &failures,
        );
        assert_eq!(recovered, expected, "{name}: {failures:?}");
    }
    assert!(files >= 1 || !common::in_ci());
}

// ---------------------------------------------------------------- Kimi K2

/// A Kimi test vocabulary: Qwen3's tokenizer (same `<|im_end|>` turn end, `<think>`
/// tokens) plus Kimi's five tool markers as special added tokens, so the `tokenizers`
/// crate encodes the marker text as those ids.
pub(crate) fn kimi_tokenizer() -> Option<RealTokenizer> {
    let dir = common::tokenizer_path("qwen3")?;
    let dir = dir.parent().unwrap();
    let mut json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tokenizer.json")).unwrap())
            .unwrap();
    let config = std::fs::read_to_string(dir.join("tokenizer_config.json")).unwrap();
    let next = json["added_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_u64().unwrap())
        .max()
        .unwrap()
        + 1;
    for (i, m) in tokensieve_tools::KimiK2::MARKERS.iter().enumerate() {
        let id = next + i as u64;
        json["added_tokens"].as_array_mut().unwrap().push(json!({
            "id": id, "content": m, "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": true}));
        json["model"]["vocab"][*m] = json!(id);
    }
    let text = json.to_string();
    let vocab = tokensieve::Vocabulary::from_tokenizer_json_str(&text, Some(&config))
        .expect("kimi vocabulary");
    let tokenizer: tokenizers::Tokenizer = text.parse().expect("kimi tokenizer");
    let tok = RealTokenizer::from_parts("kimi (qwen3 + markers)", vocab, tokenizer);
    for m in tokensieve_tools::KimiK2::MARKERS {
        let ids = tool_check::encode_with_specials(&tok, m);
        assert_eq!(ids.len(), 1, "{m} is one token");
        assert!(tok.vocab.is_special(ids[0]));
    }
    Some(tok)
}

/// Kimi K2 on the built Kimi vocabulary: round trips (single and parallel), 200
/// constrained walks (required and named) whose calls validate, no call under `none`.
#[test]
fn kimi_on_its_vocabulary() {
    let tok = kimi_tokenizer();
    let f = tokensieve_tools::KimiK2::default();
    tool_check::check_family(tok.as_ref(), &f, [40, 41], [42, 43], &[]);
}

/// Moonshot's K2-Vendor-Verifier recordings hold responses already parsed by the serving
/// side (content + `tool_calls` with the model's ids and raw argument JSON), not raw
/// text. Each response is put back into Kimi's syntax exactly as the model wrote it (its
/// id, its argument text verbatim, the content before the section) and must parse to the
/// same id, name and arguments; the history calls of the requests likewise; responses
/// without calls must parse to no call.
#[test]
fn kimi_vendor_verifier_recordings() {
    let Some(path) = common::testdata_path("toolcalls/k2-vendor-verifier/medium_results.jsonl")
    else {
        return;
    };
    let f = tokensieve_tools::KimiK2::default();
    let text = std::fs::read_to_string(path).unwrap();
    let (mut recovered, mut expected, mut failures) = (0, 0, Vec::new());
    let (mut plain, mut plain_ok) = (0, 0);
    let mut history = std::collections::BTreeSet::new();
    for line in text.lines() {
        let rec: Value = serde_json::from_str(line).unwrap();
        let tools = Tool::list_from_openai(&rec["request"]["tools"]).unwrap_or_default();
        let mut messages: Vec<Value> = Vec::new();
        for m in rec["request"]["messages"].as_array().into_iter().flatten() {
            if m["role"] == "assistant" && m["tool_calls"].is_array() {
                // Each distinct history turn once.
                if history.insert(m.to_string()) {
                    messages.push(m.clone());
                }
            }
        }
        if let Some(m) = rec["response"]["choices"][0].get("message") {
            if m["tool_calls"].is_array() {
                messages.push(m.clone());
            } else if let Some(c) = m["content"].as_str() {
                plain += 1;
                let out = f.parse(c, &tools);
                if out.tool_calls.is_empty() && out.errors.is_empty() {
                    plain_ok += 1;
                } else {
                    failures.push(format!("calls in plain content: {c:?}"));
                }
            }
        }
        for m in messages {
            let calls = m["tool_calls"].as_array().unwrap();
            let mut raw = m["content"].as_str().unwrap_or("").to_owned();
            raw.push_str("<|tool_calls_section_begin|>");
            for c in calls {
                raw.push_str(&format!(
                    "<|tool_call_begin|>{}<|tool_call_argument_begin|>{}<|tool_call_end|>",
                    c["id"].as_str().unwrap(),
                    c["function"]["arguments"].as_str().unwrap()
                ));
            }
            raw.push_str("<|tool_calls_section_end|>");
            let out = f.parse(&raw, &tools);
            for (i, c) in calls.iter().enumerate() {
                expected += 1;
                let want = ToolCall {
                    id: c["id"].as_str().map(str::to_owned),
                    name: c["function"]["name"].as_str().unwrap().to_owned(),
                    arguments: serde_json::from_str(c["function"]["arguments"].as_str().unwrap())
                        .unwrap(),
                };
                if out.tool_calls.get(i) == Some(&want) {
                    recovered += 1;
                } else {
                    failures.push(format!("{raw:?} → {:?} {:?}", out.tool_calls, out.errors));
                }
            }
        }
    }
    report("k2-vendor-verifier calls", recovered, expected, &failures);
    report("k2-vendor-verifier plain answers", plain_ok, plain, &[]);
    assert!(expected >= 22, "only {expected} calls found");
    assert_eq!(recovered, expected);
    assert_eq!(plain_ok, plain);
}

// ---------------------------------------------------------------- Mistral

/// Standard base64 (the Tekken file's `token_bytes`).
fn base64(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("bad base64 {c}"),
        }
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for &c in s.as_bytes() {
        if c == b'=' {
            break;
        }
        acc = (acc << 6) | val(c);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// GPT-2's byte-to-unicode map (byte-level BPE token strings).
fn byte_chars() -> Vec<char> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    let mut map = vec![' '; 256];
    for (b, c) in bs.iter().zip(cs) {
        map[*b as usize] = char::from_u32(c).unwrap();
    }
    map
}

/// Mistral's Tekken v3 vocabulary (`mistral_tekken/tekken.json`) as a Hugging Face
/// byte-level BPE tokenizer: ids 0..999 are the control tokens (special; `[TOOL_CALLS]` is
/// 9, `</s>` = 2 the stop token), ordinary token `rank` is id `rank + 1000`, and each
/// token's merge is found by running BPE over its bytes with the lower ranks (tiktoken's
/// rank order is the merge order).
pub(crate) fn tekken_tokenizer() -> Option<RealTokenizer> {
    let path = common::shared_dir()?.join("tokenizers/mistral_tekken/tekken.json");
    if !path.is_file() {
        assert!(!common::in_ci(), "tekken.json missing");
        return None;
    }
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let specials = file["config"]["default_num_special_tokens"]
        .as_u64()
        .unwrap() as usize;
    let size = file["config"]["default_vocab_size"].as_u64().unwrap() as usize;
    let ranks: Vec<Vec<u8>> = file["vocab"].as_array().unwrap()[..size - specials]
        .iter()
        .map(|t| base64(t["token_bytes"].as_str().unwrap()))
        .collect();
    let rank_of: std::collections::HashMap<&[u8], usize> = ranks
        .iter()
        .enumerate()
        .map(|(r, b)| (b.as_slice(), r))
        .collect();
    let chars = byte_chars();
    let spell = |b: &[u8]| -> String { b.iter().map(|&x| chars[x as usize]).collect() };
    let mut vocab = serde_json::Map::new();
    // The control tokens are in the model's vocabulary too, so `tokenizers` keeps their ids.
    for (id, name) in control_names(specials).iter().enumerate() {
        vocab.insert(name.clone(), json!(id));
    }
    let mut merges = Vec::new();
    for (r, bytes) in ranks.iter().enumerate() {
        vocab.insert(spell(bytes), json!(r + specials));
        if bytes.len() < 2 {
            continue;
        }
        let mut parts: Vec<&[u8]> = (0..bytes.len()).map(|i| &bytes[i..i + 1]).collect();
        loop {
            let mut best: Option<(usize, usize)> = None;
            for i in 0..parts.len() - 1 {
                let joined = &bytes[offset(&parts, i, bytes)..offset(&parts, i + 2, bytes)];
                if let Some(&jr) = rank_of.get(joined) {
                    if jr < r && best.map_or(true, |(_, b)| jr < b) {
                        best = Some((i, jr));
                    }
                }
            }
            let Some((i, _)) = best else { break };
            let a = offset(&parts, i, bytes);
            let b = offset(&parts, i + 2, bytes);
            parts.splice(i..i + 2, [&bytes[a..b]]);
            if parts.len() == 2 {
                break;
            }
        }
        if parts.len() == 2 {
            merges.push(json!([spell(parts[0]), spell(parts[1])]));
        }
    }
    let added: Vec<Value> = control_names(specials)
        .into_iter()
        .enumerate()
        .map(|(id, name)| {
            json!({"id": id, "content": name, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let pattern = file["config"]["pattern"].as_str().unwrap();
    let tj = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
             "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
             "use_regex": false}]},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                    "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
                  "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": merges}});
    let text = tj.to_string();
    let config = r#"{"eos_token": "</s>"}"#;
    let vocab =
        tokensieve::Vocabulary::from_tokenizer_json_str(&text, Some(config)).expect("tekken");
    let tokenizer: tokenizers::Tokenizer = text.parse().expect("tekken tokenizer");
    let tok = RealTokenizer::from_parts("mistral_tekken", vocab, tokenizer);
    assert_eq!(tok.token_id("[TOOL_CALLS]"), Some(9));
    assert_eq!(tok.stop(), 2);
    Some(tok)
}

/// The Tekken v3 control tokens' names, by id (tokenizers README).
fn control_names(n: usize) -> Vec<String> {
    const NAMES: [&str; 20] = [
        "<unk>",
        "<s>",
        "</s>",
        "[INST]",
        "[/INST]",
        "[AVAILABLE_TOOLS]",
        "[/AVAILABLE_TOOLS]",
        "[TOOL_RESULTS]",
        "[/TOOL_RESULTS]",
        "[TOOL_CALLS]",
        "[IMG]",
        "<pad>",
        "[IMG_BREAK]",
        "[IMG_END]",
        "[PREFIX]",
        "[MIDDLE]",
        "[SUFFIX]",
        "[SYSTEM_PROMPT]",
        "[/SYSTEM_PROMPT]",
        "[TOOL_CONTENT]",
    ];
    (0..n)
        .map(|id| {
            NAMES
                .get(id)
                .map(|s| s.to_string())
                .unwrap_or_else(|| format!("<SPECIAL_{id}>"))
        })
        .collect()
}

/// Where part `i` of `parts` (consecutive slices of `bytes`) starts.
fn offset(parts: &[&[u8]], i: usize, bytes: &[u8]) -> usize {
    if i >= parts.len() {
        return bytes.len();
    }
    parts[i].as_ptr() as usize - bytes.as_ptr() as usize
}

/// Mistral on Tekken (v3, no `[ARGS]` token, so the array syntax): round trip, single and
/// parallel; the v11+ syntax too, with `[ARGS]` as text.
#[test]
fn mistral_round_trip_tekken() {
    let Some(tok) = tekken_tokenizer() else {
        return;
    };
    let f = tokensieve_tools::Mistral::for_vocabulary(&tok.vocab, Default::default());
    assert_eq!(f.syntax(), tokensieve_tools::MistralSyntax::Array);
    tool_check::round_trips(&f, &tok, 25, [50, 51]);
    let f = tokensieve_tools::Mistral::name_args();
    assert_eq!(tool_check::round_trip(&f, &tok, FILES, 10, true, 52), 10);
}

/// Mistral (array syntax) on Tekken: 200 constrained walks, all valid; `none` never calls.
#[test]
fn mistral_walks_tekken() {
    let Some(tok) = tekken_tokenizer() else {
        return;
    };
    let f = tokensieve_tools::Mistral::array();
    tool_check::walks_and_none(&f, &tok, (200, 30), [53, 54], &[]);
    let f = format_by_name("mistral").expect("registered");
    tool_check::none_never_calls(f.as_ref(), &tok, 10, 55);
}

/// ollama's Mistral fixture (a rendered v3 prompt): each assistant turn parses to the
/// calls of the conversation it renders.
#[test]
fn mistral_ollama_fixture() {
    let Some(dir) = common::testdata_path("toolcalls/ollama-tool-fixtures") else {
        return;
    };
    let text = std::fs::read_to_string(dir.join("mistral.out")).unwrap();
    let tools = Tool::list_from_openai(
        &serde_json::from_str(&std::fs::read_to_string(dir.join("tools.json")).unwrap()).unwrap(),
    )
    .unwrap();
    let messages: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("messages.json")).unwrap()).unwrap();
    let expected = assistant_calls(&messages, Value::clone);
    // Assistant turns: after `[/INST]` or `[/TOOL_RESULTS]`, up to `</s>`.
    let mut turns = Vec::new();
    let mut rest = text.as_str();
    while let Some(k) = [rest.find("[/INST]"), rest.find("[/TOOL_RESULTS]")]
        .into_iter()
        .flatten()
        .min()
    {
        let after = &rest[k..];
        let skip = if after.starts_with("[/INST]") { 7 } else { 15 };
        let body = &after[skip..];
        match body.find("</s>") {
            Some(e) => {
                turns.push(&body[..e]);
                rest = &body[e..];
            }
            None => break,
        }
    }
    let (mut recovered, mut want, mut failures) = (0, 0, Vec::new());
    for f in [
        tokensieve_tools::Mistral::array(),
        tokensieve_tools::Mistral::name_args(),
    ] {
        assert_eq!(turns.len(), expected.len());
        for (turn, exp) in turns.iter().zip(&expected) {
            let out = f.parse(turn, &tools);
            let got = names_and_args(&out.tool_calls);
            want += exp.len();
            recovered += exp.iter().zip(&got).filter(|(a, b)| a == b).count();
            if &got != exp {
                failures.push(format!("{turn:?} → {got:?} {:?}", out.errors));
            }
        }
    }
    report(
        "ollama mistral.out (both parsers)",
        recovered,
        want,
        &failures,
    );
    assert!(want >= 2);
    assert_eq!(recovered, want);
}

// ---------------------------------------------------------------- gpt-oss Harmony

/// The gpt-oss vocabulary. Its stop token is `<|return|>`; `<|call|>` ends a call inside
/// the grammar. (Served with `<|call|>` as a stop token too, the matcher terminates on it,
/// which leaves no place for the separate stop token these checks append.)
fn gptoss_tokenizer() -> Option<RealTokenizer> {
    RealTokenizer::load("gptoss")
}

/// Harmony on gpt-oss (registered as `openai` and `harmony`): round trips, single and
/// parallel (calls as messages of their own, after `<|start|>assistant`), 200 constrained
/// walks whose calls validate, no call under `none`.
#[test]
fn harmony_on_gptoss() {
    for name in ["openai", "harmony"] {
        assert!(format_by_name(name).is_some(), "{name} registered");
    }
    let tok = gptoss_tokenizer();
    let f = tokensieve_tools::Harmony::default();
    tool_check::check_family(tok.as_ref(), &f, [60, 63], [61, 62], &[]);
}
