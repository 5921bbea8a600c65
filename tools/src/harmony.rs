//! gpt-oss: the Harmony response format, channels and recipients (section 4.9 of the
//! tool-call format notes; vLLM's `openai` parser, XGrammar's `harmony` builtin).
//!
//! The prompt ends with `<|start|>assistant`, so the output begins with a header:
//!
//! ```text
//! <|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>
//! ```

use serde_json::{json, Value};

use super::driver;
use super::scan::{self, ArgsRead, Content};
use super::tags;
use super::{
    CallMode, FormatOptions, PartialCall, PartialOutput, Tool, ToolCall, ToolCallFormat,
    ToolParseError,
};

/// Starts a message (then the role).
pub const START: &str = "<|start|>";
/// Ends a message that more messages follow.
pub const END: &str = "<|end|>";
/// Ends the header, starts the body.
pub const MESSAGE: &str = "<|message|>";
/// Starts the channel part of a header.
pub const CHANNEL: &str = "<|channel|>";
/// Starts the content type (`json`).
pub const CONSTRAIN: &str = "<|constrain|>";
/// Ends the final answer (a stop token).
pub const RETURN: &str = "<|return|>";
/// Ends a tool call (a stop token: a tool must run).
pub const CALL: &str = "<|call|>";

const MARKERS: &[&str] = &[START, END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL];

format_with_options! {
    /// The Harmony format (`openai`, `harmony`).
    ///
    /// * Grammar: an `analysis` message first (required with [`FormatOptions::reasoning`],
    ///   optional without), ended by `<|end|><|start|>assistant`; then, by tool_choice:
    ///   `none` a `final` message; `auto` a `final` message or calls; `required` calls;
    ///   named exactly one call. A call is
    ///   `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS<|call|>`
    ///   (the recipient in the channel part, as the gpt-oss docs write it). With `parallel`
    ///   on, a call may be followed by more, each a message of its own after
    ///   `<|start|>assistant` (what [`ToolCallFormat::render_calls`] writes, and how
    ///   XGrammar's harmony builtin separates messages); without it, one call. A server
    ///   that stops generation at `<|call|>` (gpt-oss's own stop token, so the tool can run)
    ///   gets one call per generation either way; the others come in later turns. All
    ///   markers are special tokens of the gpt-oss vocabulary and are matched as those
    ///   tokens; free text never contains one.
    /// * Parser: messages split at `<|start|>`; the recipient `to=functions.NAME` is read in
    ///   the role part or the channel part, on any channel (`commentary` or `analysis`),
    ///   with `<|constrain|>json`, ` json` or no content type; a call's body is one JSON
    ///   object ended by `<|call|>`, `<|end|>` or the end of the output (the stop token may
    ///   have been cut off). `analysis` text is reasoning; `final` text and a `commentary`
    ///   preamble without recipient are content. Other recipients (built-in tools such as
    ///   `python`) are calls by that name, so they are errors when the tool list lacks them.
    ///   A header that never reaches `<|message|>` is content, and so is text in a header
    ///   that is none of its parts (prose before `<|channel|>`, a stray `<think>…</think>`,
    ///   a role other than `assistant`, a channel other than `analysis`, `commentary` and
    ///   `final`, a content type other than `json` and `code`; section 4.9: keep unknown
    ///   header text as content). A message on an unknown channel is content. A malformed
    ///   call's error quotes its whole message, header included.
    pub struct Harmony;
}

fn call_header(name: &str) -> String {
    format!("{CHANNEL}commentary to=functions.{name} {CONSTRAIN}json{MESSAGE}")
}

/// One parsed header: channel and recipient, as far as given.
struct Header<'a> {
    channel: &'a str,
    recipient: Option<&'a str>,
}

fn parse_header(h: &str) -> Header<'_> {
    let (role, chan) = match h.find(CHANNEL) {
        Some(k) => (&h[..k], &h[k + CHANNEL.len()..]),
        None => (h, ""),
    };
    let channel = chan
        .split(|c: char| c.is_whitespace() || c == '<')
        .next()
        .unwrap_or("");
    let recipient = [role, chan].iter().find_map(|part| {
        let k = part.find("to=")?;
        let r = &part[k + 3..];
        let end = r
            .find(|c: char| c.is_whitespace() || c == '<')
            .unwrap_or(r.len());
        Some(&r[..end])
    });
    Header { channel, recipient }
}

impl ToolCallFormat for Harmony {
    format_name!("harmony");

