//! The regex front end: a regular expression → grammar IR ([`Expr`], [`Grammar`]), a pure
//! lowering that [`crate::GrammarCompiler::compile_regex`] compiles.
//!
//! Use it to constrain output to a regular expression ([`crate::GrammarCompiler::compile_regex`]:
//! the *whole* output must match), or to embed a pattern inside a larger grammar
//! ([`regex_to_expr`], which the JSON Schema `pattern` keyword uses in its unanchored mode).
//!
//! The pattern is parsed by `regex-syntax` (the parser of the `regex` crate) and its HIR is
//! lowered to IR: literals become byte strings, classes become Unicode code point classes
//! (which the automaton builder turns into UTF-8 byte ranges), alternation becomes a choice,
//! counted repetition becomes [`Expr::Repeat`] with the real bounds (lowered compactly by the
//! compiler, so `a{1,20000}` stays small). The semantics followed are those of the Rust
//! `regex` crate, with Unicode mode on:
//!
//! - `.` matches any code point **except `\n`** (as in Rust's `regex` and PCRE; `\r` is
//!   matched); [`RegexOptions::dot_matches_new_line`] (or the `(?s)` flag) makes it match
//!   `\n` too. XGrammar's regex converter treats `.` differently, so check a pattern ported
//!   from XGrammar that relies on what `.` matches. ECMAScript's `.` (the JSON Schema
//!   `pattern` dialect) also excludes `\r`, U+2028 and U+2029; a caller that needs exactly
//!   that can write the class out.
//! - `\d`, `\w`, `\s` are the Unicode classes (`\d` is `\p{Nd}`, not just `[0-9]`); `\D`,
//!   `\W`, `\S` are their exact complements over all Unicode scalar values. `\p{L}`,
//!   `\p{Han}`, `\p{Greek}` and every other property `regex-syntax` knows are supported, as
//!   are `(?i)` and the other inline flags.
//! - `^` and `$` (and `\A`, `\z`, and their multi-line forms) are allowed only where they
//!   are trivially true for a whole-string match: `^` where nothing can have been matched
//!   before it, `$` where nothing can follow. Elsewhere (`a^b`) they are
//!   [`RegexError::MisplacedAnchor`].
//! - Not supported, each a typed [`RegexError`] with the construct's position: backreferences
//!   (`\1`; `regex-syntax` itself refuses them), look-around (`(?=a)`, `(?!a)`, `(?<=a)`,
//!   `(?<!a)`), word boundaries (`\b`, `\B`, `\b{start}`, `\<`, ...).
//! - Byte-oriented classes and literals (`(?-u)`) are supported when they stay within ASCII
//!   (`(?-u:\w)` is `[0-9A-Za-z_]`); one that can match a non-UTF-8 byte (`(?-u:\xFF)`,
//!   `(?-u:.)`) is [`RegexError::NonUtf8`], since grammar text is always UTF-8.
//! - Greedy and lazy repetition are the same language, so `a*?` is `a*`; capture groups only
//!   group.
//!
//! Nesting is bounded: the parser's nest limit ([`RegexOptions::nest_limit`], default 250)
//! turns a pattern of 10,000 nested groups into [`RegexError::TooDeep`], never a stack
//! overflow; every later pass recurses at most that deep.
//!
//! # Example
//!
//! ```
//! use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary};
//!
//! let tokens: Vec<&[u8]> = vec![b"a", b"b", b"-", b"42", b"<eos>"];
//! let vocab = Vocabulary::from_token_bytes(&tokens, &[4], &[4]).unwrap();
//! let compiler = GrammarCompiler::new(vocab);
//! let compiled = compiler.compile_regex(r"(ab|)-\d+").unwrap();
//! let mut matcher = GrammarMatcher::new(compiled);
//! assert!(matcher.accept_string("ab-4"));
//! assert!(!matcher.accept_string("a")); // a letter cannot follow the digits
//! assert!(matcher.accept_token(3)); // "42"
//! assert!(matcher.accept_token(4)); // the stop token: "ab-442" matches
//! assert!(matcher.is_terminated());
//! ```

