//! The stream's own reading of a call's arguments while they arrive (issue 23): after a
//! parse that ends inside an open call, the [`StreamingParser`](super::StreamingParser)
//! checks whether the call's argument text so far is a plain copy of the output's end, and
//! if so scans the following deltas itself, sending them as argument deltas without
//! handing the call to the format's parser again, until a byte that may end the arguments.
//!
//! Two shapes are resumed, found from the argument text and the output alone (no family
//! declares anything, so every family whose argument text has one of them is resumed):
//!
//! * **Verbatim**: the argument text is the output's last bytes (JSON families: the
//!   arguments object `{…` as written; pythonic: the keyword arguments `text='…'`), and
//!   the parse that gave it added to it every byte that arrived since the parse before
//!   (else a family that builds its argument text, XML parameters as JSON, could match
//!   by chance: GLM's `{` while `<arg_key>{` arrives). The
//!   scan keeps the lexer state (bracket depth, the quote of the string it is in, a pending
//!   backslash) and stops before a closing bracket that would close the arguments, and
//!   outside strings before any character that is not JSON (or Python keyword-argument)
//!   syntax, such as the `<` or `[` of a marker.
//! * **Escaped**: the argument text ends inside a JSON string whose decoded content is
//!   the output's last bytes, escaped as `serde_json` escapes (XML-style families stream a
//!   raw parameter value so), and the parse that gave it added to it at least what
//!   arrived since the parse before (trailing whitespace aside), all of it inside the
//!   value, escaped as written (else a value the parser keeps while the text after it
//!   may still be its own could match by chance: Qwen3-Coder's `<think>` while
//!   `</function><think>` arrives). Each new byte is sent escaped; the scan stops at a `<`
//!   followed by anything that may start a tag (`</parameter>`, `</arg_value>`, a DSML
//!   marker), and holds a `<` that ends the text until the next byte tells.
//!
//! Whitespace at the end of what arrived is held back in both (a parser's pending argument
//! text is trimmed, and XML values drop a newline before their end marker); the real
//! parse the stream runs once the scan stops sends it if it is the argument's. The checks
//! at entry cost one pass over the argument text, counted as parse work.

/// How the bytes after the resumed point become argument text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The argument text is the output itself, JSON syntax (`{…`).
    Json,
    /// The argument text is the output itself, Python keyword arguments (`name='…', n=2`).
    Python,
    /// The output is the content of a JSON string of the argument text, escaped.
    Escaped,
}

/// What the scan does with one character.
enum Step {
    /// It belongs to the arguments.
    Take,
    /// It may end them or not, depending on the next character, which has not arrived.
    Hold,
    /// It may end them: the format's parser reads from here.
    Stop,
}

/// The state of a resumed argument text (see the module notes).
#[derive(Clone, Debug)]
pub(super) struct Resume {
    mode: Mode,
    /// Bracket depth outside strings (the arguments object's own `{` counts 1).
    depth: u32,
    /// The quote of the string the scan is inside.
    quote: Option<char>,
    /// The previous character was a backslash inside a string.
    escape: bool,
    /// The previous character closed a string with this quote (a third quote in a row
    /// would open a Python triple-quoted string, which the scan leaves to the parser).
    closed: Option<char>,
    /// Where the string the scan is inside began (just after its quote), in the text
    /// scanned.
    string_start: usize,
    /// Offset in the output up to which the scan has read.
    scanned: usize,
    /// Offset in the output up to which argument text was sent.
    sent: usize,
    /// Offset in the output where the scan began.
    start: usize,
    /// Offset in the output where the content of the string the scan is in was first
    /// read by it (where the scan began, for a string open then, unless it began after
    /// a backslash: `usize::MAX`).
    run_start: usize,
    /// The longest string content the scan read whole, from `run_start` to its closing
    /// quote.
    longest: Option<std::ops::Range<usize>>,
}