    structural_tag_from_choice!(|f, _, mode, allowed, parallel| {
        let options = &f.options;
        let calls: Vec<Value> = allowed
            .iter()
            .map(|t| {
                json!({"type": "tag", "begin": call_header(&t.name),
                       "content": tags::json_arguments(t, options), "end": CALL})
            })
            .collect();
        // Parallel calls are messages of their own, each after `<|start|>assistant`, as
        // `render_calls` writes them (and XGrammar's harmony builtin separates them).
        let one_call = if parallel && mode != CallMode::Forced {
            json!({"type": "tags_with_separator", "tags": calls,
                   "separator": format!("{START}assistant"), "at_least_one": true})
        } else if calls.len() == 1 {
            calls[0].clone()
        } else {
            json!({"type": "or", "elements": calls})
        };
        let final_msg = json!({"type": "sequence", "elements": [
            {"type": "const_string", "value": format!("{CHANNEL}final{MESSAGE}")},
            {"type": "any_text"}]});
        let body = match mode {
            CallMode::None => final_msg,
            CallMode::Auto => json!({"type": "or", "elements": [final_msg, one_call]}),
            CallMode::Required | CallMode::Forced => one_call,
        };
        let analysis = json!({"type": "tag", "begin": format!("{CHANNEL}analysis{MESSAGE}"),
            "content": {"type": "any_text"}, "end": format!("{END}{START}assistant")});
        let format = if options.reasoning {
            json!({"type": "sequence", "elements": [analysis, body]})
        } else {
            json!({"type": "or", "elements": [body.clone(),
                {"type": "sequence", "elements": [analysis, body]}]})
        };
        Ok(format)
    });

    parse_with_driver!(own: parse_turn);

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        calls
            .iter()
            .map(|c| format!("{}{}{CALL}", call_header(&c.name), c.arguments))
            .collect::<Vec<_>>()
            .join(&format!("{START}assistant"))
    }

    fn render_tool_result(&self, call: &ToolCall, result: &Value) -> String {
        let body = match result {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        format!(
            "{START}functions.{} to=assistant{CHANNEL}commentary{MESSAGE}{body}{END}",
            call.name
        )
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from("# Tools\n\n## functions\n\nnamespace functions {\n\n");
        for t in tools {
            if !t.description.is_empty() {
                for line in t.description.lines() {
                    s.push_str(&format!("// {line}\n"));
                }
            }
            let props = t.input_schema.get("properties").and_then(Value::as_object);
            match props {
                Some(p) if !p.is_empty() => {
                    let required = t.required_arguments();
                    s.push_str(&format!("type {} = (_: {{\n", t.name));
                    for (k, v) in p {
                        if let Some(d) = v.get("description").and_then(Value::as_str) {
                            s.push_str(&format!("// {d}\n"));
                        }
                        let opt = if required.contains(&k.as_str()) {
                            ""
                        } else {
                            "?"
                        };
                        s.push_str(&format!("{k}{opt}: {},\n", ts_type(v)));
                    }
                    s.push_str("}) => any;\n\n");
                }
                _ => s.push_str(&format!("type {} = () => any;\n\n", t.name)),
            }
        }
        s.push_str("} // namespace functions");
        s
    }
}

