//! `tokensieve eval-tools` (feature `llm-demo`): tool-call accuracy of a real model with and
//! without constrained decoding, on BFCL questions.
//!
//! For each of the first N questions of each BFCL file, the offered functions become tools
//! (`Tool::from_bfcl_function`), the prompt is ChatML with the Hermes tool section in the
//! system message, and the model generates twice from the same prefill with the same
//! sampler seed: once free, once constrained to one Hermes call of an offered tool
//! (`tool_choice = required`, no parallel calls; by default without the free text Hermes'
//! `required` tag allows before the call, see `--leading-text`). Each output is parsed with the Hermes
//! parser and scored:
//!
//! * *parses*: the Hermes parser read at least one `<tool_call>` block with a JSON
//!   `{"name", "arguments"}` and found no malformed block;
//! * *offered tool*: it parses and every call names an offered tool;
//! * *schema valid*: as *offered tool*, and every call's arguments validate against its
//!   tool's schema (this is the schema accuracy);
//! * *matches answer*: exactly one call, matching BFCL's possible answer (see
//!   [`bfcl::matches_answer`]).
//!
//! Costs: decoding tokens/s (the eos included, prefill excluded), tokensieve's µs per token
//! (mask fill, mask application to the logits, accept), and that time as a share of the
//! step time (the forward pass, sampling and tokensieve).

mod bfcl;
mod model;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use tokensieve::{GrammarCompiler, GrammarMatcher};
use tokensieve_tools::{FormatOptions, Hermes, Tool, ToolCallFormat, ToolChoice};

use model::{Generation, Llm, Sampling};

/// Arguments of `tokensieve eval-tools`.
#[derive(Args)]
pub struct EvalToolsArgs {
    /// The GGUF model (scripts/fetch-model.sh fetches SmolLM2-135M-Instruct).
    #[arg(long, default_value = "models/SmolLM2-135M-Instruct.Q4_1.gguf")]
    model: PathBuf,
    /// The BFCL data folder (question files, and possible_answer/ beside them).
    #[arg(long, default_value = "../shared/testdata/toolcalls/bfcl")]
    bfcl: PathBuf,
    /// BFCL categories: BFCL_v4_<category>.json files.
    #[arg(long, value_delimiter = ',', default_value = "simple_python,multiple")]
    categories: Vec<String>,
    /// Questions per category (the first ones of the file).
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Sampler seed (the same for both modes of a question).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Sampling temperature.
    #[arg(long, default_value_t = 0.7)]
    temperature: f64,
    /// Nucleus sampling probability.
    #[arg(long, default_value_t = 0.9)]
    top_p: f64,
    /// Generated tokens at most, per output.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Write every question's two outputs and scores here (JSON Lines).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Keep the free text that Hermes' `required` tag allows before the first call. Off
    /// (default): the constrained output starts with the call, as serving engines' `required`
    /// does (a 135M model given the choice writes prose until `--max-tokens`).
    #[arg(long)]
    leading_text: bool,
    /// Constrain arguments to the BFCL schemas as written: objects without
    /// `additionalProperties` then accept any extra key. Off (default): the grammar closes
    /// them (`additionalProperties: false`, as OpenAI's strict mode requires), so a small
    /// model cannot invent keys until `--max-tokens`; validation always uses the schema as
    /// written.
    #[arg(long)]
    open_objects: bool,
    /// Start no new question after this many minutes (the table then covers the questions
    /// done, and says so).
    #[arg(long, value_name = "MINUTES")]
    time_limit: Option<f64>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// The Hermes format as the eval constrains with it: `required` without the free text
/// the format allows before the call unless `--leading-text`, and objects closed unless
/// `--open-objects`.
impl EvalToolsArgs {
    /// Refuses settings that cannot sample, before the model loads: `--temperature` must be
    /// a finite number ≥ 0 (0 is greedy), `--top-p` in (0, 1], `--max-tokens` and `--limit`
    /// at least 1, and some category given.
    fn check(&self) -> Result<(), String> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(format!(
                "--temperature {}: must be a finite number >= 0 (0 samples greedily)",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("--top-p {}: must be in (0, 1]", self.top_p));
        }
        if self.max_tokens == 0 {
            return Err("--max-tokens 0: at least one token must be generated".into());
        }
        if self.limit == 0 {
            return Err("--limit 0: at least one question per category".into());
        }
        if self.categories.iter().all(|c| c.trim().is_empty()) {
            return Err("--categories: no category given".into());
        }
        Ok(())
    }
}

