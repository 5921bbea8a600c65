//! Tests of deferred compiles (`compiler::deferred`): builds of a tag's tools, what they
//! share, and their masks against the whole grammar's.

use super::Seeded;
use crate::{GrammarCompiler, Precompute, Vocabulary};
use std::sync::Arc;

/// Bytes, every pair of printable ASCII characters (past the token count at which
/// masks are shared, so mask classes are refined) and a stop token.
fn wide_vocabulary() -> Arc<Vocabulary> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for a in b' '..=b'~' {
        for b in b' '..=b'~' {
            tokens.push(vec![a, b]);
        }
    }
    let stop = tokens.len() as u32;
    tokens.push(b"</s>".to_vec());
    Arc::new(Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap())
}

/// `tag` compiled lazily over `vocab` whole (its tools not deferred), then deferring its
/// tools.
fn whole_and_deferred(
    tag: &crate::StructuralTag,
    vocab: &Arc<Vocabulary>,
) -> (Arc<crate::CompiledGrammar>, Arc<crate::CompiledGrammar>) {
    let lazy = GrammarCompiler::new(vocab.clone()).with_precompute(Precompute::Lazy);
    let whole = lazy
        .clone()
        .with_deferred_tool_rules(false)
        .compile_structural_tag(tag)
        .unwrap();
    let deferred = lazy
        .with_deferred_tool_rules(true)
        .compile_structural_tag(tag)
        .unwrap();
    (whole, deferred)
}

/// A tag over `tools` tools of three properties each (no others), whitespace capped at 12 characters
/// with one line feed (what the tool families set), compiled deferring its tools.
fn capped_whitespace_tag(tools: usize) -> crate::StructuralTag {
    capped_whitespace_tag_with(tools, serde_json::json!({}))
}

/// [`capped_whitespace_tag`] with the optional properties `more` in every tool.
fn capped_whitespace_tag_with(tools: usize, more: serde_json::Value) -> crate::StructuralTag {
    let schemas = (0..tools).map(|i| {
        let mut properties = serde_json::json!({
            format!("p{i}"): {"type": "string"},
            "n": {"type": "integer"},
            "flag": {"type": "boolean"}
        });
        for (k, v) in more.as_object().into_iter().flatten() {
            properties[k] = v.clone();
        }
        serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": [format!("p{i}"), "n"],
            "additionalProperties": false
        })
    });
    capped_tag(schemas, &[])
}

/// A tag over tools `tool_{i}` of the arguments schemas `schemas`, whitespace capped
/// as [`capped_whitespace_tag`]'s, strings free of `excludes` (as Hermes's are of
/// `</tool_call>`).
fn capped_tag(
    schemas: impl Iterator<Item = serde_json::Value>,
    excludes: &[&str],
) -> crate::StructuralTag {
    let tags: Vec<serde_json::Value> = schemas
        .enumerate()
        .map(|(i, schema)| {
            serde_json::json!({
                "type": "tag",
                "begin": format!("<tool_call>\n{{\"name\": \"tool_{i}\", \"arguments\": "),
                "content": {
                    "type": "json_schema",
                    "json_schema": schema,
                    "max_whitespace": 12,
                    "max_whitespace_newlines": 1,
                    "string_excludes": excludes
                },
                "end": "}\n</tool_call>",
            })
        })
        .collect();
    crate::StructuralTag::from_json(&serde_json::json!({
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<tool_call>"],
            "tags": tags,
            "at_least_one": false,
            "stop_after_first": false,
        }
    }))
    .unwrap()
}

/// A Hermes-like tag over four tools `tool_{i}`, each an object of a required string
/// `p{i}` and the properties `more`.
fn four_tool_tag(more: serde_json::Value) -> crate::StructuralTag {
    let tools: Vec<(String, serde_json::Value)> = (0..4)
        .map(|i| {
            let mut properties = more.clone();
            properties[format!("p{i}")] = serde_json::json!({"type": "string"});
            let schema = serde_json::json!({
                "type": "object",
                "properties": properties,
                "required": [format!("p{i}")]
            });
            (format!("tool_{i}"), schema)
        })
        .collect();
    crate::structural_tag::hermes_like_tag(&tools, false)
}

