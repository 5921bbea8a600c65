//! GLM: `<arg_key>`/`<arg_value>` calls of GLM-4.5/4.6 (`glm45`) and GLM-4.7/5 (`glm47`),
//! and GLM-4-9b-chat's `NAME\n{JSON}` calls (`glm4`) — section 4.8 of the tool-call format
//! notes; vLLM's `glm45` / `glm47` parsers, XGrammar's `glm_4_7` builtin.
//!
//! ```text
//! <tool_call>get_weather
//! <arg_key>city</arg_key>
//! <arg_value>Paris</arg_value>
//! </tool_call>
//! ```

use std::sync::LazyLock;

use serde_json::{json, Value};

use super::driver::{self, Family, Step};

use super::qwen3_coder::{xml_arguments, Walk};
use super::scan::{self, Content, JsonRead};
use super::tags::{self, Envelope};
use super::{
    CallMode, FormatOptions, PartialCall, PartialOutput, Tool, ToolCall, ToolCallFormat, ToolError,
    ToolParseError,
};

// The Hermes `<tool_call>` block, with this family's body inside.
use super::hermes::{BEGIN, END};
const KEY: &str = "<arg_key>";
const KEY_END: &str = "</arg_key>";
const VALUE: &str = "<arg_value>";
const VALUE_END: &str = "</arg_value>";

/// GLM-4.5/4.6 (`glm45`) and GLM-4.7/5 (`glm47`) calls.
///
/// * Grammar. `glm45` (the 4.5 template's whitespace): each call is `<tool_call>NAME\n` +
///   per argument `<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n` + `</tool_call>`,
///   calls joined by `\n`. `glm47`: `<tool_call>NAME` + per argument
///   `<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>` + `</tool_call>`, calls back to
///   back. String-typed values are raw text that never contains `</arg_value>`
///   (`minLength`/`maxLength` count its characters, `pattern`/`format` match it; a
///   keyword the style cannot express makes [`ToolCallFormat::structural_tag`] fail with
///   [`ToolError::Unsupported`] naming the tool, the parameter and the keyword), other
///   values JSON (the `glm_xml` / `glm47_xml` structural-tag styles), in declared order; a
///   tool with unconstrained arguments takes any keys with raw values. Content may precede
///   the calls (also under `required`); free text and reasoning never contain GLM's
///   control markers. With [`FormatOptions::reasoning`] the output starts with
///   `<think>…</think>` (then `\n` for `glm45`). On GLM vocabularies every marker is one
///   special token and is matched as that token.
/// * Parser (one tolerant reader for both variants): the name runs to the first `\n`,
///   `<arg_key>` or `</tool_call>` (so 4.5 output, 4.7 output and zero-argument calls
///   `<tool_call>NAME</tool_call>` all read); any whitespace between the tags; a
///   `</arg_value>` is structural when `<arg_key>`, `</tool_call>` or the end of the
///   output follows; values typed by the schema (`scan::typed_xml_value`: declared
///   `type: "string"` raw, anything else — undeclared keys included, as vLLM does — JSON,
///   else a Python literal, else text); a missing `</tool_call>` before the next call or
///   the end is tolerated. A key given twice makes the call malformed (`argument "KEY"
///   given twice`, its text kept in content), as in every family.
/// * Streaming: string values stream as JSON-escaped text inside the arguments' JSON
///   (`{"city": "Par`), up to a `</arg_value>` not yet known to be structural; other
///   values once complete; a repeated key streams as written until the call ends
///   malformed. A malformed call's error
///   quotes only the call's own text.
/// * Rendering: strings raw, other values JSON (`</` written `<\/`); a string value
///   holding `</arg_value>` cannot be written — [`Glm::try_render_calls`] refuses it,
///   [`ToolCallFormat::render_calls`] writes it raw and it may not parse back.
/// * Properties admitting strings among other values (`Option<String>`'s
///   `["string", "null"]`, `["integer", "string"]`, an `anyOf`/`oneOf` with a string
///   branch, through local `$ref`s): the grammar takes a raw string of the string branches
///   or the JSON of the others; the parser reads the text as a non-string value when it is
///   JSON valid under a non-string branch, else as the string. Raw text carries no type,
///   so such values are ambiguous: the string `"42"` of an `["integer", "string"]`
///   property reads back as `42`, and the string `"null"` of an `Option<String>` as
///   `null`. They stream once whole.
#[derive(Clone, Debug)]
pub struct Glm {
    options: FormatOptions,
    newlines: bool,
}

