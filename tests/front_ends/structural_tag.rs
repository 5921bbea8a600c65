//! Structural tags (`GrammarCompiler::compile_structural_tag`, XGrammar's JSON format).
//!
//! - Accept/reject tables for every format, run through the matcher on real vocabularies
//!   (Qwen3, Llama 3.1, DeepSeek V3, gpt-oss): every text is checked byte-wise
//!   (`accept_string`) and token by token (the tokenizer's own tokens), with the mask ⇔
//!   accept invariant on a sample of tokens at every step (all special tokens included) and
//!   over the whole vocabulary at the first and last step.
//! - The issue's cases: XGrammar's reasoning + triggered-tags document, triggers and tokens
//!   that run past them, Kimi-style special-token tags, two stop tokens.
//! - Errors with JSON paths.
//!
//! Run with `cargo test --release --test front_ends structural_tag::`.

use crate::common;

use common::{check_all_tokens, Piece, RealTokenizer};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::{Arc, OnceLock};
use tokensieve::structural_tag::{Format, StructuralTag};
use tokensieve::{CompileError, CompiledGrammar, GrammarMatcher, StructuralTagError};

const VOCABS: [&str; 4] = ["qwen3", "llama3_1", "deepseek_v3", "gptoss"];

fn real(name: &str) -> Option<&'static RealTokenizer> {
    static CACHE: [OnceLock<Option<RealTokenizer>>; 4] = [const { OnceLock::new() }; 4];
    let i = VOCABS.iter().position(|t| *t == name).unwrap();
    CACHE[i].get_or_init(|| RealTokenizer::load(name)).as_ref()
}

/// A special token of each vocabulary that is not a stop token, for the `token` format.
fn special_of(name: &str) -> &'static str {
    match name {
        "qwen3" => "<|im_start|>",
        "llama3_1" => "<|start_header_id|>",
        "deepseek_v3" => "<｜begin▁of▁sentence｜>",
        "gptoss" => "<|call|>",
        _ => unreachable!(),
    }
}

/// Where `⟨S⟩` appears in a table, the vocabulary's [`special_of`] token is meant.
const S: &str = "⟨S⟩";

struct Row {
    format: &'static str,
    tag: &'static str,
    accept: &'static [&'static str],
    reject: &'static [&'static str],
}

const OBJ_A: &str =
    r#"{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}"#;