/// A tool build keeps capped whitespace as one rule that the tool's automata call,
/// instead of writing it out at each of the arguments' places of whitespace (about 26
/// states each): the tool's automata in the build have under a third of the nodes they
/// have in the same tag compiled whole (whitespace inlined), and the build's rules hold
/// the whitespace rule.
#[test]
fn a_tool_build_calls_its_whitespace_rule_instead_of_inlining_it() {
    let tag = capped_whitespace_tag(1);
    let (whole, g) = whole_and_deferred(&tag, &wide_vocabulary());
    assert!(whole.deferred.is_none());
    let d = g.deferred.as_deref().expect("the tag defers its tool");
    let built = d.expand(None).unwrap();
    assert!(built.deferred.is_none());
    let ws_rules = built
        .aut
        .rule_names
        .iter()
        .filter(|n| n.contains("_ws"))
        .count();
    assert_eq!(ws_rules, 1, "rules: {:?}", built.aut.rule_names);
    // The nodes of the tool's rules (the tag's own rules are the same in both).
    let tool_nodes = |aut: &crate::automaton::Automaton| {
        aut.nodes
            .iter()
            .filter(|n| aut.rule_names[n.rule as usize].starts_with("json_"))
            .count()
    };
    let (small, large) = (tool_nodes(&built.aut), tool_nodes(&whole.aut));
    assert!(
        3 * small < large,
        "{small} nodes built, {large} with the whitespace inlined"
    );
}

/// Builds leave the stub grammar as it was: its lowered IR (which the builds of a stub
/// grammar with dead ends splice their tools into in place, and take them out of
/// again) and the copy of its automaton that builds splice into, after a build of one
/// tool, of three (from a grammar with one built), and after a build that fails on a
/// limit. These builds are spliced into the automaton (their stubs' nodes are left
/// in rules of their own).
#[test]
fn a_build_leaves_the_stub_grammar_as_it_was() {
    let tag = four_tool_tag(serde_json::json!({"n": {"type": "integer"}}));
    let compile = |limits: crate::Limits| {
        GrammarCompiler::new(wide_vocabulary())
            .with_precompute(Precompute::Lazy)
            .with_limits(limits)
            .with_deferred_tool_rules(true)
            .compile_structural_tag(&tag)
            .unwrap()
    };
    let base = |g: &crate::CompiledGrammar| {
        let d = g.deferred.as_deref().expect("the tag defers its tools");
        let base = d.shared.base.get().expect("kept by the compile");
        let aut = &d.shared.spliceable.get().expect("kept by the compile").aut;
        format!("{:?} {aut:?}", base.lock().unwrap())
    };
    let g = compile(crate::Limits::default());
    let before = base(&g);
    let d = g.deferred.as_deref().unwrap();
    let mut stubs: Vec<u32> = d.stub_roots.keys().copied().collect();
    stubs.sort_unstable();
    let one = d.expand(Some(&stubs[1..2])).unwrap();
    assert!(one.aut.nodes.len() > g.aut.nodes.len());
    assert!(one.aut.rule_names.iter().any(|n| n.ends_with("#stub")));
    assert_eq!(base(&g), before, "after a build of one tool");
    let more = one.deferred.as_deref().unwrap();
    let mut left: Vec<u32> = more.stub_roots.keys().copied().collect();
    left.sort_unstable();
    let three = more.expand(Some(&left[..2])).unwrap();
    assert_eq!(three.deferred.as_deref().unwrap().stubs(), 1);
    assert_eq!(base(&g), before, "after a build of three tools");
    // A limit that the stub grammar meets and every build exceeds.
    let limits = crate::Limits {
        max_automaton_nodes: g.aut.nodes.len(),
        ..crate::Limits::default()
    };
    let tight = compile(limits);
    let before = base(&tight);
    let d = tight.deferred.as_deref().unwrap();
    let mut stubs: Vec<u32> = d.stub_roots.keys().copied().collect();
    stubs.sort_unstable();
    let err = d.expand(Some(&stubs[..1])).unwrap_err();
    assert!(err.contains("automaton"), "{err}");
    assert_eq!(base(&tight), before, "after a build that failed");
}

