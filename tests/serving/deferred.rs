//! Deferred tool rules (`GrammarCompiler::with_deferred_tool_rules`, issue 24): a tool
//! tag compiles only what the root reaches before any tool's arguments; the full grammar
//! is built when a matcher first comes near them. The masks must be eager's at every step.

use super::common;
use super::maskbench;
use std::sync::Arc;
use tokensieve::{BackgroundStatus, CompiledGrammar, GrammarCompiler, GrammarMatcher, Precompute};
use tokensieve_tools::{Hermes, KimiK2, Tool, ToolCall, ToolCallFormat, ToolChoice};

/// `n` distinct tools from BFCL's `multiple` file, in file order.
fn bfcl_tools(n: usize) -> Option<Vec<Tool>> {
    let path = common::testdata_path("toolcalls/bfcl/BFCL_v4_multiple.json")?;
    let text = std::fs::read_to_string(path).expect("BFCL file");
    let mut tools: Vec<Tool> = Vec::new();
    let functions = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .flat_map(|v| v["function"].as_array().cloned().unwrap_or_default());
    for f in functions {
        match Tool::from_bfcl_function(&f) {
            Ok(t) if tools.iter().all(|u| u.name != t.name) => tools.push(t),
            _ => {}
        }
        if tools.len() == n {
            break;
        }
    }
    assert_eq!(tools.len(), n, "BFCL has {n} distinct tools");
    Some(tools)
}

/// The tool's required parameters with a value of their type.
fn arguments(tool: &Tool) -> serde_json::Value {
    let p = &tool.input_schema;
    let mut out = serde_json::Map::new();
    for name in p["required"].as_array().into_iter().flatten() {
        let name = name.as_str().expect("names are strings");
        let prop = &p["properties"][name];
        let v = match (prop["enum"].get(0), prop["type"].as_str()) {
            (Some(e), _) => e.clone(),
            (None, Some("integer")) => 7.into(),
            (None, Some("number")) => 0.5.into(),
            (None, Some("boolean")) => false.into(),
            (None, Some("array")) => serde_json::json!([]),
            (None, Some("object")) => serde_json::json!({}),
            _ => "Paris, \"FR\"".into(),
        };
        out.insert(name.to_string(), v);
    }
    serde_json::Value::Object(out)
}

/// Runs `ids` (then the stop token) through matchers of `eager` and `deferred` side by
/// side: the same mask at every step, the same answer to every token. At step 2 both
/// accept, roll back and accept again (a rollback while on the stub grammar). Returns
/// the step at which the deferred matcher moved to the full grammar.
fn same_as_eager(
    eager: &Arc<CompiledGrammar>,
    deferred: &Arc<CompiledGrammar>,
    ids: &[u32],
    stop: u32,
    what: &str,
) -> Option<usize> {
    let (mut me, mut md) = (
        GrammarMatcher::new(eager.clone()),
        GrammarMatcher::new(deferred.clone()),
    );
    let words = me.bitmask_words();
    let (mut ke, mut kd) = (vec![0u32; words], vec![0u32; words]);
    let mut moved = None;
    for (step, &t) in ids.iter().chain([&stop]).enumerate() {
        me.fill_next_token_bitmask(&mut ke).unwrap();
        md.fill_next_token_bitmask(&mut kd).unwrap();
        let differ = (0..words * 32).find(|&i| (ke[i / 32] ^ kd[i / 32]) >> (i % 32) & 1 == 1);
        assert_eq!(
            differ, None,
            "{what}: masks differ at step {step} (token id)"
        );
        if moved.is_none() && !Arc::ptr_eq(md.compiled_grammar(), deferred) {
            moved = Some(step);
        }
        assert!(me.accept_token(t), "{what}: eager rejects step {step}");
        assert!(md.accept_token(t), "{what}: deferred rejects step {step}");
        if step == 2 {
            me.rollback(1).unwrap();
            md.rollback(1).unwrap();
            assert!(me.accept_token(t) && md.accept_token(t));
        }
    }
    assert!(me.is_terminated() && md.is_terminated(), "{what}");
    moved
}

