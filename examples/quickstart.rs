//! Quickstart: constrained decoding with tokensieve on GPT-4o's `o200k_base` vocabulary,
//! which `tiktoken-rs` embeds (nothing is downloaded).
//!
//! ```text
//! cargo run --release --example quickstart
//! ```
//!
//! It compiles two grammars (the built-in JSON grammar and a small EBNF "person" record)
//! and runs the decoding loop of an inference engine over each: fill the token bitmask,
//! mask the logits, pick a token, accept it. There is no model here: the "logits" of each
//! step favour the next token of a sample document tokenised with `tiktoken-rs` (teacher
//! forcing), so the loop must pick exactly the document's tokens, and each of them must be
//! allowed by the mask. Replace `model_logits` with your model's forward pass and `argmax`
//! with your sampler, and this is your loop.

use std::error::Error;
use std::sync::Arc;
use std::time::Instant;

use tokensieve::mask::{allocate_token_bitmask, apply_token_bitmask_inplace, is_token_allowed};
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Vocabulary};

/// A record with a fixed shape: the grammar forces the keys and punctuation, the model
/// only chooses the values.
const PERSON_EBNF: &str = r#"
root      ::= "{\"name\": " name ", \"age\": " age ", \"languages\": [" (language (", " language)*)? "]}"
name      ::= "\"" word (" " word)* "\""
word      ::= [A-Z] [a-z]*
age       ::= "0" | [1-9] [0-9]?
language  ::= "\"" ("en" | "fr" | "de" | "it" | "ja") "\""
"#;

const PERSON_DOC: &str = r#"{"name": "Ada Lovelace", "age": 36, "languages": ["en", "fr", "it"]}"#;

const JSON_DOC: &str = r#"{
  "id": "order-7731",
  "customer": {"name": "Zoë Müller", "email": "zoe@example.com", "vip": true},
  "items": [
    {"sku": "A-100", "qty": 2, "price": 19.99, "tags": ["gift", "fragile"]},
    {"sku": "B-205", "qty": 1, "price": 1.5e2, "tags": []}
  ],
  "note": "Leave at the door \"please\"\nThanks! \u263A",
  "discount": null,
  "total": -0.25
}"#;

/// What one teacher-forced run measured.
struct Run {
    /// Allowed-token count of each step's mask.
    allowed: Vec<usize>,
    /// Microseconds of each `fill_next_token_bitmask` call.
    micros: Vec<f64>,
}

fn main() -> Result<(), Box<dyn Error>> {
    // 1. The vocabulary: every token id's bytes, the special and stop tokens. Load it and
    //    build the compiler (its token trie) once per model; share it between requests.
    let t = Instant::now();
    let vocab = Vocabulary::o200k_base()?;
    let compiler = GrammarCompiler::new(vocab);
    let vocab = compiler.vocabulary().clone();
    println!(
        "o200k_base: {} tokens, stop tokens {:?}; vocabulary + compiler ready in {:.0} ms",
        vocab.vocab_size(),
        vocab.stop_tokens(),
        ms(t)
    );

    // 2. Compile grammars, once per schema or grammar; the result is shared (`Arc`) by
    //    every sequence decoded with it.
    let t = Instant::now();
    let json = compiler.compile_builtin_json()?;
    println!(
        "compiled built-in JSON grammar in {:.1} ms ({} nodes, {} KiB)",
        ms(t),
        json.node_count(),
        json.memory_bytes() / 1024
    );
    let t = Instant::now();
    let person = compiler.compile_grammar(PERSON_EBNF)?;
    println!(
        "compiled person grammar in {:.1} ms ({} nodes, {} KiB)",
        ms(t),
        person.node_count(),
        person.memory_bytes() / 1024
    );

    // The "model": a fixed document, tokenised the way GPT-4o tokenises it.
    let bpe = tiktoken_rs::o200k_base()?;
    let stop = *vocab
        .stop_tokens()
        .first()
        .ok_or("o200k_base has no stop token")?;

    println!("\n== person grammar, step by step ==");
    let person_tokens = bpe.encode_ordinary(PERSON_DOC);
    let run = decode(&person, &person_tokens, stop, true)?;
    summary(&run);

    println!("\n== built-in JSON grammar ==");
    let json_tokens = bpe.encode_ordinary(JSON_DOC);
    let run = decode(&json, &json_tokens, stop, false)?;
    summary(&run);
    Ok(())
}

