//! Loading a [`Vocabulary`] from a Hugging Face `tokenizer.json` (feature `hf`).
//!
//! The file is read with `serde_json` (only the model vocabulary, the added tokens and the
//! normalizer / pre-tokenizer / decoder configuration; merges are skipped), so the token ids
//! are exactly those written in the file. Each token's bytes follow what the `tokenizers`
//! crate's decoder would output for it, kept as raw bytes. The conventions are documented
//! on [`Vocabulary::from_tokenizer_json_str`].

use std::path::Path;

use rustc_hash::FxHashSet;
use serde::Deserialize;
use serde_json::Value;

use super::byte_level::{gpt2_byte_level_decode, gpt2_unicode_to_byte};
use super::{VocabError, Vocabulary};

/// One per-token step of a decoder, applied in order to a token's bytes.
#[derive(Debug)]
enum Step {
    /// Invert the GPT-2 byte-to-unicode map (the whole token, or not at all).
    ByteLevel,
    /// Replace every occurrence of `from` with `to`.
    Replace { from: Vec<u8>, to: Vec<u8> },
    /// A token spelled exactly `<0xHH>` becomes the byte `0xHH`.
    ByteFallback,
    /// Remove up to `start` leading and `stop` trailing copies of `content`.
    Strip {
        content: Vec<u8>,
        start: usize,
        stop: usize,
    },
    /// A `Metaspace` decoder: `from` becomes a space, except in the first token of the
    /// output when `drop_first` (its `prepend_scheme` is not `never`), where it is removed.
    Metaspace { from: Vec<u8>, drop_first: bool },
}

/// What the decoder does only at the start of the output: the per-token steps, plus the
/// leading copies of `content` stripped from the joined text (a `Strip` after `Fuse`).
#[derive(Debug, Default)]
struct Decoder {
    steps: Vec<Step>,
    /// `(content, start)` of a `Strip` after `Fuse`.
    strip_output: Option<(Vec<u8>, usize)>,
}

impl Decoder {
    /// True when some token may read differently as the first of the output.
    fn changes_start(&self) -> bool {
        self.strip_output
            .as_ref()
            .is_some_and(|(c, n)| !c.is_empty() && *n > 0)
            || self.steps.iter().any(|s| {
                matches!(
                    s,
                    Step::Metaspace {
                        drop_first: true,
                        ..
                    }
                )
            })
    }

    /// The bytes of a non-special token when it is the first of the output.
    fn start_form(&self, text: &str, byte_map: &[Option<u8>]) -> Vec<u8> {
        let mut bytes = decode_token(text, &self.steps, byte_map, true);
        if let Some((content, n)) = &self.strip_output {
            let mut lo = 0;
            for _ in 0..*n {
                if !content.is_empty() && bytes[lo..].starts_with(content) {
                    lo += content.len();
                } else {
                    break;
                }
            }
            bytes.drain(..lo);
        }
        bytes
    }
}

impl Vocabulary {
    /// Loads the vocabulary of a Hugging Face `tokenizer.json` file.
    ///
    /// If a `tokenizer_config.json` exists in the same folder it is read too: its
    /// `eos_token` becomes the stop token and its `added_tokens_decoder` entries marked
    /// `special` are special tokens. Without it, the vocabulary has no stop token (set one
    /// with [`Vocabulary::with_stop_tokens`]). See [`Vocabulary::from_tokenizer_json_str`]
    /// for how token bytes, special tokens and sizes are derived.
    ///
    /// # Errors
    /// [`VocabError::Io`] when a file exists but cannot be read;
    /// [`VocabError::Tokenizer`] when a file is not a valid tokenizer or its decoder cannot
    /// be reduced to per-token bytes (see [`Vocabulary::from_tokenizer_json_str`]);
    /// [`VocabError::TooManyTokens`] as there.
    pub fn from_tokenizer_json(path: impl AsRef<Path>) -> Result<Self, VocabError> {
        let path = path.as_ref();
        let json = read_to_string(path)?;
        let config_path = path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join("tokenizer_config.json");
        let config = if config_path.is_file() {
            Some(read_to_string(&config_path)?)
        } else {
            None
        };
        load(
            &json,
            config.as_deref(),
            &path.display().to_string(),
            &config_path.display().to_string(),
        )
    }

