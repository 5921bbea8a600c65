//! Compiled grammars and vocabularies to bytes and back, to share them between the workers
//! of a serving engine (XGrammar's `CompiledGrammar.serialize_json` /
//! `deserialize_json`, in a binary form).
//!
//! # Format
//!
//! A 40-byte header, then a payload:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic: `TSGRAMMR` (a compiled grammar) or `TSVOCAB\0` (a vocabulary) |
//! | 8..12 | format version, little-endian `u32` ([`FORMAT_VERSION`]) |
//! | 12..16 | reserved, zero |
//! | 16..24 | the vocabulary's fingerprint ([`Vocabulary::fingerprint`]), little-endian `u64` |
//! | 24..32 | payload length in bytes, little-endian `u64` |
//! | 32..40 | XXH3-64 checksum of the payload, little-endian `u64` |
//!
//! The payload is the data encoded with [`postcard`] (serde's compact codec: varint
//! integers, no field names, no schema beside the data). Masks, most of the bytes, are
//! written compactly (since version 2): sorted lists of token ids and trie positions as
//! gaps between neighbours (a byte each for close ids), bitsets as their raw
//! little-endian words (4 bytes a word). postcard was chosen over bincode
//! because it is maintained (bincode's last release is a notice that it is no longer
//! developed), has a specified and stable wire format (1.x), and is fast on the long
//! integer arrays masks are made of; the checksum is XXH3-64 (`xxhash-rust`), stable by
//! its specification.
//!
//! # What a grammar's bytes hold
//!
//! The grammar (as EBNF text), its automata, its mask classes, and **the masks computed so
//! far**: every node mask and context mask after an eager compile; under
//! [`Precompute::Lazy`](crate::Precompute::Lazy) only those the matchers have asked for
//! until then. A loaded grammar computes the missing ones on first use, as the original
//! would, with the loading compiler's trie, shared mask cache and limits. The vocabulary is
//! not in a grammar's bytes: a grammar is read with a [`GrammarCompiler`] of the same
//! vocabulary, checked by the fingerprint.
//!
//! # Errors, never panics
//!
//! Reading checks, in order: the length of the header, the magic, the version (a newer one
//! is [`DeserializeError::NewerVersion`], an older one [`DeserializeError::OlderVersion`]), the payload length (a truncated buffer is
//! [`DeserializeError::Truncated`]), the checksum ([`DeserializeError::Checksum`]), the
//! vocabulary fingerprint ([`DeserializeError::VocabularyMismatch`]), then that every index
//! of the decoded data is in range ([`DeserializeError::Malformed`]). The checksum guards
//! against damage, not against a forger: a buffer built to pass it is still range-checked,
//! so it cannot make the reader or a later matcher index out of bounds.
//!
//! ```
//! use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary, CompiledGrammar};
//!
//! let tokens: Vec<&[u8]> = vec![b"a", b"b", b"ab", b"</s>"];
//! let vocab = Vocabulary::from_token_bytes(&tokens, &[3], &[3]).unwrap();
//! let compiler = GrammarCompiler::new(vocab.clone());
//! let bytes = compiler.compile_grammar(r#"root ::= "a" "b"+"#).unwrap().serialize().unwrap();
//! // Another worker: the same vocabulary (sent once, or loaded from the tokenizer).
//! let vocab2 = Vocabulary::deserialize(&vocab.serialize().unwrap()).unwrap();
//! let compiler2 = GrammarCompiler::new(vocab2);
//! let grammar = CompiledGrammar::deserialize(&bytes, &compiler2).unwrap();
//! let mut m = GrammarMatcher::new(grammar);
//! assert!(m.accept_token(2) && m.accept_token(3) && m.is_terminated());
//! ```

use super::{CompiledGrammar, GrammarCompiler};
use crate::automaton::Automaton;
use crate::grammar::ebnf::parse_ebnf;
use crate::limits::{check_memory, LimitExceeded};
use crate::mask::cache::{NodeMask, SubtreeMemo, TokenSet};
use crate::mask::counted::{derivable, CountedBase};
use crate::mask::intern::MaskInterner;
use crate::mask::plan::VirtualKey;
use crate::parser::key_filter::KeyFilters;
use crate::vocab::Vocabulary;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, OnceLock, RwLock};
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// The format version written, and the only one read. Version 5 (this one) writes a mask
/// that several mask classes hold once, the other classes referring to the first; version
/// 4 added token sets written as runs of trie positions (`mask::cache::TokenSet::Runs`);
/// version 3 added
/// the key rules whose completions matchers check (`parser::key_filter`); version 2 wrote sorted id
/// lists as gaps and bitsets as raw words, version 1 as plain varints. Older bytes are
/// refused with [`DeserializeError::OlderVersion`] (re-serialize them).
pub const FORMAT_VERSION: u32 = 5;

const GRAMMAR_MAGIC: [u8; 8] = *b"TSGRAMMR";
const VOCAB_MAGIC: [u8; 8] = *b"TSVOCAB\0";
const HEADER_LEN: usize = 40;

/// Why a grammar or vocabulary could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SerializeError {
    /// The encoder failed (out of memory, in practice).
    #[error("cannot encode: {0}")]
    Encode(String),
    /// The grammar's EBNF text does not read back as a grammar (a printer bug: please
    /// report it with the grammar).
    #[error("the grammar's EBNF text does not parse back: {0}")]
    GrammarText(String),
}

