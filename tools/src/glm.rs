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

use serde_json::{json, Map, Value};

use super::driver::{self, Family, Step};

use super::qwen3_coder::{arguments_json_text, typed_arguments, xml_arguments};
use super::scan::{self, Content, JsonRead};
use super::tags::{self, Envelope};
use super::{
    CallMode, FormatOptions, PartialCall, PartialOutput, Settled, StructuralTag, Tool, ToolCall,
    ToolCallFormat, ToolChoice, ToolError, ToolParseError,
};

const BEGIN: &str = "<tool_call>";
const END: &str = "</tool_call>";
const KEY: &str = "<arg_key>";
const KEY_END: &str = "</arg_key>";
const VALUE: &str = "<arg_value>";
const VALUE_END: &str = "</arg_value>";
const THINK: &str = "<think>";
const THINK_END: &str = "</think>";

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
            section: None,
            leading_text_in_required: true,
            reasoning: Some((THINK.into(), THINK_END.into(), after_think.into())),
            excludes: [END, KEY, KEY_END, VALUE, VALUE_END, THINK, THINK_END]
                .iter()
                .map(|s| s.to_string())
                .collect(),
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

    fn structural_tag(
        &self,
        tools: &[Tool],
        choice: &ToolChoice,
        parallel: bool,
    ) -> Result<StructuralTag, ToolError> {
        let options = &self.options;
        let nl = if self.newlines { "\n" } else { "" };
        let (style, middle) = if self.newlines {
            ("glm_xml", "</arg_key>\n<arg_value>")
        } else {
            ("glm47_xml", "</arg_key><arg_value>")
        };
        tags::assemble(&self.envelope(), tools, choice, parallel, options, |t| {
            Ok(json!({"type": "tag",
                "begin": format!("{BEGIN}{}{nl}", t.name),
                "content": xml_arguments(t, options, self.name(), style, nl, (KEY, middle, VALUE_END))?,
                "end": END}))
        })
    }

    fn parse_partial(&self, text: &str, tools: &[Tool], at_end: bool) -> PartialOutput {
        self.parse_partial_from(text, &Settled::default(), tools, at_end)
    }

    fn parse_partial_from(
        &self,
        text: &str,
        from: &Settled,
        tools: &[Tool],
        at_end: bool,
    ) -> PartialOutput {
        let reasoning = self.options.reasoning;
        FAMILY.parse(
            text,
            from,
            reasoning,
            tools,
            at_end,
            |s, _, tools, at_end| read_call(s, tools, at_end),
        )
    }

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        let nl = if self.newlines { "\n" } else { "" };
        calls
            .iter()
            .map(|c| {
                let mut s = format!("{BEGIN}{}{nl}", c.name);
                if let Value::Object(args) = &c.arguments {
                    for (k, v) in args {
                        // JSON with `</` written `<\/` never holds a closing tag.
                        let v = match v {
                            Value::String(x) => x.clone(),
                            other => scan::python_json(other).replace("</", "<\\/"),
                        };
                        s.push_str(&format!("{KEY}{k}{KEY_END}{nl}{VALUE}{v}{VALUE_END}{nl}"));
                    }
                }
                s.push_str(END);
                s
            })
            .collect::<Vec<_>>()
            .join(nl)
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        let body = match result {
            Value::String(s) => s.clone(),
            other => scan::python_json(other),
        };
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

struct Call<'t> {
    name: String,
    props: Option<&'t Map<String, Value>>,
    /// The tool's whole input schema (for `$ref`s of properties).
    root: Option<&'t Map<String, Value>>,
    params: Vec<(String, String)>,
}

