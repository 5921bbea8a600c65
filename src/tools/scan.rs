//! Pieces every tool-call parser needs: reading one JSON value from a prefix, scanning a
//! partial JSON object, holding back partial markers, joining content, splitting off
//! reasoning, checking names.

use serde_json::Value;

use super::{PartialOutput, Tool, ToolParseError};

/// JSON text as Python's `json.dumps(value, ensure_ascii=False)` writes it (`", "` and
/// `": "` separators), which is what Hermes/Qwen, Llama and DeepSeek templates render.
pub fn python_json(value: &Value) -> String {
    let mut out = String::new();
    write_python_json(value, &mut out);
    out
}

fn write_python_json(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(v, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_python_json(v, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
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

/// Reads one JSON value from the start of `text`, ignoring what follows it.
pub fn read_json_value(text: &str) -> JsonRead {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match stream.next() {
        None => JsonRead::Incomplete,
        Some(Ok(value)) => {
            let end = stream.byte_offset();
            // A number at the very end may continue (`12` then `3`): not yet complete.
            if end == text.len() && matches!(value, Value::Number(_)) {
                return JsonRead::Incomplete;
            }
            JsonRead::Complete { value, end }
        }
        Some(Err(e)) if e.is_eof() => JsonRead::Incomplete,
        Some(Err(e)) => JsonRead::Invalid(e.to_string()),
    }
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

/// How many leading bytes of `text` are safe to emit while the output is still arriving:
/// all but the longest suffix that is a proper prefix of one of `markers` (a marker that
/// may be completing), and, with `trim`, all but trailing whitespace (which a marker may
/// follow, and whitespace next to a marker is trimmed).
pub fn stable_len(text: &str, markers: &[&str], trim: bool) -> usize {
    let mut cut = text.len();
    for m in markers {
        for k in (1..m.len().min(text.len() + 1)).rev() {
            if m.is_char_boundary(k) && text.ends_with(&m[..k]) {
                cut = cut.min(text.len() - k);
                break;
            }
        }
    }
    let mut s = &text[..cut];
    if trim {
        s = s.trim_end();
    }
    s.len()
}

/// Content assembled from the pieces between markers: each trimmed, empty ones dropped,
/// the rest joined by `\n`.
#[derive(Debug, Default)]
pub struct Content {
    text: String,
}

impl Content {
    /// Adds a piece.
    pub fn push(&mut self, piece: &str) {
        let p = piece.trim();
        if p.is_empty() {
            return;
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(p);
    }

    /// Adds the piece that is still arriving: its stable part only, unless `at_end`.
    pub fn push_tail(&mut self, piece: &str, markers: &[&str], at_end: bool) {
        if at_end {
            self.push(piece);
        } else {
            let n = stable_len(piece, markers, true);
            self.push(&piece[..n]);
        }
    }

    /// The content.
    pub fn into_string(self) -> String {
        self.text
    }
}

/// Splits off a reasoning block: when `text` (after leading whitespace) starts with
/// `begin`, or when `implicit` (the prompt opened the block) and `end` occurs, the
/// reasoning is the text up to `end`. Returns the reasoning as far as it is stable and the
/// offset where the rest starts (`None` while the block is still open).
pub fn split_reasoning(
    text: &str,
    begin: &str,
    end: &str,
    implicit: bool,
    at_end: bool,
) -> (String, Option<usize>) {
    let lead = text.len() - text.trim_start().len();
    let body_start = if text[lead..].starts_with(begin) {
        lead + begin.len()
    } else if !at_end && begin.starts_with(&text[lead..]) && lead < text.len() {
        // `<thi` may still become `<think>`.
        return (String::new(), None);
    } else if implicit {
        0
    } else {
        return (String::new(), Some(0));
    };
    match text[body_start..].find(end) {
        Some(k) => (
            text[body_start..body_start + k].trim().to_owned(),
            Some(body_start + k + end.len()),
        ),
        None if at_end => {
            if body_start == 0 {
                // Implicit reasoning that never closed: the model never reasoned.
                (String::new(), Some(0))
            } else {
                (text[body_start..].trim().to_owned(), Some(text.len()))
            }
        }
        None => {
            if body_start == 0 {
                // Not known yet whether this is reasoning or content.
                return (String::new(), None);
            }
            let body = &text[body_start..];
            let n = stable_len(body, &[end], true);
            (body[..n].trim_start().to_owned(), None)
        }
    }
}

/// Checks a name written by the model against the offered tools (any valid name when the
/// list is empty).
pub fn check_call_name(name: &str, tools: &[Tool]) -> Result<(), ToolParseError> {
    if super::tool::check_name(name).is_err() {
        return Err(ToolParseError::InvalidName {
            name: name.to_owned(),
        });
    }
    if !tools.is_empty() && !tools.iter().any(|t| t.name == name) {
        return Err(ToolParseError::UnknownTool {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Reads an arguments value: an object, or a JSON string holding an object (some models
/// double-encode).
pub fn arguments_object(value: &Value) -> Result<Value, ToolParseError> {
    match value {
        Value::Object(_) => Ok(value.clone()),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(ToolParseError::Syntax(
                "the arguments must be a JSON object".into(),
            )),
        },
        _ => Err(ToolParseError::Syntax(
            "the arguments must be a JSON object".into(),
        )),
    }
}

/// Adds a malformed call to `out`: reported in `errors`, its text kept in content, and
/// its place in `out.calls` taken by an empty entry, so that call indices stay stable
/// while streaming (a call that started, then turned out malformed, keeps its index; the
/// next call gets the next one).
pub fn push_malformed(
    out: &mut PartialOutput,
    content: &mut Content,
    text: &str,
    offset: usize,
    error: ToolParseError,
) {
    out.calls.push(super::PartialCall::default());
    content.push(text);
    out.errors.push(super::MalformedToolCall {
        text: text.to_owned(),
        offset,
        error,
    });
}

/// Name and raw argument text of a `{"name": ..., "arguments"|"parameters": ...}` object
/// that may still be arriving (`body` starts at its `{`): the name once its string is
/// complete, the arguments' text as far as it goes (trailing whitespace dropped), and the
/// end of the object once it has closed.
pub fn call_parts(body: &str) -> (super::PartialCall, Option<usize>) {
    let obj = scan_object(body);
    let mut call = super::PartialCall::default();
    for m in &obj.members {
        match m.key.as_str() {
            "name" => {
                if let Some((Value::String(n), _)) = &m.value {
                    call.name = Some(n.clone());
                }
            }
            "arguments" | "parameters" => {
                let end = m.value.as_ref().map(|(_, e)| *e).unwrap_or(body.len());
                call.arguments_text = body[m.value_start..end].trim_end().to_owned();
            }
            _ => {}
        }
    }
    (call, obj.end)
}

/// A call object's name and arguments: `name` a string, arguments under `arguments` or
/// `parameters` (not both; an object, or a string holding one; absent = `{}`), `id` kept.
/// The name is checked against `tools`.
pub fn call_from_json(value: &Value, tools: &[Tool]) -> Result<super::ToolCall, ToolParseError> {
    let obj = value.as_object().ok_or_else(|| {
        ToolParseError::Syntax("a call must be a JSON object with name and arguments".into())
    })?;
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolParseError::Syntax("the call has no string \"name\"".into()))?;
    check_call_name(name, tools)?;
    let args = match (obj.get("arguments"), obj.get("parameters")) {
        (Some(a), None) | (None, Some(a)) => arguments_object(a)?,
        (None, None) => Value::Object(serde_json::Map::new()),
        (Some(_), Some(_)) => {
            return Err(ToolParseError::Syntax(
                "the call has both \"arguments\" and \"parameters\"".into(),
            ))
        }
    };
    Ok(super::ToolCall {
        id: obj.get("id").and_then(Value::as_str).map(str::to_owned),
        name: name.to_owned(),
        arguments: args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_json_matches_json_dumps_spacing() {
        let v = json!({"city": "Paris", "days": [1, 2], "x": {"é": null}});
        assert_eq!(
            python_json(&v),
            r#"{"city": "Paris", "days": [1, 2], "x": {"é": null}}"#
        );
    }

    #[test]
    fn reads_one_value_and_reports_incomplete_ones() {
        assert_eq!(
            read_json_value(r#" {"a": "}"} tail"#),
            JsonRead::Complete {
                value: json!({"a": "}"}),
                end: 11
            }
        );
        assert_eq!(read_json_value(r#"{"a": "#), JsonRead::Incomplete);
        assert_eq!(read_json_value("12"), JsonRead::Incomplete);
        assert!(matches!(read_json_value("}"), JsonRead::Invalid(_)));
    }

    #[test]
    fn scans_members_before_the_object_closes() {
        let s = scan_object(r#"{"name": "f", "arguments": {"q": "a}"#);
        assert_eq!(s.members.len(), 2);
        assert_eq!(s.members[0].value.as_ref().unwrap().0, json!("f"));
        assert_eq!(s.members[1].value, None);
        assert_eq!(s.members[1].value_start, 27);
        assert_eq!(s.end, None);
        let s = scan_object(r#"{"a": 1, "b": [2]} x"#);
        assert_eq!(s.end, Some(18));
        assert!(scan_object("[1]").error.is_some());
    }

    #[test]
    fn holds_back_partial_markers_and_whitespace() {
        assert_eq!(stable_len("Hi <tool_", &["<tool_call>"], false), 3);
        assert_eq!(stable_len("Hi <tool_", &["<tool_call>"], true), 2);
        assert_eq!(stable_len("Hi <toolx", &["<tool_call>"], true), 9);
    }

    #[test]
    fn reasoning_split() {
        assert_eq!(
            split_reasoning(
                "<think>\nhm\n</think>\n\nok",
                "<think>",
                "</think>",
                false,
                true
            ),
            ("hm".to_owned(), Some(19))
        );
        assert_eq!(
            split_reasoning("<think>hm </thi", "<think>", "</think>", false, false),
            ("hm".to_owned(), None)
        );
        assert_eq!(
            split_reasoning("plain", "<think>", "</think>", false, false),
            (String::new(), Some(0))
        );
    }
}
