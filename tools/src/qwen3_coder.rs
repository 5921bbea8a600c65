//! Qwen3-Coder (and Qwen3.5 / Qwen3.6): XML-like `<function=NAME>` calls with one
//! `<parameter=KEY>` element per argument (section 4.2 of the tool-call format notes;
//! vLLM's `qwen3_coder` / `qwen3_xml` parsers, XGrammar's `qwen_3_coder` builtin).
//!
//! ```text
//! <tool_call>
//! <function=get_weather>
//! <parameter=city>
//! Paris
//! </parameter>
//! <parameter=days>
//! 3
//! </parameter>
//! </function>
//! </tool_call>
//! ```

use std::sync::LazyLock;

use serde_json::{json, Map, Value};

use super::driver::{self, Family, Step};

use super::scan;
use super::tags::{self, Envelope};
use super::{
    FormatOptions, PartialCall, StructuralTag, Tool, ToolCall, ToolCallFormat, ToolError,
    ToolParseError,
};

// The Hermes `<tool_call>` block, with this family's body inside.
use super::hermes::{self, BEGIN, END};
const FUNC: &str = "<function=";
const FUNC_END: &str = "</function>";
const PARAM: &str = "<parameter=";
const CLOSE: &str = "</parameter>";

format_with_options! {
    /// The Qwen3-Coder XML format (`qwen3_coder`, also registered as `qwen3_xml`).
    ///
    /// * Grammar (the Qwen3-Coder chat template's exact whitespace): each call is
    ///   `<tool_call>\n<function=NAME>\n`, then per argument
    ///   `<parameter=KEY>\nVALUE\n</parameter>\n`, then `</function>\n</tool_call>`, calls
    ///   joined by `\n`; string-typed values are raw text
    ///   that never contains `</parameter>` (`minLength`/`maxLength` count its characters,
    ///   `pattern`/`format` match it; a keyword the style cannot express makes
    ///   [`ToolCallFormat::structural_tag`] fail with [`ToolError::Unsupported`] naming the
    ///   tool, the parameter and the keyword), other values JSON under their schema (the
    ///   `qwen_xml` structural-tag style), in the schema's declared order; a tool whose
    ///   arguments are unconstrained (no properties, see [`super::ArgumentSchemas`]) takes any
    ///   parameter names with raw values. Content may precede the first call (also under
    ///   `required`); free text never contains `<tool_call>` or `<function=`. With
    ///   [`FormatOptions::reasoning`] (Qwen3.5/3.6) a `<think>…</think>\n\n` block comes first.
    ///   [`FormatOptions::any_order`] does not apply (the style has a fixed order).
    /// * Parser: values lose exactly one leading and one trailing `\n` and are typed by the
    ///   tool's schema (`scan::typed_xml_value`: `type: "string"` raw, else JSON, else a
    ///   Python literal such as `True`/`None`, else text; undeclared parameters stay text;
    ///   schemas admitting strings among other values as below).
    ///   A `</parameter>` is structural only when, after whitespace, `<parameter=KEY>` with a
    ///   KEY of the schema, `</function>`, `</tool_call>` or the end of the output follows
    ///   (vLLM's rule), so values may contain the closing tag's text; a missing
    ///   `</parameter>` is recovered at the next undeclared-so-far `<parameter=KEY>` of the
    ///   schema or at `</function>`. Literal nested `<parameter=` opens are not depth-counted
    ///   (the grammar lets values contain that text). A missing `<tool_call>` wrapper (a bare
    ///   `<function=`) and a missing `</tool_call>` before the next call or the end are
    ///   tolerated.
    /// * Rendering: strings raw, other values JSON (`</` written `<\/`); a string value
    ///   holding a closing tag cannot be written — [`Qwen3Coder::try_render_calls`] refuses
    ///   it, [`ToolCallFormat::render_calls`] writes it raw and it does not parse back.
    /// * Streaming: string values stream as JSON-escaped text inside the arguments' JSON
    ///   (`{"city": "Par`), other values once complete; a value not yet closed streams only
    ///   as far as it is certain to reach (never past a `</parameter>` not yet known to be
    ///   structural, nor past a place where a missing `</parameter>` would be recovered, nor
    ///   with whitespace that either end may drop). A parameter given twice makes the call
    ///   malformed (`argument "KEY" given twice`, its text kept in content), as in every
    ///   family.
    /// * Properties admitting strings among other values (schemars' `Option<String>`,
    ///   `"type": ["string", "null"]`; `["integer", "string"]`; an `anyOf`/`oneOf` with a
    ///   string branch, through local `$ref`s, such as `Option` of a string enum): the grammar
    ///   takes the raw text of the string branches (with their `enum`/`const`) or the JSON of
    ///   the other branches, as the template writes them; the parser reads the text as a
    ///   non-string value only when it is JSON valid under a non-string branch, else as the
    ///   string (`null` is null for an `Option<String>`, `None` and `true` stay strings; `42`
    ///   is 42 for `["integer", "string"]`, `4.5` and `abc` strings). The ambiguity is
    ///   inherent to raw values: the string `"42"` of an `["integer", "string"]` property
    ///   renders as `42` and reads back as the integer, the string `"null"` of an
    ///   `Option<String>` reads back as null. Such values stream once whole.
    pub struct Qwen3Coder;
}

