//! Llama 3.1 / 3.2 / 3.3 custom tools: a bare JSON object `{"name", "parameters"}`, maybe
//! after `<|python_tag|>` (section 4.4 of the tool-call format notes; vLLM's `llama3_json`
//! parser, XGrammar's `llama` builtin).
//!
//! ```text
//! {"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>
//! ```

use serde_json::Value;

use super::driver;
use super::hermes;
use super::scan::{self, Content, JsonRead};
use super::tags::{self, Envelope};
use super::{FormatOptions, PartialOutput, Tool, ToolCall, ToolCallFormat, ToolParseError};

/// The prefix Llama 3.1 sometimes writes before a call (special token 128010; the shared
/// Llama 3.1 tokenizer file names that id `<|reserved_special_token_5|>`).
pub const PYTHON_TAG: &str = "<|python_tag|>";
const EOM: &str = "<|eom_id|>";
const EOT: &str = "<|eot_id|>";
const TRIGGER: &str = "{\"name\": ";
/// Written between parallel calls (vLLM's parser accepts `;` with optional whitespace).
pub const SEPARATOR: &str = "; ";

format_with_options! {
    /// The Llama 3.x JSON format (`llama3_json`).
    ///
    /// * Grammar: each call is `{"name": "NAME", "parameters": ARGS}` (XGrammar's `llama`
    ///   builtin: trigger `{"name": `, `ARGS` the tool's input schema); parallel calls are
    ///   joined by `; ` (the official template has no parallel calls; `; ` is what vLLM's
    ///   parser reads). `required` and named start with the call (no text before: the
    ///   template asks for JSON only); `auto` is free text, then optionally the calls;
    ///   after the calls comes only the end of turn (`<|eot_id|>`, the stop token).
    ///   Free text never contains `"name"`, so the parser cannot find a call in it (and
    ///   `none` is free text only). `<|python_tag|>` is not generated: it introduces
    ///   built-in tools' Python calls.
    /// * Parser: a call is a JSON object with a string `"name"` and a `"parameters"` or
    ///   `"arguments"` member (vLLM's rule; other JSON objects in prose stay content),
    ///   anywhere in the text, string-aware (braces and `{"name": ` inside JSON strings are
    ///   not calls); a leading `<|python_tag|>` and a final `<|eom_id|>`/`<|eot_id|>` are
    ///   dropped; calls may be separated by `;` and/or whitespace; text around them is
    ///   content. An unknown name, a repeated `"name"` or arguments member, an argument given twice, or a
    ///   call-looking object that is not valid JSON (from its `{` to the next `{"name"` or
    ///   the end), is an error with its text kept in content.
    ///   Streaming: a `{` followed by a key holds the content back until the object is
    ///   decided, and a final `<|python_tag|>` is held back (a call may follow); a call is
    ///   reported once its name and the start of its arguments have arrived.
    pub struct Llama3Json;
}

