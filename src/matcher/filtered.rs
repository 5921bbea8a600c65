//! The fill's part for keys of undeclared properties checked when they end
//! (`parser::key_filter`): the precomputed masks know nothing of the declared names, so
//! they may allow a token that ends such a key on a declared name. Those tokens are few and
//! known from their bytes; the fill gives them to the chart, whose completions check the
//! names, so the mask is again exactly what `accept_token` accepts.
//!
//! A token can end a checked key in two ways: the key began before it (an item of the key
//! rule in the current set, whose bytes so far the chart holds), or within it (the token
//! holds the key's opening and closing quotes: [`KeyFilters::suspect_tokens`]). In the
//! first way the key dies only if the name decoded so far is on the way to a declared one
//! ([`KeyFilters::may_drop`]); the tokens that would end it there are those whose bytes
//! before their quote spell the rest of that name (the trie's `key_closers` for tokens with
//! one quote and no `\`, [`KeyFilters::closers`] for the others), and, inside an escape,
//! any token with a quote whose bytes end the key on a name ([`KeyFilters::kills`]).

use super::MatcherError;
use crate::compiler::CompiledGrammar;
use crate::limits::Deadline;
use crate::mask::cache::or_token_set;
use crate::parser::key_filter::KeyFilters;
use crate::parser::{Chart, Item, EXT};

/// The fill's view of one kernel item `it` of a checked key rule `rule` (its origin below
/// the current set `pos`), whose node mask the fill has ORed in: when `past_end` (its node
/// mask has tokens that run past the key's end), ORs its context masks into `bitmask` and
/// lists the pairs whose uncertain tokens the chart must run (`uncertain`); then appends to
/// `recheck` the tokens that would end the key on a declared name, whether they end with
/// its closing quote or go on (the chart decides them: [`recheck_keys`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn key_item(
    f: &KeyFilters,
    (rule, it, pos, past_end): (u32, Item, u32, bool),
    chart: &Chart,
    compiled: &CompiledGrammar,
    bitmask: &mut [u32],
    blank: &mut bool,
    scratch: &mut Vec<u32>,
    uncertain: &mut Vec<(u32, u32)>,
    recheck: &mut Vec<u32>,
    deadline: &Deadline,
) -> Result<(), MatcherError> {
    let aut = &compiled.aut;
    let callers = if past_end { chart.set(it.origin) } else { &[] };
    for caller in callers {
        if !aut.calls_of(caller.node).iter().any(|c| c.rule == rule) {
            continue;
        }
        let Some(pm) = compiled
            .pair_mask_until(it.node, caller.node, deadline)
            .map_err(MatcherError::Limit)?
        else {
            continue;
        };
        or_token_set(
            bitmask,
            blank,
            &pm.accepted,
            &compiled.text_bits,
            &compiled.trie.sorted,
            scratch,
        );
        // Past the root's base instance nothing follows: those tokens are never accepted.
        if caller.origin != EXT && !pm.uncertain.is_empty() {
            uncertain.push((it.node, caller.node));
        }
    }
    let key = &chart.bytes[it.origin as usize + 1..=pos as usize];
    if !f.may_drop(rule, key) {
        return Ok(());
    }
    let trie = &compiled.trie;
    match f.rests(rule, key) {
        // Each rest of a name: the tokens whose bytes before their closing quote spell it
        // (one quote and no `\\`: as written; the others: decoded).
        Some(rests) => {
            for rest in rests {
                for map in [&trie.key_closers, &f.closers] {
                    recheck.extend_from_slice(map.get(rest).map_or(&[][..], Vec::as_slice));
                }
            }
        }
        // Inside an escape (rare): every token with a quote, by its bytes.
        None => {
            let bytes = |t: u32| compiled.vocab.token_bytes(t).unwrap_or(&[]);
            recheck.extend(
                trie.quote_tokens
                    .iter()
                    .copied()
                    .filter(|&t| f.kills(rule, key, bytes(t))),
            );
        }
    }
    Ok(())
}

/// Gives the chart the final say on the tokens of `recheck` and on the suspect tokens
/// allowed: each whose bit is set is cleared, then set again if the chart (which checks
/// key names) accepts it. `at_start`: the first token of the output, read by its start form.
pub(super) fn recheck_keys(
    f: &KeyFilters,
    chart: &mut Chart,
    compiled: &CompiledGrammar,
    bitmask: &mut [u32],
    recheck: &mut Vec<u32>,
    at_start: bool,
) {
    let bit = |m: &[u32], t: u32| m[(t / 32) as usize] >> (t % 32) & 1 == 1;
    recheck.extend(f.suspect_tokens.iter().copied());
    recheck.retain(|&t| bit(bitmask, t));
    if recheck.is_empty() {
        return;
    }
    let trie = &compiled.trie;
    recheck.sort_unstable_by_key(|&t| trie.pos_of[t as usize]);
    recheck.dedup();
    for &t in recheck.iter() {
        bitmask[(t / 32) as usize] &= !(1 << (t % 32));
    }
    let vocab = &compiled.vocab;
    let read = |t: u32| {
        let b = vocab.token_bytes(t).unwrap_or(&[]);
        let b = if at_start {
            vocab.start_bytes(t).unwrap_or(b)
        } else {
            b
        };
        (t, b)
    };
    super::check_tokens(
        chart,
        compiled,
        recheck.iter().map(|&t| read(t)),
        bitmask,
        &mut Vec::new(),
    );
}
