//! Random walks over real vocabularies: from a fresh matcher, sample any allowed token
//! (seeded) until a stop token is accepted. Steps are capped, and after a number of steps the
//! walk prefers the stop token and a few "closing" tokens, so that walks finish.
//!
//! * At every step the invariant mask ⇔ accept is checked on a sample: every token whose bit
//!   is set, plus 2,000 random ids.
//! * A finished JSON walk must parse with `serde_json`.
//! * A finished EBNF walk must be accepted by the independent oracle (`tests/soundness/oracle.rs`), and by
//!   the `regex` crate where the grammar is regular (an equivalent regex is given).
//!
//! Vocabularies: Llama 3.1 and Qwen3 (`../shared/tokenizers`) and the embedded o200k_base.
//! Run with `cargo test --release --test soundness random_walks::`.

use crate::common;
use crate::oracle;

use common::check_some_tokens;
use oracle::{Oracle, Sym};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Vocabulary};

/// A vocabulary under test, with a non-stop special token of it.
struct Target {
    vocab: Arc<Vocabulary>,
    compiler: GrammarCompiler,
    special: &'static str,
}

impl Target {
    #[allow(dead_code)] // unused when both tokenizer features are off
    fn new(name: &'static str, vocab: Vocabulary, special: &'static str) -> Target {
        let vocab = Arc::new(vocab);
        assert!(!vocab.stop_tokens().is_empty(), "{name}: no stop token");
        let sp = vocab
            .special_token_id(special)
            .unwrap_or_else(|| panic!("{name}: no special token {special}"));
        assert!(!vocab.is_stop_token(sp));
        Target {
            compiler: GrammarCompiler::new(vocab.clone()),
            vocab,
            special,
        }
    }
}

#[cfg(feature = "hf")]
fn hf_target(name: &'static str, special: &'static str) -> Option<Target> {
    let path = common::tokenizer_path(name)?;
    Some(Target::new(
        name,
        Vocabulary::from_tokenizer_json(&path).unwrap(),
        special,
    ))
}

fn target(name: &str) -> Option<&'static Target> {
    static LLAMA: OnceLock<Option<Target>> = OnceLock::new();
    static QWEN: OnceLock<Option<Target>> = OnceLock::new();
    static O200K: OnceLock<Option<Target>> = OnceLock::new();
    match name {
        #[cfg(feature = "hf")]
        "llama3_1" => LLAMA
            .get_or_init(|| hf_target("llama3_1", "<|start_header_id|>"))
            .as_ref(),
        #[cfg(feature = "hf")]
        "qwen3" => QWEN
            .get_or_init(|| hf_target("qwen3", "<|im_start|>"))
            .as_ref(),
        #[cfg(feature = "tiktoken")]
        "o200k_base" => O200K
            .get_or_init(|| {
                Some(Target::new(
                    "o200k_base",
                    Vocabulary::o200k_base().unwrap(),
                    "<|endofprompt|>",
                ))
            })
            .as_ref(),
        _ => {
            let _ = (&LLAMA, &QWEN, &O200K);
            eprintln!("skipping: {name} needs a feature that is off");
            None
        }
    }
}

/// How a walk is steered towards its end.
#[derive(Clone, Copy)]
struct Steer {
    /// Steps at most.
    max_steps: usize,
    /// From this step on, prefer the stop token and the closers.
    bias_after: usize,
    /// Token texts preferred after `bias_after` (when allowed), such as `"` `}` `]`.
    closers: &'static [&'static str],
}

/// The outcome of one walk.
struct Walk {
    /// Accepted ids, the stop token excluded.
    ids: Vec<u32>,
    terminated: bool,
}

fn show(vocab: &Vocabulary, ids: &[u32]) -> String {
    let b = vocab.decode_bytes(ids);
    let s = String::from_utf8_lossy(&b[b.len().saturating_sub(120)..]).into_owned();
    format!("{}{s:?}", if b.len() > 120 { "…" } else { "" })
}