    /// Builds the vocabulary from the text of a `tokenizer.json` and, optionally, of its
    /// `tokenizer_config.json`.
    ///
    /// **Token ids** are the model's vocabulary (a `{token: id}` map, or the positions of a
    /// Unigram `[[piece, score], ...]` list) plus the `added_tokens` with the ids the file
    /// gives them (an added token wins over a model token with the same id).
    /// [`Vocabulary::tokenizer_size`] and [`Vocabulary::vocab_size`] are the largest id + 1.
    /// Ids no token uses (holes) get empty bytes and are marked special, so grammar text
    /// never produces them. (The `tokenizers` crate itself ignores the written ids of added
    /// tokens and numbers them consecutively after the model vocabulary, logging a warning
    /// when they differ; for well-formed files, such as all of Llama 3.1, Qwen3, DeepSeek V3,
    /// gpt-oss, Llama 2 and Gemma 3, both agree.)
    ///
    /// **Bytes** of an ordinary token are its text run through the per-token steps of the
    /// file's `decoder` (`ByteLevel`, `Metaspace`, `Replace` with a plain string,
    /// `ByteFallback`, `Fuse`, `Strip`, `BPEDecoder`, and `Sequence`s of these), as the
    /// `tokenizers` crate's `decode` would, but never forced through UTF-8 (a token may be
    /// part of a character). Without a decoder, a `ByteLevel` or `Metaspace`
    /// pre-tokenizer/normalizer and the model's `byte_fallback` flag decide. The two
    /// families:
    ///
    /// * *Byte-level BPE* (GPT-2 style; Llama 3.1, Qwen3, DeepSeek V3, gpt-oss): the GPT-2
    ///   byte-to-unicode map is inverted on every character (`Ġ` → 0x20, `Ċ` → 0x0A); a
    ///   token whose characters are not all in the map (added tokens such as DeepSeek's
    ///   `<｜User｜>`) is its own UTF-8, as in `tokenizers`' `ByteLevel` decoder.
    /// * *SentencePiece / metaspace* (Llama 2, Gemma 3): `Replace("▁" → " ")` or
    ///   `Metaspace` turns `▁` into a space; with `ByteFallback`, a token spelled exactly
    ///   `<0xHH>` is the single byte `0xHH`.
    ///
    /// Steps that depend on a token's position rather than on the token are not applied to
    /// the token's bytes: `Strip` after `Fuse` (Llama 2's decoder strips one leading space
    /// of the whole output) and `Metaspace`'s removal of the first token's metaspaces (when
    /// its `prepend_scheme` is not `never`). They give the tokens' *start forms* instead
    /// ([`Vocabulary::start_bytes`]: Llama 2's `▁Hello` is `Hello` first in the output),
    /// used when [`Vocabulary::with_strip_output_start`] is on. (Not modelled: the trailing
    /// part of a `Strip` after `Fuse`, which acts at the end of the output; a leading
    /// `Strip` whose spaces run past the first token; a `Metaspace` after `Fuse`. None of
    /// the tokenizers in `../shared/tokenizers` has them.)
    ///
    /// *Leading-space convention:* Llama 2's normalizer prepends `▁` to every text it
    /// encodes, so the ids of `encode(text)` concatenate through this vocabulary to
    /// `" " + text` (the first word is `▁Hello` = `" Hello"`): the vocabulary gives the bytes
    /// the model really emits, and a grammar constraining a Llama 2 completion must allow
    /// for that leading space. Gemma 3's normalizer prepends nothing: its ids concatenate to
    /// exactly `text`.
    ///
    /// **Special tokens** are the added tokens marked `"special": true`, in `tokenizer.json`
    /// or in the config's `added_tokens_decoder` (entries of the latter missing from
    /// `tokenizer.json` are added, as `transformers` does). Their bytes are their content
    /// text verbatim (`<|im_end|>`), and [`Vocabulary::special_token_id`] finds them by it.
    /// Non-special added tokens (Qwen3's `<think>`, Gemma 3's `<unused0>`) are ordinary
    /// tokens whose text goes through the decoder like any other.
    ///
    /// **Stop tokens**: the config's `eos_token` (a string, or an object with `content`) when
    /// it names a token (added tokens first, then the model vocabulary); none otherwise.
    ///
    /// # Errors
    /// [`VocabError::Tokenizer`] when either text is not valid JSON or lacks a `model`, the
    /// tokenizer has no token or an implausibly large id (over 16 × its token count +
    /// 2^20), or the decoder has a step whose output depends on neighbouring tokens
    /// (`WordPiece`, `CTC`) or a regex `Replace`; [`VocabError::TooManyTokens`] for ids at
    /// or past `u32::MAX - 1`.
    pub fn from_tokenizer_json_str(
        tokenizer_json: &str,
        tokenizer_config_json: Option<&str>,
    ) -> Result<Self, VocabError> {
        load(
            tokenizer_json,
            tokenizer_config_json,
            "tokenizer.json",
            "tokenizer_config.json",
        )
    }