impl Harmony {
    /// The parse behind [`ToolCallFormat::parse_partial_from`].
    fn parse_turn(&self, parse: driver::Parse<'_>) -> PartialOutput {
        let (text, from, tools, at_end) = (parse.text, parse.from, parse.tools, parse.at_end);
        let mut out = PartialOutput::default();
        let mut reasoning = Content::resumed(from.reasoning_open);
        let mut content = Content::resumed(from.content_open);
        let mut pos = from.offset;
        // Settled inside a text message's body (analysis: reasoning): the rest of it.
        let mut resumed = if from.reasoning_open {
            Some(true)
        } else {
            from.content_open.then_some(false)
        };
        // Every message that has ended settles the parse: the next starts afresh.
        let settle = |out: &mut PartialOutput, content: &Content, reasoning: &Content, pos| {
            scan::settle(out, content, pos);
            if let Some(s) = &mut out.settled {
                s.reasoning = reasoning.len();
            }
        };
        while pos < text.len() {
            let (body_start, analysis) = if let Some(analysis) = resumed.take() {
                (pos, analysis)
            } else {
                let msg_start = pos;
                let started = text[pos..].starts_with(START);
                if started {
                    pos += START.len();
                }
                // The header runs to `<|message|>`, never across a message's end.
                let rest = &text[pos..];
                let m = match scan::find_first(rest, &[MESSAGE, END, CALL, RETURN, START]) {
                    Some((m, marker)) if marker == MESSAGE => m,
                    // A header without a body: keep its text as content.
                    Some((s, _)) => {
                        let k = pos + s;
                        content.push(&text[msg_start..k]);
                        pos = skip_end_marker(text, k);
                        continue;
                    }
                    None => {
                        if at_end {
                            content.push(&text[msg_start..]);
                        }
                        break;
                    }
                };
                let header = parse_header(&rest[..m]);
                let stray = stray_header_text(&rest[..m], started);
                let body_start = pos + m + MESSAGE.len();
                if let Some(recipient) = header.recipient {
                    let name = recipient.strip_prefix("functions.").unwrap_or(recipient);
                    let name_ok = scan::check_call_name(name, tools);
                    let body = &text[body_start..];
                    // A malformed call: the message from its start to `end`.
                    let malformed = |out: &mut PartialOutput, content: &mut Content, end, error| {
                        scan::push_malformed(out, content, &text[msg_start..end], msg_start, error)
                    };
                    match read_body(body, at_end) {
                        ArgsRead::Pending(arguments_text) => {
                            out.calls.push(PartialCall {
                                id: None,
                                name: name_ok.is_ok().then(|| name.to_owned()),
                                arguments_text,
                                complete: None,
                            });
                            break;
                        }
                        ArgsRead::Done {
                            value,
                            text: raw,
                            len,
                        } => {
                            let end = body_start + len;
                            match name_ok {
                                Ok(()) => {
                                    stray.iter().for_each(|t| content.push(t));
                                    let call = ToolCall::new(name, value);
                                    out.calls.push(PartialCall {
                                        id: None,
                                        name: Some(name.to_owned()),
                                        arguments_text: raw,
                                        complete: Some(call),
                                    });
                                }
                                Err(error) => malformed(&mut out, &mut content, end, error),
                            }
                            pos = end;
                        }
                        ArgsRead::Bad(error) => {
                            let b = &text[body_start..];
                            let stop = scan::find_first(b, &[CALL, END, RETURN, START])
                                .map(|(k, t)| if t == START { k } else { k + t.len() });
                            let Some(k) = stop.or(at_end.then_some(b.len())) else {
                                // Malformed, but its end has not arrived: report it (with all
                                // its text) once it has, as the whole-output parse does.
                                out.calls.push(PartialCall::default());
                                break;
                            };
                            let end = body_start + k;
                            let error = name_ok.err().unwrap_or(error);
                            malformed(&mut out, &mut content, end, error);
                            pos = end;
                        }
                    }
                    settle(&mut out, &content, &reasoning, pos);
                    continue;
                }
                // A text message: analysis is reasoning, anything else content (and so is
                // stray text in its header).
                stray.iter().for_each(|t| content.push(t));
                (body_start, header.channel == "analysis")
            };
            let sink = if analysis {
                &mut reasoning
            } else {
                &mut content
            };
            let body = &text[body_start..];
            match scan::find_first(body, &[END, RETURN, CALL, START]) {
                Some((k, _)) => {
                    sink.push(&body[..k]);
                    pos = skip_end_marker(text, body_start + k);
                    settle(&mut out, &content, &reasoning, pos);
                }
                None => {
                    // The body's text before its held-back tail is final: settle there.
                    if let Some(n) = sink.push_tail(body, MARKERS, at_end) {
                        settle(&mut out, &content, &reasoning, body_start + n);
                        if let Some(s) = &mut out.settled {
                            s.content_open = !analysis;
                            s.reasoning_open = analysis;
                        }
                    }
                    break;
                }
            }
        }
        out.reasoning = reasoning.into_string();
        out.content = content.into_string();
        out
    }
}

/// The channels of the Harmony format.
const CHANNELS: &[&str] = &["analysis", "commentary", "final"];
/// The role of the model's own messages.
const ROLES: &[&str] = &["assistant"];
/// The content types of a header (after `<|constrain|>`, or bare).
const CONTENT_TYPES: &[&str] = &["json", "code"];

