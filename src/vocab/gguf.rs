//! Loading a [`Vocabulary`] from a GGUF model file's tokenizer metadata (feature `gguf`).
//!
//! GGUF (llama.cpp's model format) stores the tokenizer beside the weights as metadata:
//! `tokenizer.ggml.model` (the tokenizer family), `tokenizer.ggml.tokens` (each id's token
//! string), `tokenizer.ggml.token_type` (normal, control, ...) and
//! `tokenizer.ggml.eos_token_id`. The file is read with candle-core's GGUF reader
//! (`candle_core::quantized::gguf_file::Content::read`), which stops after the header:
//! tensor data is never loaded. The conventions are documented on
//! [`Vocabulary::from_gguf_content`].

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};

use super::byte_level::{gpt2_byte_level_decode, gpt2_unicode_to_byte};
use super::{VocabError, Vocabulary};

const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
const KEY_EOS: &str = "tokenizer.ggml.eos_token_id";

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;
const TYPE_BYTE: i64 = 6;

impl Vocabulary {
    /// Loads the vocabulary stored in a GGUF model file (such as
    /// `SmolLM2-135M-Instruct.Q4_1.gguf`: 49,152 tokens, eos 2 = `<|im_end|>`).
    ///
    /// Only the header is read (about 0.1 s for SmolLM2); the weights are not. See
    /// [`Vocabulary::from_gguf_content`] for how token bytes, special and stop tokens are
    /// derived. The result's `vocab_size()` is the number of tokens; widen it with
    /// [`Vocabulary::with_vocab_size`] if the model's logits are wider.
    ///
    /// # Errors
    /// [`VocabError::Io`] when the file cannot be opened; [`VocabError::GgufRead`] when it is
    /// not a readable GGUF file; [`VocabError::GgufMetadata`] as in
    /// [`Vocabulary::from_gguf_content`].
    pub fn from_gguf(path: impl AsRef<Path>) -> Result<Self, VocabError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| VocabError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_gguf_reader(&mut BufReader::new(file), &path.display().to_string())
    }

    /// As [`Vocabulary::from_gguf`], from any reader positioned at the start of GGUF data;
    /// `what` names the source in error messages.
    ///
    /// # Errors
    /// As [`Vocabulary::from_gguf`].
    pub fn from_gguf_reader<R: Read + Seek>(
        reader: &mut R,
        what: &str,
    ) -> Result<Self, VocabError> {
        let content = Content::read(reader).map_err(|e| VocabError::GgufRead {
            what: what.to_string(),
            // candle appends a backtrace when RUST_BACKTRACE is set: keep the message.
            message: e
                .to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
        })?;
        Self::from_gguf_content(&content, what)
    }

    /// Builds the vocabulary from GGUF metadata already read with candle-core (an inference
    /// loop reads the header once, for the weights and for this).
    ///
    /// * **Token ids** are the positions in `tokenizer.ggml.tokens` (an array of strings).
    /// * **Bytes**, by `tokenizer.ggml.model`:
    ///   * `gpt2` (byte-level BPE; SmolLM2, Llama 3, Qwen): the GPT-2 byte-to-unicode map is
    ///     inverted on each normal token (`Ġ` → 0x20, `Ċ` → 0x0A), exactly as for a
    ///     byte-level `tokenizer.json`; a token with a character outside the map is its own
    ///     UTF-8.
    ///   * `llama` (SentencePiece): `▁` becomes a space, and byte tokens (type 6) spelled
    ///     `<0xHH>` are the byte `0xHH`.
    ///
    ///   Control (type 3) and user-defined (type 4) tokens are their text verbatim, as
    ///   llama.cpp's `token_to_piece` prints them.
    /// * **Special tokens** are the control tokens (`tokenizer.ggml.token_type` = 3:
    ///   `<|im_start|>`, `<|im_end|>`, `<|endoftext|>`, ...); grammar text never produces
    ///   them, a token terminal such as `<|im_end|>` does. Without
    ///   `tokenizer.ggml.token_type` (the GGUF specification makes it optional) no token is
    ///   special.
    /// * **Stop token**: `tokenizer.ggml.eos_token_id` (any unsigned or non-negative
    ///   integer type); none when the key is absent (set one with
    ///   [`Vocabulary::with_stop_tokens`]).
    ///
    /// # Errors
    /// [`VocabError::GgufMetadata`] when `tokenizer.ggml.model` is missing, not a string or
    /// not `gpt2` / `llama`; `tokenizer.ggml.tokens` is missing, empty or not an array of
    /// strings; `tokenizer.ggml.token_type` is not an array of integers as long as the
    /// tokens; `tokenizer.ggml.eos_token_id` is not an integer or not a token id.
    /// [`VocabError::TooManyTokens`] past `u32::MAX` tokens.
    pub fn from_gguf_content(content: &Content, what: &str) -> Result<Self, VocabError> {
        let meta = Metadata { content, what };
        let family = match meta.string(KEY_MODEL)? {
            "gpt2" => Family::ByteLevel,
            "llama" => Family::SentencePiece,
            other => {
                return Err(meta.error(
                    KEY_MODEL,
                    format!(
                        "is {other:?}: only \"gpt2\" (byte-level BPE) and \"llama\" \
                         (SentencePiece) tokenizers are supported"
                    ),
                ))
            }
        };
        let tokens = meta.string_array(KEY_TOKENS)?;
        if tokens.is_empty() {
            return Err(meta.error(KEY_TOKENS, "is empty".to_string()));
        }
        if tokens.len() >= u32::MAX as usize {
            return Err(VocabError::TooManyTokens(tokens.len()));
        }
        let types = match content.metadata.get(KEY_TOKEN_TYPE) {
            None => vec![1; tokens.len()],
            Some(_) => meta.int_array(KEY_TOKEN_TYPE)?,
        };
        if types.len() != tokens.len() {
            return Err(meta.error(
                KEY_TOKEN_TYPE,
                format!(
                    "has {} entries for {} tokens in `{KEY_TOKENS}`",
                    types.len(),
                    tokens.len()
                ),
            ));
        }
        let stop: Vec<u32> = match content.metadata.get(KEY_EOS) {
            None => Vec::new(),
            Some(value) => {
                let id = as_integer(value).filter(|&v| v >= 0).ok_or_else(|| {
                    meta.error(
                        KEY_EOS,
                        format!("is {}, expected a token id", describe(value)),
                    )
                })?;
                if id as u64 >= tokens.len() as u64 {
                    return Err(meta.error(
                        KEY_EOS,
                        format!("is {id}, past the vocabulary of {} tokens", tokens.len()),
                    ));
                }
                vec![id as u32]
            }
        };

        let byte_map = gpt2_unicode_to_byte();
        let mut special = Vec::new();
        let bytes: Vec<Vec<u8>> = tokens
            .iter()
            .zip(&types)
            .enumerate()
            .map(|(id, (&text, &ty))| {
                if ty == TYPE_CONTROL {
                    special.push(id as u32);
                }
                token_bytes(text, ty, family, &byte_map)
            })
            .collect();
        Vocabulary::from_token_bytes(&bytes, &special, &stop)
    }
}

