//! JSON as the parsers read it: one value from a prefix (strict, depth-limited), the
//! extent of a balanced value or a string literal, a partial object's members, and JSON
//! written as Python's `json.dumps` writes it.

#[allow(unused_imports)]
use super::*;

/// A tool result as the text a tool turn holds: a string as is, any other value as
/// [`python_json`].
pub fn result_text(result: &Value) -> String {
    match result {
        Value::String(s) => s.clone(),
        other => python_json(other),
    }
}

/// JSON text as Python's `json.dumps(value, ensure_ascii=False)` writes it (`", "` and
/// `": "` separators), which is what Hermes/Qwen, Llama and DeepSeek templates render.
pub fn python_json(value: &Value) -> String {
    let mut out = String::new();
    write_spaced(value, &mut out, |v, out| out.push_str(&v.to_string()));
    out
}

/// Writes `value` with Python's `, ` and `: ` separators (as `json.dumps` and `repr` both
/// space them); `scalar` writes every other value, object keys included (as strings).
pub fn write_spaced(value: &Value, out: &mut String, scalar: fn(&Value, &mut String)) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_spaced(v, out, scalar);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                scalar(&Value::String(k.clone()), out);
                out.push_str(": ");
                write_spaced(v, out, scalar);
            }
            out.push('}');
        }
        other => scalar(other, out),
    }
}

/// The result of reading one JSON value at the start of a text (after whitespace).
#[derive(Debug, PartialEq)]
pub enum JsonRead {
    /// A whole value; `end` is the byte offset just after it.
    Complete {
        /// The value.
        value: Value,
        /// Bytes consumed (leading whitespace included).
        end: usize,
    },
    /// The text ends inside the value (or before it starts).
    Incomplete,
    /// The text cannot start a JSON value; the message says why.
    Invalid(String),
}

/// Reads one JSON value from the start of `text`, ignoring what follows it (strictly:
/// a number beyond `f64` fails).
pub(super) fn read_json_value_strict(text: &str) -> JsonRead {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match stream.next() {
        None => JsonRead::Incomplete,
        Some(Ok(value)) => {
            let end = stream.byte_offset();
            // A number or keyword at the very end may continue (`12` then `3`; `true`
            // then `x`, which makes it invalid): not yet complete.
            if end == text.len() && matches!(value, Value::Number(_) | Value::Bool(_) | Value::Null)
            {
                return JsonRead::Incomplete;
            }
            JsonRead::Complete { value, end }
        }
        Some(Err(e)) if e.is_eof() => JsonRead::Incomplete,
        // serde_json stops at 128 levels of nesting (it recurses): the text may be valid
        // JSON, so say what happened rather than "invalid".
        Some(Err(e)) if e.to_string().starts_with("recursion limit exceeded") => {
            JsonRead::Invalid(format!(
                "nested deeper than {MAX_JSON_DEPTH} levels, which the reader does not follow \
                 (line {} column {})",
                e.line(),
                e.column()
            ))
        }
        Some(Err(e)) => JsonRead::Invalid(e.to_string()),
    }
}

/// The deepest nesting of arrays and objects that the JSON reader of the parsers follows
/// (serde_json's recursion limit); deeper values are reported, never a stack overflow.
pub const MAX_JSON_DEPTH: usize = 128;