fn rows() -> Vec<Row> {
    vec![
        Row {
            format: "const_string",
            tag: r#"{"type": "const_string", "value": "Let's go."}"#,
            accept: &["Let's go."],
            reject: &["", "Let's go", "Let's go..", "let's go.", " Let's go."],
        },
        Row {
            format: "json_schema",
            tag: Box::leak(
                format!(r#"{{"type": "json_schema", "json_schema": {OBJ_A}}}"#).into_boxed_str(),
            ),
            accept: &[
                r#"{"a": 1}"#,
                r#"{"a":-5}"#,
                r#"{ "a" : 0 }"#,
                r#"{"a": 123456789}"#,
                "{\n  \"a\": 2\n}",
            ],
            reject: &[
                "{}",
                r#"{"a": "1"}"#,
                r#"{"a": 1.5}"#,
                r#"{"a": 1"#,
                r#"{"b": 1}"#,
            ],
        },
        Row {
            format: "json_schema qwen_xml",
            tag: r#"{"type": "json_schema", "style": "qwen_xml", "json_schema": {"type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}"#,
            accept: &[
                "<parameter=city>\nParis\n</parameter>",
                "<parameter=city>\nNew York, \"NY\"\n</parameter>",
                "<parameter=city>\nline 1\nline 2\n</parameter>",
                "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>",
                "<parameter=city>\n\n</parameter>",
            ],
            reject: &[
                "<parameter=days>\n3\n</parameter>",
                "<parameter=city>\nParis\n</parameter>\n<parameter=days>\nthree\n</parameter>",
                "<parameter=city>\na</parameter>b\n</parameter>",
                "<parameter=town>\nParis\n</parameter>",
                "<parameter=city>Paris</parameter>",
            ],
        },
        Row {
            format: "json_schema deepseek_xml",
            tag: r#"{"type": "json_schema", "style": "deepseek_xml", "json_schema": {"type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}"#,
            accept: &[
                "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"city\" string=\"true\">New York, \"NY\"</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"city\" string=\"true\">line 1\nline 2</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"city\" string=\"true\"></｜DSML｜parameter>",
            ],
            reject: &[
                "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"city\" string=\"false\">Paris</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"true\">3</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">three</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"city\" string=\"true\">a</｜DSML｜parameter>b</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter><｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>",
                "<parameter name=\"city\">Paris</parameter>",
            ],
        },
        Row {
            format: "json_schema deepseek_xml string or null",
            tag: r#"{"type": "json_schema", "style": "deepseek_xml", "json_schema": {"type": "object",
                "properties": {"note": {"type": ["string", "null"]}}, "required": ["note"]}}"#,
            accept: &[
                "<｜DSML｜parameter name=\"note\" string=\"true\">abc</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"note\" string=\"true\">null</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"note\" string=\"false\">null</｜DSML｜parameter>",
            ],
            reject: &[
                "<｜DSML｜parameter name=\"note\" string=\"false\">abc</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"note\" string=\"false\">\"abc\"</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"note\" string=\"false\">3</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"note\" string=\"maybe\">abc</｜DSML｜parameter>",
                "<｜DSML｜parameter name=\"note\">abc</｜DSML｜parameter>",
            ],
        },
        Row {
            format: "json_schema minimax_xml",
            tag: r#"{"type": "json_schema", "style": "minimax_xml", "json_schema": {"type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}"#,
            accept: &[
                "<parameter name=\"city\">Paris</parameter>",
                "<parameter name=\"city\">New York, \"NY\"</parameter>",
                "<parameter name=\"city\">line 1\nline 2</parameter>",
                "<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>",
                "<parameter name=\"city\"></parameter>",
            ],
            reject: &[
                "<parameter name=\"days\">3</parameter>",
                "<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">three</parameter>",
                "<parameter name=\"city\">a</parameter>b</parameter>",
                "<parameter name=\"town\">Paris</parameter>",
                "<parameter=city>\nParis\n</parameter>",
                "<parameter name='city'>Paris</parameter>",
                "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>",
            ],
        },
        Row {
            format: "regex",
            tag: r#"{"type": "regex", "pattern": "[A-Z]{3}-[0-9]{4}"}"#,
            accept: &["ABC-1234", "XYZ-0000", "AAA-9999", "QRS-5678", "MNO-1111"],
            reject: &["AB-1234", "ABC-123", "abc-1234", "ABC1234", "ABC-12345"],
        },
        Row {
            format: "grammar",
            tag: r#"{"type": "grammar", "grammar": "root ::= (\"yes\" | \"no\") (\", \" root)?"}"#,
            accept: &["yes", "no", "yes, no", "no, no, yes", "yes, yes, yes, yes"],
            reject: &["", "maybe", "yes,no", "yes, ", "Yes"],
        },
        Row {
            format: "any_text",
            tag: r#"{"type": "any_text", "excludes": ["</x>", "STOP"]}"#,
            accept: &[
                "",
                "hello world",
                "a < b and c > d </ x>",
                "STO P",
                "日本語のテキスト 😀",
            ],
            reject: &["</x>", "a</x>b", "STOP", "well STOP here", "stop STOP"],
        },
        Row {
            format: "sequence",
            tag: r#"{"type": "sequence", "elements": [{"type": "const_string", "value": "n="},
                {"type": "regex", "pattern": "[0-9]+"}, {"type": "const_string", "value": ";"}]}"#,
            accept: &["n=1;", "n=0;", "n=42;", "n=1234567890;", "n=007;"],
            reject: &["n=;", "n=1", "=1;", "n=a;", "n=1;;"],
        },
        Row {
            format: "or",
            tag: r#"{"type": "or", "elements": [{"type": "const_string", "value": "yes"},
                {"type": "const_string", "value": "no"}, {"type": "regex", "pattern": "[0-9]"}]}"#,
            accept: &["yes", "no", "0", "7", "9"],
            reject: &["", "yesno", "10", "maybe", "n"],
        },
        Row {
            format: "optional",
            tag: r#"{"type": "sequence", "elements": [{"type": "optional", "content":
                {"type": "const_string", "value": "Dr. "}}, {"type": "const_string", "value": "Who"}]}"#,
            accept: &["Who", "Dr. Who"],
            reject: &["", "Dr. ", "Dr. Dr. Who", "Dr.Who", "who"],
        },
        Row {
            format: "plus",
            tag: r#"{"type": "plus", "content": {"type": "const_string", "value": "ab"}}"#,
            accept: &["ab", "abab", "ababab", "abababab", "ababababab"],
            reject: &["", "a", "aba", "ba", "abb"],
        },
        Row {
            format: "star",
            tag: r#"{"type": "star", "content": {"type": "const_string", "value": "ab"}}"#,
            accept: &["", "ab", "abab", "ababab", "abababab"],
            reject: &["a", "aba", "ba", "abb", "b"],
        },
        Row {
            format: "repeat",
            tag: r#"{"type": "repeat", "min": 2, "max": 3, "content": {"type": "const_string", "value": "ab"}}"#,
            accept: &["abab", "ababab"],
            reject: &["", "ab", "abababab", "aba", "ababa"],
        },
        Row {
            format: "tag",
            tag: r#"{"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}"#,
            accept: &[
                "<think></think>",
                "<think>hmm</think>",
                "<think>a <b> c</think>",
                "<think>x</thin</think>",
                "<think>\n\n</think>",
            ],
            reject: &[
                "<think>",
                "hmm</think>",
                "<think>a</think>b",
                "<think>a</think></think>",
                "<thinking>a</think>",
            ],
        },
        Row {
            format: "triggered_tags",
            tag: r#"{"type": "triggered_tags", "triggers": ["<function="], "tags": [
                {"type": "tag", "begin": "<function=get_time>", "content": {"type": "json_schema",
                 "json_schema": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}, "end": "</function>"},
                {"type": "tag", "begin": "<function=search>", "content": {"type": "json_schema",
                 "json_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}, "end": "</function>"}]}"#,
            accept: &[
                "",
                "Just text, no call.",
                "#include <functional>\nint main() {}",
                r#"Let me look. <function=search>{"q": "rust"}</function> Found it."#,
                r#"<function=get_time>{"tz": "UTC"}</function><function=search>{"q": "x"}</function>"#,
            ],
            reject: &[
                "<function=list_files>{}</function>",
                r#"<function=search>{"query": "rust"}</function>"#,
                r#"<function=search>{"q": "rust"}"#,
                "text <function= and more",
                r#"<function=get_time>{"tz": 5}</function>"#,
            ],
        },
        Row {
            format: "triggered_tags at_least_one stop_after_first",
            tag: r#"{"type": "triggered_tags", "triggers": ["<f="], "at_least_one": true, "stop_after_first": true,
                "tags": [{"type": "tag", "begin": "<f=a>", "content": {"type": "regex", "pattern": "[0-9]+"}, "end": "</f>"},
                         {"type": "tag", "begin": "<f=b>", "content": {"type": "any_text"}, "end": "</f>"}]}"#,
            accept: &[
                "<f=a>1</f>",
                "<f=a>123</f>",
                "<f=b></f>",
                "<f=b>text</f>",
                "<f=b><f=a></f>",
            ],
            reject: &[
                "",
                "hi <f=a>1</f>",
                "<f=a>1</f> bye",
                "<f=a>1</f><f=a>2</f>",
                "<f=c>1</f>",
            ],
        },
        Row {
            format: "tags_with_separator",
            tag: r#"{"type": "tags_with_separator", "separator": ",", "tags": [
                {"type": "tag", "begin": "<i>", "content": {"type": "regex", "pattern": "[a-z]+"}, "end": "</i>"}]}"#,
            accept: &[
                "",
                "<i>a</i>",
                "<i>a</i>,<i>bc</i>",
                "<i>x</i>,<i>y</i>,<i>z</i>",
                "<i>word</i>",
            ],
            reject: &[
                "<i>a</i><i>b</i>",
                "<i>a</i>,",
                ",<i>a</i>",
                "text",
                "<i>A</i>",
            ],
        },
        Row {
            format: "dispatch",
            tag: r#"{"type": "dispatch", "rules": [["<n>", {"type": "regex", "pattern": "[0-9]+</n>"}]], "loop": true}"#,
            accept: &[
                "",
                "plain",
                "a <n>1</n> b",
                "<n>12</n><n>3</n>",
                "x < n > y",
            ],
            reject: &["<n>x</n>", "<n>1", "a <n></n>", "<n>1</n> <n>", "<n>-1</n>"],
        },
        Row {
            format: "token",
            tag: r#"{"type": "sequence", "elements": [{"type": "token", "token": "⟨S⟩"}, {"type": "const_string", "value": "ok"}]}"#,
            accept: &["⟨S⟩ok"],
            reject: &["ok", "⟨S⟩", "⟨S⟩⟨S⟩ok", "⟨S⟩o", "⟨S⟩okk"],
        },
    ]
}

