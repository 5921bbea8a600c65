//! Generates `docs/errors.md`: every error kind a user can meet, a minimal input that
//! produces it, and the message shown. Each entry also checks that the input really
//! produces that kind (the variant name, read from `Debug`).
//!
//! The file is regenerated when it differs (outside CI, the test then passes and says so);
//! under `CI=true` a stale file fails the test, so the catalogue in the repository always
//! matches the code. Run with `cargo test --release -p tokensieve-tools --test api error_catalogue`.

use crate::common;

use serde_json::json;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;
use tokensieve::grammar::{parse_ebnf, Expr, Grammar, Rule, RuleId};
use tokensieve::mask::{apply_token_bitmask_inplace, fill_next_token_bitmask_batch};
use tokensieve::{
    GrammarCompiler, GrammarMatcher, JsonSchemaOptions, Limits, RegexOptions, Vocabulary,
};
use tokensieve_tools::{
    format_by_name, register_format, FormatOptions, Tool, ToolCall, ToolChoice, ToolContext,
    ToolSet,
};

/// One catalogue line: the variant, the input (as the user writes it), the message.
struct Entry {
    kind: String,
    input: String,
    message: String,
}

struct Section {
    title: &'static str,
    intro: &'static str,
    entries: Vec<Entry>,
}

/// The variant name of an error from its `Debug` form (`TooDeep { .. }` → `TooDeep`).
fn variant(debug: &str) -> &str {
    debug
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .next()
        .unwrap_or("")
}

impl Section {
    fn new(title: &'static str, intro: &'static str) -> Self {
        Section {
            title,
            intro,
            entries: Vec::new(),
        }
    }

    /// Records `result`'s error, checking it is variant `kind` (of the error itself, or of
    /// the innermost error `inner` extracts).
    fn add<T, E: std::fmt::Debug + std::fmt::Display>(
        &mut self,
        kind: &str,
        input: &str,
        result: Result<T, E>,
        inner: impl Fn(&E) -> String,
    ) {
        let e = match result {
            Ok(_) => panic!("{}: {input:?} gave no error", self.title),
            Err(e) => e,
        };
        let got = inner(&e);
        assert_eq!(
            variant(&got),
            kind,
            "{}: {input:?} gave {got} ({e})",
            self.title
        );
        let mut message = e.to_string();
        assert!(!message.is_empty());
        // The messages that depend on the clock: show the elapsed time symbolically.
        if message.contains("compile time (ms) ") {
            let i = message.find("(ms) ").expect("compile time message") + 5;
            let j = i + message[i..].find(' ').expect("number");
            message.replace_range(i..j, "<elapsed ms>");
        }
        self.entries.push(Entry {
            kind: kind.to_string(),
            input: input.to_string(),
            message,
        });
    }
}

fn debug<E: std::fmt::Debug>(e: &E) -> String {
    format!("{e:?}")
}

fn vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(b"<|sep|>".to_vec()); // 256, special
    tokens.push(b"<eos>".to_vec()); // 257, special, stop
    tokens.push(Vec::new()); // 258, empty
    Arc::new(Vocabulary::from_token_bytes(&tokens, &[256, 257], &[257]).unwrap())
}