impl Qwen3Coder {
    /// `calls` as [`ToolCallFormat::render_calls`] writes them, refusing what would not
    /// parse back. String values are raw text with no escape (section 4.2 of the
    /// tool-call format notes), so one holding `</parameter>`, `</function>` or
    /// `</tool_call>` cannot be written: the grammar forbids `</parameter>` in a raw value,
    /// and the parser may end the value, the call or the block there. Other values are
    /// JSON with every `</` written `<\/` (the same JSON, never a closing tag), so they
    /// always render.
    ///
    /// # Errors
    /// [`ToolError::Unsupported`] naming the call, the parameter and the closing tag.
    pub fn try_render_calls(&self, calls: &[ToolCall]) -> Result<String, ToolError> {
        for c in calls {
            let Value::Object(args) = &c.arguments else {
                continue;
            };
            for (k, v) in args {
                let Value::String(text) = v else { continue };
                if let Some(tag) = [CLOSE, FUNC_END, END]
                    .into_iter()
                    .find(|t| text.contains(t))
                {
                    return Err(ToolError::Unsupported {
                        format: "qwen3_coder".into(),
                        reason: format!(
                            "call to {:?}: the value of parameter {k:?} holds {tag}, which a \
                             raw string value cannot carry (the format has no escape)",
                            c.name
                        ),
                    });
                }
            }
        }
        Ok(self.render_calls(calls))
    }

    /// Hermes' `<tool_call>` envelope ([`hermes::block_envelope`]: Qwen3-Coder is Hermes
    /// with an XML body in the same block), `<function=` also excluded from free text and
    /// the body's markers kept out of argument strings.
    fn envelope(&self) -> Envelope {
        let mut envelope = hermes::block_envelope();
        envelope.excludes.insert(0, FUNC.into());
        envelope
            .markers
            .extend([FUNC, FUNC_END, PARAM, CLOSE].map(String::from));
        envelope
    }
}

/// The arguments part of an XML-style call tag: the tool's schema in `style` followed by
/// `item_end` when at least one item is written (an all-optional schema also allows no
/// items and no `item_end`), or, for a tool whose arguments are unconstrained, any number
/// of `open NAME middle RAW close` items. Shared by the Qwen3-Coder and GLM families
/// (`format` names the family in errors).
///
/// The part is lowered once here, so that a schema the style cannot express fails now,
/// for this tool, rather than when the whole tag is compiled.
///
/// # Errors
/// [`ToolError::Unsupported`] naming the tool, with the lowering's message (the
/// parameter, the keyword and why).
pub(crate) fn xml_arguments(
    tool: &Tool,
    options: &FormatOptions,
    format: &str,
    style: &str,
    trailing: &str,
    any_item: (&str, &str, &str),
) -> Result<Value, ToolError> {
    let part = xml_arguments_part(tool, options, style, trailing, any_item);
    StructuralTag::from_json(&json!({"type": "structural_tag", "format": part}))
        .and_then(|tag| tokensieve::structural_tag::structural_tag_to_grammar(&tag, None))
        .map_err(|e| ToolError::Unsupported {
            format: format.into(),
            reason: format!("tool {:?}: {e}", tool.name),
        })?;
    Ok(part)
}