/// A deferring compile builds into the compiler's cache the automata of what its tools
/// share (the tag's JSON string and generic value rules, the capped whitespace and the
/// integer rule of each tool), so that the first build of a tool builds only the rules
/// of its own schema; the warm-up leaves the tag's language as it was.
#[test]
fn the_compile_builds_what_the_tools_share_so_a_build_builds_only_its_own_rules() {
    let more = serde_json::json!({"s": {"type": "string"}, "meta": {}});
    let g = build_counting(capped_whitespace_tag_with(4, more), 2, (8, 2));
    // Found: the tag's string rule, both whitespace rules (the tool's and the generic
    // value's), the generic value (which the untyped `meta` calls) and its object and
    // array, the integer, and one of the arguments' rules (its body is that of one
    // built just before it). Built: the tool's root and its arguments' object rule.
    let mut m = crate::GrammarMatcher::new(g);
    assert!(m.accept_string("<tool_call>\n{\"name\": \"tool_2\", \"arguments\": {\"p2\": \"x\", \"n\": 1, \"s\": \"y\", \"meta\": [{\"k\": null}]}}\n</tool_call>"));
}

/// A tag without string excludes writes its JSON string out in one rule, which a tool
/// with two strings calls from both: the compile builds it as a rule too (it calls it
/// twice; called once, it was inlined there and built by each such tool).
#[test]
fn the_compile_builds_the_string_rule_that_tools_call_twice() {
    let more = serde_json::json!({"s": {"type": "string"}});
    // Found: the string, the whitespace and the integer. Built: the tool's root and
    // object rule.
    build_counting(capped_whitespace_tag_with(4, more), 2, (3, 1));
}

/// Compiles `tag` deferring its tools, builds tool `tool` alone, and asserts that the
/// build found `want.0` rule automata in the compiler's cache and built `want.1`.
/// Returns the compiled tag.
fn build_counting(
    tag: crate::StructuralTag,
    tool: usize,
    want: (u64, u64),
) -> std::sync::Arc<crate::CompiledGrammar> {
    let compiler = GrammarCompiler::new(wide_vocabulary())
        .with_precompute(Precompute::Lazy)
        .with_deferred_tool_rules(true);
    let g = compiler.compile_structural_tag(&tag).unwrap();
    let d = g.deferred.as_deref().expect("the tag defers its tools");
    let mut stubs: Vec<u32> = d.stub_roots.keys().copied().collect();
    stubs.sort_unstable();
    let before = compiler.rule_automaton_cache_stats();
    let built = d.expand(Some(&stubs[tool..tool + 1])).unwrap();
    let after = compiler.rule_automaton_cache_stats();
    let (hits, fresh) = (after.hits - before.hits, after.builds - before.builds);
    let names = &built.aut.rule_names;
    assert_eq!((hits, fresh), want, "{before:?} then {after:?}; {names:?}");
    g
}

/// As above, for tools whose members are untyped but one string (BFCL's
/// `FireBirdUtils.getViewSourceWithHeader`), with strings that avoid the end marker
/// (so the tag's string is a small rule that calls its body): the compile lowers the
/// generic value as a build does, inlining the string's small rule into it (the
/// compile kept that rule, so a build built the generic value again: 6% of the first
/// build of BFCL's tool, 7.6M instructions), and the untyped members call the generic
/// value (they wrote every JSON type out, most of the tool's states).
#[test]
fn a_build_finds_the_generic_value_of_tools_with_untyped_members() {
    let schemas = (0..4).map(|i| {
        serde_json::json!({
            "type": "object",
            "properties": {format!("m{i}"): {}, "view": {}, "source": {"type": "string"}},
            "required": [format!("m{i}"), "view", "source"],
            "additionalProperties": false
        })
    });
    // Built: the tool's root (its arguments object). Found: the string's body, the
    // generic value and its object and array, and the two whitespace rules.
    let g = build_counting(capped_tag(schemas, &["</tool_call>"]), 1, (6, 1));
    let mut m = crate::GrammarMatcher::new(g);
    assert!(m.accept_string("<tool_call>\n{\"name\": \"tool_1\", \"arguments\": {\"m1\": {\"a\": [1, \"b\"]}, \"view\": \"v\", \"source\": \"s\"}}\n</tool_call>"));
}

