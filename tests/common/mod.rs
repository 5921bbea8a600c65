//! Helpers shared by the integration tests: locating the real tokenizers in `../shared`.
//!
//! Outside CI a missing file skips the test (`None`, with a printed reason); with
//! `CI=true` it is a hard failure, so CI never passes by silently skipping.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// True when the environment variable `CI` is `true`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Returns `None` after printing why (outside CI), or panics (with `CI=true`).
fn missing(what: &str, path: &Path) -> Option<PathBuf> {
    if in_ci() {
        panic!(
            "CI=true but {what} is missing at {}: the shared test data must be present in CI",
            path.display()
        );
    }
    eprintln!("skipping: {what} missing at {}", path.display());
    None
}

/// The shared data folder, `../shared` relative to the workspace root: the nearest folder
/// above the crate's own (`CARGO_MANIFEST_DIR`, inclusive) that holds `Cargo.lock`. The
/// crates of the workspace (`tools/`, `cli/`) include this file with `#[path]`, so every
/// test finds the data through this one function.
pub fn shared_dir() -> Option<PathBuf> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_dir
        .ancestors()
        .find(|a| a.join("Cargo.lock").is_file())
        .unwrap_or(crate_dir);
    let dir = root.join("..").join("shared");
    if dir.is_dir() {
        Some(dir.canonicalize().unwrap_or(dir))
    } else {
        missing("shared data folder", &dir)
    }
}

/// `../shared/tokenizers/<name>/tokenizer.json`, such as `tokenizer_path("qwen3")`.
pub fn tokenizer_path(name: &str) -> Option<PathBuf> {
    let path = shared_dir()?
        .join("tokenizers")
        .join(name)
        .join("tokenizer.json");
    if path.is_file() {
        Some(path)
    } else {
        missing(&format!("tokenizer {name:?}"), &path)
    }
}

/// `../shared/testdata/<rel>`, such as `testdata_path("jsonschemabench")`.
pub fn testdata_path(rel: &str) -> Option<PathBuf> {
    let path = shared_dir()?.join("testdata").join(rel);
    if path.exists() {
        Some(path)
    } else {
        missing(&format!("test data {rel:?}"), &path)
    }
}

/// A mask ⇔ accept disagreement found by [`check_all_tokens`] or [`check_some_tokens`].
#[derive(Clone, Debug)]
pub struct Mismatch {
    /// The token id.
    pub token: u32,
    /// Its bytes, lossily decoded (or `<padding>`).
    pub text: String,
    /// The mask bit.
    pub bit: bool,
    /// What `accept_token` returned.
    pub accepted: bool,
    /// Why `try_accept_token` rejected it (when it did).
    pub reason: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "token {} {:?}: mask bit {}, accept_token {}{}",
            self.token,
            self.text,
            self.bit as u8,
            self.accepted,
            if self.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.reason)
            }
        )
    }
}

fn check_token(
    fork: &mut tokensieve::GrammarMatcher,
    vocab: &tokensieve::Vocabulary,
    mask: &[u32],
    t: u32,
    allowed: &mut Vec<u32>,
    bad: &mut Vec<Mismatch>,
) {
    let bit = tokensieve::mask::is_token_allowed(mask, t);
    let res = fork.try_accept_token(t);
    let ok = res.is_ok();
    if ok {
        allowed.push(t);
        fork.rollback(1)
            .expect("rollback(1) after an accepted token");
    }
    if bit != ok {
        bad.push(Mismatch {
            token: t,
            text: vocab.token_bytes(t).map_or("<padding>".to_string(), |b| {
                String::from_utf8_lossy(b).into_owned()
            }),
            bit,
            accepted: ok,
            reason: res.err().map_or(String::new(), |e| e.to_string()),
        });
    }
}