/// Why bytes could not be read as a grammar or vocabulary. Nothing is built then.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeserializeError {
    /// Shorter than the 40-byte header.
    #[error("{got} bytes is shorter than the 40-byte header")]
    TooShort {
        /// The buffer's length.
        got: usize,
    },
    /// The first 8 bytes are not the magic of what was asked for.
    #[error("not a serialized {expected}: the first bytes are {found:?}, expected {magic:?}", magic = String::from_utf8_lossy(expected_magic(.expected)))]
    BadMagic {
        /// `"grammar"` or `"vocabulary"`.
        expected: &'static str,
        /// The 8 bytes found.
        found: [u8; 8],
    },
    /// Written by a newer tokensieve, in a format version this one cannot read.
    #[error("format version {found} is newer than this tokensieve reads ({supported}); upgrade the reader or re-serialize with the older writer")]
    NewerVersion {
        /// The version in the header.
        found: u32,
        /// [`FORMAT_VERSION`].
        supported: u32,
    },
    /// Written by an older tokensieve, in a format version this one no longer reads.
    #[error("format version {found} is older than this tokensieve reads ({supported}); compile the grammar again, or re-serialize it with the writer of this version")]
    OlderVersion {
        /// The version in the header.
        found: u32,
        /// [`FORMAT_VERSION`].
        supported: u32,
    },
    /// The payload is shorter (or longer) than the header says.
    #[error("truncated: the header announces a payload of {expected} bytes, {got} follow it")]
    Truncated {
        /// The payload length in the header.
        expected: u64,
        /// Bytes after the header.
        got: u64,
    },
    /// The payload's checksum differs from the header's: the bytes were damaged.
    #[error("corrupted: payload checksum {found:#018x}, the header says {expected:#018x}")]
    Checksum {
        /// The checksum in the header.
        expected: u64,
        /// The checksum of the payload read.
        found: u64,
    },
    /// The grammar was compiled against another vocabulary than the reading compiler's.
    #[error("the grammar was compiled for the vocabulary with fingerprint {grammar:#018x}, but this compiler's vocabulary has fingerprint {compiler:#018x} (other tokens, special or stop ids, or logits width)")]
    VocabularyMismatch {
        /// The fingerprint in the header.
        grammar: u64,
        /// The reading compiler's vocabulary's.
        compiler: u64,
    },
    /// The payload decodes to inconsistent data (an index out of range, lengths that do
    /// not agree, or a decoder error).
    #[error("malformed payload: {0}")]
    Malformed(String),
    /// The loaded grammar is larger than the reading compiler's
    /// [`Limits::max_memory_bytes`](crate::Limits::max_memory_bytes).
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
}

fn expected_magic(what: &str) -> &'static [u8; 8] {
    if what == "grammar" {
        &GRAMMAR_MAGIC
    } else {
        &VOCAB_MAGIC
    }
}