/// (a) A Hermes tag over 12 BFCL tools on Qwen3, two parallel calls: the deferred
/// grammar's masks are eager's on every step, it stays on the stub grammar through the
/// free text, and moves to the full grammar (built once) at the first call.
#[cfg(feature = "hf")]
#[test]
fn hermes_tag_over_12_bfcl_tools_masks_equal_eager() {
    let Some((rt, tools)) = qwen3_and_tools(12) else {
        return;
    };
    let (eager, _, deferred) = hermes_pair(&rt, &tools);
    let (stubs, built) = deferred
        .deferred_rules()
        .expect("the tool rules are deferred");
    assert!(stubs >= 12 && !built, "{stubs} stub rules");
    assert!(deferred.node_count() * 4 < eager.node_count());
    let calls: Vec<ToolCall> = [3, 9]
        .iter()
        .map(|&i| ToolCall {
            id: None,
            name: tools[i].name.clone(),
            arguments: arguments(&tools[i]),
        })
        .collect();
    let text = format!(
        "Let me look both up, one after the other.\n{}",
        Hermes::default().render_calls(&calls)
    );
    let ids = rt.tokenizer.encode(text.as_str(), false).unwrap();
    let moved = same_as_eager(&eager, &deferred, ids.get_ids(), rt.stop(), "hermes");
    let first_call = rt
        .tokenizer
        .encode("Let me look both up, one after the other.\n", false);
    let moved = moved.expect("the matcher moved to the full grammar");
    assert!(moved >= first_call.unwrap().len(), "moved at step {moved}");
    assert_eq!(deferred.deferred_rules(), Some((stubs, true)));
}

/// (b) Two MaskBench schemas as the tools of a tag (Qwen3): eager's masks on every step
/// of a valid instance of each, called one after the other.
#[cfg(feature = "hf")]
#[test]
fn maskbench_schemas_in_a_tag_mask_as_eager() {
    let Some(rt) = common::RealTokenizer::load("qwen3") else {
        return;
    };
    let Some(records) = maskbench::bench_sample(100) else {
        return;
    };
    let deferring = rt
        .compiler
        .clone()
        .with_precompute(Precompute::Lazy)
        .with_deferred_tool_rules(true);
    let mut checked = 0;
    for rec in records.iter().filter(|r| !r.valid.is_empty()) {
        let size = rec.schema.to_string().len();
        if checked == 2 || !(300..4000).contains(&size) {
            continue;
        }
        let tag = serde_json::json!({
            "type": "structural_tag",
            "format": {"type": "triggered_tags", "triggers": ["<tool_call>"],
                "tags": [{"type": "tag", "begin": "<tool_call>\nA ",
                    "content": {"type": "json_schema", "json_schema": rec.schema},
                    "end": "\n</tool_call>"}],
                "at_least_one": false, "stop_after_first": false}
        });
        let whole = rt.compiler.clone().with_deferred_tool_rules(false);
        let Ok(eager) = whole.compile_structural_tag(&tag) else {
            continue;
        };
        let text = format!(
            "Two calls.\n<tool_call>\nA {0}\n</tool_call><tool_call>\nA {0}\n</tool_call>",
            rec.valid[0]
        );
        if !GrammarMatcher::new(eager.clone()).accept_string(&text) {
            continue;
        }
        let deferred = deferring.compile_structural_tag(&tag).unwrap();
        assert!(deferred.deferred_rules().is_some(), "{}", rec.name);
        let ids = rt.tokenizer.encode(text.as_str(), false).unwrap();
        let moved = same_as_eager(&eager, &deferred, ids.get_ids(), rt.stop(), &rec.name);
        assert!(moved.is_some(), "{}", rec.name);
        checked += 1;
    }
    assert_eq!(checked, 2);
}

/// (c) Compiling a tag builds no automaton of a tool's arguments: the rule automata a
/// fresh compiler builds (or finds in its cache) do not grow by one per tool from 2 tools
/// to 12 (the tag's own rules may differ by one or two), where without deferral they grow
/// by more than one per tool; they grow once a matcher reaches a call.
#[cfg(feature = "hf")]
#[test]
fn a_tag_compile_builds_no_tool_automaton_before_a_call() {
    let Some(rt) = common::RealTokenizer::load("qwen3") else {
        return;
    };
    let Some(tools) = bfcl_tools(12) else {
        return;
    };
    let rules_built = |n: usize, defer: bool| {
        let compiler = GrammarCompiler::new(rt.vocab.clone())
            .with_precompute(Precompute::Lazy)
            .with_deferred_tool_rules(defer);
        let tag = Hermes::default()
            .structural_tag(&tools[..n], &ToolChoice::Auto, true)
            .unwrap();
        let g = compiler.compile_structural_tag(&tag).unwrap();
        let s = compiler.rule_automaton_cache_stats();
        (compiler, g, s.builds + s.hits)
    };
    let (_, _, two) = rules_built(2, true);
    let (compiler, g, twelve) = rules_built(12, true);
    assert!(
        twelve < two + 10,
        "{two} then {twelve} rule automata before the first call"
    );
    let (_, _, eager_twelve) = rules_built(12, false);
    assert!(
        eager_twelve >= twelve + 12,
        "{eager_twelve} rules without deferral"
    );
    // The first mask leaves it so; the matcher that reaches a call builds the rest.
    let mut m = GrammarMatcher::new(g.clone());
    let mut mask = vec![0u32; m.bitmask_words()];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    let s = compiler.rule_automaton_cache_stats();
    assert_eq!(s.builds + s.hits, twelve);
    let call = Hermes::default().render_calls(&[ToolCall {
        id: None,
        name: tools[5].name.clone(),
        arguments: arguments(&tools[5]),
    }]);
    for &t in rt.tokenizer.encode(call.as_str(), false).unwrap().get_ids() {
        m.fill_next_token_bitmask(&mut mask).unwrap();
        assert!(m.accept_token(t));
    }
    let s = compiler.rule_automaton_cache_stats();
    assert!(s.builds + s.hits > twelve);
    assert_eq!(g.deferred_rules().map(|d| d.1), Some(true));
}

