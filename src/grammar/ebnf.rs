//! The EBNF front end: XGrammar's EBNF dialect and llama.cpp's GBNF, parsed into the
//! [`Grammar`] IR.
//!
//! # Syntax
//!
//! ```text
//! # a comment runs to the end of the line
//! root   ::= "{" ws pair ("," ws pair)* "}" <|im_end|>
//! pair   ::= key ws ":" ws [0-9]+
//! key    ::= "\"" [^"\\\x00-\x1F]{1,64} "\""
//! ws     ::= | [ \t\n]+          # an empty alternative matches the empty string
//! ```
//!
//! * A rule is `name ::= expr`. Rules may span several lines: a new rule starts where
//!   `identifier ::=` appears. Names match `[A-Za-z_][A-Za-z0-9_\-.]*`. Rules may be used
//!   before they are defined and may be recursive; an empty body matches the empty string.
//! * String literals `"..."` with the escapes below; `""` is [`Expr::Empty`], any other
//!   literal is [`Expr::Bytes`] holding its UTF-8. A raw line break inside a literal is an
//!   error (write `\n`).
//! * Character classes `[a-z\u00e9_]`, `[^"\\]`: single characters and inclusive ranges,
//!   negated by a leading `^`; escapes as below (plus `\]`, `\-`, `\^`, `\[`). A `-` first or
//!   last in the class is literal. `[]` matches nothing and `[^]` any code point. Ranges may
//!   name surrogates through escapes (they are removed by [`CharClass::normalized`]).
//! * `.` matches any code point (an extension: XGrammar has no `.`); it is the class `[^]`.
//! * Token terminals: `<[151645]>` is [`TokenRef::Id`]; any other `<...>` on one line, such as
//!   `<|im_end|>` or `<think>`, is [`TokenRef::Text`] holding the text with its angle brackets.
//! * Postfix operators `*` `+` `?` `{m}` `{m,}` `{m,n}` `{,n}` (bounds at most
//!   [`MAX_REPEAT_BOUND`]); they may be stacked (`"a"*?`) and may follow whitespace.
//! * Groups `( ... )`, alternation `|` (empty alternatives allowed, as GBNF uses them), and
//!   juxtaposition for sequences.
//! * XGrammar's lookahead assertion `(= ...)` is accepted at the very end of a rule body and
//!   ignored: the IR has no lookahead, and in XGrammar it only helps performance when the
//!   assertion is implied by the grammar, which is the common use.
//!
//! Escapes (in strings and classes) denote code points: `\n \t \r \\ \" \' \? \/ \a \b \f \v
//! \0 \e`, `\xNN` (exactly 2 hex digits, as in GBNF; XGrammar reads any number), `\uNNNN`,
//! `\UNNNNNNNN`. A code point above U+10FFFF is an error; a surrogate is an error in a string
//! literal (it has no UTF-8 encoding) but allowed in a class.
//!
//! # Normal form
//!
//! The parser builds the IR without simplification, so that
//! [`Grammar`'s `Display`](Grammar) prints text that parses back to an equal grammar:
//!
//! * a sequence of one item is that item, of zero items is [`Expr::Empty`];
//! * an alternation of one alternative is that alternative;
//! * `( ... )` adds no node: it returns its content unchanged, so `("a" "b") "c"` is a `Seq`
//!   whose first item is a `Seq`, while `"a" "b" "c"` is one flat `Seq`;
//! * every literal, class, reference and postfix operator is kept as written (`"a" "b"` is two
//!   `Bytes` items, `"a" ""` keeps its `Empty`).
//!
//! # Limits
//!
//! The parser keeps open groups on an explicit stack, so nesting depth of parentheses cannot
//! overflow the call stack. The *resulting* expression tree is limited to
//! [`MAX_NESTING_DEPTH`] levels (redundant parentheses such as `((("a")))` add none), so that
//! every recursive consumer of the IR (the derived `Drop`, `Clone`, `PartialEq`, `Debug` and
//! later compilation passes) stays within a small stack. The parser never panics.

use rustc_hash::FxHashMap;

use super::ir::{CharClass, Expr, Grammar, Rule, RuleId, TokenRef};

/// The largest repetition bound accepted in `{m,n}`; larger bounds are an
/// [`EbnfErrorKind::RepeatTooLarge`] error.
pub const MAX_REPEAT_BOUND: u32 = 1_000_000;

/// The deepest expression tree the parser builds (a leaf has depth 1; a sequence,
/// alternation or repetition is one deeper than its deepest child). Deeper nesting is an
/// [`EbnfErrorKind::TooDeep`] error.
pub const MAX_NESTING_DEPTH: usize = 1_000;

/// An error from [`parse_ebnf`]: what went wrong and where.
///
/// Displays as `line:column: message`, for example
/// `3:14: expected \`::=\` after rule name \`foo\``. Lines and columns are 1-based; columns
/// count characters (Unicode scalar values), not bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {kind}")]
pub struct EbnfError {
    line: usize,
    column: usize,
    kind: EbnfErrorKind,
}

impl EbnfError {
    /// The 1-based line of the error.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The 1-based column of the error, in characters.
    pub fn column(&self) -> usize {
        self.column
    }

    /// What went wrong.
    pub fn kind(&self) -> &EbnfErrorKind {
        &self.kind
    }
}