fn encode<T: Serialize>(
    magic: [u8; 8],
    fingerprint: u64,
    value: &T,
) -> Result<Vec<u8>, SerializeError> {
    let payload =
        postcard::to_allocvec(value).map_err(|e| SerializeError::Encode(e.to_string()))?;
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&magic);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&fingerprint.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&xxh3_64(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// Checks the header; returns the fingerprint and the payload.
fn open<'a>(bytes: &'a [u8], what: &'static str) -> Result<(u64, &'a [u8]), DeserializeError> {
    if bytes.len() < HEADER_LEN {
        return Err(DeserializeError::TooShort { got: bytes.len() });
    }
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
    let mut found = [0u8; 8];
    found.copy_from_slice(&bytes[..8]);
    if &found != expected_magic(what) {
        return Err(DeserializeError::BadMagic {
            expected: what,
            found,
        });
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or([0; 4]));
    if version > FORMAT_VERSION {
        return Err(DeserializeError::NewerVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version < FORMAT_VERSION {
        return Err(DeserializeError::OlderVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if bytes[12..16] != [0; 4] {
        return Err(DeserializeError::Malformed(
            "reserved header bytes 12..16 are not zero".into(),
        ));
    }
    let payload = &bytes[HEADER_LEN..];
    let len = u64_at(24);
    if len != payload.len() as u64 {
        return Err(DeserializeError::Truncated {
            expected: len,
            got: payload.len() as u64,
        });
    }
    let expected = u64_at(32);
    let sum = xxh3_64(payload);
    if sum != expected {
        return Err(DeserializeError::Checksum {
            expected,
            found: sum,
        });
    }
    Ok((u64_at(16), payload))
}

fn decode<'a, T: Deserialize<'a>>(payload: &'a [u8]) -> Result<T, DeserializeError> {
    match postcard::take_from_bytes::<T>(payload) {
        Ok((v, [])) => Ok(v),
        Ok((_, rest)) => Err(DeserializeError::Malformed(format!(
            "{} bytes left after the data",
            rest.len()
        ))),
        Err(e) => Err(DeserializeError::Malformed(e.to_string())),
    }
}

/// A vocabulary's data, as written.
#[derive(Serialize, Deserialize)]
struct VocabData {
    /// Every token's bytes, concatenated.
    bytes: Vec<u8>,
    /// Every token's length.
    lens: Vec<u32>,
    special: Vec<u32>,
    stop: Vec<u32>,
    vocab_size: u64,
    /// Tokens written differently at the start of the output (`Vocabulary::start_bytes`).
    start_forms: Vec<(u32, Vec<u8>)>,
    /// `Vocabulary::strips_output_start`.
    strip_output_start: bool,
}

impl Vocabulary {
    /// A hash (XXH3-64) of everything a compiled grammar depends on: every token's bytes,
    /// the special and stop ids, the tokenizer's size and the logits width. Two
    /// vocabularies with the same fingerprint compile every grammar to the same masks.
    pub fn fingerprint(&self) -> u64 {
        let mut h = Xxh3::new();
        h.update(b"tokensieve vocabulary v1");
        h.update(&(self.tokenizer_size() as u64).to_le_bytes());
        h.update(&(self.vocab_size() as u64).to_le_bytes());
        for id in 0..self.tokenizer_size() as u32 {
            let b = self.token_bytes(id).unwrap_or(&[]);
            h.update(&(b.len() as u32).to_le_bytes());
            h.update(b);
        }
        for id in self.special_tokens() {
            h.update(&id.to_le_bytes());
        }
        h.update(&[0xff; 4]);
        for &id in self.stop_tokens() {
            h.update(&id.to_le_bytes());
        }
        h.update(&[0xff; 4]);
        for &id in self.start_form_tokens() {
            let b = self.start_bytes(id).unwrap_or(&[]);
            h.update(&id.to_le_bytes());
            h.update(&(b.len() as u32).to_le_bytes());
            h.update(b);
        }
        h.update(&[self.strips_output_start() as u8]);
        h.digest()
    }

    /// Writes the vocabulary to bytes (XGrammar's `TokenizerInfo.serialize_json`; the
    /// format: a 40-byte header with [`FORMAT_VERSION`] and this vocabulary's
    /// [`fingerprint`](Vocabulary::fingerprint), then postcard data, as `docs/serving.md`,
    /// "The format", describes).
    ///
    /// # Errors
    /// [`SerializeError::Encode`] only if the encoder fails.
    pub fn serialize(&self) -> Result<Vec<u8>, SerializeError> {
        let n = self.tokenizer_size() as u32;
        let mut data = VocabData {
            bytes: Vec::new(),
            lens: Vec::with_capacity(n as usize),
            special: self.special_tokens().collect(),
            stop: self.stop_tokens().to_vec(),
            vocab_size: self.vocab_size() as u64,
            start_forms: self
                .start_form_tokens()
                .iter()
                .map(|&id| (id, self.start_bytes(id).unwrap_or(&[]).to_vec()))
                .collect(),
            strip_output_start: self.strips_output_start(),
        };
        for id in 0..n {
            let b = self.token_bytes(id).unwrap_or(&[]);
            data.bytes.extend_from_slice(b);
            data.lens.push(b.len() as u32);
        }
        encode(VOCAB_MAGIC, self.fingerprint(), &data)
    }

    /// Reads a vocabulary written by [`Vocabulary::serialize`].
    ///
    /// # Errors
    /// A [`DeserializeError`] for a buffer that is too short, of another kind, of a newer
    /// version, truncated, corrupted (checksum, or a fingerprint that does not match the
    /// data read), or malformed.
    pub fn deserialize(bytes: &[u8]) -> Result<Vocabulary, DeserializeError> {
        let (fingerprint, payload) = open(bytes, "vocabulary")?;
        let data: VocabData = decode(payload)?;
        let total: u64 = data.lens.iter().map(|&l| l as u64).sum();
        if total != data.bytes.len() as u64 {
            return Err(DeserializeError::Malformed(format!(
                "token lengths add up to {total} bytes, {} were read",
                data.bytes.len()
            )));
        }
        let mut tokens = Vec::with_capacity(data.lens.len());
        let mut at = 0usize;
        for &l in &data.lens {
            tokens.push(&data.bytes[at..at + l as usize]);
            at += l as usize;
        }
        let malformed = |e: crate::VocabError| DeserializeError::Malformed(e.to_string());
        let vocab = Vocabulary::from_token_bytes(&tokens, &data.special, &data.stop)
            .map_err(malformed)?
            .with_vocab_size(usize::try_from(data.vocab_size).unwrap_or(usize::MAX))
            .map_err(malformed)?
            .with_start_bytes(data.start_forms.iter().map(|(id, b)| (*id, b.as_slice())))
            .map_err(malformed)?
            .with_strip_output_start(data.strip_output_start);
        let found = vocab.fingerprint();
        if found != fingerprint {
            return Err(DeserializeError::Malformed(format!(
                "the data read has fingerprint {found:#018x}, the header says {fingerprint:#018x}"
            )));
        }
        Ok(vocab)
    }
}

/// A compiled grammar's data, as written (borrowed).
#[derive(Serialize)]
struct GrammarOut<'a> {
    ebnf: String,
    root: &'a str,
    aut: &'a Automaton,
    mask_class: &'a [u32],
    masks: Vec<SlotOut<'a>>,
    pair_masks: Vec<Option<Vec<Option<&'a NodeMask>>>>,
    virtual_masks: Vec<(VirtualKey, &'a NodeMask)>,
    virtual_pair_masks: Vec<((VirtualKey, u32), &'a NodeMask)>,
    counted_bases: Vec<((u32, u32), &'a CountedBase)>,
    shares_masks: bool,
    unique_keys: bool,
    /// The closed objects matchers restrict keys in: (rule name, declared names).
    closed: Vec<(String, Vec<String>)>,
    /// The key rules whose completions matchers check: (rule name, declared names).
    key_filters: &'a [(String, Vec<String>)],
}

/// The same data, as read (owned; the same wire layout field by field).
#[derive(Deserialize)]
struct GrammarIn {
    ebnf: String,
    root: String,
    aut: Automaton,
    mask_class: Vec<u32>,
    masks: Vec<SlotIn>,
    pair_masks: Vec<Option<Vec<Option<NodeMask>>>>,
    virtual_masks: Vec<(VirtualKey, NodeMask)>,
    virtual_pair_masks: Vec<((VirtualKey, u32), NodeMask)>,
    counted_bases: Vec<((u32, u32), CountedBase)>,
    shares_masks: bool,
    unique_keys: bool,
    closed: Vec<(String, Vec<String>)>,
    key_filters: Vec<(String, Vec<String>)>,
}

/// A mask class's mask as written: none computed, its own, or the one of an earlier class
/// (a grammar holds one copy of equal masks, `mask::intern`, and writes it once; version 5).
#[derive(Serialize)]
enum SlotOut<'a> {
    Empty,
    Own(&'a NodeMask),
    Same(u32),
}

/// [`SlotOut`] as read.
#[derive(Deserialize)]
enum SlotIn {
    Empty,
    Own(NodeMask),
    Same(u32),
}

/// The mask slots of `masks` as written: a mask held by several classes is written at the
/// first and referred to from the others.
fn mask_slots(masks: &[OnceLock<Arc<NodeMask>>]) -> Vec<SlotOut<'_>> {
    let mut first: FxHashMap<*const NodeMask, u32> = FxHashMap::default();
    masks
        .iter()
        .enumerate()
        .map(|(c, m)| match m.get() {
            None => SlotOut::Empty,
            Some(m) => match first.entry(Arc::as_ptr(m)) {
                std::collections::hash_map::Entry::Occupied(e) => SlotOut::Same(*e.get()),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(c as u32);
                    SlotOut::Own(m)
                }
            },
        })
        .collect()
}

type Guard<'a, K, V> = std::sync::RwLockReadGuard<'a, FxHashMap<K, Arc<V>>>;

fn read<K, V>(map: &RwLock<FxHashMap<K, Arc<V>>>) -> Guard<'_, K, V> {
    map.read().unwrap_or_else(|e| e.into_inner())
}

/// The entries of a map, sorted by key (the bytes do not depend on hash order).
fn sorted_pairs<'a, K: Ord + Copy, V>(map: &'a Guard<'_, K, V>) -> Vec<(K, &'a V)> {
    let mut v: Vec<(K, &V)> = map.iter().map(|(k, m)| (*k, &**m)).collect();
    v.sort_by_key(|p| p.0);
    v
}

impl CompiledGrammar {
    /// Writes this grammar to bytes: its automata and the masks computed so far (all of
    /// them after an eager compile). The format is a 40-byte header (magic, [`FORMAT_VERSION`],
    /// the vocabulary's fingerprint, payload length, XXH3-64 checksum) and postcard data,
    /// masks written as id gaps and word runs; `docs/serving.md`, "The format", has it whole. Read it back with [`CompiledGrammar::deserialize`] and a compiler of the
    /// same vocabulary, on this machine or another.
    ///
    /// # Errors
    /// [`SerializeError::GrammarText`] if the grammar's EBNF text does not parse back (a
    /// printer bug), [`SerializeError::Encode`] if the encoder fails.
    pub fn serialize(&self) -> Result<Vec<u8>, SerializeError> {
        if let Some(d) = &self.deferred {
            // A stub grammar is written as its full grammar (built now if need be).
            let full = d.full();
            return full
                .map_err(|e| SerializeError::GrammarText(e.to_string()))?
                .serialize();
        }
        let root = self.grammar.rules[self.grammar.root.index()].name.as_str();
        let ebnf = self.grammar.to_string();
        parse_ebnf(&ebnf, root).map_err(|e| SerializeError::GrammarText(e.to_string()))?;
        let (vm, vpm, bases) = (
            read(&self.virtual_masks),
            read(&self.virtual_pair_masks),
            read(&self.counted_bases),
        );
        let out = GrammarOut {
            ebnf,
            root,
            aut: &self.aut,
            mask_class: &self.mask_class,
            masks: mask_slots(&self.masks),
            pair_masks: self
                .pair_masks
                .iter()
                .map(|row| row.get().map(|row| row.iter().map(OnceLock::get).collect()))
                .collect(),
            virtual_masks: sorted_pairs(&vm),
            virtual_pair_masks: sorted_pairs(&vpm),
            counted_bases: sorted_pairs(&bases),
            shares_masks: self.key_basis.is_some(),
            unique_keys: self.unique_keys,
            closed: self
                .closed_objects
                .as_deref()
                .map(|c| c.to_names(&self.aut.rule_names))
                .unwrap_or_default(),
            key_filters: self.aut.key_filters.as_deref().map_or(&[], |f| f.named()),
        };
        encode(GRAMMAR_MAGIC, self.vocab.fingerprint(), &out)
    }

    /// Reads a grammar written by [`CompiledGrammar::serialize`], for `compiler`'s
    /// vocabulary (XGrammar's `CompiledGrammar.deserialize_json(json, tokenizer_info)`).
    /// The loaded grammar shares `compiler`'s trie and mask cache, takes its limits, and
    /// computes the masks that were not written on first use.
    ///
    /// # Errors
    /// [`DeserializeError::VocabularyMismatch`] when the grammar was compiled for another
    /// vocabulary; the other [`DeserializeError`]s for a buffer that is too short, of
    /// another kind, of a newer version, truncated, corrupted or malformed;
    /// [`DeserializeError::Limit`] past the compiler's memory limit.
    pub fn deserialize(
        bytes: &[u8],
        compiler: &GrammarCompiler,
    ) -> Result<Arc<CompiledGrammar>, DeserializeError> {
        let (fingerprint, payload) = open(bytes, "grammar")?;
        let mine = compiler.vocab.fingerprint();
        if fingerprint != mine {
            return Err(DeserializeError::VocabularyMismatch {
                grammar: fingerprint,
                compiler: mine,
            });
        }
        let data: GrammarIn = decode(payload)?;
        data.aut
            .check_indices()
            .map_err(DeserializeError::Malformed)?;
        // Derived from the automaton, not read: nothing to trust.
        let aut = &data.aut;
        let has_mask = aut.real_nodes_with_edges();
        let mut sites: Vec<Vec<u32>> = vec![Vec::new(); aut.rule_start.len()];
        for n in 0..aut.nodes.len() as u32 {
            for c in aut.calls_of(n) {
                sites[c.rule as usize].push(n);
            }
        }
        validate(&data, &sites, compiler).map_err(DeserializeError::Malformed)?;
        let grammar = parse_ebnf(&data.ebnf, &data.root)
            .map_err(|e| DeserializeError::Malformed(format!("grammar text: {e}")))?;
        // Equal masks written once per class read back as one copy again.
        let interned = MaskInterner::default();
        let arc_map = |v: Vec<(VirtualKey, NodeMask)>| {
            v.into_iter()
                .map(|(k, m)| (k, interned.intern(Arc::new(m)).0))
                .collect()
        };
        let virtual_masks = RwLock::new(arc_map(data.virtual_masks));
        let compiled = CompiledGrammar {
            vocab: compiler.vocab.clone(),
            trie: compiler.trie.clone(),
            text_bits: compiler.text_bits.clone(),
            grammar: Arc::new(grammar),
            masks: {
                let mut cells: Vec<OnceLock<Arc<NodeMask>>> = Vec::with_capacity(data.masks.len());
                for slot in data.masks {
                    let cell = OnceLock::new();
                    let m = match slot {
                        SlotIn::Empty => None,
                        SlotIn::Own(m) => Some(interned.intern(Arc::new(m)).0),
                        // Checked by `validate`: an earlier class with its own mask.
                        SlotIn::Same(j) => cells[j as usize].get().cloned(),
                    };
                    if let Some(m) = m {
                        let _ = cell.set(m);
                    }
                    cells.push(cell);
                }
                cells
            },
            interned,
            key_basis: data.shares_masks.then(OnceLock::new),
            shared: compiler.shared.clone(),
            mask_class: data.mask_class,
            has_mask,
            sites,
            pair_masks: data
                .pair_masks
                .into_iter()
                .map(|row| {
                    let cell = OnceLock::new();
                    if let Some(row) = row {
                        let row: Box<[OnceLock<NodeMask>]> = row
                            .into_iter()
                            .map(|m| {
                                let c = OnceLock::new();
                                if let Some(m) = m {
                                    let _ = c.set(m);
                                }
                                c
                            })
                            .collect();
                        let _ = cell.set(row);
                    }
                    cell
                })
                .collect(),
            virtual_masks,
            virtual_pair_masks: RwLock::new(
                data.virtual_pair_masks
                    .into_iter()
                    .map(|(k, m)| (k, Arc::new(m)))
                    .collect(),
            ),
            counted_derivable: data.aut.counted.iter().map(derivable).collect(),
            counted_bases: RwLock::new({
                // Each base was read with its own copy of its rule's body DFA (checked equal
                // to the rule's): one copy per rule again.
                let mut dfas: FxHashMap<u32, Arc<crate::mask::counted::BodyDfa>> =
                    FxHashMap::default();
                data.counted_bases
                    .into_iter()
                    .map(|(k, mut b)| {
                        match dfas.get(&k.0) {
                            Some(d) => b.share_dfa(d),
                            None => {
                                dfas.insert(k.0, b.dfa().clone());
                            }
                        }
                        (k, Arc::new(b))
                    })
                    .collect()
            }),
            aut: data.aut,
            max_token_len: compiler.trie.max_depth as u32,
            max_step_items: compiler.limits.max_step_items,
            lazy_budget: compiler.limits.compile_time,
            walk_failed: OnceLock::new(),
            subtrees: SubtreeMemo::default(),
            unique_keys: data.unique_keys,
            closed_objects: None,
            background_fill: Default::default(),
            max_memory_bytes: compiler.limits.max_memory_bytes,
            deferred: None,
        };
        let mut compiled = compiled;
        if compiled.unique_keys {
            compiled.aut.key_filters =
                KeyFilters::resolve(&compiled.aut.rule_names, &data.key_filters)
                    .map(|f| Arc::new(f.with_suspects(&compiler.trie, &compiler.vocab)));
        }
        if compiled.unique_keys && !data.closed.is_empty() {
            compiled.closed_objects =
                crate::matcher::ClosedObjects::resolve(&compiled.aut.rule_names, &data.closed)
                    .map(Arc::new);
        }
        check_memory(&compiler.limits, compiled.memory_bytes())?;
        Ok(Arc::new(compiled))
    }
}

/// Every index of the decoded data in range, so that no later call can index out of
/// bounds; the first problem found.
/// (The automaton itself was checked by `Automaton::check_indices`; `sites` are its call
/// sites per rule.)
fn validate(d: &GrammarIn, sites: &[Vec<u32>], compiler: &GrammarCompiler) -> Result<(), String> {
    let aut = &d.aut;
    let n = aut.nodes.len();
    if d.mask_class.len() != n || d.pair_masks.len() != n {
        return Err(format!(
            "{n} nodes, but {} mask classes and {} context rows",
            d.mask_class.len(),
            d.pair_masks.len()
        ));
    }
    if let Some(c) = d.mask_class.iter().find(|&&c| c as usize >= d.masks.len()) {
        return Err(format!("mask class {c} past the {} masks", d.masks.len()));
    }
    for (node, row) in d.pair_masks.iter().enumerate() {
        if let Some(row) = row {
            let want = sites[aut.nodes[node].rule as usize].len();
            if row.len() != want {
                return Err(format!(
                    "node {node}: {} context masks for {want} call sites",
                    row.len()
                ));
            }
        }
    }
    let (trie_len, words) = (compiler.trie.sorted.len(), compiler.vocab.bitmask_words());
    let size = compiler.vocab.tokenizer_size();
    let check = |m: &NodeMask, what: &dyn Fn() -> String| -> Result<(), String> {
        let ascending = |v: &[u32], below: usize| {
            v.windows(2).all(|w| w[0] < w[1]) && v.last().map_or(true, |&x| (x as usize) < below)
        };
        let ok = match &m.accepted {
            TokenSet::Accepted(v) | TokenSet::Rejected(v) => ascending(v, size),
            TokenSet::Bitset(b) => b.len() == words,
            TokenSet::Runs(v) => v.len() % 2 == 0 && ascending(v, trie_len + 1),
        } && ascending(&m.uncertain, trie_len);
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{}: token ids out of range or not ascending",
                what()
            ))
        }
    };
    for (c, m) in d.masks.iter().enumerate() {
        match m {
            SlotIn::Empty => {}
            SlotIn::Own(m) => check(m, &|| format!("mask of class {c}"))?,
            SlotIn::Same(j) => {
                if *j as usize >= c || !matches!(d.masks[*j as usize], SlotIn::Own(_)) {
                    return Err(format!(
                        "mask of class {c}: class {j} is not an earlier class with its own mask"
                    ));
                }
            }
        }
    }
    for (node, row) in d.pair_masks.iter().enumerate() {
        for (k, m) in row.iter().flatten().enumerate() {
            if let Some(m) = m {
                check(m, &|| format!("context mask {k} of node {node}"))?;
            }
        }
    }
    for (key, m) in &d.virtual_masks {
        check(m, &|| format!("virtual mask {key:?}"))?;
    }
    for (key, m) in &d.virtual_pair_masks {
        check(m, &|| format!("virtual context mask {key:?}"))?;
    }
    // A base's body DFA must be its rule's: the walks of the rule's other states reuse it.
    let mut dfas: FxHashMap<u32, Arc<crate::mask::counted::BodyDfa>> = FxHashMap::default();
    for (key, b) in &d.counted_bases {
        let Some(cnt) = aut.counted.get(key.0 as usize) else {
            return Err(format!("counted base {key:?}: no such counted rule"));
        };
        b.check_indices(trie_len, words)
            .map_err(|e| format!("counted base {key:?}: {e}"))?;
        let follow = aut
            .follow
            .get(cnt.rule as usize)
            .ok_or_else(|| format!("counted base {key:?}: no follow set for its rule"))?;
        let dfa = dfas
            .entry(key.0)
            .or_insert_with(|| crate::mask::counted::body_dfa(cnt, follow));
        if **b.dfa() != **dfa {
            return Err(format!(
                "counted base {key:?}: its body DFA is not its rule's"
            ));
        }
    }
    Ok(())
}

