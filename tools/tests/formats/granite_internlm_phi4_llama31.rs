//! The families of issue 23 item 3 (part B): IBM Granite 3.x (`granite`), granite-20b-fc
//! (`granite-20b-fc`), InternLM2.5 (`internlm`), Phi-4-mini (`phi4_mini_json`) and Llama
//! 3.1's custom-tool and built-in-tool forms (`llama3_function_tag`), each from the
//! registry by name (specs and sources in `docs/tool-call-formats-extra.md`).
//!
//! * Under every `tool_choice` and `parallel_tool_calls` on and off, the structural tag
//!   accepts exactly what the choice allows: 1, 2 and 3 rendered calls are fed byte by
//!   byte, and at every step each token's mask bit equals whether the matcher accepts it.
//! * Rendered calls for random BFCL tools (1 to 3 calls) are accepted token by token on a
//!   real vocabulary (Llama 3.1 for the Llama forms, o200k for the others) and parse back,
//!   whole and streamed in random chunks; constrained walks give valid calls; `none` never
//!   calls.

use crate::common;
use crate::tool_check;

use common::RealTokenizer;
use serde_json::json;
use tokensieve::GrammarMatcher;
use tokensieve_tools::{format_by_name, Tool, ToolCall, ToolCallFormat, ToolChoice};

/// The registry names of the families, with the shared tokenizer their round trip runs on.
const FAMILIES: &[(&str, &str)] = &[
    ("granite", "gptoss"),
    ("granite-20b-fc", "gptoss"),
    ("internlm", "gptoss"),
    ("phi4_mini_json", "gptoss"),
    ("llama3_function_tag", "llama3_1"),
];

fn format(name: &str) -> std::sync::Arc<dyn ToolCallFormat> {
    format_by_name(name).unwrap_or_else(|| panic!("{name} is not registered"))
}

fn weather() -> ToolCall {
    ToolCall::new("get_weather", json!({"city": "Paris", "unit": "celsius"}))
}

fn time() -> ToolCall {
    ToolCall::new("get_time", json!({"tz": "Europe/Paris"}))
}

/// Feeds `text` byte by byte to a fresh matcher of `g` (compiled by
/// [`common::byte_compiler`]); before each byte, every one of the 257 tokens' mask bits
/// must equal whether the matcher accepts that token (tried, then rolled back). Returns
/// whether the text and then the stop token were accepted.
fn mask_agrees_and_accepts(g: &std::sync::Arc<tokensieve::CompiledGrammar>, text: &str) -> bool {
    let mut m = GrammarMatcher::new(g.clone());
    let mut mask = vec![0u32; m.bitmask_words()];
    let steps: Vec<u32> = text
        .bytes()
        .map(u32::from)
        .chain([common::BYTE_STOP])
        .collect();
    for (i, &next) in steps.iter().enumerate() {
        m.fill_next_token_bitmask(&mut mask).expect("mask");
        for t in 0..=common::BYTE_STOP {
            let bit = tokensieve::mask::is_token_allowed(&mask, t);
            let ok = m.accept_token(t);
            if ok && !m.is_terminated() {
                m.rollback(1).expect("rollback");
            } else if ok {
                // The stop token ends the matcher: start again at this prefix.
                m = GrammarMatcher::new(g.clone());
                assert!(m.accept_string(&text[..i]));
            }
            assert_eq!(bit, ok, "token {t} after {:?}", &text[..i]);
        }
        if !m.accept_token(next) {
            return false;
        }
    }
    m.is_terminated()
}

