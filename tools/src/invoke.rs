//! The `invoke`-style families: DeepSeek V3.2 / V4 DSML and MiniMax-M2. A turn's calls sit
//! in one section, each call an `invoke` element named by an attribute, each argument a
//! `parameter` element (docs/tool-call-formats-extra.md; vLLM's `deepseek_v32`,
//! `deepseek_v4` and `minimax_m2` parsers; XGrammar's `deepseek_v3_2`, `deepseek_v4` and
//! `minimax` builtins, whose argument styles are `deepseek_xml` and `minimax_xml`).
//!
//! DeepSeek V3.2 (`encoding_dsv32.py`; V4 writes `tool_calls` for `function_calls`):
//!
//! ```text
//! I'll check.
//!
//! <｜DSML｜function_calls>
//! <｜DSML｜invoke name="get_weather">
//! <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
//! <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
//! </｜DSML｜invoke>
//! </｜DSML｜function_calls>
//! ```
//!
//! MiniMax-M2 (its chat template):
//!
//! ```text
//! I'll check.
//! <minimax:tool_call>
//! <invoke name="get_weather">
//! <parameter name="city">Paris</parameter>
//! <parameter name="days">3</parameter>
//! </invoke>
//! </minimax:tool_call>
//! ```

use serde_json::{json, Map, Value};

use super::qwen3_coder::{free_form, property_schema, xml_arguments};
use super::scan::{self, CallRead, Sections};
use super::tags::{self, Envelope};
use super::{
    FormatOptions, PartialCall, Settled, StructuralTag, Tool, ToolCall, ToolCallFormat, ToolChoice,
    ToolError, ToolParseError,
};

const THINK: &str = "<think>";
const THINK_END: &str = "</think>";

/// One family's markers and layout.
#[derive(Debug)]
struct Dialect {
    /// The registry name (in messages).
    family: &'static str,
    /// What the template writes between the content and the section.
    before_section: &'static str,
    /// The section's begin and end markers.
    section_begin: &'static str,
    section_end: &'static str,
    /// `<… name="` that opens a call, and the call's end marker.
    invoke_open: &'static str,
    invoke_end: &'static str,
    /// `<… name="` that opens a parameter, and its end marker.
    param_open: &'static str,
    param_close: &'static str,
    /// DSML: a `string="true|false"` attribute on each parameter, parameters and calls
    /// joined by `\n` with `\n` inside the call and section ends. Otherwise (MiniMax)
    /// `\n` after every parameter and after every call.
    dsml: bool,
    /// The structural-tag style of the arguments.
    style: &'static str,
    /// What the template writes after `</think>`.
    after_reasoning: &'static str,
    /// Free text never contains these (besides the call and section markers).
    excludes: &'static [&'static str],
}

const DSML_EXCLUDES: &[&str] = &[
    "<\u{ff5c}DSML\u{ff5c}",
    "</\u{ff5c}DSML\u{ff5c}",
    THINK,
    THINK_END,
];

const V32: Dialect = Dialect {
    family: "deepseek_v32",
    before_section: "\n\n",
    section_begin: "<\u{ff5c}DSML\u{ff5c}function_calls>",
    section_end: "</\u{ff5c}DSML\u{ff5c}function_calls>",
    invoke_open: "<\u{ff5c}DSML\u{ff5c}invoke name=\"",
    invoke_end: "</\u{ff5c}DSML\u{ff5c}invoke>",
    param_open: "<\u{ff5c}DSML\u{ff5c}parameter name=\"",
    param_close: "</\u{ff5c}DSML\u{ff5c}parameter>",
    dsml: true,
    style: "deepseek_xml",
    after_reasoning: "",
    excludes: DSML_EXCLUDES,
};

const V4: Dialect = Dialect {
    family: "deepseek_v4",
    section_begin: "<\u{ff5c}DSML\u{ff5c}tool_calls>",
    section_end: "</\u{ff5c}DSML\u{ff5c}tool_calls>",
    ..V32
};

const MINIMAX: Dialect = Dialect {
    family: "minimax_m2",
    before_section: "\n",
    section_begin: "<minimax:tool_call>",
    section_end: "</minimax:tool_call>",
    invoke_open: "<invoke name=\"",
    invoke_end: "</invoke>",
    param_open: "<parameter name=\"",
    param_close: "</parameter>",
    dsml: false,
    style: "minimax_xml",
    after_reasoning: "\n\n",
    excludes: &[
        "<minimax:tool_call>",
        "</minimax:tool_call>",
        THINK,
        THINK_END,
    ],
};

