//! Mask throughput of the built-in JSON grammar on a real vocabulary, teacher-forcing real
//! JSON documents, plus the grammar's compile time.
//!
//! ```text
//! cargo bench --bench mask            # full criterion run
//! cargo bench --bench mask -- --quick # shorter
//! ```
//!
//! Vocabulary: Llama 3.1 (`../shared/tokenizers/llama3_1/tokenizer.json` beside the crate),
//! or the embedded o200k_base when that file is missing. Documents: the first
//! `PER_COLLECTION` valid instances of a few JSONSchemaBench collections
//! (`../shared/testdata/jsonschemabench/<C>/<C>.jsonl.gz`), re-serialised compactly with
//! `serde_json`; a handful of built-in documents when the folder is missing.
//!
//! Before criterion runs, one untimed-by-criterion pass over every step of every document
//! prints the distribution of `fill_next_token_bitmask` times (mean, p50, p99, max), with
//! forced (one-token) masks reported apart, as the design asks.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use flate2::read::GzDecoder;
use tokensieve::mask::is_token_allowed;
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Vocabulary};

const COLLECTIONS: &[&str] = &[
    "Github_easy",
    "Github_medium",
    "Glaiveai2K",
    "JsonSchemaStore",
    "Kubernetes",
    "Snowplow",
];
const PER_COLLECTION: usize = 50;

/// Used when `../shared/testdata` is missing.
const FALLBACK_DOCS: &[&str] = &[
    r#"{"name":"Ada Lovelace","born":1815,"tags":["math","poetry",null,true],"nested":{"x":-1.5e3,"y":"caf\u00e9 \"q\""}}"#,
    r#"[{"id":1,"ok":true},{"id":2,"ok":false,"why":"timeout after 30s"}]"#,
    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.27","ports":[{"containerPort":80}]}]}}"#,
];

/// A tokenizer for the documents, matching the vocabulary's ids.
enum Encoder {
    Hf(Box<tokenizers::Tokenizer>),
    Tiktoken(tiktoken_rs::CoreBPE),
}

impl Encoder {
    fn encode(&self, text: &str) -> Vec<u32> {
        match self {
            Encoder::Hf(t) => t
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default(),
            Encoder::Tiktoken(bpe) => bpe.encode_ordinary(text),
        }
    }
}

/// What the benches run on.
struct Setup {
    vocab_name: String,
    compiler: GrammarCompiler,
    /// The first compile of the JSON grammar, in ms (cold: nothing shared yet).
    first_compile_ms: f64,
    json: Arc<CompiledGrammar>,
    /// Token ids of each document, the stop token appended when the vocabulary has one.
    docs: Vec<Vec<u32>>,
}

fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shared")
}

fn load_vocab() -> (String, Vocabulary, Encoder) {
    let path = shared().join("tokenizers/llama3_1/tokenizer.json");
    if path.is_file() {
        let vocab = Vocabulary::from_tokenizer_json(&path).expect("load the Llama 3.1 vocabulary");
        let tok = tokenizers::Tokenizer::from_file(&path).expect("load the Llama 3.1 tokenizer");
        return ("llama3_1".to_string(), vocab, Encoder::Hf(Box::new(tok)));
    }
    println!(
        "note: {} is missing; using the embedded o200k_base vocabulary instead",
        path.display()
    );
    let vocab = Vocabulary::o200k_base().expect("build o200k_base");
    let bpe = tiktoken_rs::o200k_base().expect("build o200k_base");
    ("o200k_base".to_string(), vocab, Encoder::Tiktoken(bpe))
}