use crate::grammar::{CharClass, Expr, Grammar, Rule, RuleId};
use regex_syntax::ast::{self, AssertionKind, Ast, RepetitionKind, RepetitionRange};
use regex_syntax::hir::{self, Class, Hir, HirKind, Look};
use std::fmt;

/// The 0.x error of `compile_regex`, at its old path: a deprecated re-export of the crate's
/// error module (`src/error.rs`), not a dependency of the lowering on the compiler.
#[allow(deprecated)]
pub use crate::error::RegexCompileError;

/// Options of the regex front end ([`regex_to_expr`],
/// [`crate::GrammarCompiler::compile_regex_with`]).
///
/// The default is what [`crate::GrammarCompiler::compile_regex`] uses: anchored (the whole text
/// matches the pattern), `.` not matching `\n`, case-sensitive, nest limit
/// [`RegexOptions::DEFAULT_NEST_LIMIT`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegexOptions {
    unanchored: bool,
    dot_matches_new_line: bool,
    case_insensitive: bool,
    ecmascript_classes: bool,
    nest_limit: u32,
}

impl Default for RegexOptions {
    fn default() -> Self {
        RegexOptions {
            unanchored: false,
            dot_matches_new_line: false,
            case_insensitive: false,
            ecmascript_classes: false,
            nest_limit: Self::DEFAULT_NEST_LIMIT,
        }
    }
}

impl RegexOptions {
    /// The default nest limit (that of `regex-syntax`).
    pub const DEFAULT_NEST_LIMIT: u32 = 250;
    /// The largest nest limit accepted; larger values are clamped to it (the grammar IR
    /// allows [`Grammar::MAX_DEPTH`] levels of expression nesting).
    pub const MAX_NEST_LIMIT: u32 = 500;

    /// The default options (same as `RegexOptions::default()`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Unanchored mode (default off), as in a search and as the JSON Schema `pattern`
    /// keyword means it: the pattern may occur anywhere in the text, so any text (`.*` with
    /// `.` = any code point, newlines included) may surround it. A leading `^` (or `\A`)
    /// anchors it at the start and a trailing `$` (or `\z`) at the end, separately for each
    /// top-level alternative (`^a|b$`: "starts with a, or ends with b"). In this mode an
    /// anchor that does not anchor a whole top-level alternative (`(^|x)a`) and the
    /// multi-line anchors (`(?m)^`) are [`RegexError::MisplacedAnchor`].
    pub fn unanchored(mut self, yes: bool) -> Self {
        self.unanchored = yes;
        self
    }

    /// Whether `.` matches `\n` too (default off, as in Rust's `regex`; the `(?s)` flag does
    /// the same inside the pattern).
    pub fn dot_matches_new_line(mut self, yes: bool) -> Self {
        self.dot_matches_new_line = yes;
        self
    }

    /// Case-insensitive matching, Unicode simple case folding (default off; the `(?i)` flag
    /// does the same inside the pattern).
    pub fn case_insensitive(mut self, yes: bool) -> Self {
        self.case_insensitive = yes;
        self
    }

    /// ECMAScript's Perl classes (default off): `\d` is `[0-9]`, `\w` is `[0-9A-Za-z_]`, `\s`
    /// is ECMAScript white space (`\t \n \v \f \r`, space, U+00A0, U+1680, U+2000–U+200A,
    /// U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF), and `\D`, `\W`, `\S` their
    /// complements, outside and inside brackets, instead of the Unicode classes (`\d` =
    /// `\p{Nd}`). This is the dialect of JavaScript, of the JSON Schema `pattern` keyword and
    /// of XGrammar's regex converter (`xgrammar.Grammar.from_regex`), which the Python
    /// package's `compile_regex` follows. Each class is rewritten in the pattern before
    /// translation, so errors keep the positions of the pattern as written.
    pub fn ecmascript_classes(mut self, yes: bool) -> Self {
        self.ecmascript_classes = yes;
        self
    }

