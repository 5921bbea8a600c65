//! EBNF parse + compile: any input gives a grammar or a typed error, never a panic; a
//! grammar that parses prints to EBNF that parses back to the same grammar.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokensieve::grammar::parse_ebnf;
use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(g) = parse_ebnf(text, "root") else {
        return;
    };
    let printed = g.to_string();
    let again = parse_ebnf(&printed, "root").expect("printed grammar must parse");
    assert_eq!(g, again);
    let tokens: Vec<&[u8]> = vec![b"a", b"b", b"ab", b"\"", b"{", b"}", b" ", b"<s>"];
    let vocab = Vocabulary::from_token_bytes(&tokens, &[7], &[7]).unwrap();
    if let Ok(compiled) = GrammarCompiler::new(vocab).compile_grammar(text) {
        let mut m = GrammarMatcher::new(compiled);
        let mut mask = vec![0u32; m.bitmask_words()];
        m.fill_next_token_bitmask(&mut mask).unwrap();
    }
});