/// The tag text for `name`'s vocabulary (`⟨S⟩` replaced).
fn tag_for(row: &Row, name: &str) -> String {
    row.tag.replace(S, special_of(name))
}

/// Pieces of a table text: `⟨S⟩` is the special token, the rest text.
fn pieces<'a>(text: &'a str, special: &'a str) -> Vec<Piece<'a>> {
    let mut out = Vec::new();
    for (i, part) in text.split(S).enumerate() {
        if i > 0 {
            out.push(Piece::Special(special));
        }
        if !part.is_empty() {
            out.push(Piece::Text(part));
        }
    }
    out
}

/// The mask ⇔ accept invariant on a sample: every special token, the text's next token,
/// up to 200 allowed and 200 other random tokens.
fn check_sample(
    m: &GrammarMatcher,
    rt: &RealTokenizer,
    next: Option<u32>,
    rng: &mut StdRng,
) -> Result<(), String> {
    let vocab = &rt.vocab;
    let mut mask = vec![0u32; vocab.bitmask_words()];
    let mut fork = m.clone();
    fork.fill_next_token_bitmask(&mut mask)
        .map_err(|e| e.to_string())?;
    let n = vocab.vocab_size() as u32;
    let mut ids: Vec<u32> = vocab.special_tokens().collect();
    ids.extend(next);
    let allowed: Vec<u32> = (0..n)
        .filter(|&t| tokensieve::mask::is_token_allowed(&mask, t))
        .collect();
    for _ in 0..200 {
        if !allowed.is_empty() {
            ids.push(allowed[rng.gen_range(0..allowed.len())]);
        }
        ids.push(rng.gen_range(0..n));
    }
    ids.sort_unstable();
    ids.dedup();
    for t in ids {
        let bit = tokensieve::mask::is_token_allowed(&mask, t);
        let ok = fork.try_accept_token(t).is_ok();
        if ok {
            fork.rollback(1).unwrap();
        }
        if bit != ok {
            return Err(format!(
                "token {t} {:?}: mask bit {bit}, accept {ok}",
                String::from_utf8_lossy(vocab.token_bytes(t).unwrap_or(b"?"))
            ));
        }
    }
    Ok(())
}

fn check_all(m: &GrammarMatcher, rt: &RealTokenizer) -> Result<Vec<u32>, String> {
    let (allowed, bad) = check_all_tokens(m, &rt.vocab);
    match bad.first() {
        Some(b) => Err(format!("{} disagreements, first: {b}", bad.len())),
        None => Ok(allowed),
    }
}

/// Feeds `ids` token by token; returns whether all were accepted and the output can end
/// there. Checks the invariant at every step (sampled; whole vocabulary at the first step
/// when `exhaustive`, and at the end of an accepted text).
fn run(
    compiled: &Arc<CompiledGrammar>,
    rt: &RealTokenizer,
    ids: &[u32],
    exhaustive: bool,
    rng: &mut StdRng,
) -> Result<bool, String> {
    let mut m = GrammarMatcher::new(compiled.clone());
    for (i, &id) in ids.iter().enumerate() {
        if i == 0 && exhaustive {
            check_all(&m, rt).map_err(|e| format!("step 0: {e}"))?;
        }
        check_sample(&m, rt, Some(id), rng).map_err(|e| format!("step {i}: {e}"))?;
        if m.try_accept_token(id).is_err() {
            return Ok(false);
        }
    }
    if m.is_terminated() {
        // The text's last token was a stop token that the grammar names: nothing follows.
        let allowed = check_all(&m, rt).map_err(|e| format!("after termination: {e}"))?;
        return match allowed.is_empty() {
            true => Ok(true),
            false => Err(format!("terminated, yet {} tokens allowed", allowed.len())),
        };
    }
    if !m.is_completed() {
        return Ok(false);
    }
    let allowed = if exhaustive {
        check_all(&m, rt).map_err(|e| format!("at the end: {e}"))?
    } else {
        check_sample(&m, rt, None, rng).map_err(|e| format!("at the end: {e}"))?;
        vec![rt.stop()]
    };
    if !allowed.contains(&rt.stop()) {
        return Err("the text is complete, yet the stop token is not allowed".into());
    }
    Ok(true)
}

