//! The `invoke`-style families: DeepSeek V3.2 / V4 DSML on the DeepSeek V3 vocabulary (it
//! holds the markers' characters, U+FF5C `｜`) and MiniMax-M2 on o200k (gpt-oss's
//! vocabulary; MiniMax's own is not in ../shared/tokenizers). Rendered calls are accepted
//! token by token with the mask agreeing with the matcher, and parse back (whole and
//! streamed); constrained walks give valid calls; under `none` no call appears; the
//! templates' own texts parse (docs/tool-call-formats-extra.md).

use crate::common;
use crate::tool_check;

use common::RealTokenizer;
use serde_json::json;
use tokensieve::GrammarMatcher;
use tokensieve_tools::{format_by_name, format_by_name_with, FormatOptions, ToolCall, ToolChoice};

/// The vocabulary each family is tested on.
fn tokenizer(family: &str) -> Option<RealTokenizer> {
    RealTokenizer::load(if family == "minimax_m2" {
        "gptoss"
    } else {
        "deepseek_v3"
    })
}

/// Round trip for single and parallel calls under `required`, `auto` and a named choice.
fn round_trip(family: &str, seed: u64) {
    let Some(tok) = tokenizer(family) else { return };
    let f = format_by_name(family).expect("registered");
    tool_check::round_trips(f.as_ref(), &tok, 25, [seed, seed + 1]);
}

#[test]
fn deepseek_v32_round_trip() {
    round_trip("deepseek_v32", 51);
}

#[test]
fn deepseek_v4_round_trip() {
    round_trip("deepseek_v4", 53);
}

#[test]
fn minimax_m2_round_trip_o200k() {
    round_trip("minimax_m2", 55);
}

/// 200 constrained walks (required and named) whose calls all validate; `none` never
/// calls.
fn walks(family: &str, hints: &[&str], seed: u64) {
    let Some(tok) = tokenizer(family) else { return };
    let f = format_by_name(family).expect("registered");
    // 60 walks (not the older families' 200): each DSML walk is long, and the round-trip
    // walks of tests/formats/round_trip.rs cover every tool_choice besides.
    tool_check::walks_and_none(f.as_ref(), &tok, (60, 30), [seed, seed + 1], hints);
}