/// A build whose tool calls the number and integer rules (a number ends where the next
/// byte says, so a token such as `2}` or `5,` crosses the rule's end) masks as the
/// whole grammar at every byte of calls into two of the tools, and along seeded random
/// walks into each.
#[test]
fn a_build_with_number_calls_masks_as_the_whole_grammar() {
    let more = serde_json::json!({
        "x": {"type": "number"},
        "k": {"type": "array", "items": {"type": "integer"}}
    });
    let tag = capped_whitespace_tag_with(3, more);
    let vocab = wide_vocabulary();
    let (whole, deferred) = whole_and_deferred(&tag, &vocab);
    let d = deferred
        .deferred
        .as_deref()
        .expect("the tag defers its tools");
    let built = d.expand(None).unwrap();
    for rule in ["json_number", "json_integer"] {
        let names = &built.aut.rule_names;
        assert!(
            names.iter().any(|n| n.contains(rule)),
            "the build calls {rule}: {names:?}"
        );
    }
    let masks = |m: &mut crate::GrammarMatcher| {
        let mut k = vec![0u32; vocab.bitmask_words()];
        m.fill_next_token_bitmask(&mut k).unwrap();
        k
    };
    let calls = [
        "<tool_call>\n{\"name\": \"tool_0\", \"arguments\": {\"p0\": \"a\", \"n\": -120, \"flag\": true, \"x\": 0.25e-3, \"k\": [1, 22,333]}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"tool_2\", \"arguments\": {\"p2\": \"b\",\n \"n\": 7.00,\"x\": -0,\"k\": [0 ]}}\n</tool_call>",
    ];
    for call in calls {
        let mut a = crate::GrammarMatcher::new(whole.clone());
        let mut b = crate::GrammarMatcher::new(deferred.clone());
        for (i, byte) in call.bytes().enumerate() {
            assert_eq!(masks(&mut a), masks(&mut b), "{call:?} at byte {i}");
            let t = byte as u32;
            assert!(
                a.accept_token(t) && b.accept_token(t),
                "{call:?} at byte {i}"
            );
        }
        assert_eq!(masks(&mut a), masks(&mut b), "{call:?} at its end");
    }
    let mut rand = crate::automaton::minimize::tests::xorshift(0x9e37_79b9_7f4a_7c15);
    for tool in 0..3 {
        for _ in 0..6 {
            let mut a = crate::GrammarMatcher::new(whole.clone());
            let mut b = crate::GrammarMatcher::new(deferred.clone());
            let prefix = format!(
                "<tool_call>\n{{\"name\": \"tool_{tool}\", \"arguments\": {{\"p{tool}\": \"v\", \"n\": "
            );
            assert!(a.accept_string(&prefix) && b.accept_string(&prefix));
            let what = format!("tool {tool}");
            crate::compiler::compact_tests::assert_random_walk_agrees(
                &mut a, &mut b, &vocab, &mut rand, 60, &what,
            );
        }
    }
}

/// A build's mask classes are refined from the stub grammar's, starting at the tool
/// built: they are stable (nodes of a class have equal masks), about as coarse as a
/// refinement of the whole built grammar, and the stub grammar's classes of the rules
/// left as they were are kept.
#[test]
fn a_build_refines_its_mask_classes_from_the_stub_grammars() {
    let tag = four_tool_tag(serde_json::json!({"n": {"type": "integer"}, "any": {}}));
    let compiler = GrammarCompiler::new(wide_vocabulary())
        .with_precompute(Precompute::Lazy)
        .with_deferred_tool_rules(true);
    let g = compiler.compile_structural_tag(&tag).unwrap();
    let d = g.deferred.as_deref().expect("the tag defers its tools");
    assert!(
        d.shared.seed.get().is_some(),
        "the stub grammar keeps its classes"
    );
    assert!(g.aut.is_stable_partition(&g.mask_class));
    let mut stubs: Vec<u32> = d.stub_roots.keys().copied().collect();
    stubs.sort_unstable();
    assert_eq!(stubs.len(), 4);
    let built = d.expand(Some(&stubs[1..2])).unwrap();
    assert!(built.deferred.is_some(), "three tools are still stubs");
    assert!(built.aut.is_stable_partition(&built.mask_class));
    let deadline = crate::limits::Deadline::never();
    let (_, coarsest) = built.aut.mask_classes(&deadline).unwrap();
    let classes = built.masks.len();
    assert!(
        classes >= coarsest && classes <= coarsest + coarsest / 20,
        "{classes} classes, the coarsest has {coarsest}"
    );
    // The build took the seeded refinement (not its fallback): the tool's slot and
    // the rules after the stub grammar's are the rebuilt ones.
    let slot = &g.aut.rule_names[stubs[1] as usize];
    let old_rules = g.aut.rule_names.len();
    let rebuilt: Vec<bool> = (0..built.aut.rule_names.len())
        .map(|r| r >= old_rules || &built.aut.rule_names[r] == slot)
        .collect();
    let seed = d.shared.seed.get().unwrap();
    assert!(d.shared.spliceable.get().is_some(), "the build was spliced");
    let seeded = Seeded {
        seed,
        rebuilt: &rebuilt[..old_rules],
        spliced: true,
    };
    let (class, count) = built
        .aut
        .mask_classes_seeded(seeded, &deadline)
        .unwrap()
        .expect("a splice always refines");
    assert_eq!(count, classes);
    assert_eq!(class, built.mask_class);
    // Every tool built, from the stub grammar too.
    let all = d.expand(None).unwrap();
    assert!(all.deferred.is_none());
    assert!(all.aut.is_stable_partition(&all.mask_class));
}