/// Fills the mask of `m` (on a fork) and compares every bit of `0..vocab_size` with
/// `accept_token` on a fork (rolled back after each success). Also checks that the bits past
/// `vocab_size` in the last word are clear. Returns the allowed ids and the disagreements.
pub fn check_all_tokens(
    m: &tokensieve::GrammarMatcher,
    vocab: &tokensieve::Vocabulary,
) -> (Vec<u32>, Vec<Mismatch>) {
    let mut mask = vec![0u32; vocab.bitmask_words()];
    let mut fork = m.clone();
    fork.fill_next_token_bitmask(&mut mask)
        .expect("fill_next_token_bitmask");
    let mut allowed = Vec::new();
    let mut bad = Vec::new();
    for t in 0..vocab.vocab_size() as u32 {
        check_token(&mut fork, vocab, &mask, t, &mut allowed, &mut bad);
    }
    for t in vocab.vocab_size() as u32..(mask.len() * 32) as u32 {
        if tokensieve::mask::is_token_allowed(&mask, t) {
            bad.push(Mismatch {
                token: t,
                text: "<past vocab_size>".into(),
                bit: true,
                accepted: false,
                reason: "bit past vocab_size".into(),
            });
        }
    }
    (allowed, bad)
}

/// As [`check_all_tokens`], on a sample only: every token whose bit is set, plus `extra`
/// other ids. Returns the allowed ids (in the sample) and the disagreements.
pub fn check_some_tokens(
    m: &tokensieve::GrammarMatcher,
    vocab: &tokensieve::Vocabulary,
    extra: &[u32],
) -> (Vec<u32>, Vec<Mismatch>) {
    let mut mask = vec![0u32; vocab.bitmask_words()];
    let mut fork = m.clone();
    fork.fill_next_token_bitmask(&mut mask)
        .expect("fill_next_token_bitmask");
    let mut ids: Vec<u32> = (0..vocab.vocab_size() as u32)
        .filter(|&t| tokensieve::mask::is_token_allowed(&mask, t))
        .collect();
    ids.extend(
        extra
            .iter()
            .copied()
            .filter(|&t| (t as usize) < vocab.vocab_size()),
    );
    ids.sort_unstable();
    ids.dedup();
    let mut allowed = Vec::new();
    let mut bad = Vec::new();
    for t in ids {
        check_token(&mut fork, vocab, &mask, t, &mut allowed, &mut bad);
    }
    (allowed, bad)
}

/// A real tokenizer loaded both ways, with a compiler for its vocabulary (trie built once).
#[cfg(feature = "hf")]
pub struct RealTokenizer {
    /// The folder name under `../shared/tokenizers`.
    pub name: String,
    /// The vocabulary (eos from `tokenizer_config.json` as stop token).
    pub vocab: std::sync::Arc<tokensieve::Vocabulary>,
    /// The `tokenizers` crate's tokenizer of the same file.
    pub tokenizer: tokenizers::Tokenizer,
    /// A compiler for `vocab`.
    pub compiler: tokensieve::GrammarCompiler,
    /// Ordinary (non-special) token bytes → id, for [`RealTokenizer::encode_exact`]'s repairs.
    by_bytes: std::collections::HashMap<Vec<u8>, u32>,
}