fn tables(name: &str) {
    let Some(rt) = real(name) else { return };
    let mut rng = StdRng::seed_from_u64(7);
    let mut failures = Vec::new();
    let special = special_of(name);
    for row in rows() {
        let tag = tag_for(&row, name);
        let compiled = match rt.compiler.compile_structural_tag(tag.as_str()) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("[{}] does not compile: {e}", row.format));
                continue;
            }
        };
        for (texts, want) in [(row.accept, true), (row.reject, false)] {
            for (k, text) in texts.iter().enumerate() {
                let ids = rt.encode_pieces(&pieces(text, special));
                // Byte-wise first (independent of tokenization), for texts without tokens.
                if !text.contains(S) {
                    let mut m = GrammarMatcher::new(compiled.clone());
                    let bytewise = m.accept_string(text) && m.is_completed();
                    if bytewise != want {
                        failures.push(format!(
                            "[{}] {text:?}: accept_string says {bytewise}",
                            row.format
                        ));
                    }
                }
                match run(&compiled, rt, &ids, k == 0, &mut rng) {
                    Ok(got) if got == want => {}
                    Ok(got) => failures.push(format!(
                        "[{}] {text:?}: tokens say {got}, want {want}",
                        row.format
                    )),
                    Err(e) => failures.push(format!("[{}] {text:?}: {e}", row.format)),
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn tables_qwen3() {
    tables("qwen3");
}

#[test]
fn tables_llama3_1() {
    tables("llama3_1");
}

#[test]
fn tables_deepseek_v3() {
    tables("deepseek_v3");
}

#[test]
fn tables_gptoss() {
    tables("gptoss");
}

/// Every table row has at least 5 accepted and 5 rejected texts, except formats whose
/// language is smaller (const_string, optional, repeat, token have fewer valid strings).
#[test]
fn tables_cover_every_format() {
    let rows = rows();
    for f in [
        "const_string",
        "json_schema",
        "json_schema qwen_xml",
        "json_schema deepseek_xml",
        "json_schema minimax_xml",
        "regex",
        "grammar",
        "any_text",
        "sequence",
        "or",
        "optional",
        "plus",
        "star",
        "repeat",
        "tag",
        "triggered_tags",
        "tags_with_separator",
        "dispatch",
        "token",
    ] {
        let row = rows
            .iter()
            .find(|r| r.format == f)
            .unwrap_or_else(|| panic!("no row for {f}"));
        assert!(row.reject.len() >= 5, "{f}");
        let small = ["const_string", "optional", "repeat", "token"].contains(&f);
        assert!(small || row.accept.len() >= 5, "{f}");
    }
}

// ---------------------------------------------------------------------------------------
// The issue's cases.

const THINK_THEN_CALL: &str = r#"{
  "type": "structural_tag",
  "format": {
    "type": "sequence",
    "elements": [
      {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
      {"type": "triggered_tags", "triggers": ["<function="], "tags": [
        {"type": "tag", "begin": "<function=get_weather>", "content": {"type": "json_schema",
          "json_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
         "end": "</function>"}]}
    ]
  }
}"#;

#[test]
fn xgrammar_document_is_accepted_unchanged() {
    for name in ["qwen3", "llama3_1"] {
        let Some(rt) = real(name) else { return };
        let compiled = rt.compiler.compile_structural_tag(THINK_THEN_CALL).unwrap();
        let ok =
            r#"<think>hmm</think>Sure. <function=get_weather>{"city": "Paris"}</function> done"#;
        let bad =
            r#"<think>hmm</think>Sure. <function=get_weather>{"town": "Paris"}</function> done"#;
        let mut rng = StdRng::seed_from_u64(1);
        let ids = rt.encode_pieces(&[Piece::Text(ok)]);
        assert_eq!(run(&compiled, rt, &ids, true, &mut rng), Ok(true), "{name}");
        let ids = rt.encode_pieces(&[Piece::Text(bad)]);
        assert_eq!(
            run(&compiled, rt, &ids, false, &mut rng),
            Ok(false),
            "{name}"
        );
        let mut m = GrammarMatcher::new(compiled.clone());
        assert!(!m.accept_string(bad));
    }
}

/// The tag's JSON reads back equal after writing it out, and serde reads it too.
#[test]
fn json_round_trip() {
    let tag = StructuralTag::from_json_str(THINK_THEN_CALL).unwrap();
    let back = StructuralTag::from_json(&tag.to_json()).unwrap();
    assert_eq!(tag, back);
    let via_serde: StructuralTag = serde_json::from_str(THINK_THEN_CALL).unwrap();
    assert_eq!(tag, via_serde);
    let text = serde_json::to_string(&tag).unwrap();
    assert_eq!(StructuralTag::from_json_str(&text).unwrap(), tag);
    for row in rows() {
        let f: Format = serde_json::from_str(row.tag).unwrap();
        let again: Format = serde_json::from_value(f.to_json()).unwrap();
        assert_eq!(f, again, "{}", row.format);
    }
}

const TWO_TOOLS: &str = r#"{"type": "structural_tag", "format": {"type": "triggered_tags",
  "triggers": ["<function="], "tags": [
    {"type": "tag", "begin": "<function=get_time>", "content": {"type": "json_schema",
      "json_schema": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}, "end": "</function>"},
    {"type": "tag", "begin": "<function=search>", "content": {"type": "json_schema",
      "json_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}, "end": "</function>"}]}}"#;

#[test]
fn trigger_then_a_token_running_into_an_unknown_name() {
    let Some(rt) = real("qwen3") else { return };
    let compiled = rt.compiler.compile_structural_tag(TWO_TOOLS).unwrap();
    let mut m = GrammarMatcher::new(compiled.clone());
    assert!(m.accept_string("#include <functional>\n"));
    let mut m2 = GrammarMatcher::new(compiled.clone());
    assert!(!m2.accept_string("<function=list_files>{}</function>"));

    let mut m = GrammarMatcher::new(compiled);
    let head = rt.encode_pieces(&[Piece::Text("Let me check. <function")]);
    for &t in &head {
        assert!(m.accept_token(t));
    }
    let list = rt.token_id("=list").expect("Qwen3 has the token `=list`");
    let before = check_all(&m, rt).unwrap();
    assert!(!before.contains(&list), "the mask must not allow `=list`");
    let steps = m.num_accepted_steps();
    assert!(m.try_accept_token(list).is_err());
    assert_eq!(
        m.num_accepted_steps(),
        steps,
        "a refused token leaves the state unchanged"
    );
    assert_eq!(check_all(&m, rt).unwrap(), before);
    let search = rt
        .token_id("=search")
        .or_else(|| rt.token_id("=s"))
        .expect("a `=s…` token");
    assert!(before.contains(&search));
    assert!(m.accept_token(search));
    let rest = r#"{"q": "weather"}</function>"#;
    let rest = if rt.vocab.token_bytes(search) == Some(b"=search".as_slice()) {
        format!(">{rest}")
    } else {
        format!("earch>{rest}")
    };
    assert!(m.accept_string(&rest));
    assert!(m.is_completed());
}

/// Kimi K2's markers as special tokens (gpt-oss has none of them, so a vocabulary is built
/// here with them as specials): the end token never closes a JSON string.
#[test]
fn special_token_tags_are_atomic() {
    use tokensieve::GrammarCompiler;
    let mut tokens: Vec<Vec<u8>> = (0u8..128).map(|b| vec![b]).collect();
    let specials = [
        "<|tool_calls_section_begin|>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
        "<|tool_calls_section_end|>",
        "<|im_end|>",
    ];
    for s in specials {
        tokens.push(s.as_bytes().to_vec());
    }
    tokens.push(b"<|tool_call_end|>"[..8].to_vec()); // an ordinary token "<|tool_c"
    let ids: Vec<u32> = (128..134).collect();
    let vocab = tokensieve::Vocabulary::from_token_bytes(&tokens, &ids, &[133]).unwrap();
    let compiler = GrammarCompiler::new(vocab);
    let tag = r#"{"type": "structural_tag", "format": {"type": "tag",
        "begin": "<|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>",
        "content": {"type": "json_schema", "json_schema": {"type": "object",
            "properties": {"queries": {"type": "array", "items": {"type": "string"}}}, "required": ["queries"]}},
        "end": "<|tool_call_end|>"}}"#;
    let compiled = compiler.compile_structural_tag(tag).unwrap();
    let feed = |parts: &[&str]| -> bool {
        let mut m = GrammarMatcher::new(compiled.clone());
        for p in parts {
            let ok = match specials.iter().position(|s| s == p) {
                Some(i) => m.accept_token(128 + i as u32),
                None => m.accept_string(p),
            };
            if !ok {
                return false;
            }
        }
        m.is_completed()
    };
    let (b, a, e) = (
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
    );
    assert!(feed(&[
        b,
        "functions.search:0",
        a,
        r#"{"queries":["hello"]}"#,
        e
    ]));
    assert!(
        !feed(&[b, "functions.search:0", a, r#"{"queries":["hello","]}"#, e]),
        "the end token closed a string"
    );
    // The marker's text spelled by ordinary tokens is not the marker.
    assert!(!feed(&[
        b,
        "functions.search:0",
        a,
        r#"{"queries":["hello"]}"#,
        "<|tool_call_end|>x"
    ]));
    let mut m = GrammarMatcher::new(compiled.clone());
    assert!(
        !m.accept_string("<|tool_call_begin|>"),
        "text is not the begin token"
    );
    // Inside a string the marker's text is just text.
    assert!(feed(&[
        b,
        "functions.search:0",
        a,
        r#"{"queries":["<|tool_call_end|>"]}"#,
        e
    ]));
}

/// Qwen3 has two stop tokens: neither may end a JSON value early, both may end it.
#[test]
fn two_stop_tokens() {
    let Some(rt) = real("qwen3") else { return };
    let im_end = rt.vocab.special_token_id("<|im_end|>").unwrap();
    let eot = rt.vocab.special_token_id("<|endoftext|>").unwrap();
    let vocab = Arc::new(
        (*rt.vocab)
            .clone()
            .with_stop_tokens(&[im_end, eot])
            .unwrap(),
    );
    let compiler = tokensieve::GrammarCompiler::new(vocab.clone());
    let tag = format!(r#"{{"type": "json_schema", "json_schema": {OBJ_A}}}"#);
    let compiled = compiler.compile_structural_tag(tag.as_str()).unwrap();
    let mut m = GrammarMatcher::new(compiled);
    let mut mask = vec![0u32; vocab.bitmask_words()];
    for part in ["{", "\"a\"", ": 1"] {
        assert!(m.accept_string(part));
        m.fill_next_token_bitmask(&mut mask).unwrap();
        for s in [im_end, eot] {
            assert!(!tokensieve::mask::is_token_allowed(&mask, s));
            assert!(m.clone().try_accept_token(s).is_err());
        }
    }
    assert!(m.accept_string("}"));
    m.fill_next_token_bitmask(&mut mask).unwrap();
    for s in [im_end, eot] {
        assert!(tokensieve::mask::is_token_allowed(&mask, s));
        let mut f = m.clone();
        assert!(f.accept_token(s));
        assert!(f.is_terminated());
    }
}

/// A marker that is a special token in one vocabulary and text in another: the same tag
/// works on both (`<|im_start|>`/`<|im_end|>` are special in Qwen3, text for Llama 3.1).
/// DeepSeek V3's full-width tool markers are added but not special in its tokenizer.json,
/// so there they are text too (one ordinary token each).
#[test]
fn marker_special_in_one_vocabulary_text_in_another() {
    let tag = r#"{"type": "tag", "begin": "<|im_start|>", "content": {"type": "regex", "pattern": "[a-z]+"}, "end": "<|im_end|>"}"#;
    if let Some(rt) = real("qwen3") {
        let compiled = rt.compiler.compile_structural_tag(tag).unwrap();
        let ids = rt.encode_pieces(&[
            Piece::Special("<|im_start|>"),
            Piece::Text("abc"),
            Piece::Special("<|im_end|>"),
        ]);
        let mut rng = StdRng::seed_from_u64(3);
        assert_eq!(run(&compiled, rt, &ids, true, &mut rng), Ok(true));
        let mut m = GrammarMatcher::new(compiled);
        assert!(
            !m.accept_string("<|im_start|>"),
            "text must not stand for the special token"
        );
    }
    if let Some(rt) = real("llama3_1") {
        let compiled = rt.compiler.compile_structural_tag(tag).unwrap();
        let mut m = GrammarMatcher::new(compiled);
        assert!(m.accept_string("<|im_start|>abc<|im_end|>"));
        assert!(m.is_completed());
    }
    if let Some(rt) = real("deepseek_v3") {
        let tag = r#"{"type": "tag", "begin": "<｜tool▁calls▁begin｜>", "content": {"type": "regex", "pattern": "[a-z]+"}, "end": "<｜tool▁calls▁end｜>"}"#;
        let compiled = rt.compiler.compile_structural_tag(tag).unwrap();
        let ids = rt.encode_pieces(&[
            Piece::Token("<｜tool▁calls▁begin｜>"),
            Piece::Text("abc"),
            Piece::Token("<｜tool▁calls▁end｜>"),
        ]);
        let mut rng = StdRng::seed_from_u64(3);
        assert_eq!(run(&compiled, rt, &ids, true, &mut rng), Ok(true));
    }
}

// ---------------------------------------------------------------------------------------
// Errors.

fn err(tag: &str) -> String {
    match StructuralTag::from_json_str(tag)
        .and_then(|t| tokensieve::structural_tag_to_grammar(&t, None))
    {
        Ok(_) => panic!("accepted: {tag}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn errors_name_the_json_path() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "const_string", "value": "a"}, {"type": "bogus"}]}}"#,
            "format.elements[1].type: unknown format type `bogus`",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "tag", "begin": "<a>", "content": {"type": "any_text"}}}"#,
            "format: missing field `end`",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "const_string", "value": 5}}"#,
            "format.value: expected a string, found a number",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool>"], "tags": [
            {"type": "tag", "begin": "<function=a>", "content": {"type": "any_text"}, "end": "</function>"}]}}"#,
            "format.triggers[0]: trigger \"<tool>\" is not a prefix of any tag's begin",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "regex", "pattern": "(a"}}"#,
            "format.pattern",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"type": "strin"}}}"#,
            "format.json_schema",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "grammar", "grammar": "root ::= \"a"}}"#,
            "format.grammar",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "repeat", "min": 3, "max": 2, "content": {"type": "any_text"}}}"#,
            "format.max",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "exclude_token", "exclude_tokens": [1]}}"#,
            "unsupported format `exclude_token`",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "const_string", "value": "a", "extra": 1}}"#,
            "unknown field `extra`",
        ),
        (r#"{"type": "structural_tag"}"#, "missing field `format`"),
        ("[1, 2", "not valid JSON"),
    ];
    for (tag, want) in cases {
        let got = err(tag);
        assert!(got.contains(want), "{tag}\n  got: {got}\n  want: …{want}…");
    }
    // An unknown token, against a vocabulary.
    let rt =
        tokensieve::Vocabulary::from_token_bytes(&[b"a".as_slice(), b"<eos>"], &[1], &[1]).unwrap();
    let c = tokensieve::GrammarCompiler::new(rt);
    let e = c
        .compile_structural_tag(r#"{"type": "token", "token": 7}"#)
        .unwrap_err();
    assert!(
        matches!(
            e,
            CompileError::StructuralTag(StructuralTagError::Token { .. })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("format.token"), "{e}");
}

// ---------------------------------------------------------------------------------------
// Found by review.

fn toy() -> tokensieve::GrammarCompiler {
    let mut tokens: Vec<Vec<u8>> = (0u8..128).map(|b| vec![b]).collect();
    for t in ["</t>", "<t>", "<|sp|>", "<eos>"] {
        tokens.push(t.as_bytes().to_vec());
    }
    let v = tokensieve::Vocabulary::from_token_bytes(&tokens, &[130, 131], &[131]).unwrap();
    tokensieve::GrammarCompiler::new(v)
}

fn toy_accepts(c: &tokensieve::GrammarCompiler, tag: &str, text: &str) -> bool {
    let g = c.compile_structural_tag(tag).unwrap();
    let mut m = GrammarMatcher::new(g);
    m.accept_string(text) && m.is_completed()
}

/// Free text stops at a tag's end wherever the content may end, and whatever form the end
/// takes (text, or a token object naming an ordinary token).
#[test]
fn free_text_stops_at_every_form_of_end() {
    let c = toy();
    for tag in [
        r#"{"type": "tag", "begin": "<t>", "content": {"type": "any_text"}, "end": {"type": "token", "token": "</t>"}}"#,
        r#"{"type": "tag", "begin": "<t>", "content": {"type": "any_text"}, "end": {"type": "token", "token": 128}}"#,
        r#"{"type": "tag", "begin": "<t>", "content": {"type": "plus", "content": {"type": "any_text"}}, "end": "</t>"}"#,
        r#"{"type": "tag", "begin": "<t>", "content": {"type": "sequence", "elements": [{"type": "any_text"},
            {"type": "optional", "content": {"type": "const_string", "value": "!"}}]}, "end": "</t>"}"#,
        r#"{"type": "tag", "begin": "<t>", "content": {"type": "sequence", "elements": [{"type": "any_text"},
            {"type": "const_string", "value": ""}]}, "end": "</t>"}"#,
    ] {
        assert!(toy_accepts(&c, tag, "<t>a</t>"), "{tag}");
        assert!(!toy_accepts(&c, tag, "<t>a</t>b</t>"), "{tag}");
    }
    let star = r#"{"type": "plus", "content": {"type": "any_text", "excludes": ["STOP"]}}"#;
    assert!(toy_accepts(&c, star, "xx STO yy"));
    assert!(!toy_accepts(&c, star, "xx STOP yy"));
}