/// `tag` compiled deferring its tools on `vocab` (lazily), the stub grammar keeping its
/// automaton for builds to splice into; with its stub rules, ascending.
fn stub_grammar(
    tag: &crate::StructuralTag,
    vocab: Arc<Vocabulary>,
) -> (Arc<crate::CompiledGrammar>, Vec<u32>) {
    let g = GrammarCompiler::new(vocab)
        .with_precompute(Precompute::Lazy)
        .with_deferred_tool_rules(true)
        .compile_structural_tag(tag)
        .unwrap();
    let d = g.deferred.as_deref().expect("the tag defers its tools");
    assert!(
        d.shared.spliceable.get().is_some(),
        "the compile keeps its automaton"
    );
    let mut stubs: Vec<u32> = d.stub_roots.keys().copied().collect();
    stubs.sort_unstable();
    (g, stubs)
}

/// A build keeps the stub grammar's nullability and follow bytes and solves only its
/// tools' (`Automaton::solve_appended`; in tests, each such splice is checked against
/// the whole computation: same nullability, follow sets that hold the exact ones).
/// Builds of one tool, of a second from there, and of every tool take that path.
#[test]
fn a_build_solves_follow_bytes_over_its_tools_alone() {
    use crate::automaton::splice::APPENDED;
    let optional = serde_json::json!({"type": "array", "items": {"type": "integer"}});
    let tag = four_tool_tag(serde_json::json!({ "list": optional, "n": {"type": "number"} }));
    let (g, stubs) = stub_grammar(&tag, wide_vocabulary());
    let d = g.deferred.as_deref().unwrap();
    let before = APPENDED.with(|c| c.get());
    let one = d.expand(Some(&stubs[1..2])).unwrap();
    let two = one
        .deferred
        .as_deref()
        .unwrap()
        .expand(Some(&stubs[2..3]))
        .unwrap();
    let all = d.expand(None).unwrap();
    assert_eq!(APPENDED.with(|c| c.get()) - before, 3);
    assert_eq!(two.deferred.as_deref().map(|d| d.stubs()), Some(2));
    // Mask classes refined from the stub grammar's over the tools alone are stable.
    for built in [&one, &two, &all] {
        assert!(built.aut.is_stable_partition(&built.mask_class));
    }
    assert!(all.deferred.is_none());
    let mut m = crate::GrammarMatcher::new(all.clone());
    assert!(m.accept_string(
        "<tool_call>\n{\"name\": \"tool_2\", \"arguments\": {\"list\": [1, 2], \"n\": 1.5, \"p2\": \"x\"}}\n</tool_call>"
    ));
}