/// Every family under every tool_choice, parallel on and off: 1, 2 and 3 calls (and plain
/// text) are accepted exactly when the choice allows them, the mask agreeing with the
/// matcher at every byte; what is accepted parses back to the same calls.
#[test]
fn every_choice_and_parallel_setting() {
    let tools = tool_check::weather_tools();
    let compiler = common::byte_compiler();
    let one = vec![weather()];
    let two = vec![weather(), time()];
    let three = vec![weather(), time(), weather()];
    let allowed_time = |mode: ToolChoice| ToolChoice::AllowedTools {
        mode: Box::new(mode),
        tools: vec!["get_time".into()],
    };
    for (name, _) in FAMILIES {
        let f = format(name);
        for parallel in [false, true] {
            // (choice, plain text allowed, a call to get_weather allowed, several allowed)
            let cases = [
                (ToolChoice::None, true, false, false),
                (ToolChoice::Auto, true, true, parallel),
                (ToolChoice::Required, false, true, parallel),
                (
                    ToolChoice::Function("get_weather".into()),
                    false,
                    true,
                    false,
                ),
                (allowed_time(ToolChoice::Auto), true, false, false),
                (allowed_time(ToolChoice::Required), false, false, false),
            ];
            for (choice, text_ok, call_ok, many_ok) in cases {
                let tag = f.structural_tag(&tools, &choice, parallel).unwrap();
                let g = compiler.compile_structural_tag(&tag).unwrap();
                let at = format!("{name} {choice:?} parallel={parallel}");
                let plain = "It is sunny in Paris.";
                assert_eq!(mask_agrees_and_accepts(&g, plain), text_ok, "{at}: text");
                for (calls, want) in [(&one, call_ok), (&two, many_ok), (&three, many_ok)] {
                    let text = f.render_calls(calls);
                    assert_eq!(mask_agrees_and_accepts(&g, &text), want, "{at}: {text}");
                    if want {
                        let out = f.parse(&text, &tools);
                        assert_eq!(&out.tool_calls, calls, "{at}: {text}");
                        assert!(out.errors.is_empty() && out.content.is_none(), "{at}");
                    }
                }
            }
            // The allowed tool itself, under allowed_tools.
            let tag = f
                .structural_tag(&tools, &allowed_time(ToolChoice::Required), parallel)
                .unwrap();
            let g = compiler.compile_structural_tag(&tag).unwrap();
            let text = f.render_calls(&[time()]);
            assert!(mask_agrees_and_accepts(&g, &text), "{name}: {text}");
        }
    }
}

/// Each family's rendered calls, results and tools prompt carry its markers (exact forms
/// per the spec in docs/tool-call-formats-extra.md).
#[test]
fn renderers_write_each_family_form() {
    let tools = tool_check::weather_tools();
    let calls = vec![weather(), time()];
    let want_calls = [
        (
            "granite",
            r#"<tool_call>[{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}, {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}]"#,
        ),
        (
            "granite-20b-fc",
            "<function_call> {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n<function_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}}",
        ),
        (
            "internlm",
            "<|action_start|><|plugin|>\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}<|action_end|><|action_start|><|plugin|>\n{\"name\": \"get_time\", \"parameters\": {\"tz\": \"Europe/Paris\"}}<|action_end|>",
        ),
        (
            "phi4_mini_json",
            r#"functools[{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}, {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}]"#,
        ),
        (
            "llama3_function_tag",
            r#"<function=get_weather>{"city": "Paris", "unit": "celsius"}</function><function=get_time>{"tz": "Europe/Paris"}</function>"#,
        ),
    ];
    for (name, want) in want_calls {
        let f = format(name);
        assert_eq!(f.render_calls(&calls), want, "{name}");
        assert_eq!(f.parse(want, &tools).tool_calls, calls, "{name}");
    }
    let result = json!({"temperature": 21});
    let want_results = [
        (
            "granite",
            "<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": 21}<|end_of_text|>",
        ),
        (
            "granite-20b-fc",
            "<function_response> {\"temperature\": 21}",
        ),
        (
            "internlm",
            "<|im_start|>environment name=<|plugin|>\n{\"temperature\": 21}<|im_end|>",
        ),
        ("phi4_mini_json", "{\"result\": {\"temperature\": 21}}"),
        ("llama3_function_tag", "{\"temperature\": 21}"),
    ];
    for (name, want) in want_results {
        assert_eq!(
            format(name).render_tool_result(&weather(), &result),
            want,
            "{name}"
        );
    }
    let prompt_marks: [(&str, &[&str]); 5] = [
        (
            "granite",
            &[
                "<|start_of_role|>available_tools<|end_of_role|>",
                "<|end_of_text|>",
            ],
        ),
        (
            "granite-20b-fc",
            &["<|function_call_library|>", "<function_call> "],
        ),
        (
            "internlm",
            &["<|im_start|>system name=<|plugin|>\n[", "]<|im_end|>"],
        ),
        ("phi4_mini_json", &["functools[", "get_time"]),
        (
            "llama3_function_tag",
            &["<function=", "</function>", "Use the function 'get_time'"],
        ),
    ];
    for (name, marks) in prompt_marks {
        let p = format(name).render_tools_prompt(&tools);
        for m in marks {
            assert!(p.contains(m), "{name}: {m:?} not in {p}");
        }
        assert!(p.contains("get_weather"), "{name}: {p}");
    }
}

