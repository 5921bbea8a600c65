//! `tokensieve bench`: MaskBench records teacher-forced through tokensieve (and llguidance,
//! with the `llguidance` feature), with a table of compile, mask and accept times.
//!
//! Per schema: the time from the schema to its first mask (compile, a matcher, one mask);
//! then, per valid instance, its tokens followed by the stop token, one step per token:
//! the mask is filled (timed), then the token is accepted (timed). An instance accepted to
//! the end therefore costs exactly `tokens + 1` masks and `tokens + 1` accepts; a rejected
//! one stops at the rejected token (its mask and its failing accept are counted).

pub mod engine;
#[cfg(any(feature = "llguidance", test))]
pub mod lark;
pub mod records;
pub mod stats;
pub mod tools;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde::Serialize;
use tokensieve::{GrammarCompiler, JsonSchemaOptions, Precompute, Vocabulary};

use engine::{Case, Engine, Outcome, SchemaRun};
use records::Record;
use stats::{Figures, RatioRow, SchemaFigures};

/// Arguments of `tokensieve bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Hugging Face tokenizer.json (its tokenizer_config.json beside it gives the stop token).
    #[arg(long, value_name = "PATH")]
    pub tokenizer: PathBuf,
    /// A MaskBench records file (`.jsonl.gz` or `.jsonl`), or a folder searched recursively
    /// for them (such as ../shared/testdata/jsonschemabench).
    #[arg(long, value_name = "DIR_OR_FILE")]
    pub schemas: PathBuf,
    /// Which engine to run; `both` runs tokensieve, then llguidance on the same token
    /// sequences, and prints the ratio tokensieve / llguidance per figure.
    #[arg(long, value_enum, default_value = "tokensieve")]
    pub engine: EngineChoice,
    /// Schemas run in parallel on a rayon pool of N threads (each call is still timed alone).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: u16,
    /// Also write every figure as JSON to this file (created before the run starts, so an
    /// unwritable path fails at once).
    #[arg(long, value_name = "OUT")]
    pub report: Option<PathBuf>,
    /// The old name of `--report` (deprecated: `--json` names the built-in grammar in the
    /// other sub-commands); prints a warning and works as `--report`.
    #[arg(long, value_name = "OUT", hide = true, conflicts_with = "report")]
    pub json: Option<PathBuf>,
    /// Only N schemas (N ≥ 1), spread evenly over all records (every total/N-th, in file
    /// order).
    #[arg(long, value_name = "N", value_parser = parse_limit)]
    pub limit: Option<usize>,
    /// When tokensieve computes its node masks (the library's default, `background`: a
    /// lazy compile, then the rest filled on a background pool, which on one core runs
    /// only between matcher steps and stops when the grammar is dropped; memory is then
    /// that of the masks computed so far, and `eager`'s once every mask is filled).
    #[arg(long, value_enum, default_value = "background")]
    pub precompute: PrecomputeChoice,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Tool-call mode: instead of schemas, a family's structural tag over N distinct tools
    /// from the `BFCL_*` collections under `--schemas`, one row per N (`--tools 10,100,500`).
    #[arg(long, value_name = "N,...", value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..))]
    pub tools: Option<Vec<u32>>,
    /// With `--tools`: the tool-call family (a `format_by_name` name: hermes, kimi_k2,
    /// deepseek_v3, mistral, llama3_json, ...).
    #[arg(long, value_name = "NAME", default_value = "hermes")]
    pub format: String,
}

/// `--engine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineChoice {
    /// tokensieve only.
    Tokensieve,
    /// llguidance only (needs the `llguidance` cargo feature).
    Llguidance,
    /// tokensieve, then llguidance (needs the `llguidance` cargo feature).
    Both,
}

/// `--precompute`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrecomputeChoice {
    /// Every node mask at compile time.
    Eager,
    /// Node masks on first use.
    Lazy,
    /// The first masks at compile, the rest filled on a background pool
    /// (`Precompute::Background`).
    Background,
}

