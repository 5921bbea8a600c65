//! Python literals as `ast.literal_eval` reads them, into JSON (the values XML-style
//! families fall back to, section 4.2 of the tool-call format notes).

#[allow(unused_imports)]
use super::*;

/// Reads a Python literal as `ast.literal_eval` would (`None`, `True`, `False`, numbers,
/// single- or double-quoted strings, lists, tuples, dicts with string keys) into JSON;
/// `None` for anything else. XML-style families fall back to it for values the model wrote
/// with Python's `str()` (section 4.2 of the tool-call format notes).
pub fn python_literal(text: &str) -> Option<Value> {
    let mut p = PyReader {
        b: text.as_bytes(),
        i: 0,
        depth: 0,
    };
    let v = p.value()?;
    p.ws();
    (p.i == p.b.len()).then_some(v)
}

struct PyReader<'a> {
    b: &'a [u8],
    i: usize,
    depth: usize,
}

impl PyReader<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.ws();
        // Deep nesting is refused rather than recursed into.
        if self.depth > 64 {
            return None;
        }
        let rest = &self.b[self.i..];
        for (word, v) in [
            (&b"None"[..], Value::Null),
            (b"True", Value::Bool(true)),
            (b"False", Value::Bool(false)),
        ] {
            if rest.starts_with(word)
                && !rest
                    .get(word.len())
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
            {
                self.i += word.len();
                return Some(v);
            }
        }
        match *rest.first()? {
            b'\'' | b'"' => self.string().map(Value::String),
            b'[' | b'(' => {
                let close = if rest[0] == b'[' { b']' } else { b')' };
                self.i += 1;
                self.depth += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        break;
                    }
                    items.push(self.value()?);
                    if !self.eat(b',') {
                        if self.eat(close) {
                            break;
                        }
                        return None;
                    }
                }
                self.depth -= 1;
                Some(Value::Array(items))
            }
            b'{' => {
                self.i += 1;
                self.depth += 1;
                let mut map = serde_json::Map::new();
                loop {
                    if self.eat(b'}') {
                        break;
                    }
                    self.ws();
                    let key = self.string()?;
                    if !self.eat(b':') {
                        return None;
                    }
                    let v = self.value()?;
                    map.insert(key, v);
                    if !self.eat(b',') {
                        if self.eat(b'}') {
                            break;
                        }
                        return None;
                    }
                }
                self.depth -= 1;
                Some(Value::Object(map))
            }
            _ => {
                let start = self.i;
                while self.i < self.b.len()
                    && matches!(
                        self.b[self.i],
                        b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'
                    )
                {
                    self.i += 1;
                }
                let t = std::str::from_utf8(&self.b[start..self.i]).ok()?;
                match serde_json::from_str::<Value>(t) {
                    Ok(v @ Value::Number(_)) => Some(v),
                    _ => None,
                }
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        let q = *self.b.get(self.i)?;
        if q != b'\'' && q != b'"' {
            return None;
        }
        self.i += 1;
        let mut out = Vec::new();
        while self.i < self.b.len() {
            let c = self.b[self.i];
            self.i += 1;
            if c == q {
                return String::from_utf8(out).ok();
            }
            if c == b'\\' {
                let e = *self.b.get(self.i)?;
                self.i += 1;
                match e {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'0' => out.push(0),
                    b'u' => {
                        let hex = std::str::from_utf8(self.b.get(self.i..self.i + 4)?).ok()?;
                        let ch = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
                        self.i += 4;
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                    other => out.push(other),
                }
            } else {
                out.push(c);
            }
        }
        None
    }
}