/// The first `PER_COLLECTION` valid instances of each collection, compact JSON.
fn load_documents() -> Vec<String> {
    let dir = shared().join("testdata/jsonschemabench");
    if !dir.is_dir() {
        println!(
            "note: {} is missing; using {} built-in documents",
            dir.display(),
            FALLBACK_DOCS.len()
        );
        return FALLBACK_DOCS.iter().map(|s| s.to_string()).collect();
    }
    let mut docs = Vec::new();
    for name in COLLECTIONS {
        let path = dir.join(name).join(format!("{name}.jsonl.gz"));
        let Ok(file) = File::open(&path) else {
            println!("note: {} is missing; skipped", path.display());
            continue;
        };
        let before = docs.len();
        for line in BufReader::new(GzDecoder::new(file)).lines() {
            let Ok(line) = line else { break };
            let Ok(record) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let tests = record["tests"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            for test in tests {
                if test["valid"] == serde_json::Value::Bool(true) {
                    if let Ok(text) = serde_json::to_string(&test["data"]) {
                        docs.push(text);
                    }
                }
            }
            if docs.len() - before >= PER_COLLECTION {
                docs.truncate(before + PER_COLLECTION);
                break;
            }
        }
    }
    docs
}

impl Setup {
    fn load() -> Setup {
        let (vocab_name, vocab, encoder) = load_vocab();
        let stop = vocab.stop_tokens().first().copied();
        // Compiles are timed: no whole-grammar cache.
        let compiler = GrammarCompiler::new(vocab).with_cache_enabled(false);
        let t = Instant::now();
        let json = compiler
            .compile_builtin_json()
            .expect("compile the JSON grammar");
        let first_compile_ms = t.elapsed().as_secs_f64() * 1e3;
        let docs = load_documents()
            .iter()
            .map(|text| {
                let mut ids = encoder.encode(text);
                ids.extend(stop);
                ids
            })
            .collect();
        Setup {
            vocab_name,
            compiler,
            first_compile_ms,
            json,
            docs,
        }
    }

    /// One pass over every step of every document, timing each mask; prints the
    /// distribution. Also checks the mask/accept invariant on the sampled tokens.
    fn report_mask_distribution(&self) {
        let words = self.compiler.vocabulary().bitmask_words();
        let mut bitmask = vec![0u32; words];
        let mut all: Vec<f64> = Vec::new();
        let mut forced: Vec<f64> = Vec::new();
        let mut rejected_docs = 0usize;
        // (µs, document, step) of the slowest mask, to find what makes the tail.
        let mut slowest = (0.0f64, 0usize, 0usize);
        for (d, doc) in self.docs.iter().enumerate() {
            let mut m = GrammarMatcher::new(self.json.clone());
            for (step, &id) in doc.iter().enumerate() {
                let t = Instant::now();
                m.fill_next_token_bitmask(&mut bitmask)
                    .expect("bitmask length");
                let us = t.elapsed().as_secs_f64() * 1e6;
                let allowed: u32 = bitmask.iter().map(|w| w.count_ones()).sum();
                all.push(us);
                if us > slowest.0 {
                    slowest = (us, d, step);
                }
                if allowed == 1 {
                    forced.push(us);
                }
                if !is_token_allowed(&bitmask, id) || !m.accept_token(id) {
                    rejected_docs += 1;
                    break;
                }
            }
        }
        let tokens: usize = self.docs.iter().map(Vec::len).sum();
        println!(
            "JSON grammar on {}: compiled in {:.1} ms ({} nodes, {} KiB); {} documents, {} tokens, {} rejected",
            self.vocab_name,
            self.first_compile_ms,
            self.json.node_count(),
            self.json.memory_bytes() / 1024,
            self.docs.len(),
            tokens,
            rejected_docs
        );
        println!("  all masks:    {}", distribution(&mut all));
        println!("  forced masks: {}", distribution(&mut forced));
        let (us, d, step) = slowest;
        let vocab = self.compiler.vocabulary();
        let before = vocab.decode_bytes(&self.docs[d][..step]);
        let tail = &before[before.len().saturating_sub(40)..];
        println!(
            "  slowest: {us:.1} µs at document {d}, step {step}, after …{:?}",
            String::from_utf8_lossy(tail)
        );
    }
}

/// "n, mean, p50, p99, max" of times in µs (sorts `us`).
fn distribution(us: &mut [f64]) -> String {
    if us.is_empty() {
        return "none".to_string();
    }
    us.sort_by(f64::total_cmp);
    let n = us.len();
    let pct = |p: f64| us[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    format!(
        "{n} masks, mean {:.2} µs, p50 {:.2} µs, p99 {:.2} µs, max {:.1} µs",
        us.iter().sum::<f64>() / n as f64,
        pct(0.50),
        pct(0.99),
        us[n - 1]
    )
}

/// Walks every step of every document, in order, one mask per call.
struct Cursor<'a> {
    setup: &'a Setup,
    doc: usize,
    step: usize,
    matcher: GrammarMatcher,
    bitmask: Vec<u32>,
}

impl<'a> Cursor<'a> {
    fn new(setup: &'a Setup) -> Self {
        Cursor {
            setup,
            doc: 0,
            step: 0,
            matcher: GrammarMatcher::new(setup.json.clone()),
            bitmask: vec![0u32; setup.compiler.vocabulary().bitmask_words()],
        }
    }

    /// Times one `fill_next_token_bitmask`, then accepts the document's token (untimed) and
    /// moves on, wrapping around to the first document at the end.
    fn step(&mut self) -> Duration {
        let t = Instant::now();
        self.matcher
            .fill_next_token_bitmask(&mut self.bitmask)
            .expect("bitmask length");
        let elapsed = t.elapsed();
        let doc = &self.setup.docs[self.doc];
        let accepted = self.matcher.accept_token(doc[self.step]);
        self.step += 1;
        if !accepted || self.step == doc.len() {
            self.doc = (self.doc + 1) % self.setup.docs.len();
            self.step = 0;
            self.matcher.reset();
        }
        elapsed
    }
}

fn bench_compile(c: &mut Criterion, setup: &Setup) {
    let mut group = c.benchmark_group("json");
    group.sample_size(10);
    group.bench_function(format!("compile_builtin_json/{}", setup.vocab_name), |b| {
        b.iter(|| setup.compiler.compile_builtin_json().expect("compile"))
    });
    group.finish();
}

fn bench_masks(c: &mut Criterion, setup: &Setup) {
    if setup.docs.iter().all(Vec::is_empty) {
        println!("no documents: mask bench skipped");
        return;
    }
    let mut cursor = Cursor::new(setup);
    let mut group = c.benchmark_group("json");
    group.throughput(Throughput::Elements(1));
    group.bench_function(
        format!("fill_next_token_bitmask/{}", setup.vocab_name),
        |b| b.iter_custom(|iters| (0..iters).map(|_| cursor.step()).sum()),
    );
    group.finish();
}

fn main() {
    let t = Instant::now();
    let setup = Setup::load();
    println!(
        "setup (vocabulary, compile, {} documents tokenised) in {:.1} s",
        setup.docs.len(),
        t.elapsed().as_secs_f64()
    );
    setup.report_mask_distribution();
    let mut c = Criterion::default().configure_from_args();
    bench_compile(&mut c, &setup);
    bench_masks(&mut c, &setup);
    c.final_summary();
}
