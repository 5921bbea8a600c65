//! Bitmask helpers: allocate a `[batch, words]` mask, apply it to `f32` logits, test a bit,
//! and fill a batch of rows in parallel from anything that fills one row
//! ([`FillNextTokenBitmask`], which `GrammarMatcher` implements).

use super::parallel::{for_each_mut, Helpers};

/// One row of a token bitmask filled at a time: what the batch fills need of a matcher.
/// `GrammarMatcher` implements it (its error is `MatcherError`).
pub trait FillNextTokenBitmask: Send {
    /// Why filling a row failed.
    type Error: std::error::Error + Send + 'static;
    /// The words of one row: `ceil(vocab_size / 32)`.
    fn bitmask_words(&self) -> usize;
    /// Fills `row` (`bitmask_words()` words) with the tokens that may come next.
    ///
    /// # Errors
    /// The implementor's, such as a row of the wrong length.
    fn fill_next_token_bitmask(&mut self, row: &mut [u32]) -> Result<(), Self::Error>;
}

/// Why a bitmask helper refused its arguments. `E` is the error of the matchers of a batch
/// fill (`MatcherError` for `GrammarMatcher`s); the helpers that fill nothing never return
/// [`BitmaskError::Matcher`] (`E` is then [`std::convert::Infallible`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BitmaskError<E = std::convert::Infallible> {
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
    /// A (matcher, row) pair names a row past the bitmask.
    #[error("pair {index} of the batch: row {row} is past the bitmask's {rows} rows")]
    RowOutOfRange {
        /// The pair's index in the batch.
        index: usize,
        /// The row it names.
        row: usize,
        /// The rows of the bitmask.
        rows: usize,
    },
    /// Two (matcher, row) pairs name the same row.
    #[error(
        "pair {index} of the batch: row {row} is already filled by another matcher of the batch"
    )]
    DuplicateRow {
        /// The index of the second pair naming the row.
        index: usize,
        /// The row.
        row: usize,
    },
    /// A matcher of the batch failed.
    #[error("matcher {index} of the batch: {source}")]
    Matcher {
        /// Its index in the batch.
        index: usize,
        /// What it said.
        #[source]
        source: E,
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
    apply_token_bitmask_inplace_with(logits, bitmask, f32::NEG_INFINITY)
}

/// [`apply_token_bitmask_inplace`] for logits of any element type: `neg_inf` is written
/// where a bit is clear. For 16-bit floats held as their bits (`u16`), negative infinity is
/// `0xFC00` in IEEE half precision (`float16`) and `0xFF80` in `bfloat16`.
///
/// # Errors
/// [`BitmaskError::Length`] when the bitmask is shorter than the logits need; nothing is
/// changed then.
pub fn apply_token_bitmask_inplace_with<T: Copy>(
    logits: &mut [T],
    bitmask: &[u32],
    neg_inf: T,
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
                *l = neg_inf;
            }
        }
    }
    Ok(())
}

/// Fills row `i` of `bitmask` (`[matchers.len(), words]`) from `matchers[i]`, on the
/// calling thread and the other threads of rayon's current pool, each taking contiguous
/// chunks of the batch. All matchers must share one vocabulary size.
///
/// # Errors
/// [`BitmaskError::Length`] when `bitmask` is not exactly `matchers.len() × words` long,
/// [`BitmaskError::Matcher`] for the matcher of lowest index that fails (the other rows are
/// filled).
pub fn fill_next_token_bitmask_batch<M: FillNextTokenBitmask>(
    matchers: &mut [M],
    bitmask: &mut [u32],
) -> Result<(), BitmaskError<M::Error>> {
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
    let mut work: Vec<(&mut M, &mut [u32])> =
        matchers.iter_mut().zip(bitmask.chunks_mut(words)).collect();
    fill_rows(Helpers::Current, &mut work)
}