impl Resume {
    /// The resumption of an open call whose argument text so far (as sent) is `args`, at
    /// the end of `text`, after a parse that added the last `added` bytes of `args` and
    /// was the first to see the text from `arrived_from` on; `None` when `args` is neither
    /// a copy of the end of `text` nor a JSON string holding it, when this parse did not
    /// make it so (it added to `args` nothing, or fewer bytes than arrived from
    /// `arrived_from` on but trailing whitespace; for a JSON string, fewer than what
    /// arrived takes escaped, or some of it arrived before the string's content), or when
    /// it holds syntax the scan leaves to the parser.
    pub(super) fn infer(text: &str, args: &str, arrived_from: usize, added: usize) -> Option<Self> {
        let end = text.trim_end().len();
        let first = args.chars().next()?;
        let lexed = |mode| {
            let mut r = Self {
                mode,
                depth: 0,
                quote: None,
                escape: false,
                closed: None,
                string_start: 0,
                scanned: end,
                sent: end,
                start: end,
                run_start: usize::MAX,
                longest: None,
            };
            let mut chars = args.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                let next = chars.peek().map(|&(_, n)| n);
                if !matches!(r.step(i, c, next), Step::Take) {
                    return None;
                }
            }
            // What the scan reads counts from here (the lexing was of the arguments).
            r.longest = None;
            r.run_start = if r.escape { usize::MAX } else { end };
            Some(r)
        };
        // A copy (or a value's text) only if this parse copied what arrived: a family that
        // builds its argument text (XML parameters as JSON) holds back text that may read
        // the same (`<arg_key>{` or a non-string `<arg_value>{` still arriving, with `{`
        // the arguments so far; a value `<think>` kept while `</function><think>` arrives,
        // the `</function>` maybe its text), and the scan would send what follows as
        // arguments. A parse that added nothing shows no copy, even when only whitespace
        // arrived.
        if added == 0 || end.saturating_sub(arrived_from) > added {
            return None;
        }
        if text[..end].ends_with(args) {
            let mode = if first == '{' {
                Mode::Json
            } else if first.is_ascii_alphabetic() || first == '_' {
                Mode::Python
            } else {
                return None;
            };
            return lexed(mode);
        }
        // Escaped: inside a JSON string whose content is the output's end.
        let r = lexed(Mode::Json).filter(|r| first == '{' && r.quote == Some('"') && !r.escape)?;
        let escaped = &args[r.string_start..];
        let content: String = serde_json::from_str(&format!("\"{escaped}\"")).ok()?;
        let last = content.chars().last()?;
        if last.is_whitespace() || !text[..end].ends_with(&content) || escape(&content) != escaped {
            return None;
        }
        // What arrived must lie in the value, and the value must have grown by it as
        // written in the arguments (escaped): `added` also counts the JSON around a new
        // value (`"key": "`) and escapes, which a chance match of markup that arrived
        // (`</function>ab` after a value `ab`) may equal byte for byte.
        let arrived = text.get(arrived_from.min(end)..end)?;
        if arrived_from < end - content.len() || escape(arrived).len() > added {
            return None;
        }
        // An unclosed `<` at the output's end may be a tag's start that the parser holds
        // back: the content then ends before it, and matching it against the output's end
        // would misplace the value (`<<tool_call>` read as `<tool_call>>`). The parser
        // reads on instead.
        if let Some(k) = text[..end].rfind('<') {
            if !text[k..end].contains('>') {
                return None;
            }
        }
        Some(Self {
            mode: Mode::Escaped,
            ..r
        })
    }

    /// Scans `text` from where the last scan stopped; returns the bytes of the output
    /// whose argument text is now to be sent ([`Self::render`] writes it) and, when the
    /// scan reached a character that may end the arguments, its offset (the format's
    /// parser reads on from the last parse; the stream drops this state).
    pub(super) fn advance(&mut self, text: &str) -> (std::ops::Range<usize>, Option<usize>) {
        let mut solid = self.sent;
        let mut stop = None;
        let mut at = self.scanned;
        while at < text.len() {
            // Inside a string (or an XML value), jump to the next byte that can change the
            // state: a quote or a backslash (`<` in a value). All are ASCII, so the jump
            // lands on a character boundary.
            if let Some(specials) = self.plain_run() {
                let rest = &text.as_bytes()[at..];
                let run = specials.find(rest).unwrap_or(rest.len());
                if run > 0 {
                    let span = &text[at..at + run];
                    let kept = span.trim_end().len();
                    if kept > 0 {
                        solid = at + kept;
                    }
                    at += run;
                    self.scanned = at;
                    continue;
                }
            }
            let mut chars = text[at..].chars();
            let Some(c) = chars.next() else { break };
            let next = chars.next();
            match self.step(at, c, next) {
                Step::Take => {
                    at += c.len_utf8();
                    self.scanned = at;
                    if !c.is_whitespace() {
                        solid = at;
                    }
                }
                Step::Hold => break,
                Step::Stop => {
                    stop = Some(at);
                    break;
                }
            }
        }
        let sent = self.sent..solid;
        self.sent = solid;
        (sent, stop)
    }

    /// [`Self::advance`] for a delta that stays inside the string or XML value the scan is
    /// in, starting at `from` (the end of what was scanned): in an XML value, a delta
    /// without `<`; in a JSON or Python string, one without its quote (backslashes are
    /// followed here). Whitespace at its end is held back as [`Self::advance`] holds it,
    /// when the last byte before it is ASCII. Returns the bytes of the output whose
    /// argument text is now to be sent ([`Plain::render`] writes it), or `None` where
    /// [`Self::advance`] must read the delta (the state is then unchanged). One pass over
    /// the delta's bytes (a table load each) and none over what came before it: the cost
    /// of a delta inside a long argument.
    #[inline]
    pub(super) fn advance_plain(&mut self, text: &str, from: usize) -> Option<Plain> {
        if self.scanned != from {
            return None;
        }
        let bytes = text.as_bytes();
        let delta = &bytes[from..];
        // The classes of the delta's bytes, or-ed: one load and one `or` a byte (eight
        // bytes tested at once as a `u64`, `Swar`, cost more here: five tests a chunk).
        let seen = delta
            .iter()
            .fold(0, |seen, &b| seen | CLASS[usize::from(b)]);
        let mut escape = self.escape;
        let escaped = match (self.mode, self.quote) {
            (Mode::Escaped, _) if seen & LT != 0 => return None,
            (Mode::Escaped, _) => seen & (DOUBLE | BACKSLASH | CONTROL) != 0,
            (_, Some(q)) => {
                let quote = if q == '"' { DOUBLE } else { SINGLE };
                if seen & quote == 0 && (seen & BACKSLASH != 0 || escape) {
                    // A backslash escapes the next byte, so what is pending after the
                    // delta is told by its trailing run of backslashes alone (no quote
                    // to stop): `k` of them flip the state `k` times, from "not
                    // escaped" after any other byte.
                    let k = delta.iter().rev().take_while(|&&b| b == b'\\').count();
                    escape = (k % 2 == 1) != (escape && k == delta.len());
                } else if seen & quote != 0 {
                    for &b in delta {
                        if escape {
                            escape = false;
                        } else if b == b'\\' {
                            escape = true;
                        } else if char::from(b) == q {
                            return None;
                        }
                    }
                }
                false
            }
            _ => return None,
        };
        // What is held back: the whitespace the output ends with (as `str::trim_end`
        // reads it), decided here only where the byte before it is ASCII.
        let solid = match *bytes.last()? {
            b'!'..=b'~' if self.sent == from => text.len(),
            _ => {
                let pending = &bytes[self.sent..];
                match pending.iter().rposition(|&b| !is_ascii_space(b)) {
                    Some(k) if pending[k].is_ascii() => self.sent + k + 1,
                    Some(_) => return None,
                    None => self.sent,
                }
            }
        };
        self.escape = escape;
        self.scanned = text.len();
        let plain = Plain {
            bytes: self.sent..solid,
            // Held whitespace sent now may hold a newline or a tab (a control byte; a
            // space, the common case, needs no escape).
            escaped: self.mode == Mode::Escaped
                && (escaped || bytes[self.sent..from].iter().any(|&b| b < 0x20)),
        };
        self.sent = solid;
        Some(plain)
    }

    /// Appends to `out` the argument text of `raw`, bytes of the output this scan read
    /// (a range [`Self::advance`] returned): the bytes themselves, or escaped as JSON
    /// string content; returns its length.
    pub(super) fn render(&self, raw: &str, out: &mut String) -> usize {
        let before = out.len();
        match self.mode {
            Mode::Escaped => escape_into(raw, out),
            Mode::Json | Mode::Python => out.push_str(raw),
        }
        out.len() - before
    }

    /// A bound on the length of the argument text of `raw` for an event's string (escapes
    /// beyond a few grow it).
    pub(super) fn rendered_len(&self, raw: &str) -> usize {
        match self.mode {
            Mode::Escaped => raw.len() + 16,
            Mode::Json | Mode::Python => raw.len(),
        }
    }

    /// The bytes that end a run of characters [`Self::step`] takes without a change of
    /// state (inside a string: its quote and a backslash; in an XML value: `<`), or `None`
    /// where every character counts.
    fn plain_run(&self) -> Option<Specials> {
        match (self.mode, self.quote) {
            (Mode::Escaped, _) => Some(Specials::One(b'<')),
            (_, Some(q)) if !self.escape => Some(Specials::Two(q as u8, b'\\')),
            _ => None,
        }
    }

    /// A run of text this scan read, once it stopped, of at least `min` bytes, that the
    /// format's parser reads as one string's content, so the stream may hand the parser
    /// the call without it (see `StreamingParser::parse_elided`): in an XML value, from
    /// where the scan began to its last character but trailing whitespace (every `<` in
    /// it was followed by a character that starts no tag; [`Elided::Escaped`]); in JSON
    /// arguments, the longest string content it read whole (from its opening quote or
    /// from where the scan began, to its closing quote: [`Elided::Json`], the content as
    /// written, escapes and all). `None` otherwise (Python arguments).
    pub(super) fn elidable(&self, min: usize) -> Option<(std::ops::Range<usize>, Elided)> {
        match (self.mode, &self.longest) {
            (Mode::Escaped, _) if self.sent >= self.start + min => {
                Some((self.start..self.sent, Elided::Escaped))
            }
            (Mode::Json, Some(run)) if run.len() >= min => Some((run.clone(), Elided::Json)),
            _ => None,
        }
    }

    /// Offset in the output up to which the scan has read.
    pub(super) fn scanned(&self) -> usize {
        self.scanned
    }

    /// One character of the argument text, at offset `at`; `next` is the one after it, if
    /// it arrived.
    fn step(&mut self, at: usize, c: char, next: Option<char>) -> Step {
        if self.mode == Mode::Escaped {
            return match (c, next) {
                ('<', None) => Step::Hold,
                ('<', Some(n)) if !(n.is_whitespace() || n.is_ascii_digit() || n == '=') => {
                    Step::Stop
                }
                _ => Step::Take,
            };
        }
        let closed = self.closed.take();
        if let Some(q) = self.quote {
            if self.escape {
                self.escape = false;
            } else if c == '\\' {
                self.escape = true;
            } else if c == q {
                self.quote = None;
                self.closed = Some(q);
                let run = self.run_start..at;
                if !run.is_empty() && !self.longest.as_ref().is_some_and(|l| l.len() >= run.len()) {
                    self.longest = Some(run);
                }
            }
            return Step::Take;
        }
        let python = self.mode == Mode::Python;
        match c {
            '"' | '\'' if c == '"' || python => {
                if closed == Some(c) {
                    return Step::Stop;
                }
                self.quote = Some(c);
                self.string_start = at + c.len_utf8();
                self.run_start = self.string_start;
            }
            '{' | '[' => self.depth += 1,
            '(' if python => self.depth += 1,
            '}' | ']' | ')' if c != ')' || python => {
                // The arguments' own closer (JSON: the object's `}`; Python: the call's `)`).
                if self.depth <= u32::from(!python) {
                    return Step::Stop;
                }
                self.depth -= 1;
            }
            c if c.is_whitespace() => {}
            ',' | ':' | '-' | '+' | '.' | '0'..='9' => {}
            c if python && (c.is_ascii_alphanumeric() || c == '_' || c == '=') => {}
            't' | 'r' | 'u' | 'e' | 'f' | 'a' | 'l' | 's' | 'n' | 'E' => {}
            _ => return Step::Stop,
        }
        Step::Take
    }
}

