//! A structural tag written as an llguidance Lark grammar: llguidance's side of
//! `tokensieve bench --tools` (issue 24), so that both engines constrain the same
//! language and are fed the same tokens.
//!
//! The translation follows llguidance's own grammar syntax (`docs/syntax.md` of
//! llguidance): a marker that is a special token of llguidance's tokenizer becomes
//! `<[id]>` (llguidance counts every added token spelled `<…>` as special, so Qwen3's
//! `<tool_call>` and DeepSeek's `<｜tool▁calls▁begin｜>` are such tokens there); other text
//! is a string literal; a `json_schema` format is `%json { schema }`; free text
//! (`any_text`) is the terminal `/(?s:.*)/ & ~/(?s:.*)(EXCLUDES)(?s:.*)/`. Free text
//! followed by a marker written as text (Kimi K2's markers on a vocabulary without them)
//! is llguidance's tool-calling pattern: a lazy lexeme `head[lazy]: TEXT "marker"`, since
//! a greedy text lexeme would swallow the marker's first bytes.
//!
//! What the Lark form does not carry over: tokensieve's caps on JSON whitespace and
//! digits (`max_whitespace`, `max_number_digits`; llguidance's JSON whitespace is
//! unbounded) and `string_excludes` (markers kept out of JSON strings; in llguidance a
//! special token never occurs inside a string anyway, but its spelling may). Both only
//! widen llguidance's language, so every text tokensieve accepts llguidance accepts too.

use std::collections::HashMap;

use tokensieve::structural_tag::{Delimiter, Format, JsonStyle, Tag, TokenSpec};
use tokensieve::StructuralTag;

/// `tag` as a Lark grammar whose `start` rule matches the tag's language.
///
/// `specials` lists the special tokens of the target tokenizer as `(text, id)`; text
/// containing one of them is written with `<[id]>` there (longest text first where two
/// overlap).
///
/// # Errors
/// A message naming the format that has no Lark form here: `grammar`, `dispatch`,
/// `triggered_tags`, `any_tokens`, `token_triggered_tags`, and `json_schema` in an XML
/// style. (The families' default `auto` tags use none of them.)
pub fn structural_tag_to_lark(
    tag: &StructuralTag,
    specials: &[(String, u32)],
) -> Result<String, String> {
    let mut specials: Vec<(String, u32)> = specials
        .iter()
        .filter(|(t, _)| !t.is_empty())
        .cloned()
        .collect();
    specials.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    let mut w = Writer {
        specials,
        rules: Vec::new(),
        texts: HashMap::new(),
        tag_rests: HashMap::new(),
    };
    let start = w.format(&tag.format)?;
    let mut out = format!("start: {}\n", nonempty(&start));
    for r in &w.rules {
        out.push_str(r);
        out.push('\n');
    }
    Ok(out)
}

/// An empty expression as a rule body: the empty string literal.
fn nonempty(e: &str) -> &str {
    if e.is_empty() {
        "\"\""
    } else {
        e
    }
}

/// `/(?s:.*)/` minus the texts containing any of `excludes`.
fn text_terminal(excludes: &[String]) -> String {
    let any = "/(?s:.*)/";
    let parts: Vec<String> = excludes
        .iter()
        .filter(|e| !e.is_empty())
        .map(|e| regex_escape(e))
        .collect();
    if parts.is_empty() {
        any.to_string()
    } else {
        format!("{any} & ~/(?s:.*)(?:{})(?s:.*)/", parts.join("|"))
    }
}

/// `s` as a regex matching exactly `s`, inside Lark's `/…/` (so `/` escaped too).
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$'
            | '#' | '&' | '-' | '~' | '/' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            _ => out.push(c),
        }
    }
    out
}