/// Which DeepSeek DSML section marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DsmlVersion {
    /// DeepSeek V3.2 (and V3.2-Speciale): `<｜DSML｜function_calls>`.
    V32,
    /// DeepSeek V4: `<｜DSML｜tool_calls>`.
    V4,
}

/// DeepSeek V3.2 / V4 DSML (`deepseek_v32`, `deepseek_v4`).
///
/// * Grammar (the exact text of DeepSeek's `encoding_dsv32.py`): content, then
///   `\n\n<｜DSML｜function_calls>\n` (V4: `tool_calls`), the calls joined by `\n`, each
///   `<｜DSML｜invoke name="NAME">\n` + its parameters joined by `\n` +
///   `\n</｜DSML｜invoke>`, then `\n</｜DSML｜function_calls>` and the end of the turn. A
///   parameter is `<｜DSML｜parameter name="KEY" string="true">RAW</｜DSML｜parameter>` for a
///   string value (raw text never holding the closing tag; `minLength`/`maxLength`,
///   `pattern`, `format` apply to it) and `string="false">JSON` for any other (the
///   `deepseek_xml` structural-tag style), in the schema's declared order. A tool whose
///   arguments are unconstrained takes any parameter names, raw or JSON. `required`
///   allows content before the section; with [`FormatOptions::reasoning`] the output
///   opens inside the reasoning block (the prompt ends with `<think>`) and `</think>`
///   closes it. Free text never holds `<｜DSML｜`, `</｜DSML｜`, `<think>`, `</think>`.
/// * Parser: vLLM's reading: a value ends at the first closing tag; `string="true"`
///   values are the raw text, `string="false"` values are JSON (else typed by the schema
///   as for the XML families, else text). Whitespace around elements and attributes is
///   tolerated, a missing section end too; a parameter given twice makes the call
///   malformed.
/// * Rendering: strings raw with `string="true"`, other values JSON (`</` written
///   `<\/`) with `string="false"`. A string value holding the closing tag cannot be
///   written (the format has no escape) and does not parse back.
/// * Streaming: raw string values stream as they arrive (JSON-escaped inside the
///   arguments' JSON), other values once whole.
#[derive(Clone, Debug)]
pub struct Dsml {
    version: DsmlVersion,
    options: FormatOptions,
}

impl Dsml {
    /// The format of `version` with `options`.
    pub fn new(version: DsmlVersion, options: FormatOptions) -> Self {
        Self { version, options }
    }

    /// The version.
    pub fn version(&self) -> DsmlVersion {
        self.version
    }

    /// The options.
    pub fn options(&self) -> &FormatOptions {
        &self.options
    }

    fn dialect(&self) -> &'static Dialect {
        match self.version {
            DsmlVersion::V32 => &V32,
            DsmlVersion::V4 => &V4,
        }
    }
}

format_with_options! {
    /// MiniMax-M2 (`minimax_m2`; also M2.1, M2.5, M2.7).
    ///
    /// * Grammar (the exact text of MiniMax-M2's chat template): content, then
    ///   `\n<minimax:tool_call>\n`, the calls back to back, each `<invoke name="NAME">\n` +
    ///   one `<parameter name="KEY">VALUE</parameter>\n` per argument + `</invoke>\n`, then
    ///   `</minimax:tool_call>` and the end of the turn. String values are raw text never
    ///   holding `</parameter>`, others JSON (the `minimax_xml` structural-tag style), in the
    ///   schema's declared order. `required` allows content before the section; with
    ///   [`FormatOptions::reasoning`] the output opens inside the reasoning block (the
    ///   prompt ends with `<think>\n`) and `</think>\n\n` closes it.
    /// * Parser: values end at the first `</parameter>` and are typed by the tool's schema
    ///   (`type: "string"` raw, else JSON, else a Python literal, else text; undeclared
    ///   parameters text), as vLLM's `minimax_m2` parser does.
    /// * Rendering and streaming as [`Dsml`] (without the `string` attribute).
    pub struct MiniMaxM2;
}

impl MiniMaxM2 {
    fn dialect(&self) -> &'static Dialect {
        &MINIMAX
    }
}