    /// Builds the vocabulary of a tokenizer already loaded with the `tokenizers` crate
    /// (what an inference loop built on candle or mistral.rs usually holds), with its
    /// `tokenizer_config.json` text for the eos token.
    ///
    /// The tokenizer is serialised back to its `tokenizer.json` form and read as
    /// [`Vocabulary::from_tokenizer_json_str`] does, so the two give the same vocabulary.
    ///
    /// # Errors
    /// [`VocabError::Tokenizer`] when the tokenizer cannot be serialised, plus the errors of
    /// [`Vocabulary::from_tokenizer_json_str`].
    pub fn from_hf_tokenizer(
        tokenizer: &tokenizers::Tokenizer,
        tokenizer_config_json: Option<&str>,
    ) -> Result<Self, VocabError> {
        let json = tokenizer
            .to_string(false)
            .map_err(|e| tokenizer_error("(in-memory tokenizers::Tokenizer)", e))?;
        load(
            &json,
            tokenizer_config_json,
            "(in-memory tokenizers::Tokenizer)",
            "tokenizer_config.json",
        )
    }
}

fn read_to_string(path: &Path) -> Result<String, VocabError> {
    std::fs::read_to_string(path).map_err(|source| VocabError::Io {
        path: path.display().to_string(),
        source,
    })
}

fn tokenizer_error(what: &str, message: impl std::fmt::Display) -> VocabError {
    VocabError::Tokenizer {
        what: what.to_string(),
        message: message.to_string(),
    }
}

/// The parts of a `tokenizer.json` the vocabulary needs; everything else (merges,
/// post-processor, ...) is skipped unparsed.
#[derive(Deserialize)]
struct TokenizerFile {
    #[serde(default)]
    added_tokens: Vec<AddedTokenJson>,
    #[serde(default)]
    normalizer: Option<Value>,
    #[serde(default)]
    pre_tokenizer: Option<Value>,
    #[serde(default)]
    decoder: Option<Value>,
    model: ModelJson,
}

#[derive(Deserialize)]
struct AddedTokenJson {
    id: u32,
    content: String,
    #[serde(default)]
    special: bool,
}

#[derive(Deserialize)]
struct ModelJson {
    #[serde(default)]
    vocab: ModelVocab,
    #[serde(default)]
    byte_fallback: bool,
}

/// `(token text, id)` of the model vocabulary: a `{"text": id}` map (BPE, WordPiece,
/// WordLevel) or a `[["piece", score], ...]` list whose positions are the ids (Unigram).
#[derive(Default)]
struct ModelVocab(Vec<(String, u32)>);

impl<'de> Deserialize<'de> for ModelVocab {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ModelVocab;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of token to id, or a list of [piece, score]")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<ModelVocab, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<String, u32>()? {
                    out.push(entry);
                }
                Ok(ModelVocab(out))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<ModelVocab, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some((piece, _score)) = seq.next_element::<(String, f64)>()? {
                    let id = u32::try_from(out.len()).map_err(serde::de::Error::custom)?;
                    out.push((piece, id));
                }
                Ok(ModelVocab(out))
            }
        }
        d.deserialize_any(V)
    }
}