/// `s` escaped as the content of a JSON string, as `serde_json` writes it (`\"`, `\\`,
/// `\b \f \n \r \t`, other control characters as `\u00xx`; the rest raw).
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(s, &mut out);
    out
}

/// [`escape`] appended to `out`: runs of bytes needing no escape are copied whole, found
/// eight bytes at a time ([`next_escaped`]).
pub(super) fn escape_into(s: &str, out: &mut String) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len());
    let (mut raw, mut i) = (0, 0);
    loop {
        i = next_escaped(bytes, i);
        let Some(&b) = bytes.get(i) else { break };
        out.push_str(&s[raw..i]);
        i += 1;
        raw = i;
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            _ => "",
        };
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(short);
        }
    }
    out.push_str(&s[raw..]);
}

/// The offset of the first byte of `bytes` from `at` on that a JSON string escapes (`"`,
/// `\\`, a control character below 0x20), or `bytes.len()`: eight bytes are tested at
/// once as a `u64` ([`Swar`]), the last few a table lookup each ([`CLASS`]). The cost of
/// escaping or decoding a long run of prose, which holds few such bytes.
fn next_escaped(bytes: &[u8], mut at: usize) -> usize {
    while let Some(chunk) = bytes.get(at..at + 8) {
        let w = Swar::load(chunk);
        let hit = w.equal(b'"') | w.equal(b'\\') | w.below(0x20);
        if hit != 0 {
            return at + Swar::first(hit);
        }
        at += 8;
    }
    let rest = bytes.get(at..).unwrap_or_default();
    rest.iter()
        .position(|&b| CLASS[usize::from(b)] & (DOUBLE | BACKSLASH | CONTROL) != 0)
        .map_or(bytes.len(), |k| at + k)
}

