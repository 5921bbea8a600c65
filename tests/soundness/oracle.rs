//! An independent recogniser for grammar IR, used as a test oracle.
//!
//! It shares nothing with the engine: for a whole input it computes, by least fixpoint,
//! the set of end positions of every (rule, start) pair, so left recursion and ambiguity are
//! handled by iteration instead of automata. Cubic or worse; only for short test texts.

#![allow(dead_code, clippy::needless_range_loop)]

use tokensieve::grammar::{Expr, Grammar};

/// One input symbol: a byte of text or a special token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sym {
    Byte(u8),
    Token(u32),
}

/// Token terminals must already be ids (`TokenRef::Id`); a `TokenRef::Text` is looked up by
/// `text_to_id`.
pub struct Oracle<'a> {
    g: &'a Grammar,
    input: &'a [Sym],
    ends: Vec<Vec<Vec<bool>>>, // [rule][start][end]
    text_to_id: &'a dyn Fn(&str) -> Option<u32>,
}

impl<'a> Oracle<'a> {
    pub fn accepts(
        g: &'a Grammar,
        input: &'a [Sym],
        text_to_id: &'a dyn Fn(&str) -> Option<u32>,
    ) -> bool {
        let n = input.len();
        let mut o = Oracle {
            g,
            input,
            ends: vec![vec![vec![false; n + 1]; n + 1]; g.rules.len()],
            text_to_id,
        };
        loop {
            let mut changed = false;
            for r in 0..g.rules.len() {
                for i in 0..=n {
                    let e = o.eval(&g.rules[r].body, i);
                    for j in 0..=n {
                        if e[j] && !o.ends[r][i][j] {
                            o.ends[r][i][j] = true;
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        o.ends[g.root.index()][0][n]
    }

    fn utf8_char_at(&self, i: usize) -> Option<(u32, usize)> {
        let mut buf = Vec::new();
        for k in i..(i + 4).min(self.input.len()) {
            match self.input[k] {
                Sym::Byte(b) => buf.push(b),
                Sym::Token(_) => break,
            }
            if let Ok(s) = std::str::from_utf8(&buf) {
                let c = s.chars().next()?;
                return Some((c as u32, buf.len()));
            }
        }
        None
    }

    fn eval(&self, e: &Expr, i: usize) -> Vec<bool> {
        let n = self.input.len();
        let mut out = vec![false; n + 1];
        match e {
            Expr::Empty => out[i] = true,
            Expr::Bytes(b) => {
                if i + b.len() <= n
                    && b.iter()
                        .enumerate()
                        .all(|(k, &c)| self.input[i + k] == Sym::Byte(c))
                {
                    out[i + b.len()] = true;
                }
            }
            Expr::Class(c) => {
                if let Some((cp, len)) = self.utf8_char_at(i) {
                    if c.normalized().iter().any(|&(lo, hi)| lo <= cp && cp <= hi) {
                        out[i + len] = true;
                    }
                }
            }
            Expr::Token(t) => {
                let id = match t {
                    tokensieve::grammar::TokenRef::Id(id) => Some(*id),
                    tokensieve::grammar::TokenRef::Text(s) => (self.text_to_id)(s),
                };
                if i < n && id.is_some_and(|id| self.input[i] == Sym::Token(id)) {
                    out[i + 1] = true;
                }
            }
            Expr::Rule(r) => out.clone_from(&self.ends[r.index()][i]),
            Expr::Seq(v) => {
                let mut cur = vec![false; n + 1];
                cur[i] = true;
                for x in v {
                    let mut next = vec![false; n + 1];
                    for j in 0..=n {
                        if cur[j] {
                            for (k, b) in self.eval(x, j).into_iter().enumerate() {
                                next[k] |= b;
                            }
                        }
                    }
                    cur = next;
                }
                out = cur;
            }
            Expr::Choice(v) => {
                for x in v {
                    for (k, b) in self.eval(x, i).into_iter().enumerate() {
                        out[k] |= b;
                    }
                }
            }
            Expr::Repeat { expr, min, max } => {
                let mut cur = vec![false; n + 1];
                cur[i] = true;
                let mut count = 0u32;
                let mut seen_at_or_after_min = vec![false; n + 1];
                loop {
                    if count >= *min {
                        let mut new = false;
                        for j in 0..=n {
                            if cur[j] && !seen_at_or_after_min[j] {
                                seen_at_or_after_min[j] = true;
                                new = true;
                            }
                        }
                        if !new && max.is_none() {
                            break;
                        }
                    }
                    if max.is_some_and(|m| count >= m) || count > *min + n as u32 + 1 {
                        break;
                    }
                    let mut next = vec![false; n + 1];
                    for j in 0..=n {
                        if cur[j] {
                            for (k, b) in self.eval(expr, j).into_iter().enumerate() {
                                next[k] |= b;
                            }
                        }
                    }
                    if !next.iter().any(|&b| b) {
                        break;
                    }
                    cur = next;
                    count += 1;
                }
                out = seen_at_or_after_min;
            }
        }
        out
    }
}