    /// The deepest nesting of groups, repetitions, alternations and classes accepted
    /// (default [`RegexOptions::DEFAULT_NEST_LIMIT`]; clamped to
    /// [`RegexOptions::MAX_NEST_LIMIT`]). Deeper patterns are [`RegexError::TooDeep`].
    pub fn nest_limit(mut self, limit: u32) -> Self {
        self.nest_limit = limit.min(Self::MAX_NEST_LIMIT);
        self
    }
}

/// A position in a regex pattern, as `regex-syntax` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    /// Byte offset from the start of the pattern, from 0.
    pub offset: usize,
    /// Line, from 1.
    pub line: usize,
    /// Column (in code points), from 1.
    pub column: usize,
}

impl From<ast::Position> for Position {
    fn from(p: ast::Position) -> Self {
        Position {
            offset: p.offset,
            line: p.line,
            column: p.column,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} (offset {})", self.line, self.column, self.offset)
    }
}

/// Why a regex could not be lowered to grammar IR.
///
/// Every variant carries the [`Position`] (start of the offending construct) where one
/// exists; [`RegexError::position`] returns it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegexError {
    /// A syntax error reported by `regex-syntax` (unclosed group, bad escape, unknown
    /// Unicode property, ...). `source` is its error, with the pattern and span.
    #[error("regex syntax error at {position}: {message}")]
    Syntax {
        /// `regex-syntax`'s message, without the pattern.
        message: String,
        /// Where the error starts.
        position: Position,
        /// The error from `regex-syntax`.
        #[source]
        source: Box<regex_syntax::Error>,
    },
    /// A backreference such as `\1`: not a regular language, so no finite automaton.
    #[error("regex backreference at {position} is not supported (not a regular language): spell out the alternatives it can match")]
    Backreference {
        /// Where the backreference starts.
        position: Position,
    },
    /// Look-around: `(?=...)`, `(?!...)`, `(?<=...)`, `(?<!...)`.
    #[error("regex look-around at {position} is not supported: rewrite the pattern without it (an EBNF grammar can end a rule with a lookahead `(= ...)`)")]
    LookAround {
        /// Where the look-around group starts.
        position: Position,
    },
    /// A word boundary assertion: `\b`, `\B`, `\b{start}`, `\<`, ...
    #[error("regex word boundary `{text}` at {position} is not supported: match the separator itself, as `[^A-Za-z0-9_]`, or anchor the pattern")]
    WordBoundary {
        /// The assertion as written.
        text: String,
        /// Where it starts.
        position: Position,
    },
    /// `^`, `$`, `\A` or `\z` where it is not trivially true: a start anchor after text that
    /// may be non-empty, an end anchor before such text (`a^b`), inside a repetition that
    /// can repeat after consuming text; in unanchored mode, also an anchor that does not
    /// anchor a whole top-level alternative, or a multi-line anchor.
    #[error("regex anchor `{text}` at {position} is not supported there: {reason}")]
    MisplacedAnchor {
        /// The anchor as written.
        text: String,
        /// Where it starts.
        position: Position,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The pattern nests groups, repetitions or classes deeper than the nest limit.
    #[error("regex nests deeper than the limit of {limit} at {position}: remove redundant groups, or raise RegexOptions::nest_limit (at most 500)")]
    TooDeep {
        /// The nest limit in force ([`RegexOptions::nest_limit`]).
        limit: u32,
        /// Where the limit was exceeded.
        position: Position,
    },
    /// A byte-oriented (`(?-u)`) literal or class that can match a byte that is not UTF-8.
    #[error("regex at {position} can match invalid UTF-8 (a `(?-u)` byte above 0x7F): drop `(?-u)` there or keep to bytes up to 0x7F")]
    NonUtf8 {
        /// Where the construct starts.
        position: Position,
    },
}

impl RegexError {
    /// Where in the pattern the error is.
    pub fn position(&self) -> Position {
        match self {
            RegexError::Syntax { position, .. }
            | RegexError::Backreference { position }
            | RegexError::LookAround { position }
            | RegexError::WordBoundary { position, .. }
            | RegexError::MisplacedAnchor { position, .. }
            | RegexError::TooDeep { position, .. }
            | RegexError::NonUtf8 { position } => *position,
        }
    }
}