impl Glm {
    /// GLM-4.5 / 4.6 (`glm45`).
    pub fn glm45(options: FormatOptions) -> Self {
        Self {
            options,
            newlines: true,
        }
    }

    /// GLM-4.7 / 5 (`glm47`).
    pub fn glm47(options: FormatOptions) -> Self {
        Self {
            options,
            newlines: false,
        }
    }

    /// The options.
    pub fn options(&self) -> &FormatOptions {
        &self.options
    }

    /// `calls` as [`ToolCallFormat::render_calls`] writes them, refusing what would not
    /// parse back. String values are raw text with no escape (section 4.8 of the tool-call
    /// format notes), so one holding `</arg_value>` cannot be written: the grammar forbids
    /// it in a raw value, and the parser ends the value there when `<arg_key>`,
    /// `</tool_call>` or the end follows. Other values are JSON with every `</` written
    /// `<\/` (the same JSON, never a closing tag), so they always render.
    ///
    /// # Errors
    /// [`ToolError::Unsupported`] naming the call, the parameter and the closing tag.
    pub fn try_render_calls(&self, calls: &[ToolCall]) -> Result<String, ToolError> {
        for c in calls {
            let Value::Object(args) = &c.arguments else {
                continue;
            };
            for (k, v) in args {
                if matches!(v, Value::String(text) if text.contains(VALUE_END)) {
                    return Err(ToolError::Unsupported {
                        format: self.name().into(),
                        reason: format!(
                            "call to {:?}: the value of parameter {k:?} holds {VALUE_END}, \
                             which a raw string value cannot carry (the format has no escape)",
                            c.name
                        ),
                    });
                }
            }
        }
        Ok(self.render_calls(calls))
    }

    fn envelope(&self) -> Envelope {
        let after_think = if self.newlines { "\n" } else { "" };
        Envelope {
            trigger: BEGIN.into(),
            separator: if self.newlines { "\n" } else { "" }.into(),
            leading_text_in_required: true,
            reasoning: driver::THINK.written_with(after_think),
            excludes: driver::THINK.markers_after(&[END, KEY, KEY_END, VALUE, VALUE_END]),
            markers: [BEGIN, END, KEY, KEY_END, VALUE, VALUE_END]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ..Envelope::default()
        }
    }
}

impl Default for Glm {
    fn default() -> Self {
        Self::glm45(FormatOptions::default())
    }
}

impl ToolCallFormat for Glm {
    fn name(&self) -> &str {
        if self.newlines {
            "glm45"
        } else {
            "glm47"
        }
    }

    structural_tag_from_envelope!(|f, options, t| {
        let nl = if f.newlines { "\n" } else { "" };
        let (style, middle) = if f.newlines {
            ("glm_xml", "</arg_key>\n<arg_value>")
        } else {
            ("glm47_xml", "</arg_key><arg_value>")
        };
        Ok(json!({"type": "tag",
                "begin": format!("{BEGIN}{}{nl}", t.name),
                "content": xml_arguments(t, options, f.name(), style, nl, (KEY, middle, VALUE_END))?,
                "end": END}))
    });

    parse_with_driver!(calls: FAMILY, |s, _, tools, at_end| read_call(s, tools, at_end));

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        let nl = if self.newlines { "\n" } else { "" };
        let open = |name: &str| format!("{BEGIN}{name}{nl}");
        let param = |k: &str, v: &Value| {
            // JSON with `</` written `<\/` never holds a closing tag.
            let v = match v {
                Value::String(x) => x.clone(),
                other => scan::python_json(other).replace("</", "<\\/"),
            };
            format!("{KEY}{k}{KEY_END}{nl}{VALUE}{v}{VALUE_END}{nl}")
        };
        scan::render_xml_calls(calls, open, param, END, nl)
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        let body = scan::result_text(result);
        format!("<tool_response>\n{body}\n</tool_response>")
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from(
            "# Tools\n\nYou can call the functions below, given as JSON inside <tools></tools>:\n<tools>",
        );
        for t in tools {
            s.push('\n');
            s.push_str(&scan::python_json(&t.to_openai()));
        }
        let nl = if self.newlines { "\n" } else { "" };
        s.push_str(&format!(
            "\n</tools>\n\nTo call one, write the function's name after <tool_call>, then each \
             argument as a key/value pair (text values as they are, other values as JSON), \
             and close with </tool_call>:\n<tool_call>FUNCTION-NAME{nl}<arg_key>ARGUMENT-NAME\
             </arg_key>{nl}<arg_value>VALUE</arg_value>{nl}</tool_call>"
        ));
        s
    }
}