fn hermes_for(args: &EvalToolsArgs) -> Hermes {
    Hermes::new(FormatOptions {
        leading_text: args.leading_text,
        closed_objects: !args.open_objects,
        ..FormatOptions::default()
    })
}

/// The system message before the Hermes tool section.
const SYSTEM: &str = "You are a helpful assistant. Answer the user's request by calling one of \
                      the tools below with the right arguments.";

/// Scores and costs of one mode over a set of questions.
#[derive(Default)]
struct Tally {
    questions: usize,
    parses: usize,
    offered: usize,
    valid: usize,
    matches: usize,
    truncated: usize,
    steps: usize,
    step_time: Duration,
    mask_time: Duration,
}

impl Tally {
    fn add(&mut self, score: &Score, generation: &Generation) {
        self.questions += 1;
        self.parses += score.parses as usize;
        self.offered += score.offered as usize;
        self.valid += score.valid as usize;
        self.matches += score.matches as usize;
        self.truncated += generation.truncated as usize;
        self.steps += generation.steps;
        self.step_time += generation.step_time;
        self.mask_time += generation.mask_time;
    }

    fn merge(&mut self, other: &Tally) {
        self.questions += other.questions;
        self.parses += other.parses;
        self.offered += other.offered;
        self.valid += other.valid;
        self.matches += other.matches;
        self.truncated += other.truncated;
        self.steps += other.steps;
        self.step_time += other.step_time;
        self.mask_time += other.mask_time;
    }

    fn pct(&self, n: usize) -> String {
        if self.questions == 0 {
            return "-".into();
        }
        format!("{:.0}% ({n})", 100.0 * n as f64 / self.questions as f64)
    }

    fn row(&self, set: &str, mode: &str) -> String {
        let secs = self.step_time.as_secs_f64();
        let (mask_us, share) = if self.mask_time.is_zero() {
            ("-".to_string(), "-".to_string())
        } else {
            (
                format!(
                    "{:.0}",
                    self.mask_time.as_secs_f64() * 1e6 / self.steps.max(1) as f64
                ),
                format!(
                    "{:.2}%",
                    100.0 * self.mask_time.as_secs_f64() / secs.max(1e-9)
                ),
            )
        };
        format!(
            "| {set} | {mode} | {} | {} | {} | {} | {} | {} | {:.1} | {mask_us} | {share} |",
            self.questions,
            self.pct(self.parses),
            self.pct(self.offered),
            self.pct(self.valid),
            self.pct(self.matches),
            self.truncated,
            self.steps as f64 / secs.max(1e-9),
        )
    }
}

/// How one output scored.
struct Score {
    parses: bool,
    offered: bool,
    valid: bool,
    matches: bool,
    calls: Vec<Value>,
    problems: Vec<String>,
}