/// Lowers a regex to a grammar expression matching the same UTF-8 texts.
///
/// Anchored (the default options), the expression matches exactly the texts `t` for which
/// Rust's `regex` with `^(?:pattern)$` matches `t`. With [`RegexOptions::unanchored`], it
/// matches the texts that contain a match (respecting the pattern's own `^`/`$`). The
/// expression uses no [`Expr::Rule`], so it can be placed in any grammar; its nesting depth
/// is at most the nest limit plus a few levels.
///
/// # Errors
/// [`RegexError`]: syntax errors, unsupported constructs (backreferences, look-around, word
/// boundaries, anchors in the middle), nesting past the limit, non-UTF-8 byte classes.
///
/// # Panics
/// Never.
///
/// # Example
/// ```
/// use tokensieve::grammar::Expr;
/// use tokensieve::regex::{regex_to_expr, RegexOptions};
///
/// let e = regex_to_expr("a{2,5000}", &RegexOptions::new()).unwrap();
/// assert!(matches!(e, Expr::Repeat { min: 2, max: Some(5000), .. }));
/// ```
pub fn regex_to_expr(pattern: &str, opts: &RegexOptions) -> Result<Expr, RegexError> {
    let limit = opts.nest_limit.min(RegexOptions::MAX_NEST_LIMIT);
    // The two stages of `regex_syntax::ParserBuilder`, run separately: the AST keeps the
    // spans that errors about assertions report (the HIR has none).
    let ast = ast::parse::ParserBuilder::new()
        .nest_limit(limit)
        .build()
        .parse(pattern)
        .map_err(|e| ast_error(e, limit))?;
    check_assertions(&ast, pattern, true, true)?;
    let rewritten;
    let (pattern, ast) = match opts.ecmascript_classes {
        true => match ecmascript_perl_classes(pattern, &ast) {
            Some(p) => {
                rewritten = p;
                let ast = ast::parse::ParserBuilder::new()
                    .nest_limit(limit.saturating_add(1))
                    .build()
                    .parse(&rewritten)
                    .map_err(|e| ast_error(e, limit))?;
                (rewritten.as_str(), ast)
            }
            None => (pattern, ast),
        },
        false => (pattern, ast),
    };
    let hir = hir::translate::TranslatorBuilder::new()
        .unicode(true)
        .utf8(true)
        .dot_matches_new_line(opts.dot_matches_new_line)
        .case_insensitive(opts.case_insensitive)
        .build()
        .translate(pattern, &ast)
        .map_err(hir_error)?;
    if !opts.unanchored {
        return lower(&hir);
    }
    // Unanchored: each top-level alternative is surrounded by any text, unless anchored.
    let mut top = &hir;
    while let HirKind::Capture(c) = top.kind() {
        top = &c.sub;
    }
    let branches: Vec<&Hir> = match top.kind() {
        HirKind::Alternation(v) => v.iter().collect(),
        _ => vec![top],
    };
    let looks = hir.properties().look_set();
    if looks.contains_anchor_line() {
        let span = first_assertion(&ast, &|k| {
            matches!(k, AssertionKind::StartLine | AssertionKind::EndLine)
        });
        return Err(misplaced(
            pattern,
            span,
            "multi-line anchors are not supported in unanchored mode",
        ));
    }
    let any = || Expr::Repeat {
        expr: Box::new(Expr::Class(CharClass {
            negated: true,
            ranges: Vec::new(),
        })),
        min: 0,
        max: None,
    };
    let mut alts = Vec::with_capacity(branches.len());
    for b in branches {
        let p = b.properties();
        let start = p.look_set_prefix().contains(Look::Start);
        let end = p.look_set_suffix().contains(Look::End);
        let reason = "in unanchored mode an anchor must anchor a whole top-level alternative";
        if !start && p.look_set().contains(Look::Start) {
            let span = first_assertion(&ast, &|k| {
                matches!(k, AssertionKind::StartLine | AssertionKind::StartText)
            });
            return Err(misplaced(pattern, span, reason));
        }
        if !end && p.look_set().contains(Look::End) {
            let span = first_assertion(&ast, &|k| {
                matches!(k, AssertionKind::EndLine | AssertionKind::EndText)
            });
            return Err(misplaced(pattern, span, reason));
        }
        let mut seq = Vec::with_capacity(3);
        if !start {
            seq.push(any());
        }
        seq.push(lower(b)?);
        if !end {
            seq.push(any());
        }
        alts.push(if seq.len() == 1 {
            seq.pop().unwrap_or(Expr::Empty)
        } else {
            Expr::Seq(seq)
        });
    }
    Ok(if alts.len() == 1 {
        alts.pop().unwrap_or(Expr::Empty)
    } else {
        Expr::Choice(alts)
    })
}

