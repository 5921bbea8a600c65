//! Tool calling end to end without a model: two tools (one from Rust types through
//! `schemars`), the Hermes/Qwen3 structural tag for `tool_choice = auto`, a matcher on the
//! real Qwen3 vocabulary driven by random logits until it stops, then the parser, the
//! schema check and the tool's function.
//!
//! ```sh
//! cargo run --release --example tool_calling [-- path/to/qwen3/tokenizer.json]
//! ```
//!
//! Random logits stand in for a model; a small bias toward `<tool_call>` (a model that
//! wants to call a tool) and, later, toward closing tokens and the stop token keeps the
//! runs short. Whatever is sampled, every call in the output parses, names an offered tool
//! and validates against its schema: the mask allows nothing else.

use std::error::Error;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokensieve::mask::{allocate_token_bitmask, apply_token_bitmask_inplace};
use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary};
use tokensieve_tools::{Hermes, Tool, ToolCallFormat, ToolChoice, ToolContext, ToolSet};

/// Arguments of `get_weather`.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct WeatherArgs {
    /// The city.
    city: String,
    /// Forecast days, 1 to 7.
    #[schemars(range(min = 1, max = 7))]
    days: u8,
}

/// Result of `get_weather`.
#[derive(Debug, Serialize, JsonSchema)]
struct Weather {
    summary: String,
}

fn main() -> Result<(), Box<dyn Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/tokenizers/qwen3/tokenizer.json"
        )
        .to_owned()
    });
    let vocab = Vocabulary::from_tokenizer_json(&path)?;

    let weather = Tool::from_types::<WeatherArgs, Weather>("get_weather", "Weather forecast")?
        .with_typed_function(|a: WeatherArgs, ctx: &ToolContext| {
            let locale = ctx.get("locale").and_then(|v| v.as_str()).unwrap_or("en");
            Ok(Weather {
                summary: format!("{} days of sun in {} ({locale})", a.days, a.city),
            })
        });
    let time = Tool::from_openai(&json!({"type": "function", "function": {
        "name": "get_time", "description": "Current time in a time zone",
        "parameters": {"type": "object", "properties": {
            "tz": {"type": "string", "enum": ["UTC", "Europe/Paris", "Asia/Tokyo"]}},
            "required": ["tz"]}}}))?
    .with_meta("destructive", false)
    .with_function(|args, _| Ok(json!({"time": "12:00", "tz": args["tz"]})));
    let tools = ToolSet::from_tools([weather, time])?;

    let hermes = Hermes::default();
    let tag = hermes.structural_tag(tools.tools(), &ToolChoice::Auto, true)?;
    let compiler = GrammarCompiler::new(vocab);
    let t0 = std::time::Instant::now();
    let grammar = compiler.compile_structural_tag(&tag)?;
    println!(
        "Qwen3 vocabulary, 2 tools, tool_choice=auto: compiled in {:.0} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );

    let vocab = compiler.vocabulary().clone();
    let call_token = (0..vocab.tokenizer_size() as u32)
        .find(|&id| vocab.token_bytes(id) == Some(b"<tool_call>".as_slice()))
        .ok_or("no <tool_call> token in this vocabulary")?;
    let size = vocab.vocab_size();
    let stop = vocab.stop_tokens()[0];
    let mut calls_seen = 0;
    for seed in 0..4u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut matcher = GrammarMatcher::new(grammar.clone());
        let mut bitmask = allocate_token_bitmask(1, size);
        let mut ids = Vec::new();
        for step in 0..600 {
            let mut logits: Vec<f32> = (0..size).map(|_| rng.gen_range(-2.0..2.0)).collect();
            logits[call_token as usize] += 14.0;
            if step > 150 {
                logits[stop as usize] += 30.0;
                for (id, l) in logits.iter_mut().enumerate() {
                    let b = vocab.token_bytes(id as u32).unwrap_or(b"");
                    if !b.is_empty() && b.iter().all(|c| b"\"}]<>/".contains(c)) {
                        *l += 12.0;
                    }
                }
            }
            matcher.fill_next_token_bitmask(&mut bitmask)?;
            apply_token_bitmask_inplace(&mut logits, &bitmask)?;
            let next = sample(&logits, &mut rng);
            if !matcher.accept_token(next) {
                return Err(format!("sampled token {next} was rejected").into());
            }
            if matcher.is_terminated() {
                break;
            }
            ids.push(next);
        }
        let text = String::from_utf8_lossy(&vocab.decode_bytes(&ids)).into_owned();
        let parsed = hermes.parse(&text, tools.tools());
        println!("\n--- seed {seed}: {} tokens ---\n{text}", ids.len());
        assert!(parsed.errors.is_empty(), "malformed: {:?}", parsed.errors);
        for call in &parsed.tool_calls {
            let result = tools.execute(call, &ToolContext::new().with("locale", "fr-FR"))?;
            println!("call {} {} -> {result}", call.name, call.arguments);
            calls_seen += 1;
        }
    }
    println!("\n{calls_seen} calls, every one parsed, validated and executed");
    Ok(())
}

/// Samples from softmax(`logits`) (masked entries are −∞).
fn sample(logits: &[f32], rng: &mut StdRng) -> u32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f64> = logits.iter().map(|&l| ((l - max) as f64).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mut r = rng.gen::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        r -= w;
        if r <= 0.0 && *w > 0.0 {
            return i as u32;
        }
    }
    weights.iter().rposition(|&w| w > 0.0).unwrap_or(0) as u32
}