/// Fills, for each `(matcher, row)` pair, row `row` of `bitmask` (`[batch, words]`,
/// row-major, `words = ceil(vocab_size / 32)`) from `matcher`, on the calling thread and the
/// other threads of rayon's current pool (contiguous chunks of the pairs, taken through one
/// atomic index: the caller starts at once, a pool thread joins when it wakes): an engine
/// whose batch holds rows without a grammar (or in another order than its matchers) fills
/// only its own rows. XGrammar's `batch_fill_next_token_bitmask(matchers, bitmask, indices)`
/// of its batch matcher. Rows named by no pair are not touched. All matchers must share one
/// vocabulary size.
///
/// # Errors
/// Checked before anything is written: [`BitmaskError::Length`] when `bitmask.len()` is not
/// a multiple of the first matcher's row length (or a matcher's row length differs),
/// [`BitmaskError::RowOutOfRange`], [`BitmaskError::DuplicateRow`]. Then
/// [`BitmaskError::Matcher`] for the failing matcher of lowest index among the pairs; the
/// other rows are filled.
pub fn batch_fill_next_token_bitmask<'a, M: FillNextTokenBitmask + 'a>(
    pairs: impl IntoIterator<Item = (&'a mut M, usize)>,
    bitmask: &mut [u32],
) -> Result<(), BitmaskError<M::Error>> {
    batch_fill(Helpers::Current, pairs, bitmask)
}

/// [`batch_fill_next_token_bitmask`] with its helpers given: the calling thread fills rows
/// with every thread of `helpers` (`None`: the calling thread alone, no pool touched), as a
/// serving engine with its own fill pool wants (a pool of `n - 1` threads for `n` in all).
///
/// # Errors
/// As [`batch_fill_next_token_bitmask`].
pub fn batch_fill_next_token_bitmask_with<'a, M: FillNextTokenBitmask + 'a>(
    helpers: Option<&rayon::ThreadPool>,
    pairs: impl IntoIterator<Item = (&'a mut M, usize)>,
    bitmask: &mut [u32],
) -> Result<(), BitmaskError<M::Error>> {
    batch_fill(helpers.map_or(Helpers::None, Helpers::Pool), pairs, bitmask)
}

/// The checks and the fill of [`batch_fill_next_token_bitmask`].
fn batch_fill<'a, M: FillNextTokenBitmask + 'a>(
    helpers: Helpers<'_>,
    pairs: impl IntoIterator<Item = (&'a mut M, usize)>,
    bitmask: &mut [u32],
) -> Result<(), BitmaskError<M::Error>> {
    let pairs: Vec<(&'a mut M, usize)> = pairs.into_iter().collect();
    let Some((first, _)) = pairs.first() else {
        return Ok(());
    };
    let words = first.bitmask_words();
    if bitmask.len() % words != 0 {
        return Err(BitmaskError::Length {
            expected: bitmask.len().div_ceil(words) * words,
            got: bitmask.len(),
            what: format!("whole rows of {words} words"),
        });
    }
    let rows = bitmask.len() / words;
    let mut taken = vec![false; rows];
    for (index, (m, row)) in pairs.iter().enumerate() {
        if m.bitmask_words() != words {
            return Err(BitmaskError::Length {
                expected: words,
                got: m.bitmask_words(),
                what: format!(
                    "the row of matcher {index} (every matcher must share one vocabulary size)"
                ),
            });
        }
        match taken.get_mut(*row) {
            None => {
                return Err(BitmaskError::RowOutOfRange {
                    index,
                    row: *row,
                    rows,
                })
            }
            Some(true) => return Err(BitmaskError::DuplicateRow { index, row: *row }),
            Some(t) => *t = true,
        }
    }
    let mut slots: Vec<Option<&mut [u32]>> = bitmask.chunks_mut(words).map(Some).collect();
    let mut work: Vec<(&mut M, &mut [u32])> = Vec::with_capacity(pairs.len());
    for (m, row) in pairs {
        // Each row was checked to be named once, so its slot is still there.
        if let Some(slot) = slots[row].take() {
            work.push((m, slot));
        }
    }
    fill_rows(helpers, &mut work)
}

/// Fills each `(matcher, row)` of `work`; the error names the pair's index.
fn fill_rows<M: FillNextTokenBitmask>(
    helpers: Helpers<'_>,
    work: &mut [(&mut M, &mut [u32])],
) -> Result<(), BitmaskError<M::Error>> {
    for_each_mut(helpers, work, |(m, row)| m.fill_next_token_bitmask(row))
        .map_err(|(index, source)| BitmaskError::Matcher { index, source })
}