/// Whether an arguments schema declares no property and allows others: its calls' XML
/// parameters are any key/value pairs, not a JSON Schema's.
pub(crate) fn free_form(schema: &Value) -> bool {
    let has_props = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    let open_ended = schema.get("additionalProperties") != Some(&Value::Bool(false));
    !has_props && open_ended
}

fn xml_arguments_part(
    tool: &Tool,
    options: &FormatOptions,
    style: &str,
    trailing: &str,
    any_item: (&str, &str, &str),
) -> Value {
    let schema = tags::argument_schema(tool, options);
    if free_form(&schema) {
        let (open, middle, close) = any_item;
        let item = json!({"type": "sequence", "elements": [
            {"type": "const_string", "value": open},
            {"type": "regex", "pattern": "[A-Za-z_][A-Za-z0-9_.-]{0,63}"},
            {"type": "const_string", "value": middle},
            {"type": "any_text", "excludes": [close]},
            {"type": "const_string", "value": format!("{close}{trailing}")}]});
        return json!({"type": "star", "content": item});
    }
    let mut body = json!({"type": "json_schema", "json_schema": schema, "style": style});
    super::tags::set_json_limits(&mut body, options);
    let with_end = if trailing.is_empty() {
        body
    } else {
        json!({"type": "sequence", "elements": [body, {"type": "const_string", "value": trailing}]})
    };
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty());
    if required || trailing.is_empty() {
        with_end
    } else {
        json!({"type": "optional", "content": with_end})
    }
}

impl ToolCallFormat for Qwen3Coder {
    format_name!("qwen3_coder");

    structural_tag_from_envelope!(|_, options, t| {
        Ok(json!({"type": "tag",
                "begin": format!("{BEGIN}\n{FUNC}{}>\n", t.name),
                "content": xml_arguments(t, options, "qwen3_coder", "qwen_xml", "\n", (PARAM, ">\n", "\n</parameter>"))?,
                "end": format!("{FUNC_END}\n{END}")}))
    });

    parse_with_driver!(calls: FAMILY, |s, marker, tools, at_end| read_call(s, marker == 0, tools, at_end));

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        let open = |name: &str| format!("{BEGIN}\n{FUNC}{name}>\n");
        let param = |k: &str, v: &Value| format!("{PARAM}{k}>\n{}\n{CLOSE}\n", raw_value(v));
        scan::render_xml_calls(calls, open, param, &format!("{FUNC_END}\n{END}"), "\n")
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        format!("<tool_response>\n{}\n</tool_response>", raw_value(result))
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from(
            "# Tools\n\nThese functions are available. Each is described inside <tools></tools> \
             with its name, purpose and parameters:\n<tools>",
        );
        for t in tools {
            s.push_str(&format!("\n<function>\n<name>{}</name>", t.name));
            if !t.description.is_empty() {
                s.push_str(&format!("\n<description>{}</description>", t.description));
            }
            s.push_str("\n<parameters>");
            let required = t.required_arguments();
            if let Some(props) = t.input_schema.get("properties").and_then(Value::as_object) {
                for (name, p) in props {
                    s.push_str(&format!("\n<parameter>\n<name>{name}</name>"));
                    if let Some(obj) = p.as_object() {
                        for (k, v) in obj {
                            let v = match v {
                                Value::String(x) => x.clone(),
                                other => scan::python_json(other),
                            };
                            s.push_str(&format!("\n<{k}>{v}</{k}>"));
                        }
                    }
                    s.push_str("\n</parameter>");
                }
            }
            if !required.is_empty() {
                s.push_str(&format!(
                    "\n<required>{}</required>",
                    scan::python_json(&json!(required))
                ));
            }
            s.push_str("\n</parameters>\n</function>");
        }
        s.push_str(
            "\n</tools>\n\nTo call a function, answer with a block of this shape and nothing \
             after it:\n<tool_call>\n<function=NAME>\n<parameter=ARGUMENT>\nVALUE\n</parameter>\n\
             </function>\n</tool_call>\nWrite text values as they are and other values as JSON; \
             give every required parameter. You may explain your reasoning before a call, \
             never after it.",
        );
        s
    }
}

