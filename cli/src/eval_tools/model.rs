//! The model side of `eval-tools`: a GGUF llama (candle's quantized llama, CPU), its
//! tokenizer and vocabulary, one prefill per prompt, and a seeded sampling loop that applies
//! a tokensieve mask at every step when given a matcher.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use candle_transformers::models::quantized_llama::ModelWeights;
use tokensieve::mask::{allocate_token_bitmask, apply_token_bitmask_inplace};
use tokensieve::vocab::tokenizer_from_gguf;
use tokensieve::{GrammarMatcher, Vocabulary};

/// A loaded model with its tokenizer and vocabulary (both from the GGUF header).
pub struct Llm {
    model: ModelWeights,
    tokenizer: tokenizers::Tokenizer,
    /// Token id → bytes, control tokens, eos; `vocab_size()` is the logits width.
    pub vocab: Arc<Vocabulary>,
    eos: u32,
    device: Device,
}

/// The model after reading a prompt: its KV cache and the logits of the first new token.
/// Cloning the weights is cheap (tensors are shared), so both modes start from one prefill.
pub struct Prefilled {
    model: ModelWeights,
    logits: Tensor,
    position: usize,
    /// Wall time of the prefill forward pass.
    pub time: Duration,
}

/// Sampling settings, the same for both modes.
#[derive(Clone, Copy)]
pub struct Sampling {
    /// Softmax temperature (0 = greedy).
    pub temperature: f64,
    /// Nucleus: keep the most likely tokens up to this total probability.
    pub top_p: f64,
    /// Seed of the sampler, reset for every generation.
    pub seed: u64,
    /// Generated tokens at most (the eos not counted).
    pub max_tokens: usize,
}

/// One generation and its costs.
pub struct Generation {
    /// The generated text (without the eos).
    pub text: String,
    /// Sampled tokens, the final eos included: the decoding steps.
    pub steps: usize,
    /// True when it stopped at `max_tokens` rather than at the eos.
    pub truncated: bool,
    /// Wall time of all steps: forward pass, mask, sampling, accept.
    pub step_time: Duration,
    /// Time in tokensieve: `fill_next_token_bitmask`, `apply_token_bitmask_inplace` and
    /// `accept_token`.
    pub mask_time: Duration,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Llm {
    /// Loads the GGUF model at `path`: header, vocabulary, tokenizer, then weights.
    pub fn load(path: &Path) -> Result<Self, String> {
        let what = path.display().to_string();
        let file = File::open(path)
            .map_err(|e| format!("{what}: {e} (run scripts/fetch-model.sh first)"))?;
        let mut reader = BufReader::new(file);
        let content = Content::read(&mut reader).map_err(|e| format!("{what}: {e}"))?;
        let vocab = Vocabulary::from_gguf_content(&content, &what).map_err(err)?;
        let tokenizer = tokenizer_from_gguf(&content, &what).map_err(err)?;
        let eos = *vocab
            .stop_tokens()
            .first()
            .ok_or_else(|| format!("{what}: no tokenizer.ggml.eos_token_id"))?;
        let device = Device::Cpu;
        let model = ModelWeights::from_gguf(content, &mut reader, &device).map_err(err)?;
        Ok(Llm {
            model,
            tokenizer,
            vocab: Arc::new(vocab),
            eos,
            device,
        })
    }

    /// Token ids of `text`; ChatML markers written in it become their control tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        Ok(self
            .tokenizer
            .encode(text, false)
            .map_err(err)?
            .get_ids()
            .to_vec())
    }

    /// Reads `prompt` in one forward pass from an empty cache.
    pub fn prefill(&mut self, prompt: &[u32]) -> Result<Prefilled, String> {
        let started = Instant::now();
        self.model.clear_kv_cache();
        let input = Tensor::new(prompt, &self.device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(err)?;
        let logits = self
            .model
            .forward(&input, 0)
            .and_then(|l| l.squeeze(0))
            .map_err(err)?;
        Ok(Prefilled {
            model: self.model.clone(),
            logits,
            position: prompt.len(),
            time: started.elapsed(),
        })
    }

    /// Samples from `prefilled` until the eos or `max_tokens`; with a matcher, the mask is
    /// applied to the logits at every step and each token is accepted by the matcher (the
    /// generation also ends when the matcher terminates).
    pub fn generate(
        &self,
        prefilled: &Prefilled,
        mut matcher: Option<&mut GrammarMatcher>,
        sampling: Sampling,
    ) -> Result<Generation, String> {
        let mut model = prefilled.model.clone();
        let mut logits = prefilled.logits.clone();
        let width = logits.dim(0).map_err(err)?;
        if width != self.vocab.vocab_size() {
            return Err(format!(
                "the model's logits have {width} entries, the vocabulary {}",
                self.vocab.vocab_size()
            ));
        }
        let mut bitmask = allocate_token_bitmask(1, width);
        let mut sampler = LogitsProcessor::new(
            sampling.seed,
            Some(sampling.temperature),
            Some(sampling.top_p),
        );
        let mut generated = Vec::new();
        let mut mask_time = Duration::ZERO;
        let mut steps = 0;
        let mut truncated = true;
        let started = Instant::now();
        while generated.len() < sampling.max_tokens {
            let mut row: Vec<f32> = logits.to_vec1().map_err(err)?;
            if let Some(m) = matcher.as_deref_mut() {
                let t = Instant::now();
                m.fill_next_token_bitmask(&mut bitmask).map_err(err)?;
                apply_token_bitmask_inplace(&mut row, &bitmask).map_err(err)?;
                mask_time += t.elapsed();
            }
            let row = Tensor::from_vec(row, width, &self.device).map_err(err)?;
            let token = sampler.sample(&row).map_err(err)?;
            steps += 1;
            if let Some(m) = matcher.as_deref_mut() {
                let t = Instant::now();
                m.try_accept_token(token)
                    .map_err(|e| format!("the mask allowed token {token} but: {e}"))?;
                mask_time += t.elapsed();
            }
            if token == self.eos || matcher.as_deref().is_some_and(|m| m.is_terminated()) {
                truncated = false;
                break;
            }
            generated.push(token);
            let input = Tensor::new(&[token], &self.device)
                .and_then(|t| t.unsqueeze(0))
                .map_err(err)?;
            let position = prefilled.position + generated.len() - 1;
            logits = model
                .forward(&input, position)
                .and_then(|l| l.squeeze(0))
                .map_err(err)?;
        }
        Ok(Generation {
            text: String::from_utf8_lossy(&self.vocab.decode_bytes(&generated)).into_owned(),
            steps,
            truncated,
            step_time: started.elapsed(),
            mask_time,
        })
    }
}