impl Call<'_> {
    fn pending(&self, partial: Option<(String, String)>) -> Step {
        Step::Pending(PartialCall {
            id: None,
            name: Some(self.name.clone()),
            arguments_text: arguments_json_text(
                &self.params,
                self.props,
                self.root,
                false,
                partial.as_ref(),
                false,
            ),
            complete: None,
        })
    }

    fn done(&self, len: usize) -> Step {
        let args = typed_arguments(&self.params, self.props, self.root, false);
        Step::Done {
            call: PartialCall {
                id: None,
                name: Some(self.name.clone()),
                arguments_text: arguments_json_text(
                    &self.params,
                    self.props,
                    self.root,
                    false,
                    None,
                    true,
                ),
                complete: Some(ToolCall::new(self.name.clone(), args)),
            },
            len,
        }
    }
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
                return Call {
                    name: name.to_owned(),
                    props: None,
                    root: None,
                    params: Vec::new(),
                }
                .done(s.len());
            }
            return bad(s, i, at_end, ToolParseError::Unterminated);
        }
        return Step::Pending(PartialCall::default());
    };
    let name = s[i..i + k].trim();
    if let Err(e) = scan::check_call_name(name, tools) {
        return bad(s, i, at_end, e);
    }
    let root = tools
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| t.input_schema.as_object());
    let props = root
        .and_then(|r| r.get("properties"))
        .and_then(Value::as_object);
    let mut call = Call {
        name: name.to_owned(),
        props,
        root,
        params: Vec::new(),
    };
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
                return call.pending(None);
            };
            let key = s[kb..kb + ke].trim().to_owned();
            let vb = skip_ws(s, kb + ke + KEY_END.len());
            let after_key = &s[vb..];
            if !after_key.starts_with(VALUE) {
                if !at_end && (after_key.is_empty() || partial_marker(after_key, &[VALUE])) {
                    return call.pending(None);
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
                    None => return call.pending(Some((key, s[v..c].to_owned()))),
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
                    return call.pending(Some((key, tail[..n].to_owned())));
                }
            }
            continue;
        }
        if rest.is_empty() || (!at_end && partial_marker(rest, &[END, KEY, BEGIN])) {
            if at_end {
                // The closing `</tool_call>` never came: the call itself is whole.
                return call.done(j);
            }
            return call.pending(None);
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
    fn name(&self) -> &str {
        "glm4"
    }

    fn structural_tag(
        &self,
        tools: &[Tool],
        choice: &ToolChoice,
        parallel: bool,
    ) -> Result<StructuralTag, ToolError> {
        let (mode, allowed) = choice.resolve(tools)?;
        let text = json!({"type": "sequence", "elements": [
            {"type": "const_string", "value": "\n"}, {"type": "any_text"}]});
        let calls: Vec<Value> = allowed
            .iter()
            .map(|t| {
                json!({"type": "tag", "begin": format!("{}\n", t.name),
                   "content": tags::json_arguments(t, &self.options), "end": ""})
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
        StructuralTag::from_json(&json!({"type": "structural_tag", "format": format})).map_err(
            |e| ToolError::Unsupported {
                format: "glm4".into(),
                reason: e.to_string(),
            },
        )
    }

    fn parse_partial(&self, text: &str, tools: &[Tool], at_end: bool) -> PartialOutput {
        self.parse_partial_from(text, &Settled::default(), tools, at_end)
    }

    fn parse_partial_from(
        &self,
        text: &str,
        from: &Settled,
        tools: &[Tool],
        at_end: bool,
    ) -> PartialOutput {
        let mut out = PartialOutput::default();
        let mut content = Content::resumed(from.content_open);
        let mut pos = from.offset;
        if from.content_open {
            // Settled inside a text message, which runs to the end: the rest of it.
            if let Some(n) = content.push_tail(&text[pos..], &[ASSISTANT], at_end) {
                scan::settle_open(&mut out, &content, pos + n);
            }
            out.content = content.into_string();
            return out;
        }
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

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        calls
            .iter()
            .map(|c| format!("{}\n{}", c.name, scan::python_json(&c.arguments)))
            .collect::<Vec<_>>()
            .join(ASSISTANT)
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        match result {
            Value::String(s) => s.clone(),
            other => scan::python_json(other),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{StreamEvent, StreamingParser};

    fn tools() -> Vec<Tool> {
        Tool::list_from_openai(&json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"},
                "days": {"type": "integer"}, "hours": {"type": "array"}},
                "required": ["city"]}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {
                "type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}},
            {"type": "function", "function": {"name": "get_current_time",
                "parameters": {"type": "object", "properties": {}}}}
        ]))
        .unwrap()
    }

    const WORKED: &str = "<think>Both need tools.</think>\nLet me check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>Europe/Paris</arg_value>\n</tool_call>";

    #[test]
    fn parses_the_worked_example() {
        let f = Glm::glm45(FormatOptions {
            reasoning: true,
            ..FormatOptions::default()
        });
        let out = f.parse(WORKED, &tools());
        assert_eq!(out.reasoning.as_deref(), Some("Both need tools."));
        assert_eq!(out.content.as_deref(), Some("Let me check."));
        assert_eq!(
            out.tool_calls,
            vec![
                ToolCall::new("get_weather", json!({"city": "Paris"})),
                ToolCall::new("get_time", json!({"tz": "Europe/Paris"})),
            ]
        );
        // The 4.7 reader is the same: it reads 4.5 output too.
        assert_eq!(
            Glm::glm47(f.options().clone())
                .parse(WORKED, &tools())
                .tool_calls,
            out.tool_calls
        );
    }

    #[test]
    fn glm47_zero_argument_and_typed_values() {
        let f = Glm::glm47(FormatOptions::default());
        let text = "<tool_call>get_current_time</tool_call><tool_call>get_weather<arg_key>city</arg_key><arg_value>10</arg_value><arg_key>days</arg_key><arg_value>3</arg_value><arg_key>hours</arg_key><arg_value>[1, 2]</arg_value><arg_key>x</arg_key><arg_value>true</arg_value></tool_call>";
        let out = f.parse(text, &tools());
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert_eq!(
            out.tool_calls,
            vec![
                ToolCall::new("get_current_time", json!({})),
                ToolCall::new(
                    "get_weather",
                    json!({"city": "10", "days": 3, "hours": [1, 2], "x": true})
                ),
            ]
        );
        let calls = out.tool_calls;
        assert_eq!(f.parse(&f.render_calls(&calls), &tools()).tool_calls, calls);
    }

    #[test]
    fn markers_inside_values_and_reasoning() {
        let f = Glm::glm45(FormatOptions {
            reasoning: true,
            ..FormatOptions::default()
        });
        let calls = vec![ToolCall::new(
            "get_weather",
            json!({"city": "a </arg_value> b <tool_call>x</tool_call>"}),
        )];
        let text = format!(
            "<think>try <tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call></think>\n{}",
            f.render_calls(&calls)
        );
        let out = f.parse(&text, &tools());
        assert_eq!(out.tool_calls, calls);
        assert!(out.reasoning.unwrap().contains("get_time"));
        assert_eq!(out.content, None);
    }

    #[test]
    fn unknown_tool_and_unterminated_are_errors() {
        let f = Glm::default();
        let bad = "<tool_call>nope\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>";
        let out = f.parse(&format!("Hi.\n{bad}"), &tools());
        assert_eq!(
            out.errors[0].error,
            ToolParseError::UnknownTool {
                name: "nope".into()
            }
        );
        assert_eq!(out.content.unwrap(), format!("Hi.\n{bad}"));
        let cut = "<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UT";
        let out = f.parse(cut, &tools());
        assert_eq!(out.errors[0].error, ToolParseError::Unterminated);
        assert_eq!(out.content.as_deref(), Some(cut));
        // Invalid JSON in a non-string value stays text (the call is kept).
        let out = f.parse(
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>x</arg_value>\n<arg_key>hours</arg_key>\n<arg_value>[1, </arg_value>\n</tool_call>",
            &tools(),
        );
        assert_eq!(
            out.tool_calls[0].arguments,
            json!({"city": "x", "hours": "[1, "})
        );
    }

    #[test]
    fn streaming_holds_back_and_reads_several_calls_in_one_chunk() {
        let f = Glm::default();
        let ts = tools();
        let mut p = StreamingParser::new(&f, &ts);
        assert_eq!(
            p.push("Let me check.\n<tool_"),
            vec![StreamEvent::Content("Let me check.".into())]
        );
        let mut ev =
            p.push(&WORKED["<think>Both need tools.</think>\nLet me check.\n<tool_".len()..]);
        ev.extend(p.finish());
        let ends: Vec<ToolCall> = ev
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCallEnd { call, .. } => Some(call.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(ends.len(), 2);
        let mut p = StreamingParser::new(&f, &ts);
        let mut args = String::new();
        for chunk in [
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Pa",
            "ris</arg_val",
            "ue>\n</tool_call>",
        ] {
            for e in p.push(chunk) {
                if let StreamEvent::ToolCallArguments { delta, .. } = e {
                    args.push_str(&delta);
                }
            }
        }
        assert_eq!(args, "{\"city\": \"Paris\"}");
    }

    #[test]
    fn glm4_name_and_json() {
        let f = Glm4::default();
        let ts = tools();
        let out = f.parse("get_time\n{\"tz\": \"UTC\"}", &ts);
        assert_eq!(
            out.tool_calls,
            vec![ToolCall::new("get_time", json!({"tz": "UTC"}))]
        );
        let out = f.parse("\nIt is sunny.", &ts);
        assert_eq!(out.content.as_deref(), Some("It is sunny."));
        assert!(out.tool_calls.is_empty());
        let calls = vec![
            ToolCall::new("get_time", json!({"tz": "UTC"})),
            ToolCall::new("get_weather", json!({"city": "Oslo"})),
        ];
        assert_eq!(f.parse(&f.render_calls(&calls), &ts).tool_calls, calls);
        let out = f.parse("nope\n{}", &ts);
        assert!(matches!(
            out.errors[0].error,
            ToolParseError::UnknownTool { .. }
        ));
        let out = f.parse("get_time\n{\"tz\": }", &ts);
        assert!(matches!(
            out.errors[0].error,
            ToolParseError::InvalidJson(_)
        ));
    }

    #[test]
    fn bad_input_never_panics() {
        let ts = tools();
        for f in [
            &Glm::default() as &dyn ToolCallFormat,
            &Glm::glm47(FormatOptions::default()),
            &Glm4::default(),
        ] {
            for text in [WORKED, "get_time\n{\"tz\": \"é\"}<|assistant|>get_time\n{"] {
                for i in 0..=text.len() {
                    if text.is_char_boundary(i) {
                        let _ = f.parse_partial(&text[..i], &ts, false);
                        let _ = f.parse(&text[..i], &ts);
                        let _ = f.parse(&text[i..], &ts);
                    }
                }
            }
        }
    }

    /// GLM markers, names, values and fragments, for random texts.
    const SOUP: &[&str] = &[
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
        "<tool_call>get_time<arg_key>tz</arg_key><arg_value>UTC</arg_value></tool_call>",
        "<tool_call>get_current_time</tool_call>",
        "<tool_call>get_weather<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
        "<tool_call>",
        "</tool_call>",
        "<tool_call>get_weather\n",
        "<tool_call>get_time",
        "get_weather",
        "get_time",
        "get_current_time",
        "nope",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
        "<arg_key>city</arg_key>",
        "<arg_key>days</arg_key>",
        "<arg_key>tz</arg_key>",
        "<arg_key>x</arg_key>",
        "<arg_value>Paris</arg_value>",
        "<arg_value>3</arg_value>",
        "city",
        "3",
        "[1, 2",
        "]",
        "Paris",
        "<think>",
        "</think>",
        "<|assistant|>",
        "<|observation|>",
        "{\"tz\": \"UTC\"}",
        "{\"city\": ",
        "{",
        "}",
        "\"",
        "<",
        "</",
        "<arg",
        "</arg_",
        "<tool_",
        "\n",
        "\n",
        " ",
        "\r",
        "é",
        "Sure.",
    ];

    /// How GLM-4 outputs start: a call, part of one, or text.
    const GLM4_STARTS: &[&str] = &[
        "",
        "",
        "\n",
        "get_time\n{\"tz\": \"UTC\"}",
        "get_weather\n{\"city\": \"Oslo\"}<|observation|><|assistant|>get_time\n{\"tz\": \"UTC\"}",
        "get_time\n",
        "nope\n{}",
    ];

    fn soup() -> impl proptest::strategy::Strategy<Value = (String, bool, bool)> {
        use proptest::prelude::*;
        (
            (
                prop::sample::select(GLM4_STARTS),
                prop::collection::vec(
                    prop_oneof![6 => prop::sample::select(SOUP).prop_map(String::from),
                                1 => "[ -~]{0,4}"],
                    0..12,
                ),
            )
                .prop_map(|(start, v)| format!("{start}{}", v.concat())),
            any::<bool>(),
            any::<bool>(),
        )
    }

    #[test]
    fn glm_streams_random_text_as_whole() {
        let ts = tools();
        let calls = std::cell::Cell::new([0; 3]);
        let mut runner =
            proptest::test_runner::TestRunner::new(crate::test_support::stream_check_config(600));
        runner
            .run(&soup(), |(text, reasoning, no_tools)| {
                let options = FormatOptions {
                    reasoning,
                    ..FormatOptions::default()
                };
                let tools: &[Tool] = if no_tools { &[] } else { &ts };
                for (i, f) in [
                    &Glm::glm45(options.clone()) as &dyn ToolCallFormat,
                    &Glm::glm47(options.clone()),
                    &Glm4::new(options.clone()),
                ]
                .into_iter()
                .enumerate()
                {
                    if !f.parse(&text, tools).tool_calls.is_empty() {
                        let mut c = calls.get();
                        c[i] += 1;
                        calls.set(c);
                    }
                    crate::test_support::check_streams_as_whole(f, tools, &text).map_err(|e| {
                        proptest::test_runner::TestCaseError::fail(format!("{}: {e}", f.name()))
                    })?;
                }
                Ok(())
            })
            .unwrap();
        // Enough of the texts hold calls for the check to mean something.
        assert!(calls.get().iter().all(|&n| n >= 50), "{:?}", calls.get());
    }

    #[test]
    fn error_quotes_no_text_after_the_malformed_call() {
        let text = "<tool_call>get_weather\nxy</tool_call> and text after it";
        let out = Glm::default().parse(text, &tools());
        assert_eq!(
            out.errors[0].error,
            ToolParseError::Syntax(
                "expected <arg_key> or </tool_call>, found \"xy</tool_call>\"".into()
            )
        );
        crate::test_support::check_streams_as_whole(&Glm::default(), &tools(), text).unwrap();
    }

    #[test]
    fn a_key_given_twice_is_a_malformed_call() {
        // It was last-wins, dropping the first value silently (rule 6).
        let f = Glm::glm47(FormatOptions::default());
        let text = "<tool_call>get_time<arg_key>tz</arg_key><arg_value>UTC</arg_value><arg_key>tz</arg_key><arg_value>CET</arg_value></tool_call>";
        let out = f.parse(text, &tools());
        assert!(out.tool_calls.is_empty());
        assert_eq!(
            out.errors[0].error,
            ToolParseError::Syntax("argument \"tz\" given twice".into())
        );
        assert_eq!(out.content.as_deref(), Some(text));
        crate::test_support::check_streams_as_whole(&f, &tools(), text).unwrap();
    }

    #[test]
    fn glm4_text_message_after_a_call_drops_its_assistant_marker() {
        let f = Glm4::default();
        for text in [
            "get_time\n{\"tz\": \"UTC\"}<|assistant|>It is sunny.\nReally.",
            "get_time\n{\"tz\": \"UTC\"}<|assistant|>It is sunny.",
        ] {
            let out = f.parse(text, &tools());
            assert_eq!(out.tool_calls.len(), 1);
            assert!(out.content.unwrap().starts_with("It is sunny."));
            crate::test_support::check_streams_as_whole(&f, &tools(), text).unwrap();
        }
    }

    #[test]
    fn glm4_name_line_ending_in_carriage_return() {
        let f = Glm4::default();
        let text = "get_time\r\n{\"tz\": \"UTC\"}";
        assert_eq!(
            f.parse(text, &tools()).tool_calls,
            vec![ToolCall::new("get_time", json!({"tz": "UTC"}))]
        );
        crate::test_support::check_streams_as_whole(&f, &tools(), text).unwrap();
    }

    #[test]
    fn ref_string_enums_render_as_the_grammar_writes_them() {
        let ts = crate::qwen3_coder::tests::ref_enum_tools();
        for f in [
            Glm::glm45(FormatOptions::default()),
            Glm::glm47(FormatOptions::default()),
        ] {
            let tag = f.structural_tag(&ts, &ToolChoice::Required, true).unwrap();
            let g = crate::test_support::compile_on_ascii(&tag);
            for args in [
                json!({"unit": "celsius", "level": "1"}),
                json!({"unit": "fahrenheit", "level": "true", "note": "3"}),
            ] {
                crate::test_support::assert_round_trips(&f, &g, &ToolCall::new("set", args), &ts);
            }
        }
    }

    #[test]
    fn strings_of_mixed_schemas_render_as_the_grammar_writes_them() {
        use crate::qwen3_coder::tests::{mixed_string_calls, mixed_string_tools};
        use tokensieve::GrammarMatcher;
        let ts = mixed_string_tools();
        for f in [
            Glm::glm45(FormatOptions::default()),
            Glm::glm47(FormatOptions::default()),
        ] {
            let tag = f.structural_tag(&ts, &ToolChoice::Required, true).unwrap();
            let g = crate::test_support::compile_on_ascii(&tag);
            for args in mixed_string_calls() {
                let call = ToolCall::new("paint", args);
                let text = f.try_render_calls(std::slice::from_ref(&call)).unwrap();
                let mut m = GrammarMatcher::new(g.clone());
                assert!(m.accept_string(&text) && m.is_completed(), "{text}");
                assert_eq!(f.parse(&text, &ts).tool_calls, vec![call], "{text}");
                crate::test_support::assert_streams_as_whole(&f, &text, &ts);
            }
            let call = ToolCall::new("paint", json!({"label": "null", "id": "42"}));
            assert_eq!(
                f.parse(&f.render_calls(&[call]), &ts).tool_calls[0].arguments,
                json!({"label": null, "id": 42})
            );
        }
    }

    #[test]
    fn values_holding_the_closing_tag_are_escaped_or_refused() {
        let ts = Tool::list_from_openai(&json!([{"type": "function", "function": {
            "name": "write", "parameters": {"type": "object", "properties": {
                "path": {"type": "string"}, "body": {"type": "string"},
                "meta": {"type": "object"}}}}}]))
        .unwrap();
        for f in [
            Glm::glm45(FormatOptions::default()),
            Glm::glm47(FormatOptions::default()),
        ] {
            // JSON values: `</` is written `<\/`, the same JSON, never a closing tag.
            let call = ToolCall::new(
                "write",
                json!({"path": "a", "meta": {"k": "x</arg_value><arg_key>y</arg_key>"}}),
            );
            let text = f.try_render_calls(std::slice::from_ref(&call)).unwrap();
            assert!(!text.contains("x</arg_value>"), "{text}");
            assert_eq!(f.parse(&text, &ts).tool_calls, vec![call]);
            // A raw string holding `</arg_value>`: a typed error naming the parameter.
            let call = ToolCall::new("write", json!({"path": "a", "body": "x</arg_value>"}));
            match f.try_render_calls(&[call]) {
                Err(ToolError::Unsupported { format, reason }) => {
                    assert_eq!(format, f.name());
                    assert!(
                        reason.contains("\"body\"") && reason.contains("</arg_value>"),
                        "{reason}"
                    );
                }
                other => panic!("{other:?}"),
            }
            // Other markers in a raw string round-trip.
            let call = ToolCall::new(
                "write",
                json!({"path": "<arg_key>", "body": "</tool_call>"}),
            );
            let text = f.try_render_calls(std::slice::from_ref(&call)).unwrap();
            assert_eq!(f.parse(&text, &ts).tool_calls, vec![call]);
        }
    }
}