fn ebnf_section() -> Section {
    let mut s = Section::new(
        "EBNF (`EbnfError`, kind `EbnfErrorKind`)",
        "`parse_ebnf` and `GrammarCompiler::compile_grammar`; the message starts with \
         `line:column:` (1-based, columns in characters).",
    );
    let cases: &[(&str, &str)] = &[
        ("EmptyGrammar", "# only a comment"),
        ("ExpectedRuleName", "::= \"a\""),
        ("ExpectedDefine", "root = \"a\""),
        ("UnexpectedChar", "root ::= \"a\" ;"),
        ("NothingToRepeat", "root ::= * \"a\""),
        ("UnclosedGroup", "root ::= (\"a\""),
        ("UnmatchedParen", "root ::= \"a\")"),
        ("MisplacedLookahead", "root ::= (= \"a\") \"b\""),
        ("UnterminatedString", "root ::= \"abc"),
        ("UnterminatedClass", "root ::= [a-z"),
        ("UnterminatedToken", "root ::= <|im_end|"),
        ("EmptyToken", "root ::= <>"),
        ("InvalidTokenId", "root ::= <[12x]>"),
        ("InvalidEscape", "root ::= \"\\q\""),
        ("BadHexEscape", "root ::= \"\\x4\""),
        ("InvalidCodePoint", "root ::= \"\\U00110000\""),
        ("ReversedRange", "root ::= [z-a]"),
        ("BadRepeatSyntax", "root ::= \"a\"{x}"),
        ("BadRepeat", "root ::= \"a\"{3,2}"),
        ("RepeatTooLarge", "root ::= \"a\"{2000000}"),
        ("DuplicateRule", "root ::= \"a\"\nroot ::= \"b\""),
        ("UndefinedRule", "root ::= value"),
        ("MissingRoot", "start ::= \"a\""),
    ];
    for (kind, src) in cases {
        s.add(kind, src, parse_ebnf(src, "root"), |e| debug(e.kind()));
    }
    let deep = format!(
        "root ::= {}\"a\"{}",
        "(\"a\" ".repeat(1001),
        ")".repeat(1001)
    );
    s.add(
        "TooDeep",
        "root ::= (\"a\" (\"a\" ... 1001 levels ... ))",
        parse_ebnf(&deep, "root"),
        |e| debug(e.kind()),
    );
    s
}

fn rule(body: Expr) -> Rule {
    Rule {
        name: "root".into(),
        body,
    }
}

fn ir_section() -> Section {
    let mut s = Section::new(
        "Grammar IR (`InvalidGrammar`)",
        "`Grammar::validate` and `GrammarCompiler::compile_ir` (wrapped in \
         `CompileError::Invalid`) on IR built by hand or by a front end.",
    );
    let cases: Vec<(&str, &str, Grammar)> = vec![
        (
            "Empty",
            "Grammar { rules: vec![], root: RuleId(0) }",
            Grammar {
                rules: vec![],
                root: RuleId(0),
            },
        ),
        (
            "DanglingRule",
            "root ::= Expr::Rule(RuleId(5)) (one rule)",
            Grammar {
                rules: vec![rule(Expr::Rule(RuleId(5)))],
                root: RuleId(0),
            },
        ),
        (
            "DuplicateRule",
            "two rules named `root`",
            Grammar {
                rules: vec![rule(Expr::Empty), rule(Expr::Empty)],
                root: RuleId(0),
            },
        ),
        (
            "TooDeep",
            "Seq[\"a\", Seq[\"a\", ...]] 1,001 levels",
            Grammar {
                rules: vec![rule({
                    let mut e = Expr::Bytes(b"a".to_vec());
                    for _ in 0..1_000 {
                        e = Expr::Seq(vec![Expr::Bytes(b"a".to_vec()), e]);
                    }
                    e
                })],
                root: RuleId(0),
            },
        ),
        (
            "BadRepeat",
            "Repeat { expr: \"a\", min: 3, max: Some(2) }",
            Grammar {
                rules: vec![rule(Expr::Repeat {
                    expr: Box::new(Expr::Bytes(b"a".to_vec())),
                    min: 3,
                    max: Some(2),
                })],
                root: RuleId(0),
            },
        ),
    ];
    for (kind, input, g) in cases {
        s.add(kind, input, g.validate(), debug);
    }
    s
}

