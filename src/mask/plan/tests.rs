//! Each kind of mask the plan chooses equals the full walk of the trie.

use super::*;
use crate::mask::cache::SubtreeMemo;
use crate::{GrammarCompiler, Precompute, Vocabulary};

/// A vocabulary of every byte, every two-byte string over letters and JSON
/// punctuation, and every three-letter lowercase string, alone and before a quote
/// (about 39,000 tokens: enough for mask classes and delta masks to be used).
pub(crate) fn wide_vocabulary() -> Vocabulary {
    let alphabet: Vec<u8> = (b'a'..=b'z')
        .chain(b'A'..=b'Z')
        .chain(*b"\":, {}\\")
        .collect();
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for &a in &alphabet {
        for &b in &alphabet {
            tokens.push(vec![a, b]);
        }
    }
    for a in b'a'..=b'z' {
        for b in b'a'..=b'z' {
            for c in b'a'..=b'z' {
                tokens.push(vec![a, b, c]);
                tokens.push(vec![a, b, c, b'"']);
            }
            tokens.push(vec![a, b, b'"', b':']);
        }
    }
    with_stop(tokens)
}

/// The vocabulary of `tokens` and a last token `</s>`, its stop token.
fn with_stop(mut tokens: Vec<Vec<u8>>) -> Vocabulary {
    tokens.push(b"</s>".to_vec());
    let stop = tokens.len() as u32 - 1;
    Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap()
}

/// Node `n`'s mask by a full walk of the trie (a fresh subtree memo, no deadline, no
/// slice and no byte run taken whole).
fn full_walk(g: &CompiledGrammar, n: u32) -> NodeMask {
    use crate::mask::cache::NO_BYTE_RUNS;
    /// Gives the thread its setting back, also when the walk panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            NO_BYTE_RUNS.with(|x| x.set(self.0));
        }
    }
    let _restore = Restore(NO_BYTE_RUNS.with(|x| x.replace(true)));
    walk_with_slice(g, n, None)
}

/// Node `n`'s mask by a walk of the trie that starts from `slice`'s token set when given
/// (a fresh subtree memo, no deadline).
fn walk_with_slice(
    g: &CompiledGrammar,
    n: u32,
    slice: Option<crate::mask::cache::Taken>,
) -> NodeMask {
    let memo = SubtreeMemo::default();
    let words = g.vocab.bitmask_words();
    let never = Deadline::never();
    crate::mask::cache::compute_node_mask_in(
        &g.aut,
        &g.trie,
        n,
        words,
        (&memo, &g.mask_class),
        &never,
        None,
        slice,
    )
    .unwrap()
}

/// Asserts that `got` is node `n`'s mask as the full walk of the trie computes it
/// (`what` names the path that computed `got`, for the message).
pub(crate) fn assert_full_walk_mask(g: &CompiledGrammar, n: u32, got: &NodeMask, what: &str) {
    let full = full_walk(g, n);
    assert_eq!(
        got.accepted.ids(&g.text_bits, &g.trie.sorted),
        full.accepted.ids(&g.text_bits, &g.trie.sorted),
        "node {n} ({what}): accepted tokens"
    );
    assert_eq!(
        got.uncertain, full.uncertain,
        "node {n} ({what}): uncertain tokens"
    );
}