/// As [`regex_to_expr`], as a one-rule grammar whose root rule is named `root`.
///
/// # Errors
/// As [`regex_to_expr`].
pub fn regex_to_grammar(pattern: &str, opts: &RegexOptions) -> Result<Grammar, RegexError> {
    Ok(Grammar {
        rules: vec![Rule {
            name: "root".to_string(),
            body: regex_to_expr(pattern, opts)?,
        }],
        root: RuleId(0),
    })
}

fn ast_error(e: ast::Error, limit: u32) -> RegexError {
    let position = Position::from(e.span().start);
    match e.kind() {
        ast::ErrorKind::UnsupportedBackreference => RegexError::Backreference { position },
        ast::ErrorKind::UnsupportedLookAround => RegexError::LookAround { position },
        ast::ErrorKind::NestLimitExceeded(_) => RegexError::TooDeep { limit, position },
        kind => RegexError::Syntax {
            message: kind.to_string(),
            position,
            source: Box::new(e.into()),
        },
    }
}

fn hir_error(e: hir::Error) -> RegexError {
    let position = Position::from(e.span().start);
    match e.kind() {
        hir::ErrorKind::InvalidUtf8 => RegexError::NonUtf8 { position },
        kind => RegexError::Syntax {
            message: kind.to_string(),
            position,
            source: Box::new(e.into()),
        },
    }
}

fn span_text(pattern: &str, span: &ast::Span) -> String {
    pattern
        .get(span.start.offset..span.end.offset)
        .unwrap_or("")
        .to_string()
}

fn misplaced(pattern: &str, span: Option<ast::Span>, reason: &'static str) -> RegexError {
    let start = ast::Position::new(0, 1, 1);
    let span = span.unwrap_or(ast::Span::new(start, start));
    RegexError::MisplacedAnchor {
        text: span_text(pattern, &span),
        position: span.start.into(),
        reason,
    }
}

/// ECMAScript white space, the class `\s` stands for under
/// [`RegexOptions::ecmascript_classes`] and in the JSON Schema `pattern` dialect (without
/// its brackets).
pub(crate) const ECMASCRIPT_SPACE: &str = r"\t\n\x0B\x0C\r\x20\xA0\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

