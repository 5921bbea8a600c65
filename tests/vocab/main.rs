//! Vocabularies: loading real tokenizers (Hugging Face, tiktoken, GGUF), stop and special
//! tokens, logits wider or narrower than the tokenizer, and the start of a SentencePiece output.
//!
//! Run with `cargo test --release --features gguf --test vocab [filter]`.

#[path = "../common/mod.rs"]
mod common;

mod gguf;
mod loading;
mod narrow_logits;
mod output_start;
mod wider_logits;
