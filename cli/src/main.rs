//! `tokensieve`: compile a grammar and print it, check a text against a grammar and a
//! tokenizer, show the token masks step by step, benchmark engines on MaskBench schemas
//! (`bench`, in `bench/`), or measure a real model's tool-call accuracy with and
//! without constraints (`eval-tools`, feature `llm-demo`, in `eval_tools/`).
//!
//! Exit codes: 0 when the command succeeded (for `check` and `masks`: the text was
//! accepted), 1 when the text was rejected, 2 for bad input (unreadable file, grammar
//! syntax error, tokenizer that cannot be loaded, bad arguments).

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

mod bench;
#[cfg(feature = "llm-demo")]
mod eval_tools;

use clap::{Args, Parser, Subcommand};
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, TokenRejection, Vocabulary};

const EXIT_REJECTED: u8 = 1;
const EXIT_BAD_INPUT: u8 = 2;

#[derive(Parser)]
#[command(
    name = "tokensieve",
    version,
    about = "Constrained decoding: compile grammars, check texts, show token masks",
    after_help = "Exit codes: 0 success / accepted, 1 rejected, 2 bad input.\n\
                  Without --tokenizer, the embedded o200k_base vocabulary (GPT-4o) is used."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile a grammar; print it as EBNF (the rules its root reaches) with its node count,
    /// memory and compile time.
    Compile {
        #[command(flatten)]
        grammar: GrammarSource,
        #[command(flatten)]
        options: Options,
    },
    /// Tokenise a text and feed it to a grammar matcher: accepted, or rejected at token N.
    Check {
        #[command(flatten)]
        grammar: GrammarSource,
        #[command(flatten)]
        text: TextSource,
        #[command(flatten)]
        options: Options,
        /// Accept a text that is only a prefix of a match (the grammar need not end there).
        #[arg(long)]
        partial: bool,
        /// Output: `text`, or `json` for one machine-readable object.
        #[arg(long, value_enum, default_value = "text")]
        format: OutputFormat,
    },
    /// As `check`, printing every step: the token, the allowed-token count, the mask time.
    Masks {
        #[command(flatten)]
        grammar: GrammarSource,
        #[command(flatten)]
        text: TextSource,
        #[command(flatten)]
        options: Options,
        /// Output: `text`, or `json` for one machine-readable object.
        #[arg(long, value_enum, default_value = "text")]
        format: OutputFormat,
    },
    /// Teacher-force MaskBench schemas' valid instances token by token: compile, mask and
    /// accept times per engine (tokensieve, and llguidance with the `llguidance` feature).
    Bench(bench::BenchArgs),
    /// Tool-call accuracy of a GGUF model (SmolLM2-135M-Instruct) on BFCL questions,
    /// unconstrained vs constrained (Hermes format, tool_choice = required): parse rate,
    /// offered tool, schema validity, answer match, tokens/s, mask cost per token.
    #[cfg(feature = "llm-demo")]
    EvalTools(eval_tools::EvalToolsArgs),
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct GrammarSource {
    /// EBNF / GBNF grammar file (XGrammar's dialect or llama.cpp GBNF).
    #[arg(long, value_name = "FILE")]
    grammar: Option<PathBuf>,
    /// The built-in grammar of any JSON value.
    #[arg(long)]
    json: bool,
    /// A JSON Schema file, compiled with `compile_json_schema` (default options; see
    /// `--any-order` and `--lenient`). Its matcher also checks that no object key repeats.
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    /// A file holding one regular expression (`compile_regex`; a final newline is not part
    /// of the pattern).
    #[arg(long, value_name = "FILE")]
    regex: Option<PathBuf>,
    /// A structural tag in XGrammar's JSON format (`compile_structural_tag`).
    #[arg(long, value_name = "FILE")]
    structural_tag: Option<PathBuf>,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct TextSource {
    /// File holding the text to check (`-` reads standard input).
    #[arg(long, value_name = "FILE")]
    text: Option<PathBuf>,
    /// The text to check, given inline.
    #[arg(long, value_name = "S")]
    string: Option<String>,
}

#[derive(Args)]
struct Options {
    /// Hugging Face tokenizer.json (its tokenizer_config.json beside it gives the stop
    /// token); default: the embedded o200k_base.
    #[arg(long, value_name = "PATH")]
    tokenizer: Option<PathBuf>,
    /// Name of the grammar's root rule (with --grammar).
    #[arg(long, value_name = "NAME", default_value = "root")]
    root: String,
    /// With --schema: declared properties in any order (`JsonSchemaOptions::any_order`).
    #[arg(long)]
    any_order: bool,
    /// With --schema: ignore the keywords tokensieve cannot enforce instead of refusing the
    /// schema (`JsonSchemaOptions::lenient`); the ignored keywords are listed on stderr.
    #[arg(long)]
    lenient: bool,
}

/// How `check` and `masks` print their result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OutputFormat {
    /// Lines for people (the default).
    Text,
    /// One JSON object on stdout (see `CheckReport`); errors still go to stderr.
    Json,
}