fn score(hermes: &Hermes, tools: &[Tool], answer: Option<&[Value]>, text: &str) -> Score {
    // Parsed without the tool list, so that a call to an unknown name still parses (and is
    // then counted as not naming an offered tool).
    let parsed = hermes.parse(text, &[]);
    let mut problems: Vec<String> = parsed
        .errors
        .iter()
        .map(|e| format!("malformed call: {}", e.error))
        .collect();
    let calls: Vec<Value> = parsed
        .tool_calls
        .iter()
        .map(|c| json!({"name": c.name, "arguments": c.arguments}))
        .collect();
    let parses = !parsed.tool_calls.is_empty() && parsed.errors.is_empty();
    let mut offered = parses;
    let mut valid = parses;
    for call in &parsed.tool_calls {
        match tools.iter().find(|t| t.name == call.name) {
            None => {
                offered = false;
                valid = false;
                problems.push(format!("{} is not an offered tool", call.name));
            }
            Some(tool) => {
                if let Err(e) = tool.validate_arguments(&call.arguments) {
                    valid = false;
                    problems.push(e.to_string());
                }
            }
        }
    }
    let matches = match (parsed.tool_calls.as_slice(), answer) {
        ([call], Some(truth)) => parses && bfcl::matches_answer(&call.name, &call.arguments, truth),
        _ => false,
    };
    Score {
        parses,
        offered,
        valid,
        matches,
        calls,
        problems,
    }
}