#[cfg(all(test, feature = "hf"))]
mod tests {
    use super::*;
    use crate::Precompute;
    use std::io::BufRead;

    /// The Llama 3.1 `tokenizer.json` and a MaskBench collection's records in `../shared`;
    /// `None` (printed) when missing outside CI, a failure under `CI=true`.
    fn llama_and_collection(collection: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
        let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
        let tok = shared.join("tokenizers/llama3_1/tokenizer.json");
        let data = shared.join(format!(
            "testdata/jsonschemabench/{collection}/{collection}.jsonl.gz"
        ));
        if !tok.is_file() || !data.is_file() {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "shared data missing"
            );
            eprintln!("skipping: shared data missing");
            return None;
        }
        Some((tok, data))
    }

    /// The mask of every real node and every context mask of a grammar read back equals
    /// the original's (eager: as written; lazy: computed after loading), on MaskBench
    /// schemas and a Hermes tool-call tag with the Llama 3.1 vocabulary.
    #[test]
    fn every_node_mask_survives_a_round_trip() {
        let Some((tok, data)) = llama_and_collection("Github_easy") else {
            return;
        };
        let vocab = Vocabulary::from_tokenizer_json(&tok).unwrap();
        // Node by node: the tag whole (a deferring compile writes its full grammar, whose
        // node ids are not the stub grammar's).
        let eager = GrammarCompiler::new(vocab)
            .with_precompute(Precompute::Eager)
            .with_cache_enabled(false)
            .with_deferred_tool_rules(false);
        let lazy = eager.clone().with_precompute(Precompute::Lazy);
        let file = std::fs::File::open(&data).unwrap();
        let mut grammars = Vec::new();
        for line in std::io::BufReader::new(flate2::read::GzDecoder::new(file))
            .lines()
            .take(40)
        {
            let rec: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            let opts = crate::JsonSchemaOptions {
                ignore_unknown_keywords: true,
                ..Default::default()
            };
            if let (Ok(e), Ok(l)) = (
                eager.compile_json_schema(&rec["schema"], &opts),
                lazy.compile_json_schema(&rec["schema"], &opts),
            ) {
                grammars.push((e, l));
            }
            if grammars.len() == 10 {
                break;
            }
        }
        let tag = crate::structural_tag::hermes_like_tag(
            &[(
                "get_weather".to_owned(),
                serde_json::json!({"type": "object",
                    "properties": {"city": {"type": "string"}}, "required": ["city"]}),
            )],
            true,
        );
        grammars.push((
            eager.compile_structural_tag(&tag).unwrap(),
            lazy.compile_structural_tag(&tag).unwrap(),
        ));
        assert!(grammars.len() >= 8, "only {} grammars", grammars.len());
        let same =
            |a: &NodeMask, b: &NodeMask| a.accepted == b.accepted && a.uncertain == b.uncertain;
        for (gi, (e, l)) in grammars.iter().enumerate() {
            // A lazy grammar with a few masks computed before writing.
            let _ = l.node_mask(l.aut.rule_start[l.aut.root as usize]);
            let be = CompiledGrammar::deserialize(&e.serialize().unwrap(), &eager).unwrap();
            let bl = CompiledGrammar::deserialize(&l.serialize().unwrap(), &lazy).unwrap();
            assert!(
                bl.masks.iter().any(|m| m.get().is_none()),
                "lazy: some masks left"
            );
            for n in 0..e.aut.nodes.len() as u32 {
                let (m, a, b) = (e.node_mask(n), be.node_mask(n), bl.node_mask(n));
                assert_eq!(m.is_some(), a.is_some(), "grammar {gi} node {n}");
                assert_eq!(m.is_some(), b.is_some(), "grammar {gi} node {n}");
                if let (Some(m), Some(a), Some(b)) = (m, a, b) {
                    assert!(same(&m, &a), "grammar {gi} node {n}: eager mask");
                    assert!(same(&m, &b), "grammar {gi} node {n}: lazy mask");
                }
                let rule = e.aut.rule_of(n) as usize;
                for &site in &e.sites[rule] {
                    let (m, a, b) = (
                        e.pair_mask(n, site),
                        be.pair_mask(n, site),
                        bl.pair_mask(n, site),
                    );
                    match (m, a, b) {
                        (Some(m), Some(a), Some(b)) => {
                            assert!(
                                same(&m, &a) && same(&m, &b),
                                "grammar {gi} node {n} site {site}"
                            );
                        }
                        (None, None, None) => {}
                        _ => panic!("grammar {gi} node {n} site {site}: context mask presence"),
                    }
                }
            }
        }
    }

    /// A mask that several mask classes hold (a grammar keeps one copy of equal masks) is
    /// written once and reads back as one copy; a slot referring to a class that is not an
    /// earlier one with its own mask is `Malformed`.
    #[test]
    fn a_mask_held_by_several_classes_is_written_once() {
        let Some((tok, data)) = llama_and_collection("Github_medium") else {
            return;
        };
        let eager = GrammarCompiler::new(Vocabulary::from_tokenizer_json(&tok).unwrap())
            .with_precompute(Precompute::Eager)
            .with_cache_enabled(false);
        let file = std::fs::File::open(&data).unwrap();
        let opts = crate::JsonSchemaOptions {
            ignore_unknown_keywords: true,
            ..Default::default()
        };
        let bytes_of = |m: &NodeMask| postcard::to_allocvec(m).unwrap().len();
        let mut most_shared: Option<(usize, Vec<u8>, Arc<CompiledGrammar>)> = None;
        for line in std::io::BufReader::new(flate2::read::GzDecoder::new(file))
            .lines()
            .take(12)
        {
            let rec: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            let Ok(g) = eager.compile_json_schema(&rec["schema"], &opts) else {
                continue;
            };
            let bytes = g.serialize().unwrap();
            let back = CompiledGrammar::deserialize(&bytes, &eager).unwrap();
            let mut first: FxHashMap<*const NodeMask, usize> = FxHashMap::default();
            let mut repeated = 0;
            for (c, (a, b)) in g.masks.iter().zip(&back.masks).enumerate() {
                let (Some(a), Some(b)) = (a.get(), b.get()) else {
                    assert_eq!(a.get().is_some(), b.get().is_some(), "class {c}");
                    continue;
                };
                assert!(**a == **b, "class {c}");
                match first.get(&Arc::as_ptr(a)) {
                    Some(&f) => {
                        let held = back.masks[f].get().unwrap();
                        assert!(Arc::ptr_eq(held, b), "class {c} shares class {f}'s copy");
                        repeated += bytes_of(a);
                    }
                    None => {
                        first.insert(Arc::as_ptr(a), c);
                    }
                }
            }
            let copies = |g: &CompiledGrammar| {
                let ptrs: rustc_hash::FxHashSet<*const NodeMask> = g
                    .masks
                    .iter()
                    .filter_map(|m| m.get())
                    .map(Arc::as_ptr)
                    .collect();
                ptrs.len()
            };
            assert_eq!(copies(&back), copies(&g), "one copy per mask read back");
            if most_shared.as_ref().map_or(true, |m| m.0 < repeated) {
                most_shared = Some((repeated, bytes, g));
            }
        }
        let (repeated, bytes, g) = most_shared.expect("a schema compiles");
        // Written each on its own, the masks would take `repeated` bytes more (less the few
        // bytes of each reference).
        let each: usize = g
            .masks
            .iter()
            .filter_map(|m| m.get())
            .map(|m| bytes_of(m))
            .sum();
        assert!(repeated > each / 5, "{repeated} of {each} bytes repeat");
        let own: Vec<SlotOut<'_>> = g
            .masks
            .iter()
            .map(|m| m.get().map_or(SlotOut::Empty, |m| SlotOut::Own(m)))
            .collect();
        let (once, all) = (
            postcard::to_allocvec(&mask_slots(&g.masks)).unwrap().len(),
            postcard::to_allocvec(&own).unwrap().len(),
        );
        assert!(
            once + repeated * 9 / 10 <= all,
            "{once} bytes written, {all} each on its own"
        );
        // References to: the slot itself, a later class with its own mask, past the end,
        // a class without a mask before it, and a reference before it.
        let (_, payload) = open(&bytes, "grammar").unwrap();
        let mut d: GrammarIn = decode(payload).unwrap();
        let mut sites: Vec<Vec<u32>> = vec![Vec::new(); d.aut.rule_start.len()];
        for n in 0..d.aut.nodes.len() as u32 {
            for e in d.aut.calls_of(n) {
                sites[e.rule as usize].push(n);
            }
        }
        validate(&d, &sites, &eager).expect("the grammar as written");
        let is = |d: &GrammarIn, j: usize, f: fn(&SlotIn) -> bool| f(&d.masks[j]);
        let c = (0..d.masks.len())
            .rev()
            .find(|&j| is(&d, j, |m| matches!(m, SlotIn::Same(_))))
            .unwrap();
        let later = (c + 1..d.masks.len()).find(|&j| is(&d, j, |m| matches!(m, SlotIn::Own(_))));
        let empty = (0..c).find(|&j| is(&d, j, |m| matches!(m, SlotIn::Empty)));
        let same = (0..c).find(|&j| is(&d, j, |m| matches!(m, SlotIn::Same(_))));
        let own = (0..c)
            .find(|&j| is(&d, j, |m| matches!(m, SlotIn::Own(_))))
            .unwrap();
        let mut refused = 0;
        for j in [Some(c), later, Some(d.masks.len()), empty, same]
            .into_iter()
            .flatten()
        {
            d.masks[c] = SlotIn::Same(j as u32);
            let err = validate(&d, &sites, &eager).unwrap_err();
            assert!(err.contains("not an earlier class"), "class {j}: {err}");
            refused += 1;
        }
        assert!(refused >= 3, "only {refused} forged references tried");
        d.masks[c] = SlotIn::Same(own as u32);
        validate(&d, &sites, &eager).expect("an earlier class with its own mask");
    }
}