/// The GLM-4.5+ family: calls begin at `<tool_call>`, after a `<think>` block.
static FAMILY: LazyLock<Family> = LazyLock::new(|| Family::new(&[BEGIN], driver::THINK));

fn skip_ws(s: &str, i: usize) -> usize {
    i + (s[i..].len() - s[i..].trim_start().len())
}

/// After a GLM-4 call message ending at byte `end` of `text`: past the `<|observation|>`
/// marker when it follows (settling there), or settled at `end` when no marker follows and
/// none may still be arriving. Returns where the next message starts.
fn end_message(text: &str, end: usize, out: &mut PartialOutput, content: &Content) -> usize {
    let k = skip_ws(text, end);
    if text[k..].starts_with(OBSERVATION) {
        let pos = k + OBSERVATION.len();
        scan::settle(out, content, pos);
        pos
    } else {
        if !OBSERVATION.starts_with(&text[k..]) {
            // No observation marker follows: the next message starts afresh.
            scan::settle(out, content, end);
        }
        end
    }
}

fn partial_marker(rest: &str, markers: &[&str]) -> bool {
    !rest.is_empty()
        && markers
            .iter()
            .any(|m| m.len() > rest.len() && m.starts_with(rest))
}

/// A bad call spans to the next `</tool_call>` (or the end); pending while that end may
/// still come.
fn bad(s: &str, from: usize, at_end: bool, error: ToolParseError) -> Step {
    Step::bad_until(
        s,
        from,
        END,
        at_end,
        error,
        Step::Pending(PartialCall::default()),
    )
}

/// Whether a `</arg_value>` followed by `after` is structural (`Some(true)`), text
/// (`Some(false)`), or not known yet (`None`).
fn structural(after: &str, at_end: bool) -> Option<bool> {
    let a = after.trim_start();
    if a.starts_with(KEY) || a.starts_with(END) || a.starts_with(BEGIN) {
        return Some(true);
    }
    if a.is_empty() {
        return if at_end { Some(true) } else { None };
    }
    if !at_end && partial_marker(a, &[KEY, END, BEGIN]) {
        return None;
    }
    Some(false)
}

fn read_call(s: &str, tools: &[Tool], at_end: bool) -> Step {
    let i = BEGIN.len();
    let Some(k) = s[i..].find(['\n', '<']) else {
        if at_end {
            let name = s[i..].trim();
            if !name.is_empty() && scan::check_call_name(name, tools).is_ok() {
                // `<tool_call>NAME` at the very end: a zero-argument call, unclosed.
                return Walk::new(name, tools, false).done(s.len());
            }
            return bad(s, i, at_end, ToolParseError::Unterminated);
        }
        return Step::Pending(PartialCall::default());
    };
    let name = s[i..i + k].trim();
    if let Err(e) = scan::check_call_name(name, tools) {
        return bad(s, i, at_end, e);
    }
    // GLM's `<arg_key>` pairs read into Qwen3-Coder's call state (undeclared values typed).
    let mut call = Walk::new(name, tools, false);
    let mut i = i + k;
    loop {
        let j = skip_ws(s, i);
        let rest = &s[j..];
        if rest.starts_with(END) {
            return call.done(j + END.len());
        }
        if rest.starts_with(BEGIN) {
            // `</tool_call>` missing before the next call.
            return call.done(j);
        }
        if rest.starts_with(KEY) {
            let kb = j + KEY.len();
            let Some(ke) = s[kb..].find(KEY_END) else {
                if at_end {
                    return bad(s, j, at_end, ToolParseError::Unterminated);
                }
                return Step::Pending(call.partial(None));
            };
            let key = s[kb..kb + ke].trim().to_owned();
            let vb = skip_ws(s, kb + ke + KEY_END.len());
            let after_key = &s[vb..];
            if !after_key.starts_with(VALUE) {
                if !at_end && (after_key.is_empty() || partial_marker(after_key, &[VALUE])) {
                    return Step::Pending(call.partial(None));
                }
                return bad(
                    s,
                    j,
                    at_end,
                    ToolParseError::Syntax(format!("expected {VALUE} after the key {key:?}")),
                );
            }
            let v = vb + VALUE.len();
            let mut from = v;
            let mut found = None;
            while let Some(c) = s[from..].find(VALUE_END) {
                let c = from + c;
                match structural(&s[c + VALUE_END.len()..], at_end) {
                    Some(true) => {
                        found = Some(c);
                        break;
                    }
                    Some(false) => from = c + VALUE_END.len(),
                    None => return Step::Pending(call.partial(Some((key, s[v..c].to_owned())))),
                }
            }
            match found {
                Some(c) => {
                    if call.params.iter().any(|(k, _)| *k == key) {
                        return bad(s, j, at_end, scan::argument_given_twice(&key));
                    }
                    call.params.push((key, s[v..c].to_owned()));
                    i = c + VALUE_END.len();
                }
                None if at_end => return bad(s, j, at_end, ToolParseError::Unterminated),
                None => {
                    let tail = &s[v..];
                    let n = scan::stable_len(tail, &[VALUE_END], false);
                    return Step::Pending(call.partial(Some((key, tail[..n].to_owned()))));
                }
            }
            continue;
        }
        if rest.is_empty() || (!at_end && partial_marker(rest, &[END, KEY, BEGIN])) {
            if at_end {
                // The closing `</tool_call>` never came: the call itself is whole.
                return call.done(j);
            }
            return Step::Pending(call.partial(None));
        }
        return bad(
            s,
            j,
            at_end,
            ToolParseError::Syntax(format!(
                "expected {KEY} or {END}, found {:?}",
                scan::found_text(rest, END)
            )),
        );
    }
}