/// Why the bench could not run. Each message names the file (and line) at fault.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file or folder cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A folder without any `*.jsonl.gz` / `*.jsonl` file.
    #[error("no MaskBench records (*.jsonl.gz or *.jsonl) under {}", path.display())]
    NoRecords {
        /// The folder.
        path: PathBuf,
    },
    /// A line of a records file is not a record.
    #[error("{}, line {line}: {message}", path.display())]
    BadRecord {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The tokenizer cannot be loaded or cannot encode an instance.
    #[error("tokenizer {}: {message}", path.display())]
    Tokenizer {
        /// The tokenizer file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// llguidance cannot load the tokenizer.
    #[cfg_attr(not(feature = "llguidance"), allow(dead_code))]
    #[error("llguidance cannot load the tokenizer {}: {message}", path.display())]
    Llguidance {
        /// The tokenizer file.
        path: PathBuf,
        /// Its message.
        message: String,
    },
    /// `--engine llguidance|both` in a build without the `llguidance` feature.
    #[error(
        "--engine {0} needs llguidance, which this build lacks: \
         rebuild with `cargo run --release --features llguidance --bin tokensieve -- bench ...`"
    )]
    NoLlguidance(&'static str),
    /// The rayon thread pool cannot be built.
    #[error("cannot start the thread pool: {0}")]
    Pool(String),
    /// `--tools`: an unknown family, or a tag that failed to build, compile or run.
    #[error("{0}")]
    Tools(String),
    /// The JSON report cannot be written.
    #[error("cannot write {}: {message}", path.display())]
    Output {
        /// The output file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}

/// Turns text into token ids, as the model's tokenizer does (no special tokens added).
pub trait Encode: Sync {
    /// The token ids of `text`.
    fn encode_text(&self, text: &str) -> Result<Vec<u32>, String>;
}

#[cfg(feature = "hf")]
impl Encode for tokenizers::Tokenizer {
    fn encode_text(&self, text: &str) -> Result<Vec<u32>, String> {
        self.encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| e.to_string())
    }
}

/// Tokenises every valid instance of `records` (in parallel). The error names the schema
/// and instance that failed.
pub fn tokenize(records: Vec<Record>, encoder: &dyn Encode) -> Result<Vec<Case>, String> {
    records
        .into_par_iter()
        .map(|r| {
            let instances = r
                .instances
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    encoder
                        .encode_text(text)
                        .map_err(|e| format!("{} instance {i}: {e}", r.name))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Case {
                name: r.name,
                schema: r.schema,
                instances,
            })
        })
        .collect()
}

/// The JSON Schema options tokensieve uses in the bench: the library's defaults (any
/// whitespace, properties in the order the schema map keeps), plus vendor keywords ignored,
/// as llguidance ignores keywords no draft defines.
pub fn schema_options() -> JsonSchemaOptions {
    JsonSchemaOptions {
        ignore_unknown_keywords: true,
        ..JsonSchemaOptions::default()
    }
}

/// One engine's runs and figures over every schema.
#[derive(Debug, Serialize)]
pub struct EngineReport {
    /// The engine.
    pub engine: &'static str,
    /// Wall time of the whole run, s.
    pub wall_s: f64,
    /// Figures over every schema it compiled and every instance of those.
    pub figures: Figures,
    /// Each schema's own figures, in the order of the run.
    pub per_schema: Vec<SchemaFigures>,
    /// The raw runs (not serialised).
    #[serde(skip)]
    pub runs: Vec<SchemaRun>,
}

/// Both engines on the same selection.
#[derive(Debug, Serialize)]
pub struct Comparison {
    /// What was compared.
    pub note: String,
    /// Schemas both engines compiled.
    pub schemas: usize,
    /// Instances of those that both engines accepted to the end.
    pub instances: usize,
    /// tokensieve on that selection.
    pub tokensieve: Figures,
    /// llguidance on that selection.
    pub llguidance: Figures,
    /// Ratio per figure.
    pub rows: Vec<RatioRow>,
}

/// The machine the bench ran on.
#[derive(Debug, Serialize)]
pub struct Machine {
    /// Logical CPUs available.
    pub cpus: usize,
    /// `model name` of /proc/cpuinfo, when readable.
    pub cpu_model: Option<String>,
    /// /proc/loadavg when the run started.
    pub load_before: Option<String>,
    /// /proc/loadavg when it ended.
    pub load_after: Option<String>,
}