/// The grammars [`a_sliced_walk_equals_the_full_walk`] walks, one for each slice (see its
/// comments), compiled on a vocabulary of pieces with quotes, `<`, control characters and
/// UTF-8 fragments.
fn slice_grammars() -> Vec<Arc<CompiledGrammar>> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let pieces: Vec<&[u8]> = vec![
        b"a",
        b"b",
        b"<",
        b"\"",
        b"\\",
        b"\n",
        b" ",
        b"{",
        b"}",
        b":",
        b",",
        b"tool",
        b"_call",
        b">",
        "é".as_bytes(),
        "日".as_bytes(),
        "😀".as_bytes(),
        &"日".as_bytes()[..2],
        &"😀".as_bytes()[1..],
        b"\x7f",
        b"1",
        "\u{2028}".as_bytes(),
        &"\u{2029}".as_bytes()[..2],
        "€".as_bytes(),
    ];
    for a in &pieces {
        for b in &pieces {
            tokens.push([*a, *b].concat());
            for c in &pieces[..6] {
                tokens.push([*a, *b, *c].concat());
            }
        }
    }
    tokens.push(b"<tool_call>".to_vec());
    // Tags whole: every node of the tools' arguments is walked too.
    let compiler = GrammarCompiler::new(with_stop(tokens))
        .with_precompute(Precompute::Lazy)
        .with_deferred_tool_rules(false);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "short": {"type": "string", "maxLength": 3},
            "tags": {"type": "array", "items": {"type": "string"}},
            "n": {"type": "number"}
        }
    });
    let tag = serde_json::json!({
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<tool_call>"],
            "tags": [{
                "begin": "<tool_call>",
                "content": {"type": "json_schema", "json_schema": schema},
                "end": "</tool_call>"
            }, {
                "begin": "<tool_call>!",
                "content": {"type": "json_schema", "json_schema": schema,
                    "string_excludes": ["<tool_call>", "</tool_call>"]},
                "end": "</tool_call>"
            }],
            "at_least_one": false,
            "stop_after_first": false
        }
    });
    vec![
        compiler
            .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
            .unwrap(),
        compiler.compile_structural_tag(&tag).unwrap(),
        compiler.compile_regex(r"(?s).*x").unwrap(),
        compiler
            .compile_grammar(r#"root ::= [^<]* "<" [a-z]*"#)
            .unwrap(),
        compiler.compile_regex(r"[A-Za-z0-9_]+@[a-z]+").unwrap(),
        compiler.compile_builtin_json().unwrap(),
        // A bounded repetition written out: its nodes consume letters and digits only up
        // to the copies left, so only tokens that short are taken whole.
        compiler.compile_regex(r"[a-z0-9]{0,30}\.").unwrap(),
        // `.` excludes U+2028 and U+2029: keys of `.*`, values of `^(.)+$`.
        compiler
            .compile_json_schema(
                &serde_json::json!({
                    "type": "object",
                    "patternProperties": {".*": {"type": "string", "pattern": "^(.)+$"}}
                }),
                &crate::JsonSchemaOptions::default(),
            )
            .unwrap(),
        // Past its subset construction's budget (the eleventh character from the end is an
        // `a`): the rule stays an NFA, whose nodes have several edges on `a`.
        compiler
            .compile_regex(r#"[^"\\\x00-\x1f]*a[^"\\\x00-\x1f]{10}"#)
            .unwrap(),
    ]
}

/// Every node's mask walked with the vocabulary slices it consumes equals the walk of
/// every token, over grammars whose wide nodes are JSON string contents, free text, and
/// free text before a `<tool_call>` trigger, and `.` in a `pattern` or a
/// `patternProperties` key, on a vocabulary with quotes, `<`, control characters,
/// multi-byte characters (the line separator U+2028 among them) and UTF-8 fragments.
#[test]
fn a_sliced_walk_equals_the_full_walk() {
    use crate::mask::slices;
    let grammars = slice_grammars();
    let mut used = [0usize; slices::SLICES.len()];
    let mut via_calls = 0;
    let mut bounded = 0;
    for g in &grammars {
        for n in 0..g.aut.nodes.len() as u32 {
            let Some(slice) = crate::mask::cache::pick_slice(&g.aut, &g.trie, n) else {
                continue;
            };
            let k = slices::SLICES
                .iter()
                .position(|&x| x == slice.slice.lang)
                .unwrap();
            used[k] += 1;
            bounded += (slice.len != usize::MAX) as usize;
            via_calls += !g.aut.calls_of(n).is_empty() as usize;
            let sliced = walk_with_slice(g, n, Some(slice));
            assert_full_walk_mask(g, n, &sliced, &format!("slice {k}"));
        }
    }
    // Each slice is taken somewhere: any text (the first regex), JSON string contents,
    // the free text before `<` (the tag and the EBNF grammar), ASCII letters and digits
    // (the second regex), JSON string contents without `<` (the tag's second tool, whose
    // strings refuse its markers), JSON string contents without U+2028 and U+2029 (the
    // `patternProperties` schema).
    assert!(
        used.iter().all(|&u| u > 0),
        "slices taken per kind: {used:?}"
    );
    // Key states whose undeclared tail is a call.
    assert!(via_calls > 0, "no slice was taken at a node with calls");
    // The last copies of the bounded repetition (fewer left than the longest token).
    assert!(bounded > 0, "no slice was taken up to a length");
}

/// Every node's mask walked with byte runs (subtrees of a DFA node's run of ASCII bytes,
/// no longer than the run, taken whole) equals the walk of every token, over patterns
/// whose classes loop (`[\w\s/.,:-]+`) or are counted out (a host name's label of at
/// most 61 characters, `[a-z0-9_-]{1,40}`), JSON strings (whose body loops on ASCII
/// characters but `"` and `\`), formats, and a recursive rule called from three places;
/// both a looping run and a bounded one take subtrees.
#[test]
fn a_walk_taking_byte_runs_whole_equals_the_full_walk() {
    use crate::mask::cache::RUN_TAKES;
    // Every string of 2 to 3 of the first bytes, of 4 to 5 of `a`, `1` and `-`, and of 4
    // to 7 letters `a` and `b`: below depth 3, subtrees pure in each class, of every depth.
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for (alphabet, lengths) in [(&b"ab1-_. \""[..], 2..=3), (b"a1-", 4..=5), (b"ab", 4..=7)] {
        let mut level: Vec<Vec<u8>> = vec![vec![]];
        for len in 1..=*lengths.end() {
            level = level
                .iter()
                .flat_map(|t| alphabet.iter().map(move |&b| [&t[..], &[b]].concat()))
                .collect();
            if lengths.contains(&len) {
                tokens.extend(level.iter().cloned());
            }
        }
    }
    let compiler = GrammarCompiler::new(with_stop(tokens)).with_precompute(Precompute::Lazy);
    let mut grammars = vec![
        compiler.compile_regex(r"[\w\s/.,:-]+").unwrap(),
        compiler
            .compile_regex(r"https://([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[A-Za-z0-9])?\.)*gov\.uk")
            .unwrap(),
        compiler
            .compile_regex(r"[a-z0-9_-]{1,40}\.[a-z]{0,3}")
            .unwrap(),
        // A recursive rule called from three places (walks through calls).
        compiler
            .compile_grammar(
                r#"root ::= "<" id ">" | "." id "_" | " " id "-"
                id ::= [ab]{0,6} | "1" id "1" | "-" [ab]{1,3}"#,
            )
            .unwrap(),
    ];
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "host": {"type": "string", "format": "hostname"},
            "mail": {"type": "string", "format": "email"},
            "id": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,40}$"},
            "text": {"type": "string"}
        },
        "additionalProperties": {"type": "integer"}
    });
    grammars.push(
        compiler
            .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
            .unwrap(),
    );
    RUN_TAKES.with(|t| t.set((0, 0)));
    let mut nodes = 0;
    for g in &grammars {
        for n in 0..g.aut.nodes.len() as u32 {
            let walked = walk_with_slice(g, n, None);
            assert_full_walk_mask(g, n, &walked, "byte runs");
            nodes += 1;
        }
    }
    let (all, bounded) = RUN_TAKES.with(|t| t.get());
    assert!(nodes > 200, "{nodes} nodes");
    assert!(
        all > 1000 && bounded > 100,
        "{all} subtrees taken, {bounded} by a bounded run"
    );
}