/// A `tokenizers` tokenizer that encodes text as the GGUF's model was trained to see it, built
/// from the file's byte-level BPE metadata (`tokenizer.ggml.tokens`, `tokenizer.ggml.merges`
/// in `"Ġ t"` form, `tokenizer.ggml.token_type`, `tokenizer.ggml.pre`). Features `gguf` and
/// `hf`.
///
/// The pre-tokenizer follows `tokenizer.ggml.pre`: `smollm` (SmolLM / SmolLM2: every digit
/// apart, then GPT-2's byte-level split) or `gpt2` / `default` / absent (GPT-2's split only),
/// never with a prefix space; the control tokens (type 3, such as `<|im_start|>`) are
/// special tokens, so a ChatML prompt written as text encodes each marker as one token.
/// `encode(text, false)` ids then decode through [`Vocabulary::from_gguf_content`] to
/// exactly `text`. (candle's own GGUF tokenizer does not know `smollm` and adds a prefix
/// space, which mis-encodes ChatML prompts.)
///
/// # Errors
/// [`VocabError::GgufMetadata`] when `tokenizer.ggml.model` is not `gpt2`, the tokens,
/// merges or token types are missing or ill-typed, a merge is not two tokens separated by a
/// space, or `tokenizer.ggml.pre` names another pre-tokenizer; [`VocabError::Tokenizer`]
/// when the `tokenizers` crate rejects the BPE model (a merge of unknown tokens).
#[cfg(feature = "hf")]
pub fn tokenizer_from_gguf(
    content: &Content,
    what: &str,
) -> Result<tokenizers::Tokenizer, VocabError> {
    use tokenizers::models::bpe::{Vocab, BPE};
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::pre_tokenizers::digits::Digits;
    use tokenizers::pre_tokenizers::sequence::Sequence;
    use tokenizers::{AddedToken, PreTokenizerWrapper};

    const KEY_MERGES: &str = "tokenizer.ggml.merges";
    const KEY_PRE: &str = "tokenizer.ggml.pre";
    let meta = Metadata { content, what };
    let model = meta.string(KEY_MODEL)?;
    if model != "gpt2" {
        return Err(meta.error(
            KEY_MODEL,
            format!("is {model:?}: only \"gpt2\" (byte-level BPE) tokenizers can be built"),
        ));
    }
    let byte_level = ByteLevel::new(false, true, true);
    let pre: PreTokenizerWrapper = match content.metadata.get(KEY_PRE) {
        None => byte_level.into(),
        Some(_) => match meta.string(KEY_PRE)? {
            "gpt2" | "default" => byte_level.into(),
            "smollm" => Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into(),
            other => {
                return Err(meta.error(
                    KEY_PRE,
                    format!(
                        "is {other:?}: only \"smollm\", \"gpt2\" and \"default\" are supported"
                    ),
                ))
            }
        },
    };
    let tokens = meta.string_array(KEY_TOKENS)?;
    let types = match content.metadata.get(KEY_TOKEN_TYPE) {
        None => vec![1; tokens.len()],
        Some(_) => meta.int_array(KEY_TOKEN_TYPE)?,
    };
    let merges = meta
        .string_array(KEY_MERGES)?
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| {
                    meta.error(
                        KEY_MERGES,
                        format!("has {m:?} at index {i}, not two tokens"),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let vocab: Vocab = tokens.iter().map(|t| t.to_string()).zip(0u32..).collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| VocabError::Tokenizer {
            what: what.to_string(),
            message: e.to_string(),
        })?;
    let mut tokenizer = tokenizers::Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(pre));
    let specials: Vec<AddedToken> = tokens
        .iter()
        .zip(&types)
        .filter(|(_, &ty)| ty == TYPE_CONTROL)
        .map(|(t, _)| AddedToken::from(t.to_string(), true))
        .collect();
    tokenizer
        .add_special_tokens(specials)
        .map_err(|e| VocabError::Tokenizer {
            what: what.to_string(),
            message: e.to_string(),
        })?;
    Ok(tokenizer)
}