/// Everything `--report` writes.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    /// The tokenizer file.
    pub tokenizer: String,
    /// Its vocabulary size.
    pub vocab_size: usize,
    /// The stop token fed after each instance.
    pub stop_token: u32,
    /// The records path.
    pub schemas_path: String,
    /// Records read, before `--limit`.
    pub records_total: usize,
    /// `--limit`.
    pub limit: Option<usize>,
    /// Schemas run.
    pub schemas: usize,
    /// Valid instances of those.
    pub instances: usize,
    /// Their tokens (stop tokens not included).
    pub instance_tokens: usize,
    /// `--threads`.
    pub threads: u16,
    /// `--precompute`.
    pub precompute: PrecomputeChoice,
    /// The machine.
    pub machine: Machine,
    /// One per engine, in the order run.
    pub engines: Vec<EngineReport>,
    /// With `--engine both`.
    pub comparison: Option<Comparison>,
}

/// Runs `engine` over `cases` and computes its figures.
pub fn bench_engine<E: Engine>(
    engine: &E,
    cases: &[Case],
    stop: u32,
    threads: u16,
    quiet: bool,
) -> Result<EngineReport, BenchError> {
    let progress = if quiet {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(cases.len() as u64);
        if let Ok(style) = ProgressStyle::with_template(
            "{msg:>10} [{bar:40}] {pos}/{len} schemas {elapsed} (eta {eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(engine.name());
        bar
    };
    let t = Instant::now();
    let runs = engine::run_all(engine, cases, stop, threads as usize, &progress)?;
    progress.finish_and_clear();
    let figures = Figures::of(&runs, |_| true, |_, _| true);
    Ok(EngineReport {
        engine: engine.name(),
        wall_s: t.elapsed().as_secs_f64(),
        figures,
        per_schema: runs.iter().map(SchemaFigures::of).collect(),
        runs,
    })
}

/// The comparison of two engines' runs: schemas both compiled, instances both accepted.
pub fn compare(ts: &[SchemaRun], llg: &[SchemaRun]) -> Comparison {
    let both_schema = |s: usize| ts[s].compile_ms.is_some() && llg[s].compile_ms.is_some();
    let both_instance = |s: usize, i: usize| {
        ts[s].instances[i].outcome == Outcome::Accepted
            && llg[s].instances[i].outcome == Outcome::Accepted
    };
    let a = Figures::of(ts, both_schema, both_instance);
    let b = Figures::of(llg, both_schema, both_instance);
    Comparison {
        note: format!(
            "only the {} schemas both engines compile, and of their instances the {} both \
             engines accept to the end (so both run exactly the same token sequences)",
            a.schemas, a.instances
        ),
        schemas: a.schemas,
        instances: a.instances,
        rows: stats::ratios(&a, &b),
        tokensieve: a,
        llguidance: b,
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
}

#[cfg(feature = "hf")]
fn load_tokenizer(path: &Path) -> Result<(Vocabulary, tokenizers::Tokenizer), BenchError> {
    let fail = |message: String| BenchError::Tokenizer {
        path: path.to_path_buf(),
        message,
    };
    let vocab = Vocabulary::from_tokenizer_json(path).map_err(|e| fail(e.to_string()))?;
    let tok = tokenizers::Tokenizer::from_file(path).map_err(|e| fail(e.to_string()))?;
    Ok((vocab, tok))
}

/// `tokensieve bench`: loads, runs, prints the tables on stdout (progress on stderr).
#[cfg(feature = "hf")]
pub fn run(args: &BenchArgs, out: &mut dyn Write) -> Result<(), BenchError> {
    let load_before = read_trimmed("/proc/loadavg");
    if args.engine != EngineChoice::Tokensieve && !cfg!(feature = "llguidance") {
        return Err(BenchError::NoLlguidance(match args.engine {
            EngineChoice::Both => "both",
            _ => "llguidance",
        }));
    }
    if args.json.is_some() {
        eprintln!("tokensieve bench: --json FILE is deprecated, use --report FILE");
    }
    let report_path = args.report.as_ref().or(args.json.as_ref());
    let json_file = match report_path {
        Some(path) => Some(std::fs::File::create(path).map_err(|e| BenchError::Output {
            path: path.clone(),
            message: e.to_string(),
        })?),
        None => None,
    };
    let (vocab, tokenizer) = load_tokenizer(&args.tokenizer)?;
    let stop = *vocab
        .stop_tokens()
        .first()
        .ok_or_else(|| BenchError::Tokenizer {
            path: args.tokenizer.clone(),
            message: "no stop token (no eos_token in a tokenizer_config.json beside it)".into(),
        })?;
    let precompute = match args.precompute {
        PrecomputeChoice::Eager => Precompute::Eager,
        PrecomputeChoice::Lazy => Precompute::Lazy,
        PrecomputeChoice::Background => Precompute::Background,
    };
    if let Some(ns) = &args.tools {
        return run_tools(
            args,
            ns,
            vocab,
            &tokenizer,
            precompute,
            report_path,
            json_file,
            out,
        );
    }
    let files = records::record_files(&args.schemas)?;
    let all = records::load_records(&files)?;
    let records_total = all.len();
    let picked = records::sample(all, args.limit);
    let cases = tokenize(picked, &tokenizer).map_err(|message| BenchError::Tokenizer {
        path: args.tokenizer.clone(),
        message,
    })?;
    let vocab_size = vocab.vocab_size();
    // No whole-grammar cache: every schema is distinct, and the cache would keep them all.
    let compiler = GrammarCompiler::new(vocab)
        .with_precompute(precompute)
        .with_cache_enabled(false);
    let mut report = BenchReport {
        tokenizer: args.tokenizer.display().to_string(),
        vocab_size,
        stop_token: stop,
        schemas_path: args.schemas.display().to_string(),
        records_total,
        limit: args.limit,
        schemas: cases.len(),
        instances: cases.iter().map(|c| c.instances.len()).sum(),
        instance_tokens: cases.iter().flat_map(|c| &c.instances).map(Vec::len).sum(),
        threads: args.threads,
        precompute: args.precompute,
        machine: Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model: cpu_model(),
            load_before,
            load_after: None,
        },
        engines: Vec::new(),
        comparison: None,
    };
    if args.engine != EngineChoice::Llguidance {
        let ts = engine::Tokensieve::new(compiler.clone(), schema_options());
        report
            .engines
            .push(bench_engine(&ts, &cases, stop, args.threads, args.quiet)?);
    }
    #[cfg(feature = "llguidance")]
    if args.engine != EngineChoice::Tokensieve {
        let llg = engine::Llguidance::new(&args.tokenizer, stop)?;
        report
            .engines
            .push(bench_engine(&llg, &cases, stop, args.threads, args.quiet)?);
    }
    if let [a, b] = &report.engines[..] {
        report.comparison = Some(compare(&a.runs, &b.runs));
    }
    report.machine.load_after = read_trimmed("/proc/loadavg");
    let vocab = compiler.vocabulary();
    let context = |name: &str, i: usize, step: usize| -> String {
        cases
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.instances.get(i))
            .map_or_else(String::new, |ids| {
                let before = vocab.decode_bytes(&ids[..step.min(ids.len())]);
                let tail = &before[before.len().saturating_sub(40)..];
                format!(
                    "{}{:?}",
                    if tail.len() < before.len() { "…" } else { "" },
                    String::from_utf8_lossy(tail)
                )
            })
    };
    let text = render(&report, &context);
    write_outputs(out, &text, report_path, json_file, &report)?;
    Ok(())
}

