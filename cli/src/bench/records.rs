//! MaskBench records: one JSON object per line, `{"file", "schema", "tests": [{"valid",
//! "data"}, ...]}`, in `*.jsonl.gz` (gzip) or `*.jsonl` files (the layout of
//! `../shared/testdata/jsonschemabench/<Collection>/<Collection>.jsonl.gz`).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::BenchError;

/// One schema with the text of each of its valid instances.
#[derive(Clone, Debug)]
pub struct Record {
    /// `<file stem>/<record's "file">` (or `<file stem>:<line>` without a `file` key).
    pub name: String,
    /// The JSON Schema.
    pub schema: Value,
    /// The valid instances (`tests[i].valid == true`), serialised compactly by serde_json
    /// (key order as read: the instance's own order with serde_json's `preserve_order`,
    /// sorted otherwise, which matches the order the JSON Schema front end expects).
    pub instances: Vec<String>,
}

/// The record files under `path`: `path` itself when it is a file, else every `*.jsonl.gz`
/// and `*.jsonl` file below it (recursively), sorted by path.
pub fn record_files(path: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let meta = std::fs::metadata(path).map_err(|source| BenchError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| BenchError::Io {
            path: dir.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| BenchError::Io {
                path: dir.clone(),
                source,
            })?;
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                if name.is_some_and(|n| n.ends_with(".jsonl.gz") || n.ends_with(".jsonl")) {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(BenchError::NoRecords {
            path: path.to_path_buf(),
        });
    }
    Ok(out)
}

/// Reads every record of `files` in order. A line that is not a JSON object with a `schema`
/// is an error naming the file and line.
pub fn load_records(files: &[PathBuf]) -> Result<Vec<Record>, BenchError> {
    let mut out = Vec::new();
    for path in files {
        let file = File::open(path).map_err(|source| BenchError::Io {
            path: path.clone(),
            source,
        })?;
        let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
            Box::new(flate2::read::GzDecoder::new(file))
        } else {
            Box::new(file)
        };
        let stem = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
            .trim_end_matches(".gz")
            .trim_end_matches(".jsonl")
            .to_string();
        for (index, line) in BufReader::new(reader).lines().enumerate() {
            let bad = |message: String| BenchError::BadRecord {
                path: path.clone(),
                line: index + 1,
                message,
            };
            let line = line.map_err(|e| bad(format!("cannot read: {e}")))?;
            if line.trim().is_empty() {
                continue;
            }
            let mut rec: Value =
                serde_json::from_str(&line).map_err(|e| bad(format!("not JSON: {e}")))?;
            let Some(obj) = rec.as_object_mut() else {
                return Err(bad("not a JSON object".into()));
            };
            let schema = obj
                .remove("schema")
                .ok_or_else(|| bad("no `schema` key".into()))?;
            let name = match obj.get("file").and_then(Value::as_str) {
                Some(f) => format!("{stem}/{f}"),
                None => format!("{stem}:{}", index + 1),
            };
            let mut instances = Vec::new();
            if let Some(tests) = obj.get("tests") {
                let tests = tests
                    .as_array()
                    .ok_or_else(|| bad("`tests` is not an array".into()))?;
                for t in tests {
                    if t.get("valid") == Some(&Value::Bool(true)) {
                        let data = t
                            .get("data")
                            .ok_or_else(|| bad("a test without `data`".into()))?;
                        instances.push(data.to_string());
                    }
                }
            }
            out.push(Record {
                name,
                schema,
                instances,
            });
        }
    }
    Ok(out)
}

/// `limit` records spread evenly over `records` (indices `⌊i·n/limit⌋`), or all of them.
pub fn sample(records: Vec<Record>, limit: Option<usize>) -> Vec<Record> {
    let n = records.len();
    match limit {
        Some(k) if k < n => {
            let keep: Vec<usize> = (0..k).map(|i| i * n / k).collect();
            let mut next = keep.iter().peekable();
            records
                .into_iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    if next.peek() == Some(&&i) {
                        next.next();
                        Some(r)
                    } else {
                        None
                    }
                })
                .collect()
        }
        _ => records,
    }
}