/// Byte runs that also take multibyte characters (a loop on ASCII bytes and on every
/// well-formed character: a JSON string's body, a key pattern without `_`) give every
/// node the mask of the walk without runs, over a vocabulary of ASCII bytes, whole
/// characters of two to four bytes, characters cut short, stray continuation bytes,
/// overlong and surrogate encodings, and U+2028 (which `.` and `[^\u2028]` leave out).
#[test]
fn a_walk_taking_multibyte_characters_in_byte_runs_equals_the_full_walk() {
    use crate::mask::cache::{CHAR_RUN_TAKES, RUN_TAKES};
    let units: [&[u8]; 16] = [
        b"a",
        b"_",
        b"\"",
        b" ",
        "é".as_bytes(),
        "中".as_bytes(),
        "😀".as_bytes(),
        "\u{2028}".as_bytes(),
        &[0xC3],
        &[0xE4, 0xB8],
        &[0xF0, 0x9F, 0x98],
        &[0xA9],
        &[0xB8, 0xAD],
        &[0xC0, 0x80],
        &[0xED, 0xA0, 0x80],
        &[0xF5, 0x80],
    ];
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut level: Vec<Vec<u8>> = vec![vec![]];
    for _ in 0..3 {
        level = level
            .iter()
            .flat_map(|t| units.iter().map(move |u| [&t[..], u].concat()))
            .collect();
        tokens.extend(level.iter().cloned());
    }
    tokens.sort();
    tokens.dedup();
    let compiler = GrammarCompiler::new(with_stop(tokens)).with_precompute(Precompute::Lazy);
    let mut grammars = vec![
        compiler.compile_regex(r"[a-zA-Z0-9\W]*x").unwrap(),
        compiler.compile_regex(r".*x").unwrap(),
        compiler
            .compile_grammar(r#"root ::= [^"\\_]* "\"" | [^\u2028]* "_""#)
            .unwrap(),
    ];
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"text": {"type": "string"}, "short": {"type": "string", "maxLength": 2}},
        "patternProperties": {"^[a-zA-Z0-9\\W]*$": {"type": "integer"}}
    });
    grammars.push(
        compiler
            .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
            .unwrap(),
    );
    RUN_TAKES.with(|t| t.set((0, 0)));
    CHAR_RUN_TAKES.with(|t| t.set(0));
    for g in &grammars {
        for n in 0..g.aut.nodes.len() as u32 {
            let walked = walk_with_slice(g, n, None);
            assert_full_walk_mask(g, n, &walked, "byte runs with characters");
        }
    }
    let multibyte = CHAR_RUN_TAKES.with(|t| t.get());
    assert!(
        multibyte > 100,
        "{multibyte} subtrees with characters taken"
    );
}