/// `--limit`: a count of schemas, at least 1.
fn parse_limit(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1 (omit --limit to run every schema)".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Writes the table to `out` and, with `--report`, `figures` as JSON to its file.
fn write_outputs(
    out: &mut dyn Write,
    text: &str,
    report_path: Option<&PathBuf>,
    json_file: Option<std::fs::File>,
    figures: &impl Serialize,
) -> Result<(), BenchError> {
    out.write_all(text.as_bytes())
        .map_err(|e| BenchError::Output {
            path: PathBuf::from("<stdout>"),
            message: e.to_string(),
        })?;
    if let (Some(path), Some(file)) = (report_path, json_file) {
        serde_json::to_writer_pretty(std::io::BufWriter::new(file), figures).map_err(|e| {
            BenchError::Output {
                path: path.clone(),
                message: e.to_string(),
            }
        })?;
    }
    Ok(())
}

/// `bench --tools`: one tag per N on tokensieve (a fresh compiler each) and, with
/// `--engine both|llguidance`, on llguidance (its Lark form, [`lark`]) with the same
/// tokens; the table on `out`, the runs as JSON to `--report`.
#[cfg(feature = "hf")]
#[allow(clippy::too_many_arguments)]
fn run_tools(
    args: &BenchArgs,
    ns: &[u32],
    vocab: Vocabulary,
    tokenizer: &tokenizers::Tokenizer,
    precompute: Precompute,
    report_path: Option<&PathBuf>,
    json_file: Option<std::fs::File>,
    out: &mut dyn Write,
) -> Result<(), BenchError> {
    let load_before = read_trimmed("/proc/loadavg");
    let format = tokensieve_tools::format_by_name(&args.format).ok_or_else(|| {
        BenchError::Tools(format!(
            "--format {}: no such tool-call family (known: {})",
            args.format,
            tokensieve_tools::format_names().join(", ")
        ))
    })?;
    let cases = tools::load_tools(&args.schemas)?;
    let vocab = Arc::new(vocab);
    let stop = *vocab
        .stop_tokens()
        .first()
        .ok_or_else(|| BenchError::Tools("the vocabulary has no stop token".into()))?;
    #[cfg(feature = "llguidance")]
    let llg = match args.engine {
        EngineChoice::Tokensieve => None,
        _ => Some(engine::Llguidance::new(&args.tokenizer, stop)?),
    };
    let mut runs = Vec::new();
    for &n in ns {
        let n = n as usize;
        if n > cases.len() {
            eprintln!(
                "tokensieve bench: --tools {n}: only {} distinct BFCL tools; using them all",
                cases.len()
            );
        }
        let fail = |message: String| BenchError::Tools(format!("--tools {n}: {message}"));
        let bench = tools::prepare(format.as_ref(), &cases, n, tokenizer, stop).map_err(fail)?;
        if args.engine != EngineChoice::Llguidance {
            let ts = tools::tokensieve_engine(&vocab, precompute);
            runs.push(tools::run_engine(&ts, &bench).map_err(fail)?);
        }
        #[cfg(feature = "llguidance")]
        if let Some(llg) = &llg {
            runs.push(
                tools::run_engine(llg, &bench).map_err(|e| fail(format!("llguidance: {e}")))?,
            );
        }
    }
    let precompute_name = match args.precompute {
        PrecomputeChoice::Eager => "eager",
        PrecomputeChoice::Lazy => "lazy",
        PrecomputeChoice::Background => "background",
    };
    let load = format!(
        "load average before {}, after {}",
        load_before.as_deref().unwrap_or("?"),
        read_trimmed("/proc/loadavg").as_deref().unwrap_or("?")
    );
    let text = tools::render(
        &args.format,
        &args.tokenizer.display().to_string(),
        precompute_name,
        &load,
        &runs,
    );
    write_outputs(out, &text, report_path, json_file, &runs)?;
    Ok(())
}

/// Without the `hf` feature there is no tokenizer.json loader.
#[cfg(not(feature = "hf"))]
pub fn run(_: &BenchArgs, _: &mut dyn Write) -> Result<(), BenchError> {
    Err(BenchError::Tokenizer {
        path: PathBuf::new(),
        message: "`tokensieve bench` needs the `hf` feature, which this build lacks".into(),
    })
}

/// The report as Markdown: the header, the per-engine table, the ratio table, the worst
/// schemas.
pub fn render(report: &BenchReport, context: &dyn Fn(&str, usize, usize) -> String) -> String {
    let mut s = String::new();
    let m = &report.machine;
    s.push_str(&format!(
        "tokenizer {} ({} tokens, stop token {}); {} of {} schemas from {} ({} valid \
         instances, {} tokens); {} thread(s); tokensieve precompute {:?}\n",
        report.tokenizer,
        report.vocab_size,
        report.stop_token,
        report.schemas,
        report.records_total,
        report.schemas_path,
        report.instances,
        report.instance_tokens,
        report.threads,
        report.precompute,
    ));
    s.push_str(&format!(
        "machine: {} CPUs, {}; load average before {}, after {}\n",
        m.cpus,
        m.cpu_model.as_deref().unwrap_or("unknown CPU"),
        m.load_before.as_deref().unwrap_or("?"),
        m.load_after.as_deref().unwrap_or("?"),
    ));
    for e in &report.engines {
        s.push_str(&format!("{}: {:.1} s wall\n", e.engine, e.wall_s));
    }
    s.push_str("\n### Each engine on every schema it compiles\n\n");
    let cols: Vec<(&str, &Figures)> = report
        .engines
        .iter()
        .map(|e| (e.engine, &e.figures))
        .collect();
    s.push_str(&stats::engine_table(&cols));
    if let Some(c) = &report.comparison {
        s.push_str(&format!("\n### Side by side: {}\n\n", c.note));
        s.push_str(&stats::ratio_table(&c.rows));
    }
    s.push('\n');
    for e in &report.engines {
        s.push_str(&stats::worst_lists(e.engine, &e.figures, context));
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests;
