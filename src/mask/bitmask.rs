//! Bitmask helpers: allocate a `[batch, words]` mask, apply it to `f32` logits, test a bit,
//! and fill a batch of matchers in parallel.

use crate::matcher::{GrammarMatcher, MatcherError};
use rayon::prelude::*;

/// Why a bitmask helper refused its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BitmaskError {
    /// The bitmask is too short for the logits or the batch.
    #[error("bitmask has {got} words, but {expected} are needed ({what})")]
    Length {
        /// Words needed.
        expected: usize,
        /// Words given.
        got: usize,
        /// What the length was computed from.
        what: String,
    },
    /// A matcher of the batch failed.
    #[error("matcher {index} of the batch: {source}")]
    Matcher {
        /// Its index in the batch.
        index: usize,
        /// What it said.
        #[source]
        source: MatcherError,
    },
}

/// The number of `u32` words of one bitmask row: `ceil(vocab_size / 32)`.
pub fn bitmask_words(vocab_size: usize) -> usize {
    vocab_size.div_ceil(32)
}

/// Allocates a `[batch_size, bitmask_words(vocab_size)]` bitmask, row-major, with every bit
/// set (every token allowed), as XGrammar's `allocate_token_bitmask` does.
pub fn allocate_token_bitmask(batch_size: usize, vocab_size: usize) -> Vec<u32> {
    vec![u32::MAX; batch_size * bitmask_words(vocab_size)]
}

/// True when bit `token` is set in the bitmask row. Ids past the row are not allowed.
#[inline]
pub fn is_token_allowed(bitmask: &[u32], token: u32) -> bool {
    bitmask
        .get((token / 32) as usize)
        .is_some_and(|w| w >> (token % 32) & 1 == 1)
}

/// Sets `logits[i]` to negative infinity for every token `i` whose bit is clear.
///
/// `logits` is one row of the model's output (length = its vocabulary width); `bitmask` is
/// one row of at least `ceil(logits.len() / 32)` words.
///
/// # Errors
/// [`BitmaskError::Length`] when the bitmask is shorter than the logits need; nothing is
/// changed then.
pub fn apply_token_bitmask_inplace(
    logits: &mut [f32],
    bitmask: &[u32],
) -> Result<(), BitmaskError> {
    let need = bitmask_words(logits.len());
    if bitmask.len() < need {
        return Err(BitmaskError::Length {
            expected: need,
            got: bitmask.len(),
            what: format!("{} logits", logits.len()),
        });
    }
    // Cost: one pass over the logits; whole words of allowed tokens are skipped.
    for (chunk, &word) in logits.chunks_mut(32).zip(bitmask) {
        if word == u32::MAX {
            continue;
        }
        for (j, l) in chunk.iter_mut().enumerate() {
            if word >> j & 1 == 0 {
                *l = f32::NEG_INFINITY;
            }
        }
    }
    Ok(())
}

/// Fills row `i` of `bitmask` (`[matchers.len(), words]`) from `matchers[i]`, in parallel on
/// rayon's thread pool. All matchers must share one vocabulary size.
///
/// # Errors
/// [`BitmaskError::Length`] when `bitmask` is not exactly `matchers.len() × words` long,
/// [`BitmaskError::Matcher`] for the first matcher that fails.
pub fn fill_next_token_bitmask_batch(
    matchers: &mut [GrammarMatcher],
    bitmask: &mut [u32],
) -> Result<(), BitmaskError> {
    let Some(first) = matchers.first() else {
        return Ok(());
    };
    let words = first.bitmask_words();
    if bitmask.len() != words * matchers.len() {
        return Err(BitmaskError::Length {
            expected: words * matchers.len(),
            got: bitmask.len(),
            what: format!("{} matchers of {} words", matchers.len(), words),
        });
    }
    matchers
        .par_iter_mut()
        .zip(bitmask.par_chunks_mut(words))
        .enumerate()
        .try_for_each(|(index, (m, row))| {
            m.fill_next_token_bitmask(row)
                .map_err(|source| BitmaskError::Matcher { index, source })
        })
}