/// A failed command: what to print on stderr and the exit code.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn bad_input(message: impl Into<String>) -> Self {
        Failure {
            code: EXIT_BAD_INPUT,
            message: message.into(),
        }
    }
}

impl From<io::Error> for Failure {
    /// Writing to stdout failed. A closed pipe (`tokensieve masks ... | head`) is not an
    /// error worth reporting: exit quietly with success.
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure {
                code: 0,
                message: String::new(),
            }
        } else {
            Failure::bad_input(format!("cannot write output: {e}"))
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(f) => {
            if !f.message.is_empty() {
                eprintln!("tokensieve: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Compile { grammar, options } => compile_cmd(&grammar, &options),
        Command::Check {
            grammar,
            text,
            options,
            partial,
            format,
        } => check_cmd(&grammar, &text, &options, partial, false, format),
        Command::Masks {
            grammar,
            text,
            options,
            format,
        } => check_cmd(&grammar, &text, &options, false, true, format),
        Command::Bench(args) => {
            let mut out = io::stdout().lock();
            bench::run(&args, &mut out).map_err(|e| Failure::bad_input(e.to_string()))?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "llm-demo")]
        Command::EvalTools(args) => {
            let mut out = io::stdout().lock();
            eval_tools::run(&args, &mut out).map_err(Failure::bad_input)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A vocabulary with its display name and load time.
struct LoadedVocab {
    name: String,
    vocab: Vocabulary,
    millis: f64,
}

fn load_vocab(tokenizer: Option<&Path>) -> Result<LoadedVocab, Failure> {
    let t = Instant::now();
    let (name, vocab) = match tokenizer {
        Some(path) => (path.display().to_string(), vocab_from_file(path)?),
        None => ("o200k_base (embedded)".to_string(), vocab_o200k()?),
    };
    Ok(LoadedVocab {
        name,
        vocab,
        millis: millis(t),
    })
}

#[cfg(feature = "hf")]
fn vocab_from_file(path: &Path) -> Result<Vocabulary, Failure> {
    Vocabulary::from_tokenizer_json(path).map_err(|e| Failure::bad_input(e.to_string()))
}

#[cfg(not(feature = "hf"))]
fn vocab_from_file(_: &Path) -> Result<Vocabulary, Failure> {
    Err(Failure::bad_input(
        "--tokenizer needs the `hf` feature, which this build lacks",
    ))
}

#[cfg(feature = "tiktoken")]
fn vocab_o200k() -> Result<Vocabulary, Failure> {
    Vocabulary::o200k_base().map_err(|e| Failure::bad_input(e.to_string()))
}

#[cfg(not(feature = "tiktoken"))]
fn vocab_o200k() -> Result<Vocabulary, Failure> {
    Err(Failure::bad_input(
        "this build lacks the `tiktoken` feature (embedded o200k_base): pass --tokenizer",
    ))
}

/// Turns text into token ids, as the model's tokenizer does (special tokens written in the
/// text become special tokens; no BOS is added).
fn encode(tokenizer: Option<&Path>, text: &str) -> Result<Vec<u32>, Failure> {
    match tokenizer {
        Some(path) => encode_hf(path, text),
        None => encode_o200k(text),
    }
}

#[cfg(feature = "hf")]
fn encode_hf(path: &Path, text: &str) -> Result<Vec<u32>, Failure> {
    let tok = tokenizers::Tokenizer::from_file(path).map_err(|e| {
        Failure::bad_input(format!("cannot load tokenizer {}: {e}", path.display()))
    })?;
    let enc = tok
        .encode(text, false)
        .map_err(|e| Failure::bad_input(format!("cannot tokenise the text: {e}")))?;
    Ok(enc.get_ids().to_vec())
}

#[cfg(not(feature = "hf"))]
fn encode_hf(_: &Path, _: &str) -> Result<Vec<u32>, Failure> {
    Err(Failure::bad_input(
        "--tokenizer needs the `hf` feature, which this build lacks",
    ))
}

#[cfg(feature = "tiktoken")]
fn encode_o200k(text: &str) -> Result<Vec<u32>, Failure> {
    let bpe = tiktoken_rs::o200k_base()
        .map_err(|e| Failure::bad_input(format!("cannot build o200k_base: {e:#}")))?;
    Ok(bpe.encode_with_special_tokens(text))
}

#[cfg(not(feature = "tiktoken"))]
fn encode_o200k(_: &str) -> Result<Vec<u32>, Failure> {
    Err(Failure::bad_input(
        "this build lacks the `tiktoken` feature (embedded o200k_base): pass --tokenizer",
    ))
}

fn read_file(path: &Path, what: &str) -> Result<String, Failure> {
    let result = if path == Path::new("-") {
        let mut s = String::new();
        io::stdin().read_to_string(&mut s).map(|_| s)
    } else {
        std::fs::read_to_string(path)
    };
    result.map_err(|e| Failure::bad_input(format!("cannot read {what} {}: {e}", path.display())))
}

/// Compiles the grammar the arguments name; returns it with its compile time in ms.
fn compile(
    source: &GrammarSource,
    options: &Options,
    vocab: Vocabulary,
) -> Result<(Arc<CompiledGrammar>, f64), Failure> {
    let compiler = GrammarCompiler::new(vocab);
    let t = Instant::now();
    let compiled = match &source.grammar {
        Some(path) => {
            let ebnf = read_file(path, "grammar")?;
            compiler
                .compile_grammar_with_root(&ebnf, &options.root)
                .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))?
        }
        None => match (&source.schema, &source.regex, &source.structural_tag) {
            (Some(path), _, _) => {
                let text = read_file(path, "schema")?;
                let opts = tokensieve::JsonSchemaOptions {
                    any_order: options.any_order,
                    lenient: options.lenient,
                    ..Default::default()
                };
                let compiled = compiler
                    .compile_json_schema(text.as_str(), &opts)
                    .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))?;
                if options.lenient {
                    report_ignored(path, &text, &opts);
                }
                compiled
            }
            (None, Some(path), _) => {
                let text = read_file(path, "regex")?;
                let pattern = text.strip_suffix('\n').unwrap_or(&text);
                let pattern = pattern.strip_suffix('\r').unwrap_or(pattern);
                compiler
                    .compile_regex(pattern)
                    .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))?
            }
            (None, None, Some(path)) => {
                let text = read_file(path, "structural tag")?;
                compiler
                    .compile_structural_tag(text.as_str())
                    .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))?
            }
            (None, None, None) => compiler
                .compile_builtin_json()
                .map_err(|e| Failure::bad_input(e.to_string()))?,
        },
    };
    Ok((compiled, millis(t)))
}