/// Eight bytes as one little-endian `u64`, tested for byte values all at once (the
/// "has zero byte" tests of bit-twiddling folklore). Each test returns a mask with the
/// high bit of each byte found set; a borrow may set it also in bytes above one truly
/// found, so the lowest bit set ([`Swar::first`]) is exact, and so is "any".
#[derive(Clone, Copy)]
struct Swar(u64);

impl Swar {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;

    /// The first eight bytes of `chunk` (which holds at least eight).
    fn load(chunk: &[u8]) -> Self {
        let mut w = [0; 8];
        w.copy_from_slice(&chunk[..8]);
        Swar(u64::from_le_bytes(w))
    }

    /// The bytes equal to `b`.
    fn equal(self, b: u8) -> u64 {
        let x = self.0 ^ (Self::ONES * u64::from(b));
        x.wrapping_sub(Self::ONES) & !x & Self::HIGHS
    }

    /// The bytes below `n` (at most 0x80).
    fn below(self, n: u8) -> u64 {
        self.0.wrapping_sub(Self::ONES * u64::from(n)) & !self.0 & Self::HIGHS
    }

    /// The index of the lowest byte found in a mask these tests returned (not 0).
    fn first(mask: u64) -> usize {
        (mask.trailing_zeros() / 8) as usize
    }
}

