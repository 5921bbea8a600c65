//! A real model, a real decode loop: SmolLM2-135M-Instruct (GGUF, Q4_1) on CPU through
//! candle's quantized llama, asked for a tool call in Hermes style, with and without
//! tokensieve's constraint.
//!
//! ```sh
//! scripts/fetch-model.sh    # once: models/SmolLM2-135M-Instruct.Q4_1.gguf (98 MB)
//! cargo run --release --features llm-demo --example generate -- --constrain
//! cargo run --release --features llm-demo --example generate -- \
//!     --prompt "What time is it in Tokyo?" --seed 7 --temperature 0.7 --top-p 0.9
//! ```
//!
//! Per step: the model's logits (49,152 floats) → with `--constrain`,
//! `fill_next_token_bitmask` and `apply_token_bitmask_inplace` (disallowed tokens → −∞) →
//! temperature / top-p sampling (seeded) → `accept_token`. Prints the text, the parsed tool
//! calls, tokens/s and the share of each step spent in tokensieve.

use std::error::Error;
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use candle_transformers::models::quantized_llama::ModelWeights;
use clap::Parser;
use serde_json::json;
use tokensieve::mask::{allocate_token_bitmask, apply_token_bitmask_inplace};
use tokensieve::vocab::tokenizer_from_gguf;
use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary};
use tokensieve_tools::{Hermes, Tool, ToolCallFormat, ToolChoice};

#[derive(Parser)]
#[command(
    about = "SmolLM2-135M-Instruct on CPU, asked for a Hermes tool call, optionally constrained"
)]
struct Args {
    /// The GGUF model file (fetch it with scripts/fetch-model.sh).
    #[arg(long, default_value = "models/SmolLM2-135M-Instruct.Q4_1.gguf")]
    model: PathBuf,
    /// The user's message.
    #[arg(
        long,
        default_value = "What is the weather like in Paris today, in celsius?"
    )]
    prompt: String,
    /// Constrain decoding to one Hermes tool call of an offered tool (tool_choice = required).
    #[arg(long)]
    constrain: bool,
    /// Sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.7)]
    temperature: f64,
    /// Nucleus sampling: keep the most likely tokens up to this total probability.
    #[arg(long, default_value_t = 0.9)]
    top_p: f64,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Stop after this many generated tokens.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
}

