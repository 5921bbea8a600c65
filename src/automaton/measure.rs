//! Measures of IR expressions that the lowering (`super::lower`) decides by: the size of an
//! expression (a proxy for its automaton's), whether it matches bytes only, and whether
//! it matches the empty string.

use crate::grammar::Expr;

/// Levels [`size`] and [`is_pure_bytes`] recurse before they take a stack: they run on
/// every body the lowering meets (tens of thousands of calls for a large schema), where a
/// stack allocated per call was about 2% of the compile, and a hand-built expression may
/// be nested deeper than a thread's stack holds.
const RECURSION: usize = 64;

/// Returns the number of IR nodes in `e` (saturating), a proxy for its automaton size.
pub(crate) fn size(e: &Expr) -> u64 {
    size_from(e, 0)
}

/// [`size`] at nesting depth `depth`.
fn size_from(e: &Expr, depth: usize) -> u64 {
    if depth == RECURSION {
        return size_with_stack(e);
    }
    let own = match e {
        Expr::Bytes(b) => b.len() as u64,
        Expr::Class(c) => 1 + c.ranges.len() as u64,
        _ => 1,
    };
    match e {
        Expr::Seq(v) | Expr::Choice(v) => v
            .iter()
            .fold(own, |n, c| n.saturating_add(size_from(c, depth + 1))),
        Expr::Repeat { expr, min, max } => {
            let copies = max.unwrap_or(*min).max(1) as u64;
            own.saturating_add(size_from(expr, depth + 1).saturating_mul(copies))
        }
        _ => own,
    }
}

/// [`size`] with a stack instead of recursion on sequences and choices.
fn size_with_stack(e: &Expr) -> u64 {
    let mut n = 0u64;
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        n = n.saturating_add(match e {
            Expr::Bytes(b) => b.len() as u64,
            Expr::Class(c) => 1 + c.ranges.len() as u64,
            _ => 1,
        });
        match e {
            Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter()),
            Expr::Repeat { expr, min, max } => {
                let copies = max.unwrap_or(*min).max(1) as u64;
                n = n.saturating_add(size(expr).saturating_mul(copies));
            }
            _ => {}
        }
    }
    n
}

/// True when `e` matches bytes only: no rule calls, no token terminals.
pub(super) fn is_pure_bytes(e: &Expr) -> bool {
    pure_bytes_from(e, 0)
}

/// [`is_pure_bytes`] at nesting depth `depth`.
fn pure_bytes_from(e: &Expr, depth: usize) -> bool {
    if depth == RECURSION {
        return pure_bytes_with_stack(e);
    }
    match e {
        Expr::Rule(_) | Expr::Token(_) => false,
        Expr::Seq(v) | Expr::Choice(v) => v.iter().all(|c| pure_bytes_from(c, depth + 1)),
        Expr::Repeat { expr, .. } => pure_bytes_from(expr, depth + 1),
        _ => true,
    }
}

/// [`is_pure_bytes`] with a stack instead of recursion.
fn pure_bytes_with_stack(e: &Expr) -> bool {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Rule(_) | Expr::Token(_) => return false,
            Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter()),
            Expr::Repeat { expr, .. } => stack.push(expr),
            _ => {}
        }
    }
    true
}

/// True when `e` (pure bytes) matches the empty string.
pub(super) fn nullable(e: &Expr) -> bool {
    match e {
        Expr::Empty => true,
        Expr::Bytes(b) => b.is_empty(),
        Expr::Class(_) | Expr::Token(_) | Expr::Rule(_) => false,
        Expr::Seq(v) => v.iter().all(nullable),
        Expr::Choice(v) => v.iter().any(nullable),
        Expr::Repeat { expr, min, .. } => *min == 0 || nullable(expr),
    }
}
