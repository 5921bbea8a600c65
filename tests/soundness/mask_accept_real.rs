//! Mask ⇔ accept, exhaustively over real vocabularies.
//!
//! Texts are teacher-forced through a matcher token by token. At the sampled steps (the first
//! and last ones, and every k-th in between) EVERY token id `0..vocab_size` is checked: its
//! mask bit must equal `accept_token` on a fork of the matcher (rolled back after each
//! success), and the bits past `vocab_size` must be clear. At the end the stop token must be
//! allowed and accepted, and the matcher terminated, after which nothing is allowed.
//!
//! Inputs: valid instances of JSONSchemaBench (`../shared/testdata/jsonschemabench`) through
//! the built-in JSON grammar, and EBNF grammars with matching texts (left recursion, Unicode
//! classes, bounded and large repetition, special-token terminals, nested stars, ambiguity,
//! GBNF-style lists, escapes and comments), on every tokenizer in `../shared/tokenizers`
//! that the `tokenizers` crate reads. Disagreements are collected and reported together.
//!
//! Run with `cargo test --release --test soundness mask_accept_real::`.
#![cfg(feature = "hf")]

use crate::common;

use common::{check_all_tokens, Piece, RealTokenizer};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::io::BufRead;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tokensieve::{CompiledGrammar, GrammarMatcher, Precompute};

/// Every tokenizer folder that the `tokenizers` crate reads, with a non-stop special token
/// of its vocabulary and how densely steps are sampled (1.0 = the full budget).
const TOKENIZERS: &[(&str, &str, f64)] = &[
    ("llama3_1", "<|start_header_id|>", 1.0),
    ("qwen3", "<|im_start|>", 1.0),
    ("llama2", "<s>", 1.0),
    ("gemma3", "<start_of_turn>", 1.0),
    ("deepseek_v3", "<｜place▁holder▁no▁0｜>", 0.5),
    ("gptoss", "<|channel|>", 0.5),
];

/// Loads each tokenizer once per test binary (tests run in parallel threads).
fn real(name: &str) -> Option<&'static RealTokenizer> {
    static CACHE: [OnceLock<Option<RealTokenizer>>; 6] = [const { OnceLock::new() }; 6];
    let i = TOKENIZERS.iter().position(|t| t.0 == name).unwrap();
    CACHE[i].get_or_init(|| RealTokenizer::load(name)).as_ref()
}

/// Collected disagreements and failures of one test.
#[derive(Default)]
struct Report {
    failures: Vec<String>,
    exhaustive_steps: usize,
    tokens_checked: usize,
    forced_tokens: usize,
    texts: usize,
}

impl Report {
    fn fail(&mut self, msg: String) {
        self.failures.push(msg);
    }

    fn finish(self, what: &str, started: Instant) {
        eprintln!(
            "{what}: {} texts, {} tokens forced, {} exhaustive steps, {} (token, state) pairs \
             checked, {:.1} s",
            self.texts,
            self.forced_tokens,
            self.exhaustive_steps,
            self.tokens_checked,
            started.elapsed().as_secs_f64()
        );
        if !self.failures.is_empty() {
            let n = self.failures.len();
            let shown: Vec<&str> = self.failures.iter().take(60).map(|s| s.as_str()).collect();
            panic!("{what}: {n} failures:\n{}", shown.join("\n"));
        }
    }
}

fn tail(bytes: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(n)..]).into_owned();
    format!("{s:?}")
}