/// `pattern` with every Perl class (`\d`, `\D`, `\w`, `\W`, `\s`, `\S`) replaced by its
/// ECMAScript class, written so that it means the same where it stands (a nested class inside
/// brackets for a complement); `None` when the pattern has none. Spans come from `ast`, the
/// parse of `pattern`, so escapes, brackets and comments (`(?x)`) are never misread.
fn ecmascript_perl_classes(pattern: &str, ast: &Ast) -> Option<String> {
    struct Perl(Vec<(ast::Span, ast::ClassPerlKind, bool, bool)>);
    type Found = Vec<(ast::Span, ast::ClassPerlKind, bool, bool)>;
    impl ast::Visitor for Perl {
        type Output = Found;
        type Err = ();
        fn finish(self) -> Result<Found, ()> {
            Ok(self.0)
        }
        fn visit_pre(&mut self, a: &Ast) -> Result<(), ()> {
            if let Ast::ClassPerl(c) = a {
                self.0.push((c.span, c.kind.clone(), c.negated, false));
            }
            Ok(())
        }
        fn visit_class_set_item_pre(&mut self, item: &ast::ClassSetItem) -> Result<(), ()> {
            if let ast::ClassSetItem::Perl(c) = item {
                self.0.push((c.span, c.kind.clone(), c.negated, true));
            }
            Ok(())
        }
    }
    // The visitor is heap-based (no recursion), and this one never fails.
    let mut found = ast::visit(ast, Perl(Vec::new())).unwrap_or_default();
    if found.is_empty() {
        return None;
    }
    found.sort_by_key(|(span, ..)| span.start.offset);
    let mut out = String::with_capacity(pattern.len() + 32 * found.len());
    let mut at = 0;
    for (span, kind, negated, in_brackets) in found {
        out.push_str(&pattern[at..span.start.offset]);
        at = span.end.offset;
        let body = match kind {
            ast::ClassPerlKind::Digit => "0-9",
            ast::ClassPerlKind::Word => "0-9A-Za-z_",
            ast::ClassPerlKind::Space => ECMASCRIPT_SPACE,
        };
        match (negated, in_brackets) {
            (false, true) => out.push_str(body),
            (false, false) => {
                out.push('[');
                out.push_str(body);
                out.push(']');
            }
            (true, _) => {
                out.push_str("[^");
                out.push_str(body);
                out.push(']');
            }
        }
    }
    out.push_str(&pattern[at..]);
    Some(out)
}

/// True when `ast` can only match the empty string (or nothing): no literal, class or dot.
/// Recursion depth is bounded by the parser's nest limit.
fn empty_only(ast: &Ast) -> bool {
    match ast {
        Ast::Empty(_) | Ast::Flags(_) | Ast::Assertion(_) => true,
        Ast::Literal(_)
        | Ast::Dot(_)
        | Ast::ClassUnicode(_)
        | Ast::ClassPerl(_)
        | Ast::ClassBracketed(_) => false,
        Ast::Repetition(r) => {
            matches!(
                r.op.kind,
                RepetitionKind::Range(RepetitionRange::Exactly(0))
            ) || matches!(
                r.op.kind,
                RepetitionKind::Range(RepetitionRange::Bounded(_, 0))
            ) || empty_only(&r.ast)
        }
        Ast::Group(g) => empty_only(&g.ast),
        Ast::Alternation(a) => a.asts.iter().all(empty_only),
        Ast::Concat(c) => c.asts.iter().all(empty_only),
    }
}

