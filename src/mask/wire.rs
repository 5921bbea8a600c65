//! How token sets are written by serde (the serialized form of compiled grammars,
//! `compiler::serialize`): sorted id lists as gaps, bitsets as runs of whole words.
//!
//! Masks are most of a compiled grammar's bytes. Written plainly by a varint codec
//! (postcard), an id of a 128k vocabulary takes 3 bytes and an all-ones bitset word 5.
//! As gaps, neighbouring ids take one byte each; as runs, a stretch of empty or full
//! words takes a byte or two whatever its length.

use serde::de::{Error, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserializer, Serializer};
use std::fmt;

/// A list of ids written as gaps: the first id, then each id minus the one before
/// (wrapping, so any list round-trips exactly; readers check the order themselves).
pub(crate) mod gaps {
    use super::*;

    /// Writes `ids` as gaps.
    pub(crate) fn serialize<S: Serializer>(ids: &[u32], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(ids.len()))?;
        let mut prev = 0u32;
        for &id in ids {
            seq.serialize_element(&id.wrapping_sub(prev))?;
            prev = id;
        }
        seq.end()
    }

    /// Reads gaps back into ids (a `Vec<u32>` or a `Box<[u32]>`).
    pub(crate) fn deserialize<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: From<Vec<u32>>,
    {
        struct Gaps;
        impl<'de> Visitor<'de> for Gaps {
            type Value = Vec<u32>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence of id gaps")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u32>, A::Error> {
                // The hint comes from the (untrusted) input: cap what it may reserve.
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                let mut prev = 0u32;
                while let Some(gap) = seq.next_element::<u32>()? {
                    prev = prev.wrapping_add(gap);
                    out.push(prev);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Gaps).map(T::from)
    }
}

/// A bitset written as runs: groups of `[zeros, ones, literals, w₁ … w_literals]`, where
/// `zeros` and `ones` count words equal to 0 and to `u32::MAX` and the literal words
/// follow as they are (varints under postcard). Masks of wide nodes are long runs of
/// whole words, so a 4,008-word bitset of Llama 3.1 often takes a few hundred bytes.
pub(crate) mod words {
    use super::*;

    /// The most words a bitset read back may have (a vocabulary of 2³⁰ tokens): run
    /// counts in damaged or forged bytes cannot make the reader allocate more.
    const MAX_WORDS: usize = 1 << 25;

    /// Writes the words as runs.
    pub(crate) fn serialize<S: Serializer>(words: &[u32], s: S) -> Result<S::Ok, S::Error> {
        let mut out: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let run = |i: usize, w: u32| words[i..].iter().take_while(|&&x| x == w).count();
            let zeros = run(i, 0);
            let ones = run(i + zeros, u32::MAX);
            let from = i + zeros + ones;
            // Literals up to the next zero or all-ones word.
            let lits = words[from..]
                .iter()
                .take_while(|&&x| x != 0 && x != u32::MAX)
                .count();
            out.extend_from_slice(&[zeros as u32, ones as u32, lits as u32]);
            out.extend_from_slice(&words[from..from + lits]);
            i = from + lits;
        }
        let mut seq = s.serialize_seq(Some(out.len()))?;
        for w in &out {
            seq.serialize_element(w)?;
        }
        seq.end()
    }

    /// Reads the runs back; a group cut short, or more than [`MAX_WORDS`] words, is an error.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Box<[u32]>, D::Error> {
        struct Runs;
        impl<'de> Visitor<'de> for Runs {
            type Value = Box<[u32]>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a bitset's runs of words")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Box<[u32]>, A::Error> {
                let mut out: Vec<u32> = Vec::new();
                let too_long = || A::Error::custom(format!("a bitset of over {MAX_WORDS} words"));
                let cut = || A::Error::custom("a bitset's run group is cut short");
                while let Some(zeros) = seq.next_element::<u32>()? {
                    let ones = seq.next_element::<u32>()?.ok_or_else(cut)?;
                    let lits = seq.next_element::<u32>()?.ok_or_else(cut)?;
                    let total = out.len() as u64 + zeros as u64 + ones as u64 + lits as u64;
                    if total > MAX_WORDS as u64 {
                        return Err(too_long());
                    }
                    out.resize(out.len() + zeros as usize, 0);
                    out.resize(out.len() + ones as usize, u32::MAX);
                    for _ in 0..lits {
                        out.push(seq.next_element::<u32>()?.ok_or_else(cut)?);
                    }
                }
                Ok(out.into_boxed_slice())
            }
        }
        d.deserialize_seq(Runs)
    }
}