/// The tools offered to the model (an OpenAI `tools` array).
fn tools_json() -> serde_json::Value {
    json!([
        {"type": "function", "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "description": "The city, such as \"London\"."},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city"], "additionalProperties": false}}},
        {"type": "function", "function": {
            "name": "get_time",
            "description": "Get the current local time in a city.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string"}},
                "required": ["city"], "additionalProperties": false}}}
    ])
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let device = Device::Cpu;

    // The GGUF header once: vocabulary, tokenizer and weights all come from it.
    let mut file = BufReader::new(File::open(&args.model).map_err(|e| {
        format!(
            "{}: {e} (run scripts/fetch-model.sh first)",
            args.model.display()
        )
    })?);
    let started = Instant::now();
    let content = Content::read(&mut file)?;
    let what = args.model.display().to_string();
    let vocab = Vocabulary::from_gguf_content(&content, &what)?;
    // Encodes the prompt: a BPE from the GGUF's merges, SmolLM2's pre-tokenizer, and the
    // control tokens (`<|im_start|>`, ...) as special tokens.
    let tokenizer = tokenizer_from_gguf(&content, &what)?;
    let eos = vocab
        .stop_tokens()
        .first()
        .copied()
        .ok_or("the model has no eos token")?;
    let mut model = ModelWeights::from_gguf(content, &mut file, &device)?;
    println!(
        "loaded {} ({} tokens) in {:.2} s",
        args.model.display(),
        vocab.vocab_size(),
        started.elapsed().as_secs_f64()
    );

    // Tools, the Hermes system prompt, and the grammar of one call (tool_choice = required).
    let tools = Tool::list_from_openai(&tools_json())?;
    let hermes = Hermes::default();
    let system = format!(
        "You are a helpful assistant that answers by calling tools.\n\n{}",
        hermes.render_tools_prompt(&tools)
    );
    let prompt = format!(
        "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n\
         <|im_start|>assistant\n",
        args.prompt
    );
    let prompt_ids = tokenizer
        .encode(prompt.as_str(), false)
        .map_err(|e| format!("cannot encode the prompt: {e}"))?
        .get_ids()
        .to_vec();
    let compiler = GrammarCompiler::new(vocab);
    let mut matcher = if args.constrain {
        let started = Instant::now();
        let tag = hermes.structural_tag(&tools, &ToolChoice::Required, false)?;
        // Hermes' `required` lets free text precede the call; a 135M model given that choice
        // often writes prose and never calls. Keep the call block alone: the output then
        // starts with `<tool_call>`, as serving engines' `required` does.
        let mut tag = tag.to_json();
        let format = &tag["format"];
        if format["type"] == "sequence" && format["elements"][0]["type"] == "any_text" {
            tag["format"] = format["elements"][1].clone();
        }
        let grammar = compiler.compile_structural_tag(&tag)?;
        println!(
            "grammar compiled in {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
        Some(GrammarMatcher::new(grammar))
    } else {
        None
    };

    // Prefill: the whole prompt in one forward pass.
    let started = Instant::now();
    let input = Tensor::new(prompt_ids.as_slice(), &device)?.unsqueeze(0)?;
    let mut logits = model.forward(&input, 0)?.squeeze(0)?;
    let prefill = started.elapsed();
    let width = logits.dim(0)?;
    let mut bitmask = allocate_token_bitmask(1, width);
    let mut sampler = LogitsProcessor::new(args.seed, Some(args.temperature), Some(args.top_p));

    let mut generated: Vec<u32> = Vec::new();
    let mut mask_time = Duration::ZERO;
    let decode_started = Instant::now();
    let mut stdout = std::io::stdout();
    for step in 0..args.max_tokens {
        let mut row: Vec<f32> = logits.to_vec1()?;
        if let Some(m) = matcher.as_mut() {
            let t = Instant::now();
            m.fill_next_token_bitmask(&mut bitmask)?;
            apply_token_bitmask_inplace(&mut row, &bitmask)?;
            mask_time += t.elapsed();
        }
        let token = sampler.sample(&Tensor::from_vec(row, width, &device)?)?;
        if let Some(m) = matcher.as_mut() {
            let t = Instant::now();
            m.try_accept_token(token)?; // allowed by the mask, so accepted
            mask_time += t.elapsed();
        }
        if token == eos || matcher.as_ref().is_some_and(|m| m.is_terminated()) {
            break;
        }
        generated.push(token);
        let piece = compiler.vocabulary().decode_bytes(&[token]);
        stdout.write_all(&piece)?;
        stdout.flush()?;
        let input = Tensor::new(&[token], &device)?.unsqueeze(0)?;
        logits = model.forward(&input, prompt_ids.len() + step)?.squeeze(0)?;
    }
    let decode = decode_started.elapsed();
    println!();

    let text =
        String::from_utf8_lossy(&compiler.vocabulary().decode_bytes(&generated)).into_owned();
    let parsed = hermes.parse(&text, &tools);
    println!("---");
    println!(
        "mode: {}",
        if args.constrain {
            "constrained"
        } else {
            "unconstrained"
        }
    );
    for call in &parsed.tool_calls {
        let valid = tools
            .iter()
            .find(|t| t.name == call.name)
            .map(|t| t.validate_arguments(&call.arguments).is_ok());
        let verdict = match valid {
            Some(true) => "valid",
            Some(false) => "INVALID arguments",
            None => "UNKNOWN tool",
        };
        println!("tool call: {}({}) [{verdict}]", call.name, call.arguments);
    }
    if parsed.tool_calls.is_empty() {
        println!("tool call: none parsed");
    }
    for malformed in &parsed.errors {
        println!(
            "malformed call: {} in {:?}",
            malformed.error, malformed.text
        );
    }
    let n = generated.len().max(1);
    println!(
        "prompt {} tokens, prefill {:.2} s; generated {} tokens in {:.2} s: {:.1} tokens/s",
        prompt_ids.len(),
        prefill.as_secs_f64(),
        generated.len(),
        decode.as_secs_f64(),
        generated.len() as f64 / decode.as_secs_f64()
    );
    if args.constrain {
        println!(
            "tokensieve (mask + accept): {:.1} µs per token, {:.2}% of the step time",
            mask_time.as_secs_f64() * 1e6 / n as f64,
            100.0 * mask_time.as_secs_f64() / decode.as_secs_f64()
        );
    }
    Ok(())
}