/// The content of a JSON string as written (`s`, without its quotes) decoded, as
/// `serde_json` decodes it (RFC 8259 section 7: the two-character escapes, `\uXXXX`, a
/// surrogate pair in two); `None` where it is not valid string content (a quote or a
/// control character unescaped, a bad or cut escape, a lone surrogate). Runs without a
/// backslash are copied whole, found eight bytes at a time ([`next_escaped`]).
pub(super) fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let (mut raw, mut i) = (0, 0);
    let hex = |at: usize| -> Option<u32> {
        let h = s.get(at..at + 4)?;
        h.bytes()
            .all(|b| b.is_ascii_hexdigit())
            .then(|| u32::from_str_radix(h, 16).ok())?
    };
    loop {
        i = next_escaped(bytes, i);
        match bytes.get(i) {
            None => break,
            Some(b'\\') => {}
            Some(_) => return None,
        }
        out.push_str(&s[raw..i]);
        let c = match *bytes.get(i + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex(i + 2)?;
                if (0xD800..0xDC00).contains(&hi) {
                    if s.get(i + 6..i + 8) != Some("\\u") {
                        return None;
                    }
                    let lo = hex(i + 8).filter(|lo| (0xDC00..0xE000).contains(lo))?;
                    i += 6;
                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                } else {
                    char::from_u32(hi)?
                }
            }
            _ => return None,
        };
        out.push(c);
        i += if bytes[i + 1] == b'u' { 6 } else { 2 };
        raw = i;
    }
    out.push_str(&s[raw..]);
    Some(out)
}