fn load(
    json: &str,
    config: Option<&str>,
    what: &str,
    config_what: &str,
) -> Result<Vocabulary, VocabError> {
    let file: TokenizerFile = serde_json::from_str(json).map_err(|e| tokenizer_error(what, e))?;
    let config: Option<Value> = config
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| tokenizer_error(config_what, e))?;
    let decoder = decoder_steps(&file).map_err(|m| tokenizer_error(what, m))?;
    let steps = &decoder.steps;
    let byte_map = gpt2_unicode_to_byte();

    // Every (id, text, special) entry: model tokens, then added tokens (which win), then
    // the config's added_tokens_decoder (which may only add tokens or mark them special).
    let mut entries: Vec<(u32, String, bool)> = Vec::new();
    let model_len = file.model.vocab.0.len();
    entries.extend(file.model.vocab.0.into_iter().map(|(t, id)| (id, t, false)));
    let added_ids: FxHashSet<u32> = file.added_tokens.iter().map(|t| t.id).collect();
    let mut config_special: Vec<u32> = Vec::new();
    if let Some(atd) = config
        .as_ref()
        .and_then(|c| c.get("added_tokens_decoder"))
        .and_then(Value::as_object)
    {
        for (key, entry) in atd {
            let Ok(id) = key.parse::<u32>() else { continue };
            let special = entry.get("special").and_then(Value::as_bool) == Some(true);
            if added_ids.contains(&id) {
                if special {
                    config_special.push(id);
                }
            } else if let Some(content) = entry.get("content").and_then(Value::as_str) {
                entries.push((id, content.to_string(), special));
            }
        }
    }
    let added_start = entries.len();
    entries.extend(
        file.added_tokens
            .iter()
            .map(|t| (t.id, t.content.clone(), t.special)),
    );

    let Some(max_id) = entries.iter().map(|e| e.0).max() else {
        return Err(tokenizer_error(what, "the tokenizer has no tokens"));
    };
    if max_id >= u32::MAX - 1 {
        return Err(VocabError::TooManyTokens(max_id as usize + 1));
    }
    // Guard against allocating billions of holes for a corrupt id.
    if max_id as usize > 16 * entries.len() + (1 << 20) {
        return Err(tokenizer_error(
            what,
            format!(
                "token id {max_id} is implausibly large for {} tokens",
                entries.len()
            ),
        ));
    }
    let n = max_id as usize + 1;
    let mut slots: Vec<Option<(&str, bool)>> = vec![None; n];
    for (id, text, special) in &entries {
        slots[*id as usize] = Some((text.as_str(), *special));
    }
    for id in config_special {
        if let Some(Some(slot)) = slots.get_mut(id as usize) {
            slot.1 = true;
        }
    }

    let mut tokens: Vec<Vec<u8>> = Vec::with_capacity(n);
    let mut special_ids: Vec<u32> = Vec::new();
    for (id, slot) in slots.iter().enumerate() {
        match slot {
            None => {
                tokens.push(Vec::new());
                special_ids.push(id as u32);
            }
            Some((text, true)) => {
                tokens.push(text.as_bytes().to_vec());
                special_ids.push(id as u32);
            }
            Some((text, false)) => tokens.push(decode_token(text, steps, &byte_map, false)),
        }
    }

    // The eos token's id: an added token of that content first, else a model token.
    let eos = config
        .as_ref()
        .and_then(|c| c.get("eos_token"))
        .and_then(|eos| match eos {
            Value::String(s) => Some(s.as_str()),
            Value::Object(o) => o.get("content").and_then(Value::as_str),
            _ => None,
        });
    let stop: Vec<u32> = eos
        .and_then(|text| {
            let find =
                |range: &[(u32, String, bool)]| range.iter().find(|e| e.1 == text).map(|e| e.0);
            find(&entries[added_start..])
                .or_else(|| find(&entries[model_len..added_start]))
                .or_else(|| find(&entries[..model_len]))
        })
        .into_iter()
        .collect();

    // Start forms: what the decoder writes for a token first in the output, where that
    // differs (Llama 2's `Strip` of one leading space).
    let mut start_forms = Vec::new();
    if decoder.changes_start() {
        for (id, slot) in slots.iter().enumerate() {
            if let Some((text, false)) = slot {
                let form = decoder.start_form(text, &byte_map);
                if form != tokens[id] && !stop.contains(&(id as u32)) {
                    start_forms.push((id as u32, form));
                }
            }
        }
    }
    Vocabulary::from_token_bytes(&tokens, &special_ids, &stop)?.with_start_bytes(start_forms)
}