/// Reads one JSON value from the start of `text`, ignoring what follows it; a number too large for an `f64` (which the grammar's JSON
/// allows: `1e99999`) is read as `±1e308` instead of failing the whole value (Python's
/// `json` reads it as infinity; neither fits JSON). Offsets are those of `text`.
pub fn read_json_value(text: &str) -> JsonRead {
    match read_json_value_strict(text) {
        JsonRead::Invalid(e) if e.contains("number out of range") => {
            let fixed = clamp_huge_numbers(text);
            if fixed == text {
                return JsonRead::Invalid(e);
            }
            match read_json_value_strict(&fixed) {
                // A bare number: it ends where its literal does (the clamp's padding
                // ended it early), and one running to the end of the text may continue.
                JsonRead::Complete {
                    value: value @ Value::Number(_),
                    end,
                } => {
                    let more = text[end..]
                        .bytes()
                        .take_while(|c| matches!(c, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
                        .count();
                    if end + more == text.len() {
                        JsonRead::Incomplete
                    } else {
                        JsonRead::Complete {
                            value,
                            end: end + more,
                        }
                    }
                }
                other => other,
            }
        }
        other => other,
    }
}

/// The JSON value that is the whole of `text` (whitespace around it allowed), a number
/// beyond `f64` read as `±1e308` as [`read_json_value`] reads it (the grammars' JSON allows
/// `15E2922885`); `None` when `text` is not exactly one JSON value. The XML-style families
/// type their raw values with it.
pub fn whole_json_value(text: &str) -> Option<Value> {
    // A number running to the end of the text could go on: a space ends it.
    let padded = format!("{} ", text.trim());
    match read_json_value(&padded) {
        JsonRead::Complete { value, end } if padded[end..].trim().is_empty() => Some(value),
        _ => None,
    }
}

/// `text` with every number literal outside strings that overflows an `f64` replaced by
/// `1e308` / `-1e308` padded with spaces to the same length (so offsets are unchanged).
fn clamp_huge_numbers(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut last = 0;
    while i < b.len() {
        match b[i] {
            b'"' => i = string_literal_end(&text[i..]).map_or(b.len(), |n| i + n),
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let lit = &text[start..i];
                if lit.parse::<f64>().is_ok_and(f64::is_infinite) {
                    let repl = if lit.starts_with('-') {
                        "-1e308"
                    } else {
                        "1e308"
                    };
                    if repl.len() <= lit.len() {
                        out.push_str(&text[last..start]);
                        out.push_str(repl);
                        out.push_str(&" ".repeat(lit.len() - repl.len()));
                        last = i;
                    }
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[last..]);
    out
}

/// The end (exclusive) of the bracketed text starting at `text[0]` (`{` or `[`), brackets
/// matched outside JSON string literals whatever else the text holds (the text need not
/// be valid JSON): where a malformed JSON call without an end marker ends. `None` while
/// the brackets have not balanced.
pub fn balanced_end(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => i += string_literal_end(&text[i..])? - 1,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The end (exclusive) of the JSON string literal starting at `text[0] == '"'`, if it is
/// closed.
pub fn string_literal_end(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    if b.first() != Some(&b'"') {
        return None;
    }
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// One member of a partially arrived JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The key.
    pub key: String,
    /// Where the value starts (after `:` and whitespace), in bytes of the scanned text.
    pub value_start: usize,
    /// The value, once complete, and where it ends.
    pub value: Option<(Value, usize)>,
}

/// A JSON object scanned as far as the text goes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ObjectScan {
    /// The members seen, in order (the last may be incomplete).
    pub members: Vec<Member>,
    /// Offset just after the closing `}`, once it has arrived.
    pub end: Option<usize>,
    /// Why the text is not a JSON object, if it is not.
    pub error: Option<String>,
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The raw text of the `arguments` (or `"parameters"`) member of the call object at the
/// start of `object` (the model's own spelling, for the last argument delta of a call), or
/// `call`'s arguments written as JSON when the object has no such complete member.
pub fn arguments_member_text(object: &str, call: &ToolCall) -> String {
    let obj = scan_object(object);
    for m in &obj.members {
        if matches!(m.key.as_str(), "arguments" | "parameters") {
            if let Some((_, e)) = &m.value {
                return object[m.value_start..*e].to_owned();
            }
        }
    }
    python_json(&call.arguments)
}

/// Scans a JSON object at the start of `text` (after whitespace) member by member, so a
/// streaming parser sees the name before the arguments have finished arriving.
pub fn scan_object(text: &str) -> ObjectScan {
    let b = text.as_bytes();
    let mut scan = ObjectScan::default();
    let mut i = skip_ws(b, 0);
    if i == b.len() {
        return scan;
    }
    if b[i] != b'{' {
        scan.error = Some("expected a JSON object".into());
        return scan;
    }
    i += 1;
    let mut first = true;
    loop {
        i = skip_ws(b, i);
        if i == b.len() {
            return scan;
        }
        if b[i] == b'}' && first {
            scan.end = Some(i + 1);
            return scan;
        }
        if !first {
            match b[i] {
                b',' => i = skip_ws(b, i + 1),
                b'}' => {
                    scan.end = Some(i + 1);
                    return scan;
                }
                _ => {
                    scan.error = Some(format!("expected ',' or '}}' at byte {i}"));
                    return scan;
                }
            }
            if i == b.len() {
                return scan;
            }
        }
        first = false;
        if b[i] != b'"' {
            scan.error = Some(format!("expected a key at byte {i}"));
            return scan;
        }
        let Some(klen) = string_literal_end(&text[i..]) else {
            return scan;
        };
        let key: String = match serde_json::from_str(&text[i..i + klen]) {
            Ok(k) => k,
            Err(e) => {
                scan.error = Some(format!("bad key at byte {i}: {e}"));
                return scan;
            }
        };
        i = skip_ws(b, i + klen);
        if i == b.len() {
            return scan;
        }
        if b[i] != b':' {
            scan.error = Some(format!("expected ':' after key {key:?}"));
            return scan;
        }
        i = skip_ws(b, i + 1);
        let start = i;
        match read_json_value(&text[start..]) {
            JsonRead::Complete { value, end } => {
                scan.members.push(Member {
                    key,
                    value_start: start,
                    value: Some((value, start + end)),
                });
                i = start + end;
            }
            JsonRead::Incomplete => {
                if start < b.len() {
                    scan.members.push(Member {
                        key,
                        value_start: start,
                        value: None,
                    });
                }
                return scan;
            }
            JsonRead::Invalid(e) => {
                scan.error = Some(format!("value of {key:?}: {e}"));
                return scan;
            }
        }
    }
}