#[test]
fn deepseek_v32_walks() {
    walks(
        "deepseek_v32",
        &[
            "</｜DSML｜parameter>\n",
            "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        ],
        61,
    );
}

#[test]
fn deepseek_v4_walks() {
    walks(
        "deepseek_v4",
        &[
            "</｜DSML｜parameter>\n",
            "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        ],
        63,
    );
}

#[test]
fn minimax_m2_walks_o200k() {
    walks(
        "minimax_m2",
        &[
            "</parameter>\n",
            "</parameter>\n</invoke>\n</minimax:tool_call>",
        ],
        65,
    );
}

/// 1, 2 and 3 rendered calls fed token by token under `required` (parallel) and `auto`:
/// at every step the whole vocabulary's mask agrees with the matcher (every 4th step and
/// the last; the fed token at every step), the stop token ends the turn, and the text
/// parses back to the same calls, whole and streamed a token at a time.
fn one_two_three(family: &str) {
    let Some(tok) = tokenizer(family) else { return };
    let f = format_by_name(family).expect("registered");
    let tools = tool_check::weather_tools();
    let all = [
        ToolCall::new(
            "get_weather",
            json!({"city": "Paris", "unit": "celsius", "days": 3}),
        ),
        ToolCall::new("get_time", json!({"tz": "Europe/Paris"})),
        ToolCall::new("get_weather", json!({"city": "New York, \"NY\"\nUSA"})),
    ];
    for n in 1..=3 {
        let calls = &all[..n];
        let text = f.render_calls(calls);
        let ids = tool_check::encode_with_specials(&tok, &text);
        for choice in [ToolChoice::Required, ToolChoice::Auto] {
            let tag = f.structural_tag(&tools, &choice, true).expect("tag");
            let g = tok.compiler.compile_structural_tag(&tag).expect("compiles");
            let mut m = GrammarMatcher::new(g);
            for (i, &id) in ids.iter().enumerate() {
                if i % 4 == 0 {
                    let (_, bad) = common::check_all_tokens(&m, &tok.vocab);
                    assert!(
                        bad.is_empty(),
                        "{family} {n} calls, step {i}: {:?}",
                        &bad[..1]
                    );
                }
                assert!(
                    m.accept_token(id),
                    "{family}: token {i} of {text:?} refused"
                );
            }
            let (allowed, bad) = common::check_all_tokens(&m, &tok.vocab);
            assert!(bad.is_empty(), "{family} at the end: {:?}", &bad[..1]);
            assert!(
                allowed.contains(&tok.stop()),
                "{family}: no stop after {text:?}"
            );
        }
        let parsed = f.parse(&text, &tools);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        assert_eq!(parsed.content, None);
        assert_eq!(
            tool_check::names_and_args(&parsed.tool_calls),
            tool_check::names_and_args(calls)
        );
        // Streamed a token at a time (a token holding part of a character waits for the
        // rest of it).
        let mut p = f.streaming_parser(&tools);
        let mut events = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        for &id in &ids {
            pending.extend(tok.vocab.decode_bytes(&[id]));
            let valid = match std::str::from_utf8(&pending) {
                Ok(s) => s.len(),
                Err(e) => e.valid_up_to(),
            };
            let piece = String::from_utf8(pending.drain(..valid).collect()).unwrap();
            events.extend(p.push(&piece));
        }
        assert!(pending.is_empty());
        events.extend(p.finish());
        let streamed: Vec<ToolCall> = crate::events::ended_calls(&events);
        assert_eq!(
            tool_check::names_and_args(&streamed),
            tool_check::names_and_args(calls),
            "{family}: streamed {text:?}"
        );
    }
}

#[test]
fn deepseek_v32_one_two_three_calls() {
    one_two_three("deepseek_v32");
}

#[test]
fn deepseek_v4_one_two_three_calls() {
    one_two_three("deepseek_v4");
}

#[test]
fn minimax_m2_one_two_three_calls() {
    one_two_three("minimax_m2");
}

/// The templates' exact bytes: DeepSeek V3.2's `encoding_dsv32.py` (tool_calls_template,
/// tool_call_template, encode_arguments_to_dsml, `\n\n` after the content), V4 the same
/// inside `<｜DSML｜tool_calls>`, MiniMax-M2's chat template; and vLLM's docstring example.
#[test]
fn templates_render_and_parse() {
    let tools = tool_check::weather_tools();
    let calls = [
        ToolCall::new("get_weather", json!({"city": "杭州", "days": 3})),
        ToolCall::new("get_time", json!({"tz": "Asia/Shanghai"})),
    ];
    let v32 = "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">杭州</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"tz\" string=\"true\">Asia/Shanghai</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    let v4 = v32.replace("function_calls>", "tool_calls>");
    let minimax = "\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">杭州</parameter>\n<parameter name=\"days\">3</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter name=\"tz\">Asia/Shanghai</parameter>\n</invoke>\n</minimax:tool_call>";
    for (family, text) in [
        ("deepseek_v32", v32.to_string()),
        ("deepseek_v4", v4),
        ("minimax_m2", minimax.to_string()),
    ] {
        let f = format_by_name(family).expect("registered");
        assert_eq!(f.render_calls(&calls), text, "{family}");
        let with_content = format!("I'll check.{text}");
        let p = f.parse(&with_content, &tools);
        assert_eq!(p.content.as_deref(), Some("I'll check."), "{family}");
        assert_eq!(
            tool_check::names_and_args(&p.tool_calls),
            tool_check::names_and_args(&calls),
            "{family}"
        );
        // Thinking mode: the prompt ends inside the reasoning block.
        let think = format_by_name_with(
            family,
            &FormatOptions {
                reasoning: true,
                ..FormatOptions::default()
            },
        )
        .unwrap();
        let p = think.parse(
            &format!("Both need tools.\n</think>\n\nI'll check.{text}"),
            &tools,
        );
        assert_eq!(p.reasoning.as_deref(), Some("Both need tools."), "{family}");
        assert_eq!(p.content.as_deref(), Some("I'll check."), "{family}");
        assert_eq!(p.tool_calls.len(), 2, "{family}");
    }
    // vLLM's deepseekv32_tool_parser docstring example (no tool list: any name).
    let example = "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">杭州</｜DSML｜parameter>\n<｜DSML｜parameter name=\"date\" string=\"true\">2024-01-16</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">北京</｜DSML｜parameter>\n<｜DSML｜parameter name=\"date\" string=\"true\">2024-01-16</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    let p = format_by_name("deepseek_v32").unwrap().parse(example, &[]);
    assert_eq!(
        tool_check::names_and_args(&p.tool_calls),
        vec![
            (
                "get_weather".into(),
                json!({"location": "杭州", "date": "2024-01-16"})
            ),
            (
                "get_weather".into(),
                json!({"location": "北京", "date": "2024-01-16"})
            ),
        ]
    );
}