#[cfg(test)]
mod wire_size {
    use super::*;

    fn bytes_of<T: Serialize>(v: &T) -> usize {
        postcard::to_allocvec(v).unwrap().len()
    }

    /// A bitset mask is written as runs of whole words: a stretch of full or empty words
    /// takes a few bytes, not a varint per word (5 bytes for a full word); other words are
    /// written as they are.
    #[test]
    fn a_bitset_is_written_as_runs_of_words() {
        let mut words = vec![u32::MAX; 4008];
        words[2000..3000].fill(0);
        words[10] = 0x8000_0001;
        words[4007] = 7;
        let m = NodeMask {
            accepted: TokenSet::Bitset(words.into_boxed_slice()),
            uncertain: Vec::new(),
        };
        let n = bytes_of(&m);
        assert!(n <= 32, "{n} bytes for 4,008 words in 6 runs");
        let back: NodeMask = postcard::from_bytes(&postcard::to_allocvec(&m).unwrap()).unwrap();
        assert_eq!(back.accepted, m.accepted);
    }

    /// The runs of trie positions of a mid-size set are written as gaps between their
    /// bounds, and read back the same.
    #[test]
    fn runs_round_trip_in_a_few_bytes() {
        let bounds: Vec<u32> = (0..60u32).flat_map(|i| [i * 2000, i * 2000 + 25]).collect();
        let m = NodeMask {
            accepted: TokenSet::Runs(bounds.clone()),
            uncertain: Vec::new(),
        };
        let n = bytes_of(&m);
        assert!(n <= 250, "{n} bytes for 60 runs");
        let back: NodeMask = postcard::from_bytes(&postcard::to_allocvec(&m).unwrap()).unwrap();
        assert_eq!(back.accepted, TokenSet::Runs(bounds));
    }