#[derive(Clone, Copy)]
enum Family {
    ByteLevel,
    SentencePiece,
}

/// The bytes token `text` of type `ty` appends to the output.
fn token_bytes(text: &str, ty: i64, family: Family, byte_map: &[Option<u8>]) -> Vec<u8> {
    if ty == TYPE_CONTROL || ty == TYPE_USER_DEFINED {
        return text.as_bytes().to_vec();
    }
    match family {
        Family::ByteLevel => {
            gpt2_byte_level_decode(text, byte_map).unwrap_or_else(|| text.as_bytes().to_vec())
        }
        Family::SentencePiece => {
            if ty == TYPE_BYTE {
                if let Some(b) = text
                    .strip_prefix("<0x")
                    .and_then(|t| t.strip_suffix('>'))
                    .filter(|h| h.len() == 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    return vec![b];
                }
            }
            text.replace('\u{2581}', " ").into_bytes()
        }
    }
}

/// Typed access to a GGUF header's metadata, with errors naming the file and key.
struct Metadata<'a> {
    content: &'a Content,
    what: &'a str,
}

impl<'a> Metadata<'a> {
    fn error(&self, key: &str, problem: String) -> VocabError {
        VocabError::GgufMetadata {
            what: self.what.to_string(),
            key: key.to_string(),
            problem,
        }
    }

