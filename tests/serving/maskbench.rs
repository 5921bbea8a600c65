#![allow(dead_code)] // each test binary uses some of the helpers
//! MaskBench records (`../shared/testdata/jsonschemabench/<Collection>/<Collection>.jsonl.gz`)
//! in the order `tokensieve bench` reads them (files sorted by path), and its `--limit`
//! sample (record `⌊i·n/k⌋` for `i < k`).

use std::io::BufRead;

/// One record: its name, schema and valid instances (compact JSON text).
pub struct Record {
    pub name: String,
    pub schema: serde_json::Value,
    pub valid: Vec<String>,
}

/// Every record, files sorted by path; `None` (after printing why) when the data is missing.
pub fn all_records() -> Option<Vec<Record>> {
    let dir = super::common::testdata_path("jsonschemabench")?;
    let mut files = Vec::new();
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read folder").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".jsonl.gz") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let f = std::fs::File::open(&path).expect("open");
        for line in std::io::BufReader::new(flate2::read::GzDecoder::new(f)).lines() {
            let line = line.expect("line");
            if line.trim().is_empty() {
                continue;
            }
            let mut rec: serde_json::Value = serde_json::from_str(&line).expect("record");
            let valid = rec["tests"]
                .as_array()
                .map(|t| {
                    t.iter()
                        .filter(|t| t["valid"] == serde_json::Value::Bool(true))
                        .map(|t| t["data"].to_string())
                        .collect()
                })
                .unwrap_or_default();
            out.push(Record {
                name: rec["file"].as_str().unwrap_or("?").to_string(),
                schema: rec["schema"].take(),
                valid,
            });
        }
    }
    Some(out)
}

/// The `k` records `tokensieve bench --limit k` picks.
pub fn bench_sample(k: usize) -> Option<Vec<Record>> {
    let all = all_records()?;
    let n = all.len();
    let keep: std::collections::HashSet<usize> = (0..k.min(n)).map(|i| i * n / k).collect();
    Some(
        all.into_iter()
            .enumerate()
            .filter(|(i, _)| keep.contains(i))
            .map(|(_, r)| r)
            .collect(),
    )
}

/// The JSON Schema options of `tokensieve bench`.
pub fn bench_options() -> tokensieve::JsonSchemaOptions {
    tokensieve::JsonSchemaOptions {
        ignore_unknown_keywords: true,
        ..Default::default()
    }
}