/// A value as the template writes it: strings raw, everything else JSON, with `</`
/// written `<\/` (it can only occur inside a JSON string, where both mean `</`) so the
/// JSON never holds a closing tag.
fn raw_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => scan::python_json(other).replace("</", "<\\/"),
    }
}

/// The Qwen3-Coder family: a call begins at `<tool_call>` (wrapped, marker 0) or at a bare
/// `<function=` (marker 1), after a `<think>` block.
static FAMILY: LazyLock<Family> = LazyLock::new(|| Family::new(&[BEGIN, FUNC], driver::THINK));

fn skip_ws(s: &str, i: usize) -> usize {
    i + (s[i..].len() - s[i..].trim_start().len())
}

/// True when `rest` is non-empty and a proper prefix of one of `markers`.
fn partial_marker(rest: &str, markers: &[&str]) -> bool {
    !rest.is_empty()
        && markers
            .iter()
            .any(|m| m.len() > rest.len() && m.starts_with(rest))
}

/// A bad call: it spans to the end marker (`</tool_call>`, or `</function>` for a bare
/// call) after `from`, or to the end of the output; while the output is still arriving and
/// that end is not there, the call is pending (so its text is never sent twice).
fn bad(s: &str, from: usize, wrapped: bool, at_end: bool, error: ToolParseError) -> Step {
    let end = if wrapped { END } else { FUNC_END };
    Step::bad_until(
        s,
        from,
        end,
        at_end,
        error,
        Step::Pending(PartialCall::default()),
    )
}

/// Reads one call from `s` (which starts with `<tool_call>` when `wrapped`, else with
/// `<function=`).
fn read_call(s: &str, wrapped: bool, tools: &[Tool], at_end: bool) -> Step {
    let mut i = if wrapped { skip_ws(s, BEGIN.len()) } else { 0 };
    let rest = &s[i..];
    if !rest.starts_with(FUNC) {
        if !at_end && (rest.is_empty() || partial_marker(rest, &[FUNC])) {
            return Step::Pending(PartialCall::default());
        }
        return bad(
            s,
            i,
            wrapped,
            at_end,
            ToolParseError::Syntax(format!("expected {FUNC}NAME> after {BEGIN}")),
        );
    }
    i += FUNC.len();
    let Some(gt) = s[i..].find(['>', '\n']) else {
        if at_end {
            return bad(s, i, wrapped, at_end, ToolParseError::Unterminated);
        }
        return Step::Pending(PartialCall::default());
    };
    let name = &s[i..i + gt];
    if s.as_bytes()[i + gt] != b'>' {
        return bad(
            s,
            i,
            wrapped,
            at_end,
            ToolParseError::InvalidName {
                name: name.to_owned(),
            },
        );
    }
    if let Err(e) = scan::check_call_name(name, tools) {
        return bad(s, i, wrapped, at_end, e);
    }
    i += gt + 1;
    let mut w = Walk::new(name, tools, true);
    loop {
        let j = skip_ws(s, i);
        let rest = &s[j..];
        if rest.starts_with(PARAM) {
            match w.read_param(s, j, at_end) {
                Param::Done(next) => {
                    if let Some((key, _)) = w.params.last() {
                        if w.params[..w.params.len() - 1].iter().any(|(k, _)| k == key) {
                            let e = scan::argument_given_twice(key);
                            return bad(s, j, wrapped, at_end, e);
                        }
                    }
                    i = next
                }
                Param::Pending(partial) => return Step::Pending(w.partial(partial)),
                Param::Bad(e) => return bad(s, j, wrapped, at_end, e),
            }
        } else if rest.starts_with(FUNC_END) {
            let k = skip_ws(s, j + FUNC_END.len());
            let after = &s[k..];
            if after.starts_with(END) {
                return w.done(k + END.len());
            }
            if after.is_empty() || partial_marker(after, &[END, BEGIN, FUNC]) {
                if at_end {
                    // The closing `</tool_call>` never came, or came cut off at the end of
                    // the output (then it is this call's end): the call itself is whole.
                    if !after.is_empty() && END.starts_with(after) {
                        return w.done(s.len());
                    }
                    return w.done(j + FUNC_END.len());
                }
                // Not known yet whether a `</tool_call>` (even after a bare call) ends it.
                return Step::Pending(w.partial(None));
            }
            if !wrapped || after.starts_with(BEGIN) || after.starts_with(FUNC) {
                return w.done(j + FUNC_END.len());
            }
            return bad(
                s,
                j,
                wrapped,
                at_end,
                ToolParseError::Syntax(format!("expected {END} after {FUNC_END}")),
            );
        } else if wrapped && rest.starts_with(END) {
            // `</function>` missing.
            return w.done(j + END.len());
        } else if rest.is_empty() || (!at_end && partial_marker(rest, &[PARAM, FUNC_END, END])) {
            if at_end {
                return bad(s, j, wrapped, at_end, ToolParseError::Unterminated);
            }
            return Step::Pending(w.partial(None));
        } else {
            return bad(
                s,
                j,
                wrapped,
                at_end,
                ToolParseError::Syntax(format!(
                    "expected {PARAM}NAME> or {FUNC_END}, found {:?}",
                    scan::found_text(rest, if wrapped { END } else { FUNC_END })
                )),
            );
        }
    }
}