/// The kinds of [`EbnfError`]; each message says what was found and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EbnfErrorKind {
    /// The source has no rule definitions (it is empty or holds only comments). Reported at
    /// 1:1.
    #[error("the grammar has no rules: expected a rule definition `name ::= ...`")]
    EmptyGrammar,
    /// A rule definition must start with a rule name.
    #[error("expected a rule name at the start of a rule definition, found {found}")]
    ExpectedRuleName {
        /// What was found instead (quoted, or `end of input`).
        found: String,
    },
    /// A rule name not followed by `::=`. Reported where `::=` was expected.
    #[error("expected `::=` after rule name `{name}`, found {found}")]
    ExpectedDefine {
        /// The rule name.
        name: String,
        /// What was found instead.
        found: String,
    },
    /// A character that cannot start an expression and does not end one.
    #[error("expected an expression, `|`, `)` or a new rule, found {found}")]
    UnexpectedChar {
        /// What was found (quoted).
        found: String,
    },
    /// A postfix operator with nothing before it, as in `a ::= * "x"` or `("x" | +)`.
    #[error("`{op}` must follow an expression (a string, class, rule name or group); to match the character itself, quote it")]
    NothingToRepeat {
        /// The operator: `*`, `+`, `?` or `{`.
        op: char,
    },
    /// A `(` without its `)`. Reported at the `(`.
    #[error("unclosed `(`: expected `)` before {found}")]
    UnclosedGroup {
        /// Where the group ran out: `end of input` or the next rule's definition.
        found: String,
    },
    /// A `)` without a matching `(`.
    #[error("unmatched `)`: remove it or add the `(` it closes")]
    UnmatchedParen,
    /// A lookahead assertion `(= ...)` that is nested in a group or followed by more of the
    /// rule body.
    #[error("a lookahead assertion `(= ...)` must come last in a rule body, outside any group")]
    MisplacedLookahead,
    /// A string literal without its closing `"` on the same line. Reported at the opening `"`.
    #[error("unterminated string literal: expected `\"` before the end of the line")]
    UnterminatedString,
    /// A character class without its closing `]` on the same line. Reported at the `[`.
    #[error("unterminated character class: expected `]` before the end of the line")]
    UnterminatedClass,
    /// A token terminal `<...` without its `>` on the same line. Reported at the `<`.
    #[error("unterminated token terminal: expected `>` before the end of the line")]
    UnterminatedToken,
    /// `<>`: a token terminal with no text.
    #[error("empty token terminal `<>`: write a special token's text, as `<|im_end|>`, or its id, as `<[128009]>`")]
    EmptyToken,
    /// `<[...]>` whose content is not a decimal `u32`.
    #[error("invalid token id in `{text}`: expected a decimal number below 2^32")]
    InvalidTokenId {
        /// The whole terminal as written.
        text: String,
    },
    /// An unknown escape such as `\q`.
    #[error("invalid escape sequence `{escape}` (known: `\\n` `\\t` `\\r` `\\a` `\\b` `\\f` `\\v` `\\e` `\\0` `\\xHH` `\\uHHHH` `\\UHHHHHHHH` and `\\` before one of `\\ \" ' ? / [ ] - ^`; write `\\\\` for a backslash)")]
    InvalidEscape {
        /// The escape as written.
        escape: String,
    },
    /// `\x`, `\u` or `\U` without exactly 2, 4 or 8 hex digits.
    #[error("escape `{escape}` needs exactly {digits} hex digits (pad with leading zeros, as `\\x0A`, `\\u00E9`)")]
    BadHexEscape {
        /// The escape as written, up to the first non-hex character.
        escape: String,
        /// How many digits it needs.
        digits: usize,
    },
    /// An escaped code point above U+10FFFF, or a surrogate in a string literal.
    #[error("escape denotes U+{code:04X}, which {why}: write a Unicode scalar value (up to U+10FFFF, not a surrogate)")]
    InvalidCodePoint {
        /// The code point.
        code: u32,
        /// Why it is rejected.
        why: &'static str,
    },
    /// A class range whose end is below its start, as in `[z-a]`. Reported at the range.
    #[error("character range U+{low:04X}-U+{high:04X} is reversed (end < start): write the smaller end first")]
    ReversedRange {
        /// The start as written.
        low: u32,
        /// The end as written.
        high: u32,
    },
    /// Malformed repetition bounds, as in `{}`, `{a}` or `{1,2`.
    #[error("malformed repetition bounds: expected {expected}, found {found}")]
    BadRepeatSyntax {
        /// What was expected.
        expected: &'static str,
        /// What was found.
        found: String,
    },
    /// `{m,n}` with `n < m`.
    #[error("repetition {{{min},{max}}} has max < min: write `{{min,max}}` with min <= max")]
    BadRepeat {
        /// The lower bound.
        min: u32,
        /// The upper bound.
        max: u32,
    },
    /// A repetition bound above [`MAX_REPEAT_BOUND`].
    #[error("repetition bound {value} exceeds the limit {limit}: use `*` or `+` for an unbounded repetition")]
    RepeatTooLarge {
        /// The bound as written.
        value: String,
        /// [`MAX_REPEAT_BOUND`].
        limit: u32,
    },
    /// An expression tree deeper than [`MAX_NESTING_DEPTH`].
    #[error("expression nested more than {limit} levels deep: split it into rules or remove redundant groups")]
    TooDeep {
        /// [`MAX_NESTING_DEPTH`].
        limit: usize,
    },
    /// A second definition of a rule. Reported at the second definition's name.
    #[error("rule `{name}` is defined twice (first definition at {first_line}:{first_column}): rename one, or join the bodies with `|`")]
    DuplicateRule {
        /// The rule name.
        name: String,
        /// Line of the first definition.
        first_line: usize,
        /// Column of the first definition.
        first_column: usize,
    },
    /// A reference to a rule that is never defined. Reported at the first reference.
    #[error("undefined rule `{name}`: define it (`{name} ::= ...`) or correct the name")]
    UndefinedRule {
        /// The rule name.
        name: String,
    },
    /// The requested root rule is not defined. Reported at 1:1.
    #[error("root rule `{name}` is not defined: define it, or name the grammar's start rule as the root (`compile_grammar_with_root`, `--root`)")]
    MissingRoot {
        /// The requested root name.
        name: String,
    },
    /// More rules than [`RuleId::LIMIT`].
    #[error("too many rules (the limit is {limit}): merge rules")]
    TooManyRules {
        /// [`RuleId::LIMIT`].
        limit: usize,
    },
}

/// Parses an EBNF/GBNF grammar (see the [module docs](self) for the syntax) whose root rule is
/// named `root` (usually `"root"`).
///
/// The result is in the parser's normal form (module docs), its rules in definition order,
/// and it passes [`Grammar::validate`].
///
/// # Errors
/// An [`EbnfError`] with the line and column of the first problem: a syntax error, an invalid
/// escape or range, bad repetition bounds, an expression deeper than [`MAX_NESTING_DEPTH`], a
/// duplicate rule, a reference to an undefined rule, no rules at all, or no rule named
/// `root`.
pub fn parse_ebnf(src: &str, root: &str) -> Result<Grammar, EbnfError> {
    Parser::new(src).grammar(root).map_err(|e| {
        let (line, column) = line_col(src, e.at);
        EbnfError {
            line,
            column,
            kind: e.kind,
        }
    })
}

/// An error located by byte offset; converted to line and column at the end.
struct PErr {
    at: usize,
    kind: EbnfErrorKind,
}

type PResult<T> = Result<T, PErr>;

fn err<T>(at: usize, kind: EbnfErrorKind) -> PResult<T> {
    Err(PErr { at, kind })
}