impl Llama3Json {
    fn envelope(&self) -> Envelope {
        Envelope {
            trigger: TRIGGER.into(),
            separator: SEPARATOR.into(),
            excludes: vec!["\"name\"".into()],
            markers: Vec::new(),
            ..Envelope::default()
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// A content piece before a call: a trailing `<|python_tag|>` belongs to the call.
fn push_before_call(content: &mut Content, piece: &str) {
    let p = piece.trim_end();
    content.push(p.strip_suffix(PYTHON_TAG).unwrap_or(p));
}

/// The last content piece: end-of-turn tokens dropped, partial markers held back, and,
/// while the output is still arriving, a final `<|python_tag|>` too (a call may follow,
/// which the tag then belongs to).
///
/// Returns how many bytes of `piece` are settled (see [`Content::push_tail`]).
fn push_tail(content: &mut Content, piece: &str, at_end: bool) -> Option<usize> {
    let n = if at_end {
        piece.len()
    } else {
        scan::stable_len(piece, &[PYTHON_TAG, EOM, EOT], true)
    };
    let mut p = piece[..n].trim_end();
    while let Some(q) = p.strip_suffix(EOT).or_else(|| p.strip_suffix(EOM)) {
        p = q.trim_end();
    }
    if at_end {
        content.push(p);
        return None;
    }
    p = p.strip_suffix(PYTHON_TAG).unwrap_or(p);
    content.push_tail(p, &[], false)
}

/// Whether scanned members make a call: a string `name` and an arguments member.
/// Past the separators (whitespace, `;`) that follow a call ending at byte `end` of
/// `text`; they are not content. When more text follows them, the output settles there:
/// the rest parses afresh. Returns where the next piece starts.
fn after_separators(text: &str, end: usize, out: &mut PartialOutput, content: &Content) -> usize {
    let b = text.as_bytes();
    let mut e = end;
    while e < b.len() && (b[e].is_ascii_whitespace() || b[e] == b';') {
        e += 1;
    }
    if e < b.len() {
        scan::settle(out, content, e);
    }
    e
}

fn is_call(obj: &scan::ObjectScan) -> bool {
    let name = obj
        .members
        .iter()
        .any(|m| m.key == "name" && matches!(m.value, Some((Value::String(_), _))));
    let args = obj
        .members
        .iter()
        .any(|m| m.key == "parameters" || m.key == "arguments");
    name && args
}

/// The next place after `from` where a call object may begin (`{`, whitespace, `"name"`).
fn next_call_start(text: &str, from: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = from;
    while let Some(k) = text[i..].find('{') {
        let s = i + k;
        let j = skip_ws(b, s + 1);
        if text[j..].starts_with("\"name\"") {
            return Some(s);
        }
        i = s + 1;
    }
    None
}

impl ToolCallFormat for Llama3Json {
    format_name!("llama3_json");

    structural_tag_from_envelope!(|_, options, t| {
        Ok(tags::json_call_object(t, options, "", "parameters", ""))
    });

    parse_with_driver!(own: parse_turn);

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        // Hermes' JSON object, bare, under the key `parameters`.
        hermes::render_json_blocks(calls, "", "parameters", "", SEPARATOR)
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        // The body of the `ipython` turn.
        scan::result_text(result)
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from(
            "You can call the functions below. To call one, reply with only a JSON object \
             of the form {\"name\": <function name>, \"parameters\": <object of argument \
             names and values>}, using literal values rather than variables.\n",
        );
        for t in tools {
            s.push('\n');
            s.push_str(&indented_json(&t.to_openai()));
            s.push('\n');
        }
        s
    }
}

impl Llama3Json {
    /// The parse behind [`ToolCallFormat::parse_partial_from`].
    fn parse_turn(&self, parse: driver::Parse<'_>) -> PartialOutput {
        let (text, from, tools, at_end) = (parse.text, parse.from, parse.tools, parse.at_end);
        let b = text.as_bytes();
        let mut content = Content::resumed(from.content_open);
        let mut out = PartialOutput::default();
        let mut seg = from.offset;
        let mut i = from.offset;
        loop {
            let Some(k) = text[i..].find('{') else {
                if let Some(n) = push_tail(&mut content, &text[seg..], at_end) {
                    scan::settle_open(&mut out, &content, seg + n);
                }
                break;
            };
            let s = i + k;
            let j = skip_ws(b, s + 1);
            if j == b.len() && !at_end {
                // `{` at the end: may become a call.
                push_before_call(&mut content, &text[seg..s]);
                break;
            }
            if j == b.len() || b[j] != b'"' {
                i = s + 1;
                continue;
            }
            match scan::read_json_value(&text[s..]) {
                JsonRead::Complete { value, end } => {
                    // Decided by the members as written (as while the object was still
                    // arriving), not by the JSON value, which keeps only the last of a
                    // repeated key.
                    if !is_call(&scan::scan_object(&text[s..s + end])) {
                        // Other JSON in prose: content, and nothing inside it is a call.
                        i = s + end;
                        continue;
                    }
                    push_before_call(&mut content, &text[seg..s]);
                    let piece = &text[s..s + end];
                    if let Err(e) = scan::push_json_call(&mut out, piece, &value, tools) {
                        scan::push_malformed(&mut out, &mut content, piece, s, e);
                    }
                    seg = after_separators(text, s + end, &mut out, &content);
                    i = seg;
                }
                JsonRead::Incomplete => {
                    let obj = scan::scan_object(&text[s..]);
                    if at_end {
                        if is_call(&obj) || obj.members.iter().any(|m| m.key == "name") {
                            push_before_call(&mut content, &text[seg..s]);
                            scan::push_malformed(
                                &mut out,
                                &mut content,
                                &text[s..],
                                s,
                                ToolParseError::Unterminated,
                            );
                            seg = text.len();
                            i = seg;
                            continue;
                        }
                        i = s + 1;
                        continue;
                    }
                    push_before_call(&mut content, &text[seg..s]);
                    if is_call(&obj) {
                        // A name not offered is never streamed (the call ends malformed).
                        let (partial, _) = scan::offered_call_parts(&text[s..], tools);
                        out.calls.push(partial);
                    }
                    break;
                }
                JsonRead::Invalid(e) => {
                    let obj = scan::scan_object(&text[s..]);
                    let named = obj
                        .members
                        .iter()
                        .any(|m| m.key == "name" && matches!(m.value, Some((Value::String(_), _))));
                    if !named {
                        i = s + 1;
                        continue;
                    }
                    // The bad call ends where its braces balance (string-aware), or where
                    // the next call starts if that comes first: from there the text is
                    // read afresh, so a stream sends what follows without waiting for the
                    // end of the output.
                    let balanced = scan::balanced_end(&text[s..]).map(|e| s + e);
                    let next = next_call_start(text, s + 1);
                    if let Some(end) = balanced.filter(|&e| next.map_or(true, |n| e <= n)) {
                        push_before_call(&mut content, &text[seg..s]);
                        let error = ToolParseError::InvalidJson(e);
                        scan::push_malformed(&mut out, &mut content, &text[s..end], s, error);
                        seg = after_separators(text, end, &mut out, &content);
                        i = seg;
                        continue;
                    }
                    let stop = match next {
                        Some(n) => n,
                        None if at_end => text.len(),
                        None => {
                            // Where the bad call ends is not known yet.
                            push_before_call(&mut content, &text[seg..s]);
                            break;
                        }
                    };
                    push_before_call(&mut content, &text[seg..s]);
                    let piece = text[s..stop].trim_end();
                    scan::push_malformed(
                        &mut out,
                        &mut content,
                        piece,
                        s,
                        ToolParseError::InvalidJson(e),
                    );
                    seg = stop;
                    i = stop;
                    scan::settle(&mut out, &content, stop);
                }
            }
        }
        out.content = content.into_string();
        out
    }
}

/// JSON with 4-space indentation (how the Llama 3.1 template lists tools).
fn indented_json(value: &Value) -> String {
    use serde::Serialize;
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    if value.serialize(&mut ser).is_err() {
        return value.to_string();
    }
    String::from_utf8(buf).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::weather_and_time as tools;

    #[test]
    fn parses_the_worked_example() {
        let text = "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}<|eom_id|>";
        let out = Llama3Json::default().parse(text, &tools());
        assert_eq!(out.content, None);
        crate::test_support::assert_paris_weather_call(&out);
    }

    #[test]
    fn other_json_and_text_stay_content() {
        let f = Llama3Json::default();
        let text = "Here: {\"name\": \"Ann\", \"age\": 3} and {\"a\": \"{\\\"name\\\": \\\"get_time\\\", \\\"parameters\\\": {}}\"}";
        let out = f.parse(text, &tools());
        assert!(out.tool_calls.is_empty() && out.errors.is_empty());
        assert_eq!(out.content.as_deref(), Some(text));
    }

    #[test]
    fn a_repeated_name_is_decided_by_the_members_as_written() {
        // The partial parse saw a call (first `name` a string); the whole parse used to
        // read the JSON value, whose last `name` is not a string, and call it prose,
        // shifting the next call into the streamed call's index.
        let (f, ts) = (Llama3Json::default(), tools());
        let text = "{\"name\": \"get_time\", \"name\": 1, \"parameters\": {}} {\"name\": \"get_weather\", \"parameters\": {\"city\": \"P\"}}";
        let out = f.parse(text, &ts);
        assert_eq!(out.tool_calls.len(), 1);
        assert_eq!(out.errors.len(), 1);
        crate::test_support::assert_streams_as_whole(&f, text, &ts);
        let dup = "{\"name\": \"get_time\", \"parameters\": {}, \"parameters\": {\"tz\": \"X\"}}";
        crate::test_support::assert_streams_as_whole(&f, dup, &ts);
    }

    #[test]
    fn separators_and_trailing_text() {
        let f = Llama3Json::default();
        let text = "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}};\n {\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}} thanks";
        let out = f.parse(text, &tools());
        assert_eq!(out.tool_calls.len(), 2);
        assert_eq!(out.content.as_deref(), Some("thanks"));
    }
}