/// Properties come in the order the schema declares them (serde_json keeps it).
#[test]
fn declared_property_order() {
    let c = toy();
    let xml = r#"{"type": "json_schema", "style": "qwen_xml", "json_schema": {"type": "object",
        "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}, "required": ["zeta", "alpha"]}}"#;
    assert!(toy_accepts(
        &c,
        xml,
        "<parameter=zeta>\nx\n</parameter>\n<parameter=alpha>\n1\n</parameter>"
    ));
    assert!(!toy_accepts(
        &c,
        xml,
        "<parameter=alpha>\n1\n</parameter>\n<parameter=zeta>\nx\n</parameter>"
    ));
    let json = r#"{"type": "json_schema", "json_schema": {"type": "object",
        "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}, "required": ["zeta", "alpha"]}}"#;
    assert!(toy_accepts(&c, json, r#"{"zeta": "x", "alpha": 1}"#));
}

/// A `token` whose text is no token of the vocabulary is an error, not text; formats nested
/// deeper than the limit are an error, not a stack overflow; unknown top-level fields too.
#[test]
fn more_typed_errors() {
    let c = toy();
    let e = c
        .compile_structural_tag(r#"{"type": "token", "token": "<|sp_typo|>"}"#)
        .unwrap_err();
    assert!(
        matches!(
            e,
            CompileError::StructuralTag(StructuralTagError::Token { .. })
        ),
        "{e}"
    );
    let mut v = serde_json::json!({"type": "const_string", "value": "x"});
    for _ in 0..1000 {
        v = serde_json::json!({"type": "optional", "content": v});
    }
    let e = std::thread::spawn(move || {
        c.compile_structural_tag(&v)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    })
    .join()
    .unwrap();
    assert!(e.contains("nest more than"), "{e}");
    let e = toy()
        .compile_structural_tag(
            r#"{"type": "structural_tag", "format": {"type": "any_text"}, "bogus": 1}"#,
        )
        .unwrap_err();
    assert!(e.to_string().contains("unknown field `bogus`"), "{e}");
}

/// `max_number_digits` (tokensieve's extension) caps the digit runs of JSON numbers, prints
/// back, and a bad value is a typed error naming its path.
#[test]
fn json_schema_max_number_digits() {
    let c = toy();
    let tag = r#"{"type": "json_schema", "max_number_digits": 2, "json_schema": {"type": "object",
        "properties": {"a": {"type": "number"}}, "required": ["a"]}}"#;
    assert!(toy_accepts(&c, tag, r#"{"a": 12}"#));
    assert!(toy_accepts(&c, tag, r#"{"a": 1.25}"#));
    assert!(!toy_accepts(&c, tag, r#"{"a": 123}"#));
    assert!(!toy_accepts(&c, tag, r#"{"a": 0.001}"#));
    let f: Format = serde_json::from_str(tag).unwrap();
    assert_eq!(f.to_json()["max_number_digits"], 2);
    let again: Format = serde_json::from_value(f.to_json()).unwrap();
    assert_eq!(f, again);
    let open = r#"{"type": "json_schema", "json_schema": {"type": "number"}}"#;
    assert!(toy_accepts(&c, open, "0.000000000000000000000000000001"));
    for bad in ["-1", "\"x\"", "1.5"] {
        let tag = format!(
            r#"{{"type": "structural_tag", "format": {{"type": "json_schema", "json_schema": {{}}, "max_number_digits": {bad}}}}}"#
        );
        let e = err(&tag);
        assert!(
            e.contains("format.max_number_digits") && e.contains("expected a count"),
            "{bad}: {e}"
        );
    }
}

/// The compiler's limits hold for the JSON Schemas inside a structural tag, not only for
/// `compile_json_schema` (a server that caps enum sizes caps them in tool calls too).
#[test]
fn compiler_limits_hold_inside_structural_tags() {
    let vocab = tokensieve::Vocabulary::from_token_bytes(
        &(0u8..128)
            .map(|b| vec![b])
            .chain([b"<eos>".to_vec()])
            .collect::<Vec<_>>(),
        &[128],
        &[128],
    )
    .unwrap();
    let compiler = tokensieve::GrammarCompiler::new(vocab).with_limits(tokensieve::Limits {
        max_enum_values: 2,
        max_schema_depth: 3,
        ..tokensieve::Limits::default()
    });
    let tag = |schema: serde_json::Value| {
        serde_json::json!({"type": "structural_tag", "format": {
            "type": "json_schema", "json_schema": schema}})
    };
    let e = compiler
        .compile_structural_tag(&tag(serde_json::json!({"enum": [1, 2, 3]})))
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_enum_values"), "{e}");
    let e = compiler
        .compile_structural_tag(&tag(
            serde_json::json!({"items": {"items": {"items": {"items": {}}}}}),
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_schema_depth"), "{e}");
    // Within the limits it compiles.
    assert!(compiler
        .compile_structural_tag(&tag(serde_json::json!({"enum": [1, 2]})))
        .is_ok());
}

// ---------------------------------------------------------------------------------------
// Issue 23, item 12: XGrammar's defaulted `type` fields.

/// Where XGrammar's pydantic models type a field as one model (`tags: List[TagFormat]`,
/// `begin: Union[str, TokenFormat]`, `StructuralTag.type`), a document may omit that
/// model's `type`, and XGrammar (Python and C++) reads it as that model: a `tag` in every
/// `tags` list, a `token` in a tag's `begin`/`end`, `structural_tag` at the top level.
/// tokensieve reads the same documents as the ones that spell `type` out.
#[test]
fn defaulted_types_read_as_xgrammar_does() {
    let pairs: &[(&str, &str)] = &[
        (
            r#"{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="],
              "tags": [{"begin": "<f=a>", "content": {"type": "any_text"}, "end": "</f>"}]}}"#,
            r#"{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="],
              "tags": [{"type": "tag", "begin": "<f=a>", "content": {"type": "any_text"}, "end": "</f>"}]}}"#,
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "tags_with_separator", "separator": ",",
              "tags": [{"begin": "<a>", "content": {"type": "const_string", "value": "x"}, "end": "</a>"},
                       {"type": "tag", "begin": "<b>", "content": {"type": "any_text"}, "end": ["</b>", "</B>"]}]}}"#,
            r#"{"type": "structural_tag", "format": {"type": "tags_with_separator", "separator": ",",
              "tags": [{"type": "tag", "begin": "<a>", "content": {"type": "const_string", "value": "x"}, "end": "</a>"},
                       {"type": "tag", "begin": "<b>", "content": {"type": "any_text"}, "end": ["</b>", "</B>"]}]}}"#,
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "token_triggered_tags", "trigger_tokens": ["<t>"],
              "tags": [{"begin": {"token": "<t>"}, "content": {"type": "any_text"}, "end": {"token": "</t>"}}]}}"#,
            r#"{"type": "structural_tag", "format": {"type": "token_triggered_tags", "trigger_tokens": ["<t>"],
              "tags": [{"type": "tag", "begin": {"type": "token", "token": "<t>"}, "content": {"type": "any_text"},
                        "end": {"type": "token", "token": "</t>"}}]}}"#,
        ),
        (
            r#"{"format": {"type": "tag", "begin": {"token": 129}, "content": {"type": "any_text"}, "end": "</t>"}}"#,
            r#"{"type": "structural_tag", "format": {"type": "tag", "begin": {"type": "token", "token": 129},
              "content": {"type": "any_text"}, "end": "</t>"}}"#,
        ),
    ];
    for (short, full) in pairs {
        let a = StructuralTag::from_json_str(short).unwrap_or_else(|e| panic!("{short}\n{e}"));
        let b = StructuralTag::from_json_str(full).unwrap();
        assert_eq!(a, b, "{short}");
        let via_serde: StructuralTag = serde_json::from_str(short).unwrap();
        assert_eq!(via_serde, b);
    }
    // And it compiles and runs like the spelled-out form.
    let c = toy();
    assert!(toy_accepts(&c, pairs[0].0, "hi <f=a>x</f> bye"));
    assert!(!toy_accepts(&c, pairs[0].0, "hi <f=b>x</f>"));
    assert!(toy_accepts(&c, pairs[1].0, "<a>x</a>,<b>y</B>"));
}