/// The per-token steps of the tokenizer's decoder (see `from_tokenizer_json_str`), and
/// what it strips from the start of the output.
fn decoder_steps(file: &TokenizerFile) -> Result<Decoder, String> {
    let mut steps = Vec::new();
    if let Some(decoder) = file.decoder.as_ref().filter(|d| !d.is_null()) {
        let mut d = Decoder::default();
        let mut fused = false;
        collect_steps(decoder, &mut d, &mut fused)?;
        return Ok(d);
    }
    // No decoder: fall back on what the pre-tokenizer / normalizer did to the text.
    let mut kinds = Vec::new();
    for part in [&file.pre_tokenizer, &file.normalizer]
        .into_iter()
        .flatten()
    {
        component_types(part, &mut kinds);
    }
    if kinds.iter().any(|(t, _)| t == "ByteLevel") {
        steps.push(Step::ByteLevel);
    } else if let Some((_, replacement)) = kinds.iter().find(|(t, _)| t == "Metaspace") {
        steps.push(Step::Replace {
            from: replacement.clone().into_bytes(),
            to: b" ".to_vec(),
        });
    }
    if file.model.byte_fallback {
        steps.push(Step::ByteFallback);
    }
    Ok(Decoder {
        steps,
        strip_output: None,
    })
}

/// Lists `(type, metaspace replacement)` of a (possibly `Sequence`) component.
fn component_types(value: &Value, out: &mut Vec<(String, String)>) {
    let ty = value.get("type").and_then(Value::as_str).unwrap_or("");
    for key in ["pretokenizers", "normalizers"] {
        if let Some(list) = value.get(key).and_then(Value::as_array) {
            for v in list {
                component_types(v, out);
            }
        }
    }
    let replacement = value
        .get("replacement")
        .and_then(Value::as_str)
        .unwrap_or("\u{2581}");
    out.push((ty.to_string(), replacement.to_string()));
}

/// Appends the steps of one decoder. Once `Fuse` has joined the tokens, only steps that act
/// on each character alike (`ByteLevel`, `Replace`) still apply per token; a `Strip` of the
/// joined text acts at the start of the output only (its leading part is recorded in
/// `strip_output`; its trailing part, at the end of the output, is not modelled).
fn collect_steps(value: &Value, d: &mut Decoder, fused: &mut bool) -> Result<(), String> {
    let steps = &mut d.steps;
    let ty = value.get("type").and_then(Value::as_str).unwrap_or("");
    let str_field = |key: &str| value.get(key).and_then(Value::as_str);
    match ty {
        "Sequence" => {
            for x in value
                .get("decoders")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                collect_steps(x, d, fused)?;
            }
        }
        "ByteLevel" => steps.push(Step::ByteLevel),
        "Metaspace" => {
            // `prepend_scheme` defaults to `always`; the older `add_prefix_space: false`
            // means `never`. After `Fuse` the "first token" is the whole output, whose
            // every metaspace it would drop: not modelled (written as spaces).
            let never = str_field("prepend_scheme") == Some("never")
                || value.get("add_prefix_space").and_then(Value::as_bool) == Some(false);
            steps.push(Step::Metaspace {
                from: str_field("replacement")
                    .unwrap_or("\u{2581}")
                    .as_bytes()
                    .to_vec(),
                drop_first: !never && !*fused,
            })
        }
        "Replace" => {
            let pattern = value.get("pattern");
            let Some(from) = pattern
                .and_then(|p| p.get("String"))
                .and_then(Value::as_str)
            else {
                return Err(format!(
                    "decoder Replace with pattern {} is not supported (only plain strings)",
                    pattern.unwrap_or(&Value::Null)
                ));
            };
            if !from.is_empty() {
                steps.push(Step::Replace {
                    from: from.as_bytes().to_vec(),
                    to: str_field("content").unwrap_or("").as_bytes().to_vec(),
                });
            }
        }
        "ByteFallback" => {
            if !*fused {
                steps.push(Step::ByteFallback);
            }
        }
        "Fuse" => *fused = true,
        "Strip" => {
            let count = |key: &str| value.get(key).and_then(Value::as_u64).unwrap_or(0);
            let content = str_field("content").unwrap_or(" ").as_bytes().to_vec();
            if !*fused {
                steps.push(Step::Strip {
                    content,
                    start: count("start") as usize,
                    stop: count("stop") as usize,
                });
            } else if count("start") > 0 {
                d.strip_output = Some((content, count("start") as usize));
            }
        }
        "BPEDecoder" => {
            let suffix = str_field("suffix").unwrap_or("</w>");
            if !suffix.is_empty() {
                steps.push(Step::Replace {
                    from: suffix.as_bytes().to_vec(),
                    to: b" ".to_vec(),
                });
            }
        }
        other => {
            return Err(format!(
                "decoder {other:?} is not supported: a token's bytes would depend on its \
                 neighbours"
            ))
        }
    }
    Ok(())
}