fn compile_section() -> Section {
    let mut s = Section::new(
        "Compiling (`CompileError`)",
        "`GrammarCompiler::compile_grammar` / `compile_ir` / `compile_builtin_json`, against a \
         vocabulary of the 256 bytes, special tokens `<|sep|>` (256) and `<eos>` (257, the \
         stop token), and a token with no bytes (258). `Ebnf` and `Invalid` wrap the errors above.",
    );
    let c = GrammarCompiler::new(vocab());
    s.add(
        "Ebnf",
        "root ::= (\"a\"",
        c.compile_grammar("root ::= (\"a\""),
        debug,
    );
    let g = Grammar {
        rules: vec![rule(Expr::Rule(RuleId(5)))],
        root: RuleId(0),
    };
    s.add(
        "Invalid",
        "root ::= Expr::Rule(RuleId(5))",
        c.compile_ir(&g),
        debug,
    );
    for (kind, src) in [
        ("UnknownToken", "root ::= \"a\" <|im_end|>"),
        ("TokenOutOfRange", "root ::= <[999999]>"),
        ("EmptyLanguage", "root ::= \"a\" []"),
    ] {
        s.add(kind, src, c.compile_grammar(src), debug);
    }
    // The automaton builder's own errors, shown with their `Automaton(..)` wrapper.
    let src = "root ::= ([a-z]{0,1000000}){0,1000000}";
    s.add(
        "Automaton",
        src,
        c.compile_grammar(src),
        |e: &tokensieve::CompileError| match e {
            tokensieve::CompileError::Automaton(a) => format!("Automaton({a:?})"),
            other => format!("{other:?}"),
        },
    );
    s
}

fn limits_section() -> Section {
    let mut s = Section::new(
        "Limits (`CompileError::Limit`, a `LimitExceeded` with a `Limit`)",
        "`GrammarCompiler::with_limits(Limits { .. })`: the message names the `Limits` \
         field, its value and the input's value. Defaults: `Limits::default()` (see \
         `src/limits.rs`). `max_schema_depth` and `max_enum_values` (kinds `SchemaDepth`, \
         `EnumValues`) are read by the JSON Schema front end.",
    );
    let base = GrammarCompiler::new(vocab());
    let cases: Vec<(&str, &str, Limits, &str)> = vec![
        (
            "IrNodes",
            "max_ir_nodes: 10",
            Limits {
                max_ir_nodes: 10,
                ..Limits::default()
            },
            "root ::= \"hello, world\"",
        ),
        (
            "NestingDepth",
            "max_nesting_depth: 2",
            Limits {
                max_nesting_depth: 2,
                ..Limits::default()
            },
            "root ::= (\"a\" \"b\")*",
        ),
        (
            "RepeatBound",
            "max_repeat_bound: 100",
            Limits {
                max_repeat_bound: 100,
                ..Limits::default()
            },
            "root ::= [a-z]{2,20000}",
        ),
        (
            "RuleStates",
            "max_rule_states: 5",
            Limits {
                max_rule_states: 5,
                ..Limits::default()
            },
            "root ::= \"abcdefgh\"",
        ),
        (
            "AutomatonNodes",
            "max_automaton_nodes: 5",
            Limits {
                max_automaton_nodes: 5,
                ..Limits::default()
            },
            "root ::= \"abcdefgh\"",
        ),
        (
            "MemoryBytes",
            "max_memory_bytes: 100",
            Limits {
                max_memory_bytes: 100,
                ..Limits::default()
            },
            "root ::= \"a\"",
        ),
        (
            "CompileTime",
            "compile_time: Some(Duration::ZERO)",
            Limits {
                compile_time: Some(Duration::ZERO),
                ..Limits::default()
            },
            "root ::= \"a\"",
        ),
    ];
    for (kind, limits, l, src) in cases {
        let c = base.clone().with_limits(l);
        let r = c.compile_grammar(src);
        let input = format!("{src}  (with {limits})");
        s.add(kind, &input, r, |e| match e {
            tokensieve::CompileError::Limit(l) => debug(&l.limit),
            other => debug(other),
        });
    }
    for (kind, limits, l, schema) in [
        (
            "SchemaDepth",
            "max_schema_depth: 3",
            Limits {
                max_schema_depth: 3,
                ..Limits::default()
            },
            json!({"items": {"items": {"items": {"items": {}}}}}),
        ),
        (
            "EnumValues",
            "max_enum_values: 2",
            Limits {
                max_enum_values: 2,
                ..Limits::default()
            },
            json!({"enum": [1, 2, 3]}),
        ),
    ] {
        let c = base.clone().with_limits(l);
        let r = c.compile_json_schema(&schema, &JsonSchemaOptions::default());
        let input = format!("JSON Schema {schema}  (with {limits})");
        s.add(kind, &input, r, |e| match e {
            tokensieve::CompileError::Limit(l) => debug(&l.limit),
            other => debug(other),
        });
    }
    s
}