const ASSISTANT: &str = "<|assistant|>";
const OBSERVATION: &str = "<|observation|>";

/// GLM-4-9b-chat (`glm4`): a call is the function's name on the first line of an
/// assistant message and its arguments as one JSON object on the next
/// (`get_weather\n{"city": "Paris"}`), the message ended by `<|observation|>`; an answer
/// without a call starts with `\n` (an empty first line). Several calls are consecutive
/// messages, each after `<|assistant|>`. This is the syntax recorded in BFCL's GLM-4-9b
/// results (not the GLM-4.5 one of section 4.8).
///
/// * Grammar: `auto` is either `\n` + free text or the calls; `required` and named are
///   the calls (`NAME\n` + the arguments' JSON), joined by `<|assistant|>` when parallel;
///   `none` is `\n` + free text.
/// * Parser: the first line must be a valid name and the next non-blank text `{` for a
///   call; otherwise the output is content. Text after the last call is content (without
///   the `<|assistant|>` that opens its message).
#[derive(Clone, Debug, Default)]
pub struct Glm4 {
    options: FormatOptions,
}

impl Glm4 {
    /// The format with `options`.
    pub fn new(options: FormatOptions) -> Self {
        Self { options }
    }
}

impl ToolCallFormat for Glm4 {
    format_name!("glm4");

    structural_tag_from_choice!(|f, _, mode, allowed, parallel| {
        let text = json!({"type": "sequence", "elements": [
            {"type": "const_string", "value": "\n"}, {"type": "any_text"}]});
        let calls: Vec<Value> = allowed
            .iter()
            .map(|t| {
                json!({"type": "tag", "begin": format!("{}\n", t.name),
                   "content": tags::json_arguments(t, &f.options), "end": ""})
            })
            .collect();
        let block = if parallel && mode != CallMode::Forced {
            json!({"type": "tags_with_separator", "tags": calls, "separator": ASSISTANT,
                   "at_least_one": true, "stop_after_first": false})
        } else {
            json!({"type": "or", "elements": calls})
        };
        let format = match mode {
            CallMode::None => text,
            CallMode::Auto => json!({"type": "or", "elements": [text, block]}),
            CallMode::Required | CallMode::Forced => block,
        };
        Ok(format)
    });

    parse_with_driver!(own: parse_turn, text_to_end: &[ASSISTANT]);

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        calls
            .iter()
            .map(|c| format!("{}\n{}", c.name, scan::python_json(&c.arguments)))
            .collect::<Vec<_>>()
            .join(ASSISTANT)
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        scan::result_text(result)
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from("# Available tools");
        for t in tools {
            s.push_str(&format!(
                "\n\n## {}\n\n{}\nCall it by writing its name on one line and its arguments \
                 as a JSON object on the next.",
                t.name,
                scan::python_json(&t.to_openai()["function"])
            ));
        }
        s
    }
}