/// The text of a header (the part before `<|message|>`) that is none of its known
/// words, in pieces: kept as content (section 4.9 of the notes: keep unknown header text
/// as content; rule 6: never drop text), never dropped. Known are the role `assistant`
/// right after `<|start|>` (`started`), a channel name (`analysis`, `commentary`,
/// `final`) right after `<|channel|>` (or leading a header whose `<|channel|>` is
/// missing), `to=RECIPIENT`, `<|constrain|>json` (or `code`), and a bare content type
/// (`json`, `code`) right after another known word. Any other role, channel name or
/// content type (`<|start|>zq`, `<|channel|>bogus`, `<|constrain|>jsonzq`) is content.
fn stray_header_text(head: &str, started: bool) -> Vec<&str> {
    let mut pieces = Vec::new();
    let lead = if started { ROLES } else { CHANNELS };
    match head.find(CHANNEL) {
        Some(k) => {
            stray_in_part(&head[..k], lead, &mut pieces);
            stray_in_part(&head[k + CHANNEL.len()..], CHANNELS, &mut pieces);
        }
        None => stray_in_part(head, lead, &mut pieces),
    }
    pieces
}

/// The runs of `part` between its known header words (see [`stray_header_text`]);
/// `names`: the names its first word may be (roles or channels).
fn stray_in_part<'a>(part: &'a str, names: &[&str], pieces: &mut Vec<&'a str>) {
    let word_end = |s: &str| {
        s.find(|c: char| c.is_whitespace() || c == '<')
            .unwrap_or(s.len())
    };
    let mut i = part.len() - part.trim_start().len();
    let mut run_start = 0;
    let mut after_known = false;
    let first = &part[i..][..word_end(&part[i..])];
    if names.contains(&first) {
        i += first.len();
        run_start = i;
        after_known = !first.is_empty();
    }
    loop {
        let r = &part[i..];
        i += r.len() - r.trim_start().len();
        let r = &part[i..];
        let Some(c) = r.chars().next() else {
            break;
        };
        let known = if let Some(x) = r.strip_prefix("to=") {
            Some(3 + word_end(x))
        } else if let Some(x) = r.strip_prefix(CONSTRAIN) {
            let w = word_end(x);
            CONTENT_TYPES
                .contains(&&x[..w])
                .then_some(CONSTRAIN.len() + w)
        } else {
            let w = word_end(r);
            (after_known && CONTENT_TYPES.contains(&&r[..w])).then_some(w)
        };
        match known {
            Some(n) => {
                pieces.push(&part[run_start..i]);
                i += n;
                run_start = i;
                after_known = true;
            }
            None => {
                i += word_end(r).max(c.len_utf8());
                after_known = false;
            }
        }
    }
    pieces.push(&part[run_start..]);
}

/// A call's body: one JSON object, then `<|call|>` (or `<|end|>` / `<|return|>`, or the
/// end of the output).
fn read_body(body: &str, at_end: bool) -> ArgsRead {
    let first = scan::read_arguments_then(body, CALL, at_end);
    if !matches!(first, ArgsRead::Bad(ToolParseError::Syntax(_))) {
        return first;
    }
    for t in [END, RETURN] {
        let r = scan::read_arguments_then(body, t, at_end);
        if !matches!(r, ArgsRead::Bad(ToolParseError::Syntax(_))) {
            return r;
        }
    }
    first
}

/// After a message body ends at `k`: skip `<|end|>`, `<|return|>` or `<|call|>` (a
/// following `<|start|>` begins the next message and is kept).
fn skip_end_marker(text: &str, k: usize) -> usize {
    for t in [END, RETURN, CALL] {
        if text[k..].starts_with(t) {
            return k + t.len();
        }
    }
    k
}