/// A Lark string literal (JSON escapes: llguidance reads its literals as JSON strings).
fn literal(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// Joins non-empty expressions with spaces.
fn seq<S: AsRef<str>>(parts: &[S]) -> String {
    parts
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Alternatives; an empty one makes the group optional.
fn alt(parts: &[String]) -> String {
    let mut nonempty: Vec<&str> = Vec::new();
    for p in parts {
        if !p.is_empty() && !nonempty.contains(&p.as_str()) {
            nonempty.push(p);
        }
    }
    let optional = nonempty.len() < parts.len();
    match (nonempty.len(), optional) {
        (0, _) => String::new(),
        (1, false) => nonempty[0].to_string(),
        (_, false) => format!("({})", nonempty.join(" | ")),
        (_, true) => format!("({})?", nonempty.join(" | ")),
    }
}

/// One way a format can start: the text before its first special token or non-literal
/// part (possibly empty), and the Lark expression of the rest.
struct Start {
    text: String,
    rest: String,
}

struct Writer {
    specials: Vec<(String, u32)>,
    rules: Vec<String>,
    /// Free-text terminals already written, by their definition.
    texts: HashMap<String, String>,
    /// Each tag's content and end, written once (a tag is met twice: as a start of its
    /// call list and as an alternative of it).
    tag_rests: HashMap<*const Tag, String>,
}

impl Writer {
    fn rule(&mut self, prefix: &str, body: &str) -> String {
        let name = format!("{prefix}{}", self.rules.len());
        self.rules.push(format!("{name}: {}", nonempty(body)));
        name
    }

    /// `s` split at the special tokens it contains: (text, or a special token's id).
    fn pieces<'s>(&self, s: &'s str) -> Vec<Result<&'s str, u32>> {
        let mut out = Vec::new();
        let (mut lit, mut i) = (0, 0);
        while i < s.len() {
            match self
                .specials
                .iter()
                .find(|(t, _)| s[i..].starts_with(t.as_str()))
            {
                Some((t, id)) => {
                    if lit < i {
                        out.push(Ok(&s[lit..i]));
                    }
                    out.push(Err(*id));
                    i += t.len();
                    lit = i;
                }
                None => i += s[i..].chars().next().map_or(1, char::len_utf8),
            }
        }
        if lit < s.len() {
            out.push(Ok(&s[lit..]));
        }
        out
    }

    fn piece(p: &Result<&str, u32>) -> String {
        match p {
            Ok(t) => literal(t),
            Err(id) => format!("<[{id}]>"),
        }
    }

    fn text(&self, s: &str) -> String {
        seq(&self.pieces(s).iter().map(Self::piece).collect::<Vec<_>>())
    }

    /// The text before the first special token of `s`, and the rest as Lark.
    fn text_start(&self, s: &str) -> Start {
        let pieces = self.pieces(s);
        match pieces.first() {
            Some(Ok(t)) => Start {
                text: t.to_string(),
                rest: seq(&pieces[1..].iter().map(Self::piece).collect::<Vec<_>>()),
            },
            _ => Start {
                text: String::new(),
                rest: seq(&pieces.iter().map(Self::piece).collect::<Vec<_>>()),
            },
        }
    }

    fn delimiter(&self, d: &Delimiter) -> String {
        match d {
            Delimiter::Text(s) => self.text(s),
            Delimiter::Token(TokenSpec::Id(id)) => format!("<[{id}]>"),
            Delimiter::Token(TokenSpec::Text(s)) => self.text(s),
        }
    }

    fn free_text(&mut self, excludes: &[String]) -> String {
        let def = text_terminal(excludes);
        if let Some(name) = self.texts.get(&def) {
            return name.clone();
        }
        let name = format!("TEXT{}", self.texts.len());
        self.rules.push(format!("{name}: {def}"));
        self.texts.insert(def, name.clone());
        name
    }

    fn tag_rest(&mut self, t: &Tag) -> Result<String, String> {
        if let Some(r) = self.tag_rests.get(&(t as *const Tag)) {
            return Ok(r.clone());
        }
        let content = self.format(&t.content)?;
        let ends: Vec<String> = t.end.iter().map(|d| self.delimiter(d)).collect();
        let rest = seq(&[content, alt(&ends)]);
        self.tag_rests.insert(t as *const Tag, rest.clone());
        Ok(rest)
    }

    fn tag(&mut self, t: &Tag) -> Result<String, String> {
        let begin = self.delimiter(&t.begin);
        let rest = self.tag_rest(t)?;
        Ok(seq(&[begin, rest]))
    }

    /// One rule matching any of `tags`.
    fn tag_choice(&mut self, tags: &[Tag]) -> Result<String, String> {
        let mut alts = Vec::with_capacity(tags.len());
        for t in tags {
            alts.push(self.tag(t)?);
        }
        let body = alts.join("\n    | ");
        Ok(self.rule("t", &body))
    }

    fn separated_tail(
        &mut self,
        tags: &[Tag],
        separator: &str,
        stop_after_first: bool,
    ) -> Result<(String, String), String> {
        let choice = self.tag_choice(tags)?;
        let tail = if stop_after_first {
            String::new()
        } else {
            format!("({})*", seq(&[self.text(separator), choice.clone()]))
        };
        Ok((choice, tail))
    }

    fn format(&mut self, f: &Format) -> Result<String, String> {
        Ok(match f {
            Format::ConstString { value } => self.text(value),
            Format::JsonSchema {
                json_schema, style, ..
            } => {
                if *style != JsonStyle::Json {
                    return Err(format!(
                        "json_schema in style {style:?} has no Lark form (llguidance writes JSON only)"
                    ));
                }
                let schema = match json_schema {
                    serde_json::Value::Bool(true) => serde_json::json!({}),
                    s => s.clone(),
                };
                self.rule("j", &format!("%json {schema}"))
            }
            Format::Regex { pattern } => format!("/{}/", pattern.replace('/', "\\/")),
            Format::AnyText { excludes } => self.free_text(excludes),
            Format::Sequence { elements } => self.sequence(elements)?,
            Format::Or { elements } => {
                let mut alts = Vec::with_capacity(elements.len());
                for e in elements {
                    alts.push(self.format(e)?);
                }
                alt(&alts)
            }
            Format::Optional { content } => {
                let c = self.format(content)?;
                alt(&[c, String::new()])
            }
            Format::Plus { content } => format!("({})+", nonempty(&self.format(content)?)),
            Format::Star { content } => format!("({})*", nonempty(&self.format(content)?)),
            Format::Repeat { min, max, content } => {
                let c = self.format(content)?;
                match max {
                    Some(max) => format!("({}){{{min},{max}}}", nonempty(&c)),
                    None => format!("({}){{{min},}}", nonempty(&c)),
                }
            }
            Format::Tag(t) => self.tag(t)?,
            Format::TagsWithSeparator {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => {
                let (choice, tail) = self.separated_tail(tags, separator, *stop_after_first)?;
                let some = seq(&[choice, tail]);
                if *at_least_one {
                    some
                } else {
                    alt(&[some, String::new()])
                }
            }
            Format::Token {
                token: TokenSpec::Id(id),
            } => format!("<[{id}]>"),
            Format::Token {
                token: TokenSpec::Text(s),
            } => self.text(s),
            Format::Grammar { .. } => return Err(unsupported("grammar")),
            Format::TriggeredTags { .. } => return Err(unsupported("triggered_tags")),
            Format::Dispatch { .. } => return Err(unsupported("dispatch")),
            Format::AnyTokens { .. } => return Err(unsupported("any_tokens")),
            Format::TokenTriggeredTags { .. } => return Err(unsupported("token_triggered_tags")),
        })
    }

    /// A sequence; free text followed by something that starts with text gets lazy heads.
    fn sequence(&mut self, elements: &[Format]) -> Result<String, String> {
        let mut parts = Vec::with_capacity(elements.len());
        let mut i = 0;
        while i < elements.len() {
            if let (Format::AnyText { excludes }, Some(next)) = (&elements[i], elements.get(i + 1))
            {
                // `starts` writes the rules of `next`; unless a start is text (which needs
                // a lazy head), they are dropped again and `next` is written as it is.
                let saved = (self.rules.len(), self.texts.clone());
                match self.starts(next)? {
                    Some(starts) if starts.iter().any(|s| !s.text.is_empty()) => {
                        let text = self.free_text(excludes);
                        parts.push(self.lazy_heads(&text, starts));
                        i += 2;
                        continue;
                    }
                    _ => {
                        self.rules.truncate(saved.0);
                        self.texts = saved.1;
                        self.tag_rests.clear();
                    }
                }
            }
            parts.push(self.format(&elements[i])?);
            i += 1;
        }
        Ok(seq(&parts))
    }

    /// `text` then one of `starts`: those that begin with text through one lazy lexeme
    /// (free text up to their longest common text prefix), the others after the greedy
    /// free text.
    fn lazy_heads(&mut self, text: &str, starts: Vec<Start>) -> String {
        let (with_text, without): (Vec<Start>, Vec<Start>) =
            starts.into_iter().partition(|s| !s.text.is_empty());
        let mut prefix: &str = &with_text[0].text;
        for s in &with_text[1..] {
            let common = prefix
                .char_indices()
                .zip(s.text.chars())
                .find(|((_, a), b)| a != b)
                .map_or(prefix.len().min(s.text.len()), |((i, _), _)| i);
            prefix = &prefix[..common];
        }
        let mut alts = Vec::new();
        if prefix.is_empty() {
            // No shared trigger: each start after the greedy text (as written).
            for s in with_text {
                alts.push(seq(&[text.to_string(), self.text(&s.text), s.rest]));
            }
        } else {
            let head = format!("h{}", self.rules.len());
            self.rules
                .push(format!("{head}[lazy]: {text} {}", literal(prefix)));
            let prefix_len = prefix.len();
            let rests: Vec<String> = with_text
                .iter()
                .map(|s| seq(&[self.text(&s.text[prefix_len..]), s.rest.clone()]))
                .collect();
            alts.push(seq(&[head, alt(&rests)]));
        }
        let rests: Vec<String> = without.into_iter().map(|s| s.rest).collect();
        if !rests.is_empty() {
            alts.push(seq(&[text.to_string(), alt(&rests)]));
        }
        alt(&alts)
    }

    /// The ways `f` can start (see [`Start`]), or `None` when a start is not a literal.
    fn starts(&mut self, f: &Format) -> Result<Option<Vec<Start>>, String> {
        Ok(Some(match f {
            Format::ConstString { value } => vec![self.text_start(value)],
            Format::Tag(t) => vec![self.tag_start(t)?],
            Format::Sequence { elements } if !elements.is_empty() => {
                let Some(mut first) = self.starts(&elements[0])? else {
                    return Ok(None);
                };
                let rest = self.sequence(&elements[1..])?;
                for s in &mut first {
                    s.rest = seq(&[std::mem::take(&mut s.rest), rest.clone()]);
                }
                first
            }
            Format::Or { elements } => {
                let mut all = Vec::new();
                for e in elements {
                    let Some(s) = self.starts(e)? else {
                        return Ok(None);
                    };
                    all.extend(s);
                }
                all
            }
            Format::Optional { content } => {
                let Some(mut s) = self.starts(content)? else {
                    return Ok(None);
                };
                s.push(Start {
                    text: String::new(),
                    rest: String::new(),
                });
                s
            }
            Format::TagsWithSeparator {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => {
                let (_, tail) = self.separated_tail(tags, separator, *stop_after_first)?;
                let mut all = Vec::with_capacity(tags.len() + 1);
                for t in tags {
                    let mut s = self.tag_start(t)?;
                    s.rest = seq(&[std::mem::take(&mut s.rest), tail.clone()]);
                    all.push(s);
                }
                if !at_least_one {
                    all.push(Start {
                        text: String::new(),
                        rest: String::new(),
                    });
                }
                all
            }
            _ => return Ok(None),
        }))
    }

    fn tag_start(&mut self, t: &Tag) -> Result<Start, String> {
        let mut s = match &t.begin {
            Delimiter::Text(b) | Delimiter::Token(TokenSpec::Text(b)) => self.text_start(b),
            Delimiter::Token(TokenSpec::Id(id)) => Start {
                text: String::new(),
                rest: format!("<[{id}]>"),
            },
        };
        let rest = self.tag_rest(t)?;
        s.rest = seq(&[std::mem::take(&mut s.rest), rest]);
        Ok(s)
    }
}

fn unsupported(what: &str) -> String {
    format!("the structural-tag format `{what}` has no Lark form in the bench")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tag(v: serde_json::Value) -> StructuralTag {
        StructuralTag::from_json(&json!({"type": "structural_tag", "format": v})).expect("tag")
    }

    /// Hermes' shape with `<tool_call>` a special token: free text, then the calls after
    /// it, markers as token ids, arguments as `%json`.
    #[test]
    fn special_markers_become_token_ids() {
        let t = tag(json!({"type": "sequence", "elements": [
            {"type": "any_text", "excludes": ["<tool_call>", "<think>"]},
            {"type": "optional", "content": {"type": "tags_with_separator", "separator": "\n",
             "at_least_one": true, "stop_after_first": false, "tags": [
                {"type": "tag", "begin": "<tool_call>\n{\"name\": \"f\", \"arguments\": ",
                 "content": {"type": "json_schema", "json_schema": {"type": "object"}},
                 "end": "}\n</tool_call>"}]}}]}));
        let specials = [
            ("<tool_call>".to_string(), 7),
            ("</tool_call>".to_string(), 8),
        ];
        let lark = structural_tag_to_lark(&t, &specials).expect("lark");
        assert_eq!(
            lark,
            "start: TEXT0 (t2 (\"\\n\" t2)*)?\n\
             TEXT0: /(?s:.*)/ & ~/(?s:.*)(?:<tool_call>|<think>)(?s:.*)/\n\
             j1: %json {\"type\":\"object\"}\n\
             t2: <[7]> \"\\n{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": \" j1 \"}\\n\" <[8]>\n"
        );
    }

    /// Kimi's shape with text markers: free text and the section's begin are one lazy
    /// lexeme, taken by the call branch only.
    #[test]
    fn text_markers_after_free_text_are_lazy_heads() {
        let t = tag(json!({"type": "sequence", "elements": [
            {"type": "any_text", "excludes": ["<|s|>"]},
            {"type": "optional", "content": {"type": "sequence", "elements": [
                {"type": "const_string", "value": "<|s|>"},
                {"type": "tags_with_separator", "separator": "", "at_least_one": true,
                 "stop_after_first": false, "tags": [
                    {"type": "tag", "begin": "<|c|>functions.f:",
                     "content": {"type": "sequence", "elements": [
                        {"type": "regex", "pattern": "[0-9]{1,6}"},
                        {"type": "json_schema", "json_schema": true}]},
                     "end": "<|e|>"}]},
                {"type": "const_string", "value": "<|/s|>"}]}}]}));
        let lark = structural_tag_to_lark(&t, &[]).expect("lark");
        assert_eq!(
            lark,
            "start: (h3 t1 (t1)* \"<|/s|>\" | TEXT0)\n\
             j0: %json {}\n\
             t1: \"<|c|>functions.f:\" /[0-9]{1,6}/ j0 \"<|e|>\"\n\
             TEXT0: /(?s:.*)/ & ~/(?s:.*)(?:<\\|s\\|>)(?s:.*)/\n\
             h3[lazy]: TEXT0 \"<|s|>\"\n"
        );
    }

    #[test]
    fn formats_without_a_lark_form_are_named() {
        let t = tag(json!({"type": "grammar", "grammar": "root ::= \"a\""}));
        let err = structural_tag_to_lark(&t, &[]).expect_err("no grammar");
        assert!(err.contains("`grammar`"), "{err}");
    }
}