/// Teacher-forces `ids` then the stop token; checks all tokens at the chosen steps.
fn teacher_force(
    rt: &RealTokenizer,
    compiled: &Arc<CompiledGrammar>,
    ids: &[u32],
    max_checks: usize,
    rng: &mut StdRng,
    label: &str,
    report: &mut Report,
) {
    let vocab = &rt.vocab;
    let n = ids.len();
    let k = n.div_ceil(max_checks.max(1)).max(1);
    let phase = rng.gen_range(0..k);
    let mut m = GrammarMatcher::new(compiled.clone());
    let mut mask = vec![0u32; m.bitmask_words()];
    report.texts += 1;
    let before_failures = report.failures.len();
    for (i, &id) in ids.iter().enumerate() {
        let prefix = vocab.decode_bytes(&ids[..i]);
        let exhaustive = i == 0 || i + 2 >= n || (i + phase) % k == 0;
        if exhaustive {
            let (allowed, bad) = check_all_tokens(&m, vocab);
            report.exhaustive_steps += 1;
            report.tokens_checked += vocab.vocab_size();
            for b in bad.iter().take(8) {
                report.fail(format!(
                    "[{label}] step {i}/{n} after …{}: {b}",
                    tail(&prefix, 40)
                ));
            }
            if bad.len() > 8 {
                report.fail(format!("[{label}] step {i}: … {} more", bad.len() - 8));
            }
            if !allowed.contains(&id) && bad.is_empty() {
                report.fail(format!(
                    "[{label}] step {i}/{n} after …{}: the text's token {id} {:?} is not allowed",
                    tail(&prefix, 40),
                    String::from_utf8_lossy(vocab.token_bytes(id).unwrap_or(b"?"))
                ));
            }
        } else {
            m.fill_next_token_bitmask(&mut mask).unwrap();
            if !tokensieve::mask::is_token_allowed(&mask, id) {
                report.fail(format!(
                    "[{label}] step {i}/{n} after …{}: mask bit of the text's token {id} {:?} is clear",
                    tail(&prefix, 40),
                    String::from_utf8_lossy(vocab.token_bytes(id).unwrap_or(b"?"))
                ));
            }
        }
        if let Err(e) = m.try_accept_token(id) {
            report.fail(format!(
                "[{label}] step {i}/{n} after …{}: text token rejected: {e}",
                tail(&prefix, 40)
            ));
            return;
        }
        report.forced_tokens += 1;
        if report.failures.len() > before_failures + 40 {
            report.fail(format!("[{label}] giving up on this text"));
            return;
        }
    }
    // The end: exhaustive once more, the stop token allowed and accepted.
    let stop = rt.stop();
    let (allowed, bad) = check_all_tokens(&m, vocab);
    report.exhaustive_steps += 1;
    report.tokens_checked += vocab.vocab_size();
    for b in bad.iter().take(8) {
        report.fail(format!("[{label}] at the end (step {n}): {b}"));
    }
    // A text ending with a stop token that the grammar names, where nothing else could
    // follow, has already terminated the matcher: no second stop token is needed.
    if m.is_terminated() {
        if !allowed.is_empty() {
            report.fail(format!(
                "[{label}] terminated by its last token, yet tokens are allowed"
            ));
        }
    } else {
        if !allowed.contains(&stop) {
            report.fail(format!(
                "[{label}] at the end: the stop token {stop} is not allowed"
            ));
        }
        if !m.is_completed() {
            report.fail(format!("[{label}] at the end: is_completed() is false"));
        }
        match m.try_accept_token(stop) {
            Ok(()) => {}
            Err(e) => {
                report.fail(format!("[{label}] at the end: stop token rejected: {e}"));
                return;
            }
        }
        if !m.is_terminated() {
            report.fail(format!(
                "[{label}] after the stop token: is_terminated() is false"
            ));
        }
    }
    // After termination every bit is clear and every token is rejected.
    let (allowed, bad) = check_all_tokens(&m, vocab);
    if !allowed.is_empty() || !bad.is_empty() {
        report.fail(format!(
            "[{label}] after termination: {} tokens allowed, {} disagreements (first: {:?})",
            allowed.len(),
            bad.len(),
            bad.first().map(|b| b.to_string())
        ));
    }
}

// ---------------------------------------------------------------------------------------
// JSON documents from JSONSchemaBench.