/// A non-special token's output bytes; `first`: as the first token of the output (a
/// `Metaspace` decoder then drops its metaspaces).
fn decode_token(text: &str, steps: &[Step], byte_map: &[Option<u8>], first: bool) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    for step in steps {
        match step {
            Step::Metaspace { from, drop_first } => {
                if !from.is_empty() && bytes.windows(from.len()).any(|w| w == from.as_slice()) {
                    let to: &[u8] = if first && *drop_first { b"" } else { b" " };
                    bytes = replace_all(&bytes, from, to);
                }
            }
            Step::ByteLevel => {
                if let Some(mapped) = std::str::from_utf8(&bytes)
                    .ok()
                    .and_then(|s| gpt2_byte_level_decode(s, byte_map))
                {
                    bytes = mapped;
                }
            }
            Step::Replace { from, to } => {
                if !from.is_empty() && bytes.windows(from.len()).any(|w| w == from.as_slice()) {
                    bytes = replace_all(&bytes, from, to);
                }
            }
            Step::ByteFallback => {
                if bytes.len() == 6 && bytes.starts_with(b"<0x") && bytes[5] == b'>' {
                    if let Some(b) = std::str::from_utf8(&bytes[3..5])
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                    {
                        bytes = vec![b];
                    }
                }
            }
            Step::Strip {
                content,
                start,
                stop,
            } => {
                let mut lo = 0;
                for _ in 0..*start {
                    if !content.is_empty() && bytes[lo..].starts_with(content) {
                        lo += content.len();
                    } else {
                        break;
                    }
                }
                let mut hi = bytes.len();
                for _ in 0..*stop {
                    if !content.is_empty() && bytes[lo..hi].ends_with(content) {
                        hi -= content.len();
                    } else {
                        break;
                    }
                }
                bytes = bytes[lo..hi].to_vec();
            }
        }
    }
    bytes
}

/// `haystack` with every non-overlapping occurrence of `from` (non-empty) replaced by `to`.
fn replace_all(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_and_fallback() {
        let steps = [
            Step::Replace {
                from: "\u{2581}".as_bytes().to_vec(),
                to: b" ".to_vec(),
            },
            Step::ByteFallback,
        ];
        let m = gpt2_unicode_to_byte();
        assert_eq!(decode_token("▁Hello", &steps, &m, false), b" Hello");
        assert_eq!(decode_token("<0x0A>", &steps, &m, false), b"\n");
        assert_eq!(decode_token("<0xE4>", &steps, &m, false), vec![0xE4]);
        assert_eq!(decode_token("<0xZZ>", &steps, &m, false), b"<0xZZ>");
    }
}