/// A TypeScript-like type for a JSON Schema, as the Harmony tool namespace writes it.
fn ts_type(schema: &Value) -> String {
    if let Some(Value::Array(e)) = schema.get("enum") {
        return e
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => "string".into(),
        Some("integer") | Some("number") => "number".into(),
        Some("boolean") => "boolean".into(),
        Some("null") => "null".into(),
        Some("array") => match schema.get("items") {
            Some(items) => format!("{}[]", ts_type(items)),
            None => "any[]".into(),
        },
        Some("object") => "object".into(),
        _ => "any".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_calls, calls};
    use crate::StreamEvent;

    /// `get_weather` alone (`city`, required; `unit`, `celsius` or `fahrenheit`).
    fn tools() -> Vec<Tool> {
        crate::test_support::weather_and_time()[..1].to_vec()
    }

    const WORKED: &str = "<|channel|>analysis<|message|>User wants Paris weather; call the tool.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\",\"unit\":\"celsius\"}<|call|>";

    #[test]
    fn parses_the_worked_example() {
        let out = Harmony::default().parse(WORKED, &tools());
        assert_eq!(
            out.reasoning.as_deref(),
            Some("User wants Paris weather; call the tool.")
        );
        assert_eq!(out.content, None);
        crate::test_support::assert_paris_weather_call(&out);
    }

    #[test]
    fn recipient_in_role_and_analysis_channel() {
        let ts = tools();
        for text in [
            "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>",
            " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Oslo\"}",
            "<|channel|>analysis to=functions.get_weather<|message|>{\"city\":\"Oslo\"}<|call|>",
        ] {
            let out = Harmony::default().parse(text, &ts);
            assert_eq!(
                out.tool_calls,
                calls(&[("get_weather", json!({"city": "Oslo"}))]),
                "{text}"
            );
        }
    }

    #[test]
    fn final_channel_is_content() {
        let out = Harmony::default().parse("<|channel|>analysis<|message|>easy<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>", &tools());
        assert_eq!(out.reasoning.as_deref(), Some("easy"));
        assert_eq!(out.content.as_deref(), Some("It is sunny."));
        assert!(out.tool_calls.is_empty());
    }

    #[test]
    fn streaming_holds_partial_markers() {
        let f = Harmony::default();
        let ts = tools();
        // A cut marker (`<|en`), then the rest of the worked example.
        let head = "<|channel|>analysis<|message|>User wants<|en";
        let text = format!("{head}{}", &WORKED[head.len()..]);
        let (first, all) = crate::test_support::stream_cut_at(&f, &ts, &text, head.len());
        assert_eq!(first, [StreamEvent::Reasoning("User wants".into())]);
        assert!(!crate::test_support::ended_calls(&all).is_empty());
    }

    #[test]
    fn streamed_errors_quote_only_text_that_decided_them() {
        // The error quoted the 20 characters after the JSON, as far as they had arrived.
        let f = Harmony::default();
        let ts = tools();
        for text in [
            "commentary to=functions.get_weather<|message|>{\"queries\": [\"<|call|>\"]}<\u{ff5c}tool\u{2581}call\u{2581}begin\u{ff5c}>search",
            "<|start|>assistant to=functions.get_weather<|message|>```python\nx\n```<|start|>assistant",
        ] {
            crate::test_support::assert_streams_as_whole(&f, text, &ts);
            crate::test_support::assert_streams_as_whole(&f, text, &[]);
        }
    }

    #[test]
    fn text_before_a_channel_header_is_content() {
        // Stray text in a header (before `<|channel|>`, after the role) was dropped: it
        // is kept as content (section 4.9: "keep unknown text as content").
        let f = Harmony::default();
        let ts = tools();
        let out = f.parse(
            "Let me check.<|channel|>final<|message|>It is sunny.<|return|>",
            &ts,
        );
        assert_eq!(out.content.as_deref(), Some("Let me check.\nIt is sunny."));
        let text = "<|channel|>analysis<|message|>ok<|end|><|start|>assistant Now the call.<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>";
        let out = f.parse(text, &ts);
        assert_eq!(out.reasoning.as_deref(), Some("ok"));
        assert_eq!(out.content.as_deref(), Some("Now the call."));
        assert_calls(&out, &[("get_weather", json!({"city": "Oslo"}))]);
        // The known parts of a header are not content.
        for text in [WORKED, "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Oslo\"}<|call|>"] {
            assert_eq!(f.parse(text, &ts).content, None, "{text}");
        }
    }

    #[test]
    fn unknown_role_and_channel_names_are_content() {
        // An unknown role after `<|start|>`, an unknown channel name and an unknown
        // content type were taken as header words and dropped (rule 6: never drop text).
        let f = Harmony::default();
        let ts = tools();
        for (text, content) in [
            ("<|start|>zq<|message|>body<|end|>", "zq\nbody"),
            ("<|channel|>bogus<|message|>x<|end|>", "bogus\nx"),
            (
                "<|channel|>final<|message|>a<|end|><|start|>zq<|message|>commentary<|return|>",
                "a\nzq\ncommentary",
            ),
            (
                " <|constrain|>jsonzq<|message|> to=functions.get_weather",
                "<|constrain|>jsonzq\nto=functions.get_weather",
            ),
            (
                "<|start|>user<|channel|>final<|message|>hi<|return|>",
                "user\nhi",
            ),
        ] {
            let out = f.parse(text, &ts);
            assert_eq!(out.content.as_deref(), Some(content), "{text}");
            assert!(out.tool_calls.is_empty() && out.errors.is_empty(), "{text}");
            crate::test_support::assert_streams_as_whole(&f, text, &ts);
        }
        // A call under an unknown role is still a call; the role is content.
        let text = "<|start|>zq to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Oslo\"}<|call|>";
        let out = f.parse(text, &ts);
        assert_eq!(out.content.as_deref(), Some("zq"));
        assert_calls(&out, &[("get_weather", json!({"city": "Oslo"}))]);
        crate::test_support::assert_streams_as_whole(&f, text, &ts);
        // The known words stay out of content.
        let out = f.parse(
            "<|start|>assistant<|channel|>final<|message|>hi<|return|>",
            &ts,
        );
        assert_eq!(out.content.as_deref(), Some("hi"));
    }

    #[test]
    fn a_stray_think_block_is_content() {
        let (f, ts) = (Harmony::default(), tools());
        for (text, content, city) in [
            ("<think>Paris, so call it.</think><|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
             "<think>Paris, so call it.</think>", Some("Paris")),
            ("<|start|>assistant<think>hmm</think><|channel|>final<|message|>Sunny.",
             "<think>hmm</think>\nSunny.", None),
        ] {
            let out = f.parse(text, &ts);
            assert_eq!(out.content.as_deref(), Some(content), "{text}");
            let want: Vec<_> = city.map(|c| ("get_weather", json!({ "city": c }))).into_iter().collect();
            assert_calls(&out, &want);
        }
    }

    #[test]
    fn a_malformed_call_quotes_its_stray_header_text_once() {
        let (f, ts) = (Harmony::default(), tools());
        // A malformed call quotes its stray text once, in the error and in content.
        let bad = "Hi <|channel|>commentary to=functions.get_weather json<|message|>{\"city\": Paris}<|call|>";
        let out = f.parse(bad, &ts);
        assert_eq!(out.errors[0].text, bad);
        assert_eq!(out.content.as_deref(), Some(bad));
    }

    #[test]
    fn adversarial_inputs() {
        let (f, ts) = (Harmony::default(), tools());
        // Marker text inside a JSON string is part of the string.
        let text = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"<|call|><|end|>\"}<|call|>";
        let out = f.parse(text, &ts);
        assert_calls(&out, &[("get_weather", json!({"city": "<|call|><|end|>"}))]);
        // A recipient named inside analysis text is reasoning, not a call.
        let text = "<|channel|>analysis<|message|>send to=functions.get_weather {\"city\":\"x\"}<|end|><|start|>assistant<|channel|>final<|message|>done<|return|>";
        let out = f.parse(text, &ts);
        assert!(out.tool_calls.is_empty());
        assert_eq!(out.content.as_deref(), Some("done"));
        // Unknown tool and invalid JSON: errors, text kept in content.
        let bad = "<|channel|>commentary to=functions.nope <|constrain|>json<|message|>{}<|call|>";
        let out = f.parse(bad, &ts);
        assert_eq!(
            out.errors[0].error,
            crate::test_support::unknown_tool("nope")
        );
        assert_eq!(out.content.as_deref(), Some(bad));
        let out = f.parse("<|channel|>commentary to=functions.get_weather json<|message|>{\"city\": Paris}<|call|>", &ts);
        crate::test_support::assert_invalid_json_and_no_calls(&out);
    }

    #[test]
    fn a_new_start_ends_an_unterminated_analysis_message() {
        let ts = tools();
        for h in [
            Harmony::default(),
            Harmony::new(crate::test_support::with_reasoning()),
        ] {
            for text in [
            "<|channel|>analysis<|message|>Need the weather.<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
            "<|start|>assistant<|channel|>analysis<|message|>Need the weather.<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Paris\"}<|call|>",
            "<|channel|>analysis<|message|>Need the weather.\n<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{\"city\":\"Paris\"}",
        ] {
        let out = h.parse(text, &ts);
        assert_eq!(out.reasoning.as_deref(), Some("Need the weather."));
        assert_calls(&out, &[("get_weather", json!({"city": "Paris"}))]);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert_eq!(out.content, None);
        crate::test_support::assert_streams_as_whole(&h, text, &ts);
        }
        }
    }
}
