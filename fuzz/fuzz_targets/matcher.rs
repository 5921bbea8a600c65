//! Random sequences of matcher calls on fixed grammars: the mask bit of every token equals
//! `accept_token` on a fork, and rollback restores the mask exactly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Vocabulary};

const GRAMMARS: &[&str] = &[
    r#"root ::= expr
expr ::= expr "+" term | term
term ::= term "*" factor | factor
factor ::= "(" expr ")" | [0-9]+"#,
    r#"root ::= (("a"*)*)* "b" | ("a" | "aa")* "c""#,
    r#"root ::= "\"" [^"\\]{0,40} "\"" <s>? [a-c]{2,20000}"#,
];

fn grammars() -> &'static (Arc<Vocabulary>, Vec<Arc<CompiledGrammar>>) {
    static G: OnceLock<(Arc<Vocabulary>, Vec<Arc<CompiledGrammar>>)> = OnceLock::new();
    G.get_or_init(|| {
        let tokens: Vec<&[u8]> = vec![
            b"a", b"b", b"c", b"aa", b"ab", b"(", b")", b"+", b"*", b"1", b"12", b"(1", b"1)",
            b"\"", b"\"a", b"a\"", b"\\", b"\xC3", b"\xA9", b"<s>", b"</s>",
        ];
        let vocab = Arc::new(Vocabulary::from_token_bytes(&tokens, &[19, 20], &[20]).unwrap());
        let compiler = GrammarCompiler::new(vocab.clone());
        let compiled = GRAMMARS
            .iter()
            .map(|g| compiler.compile_grammar(g).unwrap())
            .collect();
        (vocab, compiled)
    })
}

fn mask_of(m: &mut GrammarMatcher) -> Vec<u32> {
    let mut mask = vec![0u32; m.bitmask_words()];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    mask
}

fuzz_target!(|data: &[u8]| {
    let (vocab, compiled) = grammars();
    let Some((&which, ops)) = data.split_first() else {
        return;
    };
    let mut m = GrammarMatcher::new(compiled[which as usize % compiled.len()].clone());
    let n = vocab.vocab_size() as u32;
    for &op in ops {
        match op % 8 {
            0..=3 => {
                let mask = mask_of(&mut m);
                let t = (op as u32 / 8) % (n + 2);
                let bit = t < n && mask[(t / 32) as usize] >> (t % 32) & 1 == 1;
                assert_eq!(bit, m.clone().accept_token(t), "token {t}");
                m.accept_token(t);
            }
            4 => {
                let before = mask_of(&mut m);
                let t = (op as u32 / 8) % n;
                if m.accept_token(t) {
                    m.rollback(1).unwrap();
                }
                assert_eq!(before, mask_of(&mut m));
            }
            5 => {
                let k = (op as usize / 8) % 4;
                let _ = m.rollback(k);
            }
            6 => {
                let _ = m.accept_string(["a", "(1+", "\"x", "b"][(op as usize / 8) % 4]);
            }
            _ => {
                let _ = m.find_jump_forward_string();
                if op > 200 {
                    m.reset();
                }
            }
        }
    }
});