/// The [`ToolCallFormat`] of a type with a `dialect()` and `options`.
macro_rules! invoke_format {
    ($ty:ty) => {
        impl ToolCallFormat for $ty {
            fn name(&self) -> &str {
                self.dialect().family
            }

            structural_tag_fn!(
                |f: &Self, tools: &[Tool], choice: &ToolChoice, parallel: bool| {
                    structural_tag(f.dialect(), &f.options, tools, choice, parallel)
                }
            );

            // The calls sit in the dialect's section.
            parse_with_driver!(@parse |f: &Self, text: &str, from: &Settled, tools: &[Tool], at_end: bool| {
                let d = f.dialect();
                let sections = Sections {
                    section_begins: &[d.section_begin],
                    section_end: d.section_end,
                    call_begin: d.invoke_open,
                };
                let reasoning = f.options.reasoning;
                scan::parse_sectioned(text, from, reasoning, &sections, at_end, |body| {
                    read_call(d, body, tools, at_end)
                })
            });

            fn render_calls(&self, calls: &[ToolCall]) -> String {
                render_calls(self.dialect(), calls)
            }

            fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
                render_tool_result(self.dialect(), result)
            }

            fn render_tools_prompt(&self, tools: &[Tool]) -> String {
                render_tools_prompt(self.dialect(), tools)
            }
        }
    };
}

invoke_format!(Dsml);
invoke_format!(MiniMaxM2);

fn envelope(d: &Dialect) -> Envelope {
    let (begin, end) = if d.dsml {
        (
            format!("{}{}\n", d.before_section, d.section_begin),
            format!("\n{}", d.section_end),
        )
    } else {
        (
            format!("{}{}\n", d.before_section, d.section_begin),
            d.section_end.to_owned(),
        )
    };
    Envelope {
        trigger: d.invoke_open.into(),
        separator: if d.dsml { "\n".into() } else { String::new() },
        section: Some((begin, end)),
        leading_text_in_required: true,
        reasoning: Some((String::new(), THINK_END.into(), d.after_reasoning.into())),
        excludes: d.excludes.iter().map(|s| (*s).to_owned()).collect(),
        // Its values are XML-style, not JSON: `string_excludes` does not apply to them.
        markers: Vec::new(),
    }
}

fn structural_tag(
    d: &Dialect,
    options: &FormatOptions,
    tools: &[Tool],
    choice: &ToolChoice,
    parallel: bool,
) -> Result<StructuralTag, ToolError> {
    tags::assemble(&envelope(d), tools, choice, parallel, options, |t| {
        let begin = format!("{}{}\">\n", d.invoke_open, t.name);
        let (content, end) = if d.dsml {
            (
                dsml_arguments(d, t, options)?,
                format!("\n{}", d.invoke_end),
            )
        } else {
            let any_item = (d.param_open, "\">", d.param_close);
            let content = xml_arguments(t, options, d.family, d.style, "\n", any_item)?;
            (content, format!("{}\n", d.invoke_end))
        };
        Ok(json!({"type": "tag", "begin": begin, "content": content, "end": end}))
    })
}

/// DSML's arguments: the schema in the `deepseek_xml` style, or, for a tool whose
/// arguments are unconstrained, any parameters joined by `\n`, each raw
/// (`string="true"`) or JSON (`string="false"`).
fn dsml_arguments(d: &Dialect, t: &Tool, options: &FormatOptions) -> Result<Value, ToolError> {
    let schema = tags::argument_schema(t, options);
    if !free_form(&schema) {
        return xml_arguments(t, options, d.family, d.style, "", ("", "", ""));
    }
    let name = json!({"type": "regex", "pattern": "[A-Za-z_][A-Za-z0-9_.-]{0,63}"});
    let raw = json!({"type": "sequence", "elements": [
        {"type": "const_string", "value": "\" string=\"true\">"},
        {"type": "any_text", "excludes": [d.param_close]}]});
    let mut any_json = json!({"type": "json_schema", "json_schema": true});
    if let Some(n) = options.max_whitespace {
        any_json["max_whitespace"] = json!(n);
    }
    let json_value = json!({"type": "sequence", "elements": [
        {"type": "const_string", "value": "\" string=\"false\">"}, any_json]});
    let item = json!({"type": "sequence", "elements": [
        {"type": "const_string", "value": d.param_open}, name,
        {"type": "or", "elements": [raw, json_value]},
        {"type": "const_string", "value": d.param_close}]});
    let more = json!({"type": "star", "content": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "\n"}, item.clone()]}});
    Ok(json!({"type": "optional", "content": {"type": "sequence", "elements": [item, more]}}))
}