/// Runs `text` through matchers of `eager` and `deferred` side by side (masks and
/// jump-forward bytes equal at every step, then the stop token); returns the deferred
/// matcher at the end and, per step, the stubs its grammar had left.
fn run_side_by_side(
    rt: &common::RealTokenizer,
    eager: &Arc<CompiledGrammar>,
    deferred: &Arc<CompiledGrammar>,
    text: &str,
    what: &str,
) -> (GrammarMatcher, Vec<usize>) {
    let (mut me, mut md) = (
        GrammarMatcher::new(eager.clone()),
        GrammarMatcher::new(deferred.clone()),
    );
    let words = me.bitmask_words();
    let (mut ke, mut kd) = (vec![0u32; words], vec![0u32; words]);
    let ids = rt.tokenizer.encode(text, false).unwrap();
    let mut left = Vec::new();
    for (step, &t) in ids.get_ids().iter().enumerate() {
        me.fill_next_token_bitmask(&mut ke).unwrap();
        md.fill_next_token_bitmask(&mut kd).unwrap();
        assert!(ke == kd, "{what}: masks differ at step {step}");
        left.push(md.compiled_grammar().deferred_rules().map_or(0, |d| d.0));
        assert_eq!(
            me.find_jump_forward_bytes(),
            md.find_jump_forward_bytes(),
            "{what}: step {step}"
        );
        assert!(
            me.accept_token(t) && md.accept_token(t),
            "{what}: step {step}"
        );
    }
    me.fill_next_token_bitmask(&mut ke).unwrap();
    md.fill_next_token_bitmask(&mut kd).unwrap();
    assert!(ke == kd, "{what}: masks differ at the end");
    assert!(
        me.accept_token(rt.stop()) && md.accept_token(rt.stop()),
        "{what}"
    );
    (md, left)
}

/// A call of `tools[i]` with [`arguments`].
fn call_of(tools: &[Tool], i: usize) -> ToolCall {
    ToolCall {
        id: None,
        name: tools[i].name.clone(),
        arguments: arguments(&tools[i]),
    }
}

/// A Hermes tag over `tools` compiled whole (eager, `rt`'s compiler) and per tool by a
/// fresh lazy compiler, which comes with it.
fn hermes_pair(
    rt: &common::RealTokenizer,
    tools: &[Tool],
) -> (Arc<CompiledGrammar>, GrammarCompiler, Arc<CompiledGrammar>) {
    let tag = Hermes::default()
        .structural_tag(tools, &ToolChoice::Auto, true)
        .unwrap();
    let whole = rt.compiler.clone().with_deferred_tool_rules(false);
    let deferring = GrammarCompiler::new(rt.vocab.clone()).with_precompute(Precompute::Lazy);
    let deferred = deferring.compile_structural_tag(&tag).unwrap();
    (
        whole.compile_structural_tag(&tag).unwrap(),
        deferring,
        deferred,
    )
}

/// Qwen3 and `n` BFCL tools, or `None` (skipped) without `../shared`.
fn qwen3_and_tools(n: usize) -> Option<(common::RealTokenizer, Vec<Tool>)> {
    Some((common::RealTokenizer::load("qwen3")?, bfcl_tools(n)?))
}