/// Lists on stderr the keywords `--lenient` left unenforced in the schema at `path`.
fn report_ignored(path: &Path, text: &str, opts: &tokensieve::JsonSchemaOptions) {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    if let Ok(report) = tokensieve::json_schema::json_schema_to_grammar_with_report(&value, opts) {
        for k in &report.ignored {
            eprintln!(
                "tokensieve: {}: --lenient ignored `{}` at {:?}: {}",
                path.display(),
                k.keyword,
                k.pointer,
                k.reason
            );
        }
    }
}

fn compile_cmd(source: &GrammarSource, options: &Options) -> Result<ExitCode, Failure> {
    let loaded = load_vocab(options.tokenizer.as_deref())?;
    let tokens = loaded.vocab.vocab_size();
    let (compiled, compile_ms) = compile(source, options, loaded.vocab)?;
    let mut out = io::stdout().lock();
    // Only the rules the root reaches (front ends may leave helpers an optimization made
    // unused). The statistics are EBNF comments, so the output stays a grammar that parses
    // back.
    write!(out, "{}", compiled.grammar().reachable_only())?;
    writeln!(
        out,
        "# vocabulary: {} ({tokens} tokens, loaded in {:.1} ms)",
        loaded.name, loaded.millis
    )?;
    if source.schema.is_some() {
        writeln!(
            out,
            "# object keys: each at most once per object (checked by the matcher beside this grammar)"
        )?;
        for (rule, names) in compiled.checked_keys() {
            writeln!(
                out,
                "# {rule}: a key that decodes to none of {names:?} (checked by the matcher when it ends)"
            )?;
        }
    }
    writeln!(out, "# nodes: {}", compiled.node_count())?;
    // The default precompute fills the masks in the background after compile: the memory
    // printed is that of the filled grammar.
    compiled.wait_background();
    writeln!(out, "# memory: {} bytes", compiled.memory_bytes())?;
    writeln!(
        out,
        "# compile: {compile_ms:.2} ms (token masks then filled in the background)"
    )?;
    Ok(ExitCode::SUCCESS)
}