    fn get(&self, key: &str) -> Result<&'a Value, VocabError> {
        self.content
            .metadata
            .get(key)
            .ok_or_else(|| self.error(key, "is missing".to_string()))
    }

    fn string(&self, key: &str) -> Result<&'a str, VocabError> {
        match self.get(key)? {
            Value::String(s) => Ok(s),
            other => Err(self.error(key, format!("is {}, expected a string", describe(other)))),
        }
    }

    fn array(&self, key: &str) -> Result<&'a [Value], VocabError> {
        match self.get(key)? {
            Value::Array(values) => Ok(values),
            other => Err(self.error(key, format!("is {}, expected an array", describe(other)))),
        }
    }

    fn string_array(&self, key: &str) -> Result<Vec<&'a str>, VocabError> {
        self.array(key)?
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.as_str()),
                other => Err(self.error(
                    key,
                    format!("has {} at index {i}, expected strings", describe(other)),
                )),
            })
            .collect()
    }

    fn int_array(&self, key: &str) -> Result<Vec<i64>, VocabError> {
        self.array(key)?
            .iter()
            .enumerate()
            .map(|(i, v)| {
                as_integer(v).ok_or_else(|| {
                    self.error(
                        key,
                        format!("has {} at index {i}, expected integers", describe(v)),
                    )
                })
            })
            .collect()
    }
}

/// The value of any integer type that fits an `i64`.
fn as_integer(value: &Value) -> Option<i64> {
    match *value {
        Value::U8(v) => Some(v.into()),
        Value::I8(v) => Some(v.into()),
        Value::U16(v) => Some(v.into()),
        Value::I16(v) => Some(v.into()),
        Value::U32(v) => Some(v.into()),
        Value::I32(v) => Some(v.into()),
        Value::U64(v) => i64::try_from(v).ok(),
        Value::I64(v) => Some(v),
        _ => None,
    }
}

/// A short description of a value for error messages: its type, and small scalars' value.
fn describe(value: &Value) -> String {
    match value {
        Value::String(s) if s.len() <= 40 => format!("the string {s:?}"),
        Value::Array(values) => format!("an array of {} values", values.len()),
        Value::F32(v) => format!("the float {v}"),
        Value::F64(v) => format!("the float {v}"),
        Value::Bool(v) => format!("the bool {v}"),
        other => match as_integer(other) {
            Some(v) => format!("the integer {v}"),
            None => format!("a {:?}", other.value_type()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_and_sentencepiece_bytes() {
        let m = gpt2_unicode_to_byte();
        assert_eq!(
            token_bytes("ĠhelloĊ", 1, Family::ByteLevel, &m),
            b" hello\n"
        );
        assert_eq!(
            token_bytes("<|im_end|>", TYPE_CONTROL, Family::ByteLevel, &m),
            b"<|im_end|>"
        );
        assert_eq!(
            token_bytes("Ġ", TYPE_USER_DEFINED, Family::ByteLevel, &m),
            "Ġ".as_bytes()
        );
        assert_eq!(
            token_bytes("▁Hello", 1, Family::SentencePiece, &m),
            b" Hello"
        );
        assert_eq!(
            token_bytes("<0x0A>", TYPE_BYTE, Family::SentencePiece, &m),
            b"\n"
        );
        // A normal token spelled like a byte token is its text.
        assert_eq!(
            token_bytes("<0x0A>", 1, Family::SentencePiece, &m),
            b"<0x0A>"
        );
    }

    #[test]
    fn integers_of_every_width() {
        assert_eq!(as_integer(&Value::U8(7)), Some(7));
        assert_eq!(as_integer(&Value::I32(-1)), Some(-1));
        assert_eq!(as_integer(&Value::U64(u64::MAX)), None);
        assert_eq!(as_integer(&Value::String("2".into())), None);
        assert_eq!(describe(&Value::String("x".into())), "the string \"x\"");
    }
}