/// One call's raw parameters as far as they have been read, with its tool's schema: the
/// call state of both XML-parameter families (Qwen3-Coder's `<parameter=K>`, GLM's
/// `<arg_key>`; GLM reads its own syntax into the same state).
pub(crate) struct Walk<'t> {
    name: String,
    props: Option<&'t Map<String, Value>>,
    /// The tool's whole input schema (for `$ref`s of properties).
    root: Option<&'t Map<String, Value>>,
    /// The whole parameters so far, `(key, raw text)` in order.
    pub params: Vec<(String, String)>,
    /// An undeclared parameter's value is text (Qwen3-Coder), not typed as JSON first (GLM).
    undeclared_is_text: bool,
}

enum Param {
    /// A whole parameter; the walk continues at this offset.
    Done(usize),
    /// The parameter is still arriving: its name and its stable raw text, once known.
    Pending(Option<(String, String)>),
    /// The parameter cannot be read.
    Bad(ToolParseError),
}

/// What may follow a structural `</parameter>`.
enum Follow {
    Yes,
    No,
    Undecided,
}

impl<'t> Walk<'t> {
    /// The walk of a call to `name`, typed by the schema of the tool of that name in
    /// `tools`; `undeclared_is_text` as the family reads undeclared parameters.
    pub(crate) fn new(name: &str, tools: &'t [Tool], undeclared_is_text: bool) -> Self {
        let (root, props) = scan::tool_schema(tools, name);
        Walk {
            name: name.to_owned(),
            props,
            root,
            params: Vec::new(),
            undeclared_is_text,
        }
    }

    fn known(&self, key: &str) -> bool {
        self.props
            .map_or(true, |p| p.is_empty() || p.contains_key(key))
    }

    /// Whether `after` (the text right after a `</parameter>`) makes it structural.
    fn follows(&self, after: &str, at_end: bool) -> Follow {
        let a = after.trim_start();
        if a.starts_with(FUNC_END) || a.starts_with(END) {
            return Follow::Yes;
        }
        if let Some(r) = a.strip_prefix(PARAM) {
            return match r.find('>') {
                Some(k) if self.known(&r[..k]) => Follow::Yes,
                Some(_) => Follow::No,
                None if at_end || r.contains('\n') => Follow::No,
                None => Follow::Undecided,
            };
        }
        if a.is_empty() {
            return if at_end {
                Follow::Yes
            } else {
                Follow::Undecided
            };
        }
        if !at_end && partial_marker(a, &[PARAM, FUNC_END, END]) {
            return Follow::Undecided;
        }
        Follow::No
    }