/// The exploration that says how far a node consumes a slice's language answers as the
/// exploration first written did (`slices::consumed_depth_reference`: cuts made per range,
/// the edges scanned per byte piece, no early look at the first bytes), for every node of
/// the slice grammars, every slice, and lengths that stop it early.
#[test]
fn consumed_depths_equal_the_first_exploration() {
    use crate::mask::slices;
    let (mut max, mut bounded, mut refused_first, mut nfa) = (0, 0, 0, 0);
    for g in &slice_grammars() {
        for n in 0..g.aut.nodes.len() as u32 {
            let start = slices::Start::new(&g.aut, n);
            nfa += g.aut.bytes_of(n).windows(2).any(|w| w[1].lo <= w[0].hi) as usize;
            for s in &g.trie.slices {
                for len in [g.trie.max_depth, 3, 1] {
                    let want = slices::consumed_depth_reference(&g.aut, n, s, len);
                    let got = slices::consumed_depth(&g.aut, n, s, len);
                    assert_eq!(got, want, "node {n}, slice {:?}, length {len}", s.lang);
                    match want {
                        usize::MAX => max += 1,
                        0 => {
                            refused_first +=
                                start.as_ref().is_some_and(|st| !st.may_consume(s)) as usize
                        }
                        _ => bounded += 1,
                    }
                }
            }
        }
    }
    // Whole languages, lengths, and refusals on a first byte without exploring: each
    // kind of answer is met, and nodes with several edges on one byte are explored.
    assert!(
        max > 0 && bounded > 0 && refused_first > 0 && nfa > 0,
        "{max} whole, {bounded} bounded, {refused_first} refused at once, {nfa} NFA nodes"
    );
}