/// Valid instances from every JSONSchemaBench collection (a few per collection, chosen with
/// `seed`), serialised compactly or pretty-printed, between 2 and `max_len` bytes.
fn json_documents(seed: u64, per_collection: usize, max_len: usize) -> Option<Vec<String>> {
    let dir = common::testdata_path("jsonschemabench")?;
    let mut collections: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    collections.sort();
    assert!(collections.len() >= 20, "{} collections", collections.len());
    let mut rng = StdRng::seed_from_u64(seed);
    let mut docs = Vec::new();
    for c in collections {
        let name = c.file_name().unwrap().to_string_lossy().into_owned();
        let file = c.join(format!("{name}.jsonl.gz"));
        let f = std::fs::File::open(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(f));
        let mut candidates = Vec::new();
        // The first 60 records of each collection are plenty to choose from.
        for line in reader.lines().take(60) {
            let line = line.unwrap();
            let rec: serde_json::Value = serde_json::from_str(&line).unwrap();
            for t in rec["tests"].as_array().into_iter().flatten() {
                if t["valid"] == serde_json::Value::Bool(true) {
                    candidates.push(t["data"].clone());
                }
            }
        }
        let mut picked = 0;
        let mut tries = 0;
        while picked < per_collection && tries < 50 && !candidates.is_empty() {
            tries += 1;
            let v = &candidates[rng.gen_range(0..candidates.len())];
            let text = if rng.gen_bool(0.5) {
                serde_json::to_string(v).unwrap()
            } else {
                serde_json::to_string_pretty(v).unwrap()
            };
            if text.len() >= 2 && text.len() <= max_len {
                docs.push(text);
                picked += 1;
            }
        }
    }
    // Hand-written extras: escapes, Unicode, numbers at the edges, surrounding whitespace.
    docs.push(
        r#"{"a":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00","b":[-0,0.5e-10,1E+2,-12.75],"c":{}}"#.into(),
    );
    docs.push(" \n\t[ [], {}, \"日本語 🦀\", true , false,null ] \r\n".into());
    docs.push("-0.0e0".into());
    Some(docs)
}

fn json_test(name: &str) {
    let started = Instant::now();
    let Some(&(_, _, density)) = TOKENIZERS.iter().find(|t| t.0 == name) else {
        unreachable!()
    };
    let Some(rt) = real(name) else { return };
    let seed = TOKENIZERS.iter().position(|t| t.0 == name).unwrap() as u64;
    let Some(docs) = json_documents(seed, 2, 3000) else {
        return;
    };
    // Masks filled in the background after compile, and by the matcher where the fill
    // has not reached yet.
    let compiled = (rt.compiler.clone())
        .with_precompute(Precompute::Background)
        .compile_builtin_json()
        .unwrap();
    let mut rng = StdRng::seed_from_u64(1000 + seed);
    let mut report = Report::default();
    let max_checks = (12.0 * density).round() as usize;
    for (d, doc) in docs.iter().enumerate() {
        // Every document must be valid JSON (the oracle for the data itself).
        serde_json::from_str::<serde_json::Value>(doc).unwrap();
        let ids = rt.encode_exact(doc);
        let short: String = doc.chars().take(60).collect();
        let label = format!("{name} json doc {d} {short:?}");
        teacher_force(
            rt,
            &compiled,
            &ids,
            max_checks,
            &mut rng,
            &label,
            &mut report,
        );
    }
    report.finish(&format!("{name} JSON"), started);
}

// ---------------------------------------------------------------------------------------
// EBNF grammars with matching texts.

/// A text piece of a case, before the tokenizer-specific placeholders are filled in.
#[derive(Clone)]
enum P {
    /// Text (placeholders `{SP}` / `{STOP}` replaced), through the tokenizer.
    T(String),
    /// The special token `{SP}` or the stop token `{STOP}`, as one token.
    Sp,
    Stop,
    /// A token by its exact text (special or ordinary).
    Tok(String),
    /// Text tokenised greedily over ordinary tokens only.
    Plain(String),
}

fn t(s: &str) -> Vec<P> {
    vec![P::T(s.to_string())]
}

struct Case {
    name: &'static str,
    /// EBNF with placeholders `{SP}` (the tokenizer's non-stop special token) and `{STOP}`
    /// (its stop token).
    grammar: String,
    texts: Vec<Vec<P>>,
    /// Exhaustive checks per text, at most (before the tokenizer's density).
    checks: usize,
    /// Only for the tokenizer of this name.
    only: Option<&'static str>,
}

fn case(name: &'static str, grammar: &str, texts: Vec<Vec<P>>, checks: usize) -> Case {
    Case {
        name,
        grammar: grammar.to_string(),
        texts,
        checks,
        only: None,
    }
}