    /// Reads the parameter starting at `s[j..]` (with `<parameter=`).
    fn read_param(&mut self, s: &str, j: usize, at_end: bool) -> Param {
        let k = j + PARAM.len();
        let Some(gt) = s[k..].find(['>', '\n']) else {
            return if at_end {
                Param::Bad(ToolParseError::Unterminated)
            } else {
                Param::Pending(None)
            };
        };
        if s.as_bytes()[k + gt] != b'>' {
            return Param::Bad(ToolParseError::Syntax(format!(
                "parameter name {:?} is not closed by '>'",
                &s[k..k + gt]
            )));
        }
        let key = s[k..k + gt].to_owned();
        let mut v = k + gt + 1;
        if s[v..].starts_with('\n') {
            v += 1;
        } else if !at_end && v == s.len() {
            return Param::Pending(Some((key, String::new())));
        }
        // The first structural `</parameter>`.
        let mut from = v;
        let mut undecided = None;
        while let Some(c) = s[from..].find(CLOSE) {
            let c = from + c;
            match self.follows(&s[c + CLOSE.len()..], at_end) {
                Follow::Yes => {
                    let raw = &s[v..c];
                    let raw = raw.strip_suffix('\n').unwrap_or(raw);
                    self.params.push((key, raw.to_owned()));
                    return Param::Done(c + CLOSE.len());
                }
                Follow::Undecided => {
                    undecided = Some(c);
                    break;
                }
                Follow::No => from = c + CLOSE.len(),
            }
        }
        let cut = self.missing_close_cut(s, v, &key, at_end);
        if !at_end {
            // The value so far, up to where it may yet end: an undecided `</parameter>`, a
            // place where a missing one would be recovered, or a partial marker; without
            // the whitespace that either ending may drop.
            let tail_end = v + scan::stable_len(&s[v..], &[CLOSE, PARAM, FUNC_END], false);
            let e = [undecided, cut]
                .into_iter()
                .flatten()
                .fold(tail_end, usize::min);
            let raw = s[v..e].trim_end_matches([' ', '\t', '\r']);
            let raw = raw.strip_suffix('\n').unwrap_or(raw);
            return Param::Pending(Some((key, raw.to_owned())));
        }
        match cut {
            Some(c) => {
                let raw = s[v..c].trim_end_matches([' ', '\t', '\r']);
                let raw = raw.strip_suffix('\n').unwrap_or(raw);
                self.params.push((key, raw.to_owned()));
                Param::Done(c)
            }
            None => Param::Bad(ToolParseError::Unterminated),
        }
    }

    /// Where a value starting at `s[v..]` (of parameter `key`) whose `</parameter>` is
    /// missing ends: at the next `<parameter=KEY>` with a KEY of the schema not given yet,
    /// or at `</function>`, whichever comes first. While the output is still arriving
    /// (`!at_end`), a `<parameter=` whose name has not ended counts too (it may become
    /// such a KEY).
    fn missing_close_cut(&self, s: &str, v: usize, key: &str, at_end: bool) -> Option<usize> {
        let mut cut = None;
        let mut from = v;
        while let Some(p) = s[from..].find(PARAM) {
            let p = from + p;
            let r = &s[p + PARAM.len()..];
            match r.find('>') {
                Some(e) => {
                    let nk = &r[..e];
                    let declared = self.props.is_some_and(|m| m.contains_key(nk));
                    if declared && nk != key && !self.params.iter().any(|(pk, _)| pk == nk) {
                        cut = Some(p);
                        break;
                    }
                }
                None if !at_end => {
                    cut = Some(p);
                    break;
                }
                None => {}
            }
            from = p + PARAM.len();
        }
        if let Some(f) = s[v..].find(FUNC_END) {
            cut = Some(cut.map_or(v + f, |c| c.min(v + f)));
        }
        cut
    }