/// One step of `masks --format json`.
#[derive(serde::Serialize)]
struct StepReport {
    /// Position of the token in the text's tokens (the last step, after every token, has
    /// `id: null`).
    step: usize,
    /// The token fed at this step.
    id: Option<u32>,
    /// The token as an escaped string.
    token: Option<String>,
    /// How many tokens the mask allowed before the token was fed.
    allowed: u32,
    /// Whether the token fed was among them (at the last step: whether a stop token was).
    token_allowed: bool,
    /// The mask's time, µs.
    micros: f64,
}

/// Where `check` / `masks --format json` rejected a token.
#[derive(serde::Serialize)]
struct RejectionReport {
    /// Position of the token in the text's tokens.
    step: usize,
    /// Its id.
    id: u32,
    /// The token as an escaped string.
    token: String,
    /// The output bytes accepted before it.
    byte: usize,
    /// Why it was rejected (the `TokenRejection` message).
    reason: String,
}

/// What `check` and `masks` print with `--format json`: one object on stdout.
#[derive(serde::Serialize)]
struct CheckReport {
    /// The text was accepted (the exit code is 0 exactly then).
    accepted: bool,
    /// The grammar can end after the whole text.
    complete: bool,
    /// The text's token count.
    tokens: usize,
    /// The text's byte count (of its tokens, decoded).
    bytes: usize,
    /// The first rejected token, if one was.
    rejected: Option<RejectionReport>,
    /// When every token was accepted but the grammar cannot end: what it expects next (the
    /// jump-forward string; may be empty).
    expects: Option<String>,
    /// The vocabulary's name.
    vocabulary: String,
    /// Its size.
    vocab_size: usize,
    /// Compile time, ms.
    compile_ms: f64,
    /// Per step (`masks` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    steps: Option<Vec<StepReport>>,
}

