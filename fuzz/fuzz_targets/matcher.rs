//! Random sequences of matcher calls on fixed grammars: `fill_next_token_bitmask`,
//! `accept_token`, `accept_string`, `rollback`, `reset`, jump-forward and forks (`clone`).
//! After every accepted step the mask bit of every token equals `accept_token` on a fork; a
//! rejected call leaves the mask unchanged; a rollback (or reset) restores the mask of the
//! state it returns to exactly; a fork that advances leaves its original unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, JsonSchemaOptions, Vocabulary};

const GRAMMARS: &[&str] = &[
    r#"root ::= expr
expr ::= expr "+" term | term
term ::= term "*" factor | factor
factor ::= "(" expr ")" | [0-9]+"#,
    r#"root ::= (("a"*)*)* "b" | ("a" | "aa")* "c""#,
    r#"root ::= "\"" [^"\\]{0,40} "\"" <s>? [a-c]{2,20000}"#,
    r#"root ::= "{" ("\"a\":" [0-9]{1,3} ("," "\"b\":" ("1" | "12"))?)? "}""#,
];

const SCHEMA: &str = r#"{"type": "object", "properties": {"a": {"type": "array",
    "items": {"type": "integer"}, "maxItems": 3}, "b": {"type": "string", "maxLength": 4}},
    "required": ["a"]}"#;

const TOKENS: &[&[u8]] = &[
    b"a", b"b", b"c", b"aa", b"ab", b"(", b")", b"+", b"*", b"1", b"12", b"(1", b"1)", b"\"",
    b"\"a", b"a\"", b"\\", b"\xC3", b"\xA9", b"{", b"}", b"\"a\":", b",", b"2", b"[", b"]", b" ",
    b"\"b\":", b"<s>", b"</s>",
];
const STRINGS: &[&str] = &[
    "a", "(1+", "\"x", "b", "{\"a\":1", "2}", "é", "[1,", "]}", "",
];

fn grammars() -> &'static Vec<Arc<CompiledGrammar>> {
    static G: OnceLock<Vec<Arc<CompiledGrammar>>> = OnceLock::new();
    G.get_or_init(|| {
        let n = TOKENS.len() as u32;
        let vocab = Vocabulary::from_token_bytes(TOKENS, &[n - 2, n - 1], &[n - 1]).unwrap();
        let compiler = GrammarCompiler::new(vocab);
        let mut g: Vec<_> = GRAMMARS
            .iter()
            .map(|g| compiler.compile_grammar(g).unwrap())
            .collect();
        g.push(compiler.compile_builtin_json().unwrap());
        g.push(
            compiler
                .compile_json_schema(SCHEMA, &JsonSchemaOptions::default())
                .unwrap(),
        );
        g
    })
}

fn mask_of(m: &mut GrammarMatcher) -> Vec<u32> {
    let mut mask = vec![0u32; m.bitmask_words()];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    mask
}

/// The mask, after checking mask bit ⇔ `accept_token` (on a fork) for every token and one
/// id past the vocabulary.
fn checked_mask(m: &mut GrammarMatcher) -> Vec<u32> {
    let mask = mask_of(m);
    let n = m.compiled_grammar().vocabulary().vocab_size() as u32;
    for t in 0..=n {
        let bit = t < n && mask[(t / 32) as usize] >> (t % 32) & 1 == 1;
        assert_eq!(bit, m.clone().accept_token(t), "token {t}");
    }
    mask
}

fuzz_target!(|data: &[u8]| {
    let compiled = grammars();
    let Some((&which, ops)) = data.split_first() else {
        return;
    };
    let mut m = GrammarMatcher::new(compiled[which as usize % compiled.len()].clone());
    let n = TOKENS.len() as u32;
    // masks[i]: the mask after i accepted steps on the current path.
    let mut masks = vec![checked_mask(&mut m)];
    for &op in ops {
        let arg = op as usize / 8;
        match op % 8 {
            0..=2 => {
                let t = arg as u32 % (n + 2);
                let before = m.num_accepted_steps();
                if m.accept_token(t) {
                    masks.push(checked_mask(&mut m));
                } else {
                    assert_eq!(m.num_accepted_steps(), before);
                    assert_eq!(&mask_of(&mut m), masks.last().unwrap(), "rejected {t}");
                }
            }
            3 => {
                let s = STRINGS[arg % STRINGS.len()];
                let before = m.num_accepted_steps();
                if m.accept_string(s) {
                    masks.push(checked_mask(&mut m));
                } else {
                    assert_eq!(m.num_accepted_steps(), before);
                    assert_eq!(&mask_of(&mut m), masks.last().unwrap(), "rejected {s:?}");
                }
            }
            4 => {
                let k = arg % 5;
                let steps = m.num_accepted_steps();
                match m.rollback(k) {
                    Ok(()) => {
                        assert!(k <= steps);
                        masks.truncate(masks.len() - k);
                        assert_eq!(&mask_of(&mut m), masks.last().unwrap(), "rollback {k}");
                        if k > 0 {
                            assert!(!m.is_terminated());
                        }
                    }
                    Err(_) => assert!(k > steps, "rollback {k} of {steps} refused"),
                }
            }
            5 => {
                // Fork, advance the fork by up to 3 tokens, check the original is unchanged
                // and the fork rolls back to where it started.
                let mut f = m.clone();
                assert_eq!(&mask_of(&mut f), masks.last().unwrap(), "fork");
                let mut advanced = 0;
                for i in 0..3 {
                    let t = (arg as u32 + i * 7) % n;
                    if f.accept_token(t) {
                        advanced += 1;
                    }
                }
                assert_eq!(
                    &mask_of(&mut m),
                    masks.last().unwrap(),
                    "original after fork"
                );
                if f.rollback(advanced).is_ok() {
                    assert_eq!(&mask_of(&mut f), masks.last().unwrap(), "fork rolled back");
                }
            }
            6 => {
                let forced = m.find_jump_forward_string();
                if !forced.is_empty() {
                    assert!(m.clone().accept_string(&forced), "forced {forced:?}");
                }
                assert_eq!(
                    &mask_of(&mut m),
                    masks.last().unwrap(),
                    "after jump-forward"
                );
            }
            _ => {
                if arg.is_multiple_of(4) {
                    m.reset();
                    masks.truncate(1);
                    assert_eq!(&mask_of(&mut m), &masks[0], "reset");
                }
            }
        }
        assert_eq!(m.num_accepted_steps() + 1, masks.len());
    }
});
