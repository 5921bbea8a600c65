//! Helpers shared by the criterion benches: the real tokenizers and the MaskBench records in
//! `../shared` (beside the crate), and a teacher-forcing cursor over token sequences.
//!
//! A bench whose data is missing prints why and runs nothing (it does not fail): benches
//! are measurements, the tests are where missing data is an error under `CI=true`.
//! New benches (a structural-tag bench, for example) add a `benches/<name>.rs` with
//! `mod common;` and a `[[bench]]` entry in Cargo.toml with `harness = false`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Vocabulary};

/// `../shared` beside the workspace root (the nearest folder above the crate's own, inclusive,
/// that holds `Cargo.lock`; `tools/benches` includes this file with `#[path]`).
pub fn shared_dir() -> PathBuf {
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_dir
        .ancestors()
        .find(|a| a.join("Cargo.lock").is_file())
        .unwrap_or(crate_dir);
    root.join("..").join("shared")
}

/// A real tokenizer: its vocabulary (with the stop token of its `tokenizer_config.json`)
/// and the `tokenizers` crate's encoder of the same file.
pub struct Tokenizer {
    /// Folder name under `../shared/tokenizers`.
    pub name: String,
    /// The vocabulary.
    pub vocab: Arc<Vocabulary>,
    /// The encoder.
    pub encoder: tokenizers::Tokenizer,
}

impl Tokenizer {
    /// Loads `../shared/tokenizers/<name>/tokenizer.json`; `None` (printed) when missing.
    pub fn load(name: &str) -> Option<Tokenizer> {
        let path = shared_dir()
            .join("tokenizers")
            .join(name)
            .join("tokenizer.json");
        if !path.is_file() {
            println!("skipping: tokenizer missing at {}", path.display());
            return None;
        }
        let vocab = Vocabulary::from_tokenizer_json(&path).expect("vocabulary");
        let encoder = tokenizers::Tokenizer::from_file(&path).expect("tokenizer");
        Some(Tokenizer {
            name: name.to_string(),
            vocab: Arc::new(vocab),
            encoder,
        })
    }

    /// Token ids of `text` (no special tokens added), then the stop token.
    pub fn encode_with_stop(&self, text: &str) -> Vec<u32> {
        let mut ids = self
            .encoder
            .encode(text, false)
            .expect("encode")
            .get_ids()
            .to_vec();
        ids.extend(self.vocab.stop_tokens().first().copied());
        ids
    }
}

/// A MaskBench record: the schema and its valid instances, serialised compactly.
pub struct Record {
    /// The JSON Schema.
    pub schema: Value,
    /// The valid instances.
    pub instances: Vec<String>,
}

fn collection_lines(collection: &str) -> Option<impl Iterator<Item = Value>> {
    let path = shared_dir()
        .join("testdata/jsonschemabench")
        .join(collection)
        .join(format!("{collection}.jsonl.gz"));
    let Ok(file) = std::fs::File::open(&path) else {
        println!("skipping: MaskBench records missing at {}", path.display());
        return None;
    };
    Some(
        BufReader::new(flate2::read::GzDecoder::new(file))
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str::<Value>(&l).ok()),
    )
}

fn valid_instances(rec: &Value) -> Vec<String> {
    rec["tests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["valid"] == Value::Bool(true))
        .map(|t| t["data"].to_string())
        .collect()
}

/// The record whose `file` is `file` in `collection`; `None` (printed) when missing.
pub fn maskbench_record(collection: &str, file: &str) -> Option<Record> {
    let rec = collection_lines(collection)?.find(|r| r["file"] == file);
    if rec.is_none() {
        println!("skipping: no record {file} in {collection}");
    }
    rec.map(|r| Record {
        instances: valid_instances(&r),
        schema: r["schema"].clone(),
    })
}

/// The first `n` valid instances of `collection` (any schema).
pub fn maskbench_instances(collection: &str, n: usize) -> Vec<String> {
    let Some(lines) = collection_lines(collection) else {
        return Vec::new();
    };
    lines.flat_map(|r| valid_instances(&r)).take(n).collect()
}

/// Walks token sequences with one matcher: each `step` fills a mask and accepts the
/// sequence's next token; at the end of a sequence (or on a rejection) it goes on with the
/// next sequence from a fresh matcher, wrapping around.
pub struct Cursor {
    grammar: Arc<CompiledGrammar>,
    docs: Arc<Vec<Vec<u32>>>,
    doc: usize,
    step: usize,
    /// The matcher at the current step.
    pub matcher: GrammarMatcher,
}

impl Cursor {
    /// A cursor at step 0 of `docs[start % docs.len()]`.
    pub fn new(grammar: Arc<CompiledGrammar>, docs: Arc<Vec<Vec<u32>>>, start: usize) -> Self {
        assert!(!docs.is_empty(), "no token sequences");
        Cursor {
            matcher: GrammarMatcher::new(grammar.clone()),
            grammar,
            doc: start % docs.len(),
            docs,
            step: 0,
        }
    }

    /// Accepts the current token (untimed by callers) and moves on.
    pub fn advance(&mut self) {
        let doc = &self.docs[self.doc];
        let ok = self.matcher.accept_token(doc[self.step]);
        self.step += 1;
        if !ok || self.step == doc.len() {
            self.doc = (self.doc + 1) % self.docs.len();
            self.step = 0;
            self.matcher = GrammarMatcher::new(self.grammar.clone());
        }
    }

    /// Runs every step of every sequence once (computes lazily built masks); returns how
    /// many sequences were accepted to the end.
    pub fn warm(grammar: &Arc<CompiledGrammar>, docs: &[Vec<u32>]) -> usize {
        let mut mask = vec![0u32; grammar.vocabulary().bitmask_words()];
        let mut accepted = 0;
        for doc in docs {
            let mut m = GrammarMatcher::new(grammar.clone());
            let mut ok = true;
            for &t in doc {
                m.fill_next_token_bitmask(&mut mask).expect("mask");
                if !m.accept_token(t) {
                    ok = false;
                    break;
                }
            }
            accepted += ok as usize;
        }
        accepted
    }
}

/// The compiler of a vocabulary (builds its trie once).
pub fn compiler(vocab: &Arc<Vocabulary>) -> GrammarCompiler {
    // Benches time compiles: the whole-grammar cache would answer all but the first.
    GrammarCompiler::new(vocab.clone()).with_cache_enabled(false)
}