#[test]
fn a_delta_mask_equals_the_full_walk() {
    let compiler = GrammarCompiler::new(wide_vocabulary()).with_precompute(Precompute::Lazy);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "pay": {"type": "string"},
            "pal": {"type": "integer"},
            "name": {"type": "string", "maxLength": 5},
            "zoo": {"type": "boolean"}
        },
        "required": ["name"]
    });
    // The grammar for any matcher: its undeclared keys are the names' trie spelled out
    // (`compile_json_schema` checks them in the matcher instead).
    let ir = crate::json_schema_to_grammar(&schema, &crate::JsonSchemaOptions::default()).unwrap();
    let g = compiler.compile_ir(&ir).unwrap();
    let never = Deadline::never();
    let words = g.vocab.bitmask_words();
    let memo = SubtreeMemo::default();
    let mut deltas = 0;
    for n in 0..g.aut.nodes.len() as u32 {
        let Some(delta) = delta_reference(&g.aut, &g.trie, &g.mask_class, n) else {
            continue;
        };
        deltas += 1;
        assert_ne!(delta.reference, n);
        let base = full_walk(&g, delta.reference);
        let derived = compute_node_mask(
            &g.aut,
            &g.trie,
            n,
            words,
            (&memo, &g.mask_class),
            &never,
            Some((&base, &delta, &g.text_bits)),
        )
        .unwrap();
        assert_full_walk_mask(&g, n, &derived, &format!("reference {}", delta.reference));
        // A reference has no reference of its own: one level deep.
        assert!(delta_reference(&g.aut, &g.trie, &g.mask_class, delta.reference).is_none());
    }
    // The states of the key automaton that avoids "pay", "pal", "name" and "zoo".
    assert!(deltas >= 5, "only {deltas} nodes took a delta");
}

/// Every mask composed from a call-only node's callees equals the full walk of that
/// node, over grammars with counted and plain strings, nested objects and arrays, a
/// node that calls several rules, left recursion and nullable callees.
#[test]
fn a_call_only_mask_equals_the_full_walk() {
    let compiler = GrammarCompiler::new(wide_vocabulary()).with_precompute(Precompute::Lazy);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "email": {"type": "string", "maxLength": 1024},
            "name": {"type": "string", "minLength": 2, "maxLength": 5},
            "tags": {"type": "array", "items": {"type": "string"}},
            "inner": {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}
            },
            "any": {}
        },
        "required": ["email"]
    });
    let grammars = [
        compiler
            .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
            .unwrap(),
        compiler
            .compile_grammar(
                r#"root ::= item ("," item)*
item ::= word | num | list | opt
word ::= [a-z]+ "\""?
num ::= [0-9]+ | num "e"
list ::= "[" root "]" | list "x"
opt ::= [a-z]? "!"
"#,
            )
            .unwrap(),
        // "az" is accepted inside `wordy` and runs past the end of `shorty`.
        compiler
            .compile_grammar(
                r#"root ::= pick "z"
pick ::= wordy | shorty
wordy ::= "a" | wordy [a-z]
shorty ::= "a" | "(" pick ")"
"#,
            )
            .unwrap(),
        compiler.compile_builtin_json().unwrap(),
        // A choice between bytes and a nullable call, whose return node has bytes.
        compiler
            .compile_grammar(
                r#"root ::= "ab" x "b" | x "c" | "\"" x
x ::= [a-z]* | "\"" [0-9]
"#,
            )
            .unwrap(),
        // A nullable call (whitespace) whose return node only calls (a value): a tool's
        // member value, after its colon.
        compiler
            .compile_grammar(
                r#"root ::= "{" ws v ws "}" | ":" ws v | "=" ws ws v
ws ::= "" | " " ws
v ::= "1" | "[" ws v ws "]" | "\"" [a-z]* "\""
"#,
            )
            .unwrap(),
    ];
    let never = Deadline::never();
    let mut composed = 0;
    let mut mixed = 0;
    let mut chained = 0;
    for g in &grammars {
        for n in 0..g.aut.nodes.len() as u32 {
            let Some(derived) = g.call_only_mask_by(n, &never).unwrap() else {
                continue;
            };
            composed += 1;
            mixed += !g.aut.bytes_of(n).is_empty() as usize;
            let call_only = |m: u32| {
                !g.aut.is_virtual(m)
                    && g.aut.bytes_of(m).is_empty()
                    && !g.aut.calls_of(m).is_empty()
            };
            chained += g
                .aut
                .calls_of(n)
                .iter()
                .any(|c| g.aut.nullable[c.rule as usize] && call_only(c.target))
                as usize;
            assert_full_walk_mask(g, n, &derived, "composed");
        }
    }
    assert!(
        chained >= 2,
        "only {chained} masks composed through a call-only return node"
    );
    assert!(composed >= 9, "only {composed} masks were composed");
    // Nodes with byte edges beside their calls: the key states that avoid the declared
    // names (their undeclared tails are calls), and the EBNF choices below.
    assert!(
        mixed >= 4,
        "only {mixed} masks with byte edges were composed"
    );
}