/// A piece of a text to tokenise: plain text, or one special token given by its text.
#[cfg(feature = "hf")]
#[derive(Clone, Copy, Debug)]
pub enum Piece<'a> {
    /// Text, tokenised with the tokenizer.
    Text(&'a str),
    /// A special token, by its text (such as `<|im_end|>`).
    Special(&'a str),
    /// One token given by its text: a special token, or else the ordinary token spelled
    /// exactly so (such as Qwen3's non-special added token `<think>`).
    Token(&'a str),
    /// Text tokenised greedily over the ordinary tokens only (never a special token), for
    /// text that the tokenizer would turn into a special token (`<|im_start|>` as bytes).
    Plain(&'a str),
}

#[cfg(feature = "hf")]
impl RealTokenizer {
    /// Loads `../shared/tokenizers/<name>/tokenizer.json` (None, after printing why, when
    /// missing outside CI).
    pub fn load(name: &str) -> Option<RealTokenizer> {
        let path = tokenizer_path(name)?;
        let vocab = tokensieve::Vocabulary::from_tokenizer_json(&path)
            .unwrap_or_else(|e| panic!("{name}: vocabulary: {e}"));
        let tokenizer = tokenizers::Tokenizer::from_file(&path)
            .unwrap_or_else(|e| panic!("{name}: tokenizers: {e}"));
        Some(Self::from_parts(name, vocab, tokenizer))
    }

    /// As [`RealTokenizer::load`], with a given `vocab` (for example widened).
    pub fn from_parts(
        name: &str,
        vocab: tokensieve::Vocabulary,
        tokenizer: tokenizers::Tokenizer,
    ) -> RealTokenizer {
        let vocab = std::sync::Arc::new(vocab);
        // Without the whole-grammar cache: tests share one RealTokenizer per binary and
        // compile thousands of distinct grammars on it, which an unlimited cache would all keep.
        let compiler = tokensieve::GrammarCompiler::new(vocab.clone()).with_cache_enabled(false);
        let mut by_bytes = std::collections::HashMap::new();
        for id in 0..vocab.tokenizer_size() as u32 {
            if vocab.is_special(id) {
                continue;
            }
            if let Some(b) = vocab.token_bytes(id) {
                if !b.is_empty() {
                    by_bytes.entry(b.to_vec()).or_insert(id);
                }
            }
        }
        RealTokenizer {
            name: name.to_string(),
            vocab,
            tokenizer,
            compiler,
            by_bytes,
        }
    }

    /// The first stop token.
    pub fn stop(&self) -> u32 {
        *self
            .vocab
            .stop_tokens()
            .first()
            .unwrap_or_else(|| panic!("{}: no stop token", self.name))
    }

    /// Greedy longest-match tokenisation of `bytes` over the ordinary tokens.
    pub fn greedy(&self, bytes: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let mut found = None;
            for end in (i + 1..=bytes.len().min(i + 64)).rev() {
                if let Some(&id) = self.by_bytes.get(&bytes[i..end]) {
                    found = Some((id, end));
                    break;
                }
            }
            let (id, end) = found
                .unwrap_or_else(|| panic!("{}: no token for byte 0x{:02x}", self.name, bytes[i]));
            out.push(id);
            i = end;
        }
        out
    }

    /// Token ids whose bytes concatenate to exactly `text`: the tokenizer's own encoding
    /// (no special tokens added); where the normaliser prepends a space (Llama 2's `▁`), the
    /// first token is re-tokenised without it.
    pub fn encode_exact(&self, text: &str) -> Vec<u32> {
        if text.is_empty() {
            return Vec::new();
        }
        let enc = self
            .tokenizer
            .encode(text, false)
            .unwrap_or_else(|e| panic!("{}: encode {text:?}: {e}", self.name));
        let mut ids = enc.get_ids().to_vec();
        let got = self.vocab.decode_bytes(&ids);
        if got != text.as_bytes() {
            let spaced = [b" ".as_slice(), text.as_bytes()].concat();
            assert_eq!(
                got,
                spaced,
                "{}: the ids of {text:?} decode to {:?}",
                self.name,
                String::from_utf8_lossy(&got)
            );
            let first = self.vocab.token_bytes(ids[0]).unwrap().to_vec();
            assert_eq!(first[0], b' ');
            let repl = self.greedy(&first[1..]);
            ids.splice(0..1, repl);
        }
        assert_eq!(
            self.vocab.decode_bytes(&ids),
            text.as_bytes(),
            "{}",
            self.name
        );
        assert!(
            ids.iter().all(|&id| !self.vocab.is_special(id)),
            "{}: plain text {text:?} encoded to a special token",
            self.name
        );
        ids
    }

    /// Token ids of `pieces`: text pieces through [`RealTokenizer::encode_exact`], special
    /// pieces as their id (which must be a special token).
    pub fn encode_pieces(&self, pieces: &[Piece<'_>]) -> Vec<u32> {
        // The whole text, encoded at once, holds every special piece as its special id.
        let specials: Vec<u32> = pieces
            .iter()
            .filter_map(|p| match *p {
                Piece::Special(s) => self.vocab.special_token_id(s),
                _ => None,
            })
            .collect();
        if !specials.is_empty() && pieces.iter().all(|p| !matches!(p, Piece::Plain(_))) {
            let whole: String = pieces
                .iter()
                .map(|p| match *p {
                    Piece::Text(s) | Piece::Special(s) | Piece::Token(s) | Piece::Plain(s) => s,
                })
                .collect();
            let enc = self
                .tokenizer
                .encode(whole.as_str(), false)
                .expect("encodes");
            let found: Vec<u32> = enc
                .get_ids()
                .iter()
                .copied()
                .filter(|id| specials.contains(id))
                .collect();
            assert_eq!(
                found, specials,
                "{}: special tokens in {whole:?}",
                self.name
            );
        }
        let mut ids = Vec::new();
        for p in pieces {
            match *p {
                Piece::Text(t) => ids.extend(self.encode_exact(t)),
                Piece::Special(s) => {
                    let id = self
                        .vocab
                        .special_token_id(s)
                        .unwrap_or_else(|| panic!("{}: no special token {s:?}", self.name));
                    // The tokenizer must agree that the text is that one special token.
                    let enc = self.tokenizer.encode(s, false).expect("encodes");
                    assert_eq!(enc.get_ids(), &[id], "{}: {s:?}", self.name);
                    ids.push(id);
                }
                Piece::Token(s) => {
                    let id = self
                        .vocab
                        .special_token_id(s)
                        .or_else(|| self.by_bytes.get(s.as_bytes()).copied())
                        .unwrap_or_else(|| panic!("{}: no token {s:?}", self.name));
                    ids.push(id);
                }
                Piece::Plain(s) => ids.extend(self.greedy(s.as_bytes())),
            }
        }
        ids
    }

    /// The id of the token spelled `text` (special first, then ordinary), if any.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab
            .special_token_id(text)
            .or_else(|| self.by_bytes.get(text.as_bytes()).copied())
    }
}

/// The proptest configuration of the property tests: `cases` cases, from a fixed seed
/// under `CI=true` (every CI run tries the same cases, so a change passes or fails on its
/// own) and from a random one elsewhere (where new cases get explored). The environment
/// variable `PROPTEST_RNG_SEED` overrides both, to replay a failure.
pub fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, RngSeed};
    let mut config = Config {
        cases,
        ..Config::default()
    };
    if in_ci() && std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(20_261_130);
    }
    config
}

