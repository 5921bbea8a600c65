//! A call's JSON arguments up to its end marker (fenced or not), and the text an error
//! quotes from where the arguments depart from the expected marker.

#[allow(unused_imports)]
use super::*;

/// A call's arguments read from the start of `body`: a JSON object (or a JSON string
/// holding one), optionally inside a Markdown fence (```` ```json\n … \n``` ````), then
/// optional whitespace and `end` (a missing end at the very end of the output is tolerated
/// when the JSON is complete). A fence with another language tag (```` ```python ````) holds
/// raw code, read as `{"code": CODE}` (the functionary convention for code tools).
pub fn read_arguments_then(body: &str, end: &str, at_end: bool) -> ArgsRead {
    let ws = body.len() - body.trim_start().len();
    let b = &body[ws..];
    let mut json_start = ws;
    let mut fenced = false;
    if b.starts_with("```") {
        let Some(nl) = b.find('\n') else {
            return if at_end {
                ArgsRead::Bad(ToolParseError::Unterminated)
            } else {
                ArgsRead::Pending(String::new())
            };
        };
        let lang = b[3..nl].trim();
        if !lang.is_empty() && lang != "json" {
            let code_start = ws + nl + 1;
            let Some(close) = body[code_start..].find("```") else {
                return if at_end {
                    ArgsRead::Bad(ToolParseError::Unterminated)
                } else {
                    ArgsRead::Pending(String::new())
                };
            };
            let code = body[code_start..code_start + close].trim_end_matches('\n');
            let value = serde_json::json!({ "code": code });
            let after = code_start + close + 3;
            return finish_args(body, value.to_string(), value, after, end, at_end);
        }
        json_start = ws + nl + 1;
        fenced = true;
    } else if !at_end && b.len() < 3 && "```".starts_with(b) {
        return ArgsRead::Pending(String::new());
    }
    let j = &body[json_start..];
    match read_json_value(j) {
        JsonRead::Incomplete => {
            if at_end {
                return ArgsRead::Bad(ToolParseError::Unterminated);
            }
            let t = j.trim();
            ArgsRead::Pending(t.to_owned())
        }
        JsonRead::Invalid(e) => ArgsRead::Bad(ToolParseError::InvalidJson(e)),
        JsonRead::Complete { value, end: e } => {
            let value = match arguments_object(&value).and_then(|v| {
                check_argument_keys(&j[..e])?;
                Ok(v)
            }) {
                Ok(v) => v,
                Err(err) => return ArgsRead::Bad(err),
            };
            let raw = j[..e].trim().to_owned();
            let mut after = json_start + e;
            if fenced {
                let rest = &body[after..];
                let w = rest.len() - rest.trim_start().len();
                if rest[w..].starts_with("```") {
                    after += w + 3;
                } else if !at_end && rest[w..].len() < 3 && "```".starts_with(&rest[w..]) {
                    return ArgsRead::Pending(raw);
                }
            }
            finish_args(body, raw, value, after, end, at_end)
        }
    }
}

fn finish_args(
    body: &str,
    raw: String,
    value: Value,
    after: usize,
    end: &str,
    at_end: bool,
) -> ArgsRead {
    let rest = &body[after..];
    let w = rest.len() - rest.trim_start().len();
    let tail = &rest[w..];
    if tail.starts_with(end) {
        return ArgsRead::Done {
            value,
            text: raw,
            len: after + w + end.len(),
        };
    }
    if tail.is_empty() || end.starts_with(tail) {
        if at_end {
            // The end marker never came, or came cut off (a stop token or the length limit
            // cut the output): complete JSON is a call, and the cut-off marker is its end.
            return ArgsRead::Done {
                value,
                text: raw,
                len: body.len(),
            };
        }
        return ArgsRead::Pending(raw);
    }
    ArgsRead::Bad(ToolParseError::Syntax(format!(
        "expected {end} after the arguments, found {:?}",
        departure(tail, end)
    )))
}

/// The start of `tail` up to and including the first character where it departs from
/// `marker` (all of `tail` when it is a prefix of `marker`): the text that decided it is
/// not the marker, the same however much of the output has arrived after it (an error
/// message quoting more would differ between a stream and the whole output).
pub fn departure<'t>(tail: &'t str, marker: &str) -> &'t str {
    let same = tail
        .bytes()
        .zip(marker.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let mut cut = (same + 1).min(tail.len());
    while !tail.is_char_boundary(cut) {
        cut += 1;
    }
    &tail[..cut]
}

/// The rest of a sectioned family's call (DeepSeek, Kimi K2) once its header is read:
/// the arguments from `body[args_start..]` up to `end` ([`read_arguments_then`]), as a call
/// named `name` with `id`. `name_ok` is the name's check against the tools: a bad name
/// makes the call malformed once its arguments end, and is never streamed.
pub fn read_call_arguments(
    body: &str,
    args_start: usize,
    end: &str,
    at_end: bool,
    name: &str,
    id: Option<&str>,
    name_ok: Result<(), ToolParseError>,
) -> CallRead {
    let bad = |error: ToolParseError| CallRead::Bad {
        error,
        len: bad_len(body, end),
    };
    match read_arguments_then(&body[args_start..], end, at_end) {
        ArgsRead::Pending(arguments_text) => CallRead::Pending(PartialCall {
            id: name_ok.is_ok().then(|| id.map(str::to_owned)).flatten(),
            name: name_ok.is_ok().then(|| name.to_owned()),
            arguments_text,
            complete: None,
        }),
        ArgsRead::Done { value, text, len } => match name_ok {
            Ok(()) => CallRead::Done {
                call: crate::ToolCall {
                    id: id.map(str::to_owned),
                    name: name.to_owned(),
                    arguments: value,
                },
                arguments_text: text,
                len: args_start + len,
            },
            Err(error) => CallRead::Bad {
                error,
                len: args_start + len,
            },
        },
        ArgsRead::Bad(e) => bad(name_ok.err().unwrap_or(e)),
    }
}

/// The result of [`read_arguments_then`].
#[derive(Debug)]
pub enum ArgsRead {
    /// Still arriving; the raw argument text so far.
    Pending(String),
    /// The arguments and the raw text, `len` bytes consumed (the end marker included).
    Done {
        /// The arguments object.
        value: Value,
        /// Its raw text.
        text: String,
        /// Bytes consumed.
        len: usize,
    },
    /// Not a call's arguments.
    Bad(ToolParseError),
}

/// The length of a malformed call's text in `body`: up to and including the first `end`,
/// or everything.
pub fn bad_len(body: &str, end: &str) -> usize {
    body.find(end).map(|k| k + end.len()).unwrap_or(body.len())
}

/// The text an error message quotes as "found": at most 20 characters of `rest`, and no
/// further than the malformed call's extent (up to and including the first `end`), so the
/// message never depends on text after the call (a stream reports the same message as the
/// whole-output parse).
pub fn found_text(rest: &str, end: &str) -> String {
    rest[..bad_len(rest, end)].chars().take(20).collect()
}