/// One token run alone through `chart` (from a node, or from a call of one): whether every
/// byte was scanned; whether it failed after the rule could have ended after some `k >= 1`
/// bytes with byte `k` in `follow`; and how many bytes were scanned.
fn run_alone(
    aut: &crate::automaton::Automaton,
    mut chart: crate::parser::Chart,
    bytes: &[u8],
    follow: &[u64; 4],
) -> (bool, bool, usize) {
    let (mut ok, mut exit) = (false, false);
    for (k, &b) in bytes.iter().enumerate() {
        ok |= k >= 1 && exit && crate::automaton::byte_in(follow, b);
        if !chart.push_byte(aut, b) {
            return (false, ok, k);
        }
        exit = chart.can_exit();
    }
    (true, ok, bytes.len())
}

/// Asserts that mask `m` of grammar `g` accepts exactly the token ids `accepted` (any
/// order) and holds exactly the trie positions `uncertain`; `what` names it.
fn assert_mask_is(
    g: &CompiledGrammar,
    m: &NodeMask,
    mut accepted: Vec<u32>,
    uncertain: &[u32],
    what: &str,
) {
    accepted.sort_unstable();
    let got = m.accepted.ids(&g.text_bits, &g.trie.sorted);
    assert_eq!(got, accepted, "{what}: accepted");
    assert_eq!(m.uncertain, uncertain, "{what}: uncertain");
}