/// One random walk; the invariant is checked at every step. Failures go to `failures`.
fn walk(
    t: &Target,
    compiled: &Arc<CompiledGrammar>,
    steer: Steer,
    rng: &mut StdRng,
    label: &str,
    failures: &mut Vec<String>,
) -> Option<Walk> {
    let vocab = &t.vocab;
    let width = vocab.vocab_size() as u32;
    let mut m = GrammarMatcher::new(compiled.clone());
    let mut ids = Vec::new();
    for step in 0..steer.max_steps {
        let extra: Vec<u32> = (0..2000).map(|_| rng.gen_range(0..width)).collect();
        let (allowed, bad) = check_some_tokens(&m, vocab, &extra);
        if !bad.is_empty() {
            for b in bad.iter().take(5) {
                failures.push(format!(
                    "[{label}] step {step} after {}: {b}",
                    show(vocab, &ids)
                ));
            }
            return None;
        }
        // `allowed` holds every token whose bit is set (all accepted, as checked above).
        if allowed.is_empty() {
            failures.push(format!(
                "[{label}] step {step}: dead end, nothing allowed after {}",
                show(vocab, &ids)
            ));
            return None;
        }
        let stops: Vec<u32> = allowed
            .iter()
            .copied()
            .filter(|&x| vocab.is_stop_token(x))
            .collect();
        let late = step >= steer.bias_after;
        let pick = if late && !stops.is_empty() && rng.gen_bool(0.8) {
            stops[0]
        } else {
            let closers: Vec<u32> = if late {
                allowed
                    .iter()
                    .copied()
                    .filter(|&x| {
                        let b = vocab.token_bytes(x).unwrap_or(&[]);
                        steer.closers.iter().any(|c| c.as_bytes() == b)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            if !closers.is_empty() && rng.gen_bool(0.8) {
                closers[rng.gen_range(0..closers.len())]
            } else {
                let mut x = allowed[rng.gen_range(0..allowed.len())];
                // Early on, end only sometimes (the stop token is one id among many).
                if vocab.is_stop_token(x)
                    && !late
                    && allowed.len() > stops.len()
                    && rng.gen_bool(0.7)
                {
                    while vocab.is_stop_token(x) {
                        x = allowed[rng.gen_range(0..allowed.len())];
                    }
                }
                x
            }
        };
        if let Err(e) = m.try_accept_token(pick) {
            failures.push(format!(
                "[{label}] step {step}: allowed token {pick} rejected: {e} after {}",
                show(vocab, &ids)
            ));
            return None;
        }
        if vocab.is_stop_token(pick) {
            if !m.is_terminated() {
                failures.push(format!("[{label}] stop token accepted but not terminated"));
            }
            return Some(Walk {
                ids,
                terminated: true,
            });
        }
        ids.push(pick);
    }
    Some(Walk {
        ids,
        terminated: false,
    })
}

/// The walk's output as oracle symbols: bytes, and special tokens as tokens.
fn to_syms(vocab: &Vocabulary, ids: &[u32]) -> Vec<Sym> {
    let mut out = Vec::new();
    for &id in ids {
        if vocab.is_special(id) {
            out.push(Sym::Token(id));
        } else {
            out.extend(vocab.token_bytes(id).unwrap().iter().map(|&b| Sym::Byte(b)));
        }
    }
    out
}

/// Special tokens stand for this private-use character in texts given to `regex`.
const SPECIAL_CHAR: char = '\u{E000}';

/// The walk's output as a string for `regex` (special tokens as [`SPECIAL_CHAR`]); `None`
/// if the bytes are not UTF-8.
fn to_regex_text(vocab: &Vocabulary, ids: &[u32]) -> Option<String> {
    let mut bytes = Vec::new();
    for &id in ids {
        if vocab.is_special(id) {
            let mut buf = [0u8; 4];
            bytes.extend_from_slice(SPECIAL_CHAR.encode_utf8(&mut buf).as_bytes());
        } else {
            bytes.extend_from_slice(vocab.token_bytes(id).unwrap());
        }
    }
    String::from_utf8(bytes).ok()
}

struct Stats {
    walks: usize,
    terminated: usize,
    steps: usize,
    bytes: usize,
}

// ---------------------------------------------------------------------------------------
// JSON.

fn json_walks(name: &str, walks: usize, seed: u64) {
    let started = Instant::now();
    let Some(t) = target(name) else { return };
    let compiled = t.compiler.compile_builtin_json().unwrap();
    let steer = Steer {
        max_steps: 160,
        bias_after: 40,
        closers: &["\"", "}", "]", "0", ":", "1", "\"}", "\"]", "}}", "]}"],
    };
    // The built-in grammar allows any four hex digits after `\u` (as the RFC's grammar
    // does); serde_json rejects lone surrogates. Replacing each surrogate escape by `\u0041`
    // keeps valid JSON valid and invalid JSON invalid.
    let surrogate = regex::Regex::new(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}").unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut failures = Vec::new();
    let mut st = Stats {
        walks: 0,
        terminated: 0,
        steps: 0,
        bytes: 0,
    };
    for w in 0..walks {
        let label = format!("{name} json walk {w}");
        let Some(walk) = walk(t, &compiled, steer, &mut rng, &label, &mut failures) else {
            continue;
        };
        st.walks += 1;
        st.steps += walk.ids.len();
        let bytes = t.vocab.decode_bytes(&walk.ids);
        st.bytes += bytes.len();
        if !walk.terminated {
            continue;
        }
        st.terminated += 1;
        let text = match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("[{label}] terminated with invalid UTF-8: {e}"));
                continue;
            }
        };
        let fixed = surrogate.replace_all(&text, r"\u0041");
        // serde_json refuses numbers past f64 (`1e999`), which JSON allows: those texts are
        // checked for syntax only (`IgnoredAny` skips numbers without converting them).
        let parsed = serde_json::from_str::<serde_json::Value>(&fixed)
            .map(|_| ())
            .or_else(|e| {
                if e.to_string().contains("number out of range") {
                    serde_json::from_str::<serde::de::IgnoredAny>(&fixed).map(|_| ())
                } else {
                    Err(e)
                }
            });
        if let Err(e) = parsed {
            failures.push(format!("[{label}] serde_json rejects {text:?}: {e}"));
        }
    }
    finish(&format!("{name} JSON"), st, failures, started);
}