/// How a run [`Resume::elidable`] found stands in the call's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Elided {
    /// Raw text of an XML value: escaped in the argument text, itself in the value.
    Escaped,
    /// JSON string content as written: itself in the argument text, decoded in the value.
    Json,
}

/// What [`Resume::advance_plain`] took: bytes of the output whose argument text is now to
/// be sent, and whether they need escaping as JSON string content.
pub(super) struct Plain {
    /// The bytes, an offset range in the output.
    pub(super) bytes: std::ops::Range<usize>,
    /// Some of them are escaped in the argument text (`"`, `\\`, control characters).
    escaped: bool,
}

impl Plain {
    /// Appends the argument text of these bytes of `text` (the output) to `out`; returns
    /// its length.
    #[inline]
    pub(super) fn render(&self, text: &str, out: &mut String) -> usize {
        let raw = &text[self.bytes.clone()];
        if self.escaped {
            let before = out.len();
            escape_into(raw, out);
            out.len() - before
        } else {
            out.push_str(raw);
            raw.len()
        }
    }
}

/// A byte class of [`CLASS`]: `<`.
const LT: u8 = 1;
/// A byte class of [`CLASS`]: `"`.
const DOUBLE: u8 = 2;
/// A byte class of [`CLASS`]: `'`.
const SINGLE: u8 = 4;
/// A byte class of [`CLASS`]: `\\`.
const BACKSLASH: u8 = 8;
/// A byte class of [`CLASS`]: a control character (below 0x20), escaped in a JSON string.
const CONTROL: u8 = 16;

/// The classes of each byte value ([`LT`], [`DOUBLE`], [`SINGLE`], [`BACKSLASH`],
/// [`CONTROL`]; 0 for the rest).
static CLASS: [u8; 256] = {
    let mut t = [0; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = CONTROL;
        b += 1;
    }
    t[b'<' as usize] = LT;
    t[b'"' as usize] = DOUBLE;
    t[b'\'' as usize] = SINGLE;
    t[b'\\' as usize] = BACKSLASH;
    t
};

/// The ASCII bytes `char::is_whitespace` (and so `str::trim_end`) reads as whitespace.
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t'..=b'\r')
}