/// Every walked mask equals running each token alone through the Earley chart from the
/// node (accepted: every byte scanned; uncertain: it failed after the node's rule could
/// have ended with a following byte that may follow the rule). The grammars call DFA
/// rules that end inside tokens (a string's body then its closing quote, a counted
/// string, a word rule that may end anywhere), which the walk steps by table inside
/// the chart.
#[test]
fn a_walk_equals_token_by_token_chart_runs() {
    use crate::parser::Chart;
    let alphabet = b"ab\":,{} 1\\";
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for &a in alphabet {
        for &b in alphabet {
            tokens.push(vec![a, b]);
            for &c in b"a\",}" {
                tokens.push(vec![a, b, c]);
            }
        }
    }
    // Longer tokens: runs of steps inside a callee, then a step that ends it.
    let short = b"ab\"1,:";
    for n in 0..short.len().pow(4) {
        tokens.push(
            (0..4)
                .map(|k| short[n / short.len().pow(k) % short.len()])
                .collect(),
        );
    }
    for n in 0..3usize.pow(5) {
        tokens.push((0..5).map(|k| b"ab\""[n / 3usize.pow(k) % 3]).collect());
    }
    // Tags whole: every node of the tools' arguments is walked too.
    let compiler = GrammarCompiler::new(with_stop(tokens))
        .with_precompute(Precompute::Lazy)
        .with_deferred_tool_rules(false);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "string", "maxLength": 3},
            "ab": {"type": "array", "items": {"type": "integer"}}
        }
    });
    let grammars = [
        compiler
            .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
            .unwrap(),
        compiler
            .compile_grammar(
                r#"root ::= (word ":" | "{" root "}" | word word) ","?
word ::= [ab]+ | "\"" [ab]* "\"" | word "1"
"#,
            )
            .unwrap(),
    ];
    let mut walked = 0;
    for g in &grammars {
        let (aut, trie) = (&g.aut, &g.trie);
        for n in 0..aut.nodes.len() as u32 {
            if !g.has_mask[n as usize] {
                continue;
            }
            walked += 1;
            let m = full_walk(g, n);
            let follow = &aut.follow[aut.rule_of(n) as usize];
            let mut accepted = Vec::new();
            let mut uncertain = Vec::new();
            for (p, &id) in trie.sorted.iter().enumerate() {
                let bytes = g.vocab.token_bytes(id).unwrap();
                let (all, ok, _) = run_alone(aut, Chart::new(aut, n), bytes, follow);
                if all {
                    accepted.push(id);
                } else if ok {
                    uncertain.push(p as u32);
                }
            }
            assert_mask_is(g, &m, accepted, &uncertain, &format!("node {n}"));
        }
    }
    assert!(walked >= 40, "only {walked} nodes walked");
}

/// Every context mask (a node called from a caller) equals running each of the node's
/// uncertain tokens alone through the chart from that call: accepted when every byte is
/// scanned, uncertain when it failed after the caller's rule could have ended with a
/// following byte that may follow that rule. The vocabulary holds long runs of tokens
/// that share a prefix the context refuses (` ab`, ` abc`, `  ab`... after a nullable
/// whitespace whose return wants a digit), which the pair walk skips as one run.
#[test]
fn a_pair_mask_equals_token_by_token_chart_runs() {
    use crate::parser::Chart;
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for a in b'a'..=b'z' {
        for b in b'a'..=b'z' {
            tokens.push(vec![b' ', a, b]);
            tokens.push(vec![b' ', b' ', a, b]);
            tokens.push(vec![b' ', a, b, b'1']);
            tokens.push(vec![b' ', a, b, a, b]);
        }
        tokens.push(vec![b' ', a]);
        tokens.push(vec![b' ', b'1', a]);
        tokens.push(vec![b' ', b'"', a, b'"']);
    }
    for t in [
        &b" 1"[..],
        b" 12",
        b" 1}",
        b"  1",
        b" [",
        b" ]",
        b"1]",
        b" \"",
        b"\"}",
    ] {
        tokens.push(t.to_vec());
    }
    let compiler = GrammarCompiler::new(with_stop(tokens)).with_precompute(Precompute::Lazy);
    let grammars = [
        // The whitespace's follow bytes hold letters (from `w`) and digits (from `v`);
        // called before `v`, a letter after spaces fails.
        compiler
            .compile_grammar(
                r#"root ::= "{" ws v ws "}" | "(" ws w ws ")" | "[" ws v "]"
ws ::= "" | " " ws
v ::= [0-9]+
w ::= [a-z]+ | "\"" [a-z]* "\""
"#,
            )
            .unwrap(),
        compiler.compile_builtin_json().unwrap(),
    ];
    let never = Deadline::never();
    let (mut pairs, mut runs) = (0, 0);
    for g in &grammars {
        let aut = &g.aut;
        for n in 0..aut.nodes.len() as u32 {
            if !g.has_mask[n as usize] || aut.is_virtual(n) {
                continue;
            }
            let Some(own) = g.node_mask_until(n, &never).unwrap() else {
                continue;
            };
            if own.uncertain.is_empty() {
                continue;
            }
            for &caller in &g.sites[aut.rule_of(n) as usize] {
                pairs += 1;
                let m =
                    crate::mask::cache::compute_pair_mask(aut, &g.trie, &own, n, caller, &never)
                        .unwrap();
                let follow = &aut.follow[aut.rule_of(caller) as usize];
                let mut accepted = Vec::new();
                let mut uncertain = Vec::new();
                let mut failed_at: Vec<Vec<u8>> = Vec::new();
                for &p in &own.uncertain {
                    let id = g.trie.sorted[p as usize];
                    let bytes = g.vocab.token_bytes(id).unwrap();
                    let chart = Chart::with_caller(aut, caller, n);
                    let (all, ok, read) = run_alone(aut, chart, bytes, follow);
                    if !all {
                        failed_at.push(bytes[..=read].to_vec());
                    }
                    if all {
                        accepted.push(id);
                    } else if ok {
                        uncertain.push(p);
                    }
                }
                // Tokens that failed on a prefix another token failed on too: a run.
                failed_at.sort();
                runs += failed_at.windows(2).filter(|w| w[0] == w[1]).count();
                assert_mask_is(
                    g,
                    &m,
                    accepted,
                    &uncertain,
                    &format!("node {n} from {caller}"),
                );
            }
        }
    }
    assert!(pairs >= 20, "only {pairs} context masks");
    assert!(
        runs >= 1000,
        "only {runs} tokens failed on a prefix shared with another"
    );
}