/// The same with tools that call their own root (a tree of `$ref: "#"`) and a counted
/// repetition (an array of 2 to 40 items): each build's follow bytes, pruning and
/// classes are checked against the whole computations (in tests, inside the build).
#[test]
fn recursive_and_counted_tools_build_over_their_own_nodes() {
    use crate::automaton::splice::APPENDED;
    let tag = four_tool_tag(serde_json::json!({
        "children": {"type": "array", "items": {"$ref": "#"}},
        "ids": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 40}
    }));
    let (g, stubs) = stub_grammar(&tag, wide_vocabulary());
    let d = g.deferred.as_deref().unwrap();
    assert!(
        g.aut.counted.is_empty(),
        "the stub grammar has no counted rule"
    );
    let before = APPENDED.with(|c| c.get());
    let one = d.expand(Some(&stubs[3..4])).unwrap();
    assert_eq!(APPENDED.with(|c| c.get()) - before, 1);
    assert!(
        !one.aut.counted.is_empty(),
        "the build has the tool's counted rule"
    );
    assert!(one.aut.is_stable_partition(&one.mask_class));
    let mut m = crate::GrammarMatcher::new(g.clone());
    let ids: Vec<String> = (0..30).map(|i| i.to_string()).collect();
    let call = format!(
        "<tool_call>\n{{\"name\": \"tool_3\", \"arguments\": {{\"children\": [{{\"p3\": \"a\"}}, {{\"children\": [], \"p3\": \"b\"}}], \"ids\": [{}], \"p3\": \"c\"}}}}\n</tool_call>",
        ids.join(", ")
    );
    assert!(m.accept_string(&call), "{call}");
    let mut m = crate::GrammarMatcher::new(g);
    let refused = call.replace(&ids.join(", "), "1");
    assert!(!m.accept_string(&refused), "one id is too few");
}

/// A build splices its tool's automaton into a copy of the stub grammar's: the stub
/// grammar's nodes keep their ids, rules and edges (but the stub's own, left with no
/// edge in a rule of their own), the tool's nodes come after, in the stub's rule and
/// new ones. The near-stub bounds carried over are lower bounds: at most those solved
/// again on the whole automaton, and equal on the tool's nodes.
#[test]
fn a_build_splices_its_tool_into_the_stub_grammars_automaton() {
    let list = serde_json::json!({"type": "array", "items": {"type": "integer"}});
    let tag = four_tool_tag(serde_json::json!({ "list": list }));
    // A long token, so that bounds from the tool's nodes fall under the cap.
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for a in b' '..=b'~' {
        tokens.extend((b' '..=b'~').map(|b| vec![a, b]));
    }
    tokens.push(vec![b' '; 120]);
    let stop = tokens.len() as u32;
    tokens.push(b"</s>".to_vec());
    let vocab = Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap();
    let (g, stubs) = stub_grammar(&tag, Arc::new(vocab));
    let d = g.deferred.as_deref().unwrap();
    let slot = stubs[1];
    let one = d.expand(Some(&[slot])).unwrap();
    let (a, b) = (&g.aut, &one.aut);
    b.check_indices().unwrap();
    assert!(b.nodes.len() > a.nodes.len());
    for n in 0..a.nodes.len() as u32 {
        let (old, new) = (a.nodes[n as usize].rule, b.nodes[n as usize].rule);
        if old == slot {
            assert!(b.rule_names[new as usize].ends_with("#stub"), "node {n}");
            assert!(!b.has_edges(n) && !b.nodes[n as usize].is_final, "node {n}");
        } else {
            assert_eq!(new, old, "node {n}");
            assert_eq!(b.bytes_of(n), a.bytes_of(n), "node {n}");
            assert_eq!(b.calls_of(n), a.calls_of(n), "node {n}");
        }
    }
    let rules = a.rule_start.len() as u32;
    assert!(b.nodes[a.nodes.len()..]
        .iter()
        .all(|x| x.rule == slot || x.rule >= rules));
    assert_eq!(b.rule_start[slot as usize], a.nodes.len() as u32);
    // The bounds carried over against the same analysis solved on the whole.
    let near = &one.deferred.as_deref().expect("three tools left").near;
    let stub: Vec<bool> = (0..b.rule_start.len() as u32)
        .map(|r| near.is_stub(r))
        .collect();
    assert_eq!(stub.iter().filter(|&&s| s).count(), 3);
    let (dist, ret, reach) = near.bounds();
    let full = crate::automaton::defer::near_stubs(b, &stub, reach);
    let (full_dist, full_ret, _) = full.bounds();
    assert_eq!(dist.len(), full_dist.len());
    for n in 0..dist.len() {
        assert!(
            dist[n] <= full_dist[n],
            "node {n}: {} > {}",
            dist[n],
            full_dist[n]
        );
        if n >= a.nodes.len() {
            assert_eq!(dist[n], full_dist[n], "tool node {n}");
        }
    }
    assert!(ret.iter().zip(full_ret).all(|(x, y)| x <= y));
    assert!(dist[a.nodes.len()..].iter().any(|&x| x < reach));
}