/// (d) A call builds only the tools it reaches: after a call of one tool of 12, the
/// matcher runs a grammar in which the other 11 are still stubs, and a call of a second
/// tool leaves 10; the rule automata built for them are a small part of the other
/// tools'. Masks and jump-forward strings are eager's at every step.
#[cfg(feature = "hf")]
#[test]
fn a_call_builds_only_the_tools_it_reaches() {
    let Some((rt, tools)) = qwen3_and_tools(12) else {
        return;
    };
    let (eager, deferring, deferred) = hermes_pair(&rt, &tools);
    assert_eq!(deferred.deferred_rules(), Some((12, false)));
    let before = deferring.rule_automaton_cache_stats().builds;
    let one = format!(
        "First.\n{}",
        Hermes::default().render_calls(&[call_of(&tools, 4)])
    );
    let (m, _) = run_side_by_side(&rt, &eager, &deferred, &one, "one call");
    assert_eq!(m.compiled_grammar().deferred_rules().map(|d| d.0), Some(11));
    let one_tool = deferring.rule_automaton_cache_stats().builds - before;
    let two = format!(
        "Both.\n{}",
        Hermes::default().render_calls(&[call_of(&tools, 4), call_of(&tools, 7)])
    );
    let (m, _) = run_side_by_side(&rt, &eager, &deferred, &two, "two calls");
    assert_eq!(m.compiled_grammar().deferred_rules().map(|d| d.0), Some(10));
    // All twelve tools built: what a full build costs in new rule automata.
    let all = GrammarCompiler::new(rt.vocab.clone())
        .with_precompute(Precompute::Lazy)
        .with_deferred_tool_rules(false);
    all.compile_structural_tag(
        &Hermes::default()
            .structural_tag(&tools, &ToolChoice::Auto, true)
            .unwrap(),
    )
    .unwrap();
    let every_tool = all.rule_automaton_cache_stats().builds;
    assert!(
        one_tool * 4 < every_tool,
        "one tool built {one_tool} rule automata; the whole tag builds {every_tool}"
    );
}

/// (e) The same on a family whose markers are special tokens: Kimi K2 on the DeepSeek V3
/// tokenizer, one call then two.
#[cfg(feature = "hf")]
#[test]
fn kimi_k2_calls_on_special_markers_mask_as_eager() {
    let Some(rt) = common::RealTokenizer::load("deepseek_v3") else {
        return;
    };
    let Some(tools) = bfcl_tools(12) else {
        return;
    };
    let kimi = KimiK2::default();
    let tag = kimi
        .structural_tag(&tools, &ToolChoice::Auto, true)
        .unwrap();
    let eager = rt
        .compiler
        .clone()
        .with_deferred_tool_rules(false)
        .compile_structural_tag(&tag)
        .unwrap();
    let deferring = GrammarCompiler::new(rt.vocab.clone())
        .with_precompute(Precompute::Lazy)
        .with_deferred_tool_rules(true);
    let deferred = deferring.compile_structural_tag(&tag).unwrap();
    assert!(deferred.deferred_rules().is_some());
    let text = format!(
        "Two.\n{}",
        kimi.render_calls(&[call_of(&tools, 2), call_of(&tools, 10)])
    );
    let (m, _) = run_side_by_side(&rt, &eager, &deferred, &text, "kimi");
    let left = m.compiled_grammar().deferred_rules().map(|d| d.0);
    assert!(
        matches!(left, Some(n) if n + 2 <= 12),
        "{left:?} stubs left"
    );
}

/// (f) A grammar built for one tool outlives its stub grammar: a matcher made from it
/// after the stub grammar and the first matcher are dropped still reaches another tool,
/// with the whole grammar's masks (it failed with "the stub grammar ... has been dropped"
/// while builds pointed back weakly).
#[cfg(feature = "hf")]
#[test]
fn a_build_outlives_its_stub_grammar() {
    let Some((rt, tools)) = qwen3_and_tools(12) else {
        return;
    };
    let (eager, _, deferred) = hermes_pair(&rt, &tools);
    let one = format!(
        "First.\n{}",
        Hermes::default().render_calls(&[call_of(&tools, 4)])
    );
    let (m, _) = run_side_by_side(&rt, &eager, &deferred, &one, "first");
    let build = m.compiled_grammar().clone();
    assert_eq!(build.deferred_rules().map(|d| d.0), Some(11));
    drop(m);
    drop(deferred);
    let other = format!(
        "Then.\n{}",
        Hermes::default().render_calls(&[call_of(&tools, 7)])
    );
    let (m, _) = run_side_by_side(&rt, &eager, &build, &other, "after the drop");
    assert_eq!(m.compiled_grammar().deferred_rules().map(|d| d.0), Some(10));
}

