//! The mask cache's own parts: token sets from walked ranges, DFA tables.

use super::*;
use crate::automaton::minimize::tests::xorshift;
use crate::mask::plan::tests::wide_vocabulary;
use crate::mask::token_set::set_bits;

/// A walk's accepted ranges become the token set of exactly their tokens, in the form
/// [`token_set`] chooses for that count: a short list, the list of the tokens left
/// out (read from the gaps between the ranges), or a bitset; or their runs, when
/// smaller than the list, or instead of a bitset when few enough.
#[test]
fn finish_keeps_exactly_the_tokens_of_the_ranges_in_the_smallest_form() {
    let vocab = wide_vocabulary();
    let trie = TokenTrie::new(&vocab);
    let words = vocab.bitmask_words();
    let n = trie.token_count() as u32;
    let list_max = (words / LIST_PER_WORDS) as u32;
    let mut rand = xorshift(0x9E37_79B9_7F4A_7C15);
    let mut next = |m: u32| rand(m as u64) as u32;
    // Accepted counts around both thresholds, and in between.
    let mut runs_seen = 0;
    let words32 = words as u32;
    for target in [
        0,
        1,
        list_max / 2,
        list_max,
        words32,
        words32 + 1,
        n / 2,
        n - list_max,
        n - 3,
        n,
    ] {
        for style in 0..6 {
            // `target` positions: the first ones, the last ones, or in random
            // ascending disjoint ranges.
            let mut chosen = vec![false; n as usize];
            let mut left = target;
            match style {
                0 => chosen[..target as usize].fill(true),
                1 => chosen[(n - target) as usize..].fill(true),
                _ => {}
            }
            if style < 2 {
                left = 0;
            }
            while left > 0 {
                let start = next(n);
                let len = (next(40) + 1).min(left);
                for p in start..(start + len).min(n) {
                    if !chosen[p as usize] && left > 0 {
                        chosen[p as usize] = true;
                        left -= 1;
                    }
                }
            }
            let mut ranges: Vec<(u32, u32)> = Vec::new();
            for p in 0..n {
                if chosen[p as usize] {
                    match ranges.last_mut() {
                        Some(r) if r.1 == p => r.1 = p + 1,
                        _ => ranges.push((p, p + 1)),
                    }
                }
            }
            let mut want: Vec<u32> = (0..n)
                .filter(|&p| chosen[p as usize])
                .map(|p| trie.sorted[p as usize])
                .collect();
            want.sort_unstable();
            let got = finish(&trie, &ranges, Vec::new(), words, None);
            let rejected = n - target;
            let as_list = target <= list_max && target <= rejected;
            let runs = 2 * ranges.len() as u32;
            let as_runs = (as_list && runs < target)
                || (!as_list && rejected > list_max && target <= words32 && runs <= list_max);
            let mut ids = match &got.accepted {
                TokenSet::Runs(v) => {
                    assert!(as_runs, "{target} in {} runs", ranges.len());
                    assert_eq!(v.len(), 2 * ranges.len());
                    assert!(v.windows(2).all(|w| w[0] < w[1]), "ascending");
                    runs_seen += 1;
                    v.chunks(2)
                        .flat_map(|r| r[0]..r[1])
                        .map(|p| trie.sorted[p as usize])
                        .collect()
                }
                _ if as_runs => panic!("{target} in {} runs: not runs", ranges.len()),
                TokenSet::Accepted(v) => {
                    assert!(as_list, "{target}");
                    v.clone()
                }
                TokenSet::Rejected(v) => {
                    assert!(rejected <= list_max && !(target <= list_max && target <= rejected));
                    assert!(v.windows(2).all(|w| w[0] < w[1]), "ascending");
                    trie.sorted
                        .iter()
                        .copied()
                        .filter(|i| v.binary_search(i).is_err())
                        .collect()
                }
                TokenSet::Bitset(b) => {
                    assert!(target > list_max && rejected > list_max, "{target}");
                    set_bits(b)
                }
            };
            ids.sort_unstable();
            assert_eq!(ids, want, "{target} tokens accepted");
            // Applied to a bitmask, the set gives the same tokens.
            let mut bits = vec![0u32; words];
            let mut text_bits = vec![0u32; words];
            for &id in &trie.sorted {
                text_bits[(id / 32) as usize] |= 1 << (id % 32);
            }
            or_token_set(
                &mut bits,
                &mut true,
                &got.accepted,
                &text_bits,
                &trie.sorted,
                &mut Vec::new(),
            );
            assert_eq!(set_bits(&bits), want, "{target} tokens applied");
        }
    }
    assert!(runs_seen >= 8, "runs chosen {runs_seen} times");
}

/// A walk's DFA tables stay whole as chunks are added: past several chunks of tables, every
/// table made still reads each byte's target (with the final bit) or no edge, as the node's
/// edges say, and a node asked again keeps its table.
#[test]
fn dfa_tables_past_several_chunks_read_as_their_nodes_edges() {
    let words: Vec<String> = (0..60).map(|i| format!("w{i}x{}", i * 7)).collect();
    let compiler = crate::GrammarCompiler::new(std::sync::Arc::new(wide_vocabulary()))
        .with_precompute(crate::Precompute::Lazy);
    let g = compiler.compile_regex(&words.join("|")).unwrap();
    let mut tables = DfaTables::new(&g.aut, g.trie.max_depth);
    let made: Vec<(u32, u32)> = (0..g.aut.nodes.len() as u32)
        .filter_map(|n| Some((n, tables.table(&g.aut, n)?)))
        .collect();
    assert!(made.len() > 3 * TABLES_PER_CHUNK, "{} tables", made.len());
    for &(n, off) in &made {
        assert_eq!(tables.table(&g.aut, n), Some(off));
        for b in 0..=255u8 {
            let want = match g.aut.dfa_step(n, b) {
                Some(t) => t | (g.aut.is_final(t) as u32 * FINAL),
                None => NO_EDGE,
            };
            assert_eq!(tables.entry(off, b), want, "node {n}, byte {b}");
        }
    }
}