/// `check` (`verbose` false) and `masks` (`verbose` true).
fn check_cmd(
    source: &GrammarSource,
    text_source: &TextSource,
    options: &Options,
    partial: bool,
    verbose: bool,
    format: OutputFormat,
) -> Result<ExitCode, Failure> {
    let text = match (&text_source.text, &text_source.string) {
        (Some(path), _) => read_file(path, "text")?,
        (None, Some(s)) => s.clone(),
        (None, None) => return Err(Failure::bad_input("give --text FILE or --string S")),
    };
    let json = format == OutputFormat::Json;
    let tokenizer = options.tokenizer.as_deref();
    let loaded = load_vocab(tokenizer)?;
    let ids = encode(tokenizer, &text)?;
    let (compiled, compile_ms) = compile(source, options, loaded.vocab)?;
    let vocab = compiled.vocabulary().clone();
    let mut matcher = GrammarMatcher::new(compiled.clone());
    let mut bitmask = vec![0u32; matcher.bitmask_words()];
    let mut out = io::stdout().lock();
    let mut report = CheckReport {
        accepted: false,
        complete: false,
        tokens: ids.len(),
        bytes: vocab.decode_bytes(&ids).len(),
        rejected: None,
        expects: None,
        vocabulary: loaded.name.clone(),
        vocab_size: vocab.vocab_size(),
        compile_ms,
        steps: verbose.then(Vec::new),
    };
    if verbose && !json {
        writeln!(
            out,
            "# vocabulary {} ({} tokens); grammar compiled in {compile_ms:.2} ms; {} tokens to feed",
            loaded.name,
            vocab.vocab_size(),
            ids.len()
        )?;
        writeln!(
            out,
            "{:>5} {:>8}  {:<24} {:>8} {:>9}",
            "step", "id", "token", "allowed", "µs"
        )?;
    }
    let mut micros: Vec<f64> = Vec::with_capacity(ids.len() + 1);
    for (step, &id) in ids.iter().enumerate() {
        let allowed_here = if verbose {
            let t = Instant::now();
            matcher
                .fill_next_token_bitmask(&mut bitmask)
                .map_err(|e| Failure::bad_input(e.to_string()))?;
            let us = t.elapsed().as_secs_f64() * 1e6;
            micros.push(us);
            let allowed = count(&bitmask);
            let token_allowed = tokensieve::mask::is_token_allowed(&bitmask, id);
            if let Some(steps) = &mut report.steps {
                steps.push(StepReport {
                    step,
                    id: Some(id),
                    token: Some(token_label(&vocab, id)),
                    allowed,
                    token_allowed,
                    micros: us,
                });
            }
            if !json {
                writeln!(
                    out,
                    "{step:>5} {id:>8}  {:<24} {allowed:>8} {us:>9.1}",
                    token_label(&vocab, id)
                )?;
            }
            Some(token_allowed)
        } else {
            None
        };
        if let Err(reason) = matcher.try_accept_token(id) {
            if json {
                report.rejected = Some(RejectionReport {
                    step,
                    id,
                    token: token_label(&vocab, id),
                    byte: vocab.decode_bytes(&ids[..step]).len(),
                    reason: reason.to_string(),
                });
                write_json(&mut out, &report)?;
            } else {
                out.flush()?;
                report_rejection(&vocab, &ids, step, &reason);
            }
            return Ok(ExitCode::from(EXIT_REJECTED));
        }
        if allowed_here == Some(false) {
            // The engine's invariant says this cannot happen: make it loud if it does.
            eprintln!("warning: token {id} at step {step} was accepted but its mask bit was clear");
        }
    }
    let complete = matcher.is_completed();
    report.complete = complete;
    if verbose {
        let t = Instant::now();
        matcher
            .fill_next_token_bitmask(&mut bitmask)
            .map_err(|e| Failure::bad_input(e.to_string()))?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        micros.push(us);
        let stop_allowed = vocab
            .stop_tokens()
            .iter()
            .any(|&s| tokensieve::mask::is_token_allowed(&bitmask, s));
        if let Some(steps) = &mut report.steps {
            steps.push(StepReport {
                step: ids.len(),
                id: None,
                token: None,
                allowed: count(&bitmask),
                token_allowed: stop_allowed,
                micros: us,
            });
        }
        if !json {
            writeln!(
                out,
                "{:>5} {:>8}  {:<24} {:>8} {us:>9.1}",
                ids.len(),
                "-",
                if stop_allowed {
                    "<end: stop allowed>"
                } else {
                    "<end>"
                },
                count(&bitmask)
            )?;
            writeln!(out, "# masks: {}", summarize(&mut micros))?;
        }
    }
    let bytes = report.bytes;
    if complete || partial {
        report.accepted = true;
        if json {
            write_json(&mut out, &report)?;
        } else {
            writeln!(
                out,
                "accepted: {} tokens ({bytes} bytes); {}",
                ids.len(),
                if complete {
                    "the grammar can end here"
                } else {
                    "a valid prefix (the grammar cannot end here yet)"
                }
            )?;
        }
        Ok(ExitCode::SUCCESS)
    } else {
        let next = matcher.find_jump_forward_string();
        if json {
            report.expects = Some(next);
            write_json(&mut out, &report)?;
        } else {
            out.flush()?;
            eprintln!(
                "rejected at the end: all {} tokens ({bytes} bytes) were accepted, but the grammar \
                 cannot end there{}",
                ids.len(),
                if next.is_empty() {
                    String::new()
                } else {
                    format!(" (it expects {next:?} next)")
                }
            );
        }
        Ok(ExitCode::from(EXIT_REJECTED))
    }
}