    fn arguments(&self) -> Value {
        let text = self.undeclared_is_text;
        typed_arguments(&self.params, self.props, self.root, text)
    }

    fn arguments_text(&self, partial: Option<&(String, String)>, complete: bool) -> String {
        let text = self.undeclared_is_text;
        arguments_json_text(&self.params, self.props, self.root, text, partial, complete)
    }

    /// The call still arriving: its arguments so far, `p` the value in progress (key and
    /// stable raw text).
    pub(crate) fn partial(&self, p: Option<(String, String)>) -> PartialCall {
        PartialCall {
            id: None,
            name: Some(self.name.clone()),
            arguments_text: self.arguments_text(p.as_ref(), false),
            complete: None,
        }
    }

    /// The whole call, `len` bytes long.
    pub(crate) fn done(&self, len: usize) -> Step {
        Step::Done {
            call: PartialCall {
                id: None,
                name: Some(self.name.clone()),
                arguments_text: self.arguments_text(None, true),
                complete: Some(ToolCall::new(self.name.clone(), self.arguments())),
            },
            len,
        }
    }
}

/// The arguments object of raw `(key, value text)` pairs, each typed by its property's
/// schema ([`scan::typed_xml_value`]).
pub(crate) fn typed_arguments(
    params: &[(String, String)],
    props: Option<&Map<String, Value>>,
    root: Option<&Map<String, Value>>,
    undeclared_is_text: bool,
) -> Value {
    let mut map = Map::new();
    for (k, raw) in params {
        let schema = property_schema(props, root, k);
        map.insert(
            k.clone(),
            scan::typed_xml_value(raw, schema, root, undeclared_is_text),
        );
    }
    Value::Object(map)
}

/// The schema of property `key` (`props` of the tool's schema `root`), through a local
/// `$ref` as the grammar reads it ([`tokensieve::structural_tag::xml::resolve_local_ref`]).
pub(crate) fn property_schema<'a>(
    props: Option<&'a Map<String, Value>>,
    root: Option<&'a Map<String, Value>>,
    key: &str,
) -> Option<&'a Value> {
    props
        .and_then(|p| p.get(key))
        .map(|s| tokensieve::structural_tag::xml::resolve_local_ref(s, root))
}

/// The arguments' JSON text so far (what streaming sends): whole members in the order
/// written, then the string value still arriving (`partial`: its key and stable raw text),
/// JSON-escaped and without its closing quote; `}` once `complete`. Only grows as values
/// arrive: a key given twice is written twice while it arrives (the call then ends
/// malformed, `argument "KEY" given twice`), since what was sent for the first cannot be
/// taken back.
pub(crate) fn arguments_json_text(
    params: &[(String, String)],
    props: Option<&Map<String, Value>>,
    root: Option<&Map<String, Value>>,
    undeclared_is_text: bool,
    partial: Option<&(String, String)>,
    complete: bool,
) -> String {
    let mut s = String::from("{");
    let mut n = 0;
    for (k, raw) in params {
        if n > 0 {
            s.push_str(", ");
        }
        n += 1;
        let v = scan::typed_xml_value(
            raw,
            property_schema(props, root, k),
            root,
            undeclared_is_text,
        );
        s.push_str(&format!("{}: {}", json!(k), scan::python_json(&v)));
    }
    if complete {
        s.push('}');
        return s;
    }
    if let Some((k, raw)) = partial {
        let schema = property_schema(props, root, k);
        let raw_text = match schema {
            Some(sc) => scan::is_raw_string_schema(sc),
            None => undeclared_is_text,
        };
        if raw_text {
            if n > 0 {
                s.push_str(", ");
            }
            let quoted = json!(raw).to_string();
            s.push_str(&format!("{}: {}", json!(k), &quoted[..quoted.len() - 1]));
        }
    }
    s
}

#[cfg(test)]
pub(crate) mod tests;