fn regex_section() -> Section {
    let mut s = Section::new(
        "Regex (`CompileError::Regex(RegexError)`, or another `CompileError`)",
        "`GrammarCompiler::compile_regex`; positions are byte offsets and line:column in \
         the pattern.",
    );
    let c = GrammarCompiler::new(vocab());
    let inner = |e: &tokensieve::CompileError| match e {
        tokensieve::CompileError::Regex(r) => debug(r),
        other => debug(other),
    };
    for (kind, p) in [
        ("Syntax", "a(b"),
        ("Backreference", r"(a)\1"),
        ("LookAround", "a(?=b)"),
        ("WordBoundary", r"\bword"),
        ("MisplacedAnchor", "a^b"),
        ("NonUtf8", r"(?-u:\xFF)"),
    ] {
        s.add(kind, p, c.compile_regex(p), inner);
    }
    let deep = format!("{}a{}", "(".repeat(300), ")".repeat(300));
    s.add(
        "TooDeep",
        "(((...a...))) 300 levels",
        c.compile_regex(&deep),
        inner,
    );
    s.add(
        "EmptyLanguage",
        "[^\\s\\S]",
        c.compile_regex_with("[^\\s\\S]", &RegexOptions::new()),
        debug,
    );
    s
}

fn json_schema_section() -> Section {
    let mut s = Section::new(
        "JSON Schema (`CompileError::JsonSchema(JsonSchemaError)`, or another `CompileError`)",
        "`GrammarCompiler::compile_json_schema`; the message names the keyword and its JSON \
         pointer.",
    );
    let c = GrammarCompiler::new(vocab());
    let o = JsonSchemaOptions::default();
    let inner = |e: &tokensieve::CompileError| match e {
        tokensieve::CompileError::JsonSchema(j) => debug(j),
        other => debug(other),
    };
    s.add(
        "NotJson",
        "{\"type\": ",
        c.compile_json_schema("{\"type\": ", &o),
        inner,
    );
    let cases = [
        ("InvalidKeyword", json!({"type": "strin"})),
        (
            "Unsupported",
            json!({"type": "object", "properties": {"a": {"type": "string", "x-vendor": 1}}}),
        ),
        ("UnresolvedRef", json!({"$ref": "#/$defs/missing"})),
        (
            "Unsatisfiable",
            json!({"type": "string", "minLength": 5, "maxLength": 2}),
        ),
        (
            "Limit",
            json!({"type": "string", "maxLength": 524288, "minLength": 524288}),
        ),
    ];
    for (kind, schema) in cases {
        let mut input = schema.to_string();
        if kind == "Limit" {
            input.push_str("  (with max_repeat_bound: 1000; the defaults admit it)");
        }
        let c = if kind == "Limit" {
            c.clone().with_limits(Limits {
                max_repeat_bound: 1000,
                ..Limits::default()
            })
        } else {
            c.clone()
        };
        s.add(kind, &input, c.compile_json_schema(&schema, &o), inner);
    }
    s
}

