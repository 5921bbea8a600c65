//! Regex compile: any pattern gives a compiled grammar or a typed error, never a panic or a
//! stack overflow; a compiled pattern's matcher gives a first mask whose bits agree with
//! `accept_token`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tokensieve::{GrammarCompiler, GrammarMatcher, RegexOptions, Vocabulary};

fn compiler() -> &'static GrammarCompiler {
    static C: OnceLock<GrammarCompiler> = OnceLock::new();
    C.get_or_init(|| {
        let tokens: Vec<&[u8]> = vec![
            b"a",
            b"b",
            b"ab",
            b"0",
            b"42",
            b"-",
            b" ",
            b"\n",
            b"\xC3\xA9",
            b"\xC3",
            b"\xA9",
            b"x",
            b"<s>",
        ];
        let vocab = Vocabulary::from_token_bytes(&tokens, &[12], &[12]).unwrap();
        GrammarCompiler::new(vocab)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Ok(pattern) = std::str::from_utf8(rest) else {
        return;
    };
    let opts = RegexOptions::new()
        .unanchored(flags & 1 != 0)
        .dot_matches_new_line(flags & 2 != 0)
        .case_insensitive(flags & 4 != 0);
    let Ok(compiled) = compiler().compile_regex_with(pattern, &opts) else {
        return;
    };
    let mut m = GrammarMatcher::new(compiled);
    let mut mask = vec![0u32; m.bitmask_words()];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    let n = m.compiled_grammar().vocabulary().vocab_size() as u32;
    for t in 0..n {
        let bit = mask[(t / 32) as usize] >> (t % 32) & 1 == 1;
        assert_eq!(bit, m.clone().accept_token(t), "token {t} on {pattern:?}");
    }
});