/// (g) Builds are bounded: calls of twelve different tools, each by its own matcher, build
/// eight sets of one tool each; from the ninth tool on, matchers get the grammar with every
/// tool built (one more build, shared), so memory does not grow with every combination.
#[cfg(feature = "hf")]
#[test]
fn builds_stop_at_eight_sets_then_build_every_tool() {
    let Some(rt) = common::RealTokenizer::load("qwen3") else {
        return;
    };
    let Some(tools) = bfcl_tools(12) else {
        return;
    };
    let tag = Hermes::default()
        .structural_tag(&tools, &ToolChoice::Auto, true)
        .unwrap();
    let deferred = GrammarCompiler::new(rt.vocab.clone())
        .with_precompute(Precompute::Lazy)
        .compile_structural_tag(&tag)
        .unwrap();
    let stub_memory = deferred.memory_bytes();
    let mut left = Vec::new();
    for i in 0..tools.len() {
        let text = format!(
            "Call {i}.\n{}",
            Hermes::default().render_calls(&[call_of(&tools, i)])
        );
        let mut m = GrammarMatcher::new(deferred.clone());
        assert!(m.accept_string(&text), "tool {i}");
        left.push(m.compiled_grammar().deferred_rules().map(|d| d.0));
    }
    let mut want = vec![Some(11); 8];
    want.extend([None; 4]);
    assert_eq!(left, want, "stubs left after each tool's call");
    let whole = GrammarCompiler::new(rt.vocab.clone())
        .with_precompute(Precompute::Lazy)
        .with_deferred_tool_rules(false)
        .compile_structural_tag(&tag)
        .unwrap();
    // Eight one-tool builds and the whole grammar, all lazily: a few stub grammars more.
    assert!(
        deferred.memory_bytes() < 10 * stub_memory + 2 * whole.memory_bytes(),
        "{} bytes with builds; stub grammar {stub_memory}, whole {}",
        deferred.memory_bytes(),
        whole.memory_bytes()
    );
}

/// (h) Counted whitespace inside a built tool's arguments does not build the other tools:
/// a call of `shop` (an array of enum strings, whitespace capped at 12 characters, so its
/// runs are counted repetitions with virtual nodes) keeps the two other tools stubs at
/// every step, with the whole grammar's masks. (It built every tool after the `,`
/// between two items while a virtual node within reach was taken as near every stub.)
#[cfg(feature = "hf")]
#[test]
fn counted_whitespace_in_arguments_builds_no_other_tool() {
    let Some(rt) = common::RealTokenizer::load("qwen3") else {
        return;
    };
    let tools = Tool::list_from_openai(&serde_json::json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
            "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}},
        {"type": "function", "function": {"name": "shop", "parameters": {"type": "object",
            "properties": {"location": {"type": "string"},
                "services": {"type": "array", "items": {"type": "string",
                    "enum": ["Guitar Lessons", "Violin Lessons", "Piano Lessons"]}}},
            "required": ["location"]}}}
    ]))
    .unwrap();
    let (eager, _, deferred) = hermes_pair(&rt, &tools);
    let text = Hermes::default().render_calls(&[ToolCall {
        id: None,
        name: "shop".into(),
        arguments: serde_json::json!({"location": "x", "services": ["Guitar Lessons", "Piano Lessons"]}),
    }]);
    let (_, left) = run_side_by_side(&rt, &eager, &deferred, &text, "shop");
    assert!(
        left.iter().all(|&n| n >= 2),
        "stubs left at each step: {left:?}"
    );
    assert_eq!(left.last(), Some(&2));
}

/// Under eager precompute, a tag that defers its tools compiles as lazily as its builds do
/// and fills the stub grammar's masks in the background: compile → first mask does not
/// wait for the masks of every tool name, and the fill ends with the masks an eager
/// compile would hold.
#[test]
fn a_deferring_tag_under_eager_precompute_fills_its_masks_in_the_background() {
    let Some((rt, tools)) = qwen3_and_tools(12) else {
        return;
    };
    let compiler = GrammarCompiler::new(rt.vocab.clone()).with_precompute(Precompute::Eager);
    let tag = Hermes::default()
        .structural_tag(&tools, &ToolChoice::Auto, true)
        .unwrap();
    let g = compiler.compile_structural_tag(&tag).unwrap();
    assert!(g.deferred_rules().is_some(), "the tag defers its tools");
    assert_ne!(g.background_status(), BackgroundStatus::NotScheduled);
    assert_eq!(g.wait_background(), BackgroundStatus::Finished);
    // A whole compile under eager precompute does its masks at compile, as before.
    let whole = compiler
        .clone()
        .with_deferred_tool_rules(false)
        .compile_structural_tag(&tag)
        .unwrap();
    assert_eq!(whole.background_status(), BackgroundStatus::NotScheduled);
}