impl Glm4 {
    /// The parse behind [`ToolCallFormat::parse_partial_from`].
    fn parse_turn(&self, parse: driver::Parse<'_>) -> PartialOutput {
        let (text, from, tools, at_end) = (parse.text, parse.from, parse.tools, parse.at_end);
        let mut out = PartialOutput::default();
        let mut content = Content::default();
        let mut pos = from.offset;
        loop {
            // An optional `<|assistant|>` before each message.
            let j = skip_ws(text, pos);
            let j = if text[j..].starts_with(ASSISTANT) {
                j + ASSISTANT.len()
            } else if !at_end && partial_marker(&text[j..], &[ASSISTANT]) {
                break;
            } else {
                j
            };
            let rest = &text[j..];
            if rest.is_empty() {
                break;
            }
            let Some(nl) = rest.find('\n') else {
                // One line so far: a name still arriving, or text (a name never holds
                // whitespace; a `\r` may end it).
                if at_end || rest.trim_end_matches('\r').contains(char::is_whitespace) {
                    if let Some(n) = content.push_tail(rest, &[ASSISTANT], at_end) {
                        scan::settle_open(&mut out, &content, j + n);
                    }
                }
                break;
            };
            let name = rest[..nl].trim_end_matches('\r');
            let body = &rest[nl + 1..];
            let b = skip_ws(body, 0);
            let looks_like_call = !name.is_empty()
                && !name.contains(char::is_whitespace)
                && (body[b..].starts_with('{') || (!at_end && b == body.len()));
            if !looks_like_call || (pos > 0 && name.is_empty()) {
                // The message is text (without its `<|assistant|>`, as when it has one line),
                // to the end of the output.
                if let Some(n) = content.push_tail(rest, &[ASSISTANT], at_end) {
                    scan::settle_open(&mut out, &content, j + n);
                }
                break;
            }
            if b == body.len() {
                break;
            }
            let json_start = j + nl + 1 + b;
            match scan::read_json_value(&text[json_start..]) {
                JsonRead::Complete { value, end } => {
                    let span_end = json_start + end;
                    let checked = scan::check_call_name(name, tools)
                        .and_then(|()| scan::arguments_object(&value))
                        .and_then(|v| {
                            scan::check_argument_keys(&text[json_start..span_end]).map(|()| v)
                        });
                    match checked {
                        Ok(args) => out.calls.push(PartialCall {
                            id: None,
                            name: Some(name.to_owned()),
                            arguments_text: text[json_start..span_end].to_owned(),
                            complete: Some(ToolCall::new(name, args)),
                        }),
                        Err(e) => {
                            scan::push_malformed(&mut out, &mut content, &text[j..span_end], j, e)
                        }
                    }
                    pos = end_message(text, span_end, &mut out, &content);
                }
                JsonRead::Incomplete if !at_end => {
                    if scan::check_call_name(name, tools).is_ok() {
                        out.calls.push(PartialCall {
                            id: None,
                            name: Some(name.to_owned()),
                            arguments_text: text[json_start..].trim_end().to_owned(),
                            complete: None,
                        });
                    }
                    break;
                }
                JsonRead::Incomplete => {
                    scan::push_malformed(
                        &mut out,
                        &mut content,
                        &text[j..],
                        j,
                        ToolParseError::Unterminated,
                    );
                    break;
                }
                JsonRead::Invalid(e) => match scan::balanced_end(&text[json_start..]) {
                    Some(end) => {
                        // Invalid JSON whose braces balance (string-aware): the malformed
                        // call ends there, and what follows is read afresh (a stream sends
                        // it without waiting for the end of the output).
                        let span_end = json_start + end;
                        scan::push_malformed(
                            &mut out,
                            &mut content,
                            &text[j..span_end],
                            j,
                            ToolParseError::InvalidJson(e),
                        );
                        pos = end_message(text, span_end, &mut out, &content);
                    }
                    None => {
                        // Not a call after all when the body is no JSON: the message is
                        // text, reported as a malformed call.
                        scan::push_malformed(
                            &mut out,
                            &mut content,
                            &text[j..],
                            j,
                            ToolParseError::InvalidJson(e),
                        );
                        if !at_end {
                            // Its extent is only known at the end.
                            out.errors.pop();
                            return PartialOutput {
                                calls: out.calls,
                                errors: out.errors,
                                ..PartialOutput::default()
                            };
                        }
                        break;
                    }
                },
            }
        }
        out.content = content.into_string();
        out
    }
}

#[cfg(test)]
mod tests;
