//! Serialized size and load time of compiled grammars against their compile time, on the
//! schemas `tokensieve bench --limit N` picks (MaskBench, `../shared/testdata/jsonschemabench`)
//! with the Llama 3.1 tokenizer:
//!
//! ```sh
//! cargo run --release --example serialize_grammars -- [N=100] [tokenizer.json] [schemas folder]
//! ```
//!
//! Per schema that compiles (eager precompute): compile time, serialized bytes, the time
//! of `CompiledGrammar::deserialize`, and of the first mask after loading. Prints totals,
//! medians and the ratios load / compile, all from the same run (on a loaded machine, the
//! ratios mean more than the times).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokensieve::{
    CompiledGrammar, GrammarCompiler, GrammarMatcher, JsonSchemaOptions, Precompute, Vocabulary,
};

/// Every `*.jsonl.gz` under `dir`, sorted by path, as `tokensieve bench` reads them.
fn record_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)
            .expect("read the schemas folder")
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".jsonl.gz") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let k: usize = args.get(1).map_or(Ok(100), |s| s.parse())?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    let tok = args
        .get(2)
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("tokenizers/llama3_1/tokenizer.json"));
    let dir = args
        .get(3)
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("testdata/jsonschemabench"));
    let mut schemas = Vec::new();
    for f in record_files(&dir) {
        let r = flate2::read::GzDecoder::new(std::fs::File::open(&f)?);
        for line in std::io::BufReader::new(r).lines() {
            let line = line?;
            if !line.trim().is_empty() {
                let v: serde_json::Value = serde_json::from_str(&line)?;
                schemas.push(v["schema"].clone());
            }
        }
    }
    let n = schemas.len();
    let picked: Vec<&serde_json::Value> = (0..k.min(n)).map(|i| &schemas[i * n / k]).collect();
    let vocab = Vocabulary::from_tokenizer_json(&tok)?;
    // The cache would answer a second compile of the same schema: off, to time compiles.
    // Eager: every mask is computed at compile and written (the default background fill
    // would still be running when the grammar is serialized).
    let compiler = GrammarCompiler::new(vocab)
        .with_precompute(Precompute::Eager)
        .with_cache_enabled(false);
    let options = JsonSchemaOptions {
        ignore_unknown_keywords: true,
        ..Default::default()
    };
    let (mut compile, mut load, mut first, mut sizes) = (vec![], vec![], vec![], vec![]);
    let mut memory = 0usize;
    for schema in picked {
        let t = Instant::now();
        let Ok(g) = compiler.compile_json_schema(schema, &options) else {
            continue;
        };
        compile.push(t.elapsed().as_secs_f64() * 1e3);
        memory += g.memory_bytes();
        let bytes = g.serialize()?;
        sizes.push(bytes.len() as f64);
        let t = Instant::now();
        let back = CompiledGrammar::deserialize(&bytes, &compiler)?;
        load.push(t.elapsed().as_secs_f64() * 1e3);
        let mut m = GrammarMatcher::new(back);
        let mut mask = vec![0u32; m.bitmask_words()];
        let t = Instant::now();
        m.fill_next_token_bitmask(&mut mask)?;
        first.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    let (tc, tl, tf, ts) = (sum(&compile), sum(&load), sum(&first), sum(&sizes));
    let load_avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{} of {k} schemas compiled (eager), load average {}",
        compile.len(),
        load_avg.trim()
    );
    println!(
        "serialized: total {:.1} MiB, median {:.1} KiB, max {:.1} KiB (in memory: {:.1} MiB)",
        ts / 1048576.0,
        median(&mut sizes.clone()) / 1024.0,
        sizes.iter().copied().fold(0.0, f64::max) / 1024.0,
        memory as f64 / 1048576.0
    );
    println!(
        "compile: total {tc:.0} ms, median {:.2} ms",
        median(&mut compile.clone())
    );
    println!(
        "load:    total {tl:.0} ms, median {:.2} ms",
        median(&mut load.clone())
    );
    println!(
        "first mask after load: total {tf:.1} ms, median {:.3} ms",
        median(&mut first.clone())
    );
    let mut ratios: Vec<f64> = load.iter().zip(&compile).map(|(l, c)| l / c).collect();
    println!(
        "load / compile: total {:.3}, median per schema {:.3}",
        tl / tc,
        median(&mut ratios)
    );
    Ok(())
}