/// One or two ASCII bytes to search for.
#[derive(Clone, Copy)]
enum Specials {
    One(u8),
    Two(u8, u8),
}

impl Specials {
    /// The index of the first of the bytes in `hay`.
    fn find(self, hay: &[u8]) -> Option<usize> {
        match self {
            Specials::One(a) => hay.iter().position(|&b| b == a),
            Specials::Two(a, c) => hay.iter().position(|&b| b == a || b == c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Resume;

    /// The fast path of a delta inside a long argument (`advance_plain`) takes the deltas
    /// of prose, which hold escapes (a newline in an XML value, `\\n` in a JSON string)
    /// and end in spaces, and leaves the scan where the general scan (`advance`) leaves it,
    /// sending the same bytes; a delta that may leave the value it declines, unchanged.
    #[test]
    fn the_fast_path_takes_prose_deltas_as_the_general_scan_does() {
        let cases: [(&str, &str, &[&str], &[&str]); 3] = [
            (
                "<parameter=text>\nhello",
                "{\"text\": \"hello",
                &[
                    " world\n",
                    "amet,\n",
                    "a\tb ",
                    " ",
                    "x\\y\"z",
                    "end  ",
                    "\u{e9} ok",
                ],
                &["a <b", "<"],
            ),
            (
                "<tool_call>{\"name\": \"f\", \"arguments\": {\"text\": \"hello",
                "{\"text\": \"hello",
                &[
                    " world\\n",
                    "a\\\"b ",
                    "x\\",
                    "\"y",
                    "z  ",
                    "\u{e9}.",
                    "\\u00e9",
                ],
                &["end\"}", "\""],
            ),
            (
                "[f(text='hello",
                "text='hello",
                &[" world\\n", "it\\'s ", "x\\", "'y", " \t", "z."],
                &["x')", "'"],
            ),
        ];
        for (start, args, taken, declined) in cases {
            let mut text = start.to_owned();
            // The parse that showed `args` added all of it, `hello` having arrived last.
            let from = text.len() - "hello".len();
            let mut r = Resume::infer(&text, args, from, args.len()).expect(args);
            for delta in taken {
                let from = text.len();
                text.push_str(delta);
                let mut general = r.clone();
                let (sent, stop) = general.advance(&text);
                assert_eq!(stop, None, "{args} {delta:?}");
                let plain = r.advance_plain(&text, from).map(|p| p.bytes);
                assert_eq!(plain, Some(sent), "{args} {delta:?}");
                assert_eq!(format!("{r:?}"), format!("{general:?}"), "{args} {delta:?}");
            }
            for delta in declined {
                let mut text = text.clone();
                let from = text.len();
                text.push_str(delta);
                let before = format!("{r:?}");
                let plain = r.advance_plain(&text, from).map(|p| p.bytes);
                assert_eq!(plain, None, "{args} {delta:?}");
                assert_eq!(format!("{r:?}"), before);
            }
        }
    }

    /// An argument text that ends the output is a copy only when the parse that gave it
    /// copied what arrived: GLM's `{` (no argument yet) while `<arg_key>{` arrives is not,
    /// nor after a delta of whitespace.
    #[test]
    fn a_copy_is_resumed_only_when_the_parse_copied_what_arrived() {
        let text = "<tool_call>get_weather\n<arg_key>{";
        let key_open = text.len() - 1;
        assert!(Resume::infer(text, "{", key_open, 0).is_none());
        assert!(Resume::infer(text, "{", 0, 1).is_none());
        // Then whitespace only: still nothing copied.
        let text = format!("{text}\n");
        assert!(Resume::infer(&text, "{", text.len(), 0).is_none());
        let text = "<tool_call>{\"name\": \"f\", \"arguments\": {";
        assert!(Resume::infer(text, "{", text.len() - 1, 1).is_some());
        // Whitespace the parse held back before counts as arrived before it.
        let text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1,\n \"b\"";
        let args = "{\"a\": 1,\n \"b\"";
        assert!(Resume::infer(text, args, text.len() - 3, 6).is_some());
    }

    /// A value's text that the output ends with is resumed only when the parse that gave
    /// it added what arrived: Qwen3-Coder's `<think>`, kept while `</function><think>`
    /// arrives (the `</function>` may still be the value's), is not, nor after a delta of
    /// whitespace.
    #[test]
    fn a_value_is_resumed_only_when_the_parse_added_what_arrived() {
        let args = "{\"city\": \"<think>";
        let text = "<function=get_time><parameter=city><think>";
        assert!(Resume::infer(text, args, text.len() - 1, 1).is_some());
        let text = "<function=get_time><parameter=city><think></function><think>";
        assert!(Resume::infer(text, args, text.len() - 1, 0).is_none());
        let text = format!("{text} ");
        assert!(Resume::infer(&text, args, text.len() - 1, 0).is_none());
        // The value grew by what arrived, held whitespace with it.
        let args = "{\"city\": \"New York";
        let text = "<function=get_weather><parameter=city>New York";
        assert!(Resume::infer(text, args, text.len() - 4, 5).is_some());
        assert!(Resume::infer(text, args, text.len() - 4, 3).is_none());
        // Markup that arrived with a chance match: a new value's JSON (`"description":
        // "ab`, 18 bytes) as long as what arrived (`on>ab</function>ab`), or escapes
        // (three U+0001, 18 bytes escaped, after `</function>`) longer than it.
        let text = "<function=get_time><parameter=description>ab</function>ab";
        let args = "{\"description\": \"ab";
        assert!(Resume::infer(text, args, text.len() - 18, 18).is_none());
        let text = "<function=f><parameter=p>\u{1}\u{1}\u{1}</function>\u{1}\u{1}\u{1}";
        let args = "{\"p\": \"\\u0001\\u0001\\u0001";
        assert!(Resume::infer(text, args, text.len() - 14, 18).is_none());
        // The value's own bytes, escaped, are what its growth is measured against.
        let text = "<function=f><parameter=p>\u{1}\u{1}";
        let args = "{\"p\": \"\\u0001\\u0001";
        assert!(Resume::infer(text, args, text.len() - 1, 6).is_some());
        assert!(Resume::infer(text, args, text.len() - 1, 1).is_none());
    }

    /// `unescape` decodes what `serde_json` decodes, and refuses what it refuses: every
    /// escape, surrogate pairs, raw multi-byte characters, and broken content.
    #[test]
    fn unescape_reads_json_string_content_as_serde_json_does() {
        let cases = [
            "plain é 😀 text",
            "a\\nb\\t\\\"q\\\" \\\\ \\/ \\b\\f\\r",
            "\\u00e9\\u0041\\ud83d\\ude00 end",
            "\\u2028",
            "bad \\x",
            "cut \\u00e",
            "lone \\ud83d x",
            "lone \\ude00",
            "raw \" quote",
            "raw \n newline",
            "ends \\",
        ];
        for case in cases {
            // At every offset in the eight-byte chunks `next_escaped` tests.
            for pad in 0..17 {
                let s = format!("{}{case}{}", "a".repeat(pad), "b".repeat(9));
                let serde = serde_json::from_str::<String>(&format!("\"{s}\"")).ok();
                assert_eq!(super::unescape(&s), serde, "{s:?}");
            }
        }
    }

    /// The escape of every ASCII character, at every position among runs and multi-byte
    /// characters, is `serde_json`'s.
    #[test]
    fn escape_writes_what_serde_json_writes_at_every_position() {
        for c in (0u8..0x80).map(char::from).chain(['é', '😀', '\u{2028}']) {
            for pad in 0..17 {
                let s = format!("{}{c}é{}", "a".repeat(pad), "b".repeat(9));
                let json = serde_json::to_string(&s).unwrap();
                assert_eq!(super::escape(&s), json[1..json.len() - 1], "{s:?}");
            }
        }
    }
}