    /// Sorted ids (accepted or rejected tokens, uncertain trie positions) are written as
    /// gaps: a run of neighbouring ids high in a 128k vocabulary takes a byte each, not 3.
    #[test]
    fn sorted_ids_take_a_byte_per_small_gap() {
        let ids: Vec<u32> = (100_000..101_000).step_by(2).collect();
        let m = NodeMask {
            accepted: TokenSet::Rejected(ids.clone()),
            uncertain: (120_000..120_500).collect(),
        };
        let n = bytes_of(&m);
        assert!(n <= 500 + 500 + 16, "{n} bytes for 1,000 ids");
        let back: NodeMask = postcard::from_bytes(&postcard::to_allocvec(&m).unwrap()).unwrap();
        assert_eq!(back.accepted, TokenSet::Rejected(ids));
        assert_eq!(back.uncertain, m.uncertain);
    }

    /// Whatever the ids (even unsorted ones, which `validate` then refuses), the gaps
    /// round-trip exactly; a bitset whose run group is cut short, or whose runs add up to
    /// billions of words, is an error, not an allocation.
    #[test]
    fn gaps_round_trip_any_ids_and_odd_bitsets_are_refused() {
        let ids = vec![5, 3, u32::MAX, 0, 7];
        let m = NodeMask {
            accepted: TokenSet::Accepted(ids.clone()),
            uncertain: vec![u32::MAX, 1],
        };
        let back: NodeMask = postcard::from_bytes(&postcard::to_allocvec(&m).unwrap()).unwrap();
        assert_eq!(back.accepted, TokenSet::Accepted(ids));
        assert_eq!(back.uncertain, vec![u32::MAX, 1]);
        // Variant 2 (bitset): 2 values, a group of 3 cut short; then no uncertain ids.
        let cut = [2u8, 2, 1, 1, 0];
        assert!(postcard::from_bytes::<NodeMask>(&cut).is_err());
        // One group: 2^32 - 1 zero words (varint ff ff ff ff 0f), no ones, no literals.
        let huge = [2u8, 3, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0];
        assert!(postcard::from_bytes::<NodeMask>(&huge).is_err());
    }
}