/// Refuses word boundaries, and anchors that are not trivially true for a whole-string
/// match: `^` where text may precede it (`at_start` false), `$` where text may follow.
/// Recursion depth is bounded by the parser's nest limit.
fn check_assertions(
    ast: &Ast,
    pattern: &str,
    at_start: bool,
    at_end: bool,
) -> Result<(), RegexError> {
    match ast {
        Ast::Assertion(a) => {
            let text = span_text(pattern, &a.span);
            let position = a.span.start.into();
            match a.kind {
                AssertionKind::StartLine | AssertionKind::StartText if !at_start => {
                    Err(RegexError::MisplacedAnchor {
                        text,
                        position,
                        reason: "a start anchor must come before any text that the regex \
                                 matches (a whole-string match)",
                    })
                }
                AssertionKind::EndLine | AssertionKind::EndText if !at_end => {
                    Err(RegexError::MisplacedAnchor {
                        text,
                        position,
                        reason: "an end anchor must come after any text that the regex \
                                 matches (a whole-string match)",
                    })
                }
                AssertionKind::StartLine
                | AssertionKind::StartText
                | AssertionKind::EndLine
                | AssertionKind::EndText => Ok(()),
                _ => Err(RegexError::WordBoundary { text, position }),
            }
        }
        Ast::Repetition(r) => {
            // A body that can repeat after consuming text is not at the start (or end)
            // on its later (earlier) iterations.
            let once = matches!(
                r.op.kind,
                RepetitionKind::ZeroOrOne
                    | RepetitionKind::Range(RepetitionRange::Exactly(0..=1))
                    | RepetitionKind::Range(RepetitionRange::Bounded(_, 0..=1))
            );
            let ok = once || empty_only(&r.ast);
            check_assertions(&r.ast, pattern, at_start && ok, at_end && ok)
        }
        Ast::Group(g) => check_assertions(&g.ast, pattern, at_start, at_end),
        Ast::Alternation(a) => a
            .asts
            .iter()
            .try_for_each(|b| check_assertions(b, pattern, at_start, at_end)),
        Ast::Concat(c) => {
            let empty: Vec<bool> = c.asts.iter().map(empty_only).collect();
            // suffix[i]: every part after i is empty-only.
            let mut suffix = vec![true; empty.len()];
            for i in (0..empty.len().saturating_sub(1)).rev() {
                suffix[i] = suffix[i + 1] && empty[i + 1];
            }
            let mut prefix = true;
            for (i, part) in c.asts.iter().enumerate() {
                check_assertions(part, pattern, at_start && prefix, at_end && suffix[i])?;
                prefix &= empty[i];
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The span of the first assertion (in pattern order) whose kind satisfies `pred`.
fn first_assertion(ast: &Ast, pred: &dyn Fn(&AssertionKind) -> bool) -> Option<ast::Span> {
    match ast {
        Ast::Assertion(a) if pred(&a.kind) => Some(a.span),
        Ast::Repetition(r) => first_assertion(&r.ast, pred),
        Ast::Group(g) => first_assertion(&g.ast, pred),
        Ast::Alternation(a) => a.asts.iter().find_map(|b| first_assertion(b, pred)),
        Ast::Concat(c) => c.asts.iter().find_map(|b| first_assertion(b, pred)),
        _ => None,
    }
}

/// Lowers a checked HIR (anchors already validated as trivially true, so they become ε).
/// Recursion depth is bounded by the parser's nest limit (the HIR is at most one level
/// deeper than the AST).
fn lower(h: &Hir) -> Result<Expr, RegexError> {
    Ok(match h.kind() {
        HirKind::Empty | HirKind::Look(_) => Expr::Empty,
        HirKind::Literal(lit) => {
            if lit.0.is_empty() {
                Expr::Empty
            } else {
                Expr::Bytes(lit.0.to_vec())
            }
        }
        HirKind::Class(Class::Unicode(c)) => Expr::Class(CharClass {
            negated: false,
            ranges: c
                .ranges()
                .iter()
                .map(|r| (r.start() as u32, r.end() as u32))
                .collect(),
        }),
        HirKind::Class(Class::Bytes(c)) => {
            // The translator's UTF-8 mode already refuses non-ASCII byte classes; this is a
            // second line of defence.
            if c.ranges().iter().any(|r| r.end() > 0x7F) {
                return Err(RegexError::NonUtf8 {
                    position: Position {
                        offset: 0,
                        line: 1,
                        column: 1,
                    },
                });
            }
            Expr::Class(CharClass {
                negated: false,
                ranges: c
                    .ranges()
                    .iter()
                    .map(|r| (r.start() as u32, r.end() as u32))
                    .collect(),
            })
        }
        HirKind::Repetition(r) => {
            let sub = lower(&r.sub)?;
            match (r.min, r.max) {
                (_, Some(0)) => Expr::Empty,
                (1, Some(1)) => sub,
                (min, max) => Expr::Repeat {
                    expr: Box::new(sub),
                    min,
                    max,
                },
            }
        }
        HirKind::Capture(c) => lower(&c.sub)?,
        HirKind::Concat(v) => {
            let parts: Vec<Expr> = v
                .iter()
                .map(lower)
                .filter(|e| !matches!(e, Ok(Expr::Empty)))
                .collect::<Result<_, _>>()?;
            match parts.len() {
                0 => Expr::Empty,
                1 => parts.into_iter().next().unwrap_or(Expr::Empty),
                _ => Expr::Seq(parts),
            }
        }
        HirKind::Alternation(v) => Expr::Choice(v.iter().map(lower).collect::<Result<_, _>>()?),
    })
}