/// A value as the templates write it: strings raw, everything else JSON with `</` written
/// `<\/` (the same JSON, never a closing tag). The flag says whether it is a string.
fn written_value(v: &Value) -> (bool, String) {
    match v {
        Value::String(s) => (true, s.clone()),
        other => (false, scan::python_json(other).replace("</", "<\\/")),
    }
}

fn render_call(d: &Dialect, c: &ToolCall) -> String {
    let mut params = Vec::new();
    if let Value::Object(args) = &c.arguments {
        for (k, v) in args {
            let (is_string, text) = written_value(v);
            params.push(if d.dsml {
                format!(
                    "{}{k}\" string=\"{is_string}\">{text}{}",
                    d.param_open, d.param_close
                )
            } else {
                format!("{}{k}\">{text}{}\n", d.param_open, d.param_close)
            });
        }
    }
    if d.dsml {
        format!(
            "{}{}\">\n{}\n{}",
            d.invoke_open,
            c.name,
            params.join("\n"),
            d.invoke_end
        )
    } else {
        format!(
            "{}{}\">\n{}{}\n",
            d.invoke_open,
            c.name,
            params.concat(),
            d.invoke_end
        )
    }
}

fn render_calls(d: &Dialect, calls: &[ToolCall]) -> String {
    let body: Vec<String> = calls.iter().map(|c| render_call(d, c)).collect();
    if d.dsml {
        format!(
            "{}{}\n{}\n{}",
            d.before_section,
            d.section_begin,
            body.join("\n"),
            d.section_end
        )
    } else {
        format!(
            "{}{}\n{}{}",
            d.before_section,
            d.section_begin,
            body.concat(),
            d.section_end
        )
    }
}

/// One tool result as the templates write it: V3.2 `<function_results>` holding a
/// `<result>`, V4 `<tool_result>`, MiniMax `<response>`.
fn render_tool_result(d: &Dialect, result: &Value) -> String {
    let body = scan::result_text(result);
    match d.family {
        "deepseek_v32" => {
            format!("<function_results>\n<result>{body}</result>\n</function_results>")
        }
        "deepseek_v4" => format!("<tool_result>{body}</tool_result>"),
        _ => format!("<response>{body}</response>"),
    }
}

fn render_tools_prompt(d: &Dialect, tools: &[Tool]) -> String {
    let mut s = String::new();
    if d.dsml {
        s.push_str(
            "## Tools\n\nThese functions are available, each described by a JSON object \
             with its name, purpose and parameter schema:\n<functions>",
        );
        for t in tools {
            s.push('\n');
            s.push_str(&scan::python_json(&t.to_openai()["function"]));
        }
        s.push_str("\n</functions>\n\nTo call functions, end your answer with one block of this shape holding every call of the turn:");
    } else {
        s.push_str(
            "# Tools\n\nThese functions are available, each described inside <tools></tools> \
             by a JSON object with its name, purpose and parameter schema:\n<tools>",
        );
        for t in tools {
            s.push_str(&format!(
                "\n<tool>{}</tool>",
                scan::python_json(&t.to_openai()["function"])
            ));
        }
        s.push_str("\n</tools>\n\nTo call functions, end your answer with one block of this shape holding every call of the turn:");
    }
    let example = ToolCall::new("NAME", json!({"ARGUMENT": "VALUE", "COUNT": 2}));
    s.push_str(&render_calls(d, &[example]));
    s.push_str(if d.dsml {
        "\nWrite a text value as it is with string=\"true\", any other value as JSON with \
         string=\"false\"; give every required parameter."
    } else {
        "\nWrite a text value as it is and any other value as JSON; give every required \
         parameter."
    });
    s
}

/// `s[i..]` without its leading whitespace: the offset where the rest starts.
fn skip_ws(s: &str, i: usize) -> usize {
    i + (s[i..].len() - s[i..].trim_start().len())
}

/// What matching a literal at an offset found.
enum Lit {
    /// The literal is there; the offset after it.
    Found(usize),
    /// The text ends inside (a proper prefix of) the literal.
    Short,
    /// Something else is there.
    Other,
}

fn lit(s: &str, i: usize, want: &str) -> Lit {
    let rest = &s[i..];
    if rest.starts_with(want) {
        Lit::Found(i + want.len())
    } else if want.starts_with(rest) {
        Lit::Short
    } else {
        Lit::Other
    }
}