/// A node whose walk costs less than its structure key (`cheap_walk`) is walked without
/// one: the next letter of a literal (few tokens start with it), not a letter loop nor a
/// node that calls a rule. Its mask is the full walk's, and none is shared.
#[test]
fn narrow_nodes_are_walked_without_a_structure_key() {
    let compiler = GrammarCompiler::new(wide_vocabulary()).with_precompute(Precompute::Lazy);
    let g = compiler
        .compile_grammar("root ::= \"qz\" [a-z]* s\ns ::= \"!\" s | \"?\"")
        .unwrap();
    let root = g.aut.rule_start[g.aut.root as usize];
    // Before `q`: the ~1,400 tokens that start with `q`.
    assert!(g.cheap_walk(root));
    let (mut wide, mut calling) = (0, 0);
    for n in 0..g.aut.nodes.len() as u32 {
        let letters = g
            .aut
            .bytes_of(n)
            .iter()
            .any(|e| e.lo <= b'a' && b'z' <= e.hi);
        if letters {
            wide += 1;
            assert!(!g.cheap_walk(n), "node {n} reads every letter");
        }
        if !g.aut.calls_of(n).is_empty() {
            calling += 1;
            assert!(!g.cheap_walk(n), "node {n} calls a rule");
        }
    }
    assert!(
        wide >= 1 && calling >= 1,
        "{wide} letter loops, {calling} calling nodes"
    );
    let before = g.shared.len();
    let m = g.node_mask(root).unwrap();
    assert_full_walk_mask(&g, root, &m, "literal");
    assert_eq!(g.shared.len(), before, "a narrow node's mask is not shared");
}

/// `outside` keeps exactly the positions no range holds: ranges before, between and
/// after the positions, empty ranges, ranges that hold every position, none at all.
#[test]
fn outside_keeps_the_positions_no_range_holds() {
    let sorted: Vec<u32> = (0..400u32).filter(|p| p % 7 != 3).map(|p| p * 3).collect();
    let cases: Vec<Vec<std::ops::Range<u32>>> = vec![
        vec![],
        vec![0..0],
        vec![0..5, 30..31, 31..90, 600..601, 1190..5000],
        vec![0..u32::MAX],
        vec![2..3, 4..4, 5000..6000],
    ];
    for ranges in cases {
        let want: Vec<u32> = sorted
            .iter()
            .copied()
            .filter(|p| !ranges.iter().any(|r| r.contains(p)))
            .collect();
        assert_eq!(
            crate::mask::cache::outside(&sorted, &ranges),
            want,
            "{ranges:?}"
        );
    }
    assert!(crate::mask::cache::outside(&[], std::slice::from_ref(&(0..9))).is_empty());
}