/// Exactly `n` letters a-z, word-like (so that BPE uses long tokens as well as short ones).
fn letters(n: usize, seed: u64) -> String {
    const WORDS: &[&str] = &[
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dog",
        "constrained",
        "decoding",
        "grammar",
        "token",
        "mask",
        "x",
        "qz",
        "zzz",
        "abcdefghij",
        "matcher",
    ];
    let mut rng = StdRng::seed_from_u64(seed);
    let mut s = String::with_capacity(n + 16);
    while s.len() < n {
        s.push_str(WORDS[rng.gen_range(0..WORDS.len())]);
    }
    s.truncate(n);
    s
}

fn cases() -> Vec<Case> {
    let mut v = vec![
        case(
            "left-recursive arithmetic",
            r#"root ::= expr
expr ::= expr "+" term | expr "-" term | term
term ::= term "*" factor | term "/" factor | factor
factor ::= "(" expr ")" | [0-9]+ | "-" factor | " " factor"#,
            vec![
                t("1+2*3"),
                t("(12+345)*6789-10/(11-(12))"),
                t("((((1))))+ -2* 3"),
                t("1000000+2000000*3000000"),
            ],
            40,
        ),
        case(
            "CJK class",
            r#"root ::= [一-龥]+ ("，" [一-龥]+)* "。"?"#,
            vec![t("中文文本，测试一下。"), t("你好世界"), t("龥一，丁")],
            40,
        ),
        case(
            "emoji range",
            r#"root ::= ([\U0001F600-\U0001F64F] | " ")+ "!"?"#,
            vec![t("😀😃 😄🙏😐"), t("🙂 🙃!"), t("😀")],
            40,
        ),
        case(
            "non-ASCII class (partial UTF-8 tokens)",
            r#"root ::= [^\x00-\x7F]+"#,
            vec![t("日本語のテキスト🦀ñé€𝔘"), t("ꙮ𓀀½")],
            40,
        ),
        case(
            "bounded repetition",
            r#"root ::= item ("," item)*
item ::= [a-z]{2,5} "-" [0-9]{3} ("/" [A-Z]{1})?"#,
            vec![
                t("abc-123,de-456,hello-789/X"),
                t("zz-000"),
                t("abcde-999,ab-100/Q"),
            ],
            40,
        ),
        case(
            "large bounded repetition {2,20000}",
            r#"root ::= [a-z]{2,20000}"#,
            vec![t(&letters(3000, 1)), t(&letters(20000, 2)), t("ab")],
            24,
        ),
        case(
            "special-token terminal",
            r#"root ::= "hi" {SP} " there" ("!" | {SP})*"#,
            vec![
                vec![P::T("hi".into()), P::Sp, P::T(" there".into())],
                vec![
                    P::T("hi".into()),
                    P::Sp,
                    P::T(" there!".into()),
                    P::Sp,
                    P::T("!".into()),
                ],
            ],
            40,
        ),
        case(
            "stop token as a terminal",
            r#"root ::= "ok" {STOP} ("." {STOP})?"#,
            vec![
                vec![P::T("ok".into()), P::Stop],
                vec![P::T("ok".into()), P::Stop, P::T(".".into()), P::Stop],
            ],
            40,
        ),
        case(
            "literal spelled like a special token",
            r#"root ::= "say " "{SP}" " ok""#,
            vec![vec![P::Plain("say {SP} ok".into())]],
            40,
        ),
        case(
            "nullable nested stars",
            r#"root ::= (("a"*)*)* "b" | ("a" | "aa")* "c" | (("x"?)*)*"#,
            vec![
                t("aaaab"),
                t("b"),
                t("aaaaac"),
                t("c"),
                t("xxxx"),
                t("aab"),
                t(""),
            ],
            40,
        ),
        case(
            "ambiguous grammar",
            r#"root ::= s
s ::= s s | "a" | "b" | "(" s ")" | s "" | "ab""#,
            vec![t("ab(ba)(a(b))aaa"), t("abababab"), t("((((a))))b")],
            40,
        ),
        case(
            "GBNF JSON-ish list",
            r#"root ::= list
list ::= "[" ws ( item ( ws "," ws item )* )? ws "]"
item ::= string | number | "true" | "false" | "null" | list
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( [0-9] | [1-9] [0-9]{1,15} ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= | " " | "\n" [ \t]{0,20}"#,
            vec![
                t(r#"["a", 1, [true, null], "x\"y\\z", -0.5e+10]"#),
                t("[\n  \"caf\\u00e9\",\n  [],\n  [[false]]\n]"),
                t("[]"),
            ],
            40,
        ),
        case(
            "strings, comments and escapes",
            r#"# key = value lines, then a closing word
root ::= line+ end   # one or more lines
line ::= key "\x3d" value "\n" # \x3d is '='
key ::= [A-Za-z_] [A-Za-z0-9_]*
value ::= "\"" ( [^"\\\n] | "\\" ["\\nt] )* "\"" | [0-9]+ | "\u00e9t\u00e9"
end ::= "\u00e9t\u00e9" | "fin" "\t"? | "\U0001F600""#,
            vec![
                t("name=\"Ada \\\"L\\\" \\\\ caf\u{e9}\"\ncount=42\nété"),
                t("x=été\nfin\t"),
                t("a_1=\"\"\n😀"),
            ],
            40,
        ),
        case(
            "words across rule boundaries",
            r#"root ::= word (" " word)* [.!?]
word ::= [A-Za-z']+"#,
            vec![
                t("The quick brown fox jumps over the lazy dog."),
                t("Don't stop believing!"),
            ],
            40,
        ),
    ];
    let nested: String = "([".repeat(120) + &"])".repeat(120);
    let mixed: String = "(".repeat(40) + "[()]" + &")".repeat(40);
    v.push(case(
        "deep recursion",
        r#"root ::= "(" root ")" | "[" root "]" | """#,
        vec![t(&nested), t(&mixed), t("")],
        40,
    ));
    v.push(case(
        "right-recursive list with counted items",
        r#"root ::= item ("," root)?
item ::= [a-z]{1,300} | "ab"{2,1000}"#,
        vec![t(&(letters(40, 3)
            + ",abab,"
            + &"ab".repeat(600)
            + ",x,"
            + &letters(300, 4)))],
        40,
    ));
    // Qwen3's `<think>` is an added token that is not special: as a token terminal it is
    // that one token, whose bytes are also ordinary text.
    v.push(Case {
        name: "non-special added token as a terminal",
        grammar: "root ::= <think> \"\\n\" [a-z ]+ \"\\n\" </think> \"\\n\\n\" [A-Za-z]+".into(),
        texts: vec![vec![
            P::Tok("<think>".into()),
            P::T("\nhmm let me think\n".into()),
            P::Tok("</think>".into()),
            P::T("\n\nAnswer".into()),
        ]],
        checks: 40,
        only: Some("qwen3"),
    });
    v.push(Case {
        name: "non-special added token as a literal",
        grammar: "root ::= \"<think>\" [a-z]+ \"</think>\"".into(),
        texts: vec![
            vec![
                P::Tok("<think>".into()),
                P::T("abc".into()),
                P::Tok("</think>".into()),
            ],
            vec![P::Plain("<think>abc</think>".into())],
        ],
        checks: 40,
        only: Some("qwen3"),
    });
    v
}

fn ebnf_test(name: &str) {
    let started = Instant::now();
    let Some(&(_, special, density)) = TOKENIZERS.iter().find(|t| t.0 == name) else {
        unreachable!()
    };
    let Some(rt) = real(name) else { return };
    let seed = TOKENIZERS.iter().position(|t| t.0 == name).unwrap() as u64;
    let vocab = &rt.vocab;
    assert!(
        vocab.special_token_id(special).is_some(),
        "{name}: {special} is not a special token"
    );
    assert!(!vocab.is_stop_token(vocab.special_token_id(special).unwrap()));
    let stop = rt.stop();
    let stop_text = String::from_utf8(vocab.token_bytes(stop).unwrap().to_vec()).unwrap();
    let fill = |s: &str| s.replace("{SP}", special).replace("{STOP}", &stop_text);
    let mut rng = StdRng::seed_from_u64(2000 + seed);
    let mut report = Report::default();
    for (ci, c) in cases().into_iter().enumerate() {
        if c.only.is_some_and(|o| o != name) {
            continue;
        }
        let src = fill(&c.grammar);
        // Cycle through the background (filled after compile), eager and lazy mask
        // precomputation: all three must keep the invariant.
        let precompute = [Precompute::Background, Precompute::Eager, Precompute::Lazy][ci % 3];
        let compiler = rt.compiler.clone().with_precompute(precompute);
        let compiled = match compiler.compile_grammar(&src) {
            Ok(g) => g,
            Err(e) => {
                report.fail(format!("[{name} {}] does not compile: {e}\n{src}", c.name));
                continue;
            }
        };
        for (ti, text) in c.texts.iter().enumerate() {
            let pieces: Vec<String> = text
                .iter()
                .map(|p| match p {
                    P::T(s) | P::Tok(s) | P::Plain(s) => fill(s),
                    P::Sp => special.to_string(),
                    P::Stop => stop_text.clone(),
                })
                .collect();
            let pieces: Vec<Piece<'_>> = text
                .iter()
                .zip(&pieces)
                .map(|(p, s)| match p {
                    P::T(_) => Piece::Text(s),
                    P::Sp | P::Stop => Piece::Special(s),
                    P::Tok(_) => Piece::Token(s),
                    P::Plain(_) => Piece::Plain(s),
                })
                .collect();
            let ids = rt.encode_pieces(&pieces);
            let shown: String = pieces
                .iter()
                .map(|p| match p {
                    Piece::Text(s) | Piece::Plain(s) => s.to_string(),
                    Piece::Special(s) | Piece::Token(s) => format!("⟨{s}⟩"),
                })
                .collect::<String>()
                .chars()
                .take(50)
                .collect();
            let label = format!("{name} `{}` ({precompute:?}) text {ti} {shown:?}", c.name);
            let checks = ((c.checks as f64) * density).round().max(4.0) as usize;
            let t0 = Instant::now();
            teacher_force(rt, &compiled, &ids, checks, &mut rng, &label, &mut report);
            if std::env::var_os("TS_VERBOSE").is_some() {
                eprintln!(
                    "{label}: {} tokens, {:.2} s",
                    ids.len(),
                    t0.elapsed().as_secs_f64()
                );
            }
        }
    }
    report.finish(&format!("{name} EBNF"), started);
}

#[test]
fn json_llama3_1() {
    json_test("llama3_1");
}

#[test]
fn json_qwen3() {
    json_test("qwen3");
}

#[test]
fn json_llama2() {
    json_test("llama2");
}

#[test]
fn json_gemma3() {
    json_test("gemma3");
}

#[test]
fn json_deepseek_v3() {
    json_test("deepseek_v3");
}

#[test]
fn json_gptoss() {
    json_test("gptoss");
}

#[test]
fn ebnf_llama3_1() {
    ebnf_test("llama3_1");
}

#[test]
fn ebnf_qwen3() {
    ebnf_test("qwen3");
}

#[test]
fn ebnf_llama2() {
    ebnf_test("llama2");
}

#[test]
fn ebnf_gemma3() {
    ebnf_test("gemma3");
}

#[test]
fn ebnf_deepseek_v3() {
    ebnf_test("deepseek_v3");
}

#[test]
fn ebnf_gptoss() {
    ebnf_test("gptoss");
}

/// A stop token that is an ordinary text token (stop tokens "need not be special", as with
/// `"\n\n"` for completion-style use): wherever the grammar accepts its bytes but the root
/// cannot end, the mask bit and `accept_token` must still agree.
#[test]
fn non_special_stop_token() {
    let started = Instant::now();
    let Some(base) = real("llama3_1") else { return };
    let nl2 = base.token_id("\n\n").expect("\"\\n\\n\" is a token");
    assert!(!base.vocab.is_special(nl2));
    let vocab = (*base.vocab)
        .clone()
        .with_stop_tokens(&[base.stop(), nl2])
        .unwrap();
    let rt = RealTokenizer::from_parts("llama3_1", vocab, base.tokenizer.clone());
    let mut rng = StdRng::seed_from_u64(77);
    let mut report = Report::default();
    let json = rt.compiler.compile_builtin_json().unwrap();
    let ids = rt.encode_exact("{\"a\": [1, 2], \"b\": \"x\"}");
    teacher_force(
        &rt,
        &json,
        &ids,
        100,
        &mut rng,
        "llama3_1 + stop \\n\\n: json",
        &mut report,
    );
    // After "a" the grammar wants "\n\n" as text; the text is fed as "a" "\n" "\n" "b".
    let g = rt
        .compiler
        .compile_grammar(r#"root ::= "a" "\n\n" "b""#)
        .unwrap();
    let ids: Vec<u32> = ["a", "\n", "\n", "b"]
        .iter()
        .map(|s| rt.token_id(s).unwrap())
        .collect();
    let label = "llama3_1 + stop \\n\\n: `\"a\" \"\\n\\n\" \"b\"`";
    teacher_force(&rt, &g, &ids, 100, &mut rng, label, &mut report);
    report.finish("non-special stop token", started);
}

/// A token terminal that names an ordinary (non-special) token, Qwen3's added token
/// `<think>`: accepting that token must keep the reading of its bytes as text too, so
/// `<think>` then `2` is accepted by `root ::= <think> "1" | "<think>" "2"`.
#[test]
fn non_special_token_terminal_keeps_the_text_reading() {
    let started = Instant::now();
    let Some(rt) = real("qwen3") else { return };
    let mut rng = StdRng::seed_from_u64(78);
    let mut report = Report::default();
    let g = rt
        .compiler
        .compile_grammar(r#"root ::= <think> "1" | "<think>" "2""#)
        .unwrap();
    for text in ["1", "2"] {
        let ids = rt.encode_pieces(&[Piece::Token("<think>"), Piece::Text(text)]);
        let label = format!("qwen3 `<think> \"1\" | \"<think>\" \"2\"` text ⟨<think>⟩{text}");
        teacher_force(rt, &g, &ids, 100, &mut rng, &label, &mut report);
    }
    report.finish("non-special token terminal", started);
}

/// A schema whose key automaton avoids declared names (open `additionalProperties`): its
/// nodes step into shared string-body nodes, so node-mask walks reuse the trie subtrees
/// of bisimilar nodes (`SubtreeMemo` in `src/mask/cache.rs`), and string values end in
/// their object rule's structure (a DFA walk that hands over to the Earley chart mid-walk).
/// Every step of each text is checked against every token of Llama 3.1, eager and lazy.
#[test]
fn schema_key_automaton_masks_are_exact() {
    let Some(rt) = real("llama3_1") else { return };
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "names": {"type": "array", "items": {"type": "string"}},
            "nav": {"type": "integer"},
            "x": {"type": "object", "properties": {"name": {"type": "boolean"}}}
        },
        "required": ["name"]
    });
    let texts = [
        r#"{"name":"a\"b \u00e9","nam":1,"namesake":[{"k":"v"}],"names":["x","y"]}"#,
        r#"{"nav":-3,"name":"","na":"x","x":{"name":true,"nam":"z"},"n":null}"#,
        r#"{"name": "ünïcödé ✓", "navy" : {"name":"q"}, "":[]}"#,
    ];
    let options = tokensieve::JsonSchemaOptions {
        any_order: true,
        ..Default::default()
    };
    let mut report = Report::default();
    let started = Instant::now();
    for precompute in [Precompute::Background, Precompute::Eager, Precompute::Lazy] {
        let compiled = rt
            .compiler
            .clone()
            .with_precompute(precompute)
            .compile_json_schema(&schema, &options)
            .unwrap_or_else(|e| panic!("{e}"));
        let label = format!("schema text ({precompute:?})");
        force_every_step(rt, &compiled, &texts, &label, &mut report);
    }
    report.finish("schema key automaton", started);
}

/// Teacher-forces each of `texts` then the stop token, checking every step against every
/// token (the label gets the text's index).
fn force_every_step(
    rt: &RealTokenizer,
    compiled: &Arc<CompiledGrammar>,
    texts: &[&str],
    label: &str,
    report: &mut Report,
) {
    for (i, text) in texts.iter().enumerate() {
        let mut ids = rt.encode_exact(text);
        ids.push(rt.stop());
        let mut rng = StdRng::seed_from_u64(i as u64);
        let label = format!("{label} {i}");
        teacher_force(rt, compiled, &ids, ids.len(), &mut rng, &label, report);
    }
}

/// Keys of undeclared properties are checked when they end (`parser::key_filter`): an
/// object in declared order takes any key but its declared names, so once `height` is
/// written, `base` (declared before it) can come back neither as itself nor as an extra
/// key, in any spelling. The masks are context-free and know nothing of the names; the
/// matcher corrects them. Every step of each text is checked against every token of
/// Llama 3.1 (keys on the way to a name, keys past it, escapes, one-token keys), eager and
/// lazy; then rollbacks across keys must give the masks of a fresh matcher.
#[test]
fn undeclared_keys_checked_when_they_end_mask_exactly() {
    let Some(rt) = real("llama3_1") else { return };
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "base": {"type": "number"},
            "height": {"type": "number"},
            "name": {"type": "string"},
            "é": {"type": "boolean"}
        }
    });
    let texts = [
        r#"{"height":1,"bas":2,"basement":{"base":"x"},"b\u0061sis":[1],"ba\\se":0}"#,
        r#"{"base":1,"name":"n","nam":"x","names":2,"\u006e":3,"name\"":4}"#,
        r#"{"na\u006d":1,"base":2,"\u00e9t\u00e9":true,"é":false}"#,
        r#"{"heigh":null,"height":2.5,"":"","e":{"name":[]}}"#,
        r#"{"height":1,"name":"base","x":"height"}"#,
        r#"{"height":1,"base2":0,"\u00e9x":1}"#,
    ];
    let mut report = Report::default();
    let started = Instant::now();
    for precompute in [Precompute::Eager, Precompute::Lazy] {
        let compiled = rt
            .compiler
            .clone()
            .with_precompute(precompute)
            .compile_json_schema(&schema, &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let label = format!("key filter text ({precompute:?})");
        force_every_step(rt, &compiled, &texts, &label, &mut report);
        // Keys of one token, quotes included (` "_"`, ` ""`): the matcher's chart decides.
        // (Declared in the order `_`, `""`, `-`.)
        let short = serde_json::json!({"properties": {
            "_": {"type": "number"}, "": {"type": "number"}, "-": {"type": "string"}
        }});
        let g = rt
            .compiler
            .clone()
            .with_precompute(precompute)
            .compile_json_schema(&short, &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let one_token_keys = [
            r#"{"x":1, "":2, "y":3, "-":"z", "w":[]}"#,
            r#"{"x":1, "-":"z", "w":2}"#,
            r#"{ "_":1,"__":{"_":"s"}, "x":null}"#,
        ];
        let label = format!("key filter one-token keys ({precompute:?})");
        force_every_step(rt, &g, &one_token_keys, &label, &mut report);
        // Declared names as extra keys, in any spelling: refused.
        for text in [
            r#"{"height":1,"base":2}"#,
            r#"{"height":1,"b\u0061se":2}"#,
            r#"{"name":"x","\u00e9":true,"name":"y"}"#,
            r#"{"name":"x","height":1}"#,
        ] {
            let mut m = GrammarMatcher::new(compiled.clone());
            let ids = rt.encode_exact(text);
            let all = ids.iter().all(|&t| m.accept_token(t)) && m.accept_token(rt.stop());
            assert!(!all, "{text} must be refused");
            // Not even up to the key's closing quote: no dead end.
            let key_end = text.rfind("\":").expect("a key") + 1;
            let mut m = GrammarMatcher::new(compiled.clone());
            assert!(
                !m.accept_string(&text[..key_end]),
                "{} must be refused",
                &text[..key_end]
            );
        }
        // Rollback across keys: the masks of a fresh matcher at the same prefix.
        let ids = rt.encode_exact(texts[0]);
        let mut m = GrammarMatcher::new(compiled.clone());
        let words = m.bitmask_words();
        let (mut got, mut want) = (vec![0u32; words], vec![0u32; words]);
        for (i, &t) in ids.iter().enumerate() {
            assert!(m.accept_token(t));
            m.fill_next_token_bitmask(&mut got).unwrap();
            let back = (i % 3).min(i);
            m.rollback(back).unwrap();
            m.fill_next_token_bitmask(&mut got).unwrap();
            let mut fresh = GrammarMatcher::new(compiled.clone());
            for &u in &ids[..=i - back] {
                assert!(fresh.accept_token(u));
            }
            fresh.fill_next_token_bitmask(&mut want).unwrap();
            assert!(
                got == want,
                "step {i}, back {back}: masks differ after a rollback"
            );
            for &u in &ids[i + 1 - back..=i] {
                assert!(m.accept_token(u));
            }
        }
    }
    report.finish("undeclared keys checked when they end", started);
}