fn matcher_section() -> Section {
    let mut s = Section::new(
        "Matcher (`TokenRejection`, `MatcherError`) and bitmask helpers (`BitmaskError`)",
        "`GrammarMatcher::try_accept_token`, `rollback`, `fill_next_token_bitmask`, and the \
         helpers of `tokensieve::mask`; grammar `root ::= \"ab\"` unless said otherwise, on \
         the vocabulary of the compile section.",
    );
    let voc = vocab().as_ref().clone().with_vocab_size(300).unwrap();
    let c = GrammarCompiler::new(voc);
    let g = c.compile_grammar("root ::= \"ab\"").unwrap();
    let fresh = || GrammarMatcher::new(g.clone());
    let rejected_tokens = [
        (
            "OutOfRange",
            "try_accept_token(1000) (vocab_size 300)",
            1000,
        ),
        (
            "Padding",
            "try_accept_token(280) (tokenizer of 259 tokens, vocab_size 300)",
            280,
        ),
        (
            "StopNotAllowed",
            "try_accept_token(257) (`<eos>`) before \"ab\"",
            257,
        ),
        (
            "SpecialNotAllowed",
            "try_accept_token(256) (`<|sep|>`)",
            256,
        ),
        (
            "Empty",
            "try_accept_token(258) (a token with no bytes)",
            258,
        ),
        ("Bytes", "try_accept_token(b'x' as u32)", b'x' as u32),
    ];
    for (name, call, token) in rejected_tokens {
        s.add(name, call, fresh().try_accept_token(token), debug);
    }
    s.add(
        "DuplicateKey",
        "grammar of `compile_json_schema` for `{\"additionalProperties\": true}`, after `{\"a\":1,`: try_accept_bytes of `\"\\u0061\"`",
        {
            let g = c
                .compile_json_schema(r#"{"additionalProperties": true}"#, &Default::default())
                .unwrap();
            let mut m = GrammarMatcher::new(g);
            assert!(m.accept_string(r#"{"a":1,"#));
            m.try_accept_bytes(br#""\u0061""#)
        },
        debug,
    );
    // An ambiguous grammar: the Earley work of a step grows with the square of the text.
    let ambiguous = c
        .clone()
        .with_limits(Limits {
            max_step_items: 20_000,
            ..Limits::default()
        })
        .compile_grammar("root ::= x*\nx ::= x x | [a-z] | \"\"")
        .unwrap();
    s.add(
        "StepLimit",
        "`root ::= x*`, `x ::= x x | [a-z] | \"\"` under `max_step_items: 20000`: \
         try_accept_bytes of 300 × `a` as one step",
        GrammarMatcher::new(ambiguous).try_accept_bytes(&[b'a'; 300]),
        debug,
    );
    s.add(
        "Limit",
        "`Precompute::Lazy`, `compile_time: 50 ms`, a vocabulary of 100,000 random \
         lowercase tokens: fill_next_token_bitmask on \
         `root ::= (([a-z]{0,1000} \"x\"?){0,1000} \"y\"?){0,1000}` (its first mask walks \
         for seconds)",
        {
            let tokens = common::random_letter_tokens(100_000);
            let g = GrammarCompiler::new(Vocabulary::from_token_bytes(&tokens, &[], &[]).unwrap())
                .with_precompute(tokensieve::Precompute::Lazy)
                .with_limits(Limits {
                    compile_time: Some(Duration::from_millis(50)),
                    ..Limits::default()
                })
                .compile_grammar(r#"root ::= (([a-z]{0,1000} "x"?){0,1000} "y"?){0,1000}"#)
                .unwrap();
            let mut m = GrammarMatcher::new(g);
            let mut mask = vec![0u32; m.bitmask_words()];
            m.fill_next_token_bitmask(&mut mask)
        },
        debug,
    );
    let mut done = fresh();
    assert!(done.accept_string("ab") && done.accept_token(257));
    s.add(
        "Terminated",
        "try_accept_token(b'a' as u32) after \"ab\" <eos>",
        done.try_accept_token(b'a' as u32),
        debug,
    );
    s.add(
        "Rollback",
        "rollback(3) after one token",
        {
            let mut m = fresh();
            m.accept_token(b'a' as u32);
            m.rollback(3)
        },
        debug,
    );
    s.add(
        "BitmaskLength",
        "fill_next_token_bitmask(&mut [0u32; 2]) (needs 10 words)",
        fresh().fill_next_token_bitmask(&mut [0u32; 2]),
        debug,
    );
    s.add(
        "Length",
        "apply_token_bitmask_inplace(&mut [0.0; 300], &[0u32; 2])",
        apply_token_bitmask_inplace(&mut [0.0; 300], &[0u32; 2]),
        debug,
    );
    let mut ms = vec![fresh(), fresh()];
    s.add(
        "Length",
        "fill_next_token_bitmask_batch(&mut [m1, m2], &mut [0u32; 10])",
        fill_next_token_bitmask_batch(&mut ms, &mut [0u32; 10]),
        debug,
    );
    s
}

fn vocab_section() -> Section {
    let mut s = Section::new(
        "Vocabularies (`VocabError`)",
        "`Vocabulary::from_token_bytes`, `with_vocab_size`, `from_tokenizer_json` (feature \
         `hf`), `from_gguf` / `from_gguf_reader` (feature `gguf`). `TooManyTokens` (2^32 tokens or more) is not shown: it needs a 4-billion-token \
         list.",
    );
    let tokens: Vec<&[u8]> = vec![b"a", b"b"];
    s.add(
        "TokenOutOfRange",
        "from_token_bytes([\"a\", \"b\"], special: [5], stop: [])",
        Vocabulary::from_token_bytes(&tokens, &[5], &[]),
        debug,
    );
    s.add(
        "VocabSizeTooSmall",
        "from_token_bytes([\"a\", \"b\"], special: [1], stop: [1]).with_vocab_size(1)",
        Vocabulary::from_token_bytes(&tokens, &[1], &[1])
            .unwrap()
            .with_vocab_size(1),
        debug,
    );
    s.add(
        "StartFormOfSpecialToken",
        "from_token_bytes([\"a\", \"b\"], special: [1], stop: []).with_start_bytes([(1, \"x\")])",
        Vocabulary::from_token_bytes(&tokens, &[1], &[])
            .unwrap()
            .with_start_bytes([(1, b"x".as_slice())]),
        debug,
    );
    {
        let mut junk = std::io::Cursor::new(b"not a GGUF file".to_vec());
        s.add(
            "GgufRead",
            "from_gguf_reader(b\"not a GGUF file\", \"junk.gguf\")",
            Vocabulary::from_gguf_reader(&mut junk, "junk.gguf"),
            debug,
        );
        // A valid GGUF header (version 3) with no tensors and no metadata.
        let mut bare = b"GGUF".to_vec();
        bare.extend_from_slice(&3u32.to_le_bytes());
        bare.extend_from_slice(&0u64.to_le_bytes());
        bare.extend_from_slice(&0u64.to_le_bytes());
        s.add(
            "GgufMetadata",
            "from_gguf_reader(a GGUF v3 header with no metadata, \"bare.gguf\")",
            Vocabulary::from_gguf_reader(&mut std::io::Cursor::new(bare), "bare.gguf"),
            debug,
        );
    }
    {
        s.add(
            "Io",
            "from_tokenizer_json(\"/nonexistent/tokenizer.json\")",
            Vocabulary::from_tokenizer_json("/nonexistent/tokenizer.json"),
            debug,
        );
        s.add(
            "Tokenizer",
            "from_tokenizer_json_str(\"{}\", None)",
            Vocabulary::from_tokenizer_json_str("{}", None),
            debug,
        );
    }
    s
}

fn structural_tag_section() -> Section {
    let mut s = Section::new(
        "Structural tags (`CompileError::StructuralTag(StructuralTagError)`)",
        "`GrammarCompiler::compile_structural_tag`; the message gives the JSON path in the \
         tag (`format.elements[1].tags[0].begin`).",
    );
    let c = GrammarCompiler::new(vocab());
    let inner = |e: &tokensieve::CompileError| match e {
        tokensieve::CompileError::StructuralTag(t) => debug(t),
        other => debug(other),
    };
    for (kind, tag) in [
        ("Json", r#"{"type": "structural_tag", "format": "#),
        (
            "Field",
            r#"{"type": "structural_tag", "format": {"type": "bogus"}}"#,
        ),
        (
            "Field",
            r#"{"type": "structural_tag", "format": {"type": "tag", "begin": "<a>", "content": {"type": "any_text"}}}"#,
        ),
        (
            "Unsupported",
            r#"{"type": "structural_tag", "format": {"type": "exclude_token", "exclude_tokens": [1]}}"#,
        ),
        (
            "Trigger",
            r#"{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool>"], "tags": [{"type": "tag", "begin": "<f=a>", "content": {"type": "any_text"}, "end": "</f>"}]}}"#,
        ),
        (
            "Token",
            r#"{"type": "structural_tag", "format": {"type": "token", "token": 999999}}"#,
        ),
        (
            "Schema",
            r#"{"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"type": "strin"}}}"#,
        ),
        (
            "Regex",
            r#"{"type": "structural_tag", "format": {"type": "regex", "pattern": "(a"}}"#,
        ),
        (
            "Ebnf",
            r#"{"type": "structural_tag", "format": {"type": "grammar", "grammar": "root ::= \"a"}}"#,
        ),
    ] {
        s.add(kind, tag, c.compile_structural_tag(tag), inner);
    }
    s
}

fn render(sections: &[Section]) -> String {
    let mut out = String::new();
    out.push_str(
        "# Error catalogue\n\n\
         Generated by `tools/tests/api/error_catalogue.rs` (`cargo test --release -p \
         tokensieve-tools --test api error_catalogue` rewrites this file; do not edit it by hand). Every error kind a \
         user can meet: a minimal input that produces it, and the message shown (its \
         `Display`). Bad input never panics: each of these is a typed error.\n\n",
    );
    for s in sections {
        let _ = write!(out, "## {}\n\n{}\n\n", s.title, s.intro);
        out.push_str("| kind | input | message |\n|---|---|---|\n");
        for e in &s.entries {
            let cell = |t: &str| {
                let t = t.replace('|', "\\|").replace('\n', "↵");
                format!("`{}`", t.replace('`', "'"))
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} |",
                e.kind,
                cell(&e.input),
                cell(&e.message)
            );
        }
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// The tool of the tool-call sections.
fn weather() -> Tool {
    Tool::new(
        "get_weather",
        "Current weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"], "additionalProperties": false}),
    )
    .unwrap()
}

fn tool_parse_section() -> Section {
    let mut s = Section::new(
        "Tool-call parsing (`MalformedToolCall::error`, a `ToolParseError`)",
        "`ToolCallFormat::parse` and the `StreamingParser` never fail: a call they cannot \
         read is kept in `ParsedOutput::errors` as a `MalformedToolCall` with the offending \
         text and its byte offset, next to the calls that were read. Format `hermes`, one \
         tool `get_weather(city: string)`.",
    );
    let format = format_by_name("hermes").unwrap();
    let tools = [weather()];
    for (kind, text) in [
        (
            "UnknownTool",
            r#"<tool_call>{"name": "get_time", "arguments": {}}</tool_call>"#,
        ),
        (
            "InvalidName",
            r#"<tool_call>{"name": "", "arguments": {}}</tool_call>"#,
        ),
        (
            "InvalidJson",
            r#"<tool_call>{"name": "get_weather", "arguments": {"city": }}</tool_call>"#,
        ),
        (
            "Syntax",
            r#"<tool_call>{"arguments": {"city": "Paris"}}</tool_call>"#,
        ),
        (
            "Unterminated",
            r#"<tool_call>{"name": "get_weather", "arguments": {"ci"#,
        ),
    ] {
        let out = format.parse(text, &tools);
        let first = match out.errors.first() {
            Some(e) => {
                assert_eq!(&text[e.offset..e.offset + e.text.len()], e.text, "{text}");
                Err(e.error.clone())
            }
            None => Ok(out),
        };
        s.add(kind, text, first, debug);
    }
    s
}

fn tool_section() -> Section {
    let mut s = Section::new(
        "Tools (`ToolError`)",
        "`Tool::new` / `from_openai`, `ToolChoice::from_openai`, \
         `ToolCallFormat::structural_tag`, `Tool::validate_arguments` / `validate_output`, \
         `ToolCall::arguments_as`, `ToolSet::execute`, `register_format`; the tool is \
         `get_weather(city: string)`.",
    );
    s.add(
        "Definition",
        r#"Tool::new("get weather", "", {})"#,
        Tool::new("get weather", "", json!({})),
        debug,
    );
    let set = ToolSet::from_tools([weather()]).unwrap();
    let ctx = ToolContext::new();
    s.add(
        "UnknownTool",
        "ToolSet::execute(get_time({}))",
        set.execute(&ToolCall::new("get_time", json!({})), &ctx),
        debug,
    );
    s.add(
        "Choice",
        r#"ToolChoice::from_openai("sometimes")"#,
        ToolChoice::from_openai(&json!("sometimes")),
        debug,
    );
    let odd = Tool::new(
        "lookup",
        "",
        json!({"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}}}),
    )
    .unwrap();
    s.add(
        "Unsupported",
        r#"format pythonic: structural_tag for a tool with {"pattern": "^[a-z]+$"} on a string"#,
        format_by_name("pythonic")
            .unwrap()
            .structural_tag(&[odd], &ToolChoice::Auto, true),
        debug,
    );
    s.add(
        "InvalidArguments",
        r#"validate_arguments({"city": 5})"#,
        weather().validate_arguments(&json!({"city": 5})),
        debug,
    );
    s.add(
        "InvalidOutput",
        r#"validate_output("sunny") with output schema {"type": "object"}"#,
        weather()
            .with_output_schema(json!({"type": "object"}))
            .validate_output(&json!("sunny")),
        debug,
    );
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Args {
        city: String,
    }
    s.add(
        "Deserialize",
        r#"get_weather({"town": "Paris"}).arguments_as::<{ city: String }>()"#,
        ToolCall::new("get_weather", json!({"town": "Paris"})).arguments_as::<Args>(),
        debug,
    );
    let paris = ToolCall::new("get_weather", json!({"city": "Paris"}));
    s.add(
        "NotExecutable",
        r#"ToolSet::execute(get_weather({"city": "Paris"})), a tool without a function"#,
        set.execute(&paris, &ctx),
        debug,
    );
    let failing = ToolSet::from_tools([
        weather().with_function(|_, _| Err("the weather service is down".to_string()))
    ])
    .unwrap();
    s.add(
        "Execution",
        r#"ToolSet::execute(get_weather(..)), its function returns Err("the weather service is down")"#,
        failing.execute(&paris, &ctx),
        debug,
    );
    for (name, registered) in [
        ("DuplicateFormat", "hermes"),
        ("InvalidFormatName", "Hermes"),
    ] {
        let hermes = |_: &FormatOptions| format_by_name("hermes").unwrap();
        let call = format!("register_format({registered:?}, ..)");
        s.add(name, &call, register_format(registered, hermes), debug);
    }
    s
}

#[test]
fn error_catalogue_is_current() {
    let sections = vec![
        ebnf_section(),
        ir_section(),
        compile_section(),
        limits_section(),
        regex_section(),
        json_schema_section(),
        matcher_section(),
        vocab_section(),
        structural_tag_section(),
        tool_parse_section(),
        tool_section(),
    ];
    let text = render(&sections);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/errors.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    if old != text {
        if common::in_ci() {
            panic!(
                "docs/errors.md is stale: run `cargo test --release -p tokensieve-tools --test api error_catalogue` \
                 and commit the result"
            );
        }
        std::fs::write(&path, &text).expect("write docs/errors.md");
        eprintln!("docs/errors.md regenerated");
    }
}