/// The name in `s[i..]` up to its closing `"`: `Ok(Some((name, after)))`, `Ok(None)` when
/// the quote has not arrived, `Err` when a line break or `<`/`>` comes first.
fn quoted_name(s: &str, i: usize) -> Result<Option<(&str, usize)>, ToolParseError> {
    match s[i..].find(['"', '\n', '<', '>']) {
        Some(k) if s.as_bytes()[i + k] == b'"' => Ok(Some((&s[i..i + k], i + k + 1))),
        Some(k) => Err(ToolParseError::InvalidName {
            name: s[i..i + k].to_owned(),
        }),
        None => Ok(None),
    }
}

/// One call's parameters as far as they have been read.
struct Walk<'t> {
    d: &'static Dialect,
    name: &'t str,
    props: Option<&'t Map<String, Value>>,
    root: Option<&'t Map<String, Value>>,
    /// Whole parameters, typed, in order.
    params: Vec<(String, Value)>,
}

impl<'t> Walk<'t> {
    /// The walk of a call to `name` in `d`, its values typed by the schema of the tool of
    /// that name in `tools`.
    fn new(d: &'static Dialect, name: &'t str, tools: &'t [Tool]) -> Self {
        let (root, props) = scan::tool_schema(tools, name);
        Walk {
            d,
            name,
            props,
            root,
            params: Vec::new(),
        }
    }

    /// The arguments' JSON text: whole members, then a raw string value still arriving
    /// (`partial`: key and stable text) without its closing quote; `}` once `complete`.
    fn text(&self, partial: Option<(&str, &str)>, complete: bool) -> String {
        let mut members: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{}: {}", json!(k), scan::python_json(v)))
            .collect();
        if complete {
            return format!("{{{}}}", members.join(", "));
        }
        if let Some((k, raw)) = partial {
            let quoted = json!(raw).to_string();
            members.push(format!("{}: {}", json!(k), &quoted[..quoted.len() - 1]));
        }
        format!("{{{}", members.join(", "))
    }

    fn pending(&self, partial: Option<(&str, &str)>) -> CallRead {
        CallRead::Pending(PartialCall {
            id: None,
            name: Some(self.name.to_owned()),
            arguments_text: self.text(partial, false),
            complete: None,
        })
    }

    /// A value's JSON: DSML's attribute says raw or JSON; MiniMax types by the schema.
    fn typed(&self, key: &str, raw: &str, string_attr: Option<bool>) -> Value {
        let schema = property_schema(self.props, self.root, key);
        match string_attr {
            Some(true) => Value::String(raw.to_owned()),
            Some(false) => scan::whole_json_value(raw)
                .unwrap_or_else(|| scan::typed_xml_value(raw, schema, self.root, true)),
            None => scan::typed_xml_value(raw, schema, self.root, true),
        }
    }

    /// Whether a value still arriving streams as raw text.
    fn streams_raw(&self, key: &str, string_attr: Option<bool>) -> bool {
        match string_attr {
            Some(s) => s,
            None => {
                property_schema(self.props, self.root, key).map_or(true, scan::is_raw_string_schema)
            }
        }
    }
}

/// A malformed call from its marker: up to and including the call's end marker, or up to
/// the section's end marker, whichever comes first after `from`; to the end of the output
/// when neither comes; while the output is still arriving and neither has come, pending
/// (a streamed error is sent once, so its text must be final).
fn bad(d: &Dialect, body: &str, from: usize, at_end: bool, error: ToolParseError) -> CallRead {
    match scan::find_first(&body[from..], &[d.invoke_end, d.section_end]) {
        Some((k, m)) if m == d.invoke_end => CallRead::Bad {
            error,
            len: from + k + m.len(),
        },
        Some((k, _)) => CallRead::Bad {
            error,
            len: from + k,
        },
        None if at_end => CallRead::Bad {
            error,
            len: body.len(),
        },
        None => CallRead::Pending(PartialCall::default()),
    }
}