/// The decoding loop of one sequence. `document` (token ids) plays the model; the sequence
/// ends with `stop`.
fn decode(
    grammar: &Arc<CompiledGrammar>,
    document: &[u32],
    stop: u32,
    verbose: bool,
) -> Result<Run, Box<dyn Error>> {
    let vocab = grammar.vocabulary().clone();
    // One matcher per sequence: cheap to create, not shared between threads.
    let mut matcher = GrammarMatcher::new(grammar.clone());
    // One row of XGrammar's int32 bitmask layout, reused every step: no allocation per step.
    let mut bitmask = allocate_token_bitmask(1, vocab.vocab_size());
    let mut output: Vec<u32> = Vec::new();
    let mut run = Run {
        allowed: Vec::new(),
        micros: Vec::new(),
    };
    if verbose {
        println!(
            "forced at the start (jump-forward): {:?}",
            matcher.find_jump_forward_string()
        );
        println!(
            "{:>4}  {:<18} {:>8} {:>8}  forced next",
            "step", "token", "allowed", "µs"
        );
    }
    while !matcher.is_terminated() {
        let step = output.len();
        let t = Instant::now();
        matcher.fill_next_token_bitmask(&mut bitmask)?;
        let micros = t.elapsed().as_secs_f64() * 1e6;
        let allowed: usize = bitmask.iter().map(|w| w.count_ones() as usize).sum();
        run.micros.push(micros);
        run.allowed.push(allowed);

        let mut logits = model_logits(document, stop, step, vocab.vocab_size());
        apply_token_bitmask_inplace(&mut logits, &bitmask)?;
        let token = argmax(&logits);
        let wanted = document.get(step).copied().unwrap_or(stop);
        if token != wanted || !is_token_allowed(&bitmask, token) {
            return Err(format!(
                "step {step}: the grammar does not allow token {wanted} ({:?})",
                text(&vocab, wanted)
            )
            .into());
        }
        // A rejected token would leave the matcher unchanged; here the mask said yes, so
        // accepting cannot fail (the mask/accept invariant).
        matcher.try_accept_token(token)?;
        output.push(token);

        if verbose {
            println!(
                "{step:>4}  {:<18} {allowed:>8} {micros:>8.1}  {:?}",
                format!("{:?}", text(&vocab, token)),
                matcher.find_jump_forward_string()
            );
        }
    }
    let bytes = vocab.decode_bytes(&output);
    println!(
        "decoded {} tokens (stop included), {} bytes; completed: {}",
        output.len(),
        bytes.len(),
        matcher.is_completed()
    );
    Ok(run)
}

/// Stands in for the model's forward pass: the document's next token gets the top score.
fn model_logits(document: &[u32], stop: u32, step: usize, width: usize) -> Vec<f32> {
    let mut logits = vec![0.0f32; width];
    let next = document.get(step).copied().unwrap_or(stop);
    logits[next as usize] = 10.0;
    logits
}

/// Greedy sampling.
fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

fn text(vocab: &Vocabulary, token: u32) -> String {
    String::from_utf8_lossy(vocab.token_bytes(token).unwrap_or_default()).into_owned()
}

fn summary(run: &Run) {
    let n = run.micros.len().max(1) as f64;
    let mean = run.micros.iter().sum::<f64>() / n;
    let (max_step, max) = run
        .micros
        .iter()
        .copied()
        .enumerate()
        .fold(
            (0, 0.0),
            |best, (i, us)| if us > best.1 { (i, us) } else { best },
        );
    let mut allowed = run.allowed.clone();
    allowed.sort_unstable();
    let forced = allowed.iter().filter(|&&a| a == 1).count();
    println!(
        "{} masks: {mean:.1} µs mean, {max:.1} µs max (step {max_step}); allowed tokens min {} / median {} / max {}; {forced} forced (one token)",
        run.micros.len(),
        allowed.first().copied().unwrap_or(0),
        allowed.get(allowed.len() / 2).copied().unwrap_or(0),
        allowed.last().copied().unwrap_or(0),
    );
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