/// The stop token of [`byte_compiler`]'s vocabulary.
pub const BYTE_STOP: u32 = 256;

/// A compiler over a vocabulary of the 256 single bytes and a stop token `<eos>`
/// ([`BYTE_STOP`]), with lazily computed masks and no whole-grammar cache (suites compile
/// thousands of distinct grammars on one): for checking languages byte by byte.
pub fn byte_compiler() -> tokensieve::GrammarCompiler {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(b"<eos>".to_vec());
    let vocab = tokensieve::Vocabulary::from_token_bytes(&tokens, &[BYTE_STOP], &[BYTE_STOP])
        .expect("vocabulary");
    tokensieve::GrammarCompiler::new(std::sync::Arc::new(vocab))
        .with_precompute(tokensieve::Precompute::Lazy)
        .with_cache_enabled(false)
}

/// True when `g` (compiled by [`byte_compiler`]) accepts `text` followed by the stop token.
pub fn byte_accepts(g: &std::sync::Arc<tokensieve::CompiledGrammar>, text: &str) -> bool {
    let mut m = tokensieve::GrammarMatcher::new(g.clone());
    m.accept_string(text) && m.accept_token(BYTE_STOP) && m.is_terminated()
}

/// The 256 single bytes then `n` pseudo-random lowercase tokens of 2–9 letters (seeded, so
/// the same list every run), no special tokens: a vocabulary large enough that mask walks
/// over ambiguous grammars take seconds.
#[allow(dead_code)]
pub fn random_letter_tokens(n: usize) -> Vec<Vec<u8>> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut x = 12_345u64;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = 2 + (x % 8) as usize;
        tokens.push(
            (0..len)
                .map(|k| b'a' + ((x >> (k * 5)) % 26) as u8)
                .collect(),
        );
    }
    tokens
}

/// Compiles `schema` with `opts` on the byte vocabulary ([`byte_compiler`]) and asserts
/// that every text of `good` is accepted to the end and every text of `bad` rejected
/// (panics naming the schema and the text otherwise, or when the schema is refused).
pub fn byte_check(
    schema: &serde_json::Value,
    opts: &tokensieve::json_schema::JsonSchemaOptions,
    good: &[&str],
    bad: &[&str],
) {
    let g = byte_compiler()
        .compile_json_schema(schema, opts)
        .unwrap_or_else(|e| panic!("{schema} refused: {e}"));
    for t in good {
        assert!(byte_accepts(&g, t), "{schema} should accept {t}");
    }
    for t in bad {
        assert!(!byte_accepts(&g, t), "{schema} should reject {t}");
    }
}