/// Reads one call from `body` (the text after `<… invoke name="`).
fn read_call(d: &'static Dialect, body: &str, tools: &[Tool], at_end: bool) -> CallRead {
    let unterminated = |from| bad(d, body, from, at_end, ToolParseError::Unterminated);
    let (name, after) = match quoted_name(body, 0) {
        Ok(Some(x)) => x,
        Ok(None) if at_end => return unterminated(0),
        Ok(None) => return CallRead::Pending(PartialCall::default()),
        Err(e) => return bad(d, body, 0, at_end, e),
    };
    let mut i = skip_ws(body, after);
    match lit(body, i, ">") {
        Lit::Found(n) => i = n,
        Lit::Short if !at_end => return CallRead::Pending(PartialCall::default()),
        _ => {
            let e = ToolParseError::Syntax(format!("expected '>' after the name of call {name:?}"));
            return bad(d, body, i, at_end, e);
        }
    }
    if let Err(e) = scan::check_call_name(name, tools) {
        return bad(d, body, i, at_end, e);
    }
    let mut w = Walk::new(d, name, tools);
    loop {
        let j = skip_ws(body, i);
        let rest = &body[j..];
        if rest.starts_with(d.param_open) {
            match read_param(&mut w, body, j, at_end) {
                ParamRead::Next(next) => i = next,
                ParamRead::Stop(read) => return read,
            }
        } else if rest.starts_with(d.invoke_end) {
            return CallRead::Done {
                call: ToolCall::new(name, Value::Object(w.params.iter().cloned().collect())),
                arguments_text: w.text(None, true),
                len: j + d.invoke_end.len(),
            };
        } else if rest.is_empty()
            || (!at_end && (d.param_open.starts_with(rest) || d.invoke_end.starts_with(rest)))
        {
            return if at_end {
                unterminated(j)
            } else {
                w.pending(None)
            };
        } else {
            let e = ToolParseError::Syntax(format!(
                "expected {}KEY\"> or {}, found {:?}",
                d.param_open,
                d.invoke_end,
                scan::found_text(rest, d.invoke_end)
            ));
            return bad(d, body, j, at_end, e);
        }
    }
}

/// What reading one parameter gave.
enum ParamRead {
    /// The parameter is whole; the call goes on at this offset.
    Next(usize),
    /// The call stops here: pending, or malformed.
    Stop(CallRead),
}