/// A defaulted `type` keeps every error at its JSON path, and where XGrammar's union of all
/// formats stands (`content`, `elements`, a bare format) `type` is still required.
#[test]
fn defaulted_types_keep_json_paths() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="],
              "tags": [{"begin": "<f=a>", "content": {"type": "any_text"}}]}}"#,
            "format.tags[0]: missing field `end`",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "tags_with_separator", "separator": ",",
              "tags": [{"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": "</a>"},
                       {"begin": "<b>", "content": {"type": "any_text"}, "end": "</b>", "ends": 1}]}}"#,
            "format.tags[1]: unknown field `ends`",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="],
              "tags": [{"type": "const_string", "value": "<f=a>"}]}}"#,
            "format.tags[0]: expected a format of type `tag`",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="],
              "tags": [{"begin": "<f=a>", "content": {"begin": "<x>", "content": {"type": "any_text"}, "end": "</x>"}, "end": "</f>"}]}}"#,
            "format.tags[0].content: missing field `type`",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "tag", "begin": {"tokens": "<t>"},
              "content": {"type": "any_text"}, "end": "</t>"}}"#,
            "format.begin: missing field `token`",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "tag", "begin": "<t>",
              "content": {"type": "any_text"}, "end": {"token": [1]}}}"#,
            "format.end.token: expected a token id or a token's text, found an array",
        ),
        (
            r#"{"type": "structural_tag", "format": {"type": "sequence", "elements": [{"value": "a"}]}}"#,
            "format.elements[0]: missing field `type`",
        ),
        (
            r#"{"format": {"type": "const_string", "value": "a"}, "extra": 1}"#,
            "unknown field `extra`",
        ),
    ];
    for (tag, want) in cases {
        let got = err(tag);
        assert!(got.contains(want), "{tag}\n  got: {got}\n  want: …{want}…");
    }
}
