//! The pythonic family's reader: Python literals and calls (`name(arg=value, …)`) read
//! from a prefix of the output, and where a call starts.

#[allow(unused_imports)]
use super::*;

/// Why reading stopped.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The text ended (more may come).
    Eof,
    /// Not what the format allows.
    Bad(String),
}

/// A reader of Python literals and calls over `text` from `i`.
pub(crate) struct Py<'a> {
    pub(super) s: &'a str,
    pub(super) b: &'a [u8],
    pub(crate) i: usize,
}

impl<'a> Py<'a> {
    pub(crate) fn new(s: &'a str, i: usize) -> Self {
        Self {
            s,
            b: s.as_bytes(),
            i,
        }
    }

    pub(crate) fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    pub(crate) fn peek(&self) -> Result<u8, Stop> {
        self.b.get(self.i).copied().ok_or(Stop::Eof)
    }

    pub(crate) fn ident(&mut self) -> Result<&'a str, Stop> {
        let start = self.i;
        while self.i < self.b.len()
            && (self.b[self.i].is_ascii_alphanumeric() || self.b[self.i] == b'_')
        {
            self.i += 1;
        }
        if self.i == self.b.len() {
            return Err(Stop::Eof);
        }
        if self.i == start || self.b[start].is_ascii_digit() {
            return Err(Stop::Bad(format!("expected a name at byte {start}")));
        }
        Ok(&self.s[start..self.i])
    }

    /// A dotted name (spaces allowed around the dots, as Python does).
    pub(crate) fn dotted(&mut self) -> Result<String, Stop> {
        let mut name = self.ident()?.to_owned();
        loop {
            let save = self.i;
            self.ws();
            if self.peek()? != b'.' {
                self.i = save;
                return Ok(name);
            }
            self.i += 1;
            self.ws();
            name.push('.');
            name.push_str(self.ident()?);
        }
    }

    /// Reads the items of a list or dict (`what`) from its opening bracket at `self.i` to
    /// its `close`ing one (past it), one `item` after another, separated by commas (a
    /// trailing comma allowed, as in Python).
    fn items(
        &mut self,
        close: u8,
        what: &str,
        mut item: impl FnMut(&mut Self) -> Result<(), Stop>,
    ) -> Result<(), Stop> {
        self.i += 1;
        loop {
            self.ws();
            if self.peek()? == close {
                self.i += 1;
                return Ok(());
            }
            item(self)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                c if c == close => {}
                c => {
                    return Err(Stop::Bad(format!(
                        "expected ',' or '{}' in a {what}, found {:?}",
                        close as char, c as char
                    )))
                }
            }
        }
    }

    pub(super) fn value(&mut self, depth: usize) -> Result<Value, Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::Bad("value nested too deeply".into()));
        }
        self.ws();
        match self.peek()? {
            q @ (b'\'' | b'"') => self.string(q).map(Value::String),
            b'-' | b'+' | b'0'..=b'9' | b'.' => self.number(),
            b'[' => {
                let mut items = Vec::new();
                self.items(b']', "list", |r| {
                    items.push(r.value(depth + 1)?);
                    Ok(())
                })?;
                Ok(Value::Array(items))
            }
            b'{' => {
                let mut map = Map::new();
                self.items(b'}', "dict", |r| {
                    let key = match r.value(depth + 1)? {
                        Value::String(s) => s,
                        v @ (Value::Number(_) | Value::Bool(_) | Value::Null) => v.to_string(),
                        _ => return Err(Stop::Bad("dict keys must be literals".into())),
                    };
                    r.ws();
                    if r.peek()? != b':' {
                        return Err(Stop::Bad("expected ':' in a dict".into()));
                    }
                    r.i += 1;
                    let v = r.value(depth + 1)?;
                    map.insert(key, v);
                    Ok(())
                })?;
                Ok(Value::Object(map))
            }
            b'(' => Err(Stop::Bad("tuples are not supported".into())),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.i;
                let word = self.dotted()?;
                match word.as_str() {
                    "True" | "true" => Ok(Value::Bool(true)),
                    "False" | "false" => Ok(Value::Bool(false)),
                    "None" | "null" => Ok(Value::Null),
                    _ => {
                        self.i = start;
                        Err(Stop::Bad(format!("{word:?} is not a literal")))
                    }
                }
            }
            c => Err(Stop::Bad(format!("{:?} cannot start a literal", c as char))),
        }
    }

    pub(super) fn number(&mut self) -> Result<Value, Stop> {
        let start = self.i;
        let b = self.b;
        let mut i = self.i;
        if matches!(b[i], b'-' | b'+') {
            i += 1;
        }
        let digits = |i: &mut usize| {
            let s = *i;
            while *i < b.len() && (b[*i].is_ascii_digit() || b[*i] == b'_') {
                *i += 1;
            }
            *i > s
        };
        let int = digits(&mut i);
        let mut float = false;
        if i < b.len() && b[i] == b'.' {
            float = true;
            i += 1;
            digits(&mut i);
        }
        if i < b.len() && matches!(b[i], b'e' | b'E') {
            float = true;
            i += 1;
            if i < b.len() && matches!(b[i], b'-' | b'+') {
                i += 1;
            }
            if !digits(&mut i) && i < b.len() {
                return Err(Stop::Bad("bad exponent".into()));
            }
        }
        if i == b.len() {
            return Err(Stop::Eof);
        }
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            return Err(Stop::Bad(format!("bad number {:?}", &self.s[start..=i])));
        }
        self.i = i;
        let text: String = self.s[start..i]
            .chars()
            .filter(|&c| c != '_' && c != '+')
            .collect();
        if !int && !float {
            return Err(Stop::Bad(format!("bad number {text:?}")));
        }
        if !float {
            if let Ok(n) = text.parse::<i64>() {
                return Ok(Value::Number(n.into()));
            }
            if let Ok(n) = text.parse::<u64>() {
                return Ok(Value::Number(n.into()));
            }
        }
        // A number beyond `f64` (the grammar's 3-digit exponents allow `9e999`) reads as
        // `±1e308`, as the JSON families read one (`scan::read_json_value`).
        text.parse::<f64>()
            .ok()
            .map(|f| {
                if f.is_infinite() {
                    1e308f64.copysign(f)
                } else {
                    f
                }
            })
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| Stop::Bad(format!("bad number {text:?}")))
    }

    pub(super) fn hex(&mut self, n: usize) -> Result<u32, Stop> {
        let end = self.i + n;
        if end > self.b.len() {
            return Err(Stop::Eof);
        }
        let h = std::str::from_utf8(&self.b[self.i..end])
            .map_err(|_| Stop::Bad("bad escape".into()))?;
        let v = u32::from_str_radix(h, 16)
            .map_err(|_| Stop::Bad(format!("bad escape digits {h:?}")))?;
        self.i = end;
        Ok(v)
    }

    pub(super) fn string(&mut self, q: u8) -> Result<String, Stop> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let c = self.peek()?;
            if c == q {
                self.i += 1;
                return Ok(out);
            }
            match c {
                b'\n' | b'\r' => return Err(Stop::Bad("a line break inside a string".into())),
                b'\\' => {
                    self.i += 1;
                    let e = self.peek()?;
                    self.i += 1;
                    match e {
                        b'n' => out.push('\n'),
                        b't' => out.push('\t'),
                        b'r' => out.push('\r'),
                        b'a' => out.push('\u{7}'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'v' => out.push('\u{b}'),
                        b'\\' | b'\'' | b'"' => out.push(e as char),
                        b'\n' => {}
                        b'0'..=b'7' => {
                            let mut v = u32::from(e - b'0');
                            for _ in 0..2 {
                                match self.b.get(self.i) {
                                    Some(d @ b'0'..=b'7') => {
                                        v = v * 8 + u32::from(d - b'0');
                                        self.i += 1;
                                    }
                                    _ => break,
                                }
                            }
                            out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                        }
                        b'x' | b'u' | b'U' => {
                            let n = match e {
                                b'x' => 2,
                                b'u' => 4,
                                _ => 8,
                            };
                            let mut v = self.hex(n)?;
                            if (0xD800..0xDC00).contains(&v) && self.s[self.i..].starts_with("\\u")
                            {
                                self.i += 2;
                                let lo = self.hex(4)?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(Stop::Bad("a lone surrogate escape".into()));
                                }
                                v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                            }
                            match char::from_u32(v) {
                                Some(ch) => out.push(ch),
                                None if self.i == self.b.len() => return Err(Stop::Eof),
                                None => return Err(Stop::Bad("a lone surrogate escape".into())),
                            }
                        }
                        other => {
                            // Python keeps unknown escapes as written.
                            out.push('\\');
                            self.i -= 1;
                            let ch = self.s[self.i..].chars().next().unwrap_or('\\');
                            let _ = other;
                            out.push(ch);
                            self.i += ch.len_utf8();
                        }
                    }
                }
                _ => {
                    let ch = self.s[self.i..].chars().next().unwrap_or('\u{fffd}');
                    out.push(ch);
                    self.i += ch.len_utf8();
                }
            }
        }
    }

    /// The keyword arguments after `(`, up to and including `)`.
    pub(crate) fn kwargs(&mut self) -> Result<Map<String, Value>, Stop> {
        let mut args = Map::new();
        loop {
            self.ws();
            if self.peek()? == b')' {
                self.i += 1;
                return Ok(args);
            }
            let start = self.i;
            let c = self.peek()?;
            if !(c.is_ascii_alphabetic() || c == b'_') {
                return Err(Stop::Bad("positional arguments are not supported".into()));
            }
            let key = self.ident()?;
            self.ws();
            if self.peek()? != b'=' || self.b.get(self.i + 1) == Some(&b'=') {
                self.i = start;
                return Err(Stop::Bad(format!(
                    "positional argument {key:?}: keyword arguments only"
                )));
            }
            self.i += 1;
            let v = self.value(0)?;
            if args.insert(key.to_owned(), v).is_some() {
                return Err(Stop::Bad(format!("argument {key:?} given twice")));
            }
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b')' => {}
                c => {
                    return Err(Stop::Bad(format!(
                        "expected ',' or ')' after an argument, found {:?}",
                        c as char
                    )))
                }
            }
        }
    }
}

/// Whether `text[i..]` starts a call: a dotted name then `(`. `None`: not known yet.
pub(super) fn starts_call(text: &str, i: usize) -> Option<Option<String>> {
    let mut r = Py::new(text, i);
    r.ws();
    let name = match r.dotted() {
        Ok(n) => n,
        Err(Stop::Eof) => return None,
        Err(Stop::Bad(_)) => return Some(None),
    };
    r.ws();
    match r.peek() {
        Err(_) => None,
        Ok(b'(') => Some(Some(name)),
        Ok(_) => Some(None),
    }
}

pub(super) fn strip_end_marks(mut s: &str) -> &str {
    loop {
        let t = s.trim_end();
        match END_MARKS.iter().find_map(|m| t.strip_suffix(m)) {
            Some(r) => s = r,
            None => return t,
        }
    }
}