/// Writes `report` as one line of JSON.
fn write_json(out: &mut impl Write, report: &CheckReport) -> Result<(), Failure> {
    let text = serde_json::to_string(report)
        .map_err(|e| Failure::bad_input(format!("cannot write JSON: {e}")))?;
    writeln!(out, "{text}")?;
    Ok(())
}

/// Says on stderr where and why token `step` of `ids` was rejected.
fn report_rejection(vocab: &Vocabulary, ids: &[u32], step: usize, reason: &TokenRejection) {
    let id = ids[step];
    let before = vocab.decode_bytes(&ids[..step]);
    eprintln!(
        "rejected at token {step} of {} (id {id}, {}), output byte {}: {reason}",
        ids.len(),
        token_label(vocab, id),
        before.len()
    );
    // The last bytes accepted, then the token, to show the spot.
    let tail_start = before.len().saturating_sub(60);
    let tail = String::from_utf8_lossy(&before[tail_start..]);
    eprintln!(
        "  accepted so far: {}{tail:?}",
        if tail_start > 0 { "…" } else { "" }
    );
    eprintln!("  rejected token:  {}", token_label(vocab, id));
}

/// A token as a quoted, escaped string (`"\n  "`), or `<special id>` for empty specials.
fn token_label(vocab: &Vocabulary, id: u32) -> String {
    match vocab.token_bytes(id) {
        Some(b) if !b.is_empty() => format!("{:?}", String::from_utf8_lossy(b)),
        Some(_) => format!("<empty {id}>"),
        None => format!("<past the tokenizer {id}>"),
    }
}

fn count(bitmask: &[u32]) -> u32 {
    bitmask.iter().map(|w| w.count_ones()).sum()
}

/// "n, mean, p50, p99, max" of mask times in µs (sorts `micros`).
fn summarize(micros: &mut [f64]) -> String {
    if micros.is_empty() {
        return "none".to_string();
    }
    micros.sort_by(f64::total_cmp);
    let n = micros.len();
    let pct = |p: f64| micros[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    format!(
        "{n} masks, mean {:.1} µs, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        micros.iter().sum::<f64>() / n as f64,
        pct(0.50),
        pct(0.99),
        micros[n - 1]
    )
}

fn millis(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