fn finish(what: &str, st: Stats, failures: Vec<String>, started: Instant) {
    eprintln!(
        "{what}: {} walks, {} terminated, {} tokens, {} bytes, {:.1} s",
        st.walks,
        st.terminated,
        st.steps,
        st.bytes,
        started.elapsed().as_secs_f64()
    );
    if !failures.is_empty() {
        let shown: Vec<&str> = failures.iter().take(40).map(|s| s.as_str()).collect();
        panic!("{what}: {} failures:\n{}", failures.len(), shown.join("\n"));
    }
    assert!(
        st.terminated * 2 >= st.walks,
        "{what}: only {} of {} walks terminated",
        st.terminated,
        st.walks
    );
}

// ---------------------------------------------------------------------------------------
// EBNF grammars.

struct Case {
    name: &'static str,
    /// `{SP}` stands for the target's special token.
    grammar: &'static str,
    /// An equivalent regex over the text (special tokens as U+E000), for regular grammars.
    regex: Option<&'static str>,
    steer: Steer,
    walks: usize,
}

const fn steer(max_steps: usize, bias_after: usize, closers: &'static [&'static str]) -> Steer {
    Steer {
        max_steps,
        bias_after,
        closers,
    }
}

const CASES: &[Case] = &[
    Case {
        name: "left-recursive arithmetic",
        grammar: r#"root ::= expr
expr ::= expr "+" term | expr "-" term | term
term ::= term "*" factor | factor
factor ::= "(" expr ")" | [0-9]+"#,
        regex: None,
        steer: steer(40, 10, &[")", "1", "7"]),
        walks: 12,
    },
    Case {
        name: "bounded repetition",
        grammar: r#"root ::= [a-z]{2,5} ("-" [0-9]{3})? ("," [a-z]{2,5})*"#,
        regex: Some(r"^[a-z]{2,5}(-[0-9]{3})?(,[a-z]{2,5})*$"),
        steer: steer(40, 8, &["1", "0"]),
        walks: 12,
    },
    Case {
        name: "large repetition",
        grammar: r#"root ::= [a-z]{2,20000} "!"?"#,
        regex: Some(r"^[a-z]{2,20000}!?$"),
        steer: steer(60, 30, &["!"]),
        walks: 6,
    },
    Case {
        name: "CJK and emoji classes",
        grammar: r#"root ::= ([一-龥] | [\U0001F600-\U0001F64F] | " ")+ "。"?"#,
        regex: Some(r"^([一-龥]|[\x{1F600}-\x{1F64F}]| )+。?$"),
        steer: steer(40, 10, &["。"]),
        walks: 12,
    },
    Case {
        name: "nullable nested stars",
        grammar: r#"root ::= (("a"*)*)* "b" | ("a" | "aa")* "c""#,
        regex: Some(r"^(((a*)*)*b|(a|aa)*c)$"),
        steer: steer(30, 6, &["b", "c"]),
        walks: 12,
    },
    Case {
        name: "ambiguous grammar",
        grammar: r#"root ::= s
s ::= s s | "a" | "b" | "(" s ")" | s "" "#,
        regex: None,
        steer: steer(40, 10, &[")", "a"]),
        walks: 12,
    },
    Case {
        name: "string with escapes",
        grammar: r#"root ::= "\"" ( [^"\\] | "\\" ["\\nt] )* "\"""#,
        regex: Some(r#"^"([^"\\]|\\["\\nt])*"$"#),
        steer: steer(40, 10, &["\""]),
        walks: 8,
    },
    Case {
        name: "special-token terminal",
        grammar: r#"root ::= "hi" {SP} [a-z ]{0,10} {SP}? "."?"#,
        regex: Some(r"^hi\x{E000}[a-z ]{0,10}\x{E000}?\.?$"),
        steer: steer(20, 5, &["."]),
        walks: 12,
    },
    Case {
        name: "GBNF JSON-ish list",
        grammar: r#"root ::= list
list ::= "[" ws ( item ( ws "," ws item )* )? ws "]"
item ::= string | number | "true" | "null" | list
string ::= "\"" [a-z ]* "\""
number ::= "-"? [0-9]{1,4}
ws ::= [ \n]?"#,
        regex: None,
        steer: steer(40, 12, &["]", "\"", "0", "\"]"]),
        walks: 10,
    },
    Case {
        name: "words and punctuation",
        grammar: r#"root ::= word (" " word){0,4} [.!?]
word ::= [A-Za-z']{1,12}"#,
        regex: Some(r"^[A-Za-z']{1,12}( [A-Za-z']{1,12}){0,4}[.!?]$"),
        steer: steer(30, 8, &[".", "!"]),
        walks: 12,
    },
    Case {
        name: "key-value lines with comments and escapes",
        grammar: r#"# key=value lines
root ::= line{1,3}    # at most three
line ::= [a-z_]{1,8} "\x3d" ( "\"" [^"\\\n]{0,12} "\"" | [0-9]{1,3} ) "\n"   # \x3d is '='"#,
        regex: Some(r#"^([a-z_]{1,8}=("[^"\\\n]{0,12}"|[0-9]{1,3})\n){1,3}$"#),
        steer: steer(40, 10, &["\"\n", "\n", "\"", "1"]),
        walks: 10,
    },
];

fn ebnf_walks(name: &str, seed: u64) {
    let started = Instant::now();
    let Some(t) = target(name) else { return };
    let vocab = &t.vocab;
    let text_to_id = |s: &str| vocab.special_token_id(s);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut failures = Vec::new();
    let mut st = Stats {
        walks: 0,
        terminated: 0,
        steps: 0,
        bytes: 0,
    };
    for c in CASES {
        let src = c.grammar.replace("{SP}", t.special);
        let compiled = match t.compiler.compile_grammar(&src) {
            Ok(g) => g,
            Err(e) => {
                failures.push(format!("[{name} `{}`] does not compile: {e}", c.name));
                continue;
            }
        };
        let re = c.regex.map(|r| regex::Regex::new(r).unwrap());
        let mut terminated = 0;
        for w in 0..c.walks {
            let label = format!("{name} `{}` walk {w}", c.name);
            let Some(walk) = walk(t, &compiled, c.steer, &mut rng, &label, &mut failures) else {
                continue;
            };
            st.walks += 1;
            st.steps += walk.ids.len();
            st.bytes += vocab.decode_bytes(&walk.ids).len();
            if !walk.terminated {
                continue;
            }
            st.terminated += 1;
            terminated += 1;
            let syms = to_syms(vocab, &walk.ids);
            if !Oracle::accepts(compiled.grammar(), &syms, &text_to_id) {
                failures.push(format!(
                    "[{label}] the oracle rejects {} (ids {:?})",
                    show(vocab, &walk.ids),
                    walk.ids
                ));
            }
            if let Some(re) = &re {
                match to_regex_text(vocab, &walk.ids) {
                    Some(text) if re.is_match(&text) => {}
                    Some(text) => failures.push(format!(
                        "[{label}] the regex {} rejects {text:?} (ids {:?})",
                        re.as_str(),
                        walk.ids
                    )),
                    None => failures.push(format!(
                        "[{label}] terminated with invalid UTF-8 {} (ids {:?})",
                        show(vocab, &walk.ids),
                        walk.ids
                    )),
                }
            }
        }
        if terminated == 0 {
            failures.push(format!("[{name} `{}`] no walk terminated", c.name));
        }
    }
    finish(&format!("{name} EBNF"), st, failures, started);
}

/// The regexes agree with the grammars on hand-picked texts (a check of the test itself).
#[test]
fn regexes_match_their_grammars() {
    let yes: &[(&str, &[&str])] = &[
        ("bounded repetition", &["ab", "abcde-123", "ab,cd,efghi"]),
        ("large repetition", &["ab", "zz!"]),
        ("CJK and emoji classes", &["中文 😀", " 。"]),
        ("nullable nested stars", &["b", "aab", "c", "aaac"]),
        ("string with escapes", &[r#""""#, r#""a\"b\\c\n\t é""#]),
        (
            "special-token terminal",
            &["hi\u{E000}", "hi\u{E000}ab c\u{E000}."],
        ),
        ("words and punctuation", &["Hi.", "don't stop me now!"]),
        (
            "key-value lines with comments and escapes",
            &["a=1\n", "ab=\"x y\"\nc=\"\"\n"],
        ),
    ];
    let no: &[(&str, &[&str])] = &[
        ("bounded repetition", &["a", "abcdef", "ab-12", "ab,"]),
        ("nullable nested stars", &["", "ba", "aabc", "abc"]),
        ("string with escapes", &[r#""\q""#, r#""a"b""#]),
        (
            "key-value lines with comments and escapes",
            &["a=1\nb=2\nc=3\nd=4\n", "a=1"],
        ),
    ];
    for (expect, table) in [(true, yes), (false, no)] {
        for (name, texts) in table {
            let c = CASES.iter().find(|c| c.name == *name).unwrap();
            let re = regex::Regex::new(c.regex.unwrap()).unwrap();
            for text in *texts {
                assert_eq!(re.is_match(text), expect, "{name}: {text:?}");
            }
        }
    }
}

#[test]
fn json_llama3_1() {
    json_walks("llama3_1", 20, 1);
}

#[test]
fn json_qwen3() {
    json_walks("qwen3", 20, 2);
}

#[test]
fn json_o200k_base() {
    json_walks("o200k_base", 20, 3);
}

#[test]
fn ebnf_llama3_1() {
    ebnf_walks("llama3_1", 11);
}

#[test]
fn ebnf_qwen3() {
    ebnf_walks("qwen3", 12);
}

#[test]
fn ebnf_o200k_base() {
    ebnf_walks("o200k_base", 13);
}