/// Reads the parameter at `body[j..]` (its `<… name="`) into the walk: the offset after
/// it, or what the call read as (pending or malformed).
fn read_param(w: &mut Walk<'_>, body: &str, j: usize, at_end: bool) -> ParamRead {
    let d = w.d;
    let short = |w: &Walk<'_>| {
        ParamRead::Stop(if at_end {
            bad(d, body, j, at_end, ToolParseError::Unterminated)
        } else {
            w.pending(None)
        })
    };
    let (key, mut v) = match quoted_name(body, j + d.param_open.len()) {
        Ok(Some(x)) => x,
        Ok(None) => return short(&*w),
        Err(e) => return ParamRead::Stop(bad(d, body, j, at_end, e)),
    };
    let mut string_attr = None;
    let expected = |what: &str| {
        ParamRead::Stop(bad(
            d,
            body,
            j,
            at_end,
            ToolParseError::Syntax(format!("parameter {key:?}: expected {what}")),
        ))
    };
    if d.dsml {
        v = skip_ws(body, v);
        match lit(body, v, "string=\"") {
            Lit::Found(n) => v = n,
            Lit::Short => return short(&*w),
            Lit::Other => return expected("string=\"true\" or string=\"false\""),
        }
        for (word, flag) in [("true\"", true), ("false\"", false)] {
            match lit(body, v, word) {
                Lit::Found(n) => {
                    v = n;
                    string_attr = Some(flag);
                    break;
                }
                Lit::Short => return short(&*w),
                Lit::Other => {}
            }
        }
        if string_attr.is_none() {
            return expected("string=\"true\" or string=\"false\"");
        }
    }
    v = skip_ws(body, v);
    match lit(body, v, ">") {
        Lit::Found(n) => v = n,
        Lit::Short => return short(&*w),
        Lit::Other => return expected("'>'"),
    }
    let Some(c) = body[v..].find(d.param_close) else {
        if at_end {
            return ParamRead::Stop(bad(d, body, j, at_end, ToolParseError::Unterminated));
        }
        let stable = scan::stable_len(&body[v..], &[d.param_close], false);
        let partial = w
            .streams_raw(key, string_attr)
            .then_some((key, &body[v..v + stable]));
        return ParamRead::Stop(w.pending(partial));
    };
    if w.params.iter().any(|(k, _)| k == key) {
        return ParamRead::Stop(bad(d, body, j, at_end, scan::argument_given_twice(key)));
    }
    let value = w.typed(key, &body[v..v + c], string_attr);
    w.params.push((key.to_owned(), value));
    ParamRead::Next(v + c + d.param_close.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::assert_first_args;

    fn tools() -> Vec<Tool> {
        Tool::list_from_openai(&json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"},
                "days": {"type": "integer"}}, "required": ["city"]}}}
        ]))
        .unwrap()
    }

    #[test]
    fn markers_are_the_spec_bytes() {
        // U+FF5C FULLWIDTH VERTICAL LINE is EF BD 9C in UTF-8.
        assert_eq!(
            V32.section_begin.as_bytes(),
            b"<\xEF\xBD\x9CDSML\xEF\xBD\x9Cfunction_calls>"
        );
        assert_eq!(V4.section_end, "</｜DSML｜tool_calls>");
    }

    #[test]
    fn streaming_grows_a_raw_value_and_holds_a_json_one() {
        let f = Dsml::new(DsmlVersion::V32, FormatOptions::default());
        let head = "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Par";
        let p = f.parse_partial(head, &tools(), false);
        assert_eq!(p.calls[0].arguments_text, "{\"city\": \"Par");
        let more = format!(
            "{head}is</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3"
        );
        let p = f.parse_partial(&more, &tools(), false);
        assert_eq!(p.calls[0].arguments_text, "{\"city\": \"Paris\"");
        let whole =
            format!("{more}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>");
        let p = f.parse(&whole, &tools());
        assert_first_args(&p, json!({"city": "Paris", "days": 3}));
    }

    #[test]
    fn malformed_calls_are_reported_with_their_text_in_content() {
        let f = Dsml::new(DsmlVersion::V4, FormatOptions::default());
        let twice = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">a</｜DSML｜parameter>\n<｜DSML｜parameter name=\"city\" string=\"true\">b</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
        let p = f.parse(twice, &tools());
        assert!(p.tool_calls.is_empty());
        assert_eq!(p.errors.len(), 1);
        assert!(
            p.errors[0].error.to_string().contains("given twice"),
            "{:?}",
            p.errors
        );
        let no_attr = twice.replace(" string=\"true\"", "");
        let p = f.parse(&no_attr, &tools());
        assert!(
            p.errors[0].error.to_string().contains("string=\"true\""),
            "{:?}",
            p.errors
        );
        let unknown = twice.replace("get_weather", "get_time");
        assert_eq!(f.parse(&unknown, &tools()).errors.len(), 1);
    }

    #[test]
    fn minimax_types_by_schema_and_keeps_undeclared_text() {
        let f = MiniMaxM2::default();
        let text = "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">42</parameter>\n<parameter name=\"days\"> 3 </parameter>\n<parameter name=\"note\">[1]</parameter>\n</invoke>\n</minimax:tool_call>";
        let p = f.parse(text, &tools());
        assert_first_args(&p, json!({"city": "42", "days": 3, "note": "[1]"}));
        // A number beyond f64 (the grammar's JSON allows it) is still a number.
        let huge = text.replace("> 3 <", ">\n15E29228851628665334805578 \n<");
        let p = f.parse(&huge, &tools());
        assert_eq!(p.tool_calls[0].arguments["days"], json!(1e308));
    }

    #[test]
    fn tool_results_and_prompt() {
        let c = ToolCall::new("get_weather", json!({}));
        let v32 = Dsml::new(DsmlVersion::V32, FormatOptions::default());
        assert_eq!(
            v32.render_tool_result(&c, &json!("sunny")),
            "<function_results>\n<result>sunny</result>\n</function_results>"
        );
        let v4 = Dsml::new(DsmlVersion::V4, FormatOptions::default());
        assert_eq!(
            v4.render_tool_result(&c, &json!({"t": 1})),
            "<tool_result>{\"t\": 1}</tool_result>"
        );
        assert_eq!(
            MiniMaxM2::default().render_tool_result(&c, &json!("ok")),
            "<response>ok</response>"
        );
        let prompt = v4.render_tools_prompt(&tools());
        assert!(prompt.contains("\"name\": \"get_weather\""), "{prompt}");
        assert!(
            prompt.contains("<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"NAME\">"),
            "{prompt}"
        );
        assert!(MiniMaxM2::default()
            .render_tools_prompt(&tools())
            .contains("<tool>{\"name\": \"get_weather\""));
    }
}