/// Runs the evaluation and prints the table (Markdown) to `out`.
pub fn run(args: &EvalToolsArgs, out: &mut impl Write) -> Result<(), String> {
    args.check()?;
    let started = Instant::now();
    let mut llm = Llm::load(&args.model)?;
    let compiler = GrammarCompiler::new(llm.vocab.clone());
    let hermes = hermes_for(args);
    let sampling = Sampling {
        temperature: args.temperature,
        top_p: args.top_p,
        seed: args.seed,
        max_tokens: args.max_tokens,
    };
    let mut sets = Vec::new();
    for category in &args.categories {
        sets.push((
            category.clone(),
            bfcl::load(&args.bfcl, category, args.limit)?,
        ));
    }
    let total: usize = sets.iter().map(|(_, q)| q.len()).sum();
    let mut log = match &args.log {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?,
        )),
        None => None,
    };
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(total as u64);
        if let Ok(style) = ProgressStyle::with_template(
            "{msg:>20} [{bar:40}] {pos}/{len} questions {elapsed} (eta {eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    };

    let mut rows = Vec::new();
    let mut all = [Tally::default(), Tally::default()];
    let mut skipped = Vec::new();
    let mut compile_ms = Vec::new();
    let mut prompt_tokens = 0usize;
    let mut prefill_time = Duration::ZERO;
    let mut stopped_early = false;
    for (category, questions) in &sets {
        let mut tallies = [Tally::default(), Tally::default()];
        for q in questions {
            if args
                .time_limit
                .is_some_and(|m| started.elapsed().as_secs_f64() > m * 60.0)
            {
                stopped_early = true;
                break;
            }
            bar.set_message(q.id.clone());
            let tools: Result<Vec<Tool>, _> =
                q.functions.iter().map(Tool::from_bfcl_function).collect();
            let tools = match tools {
                Ok(t) => t,
                Err(e) => {
                    skipped.push(format!("{}: {e}", q.id));
                    bar.inc(1);
                    continue;
                }
            };
            let mut prompt = format!(
                "<|im_start|>system\n{SYSTEM}\n\n{}<|im_end|>\n",
                hermes.render_tools_prompt(&tools)
            );
            for (role, content) in &q.messages {
                prompt.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
            }
            prompt.push_str("<|im_start|>assistant\n");
            let ids = llm.encode(&prompt)?;
            let compile_started = Instant::now();
            let grammar = hermes
                .structural_tag(&tools, &ToolChoice::Required, false)
                .map_err(|e| e.to_string())
                .and_then(|tag| {
                    compiler
                        .compile_structural_tag(&tag)
                        .map_err(|e| e.to_string())
                });
            let grammar = match grammar {
                Ok(g) => g,
                Err(e) => {
                    skipped.push(format!("{}: grammar: {e}", q.id));
                    bar.inc(1);
                    continue;
                }
            };
            compile_ms.push(compile_started.elapsed().as_secs_f64() * 1e3);
            let prefilled = llm.prefill(&ids)?;
            prompt_tokens += ids.len();
            prefill_time += prefilled.time;

            let free = llm.generate(&prefilled, None, sampling)?;
            let mut matcher = GrammarMatcher::new(grammar);
            let constrained = llm
                .generate(&prefilled, Some(&mut matcher), sampling)
                .map_err(|e| format!("{}: {e}", q.id))?;
            let answer = q.answer.as_deref();
            let scores = [
                score(&hermes, &tools, answer, &free.text),
                score(&hermes, &tools, answer, &constrained.text),
            ];
            tallies[0].add(&scores[0], &free);
            tallies[1].add(&scores[1], &constrained);
            if let Some(log) = log.as_mut() {
                let entry = |g: &Generation, s: &Score| {
                    json!({"text": g.text, "steps": g.steps, "truncated": g.truncated,
                           "parses": s.parses, "offered": s.offered, "valid": s.valid,
                           "matches": s.matches, "calls": s.calls, "problems": s.problems,
                           "step_ms": g.step_time.as_secs_f64() * 1e3,
                           "mask_ms": g.mask_time.as_secs_f64() * 1e3})
                };
                let line = json!({
                    "id": q.id, "prompt_tokens": ids.len(),
                    "question": q.messages.last().map(|m| m.1.clone()),
                    "tools": tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                    "answer": q.answer,
                    "unconstrained": entry(&free, &scores[0]),
                    "constrained": entry(&constrained, &scores[1]),
                });
                writeln!(log, "{line}").map_err(|e| e.to_string())?;
                log.flush().map_err(|e| e.to_string())?;
            }
            bar.inc(1);
        }
        rows.push(tallies[0].row(category, "unconstrained"));
        rows.push(tallies[1].row(category, "constrained"));
        all[0].merge(&tallies[0]);
        all[1].merge(&tallies[1]);
    }
    bar.finish_and_clear();
    if sets.len() > 1 {
        rows.push(all[0].row("all", "unconstrained"));
        rows.push(all[1].row("all", "constrained"));
    }

    let w = |out: &mut dyn Write, s: String| writeln!(out, "{s}").map_err(|e| e.to_string());
    w(
        out,
        format!(
            "model {}, seed {}, temperature {}, top-p {}, max {} new tokens, leading text {}, \
             objects in the grammar {}",
            args.model.display(),
            args.seed,
            args.temperature,
            args.top_p,
            args.max_tokens,
            if args.leading_text {
                "allowed"
            } else {
                "not allowed"
            },
            if args.open_objects {
                "as written"
            } else {
                "closed"
            }
        ),
    )?;
    w(out, String::new())?;
    w(
        out,
        "| set | mode | questions | parses as a tool call | names an offered tool | \
         arguments valid (schema accuracy) | matches possible answer | hit max tokens | \
         tokens/s | tokensieve µs/token | tokensieve share of step time |"
            .to_string(),
    )?;
    w(
        out,
        "|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|".to_string(),
    )?;
    for row in rows {
        w(out, row)?;
    }
    compile_ms.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        compile_ms
            .get(((compile_ms.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    w(out, String::new())?;
    w(
        out,
        format!(
            "grammar compile (tools → structural tag → compiled grammar): p50 {:.1} ms, max {:.1} ms; \
             prefill {:.1} tokens/s over {} prompt tokens; total {:.0} s",
            pick(0.5),
            pick(1.0),
            prompt_tokens as f64 / prefill_time.as_secs_f64().max(1e-9),
            prompt_tokens,
            started.elapsed().as_secs_f64()
        ),
    )?;
    if stopped_early {
        w(
            out,
            format!(
                "stopped by --time-limit: fewer questions than --limit {} per set",
                args.limit
            ),
        )?;
    }
    for s in &skipped {
        w(out, format!("skipped {s}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_settings_are_checked_before_the_model_loads() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: EvalToolsArgs,
        }
        let check = |extra: &[&str]| {
            let argv = std::iter::once("eval-tools").chain(extra.iter().copied());
            Cli::try_parse_from(argv).unwrap().args.check()
        };
        assert_eq!(check(&[]), Ok(()));
        assert_eq!(check(&["--temperature=0"]), Ok(()));
        let err = |extra: &[&str]| check(extra).unwrap_err();
        assert!(err(&["--temperature=-1"]).starts_with("--temperature -1: must be"));
        assert!(err(&["--temperature=nan"]).starts_with("--temperature NaN"));
        assert!(err(&["--top-p=2"]).starts_with("--top-p 2: must be in (0, 1]"));
        assert!(err(&["--top-p=0"]).starts_with("--top-p 0"));
        assert!(err(&["--max-tokens=0"]).starts_with("--max-tokens 0"));
        assert!(err(&["--limit=0"]).starts_with("--limit 0"));
        // A bad setting is refused before anything is read (the model path does not exist).
        let mut out = Vec::new();
        let bad = Cli::try_parse_from(["eval-tools", "--top-p=2", "--model=/nonexistent"])
            .unwrap()
            .args;
        assert!(run(&bad, &mut out).unwrap_err().starts_with("--top-p 2"));
    }

    fn tools() -> Vec<Tool> {
        vec![Tool::from_bfcl_function(&json!({
            "name": "math.factorial", "description": "Factorial.",
            "parameters": {"type": "dict", "properties": {
                "number": {"type": "integer"},
                "opts": {"type": "dict", "properties": {"exact": {"type": "boolean"}}}},
                "required": ["number"]}}))
        .unwrap()]
    }

    #[test]
    fn the_eval_tag_starts_with_the_call_and_closes_objects() {
        use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary};
        let tokens: Vec<Vec<u8>> = (0u8..128)
            .map(|b| vec![b])
            .chain([b"<eos>".to_vec()])
            .collect();
        let vocab = Vocabulary::from_token_bytes(&tokens, &[128], &[128]).unwrap();
        let hermes = Hermes::new(FormatOptions {
            leading_text: false,
            ..FormatOptions::default()
        });
        let tag = hermes
            .structural_tag(&tools(), &ToolChoice::Required, false)
            .unwrap();
        let g = GrammarCompiler::new(vocab)
            .compile_structural_tag(&tag)
            .unwrap();
        let call = "<tool_call>\n{\"name\": \"math.factorial\", \"arguments\": {\"number\": 5}}\n</tool_call>";
        assert!(GrammarMatcher::new(g.clone()).accept_string(call));
        assert!(!GrammarMatcher::new(g.clone()).accept_string(&format!("Sure. {call}")));
        let extra =
            "<tool_call>\n{\"name\": \"math.factorial\", \"arguments\": {\"number\": 5, \"x\": 1}}";
        assert!(!GrammarMatcher::new(g).accept_string(extra));
    }

    #[test]
    fn scores() {
        let hermes = Hermes::default();
        let tools = tools();
        let truth = [json!({"math.factorial": {"number": [5]}})];
        let call = |body: &str| format!("<tool_call>\n{body}\n</tool_call>");
        let s = score(
            &hermes,
            &tools,
            Some(&truth),
            &call(r#"{"name": "math.factorial", "arguments": {"number": 5}}"#),
        );
        assert!(
            s.parses && s.offered && s.valid && s.matches,
            "{:?}",
            s.problems
        );
        let s = score(
            &hermes,
            &tools,
            Some(&truth),
            &call(r#"{"name": "math.factorial", "arguments": {"number": "5"}}"#),
        );
        assert!(s.parses && s.offered && !s.valid && !s.matches);
        let s = score(
            &hermes,
            &tools,
            Some(&truth),
            &call(r#"{"name": "factorial", "arguments": {"number": 5}}"#),
        );
        assert!(s.parses && !s.offered && !s.valid);
        let s = score(&hermes, &tools, Some(&truth), "The factorial of 5 is 120.");
        assert!(!s.parses && !s.offered && !s.valid && !s.matches);
        let s = score(
            &hermes,
            &tools,
            Some(&truth),
            "<tool_call>\n{\"name\": \"math.factorial\", \"argu",
        );
        assert!(!s.parses, "an unfinished call does not parse");
    }
}