/// 1-based line and character column of byte offset `off` in `src`.
fn line_col(src: &str, off: usize) -> (usize, usize) {
    let mut off = off.min(src.len());
    while !src.is_char_boundary(off) {
        off -= 1;
    }
    let before = &src[..off];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// An expression under construction with the depth of its tree.
struct Node {
    expr: Expr,
    depth: usize,
}

impl Node {
    fn leaf(expr: Expr) -> Node {
        Node { expr, depth: 1 }
    }
}

/// An open group (or the rule body itself): finished alternatives and the current sequence.
struct Frame {
    /// Byte offset of the `(` (or of the rule name for the body).
    open: usize,
    alts: Vec<Node>,
    items: Vec<Node>,
    lookahead: bool,
}

impl Frame {
    fn new(open: usize, lookahead: bool) -> Frame {
        Frame {
            open,
            alts: Vec::new(),
            items: Vec::new(),
            lookahead,
        }
    }

    /// Closes the current sequence and starts a new alternative.
    fn end_alt(&mut self) -> PResult<()> {
        let items = std::mem::take(&mut self.items);
        let node = compound(items, Expr::Seq, Expr::Empty, self.open)?;
        self.alts.push(node);
        Ok(())
    }

    /// The group's expression.
    fn finish(mut self) -> PResult<Node> {
        self.end_alt()?;
        // `alts` is never empty here, so the `Empty` fallback is unused.
        compound(self.alts, Expr::Choice, Expr::Empty, self.open)
    }
}

/// Zero parts give `empty`, one part is returned as is, more are wrapped by `wrap`.
fn compound(
    mut parts: Vec<Node>,
    wrap: fn(Vec<Expr>) -> Expr,
    empty: Expr,
    at: usize,
) -> PResult<Node> {
    match parts.len() {
        0 => Ok(Node::leaf(empty)),
        1 => Ok(parts.pop().unwrap_or(Node::leaf(Expr::Empty))),
        _ => {
            let depth = 1 + parts.iter().map(|n| n.depth).max().unwrap_or(0);
            if depth > MAX_NESTING_DEPTH {
                return err(
                    at,
                    EbnfErrorKind::TooDeep {
                        limit: MAX_NESTING_DEPTH,
                    },
                );
            }
            Ok(Node {
                expr: wrap(parts.into_iter().map(|n| n.expr).collect()),
                depth,
            })
        }
    }
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Where string, class and token scanning stop: a line break.
fn is_line_break(c: char) -> bool {
    c == '\n' || c == '\r'
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    /// Interned rule references: name → placeholder index.
    ref_ids: FxHashMap<&'a str, u32>,
    /// Placeholder index → (name, byte offset of the first reference).
    refs: Vec<(&'a str, usize)>,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Parser<'a> {
        let pos = if src.starts_with('\u{FEFF}') { 3 } else { 0 };
        Parser {
            src,
            pos,
            ref_ids: FxHashMap::default(),
            refs: Vec::new(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + ahead).copied()
    }

    fn peek_char(&self) -> Option<char> {
        self.src.get(self.pos..).and_then(|s| s.chars().next())
    }

    fn bump_char(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// A description of what is at `pos`, for error messages.
    fn found(&self) -> String {
        match self.peek_char() {
            None => "end of input".to_string(),
            Some(c) if c.is_control() || c.is_whitespace() => format!("{c:?}"),
            Some(c) => format!("`{c}`"),
        }
    }

    /// Skips whitespace and `#` comments.
    fn skip_ws(&mut self) {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b'#' => {
                    let rest = &self.src.as_bytes()[self.pos..];
                    self.pos += rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                }
                _ => break,
            }
        }
    }

    /// Reads an identifier at `pos` (the caller checked its first byte).
    fn ident(&mut self) -> &'a str {
        let start = self.pos;
        self.pos += 1;
        while self.peek().is_some_and(is_ident_continue) {
            self.pos += 1;
        }
        &self.src[start..self.pos]
    }

    fn at_define(&self) -> bool {
        self.src.as_bytes()[self.pos..].starts_with(b"::=")
    }

    /// Whether an identifier followed by `::=` starts at `pos` (a new rule definition).
    fn at_rule_start(&mut self) -> bool {
        if !self.peek().is_some_and(is_ident_start) {
            return false;
        }
        let save = self.pos;
        self.ident();
        self.skip_ws();
        let yes = self.at_define();
        self.pos = save;
        yes
    }

    fn grammar(mut self, root: &str) -> PResult<Grammar> {
        let mut rules: Vec<Rule> = Vec::new();
        let mut defined: FxHashMap<&'a str, (u32, usize)> = FxHashMap::default();
        loop {
            self.skip_ws();
            let Some(b) = self.peek() else { break };
            let name_at = self.pos;
            if !is_ident_start(b) {
                return err(
                    name_at,
                    EbnfErrorKind::ExpectedRuleName {
                        found: self.found(),
                    },
                );
            }
            let name = self.ident();
            self.skip_ws();
            if !self.at_define() {
                return err(
                    self.pos,
                    EbnfErrorKind::ExpectedDefine {
                        name: name.to_string(),
                        found: self.found(),
                    },
                );
            }
            self.pos += 3;
            if let Some(&(_, first)) = defined.get(name) {
                let (first_line, first_column) = line_col(self.src, first);
                return err(
                    name_at,
                    EbnfErrorKind::DuplicateRule {
                        name: name.to_string(),
                        first_line,
                        first_column,
                    },
                );
            }
            if rules.len() >= RuleId::LIMIT {
                return err(
                    name_at,
                    EbnfErrorKind::TooManyRules {
                        limit: RuleId::LIMIT,
                    },
                );
            }
            let body = self.body(name_at)?;
            defined.insert(name, (rules.len() as u32, name_at));
            rules.push(Rule {
                name: name.to_string(),
                body,
            });
        }
        if rules.is_empty() {
            return err(0, EbnfErrorKind::EmptyGrammar);
        }
        // Resolve references; the first undefined one in source order is reported.
        let mut map = Vec::with_capacity(self.refs.len());
        for &(name, at) in &self.refs {
            match defined.get(name) {
                Some(&(id, _)) => map.push(RuleId(id)),
                None => {
                    return err(
                        at,
                        EbnfErrorKind::UndefinedRule {
                            name: name.to_string(),
                        },
                    )
                }
            }
        }
        let Some(&(root_id, _)) = defined.get(root) else {
            return err(
                0,
                EbnfErrorKind::MissingRoot {
                    name: root.to_string(),
                },
            );
        };
        for rule in &mut rules {
            let mut stack = vec![&mut rule.body];
            while let Some(e) = stack.pop() {
                match e {
                    Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter_mut()),
                    Expr::Repeat { expr, .. } => stack.push(expr),
                    Expr::Rule(id) => *id = map[id.index()],
                    _ => {}
                }
            }
        }
        Ok(Grammar {
            rules,
            root: RuleId(root_id),
        })
    }

    /// Parses a rule body up to the next rule definition or the end of input.
    fn body(&mut self, rule_at: usize) -> PResult<Expr> {
        let mut stack = vec![Frame::new(rule_at, false)];
        let mut after_lookahead = false;
        loop {
            self.skip_ws();
            let at = self.pos;
            let Some(b) = self.peek() else { break };
            if self.at_rule_start() {
                break;
            }
            if after_lookahead {
                return err(at, EbnfErrorKind::MisplacedLookahead);
            }
            let depth = stack.len();
            let Some(top) = stack.last_mut() else { break };
            match b {
                b'(' => {
                    self.pos += 1;
                    let lookahead = self.peek() == Some(b'=');
                    if lookahead {
                        if depth > 1 {
                            return err(at, EbnfErrorKind::MisplacedLookahead);
                        }
                        self.pos += 1;
                    }
                    stack.push(Frame::new(at, lookahead));
                }
                b')' => {
                    if depth == 1 {
                        return err(at, EbnfErrorKind::UnmatchedParen);
                    }
                    self.pos += 1;
                    let Some(frame) = stack.pop() else { break };
                    let lookahead = frame.lookahead;
                    let node = frame.finish()?;
                    if lookahead {
                        after_lookahead = true;
                    } else if let Some(top) = stack.last_mut() {
                        top.items.push(node);
                    }
                }
                b'|' => {
                    self.pos += 1;
                    top.end_alt()?;
                }
                b'*' | b'+' | b'?' | b'{' => {
                    let Some(last) = top.items.pop() else {
                        return err(at, EbnfErrorKind::NothingToRepeat { op: b as char });
                    };
                    let (min, max) = self.postfix()?;
                    let node = Node {
                        depth: last.depth + 1,
                        expr: Expr::Repeat {
                            expr: Box::new(last.expr),
                            min,
                            max,
                        },
                    };
                    if node.depth > MAX_NESTING_DEPTH {
                        return err(
                            at,
                            EbnfErrorKind::TooDeep {
                                limit: MAX_NESTING_DEPTH,
                            },
                        );
                    }
                    top.items.push(node);
                }
                b'"' => {
                    let e = self.string()?;
                    top.items.push(Node::leaf(e));
                }
                b'[' => {
                    let class = self.class()?;
                    top.items.push(Node::leaf(Expr::Class(class)));
                }
                b'.' => {
                    self.pos += 1;
                    top.items.push(Node::leaf(Expr::Class(CharClass {
                        negated: true,
                        ranges: Vec::new(),
                    })));
                }
                b'<' => {
                    let t = self.token()?;
                    top.items.push(Node::leaf(Expr::Token(t)));
                }
                b if is_ident_start(b) => {
                    let name = self.ident();
                    let next = self.refs.len() as u32;
                    let id = *self.ref_ids.entry(name).or_insert(next);
                    if id == next {
                        self.refs.push((name, at));
                    }
                    top.items.push(Node::leaf(Expr::Rule(RuleId(id))));
                }
                _ => {
                    return err(
                        at,
                        EbnfErrorKind::UnexpectedChar {
                            found: self.found(),
                        },
                    )
                }
            }
        }
        if stack.len() > 1 {
            let open = stack.last().map_or(rule_at, |f| f.open);
            let found = if self.peek().is_some() {
                "the next rule definition".to_string()
            } else {
                "end of input".to_string()
            };
            return err(open, EbnfErrorKind::UnclosedGroup { found });
        }
        match stack.pop() {
            Some(frame) => Ok(frame.finish()?.expr),
            None => Ok(Expr::Empty),
        }
    }

    /// Parses a postfix operator at `pos` into `(min, max)`.
    fn postfix(&mut self) -> PResult<(u32, Option<u32>)> {
        let at = self.pos;
        let op = self.peek();
        self.pos += 1;
        match op {
            Some(b'*') => return Ok((0, None)),
            Some(b'+') => return Ok((1, None)),
            Some(b'?') => return Ok((0, Some(1))),
            _ => {}
        }
        // `{`
        self.skip_ws();
        let (min, max);
        if self.peek() == Some(b',') {
            self.pos += 1;
            self.skip_ws();
            min = 0;
            max = Some(self.bound("a number after `{,`")?);
        } else {
            min = self.bound("a number after `{`")?;
            self.skip_ws();
            match self.peek() {
                Some(b'}') => max = Some(min),
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                    max = if self.peek() == Some(b'}') {
                        None
                    } else {
                        Some(self.bound("a number or `}` after `,`")?)
                    };
                }
                _ => {
                    return err(
                        self.pos,
                        EbnfErrorKind::BadRepeatSyntax {
                            expected: "`,` or `}`",
                            found: self.found(),
                        },
                    )
                }
            }
        }
        self.skip_ws();
        if self.peek() != Some(b'}') {
            return err(
                self.pos,
                EbnfErrorKind::BadRepeatSyntax {
                    expected: "`}`",
                    found: self.found(),
                },
            );
        }
        self.pos += 1;
        if let Some(max) = max {
            if max < min {
                return err(at, EbnfErrorKind::BadRepeat { min, max });
            }
        }
        Ok((min, max))
    }

    /// A decimal repetition bound.
    fn bound(&mut self, expected: &'static str) -> PResult<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits = &self.src[start..self.pos];
        if digits.is_empty() {
            return err(
                start,
                EbnfErrorKind::BadRepeatSyntax {
                    expected,
                    found: self.found(),
                },
            );
        }
        match digits.parse::<u32>() {
            Ok(v) if v <= MAX_REPEAT_BOUND => Ok(v),
            _ => err(
                start,
                EbnfErrorKind::RepeatTooLarge {
                    value: digits.to_string(),
                    limit: MAX_REPEAT_BOUND,
                },
            ),
        }
    }

    /// An escape sequence at `pos` (which holds `\`), as a code point `<= 0x10FFFF`.
    /// `unterminated` is the error for a `\` at the end of the line.
    fn escape(&mut self, unterminated: (usize, EbnfErrorKind)) -> PResult<u32> {
        let at = self.pos;
        self.pos += 1;
        let Some(c) = self.peek_char().filter(|&c| !is_line_break(c)) else {
            return err(unterminated.0, unterminated.1);
        };
        self.pos += c.len_utf8();
        let simple = match c {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'f' => Some('\x0C'),
            'v' => Some('\x0B'),
            'e' => Some('\x1B'),
            '0' => Some('\0'),
            '\\' | '"' | '\'' | '?' | '/' | '[' | ']' | '-' | '^' => Some(c),
            _ => None,
        };
        if let Some(s) = simple {
            return Ok(s as u32);
        }
        let digits = match c {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => {
                return err(
                    at,
                    EbnfErrorKind::InvalidEscape {
                        escape: format!("\\{c}"),
                    },
                )
            }
        };
        let mut code: u32 = 0;
        for _ in 0..digits {
            match self.peek().and_then(|b| (b as char).to_digit(16)) {
                Some(d) => {
                    code = (code << 4) | d;
                    self.pos += 1;
                }
                None => {
                    return err(
                        at,
                        EbnfErrorKind::BadHexEscape {
                            escape: self.src[at..self.pos].to_string(),
                            digits,
                        },
                    )
                }
            }
        }
        if code > 0x10FFFF {
            return err(
                at,
                EbnfErrorKind::InvalidCodePoint {
                    code,
                    why: "is above U+10FFFF",
                },
            );
        }
        Ok(code)
    }

    /// A string literal at `pos` (which holds `"`).
    fn string(&mut self) -> PResult<Expr> {
        let start = self.pos;
        self.pos += 1;
        let mut s = String::new();
        loop {
            match self.peek_char() {
                None => return err(start, EbnfErrorKind::UnterminatedString),
                Some(c) if is_line_break(c) => {
                    return err(start, EbnfErrorKind::UnterminatedString)
                }
                Some('"') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    let at = self.pos;
                    let code = self.escape((start, EbnfErrorKind::UnterminatedString))?;
                    match char::from_u32(code) {
                        Some(c) => s.push(c),
                        None => {
                            return err(
                                at,
                                EbnfErrorKind::InvalidCodePoint {
                                    code,
                                    why: "is a surrogate, which has no UTF-8 encoding",
                                },
                            )
                        }
                    }
                }
                Some(c) => {
                    self.pos += c.len_utf8();
                    s.push(c);
                }
            }
        }
        Ok(if s.is_empty() {
            Expr::Empty
        } else {
            Expr::Bytes(s.into_bytes())
        })
    }

    /// One character of a class, raw or escaped.
    fn class_char(&mut self, start: usize) -> PResult<u32> {
        match self.peek_char() {
            Some('\\') => self.escape((start, EbnfErrorKind::UnterminatedClass)),
            Some(c) if !is_line_break(c) => {
                self.pos += c.len_utf8();
                Ok(c as u32)
            }
            _ => err(start, EbnfErrorKind::UnterminatedClass),
        }
    }

    /// A character class at `pos` (which holds `[`).
    fn class(&mut self) -> PResult<CharClass> {
        let start = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            if self.peek() == Some(b']') {
                self.pos += 1;
                break;
            }
            let item_at = self.pos;
            let low = self.class_char(start)?;
            let high = if self.peek() == Some(b'-') && !matches!(self.peek_at(1), Some(b']') | None)
            {
                self.pos += 1;
                let high = self.class_char(start)?;
                if high < low {
                    return err(item_at, EbnfErrorKind::ReversedRange { low, high });
                }
                high
            } else {
                low
            };
            ranges.push((low, high));
        }
        Ok(CharClass { negated, ranges })
    }

    /// A token terminal at `pos` (which holds `<`).
    fn token(&mut self) -> PResult<TokenRef> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.bump_char() {
                Some('>') => break,
                Some(c) if !is_line_break(c) => {}
                _ => return err(start, EbnfErrorKind::UnterminatedToken),
            }
        }
        let text = &self.src[start..self.pos];
        let inner = &text[1..text.len() - 1];
        if inner.is_empty() {
            return err(start, EbnfErrorKind::EmptyToken);
        }
        if let Some(id) = inner.strip_prefix('[') {
            let parsed = id
                .strip_suffix(']')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u32>().ok());
            return match parsed {
                Some(id) => Ok(TokenRef::Id(id)),
                None => err(
                    start,
                    EbnfErrorKind::InvalidTokenId {
                        text: text.to_string(),
                    },
                ),
            };
        }
        Ok(TokenRef::Text(text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(src: &str) -> Grammar {
        match parse_ebnf(src, "root") {
            Ok(g) => {
                g.validate().expect("parsed grammar validates");
                g
            }
            Err(e) => panic!("parse failed: {e}\n{src}"),
        }
    }

    fn body(src: &str) -> Expr {
        let g = p(src);
        g.rules[g.root.index()].body.clone()
    }

    fn e(src: &str) -> (usize, usize, EbnfErrorKind, String) {
        match parse_ebnf(src, "root") {
            Ok(g) => panic!("expected an error, got {g:?}"),
            Err(e) => (e.line(), e.column(), e.kind().clone(), e.to_string()),
        }
    }

    fn b(s: &str) -> Expr {
        Expr::Bytes(s.as_bytes().to_vec())
    }

    fn r(i: u32) -> Expr {
        Expr::Rule(RuleId(i))
    }

    fn class(negated: bool, ranges: &[(u32, u32)]) -> Expr {
        Expr::Class(CharClass {
            negated,
            ranges: ranges.to_vec(),
        })
    }

    fn rep(x: Expr, min: u32, max: Option<u32>) -> Expr {
        Expr::Repeat {
            expr: Box::new(x),
            min,
            max,
        }
    }

    #[test]
    fn basic_shapes() {
        assert_eq!(body(r#"root ::= "a""#), b("a"));
        assert_eq!(body(r#"root ::= """#), Expr::Empty);
        assert_eq!(body("root ::= ()"), Expr::Empty);
        assert_eq!(body("root ::="), Expr::Empty);
        assert_eq!(
            body(r#"root ::= "a" "b" | "c""#),
            Expr::Choice(vec![Expr::Seq(vec![b("a"), b("b")]), b("c")])
        );
        // Groups add no node; a parenthesized Seq inside a Seq stays nested.
        assert_eq!(body(r#"root ::= ((("a")))"#), b("a"));
        assert_eq!(
            body(r#"root ::= ("a" "b") "c""#),
            Expr::Seq(vec![Expr::Seq(vec![b("a"), b("b")]), b("c")])
        );
        assert_eq!(
            body(r#"root ::= ("a" | "b") | "c""#),
            Expr::Choice(vec![Expr::Choice(vec![b("a"), b("b")]), b("c")])
        );
        assert_eq!(
            body(r#"root ::= "a" "" "b""#),
            Expr::Seq(vec![b("a"), Expr::Empty, b("b")])
        );
        // Empty alternatives (GBNF).
        assert_eq!(
            body(r#"root ::= | "a" |"#),
            Expr::Choice(vec![Expr::Empty, b("a"), Expr::Empty])
        );
    }

    #[test]
    fn postfix_operators() {
        assert_eq!(body(r#"root ::= "a"*"#), rep(b("a"), 0, None));
        assert_eq!(body(r#"root ::= "a"+"#), rep(b("a"), 1, None));
        assert_eq!(body(r#"root ::= "a"?"#), rep(b("a"), 0, Some(1)));
        assert_eq!(body(r#"root ::= "a"{3}"#), rep(b("a"), 3, Some(3)));
        assert_eq!(body(r#"root ::= "a"{3,}"#), rep(b("a"), 3, None));
        assert_eq!(body(r#"root ::= "a"{ 2 , 5 }"#), rep(b("a"), 2, Some(5)));
        assert_eq!(body(r#"root ::= "a"{,5}"#), rep(b("a"), 0, Some(5)));
        assert_eq!(body(r#"root ::= "a"{0,0}"#), rep(b("a"), 0, Some(0)));
        assert_eq!(
            body(r#"root ::= "a"{1000000}"#),
            rep(b("a"), 1_000_000, Some(1_000_000))
        );
        assert_eq!(body(r#"root ::= "a" *"#), rep(b("a"), 0, None));
        assert_eq!(
            body(r#"root ::= "a"*?"#),
            rep(rep(b("a"), 0, None), 0, Some(1))
        );
        assert_eq!(
            body(r#"root ::= "x" ("a" "b")+"#),
            Expr::Seq(vec![b("x"), rep(Expr::Seq(vec![b("a"), b("b")]), 1, None)])
        );
        assert_eq!(body(r#"root ::= ""*"#), rep(Expr::Empty, 0, None));
    }

    #[test]
    fn every_escape() {
        let cases: &[(&str, &str)] = &[
            (r"\n", "\n"),
            (r"\t", "\t"),
            (r"\r", "\r"),
            (r"\\", "\\"),
            (r#"\""#, "\""),
            (r"\'", "'"),
            (r"\?", "?"),
            (r"\/", "/"),
            (r"\a", "\x07"),
            (r"\b", "\x08"),
            (r"\f", "\x0C"),
            (r"\v", "\x0B"),
            (r"\e", "\x1B"),
            (r"\0", "\0"),
            (r"\[", "["),
            (r"\]", "]"),
            (r"\-", "-"),
            (r"\^", "^"),
            (r"\x41", "A"),
            (r"\x4a", "J"),
            (r"\xe9", "\u{e9}"),
            (r"\xFF", "\u{ff}"),
            (r"\u00e9", "\u{e9}"),
            (r"\u4E2D", "中"),
            (r"\U0001F600", "\u{1F600}"),
            (r"\U0010FFFF", "\u{10FFFF}"),
            (r"\x414", "A4"),
        ];
        for (esc, want) in cases {
            assert_eq!(body(&format!("root ::= \"{esc}\"")), b(want), "{esc}");
            let cps: Vec<u32> = want.chars().map(|c| c as u32).collect();
            if cps.len() == 1 {
                assert_eq!(
                    body(&format!("root ::= [{esc}]")),
                    class(false, &[(cps[0], cps[0])]),
                    "{esc}"
                );
            }
        }
        // Unicode stays UTF-8.
        assert_eq!(body("root ::= \"héllo 世界 😀\""), b("héllo 世界 😀"));
        assert_eq!(body(r##"root ::= "#""##), b("#"));
    }

    #[test]
    fn classes() {
        assert_eq!(
            body("root ::= [a-z\\u00e9]"),
            class(false, &[(97, 122), (0xe9, 0xe9)])
        );
        assert_eq!(
            body(r#"root ::= [^"\\]"#),
            class(true, &[(34, 34), (92, 92)])
        );
        assert_eq!(body("root ::= [-a]"), class(false, &[(45, 45), (97, 97)]));
        assert_eq!(body("root ::= [a-]"), class(false, &[(97, 97), (45, 45)]));
        assert_eq!(body("root ::= [a^]"), class(false, &[(97, 97), (94, 94)]));
        assert_eq!(
            body(r"root ::= [\]\-\^]"),
            class(false, &[(93, 93), (45, 45), (94, 94)])
        );
        assert_eq!(body(r"root ::= [\--\]]"), class(false, &[(45, 93)]));
        assert_eq!(body("root ::= []"), class(false, &[]));
        assert_eq!(body("root ::= [^]"), class(true, &[]));
        assert_eq!(body("root ::= ."), class(true, &[]));
        assert_eq!(body("root ::= [#]"), class(false, &[(35, 35)]));
        assert_eq!(body("root ::= [é-ü]"), class(false, &[(0xe9, 0xfc)]));
        // Surrogates are allowed in classes (normalized() drops them).
        assert_eq!(
            body(r"root ::= [\uD800-\uDFFF]"),
            class(false, &[(0xD800, 0xDFFF)])
        );
    }

    #[test]
    fn tokens() {
        assert_eq!(
            body("root ::= <|im_end|>"),
            Expr::Token(TokenRef::Text("<|im_end|>".into()))
        );
        assert_eq!(
            body("root ::= <[151645]>"),
            Expr::Token(TokenRef::Id(151645))
        );
        assert_eq!(
            body("root ::= <think> \"x\" </think>"),
            Expr::Seq(vec![
                Expr::Token(TokenRef::Text("<think>".into())),
                b("x"),
                Expr::Token(TokenRef::Text("</think>".into())),
            ])
        );
        assert_eq!(
            body("root ::= <｜tool▁call▁begin｜>"),
            Expr::Token(TokenRef::Text("<｜tool▁call▁begin｜>".into()))
        );
        assert_eq!(
            body("root ::= <[4294967295]>"),
            Expr::Token(TokenRef::Id(u32::MAX))
        );
    }

    #[test]
    fn rules_names_and_layout() {
        let g = p("# header\nroot ::= a-b c.d _e # trailing\n  | \"x\"\n\
                   a-b ::= \"1\"\n   c.d\n ::= \"2\"\n_e ::= root");
        assert_eq!(
            g.rules.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["root", "a-b", "c.d", "_e"]
        );
        assert_eq!(
            g.rules[0].body,
            Expr::Choice(vec![Expr::Seq(vec![r(1), r(2), r(3)]), b("x")])
        );
        assert_eq!(g.rules[3].body, r(0));
        // Root anywhere; other root names.
        let g = parse_ebnf("a ::= start\nstart ::= \"s\"", "start").unwrap();
        assert_eq!(g.root, RuleId(1));
        // Multi-line bodies, CRLF line endings, a BOM.
        let g = p("\u{FEFF}root ::= (\r\n  \"a\"\r\n  | \"b\"\r\n)\r\n");
        assert_eq!(g.rules[0].body, Expr::Choice(vec![b("a"), b("b")]));
        // Empty rule followed by a rule.
        let g = p("root ::= a\na ::=\nb ::= \"x\"");
        assert_eq!(g.rules[1].body, Expr::Empty);
    }

    #[test]
    fn lookahead_is_accepted_and_ignored() {
        let g = p("root ::= a \"x\"\na ::= [0-9]+ (= [ \\n]* \"x\")\n");
        assert_eq!(g.rules[1].body, rep(class(false, &[(48, 57)]), 1, None));
        let (l, c, k, _) = e("root ::= \"a\" (= \"b\") \"c\"");
        assert_eq!((l, c, k), (1, 22, EbnfErrorKind::MisplacedLookahead));
        let (l, c, k, _) = e("root ::= (\"a\" (= \"b\"))");
        assert_eq!((l, c, k), (1, 15, EbnfErrorKind::MisplacedLookahead));
    }

    #[test]
    fn error_messages() {
        let (l, c, k, m) = e("");
        assert_eq!((l, c, k), (1, 1, EbnfErrorKind::EmptyGrammar));
        assert!(m.starts_with("1:1: the grammar has no rules"), "{m}");
        let (l, c, k, _) = e("  # only a comment\n\n");
        assert_eq!((l, c, k), (1, 1, EbnfErrorKind::EmptyGrammar));

        // A body runs on until `name ::=`, so this only happens for the first rule.
        let (l, c, k, m) = e("# c\nfoo \"b\"");
        assert_eq!((l, c), (2, 5));
        assert!(matches!(k, EbnfErrorKind::ExpectedDefine { ref name, .. } if name == "foo"));
        assert_eq!(m, "2:5: expected `::=` after rule name `foo`, found `\"`");

        let (l, c, k, m) = e("\n  = x");
        assert_eq!((l, c), (2, 3));
        assert!(matches!(k, EbnfErrorKind::ExpectedRuleName { .. }));
        assert_eq!(
            m,
            "2:3: expected a rule name at the start of a rule definition, found `=`"
        );

        let (l, c, k, m) = e("root ::= \"abc");
        assert_eq!((l, c, k), (1, 10, EbnfErrorKind::UnterminatedString));
        assert_eq!(
            m,
            "1:10: unterminated string literal: expected `\"` before the end of the line"
        );
        let (l, c, k, _) = e("root ::= \"ab\nc\"");
        assert_eq!((l, c, k), (1, 10, EbnfErrorKind::UnterminatedString));
        let (l, c, k, _) = e("root ::= \"ab\\");
        assert_eq!((l, c, k), (1, 10, EbnfErrorKind::UnterminatedString));

        let (l, c, k, _) = e("root ::=\n  \"é\" [a-z");
        assert_eq!((l, c, k), (2, 7, EbnfErrorKind::UnterminatedClass));
        let (l, c, k, _) = e("root ::= [a\\");
        assert_eq!((l, c, k), (1, 10, EbnfErrorKind::UnterminatedClass));

        let (l, c, k, _) = e("root ::= <|im_end|");
        assert_eq!((l, c, k), (1, 10, EbnfErrorKind::UnterminatedToken));
        let (l, c, k, m) = e("root ::= <>");
        assert_eq!((l, c, k), (1, 10, EbnfErrorKind::EmptyToken));
        assert!(m.starts_with("1:10: empty token terminal `<>`"), "{m}");
        for bad in ["<[abc]>", "<[]>", "<[4294967296]>", "<[12>", "<[-1]>"] {
            let (l, c, k, _) = e(&format!("root ::= {bad}"));
            assert_eq!(
                (l, c, k),
                (
                    1,
                    10,
                    EbnfErrorKind::InvalidTokenId {
                        text: bad.to_string()
                    }
                )
            );
        }

        let (l, c, k, m) = e("root ::= \"a\\qb\"");
        assert_eq!((l, c), (1, 12));
        assert_eq!(
            k,
            EbnfErrorKind::InvalidEscape {
                escape: "\\q".into()
            }
        );
        assert!(m.starts_with("1:12: invalid escape sequence `\\q`"), "{m}");
        let (l, c, k, m) = e("root ::= [\\x4]");
        assert_eq!((l, c), (1, 11));
        assert_eq!(
            k,
            EbnfErrorKind::BadHexEscape {
                escape: "\\x4".into(),
                digits: 2
            }
        );
        assert!(
            m.starts_with("1:11: escape `\\x4` needs exactly 2 hex digits"),
            "{m}"
        );
        let (_, _, k, _) = e("root ::= \"\\u12\"");
        assert!(matches!(k, EbnfErrorKind::BadHexEscape { digits: 4, .. }));
        let (_, _, k, _) = e("root ::= \"\\U0001F6\"");
        assert!(matches!(k, EbnfErrorKind::BadHexEscape { digits: 8, .. }));

        let (l, c, k, m) = e("root ::= \"\\U00110000\"");
        assert_eq!((l, c), (1, 11));
        assert!(matches!(
            k,
            EbnfErrorKind::InvalidCodePoint { code: 0x110000, .. }
        ));
        assert!(
            m.starts_with("1:11: escape denotes U+110000, which is above U+10FFFF"),
            "{m}"
        );
        let (l, c, k, m) = e("root ::= \"x\\uD800\"");
        assert_eq!((l, c), (1, 12));
        assert!(matches!(
            k,
            EbnfErrorKind::InvalidCodePoint { code: 0xD800, .. }
        ));
        assert!(
            m.starts_with(
                "1:12: escape denotes U+D800, which is a surrogate, which has no UTF-8 encoding"
            ),
            "{m}"
        );
        let (_, _, k, _) = e("root ::= [\\U00110000]");
        assert!(matches!(
            k,
            EbnfErrorKind::InvalidCodePoint { code: 0x110000, .. }
        ));

        let (l, c, k, m) = e("root ::= [a-cz-a]");
        assert_eq!((l, c), (1, 14));
        assert_eq!(k, EbnfErrorKind::ReversedRange { low: 122, high: 97 });
        assert!(
            m.starts_with("1:14: character range U+007A-U+0061 is reversed (end < start)"),
            "{m}"
        );

        let (l, c, k, m) = e("root ::= \"a\"{5,2}");
        assert_eq!(
            (l, c, k),
            (1, 13, EbnfErrorKind::BadRepeat { min: 5, max: 2 })
        );
        assert!(m.starts_with("1:13: repetition {5,2} has max < min"), "{m}");
        let (l, c, k, m) = e("root ::= \"a\"{1000001}");
        assert_eq!((l, c), (1, 14));
        assert_eq!(
            k,
            EbnfErrorKind::RepeatTooLarge {
                value: "1000001".into(),
                limit: MAX_REPEAT_BOUND
            }
        );
        assert!(
            m.starts_with("1:14: repetition bound 1000001 exceeds the limit 1000000"),
            "{m}"
        );
        let (_, _, k, _) = e("root ::= \"a\"{2,99999999999999999999999}");
        assert!(matches!(k, EbnfErrorKind::RepeatTooLarge { .. }));
        for (src, col, expected) in [
            ("root ::= \"a\"{}", 14, "a number after `{`"),
            ("root ::= \"a\"{x}", 14, "a number after `{`"),
            ("root ::= \"a\"{,}", 15, "a number after `{,`"),
            ("root ::= \"a\"{1,x}", 16, "a number or `}` after `,`"),
            ("root ::= \"a\"{1 2}", 16, "`,` or `}`"),
            ("root ::= \"a\"{1,2", 17, "`}`"),
        ] {
            let (l, c, k, _) = e(src);
            assert_eq!((l, c), (1, col), "{src}");
            assert!(
                matches!(k, EbnfErrorKind::BadRepeatSyntax { expected: x, .. } if x == expected),
                "{src}: {k:?}"
            );
        }
        let (_, _, _, m) = e("root ::= \"a\"{1,2");
        assert_eq!(
            m,
            "1:17: malformed repetition bounds: expected `}`, found end of input"
        );

        let (l, c, k, m) = e("root ::= * \"a\"");
        assert_eq!(
            (l, c, k),
            (1, 10, EbnfErrorKind::NothingToRepeat { op: '*' })
        );
        assert!(m.starts_with("1:10: `*` must follow an expression"), "{m}");
        let (l, c, k, _) = e("root ::= \"a\" | {2}");
        assert_eq!(
            (l, c, k),
            (1, 16, EbnfErrorKind::NothingToRepeat { op: '{' })
        );
        let (l, c, k, _) = e("root ::= (+)");
        assert_eq!(
            (l, c, k),
            (1, 11, EbnfErrorKind::NothingToRepeat { op: '+' })
        );

        let (l, c, k, m) = e("root ::= (\"a\"\n  | \"b\"\nfoo ::= \"c\"");
        assert_eq!((l, c), (1, 10));
        assert_eq!(
            k,
            EbnfErrorKind::UnclosedGroup {
                found: "the next rule definition".into()
            }
        );
        assert_eq!(
            m,
            "1:10: unclosed `(`: expected `)` before the next rule definition"
        );
        let (l, c, k, _) = e("root ::= ((\"a\") (\"b\"");
        assert_eq!(
            (l, c, k),
            (
                1,
                17,
                EbnfErrorKind::UnclosedGroup {
                    found: "end of input".into()
                }
            )
        );
        let (l, c, k, m) = e("root ::= \"a\" )");
        assert_eq!((l, c, k), (1, 14, EbnfErrorKind::UnmatchedParen));
        assert!(m.starts_with("1:14: unmatched `)`"), "{m}");

        let (l, c, k, m) = e("root ::= \"a\" ; \"b\"");
        assert_eq!((l, c), (1, 14));
        assert_eq!(
            m,
            "1:14: expected an expression, `|`, `)` or a new rule, found `;`"
        );
        assert!(matches!(k, EbnfErrorKind::UnexpectedChar { .. }));
        let (l, c, _, m) = e("root ::= \"a\" ::= \"b\"");
        assert_eq!((l, c), (1, 14));
        assert!(m.ends_with("found `:`"), "{m}");
        let (_, _, _, m) = e("root ::= \"é\" \u{1}");
        assert!(m.ends_with("found '\\u{1}'"), "{m}");

        let (l, c, k, m) = e("root ::= a\n\na ::= \"x\"\n  a ::= \"y\"");
        assert_eq!((l, c), (4, 3));
        assert_eq!(
            k,
            EbnfErrorKind::DuplicateRule {
                name: "a".into(),
                first_line: 3,
                first_column: 1
            }
        );
        assert!(
            m.starts_with("4:3: rule `a` is defined twice (first definition at 3:1)"),
            "{m}"
        );

        let (l, c, k, m) = e("root ::= a b\na ::= \"x\" bar\nb ::= bar");
        assert_eq!((l, c), (2, 11));
        assert_eq!(k, EbnfErrorKind::UndefinedRule { name: "bar".into() });
        assert!(m.starts_with("2:11: undefined rule `bar`"), "{m}");

        let err = parse_ebnf("start ::= \"x\"", "root").unwrap_err();
        assert_eq!((err.line(), err.column()), (1, 1));
        assert_eq!(
            err.kind(),
            &EbnfErrorKind::MissingRoot {
                name: "root".into()
            }
        );
        assert!(
            err.to_string()
                .starts_with("1:1: root rule `root` is not defined: define it"),
            "{err}"
        );
    }

    #[test]
    fn columns_count_characters() {
        let (l, c, k, _) = e("root ::= \"ééé\" \"😀\" ?? ;");
        assert_eq!((l, c), (1, 23));
        assert!(matches!(k, EbnfErrorKind::UnexpectedChar { .. }));
    }

    use crate::grammar::builtin::reference::accepts;

    fn check(src: &str, good: &[&str], bad: &[&str]) {
        let g = p(src);
        let printed = g.to_string();
        assert_eq!(parse_ebnf(&printed, "root").unwrap(), g, "{printed}");
        for s in good {
            assert!(accepts(&g, s), "should accept {s:?}");
        }
        for s in bad {
            assert!(!accepts(&g, s), "should reject {s:?}");
        }
    }

    #[test]
    fn gbnf_arithmetic() {
        check(
            r#"# Arithmetic expressions, one equation per line (GBNF style).
root    ::= (equation "\n")+
equation ::= sum ws "=" ws sum
sum     ::= product (ws [+\-] ws product)*
product ::= factor (ws [*/] ws factor)*
factor  ::= number | name | "(" ws sum ws ")" | "-" factor
number  ::= [0-9]+ ("." [0-9]+)?
name    ::= [a-z] [a-z0-9_]*
ws      ::= [ \t]*
"#,
            &["1 + 2 = 3\n", "x*(y - 2.5) = -z / 4\n", "a=b\nc = (d)\n"],
            &["1 + = 3\n", "1 = 2", "(1 = 2\n", "1 + 2\n"],
        );
    }

    #[test]
    fn gbnf_json() {
        // llama.cpp's json.gbnf shape: empty first alternative of ws, bounded indentation.
        check(
            r#"root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
"#,
            &[
                "{}",
                "{\"a\": [1, 2.5, -3e4, true, null], \"b\": {\"c\": \"\\u00e9\"}}",
                "{\n  \"k\": \"v\"\n}",
            ],
            &["[]", "{\"a\": 01x}", "{\"a\": 1,}", "{\"a\": \"\u{7f}\"}"],
        );
    }

    #[test]
    fn gbnf_list_and_chess() {
        check(
            r#"root ::= entry+
# Anything but line breaks, including the Unicode ones.
entry ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
"#,
            &["- milk\n- eggs 🥚\n"],
            &["- \n", "milk\n", "- a\u{2028}b\n"],
        );
        check(
            r#"# Chess games in algebraic notation.
root ::= (
  "1. " turn "\n"
  ([1-9] [0-9]? ". " turn "\n")+
)
turn ::= move " " move
move ::= (pawn | piece | castle) [+#]?
pawn ::= ([a-h] "x")? [a-h] [1-8] ("=" [QRBN])?
piece ::= [KQRBN] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle ::= "O-O" "-O"?
"#,
            &[
                "1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6\n",
                "1. d4 d5\n2. c4 dxc4\n10. O-O O-O-O+\n11. exd8=Q# Kxd8\n",
            ],
            &["1. e4 e5\n", "1. e9 e5\n2. d4 d5\n", "1. e4\n2. d4 d5\n"],
        );
    }

    #[test]
    fn xgrammar_style() {
        check(
            r#"root ::= basic_object
basic_object ::= "{" ws ( basic_string ws ":" ws basic_any ( ws "," ws basic_string ws ":" ws basic_any )* )? ws "}"
basic_any ::= basic_number | basic_string | basic_boolean | basic_null | basic_object
basic_integer ::= ("0" | "-"? [1-9] [0-9]*) ".0"?
basic_number ::= ("0" | "-"? [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
basic_string ::= ["] basic_string_1
basic_string_1 ::= "\"" | [^"\\\x00-\x1F] basic_string_1 | "\\" escape basic_string_1
escape ::= ["\\/bfnrt] | "u" [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9]
basic_boolean ::= "true" | "false"
basic_null ::= "null"
ws ::= [ \n\t]*
"#,
            &["{}", "{\"a\": {\"b\": -1.5e3}, \"c\": null}"],
            &["{\"a\"}", "{\"a\": 01}"],
        );
        // Lookahead assertions, \U escapes, token terminals, tags.
        let g = p(r#"
root ::= <think> thought </think> answer <|im_end|>
thought ::= [^<]* (= "</")
answer ::= "The answer is " [0-9]+ "." [\U0001F600-\U0001F64F]?
"#);
        assert_eq!(
            g.rules[0].body,
            Expr::Seq(vec![
                Expr::Token(TokenRef::Text("<think>".into())),
                r(1),
                Expr::Token(TokenRef::Text("</think>".into())),
                r(2),
                Expr::Token(TokenRef::Text("<|im_end|>".into())),
            ])
        );
        assert_eq!(g.rules[1].body, rep(class(true, &[(60, 60)]), 0, None));
        let printed = g.to_string();
        assert_eq!(parse_ebnf(&printed, "root").unwrap(), g);
    }

    fn nested(depth: usize, open: &str, inner: &str, close: &str) -> String {
        let mut s = String::from("root ::= ");
        for _ in 0..depth {
            s.push_str(open);
        }
        s.push_str(inner);
        for _ in 0..depth {
            s.push_str(close);
        }
        s
    }

    #[test]
    fn deep_nesting_never_overflows() {
        // Redundant parentheses add no depth: 60,000 of them parse to one literal.
        let g = p(&nested(60_000, "(", "\"a\"", ")"));
        assert_eq!(g.rules[0].body, b("a"));
        drop(g);
        // A tree deeper than the limit is an error, not a stack overflow.
        let (l, c, k, _) = e(&nested(60_000, "(\"a\" ", "\"a\"", ")"));
        assert_eq!(
            k,
            EbnfErrorKind::TooDeep {
                limit: MAX_NESTING_DEPTH
            }
        );
        assert_eq!(l, 1);
        assert!(c > 10);
        let (_, _, k, _) = e(&nested(60_000, "(", "\"a\"", ")*"));
        assert_eq!(
            k,
            EbnfErrorKind::TooDeep {
                limit: MAX_NESTING_DEPTH
            }
        );
        let (_, _, k, _) = e(&nested(60_000, "(\"a\" | ", "\"a\"", ")"));
        assert_eq!(
            k,
            EbnfErrorKind::TooDeep {
                limit: MAX_NESTING_DEPTH
            }
        );
        let (_, _, k, _) = e(&format!("root ::= \"a\"{}", "*".repeat(60_000)));
        assert_eq!(
            k,
            EbnfErrorKind::TooDeep {
                limit: MAX_NESTING_DEPTH
            }
        );
        // Unclosed: an error at the innermost `(`.
        let (l, c, k, _) = e(&nested(60_000, "(", "", ""));
        assert!(matches!(k, EbnfErrorKind::UnclosedGroup { .. }));
        assert_eq!((l, c), (1, 10 + 59_999));
        // Up to the limit parses (and drops) fine.
        let g = p(&nested(MAX_NESTING_DEPTH - 1, "(\"a\" ", "\"a\"", ")"));
        let g2 = g.clone();
        assert_eq!(g, g2);
    }

    #[test]
    fn never_panics_on_odd_input() {
        let inputs = [
            "root",
            "root ::",
            "root ::= <",
            "root ::= [",
            "root ::= [^",
            "root ::= \"\\",
            "root ::= [a-",
            "root ::= [a-\\",
            "root ::= {",
            "root ::= \"a\"{",
            "root ::= \"a\"{1,",
            "root ::= (=",
            "root ::= (= \"a\"",
            "root ::= )",
            "::=",
            "root ::= é",
            "é ::= \"a\"",
            "root ::= \"a\"\u{0}",
            "root ::= <[",
            "root ::= <[1",
            "root ::= <[1]",
            "\u{FEFF}",
            "\u{FEFF}\u{FEFF}",
            "root ::= a",
            "root ::= #",
            "root ::= \"\\x\"",
            "root ::= \"\\u\"",
            "root ::= [\\U]",
            "root ::= -",
            "root ::= 1",
            "root ::= \"a\"{4294967296}",
        ];
        for src in inputs {
            let _ = parse_ebnf(src, "root");
        }
        // Every prefix of a grammar with all constructs.
        let full =
            "root ::= (\"a\\n\" | [^\\]é-ü] <|x|> <[7]> .)* x{2,3} # c\nx ::= \"ü\"+ (= \"y\")";
        for (i, _) in full.char_indices() {
            let _ = parse_ebnf(&full[..i], "root");
        }
        assert!(parse_ebnf(full, "root").is_ok());
    }
}