/// Each family on its real vocabulary: round trips of 1 to 3 random BFCL calls rendered,
/// accepted token by token (mask checked before every token) by the required, auto and named
/// tags, parsed back whole and streamed; constrained random walks give only valid calls to
/// offered tools; under `none` no call appears.
#[test]
fn round_trips_and_walks_on_real_vocabularies() {
    for (i, (name, tok)) in FAMILIES.iter().enumerate() {
        let Some(tok) = RealTokenizer::load(tok) else {
            continue;
        };
        let f = format(name);
        let (rt, walk) = (700 + 2 * i as u64, 800 + 2 * i as u64);
        tool_check::round_trips(f.as_ref(), &tok, 15, [rt, rt + 1]);
        tool_check::walks_and_none(f.as_ref(), &tok, (40, 15), [walk, walk + 1], &[]);
    }
}

/// The shapes each family's parser reads beyond what it writes (the other Granite marker,
/// `"parameters"` for `"arguments"`, Llama's built-in `<|python_tag|>NAME.call(…)`), and
/// text kept as content.
#[test]
fn parsers_read_the_documented_variants() {
    let tools = tool_check::weather_tools();
    let mut builtin = tools.clone();
    builtin.push(
        Tool::from_openai(
            &json!({"type": "function", "function": {"name": "brave_search",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
            "required": ["query"]}}}),
        )
        .unwrap(),
    );
    // (format, output, tools, content, calls)
    type Case<'a> = (&'a str, &'a str, &'a [Tool], Option<&'a str>, Vec<ToolCall>);
    let cases: [Case<'_>; 6] = [
        (
            "granite",
            "<|tool_call|>[{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}}]",
            &tools,
            None,
            vec![time()],
        ),
        (
            "phi4_mini_json",
            "Let me check. functools[{\"name\": \"get_time\", \"parameters\": {\"tz\": \"Europe/Paris\"}}]",
            &tools,
            Some("Let me check."),
            vec![time()],
        ),
        (
            "internlm",
            "Checking.<|action_start|><|plugin|>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}}<|action_end|>",
            &tools,
            Some("Checking."),
            vec![time()],
        ),
        (
            "granite-20b-fc",
            "<function_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}} <function_call> {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}",
            &tools,
            None,
            vec![time(), weather()],
        ),
        (
            "llama3_function_tag",
            "<|python_tag|>brave_search.call(query=\"weather in Paris\")<|eom_id|>",
            &builtin,
            None,
            vec![ToolCall::new("brave_search", json!({"query": "weather in Paris"}))],
        ),
        (
            "llama3_function_tag",
            "<function=get_time>{\"tz\": \"Europe/Paris\"}</function><|eom_id|>",
            &tools,
            None,
            vec![time()],
        ),
    ];
    for (name, text, ts, content, calls) in cases {
        let out = format(name).parse(text, ts);
        assert_eq!(out.tool_calls, calls, "{name}: {text}");
        assert!(out.errors.is_empty(), "{name}: {:?}", out.errors);
        assert_eq!(out.content.as_deref(), content, "{name}: {text}");
    }
    // Malformed calls keep their text and are errors, in every family.
    let bad: [(&str, &str); 5] = [
        (
            "granite",
            "<tool_call>[{\"name\": \"nope\", \"arguments\": {}}]",
        ),
        (
            "granite-20b-fc",
            "<function_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": }}",
        ),
        (
            "internlm",
            "<|action_start|><|plugin|>\n{\"name\": \"nope\", \"parameters\": {}}<|action_end|>",
        ),
        (
            "phi4_mini_json",
            "functools[{\"name\": \"get_time\", \"arguments\": {\"tz\": 1,}}]",
        ),
        ("llama3_function_tag", "<function=nope>{}</function>"),
    ];
    for (name, text) in bad {
        let out = format(name).parse(text, &tools);
        assert!(out.tool_calls.is_empty(), "{name}: {text}");
        assert_eq!(out.errors.len(), 1, "{name}: {text}: {:?}", out.errors);
        let content = out.content.unwrap_or_default();
        assert!(
            content.contains("nope") || content.contains("\"tz\""),
            "{name}: {content}"
        );
    }
}
