//! Formats → grammar IR.

use super::format::{Delimiter, Format, StructuralTag, Tag, TokenSpec};
use super::text::text_avoiding;
use super::StructuralTagError;
use crate::grammar::builder::GrammarBuilder;
use crate::grammar::{parse_ebnf, Expr, Grammar, RuleId, TokenRef};
use crate::json_schema::{json_schema_to_grammar_limited, Form, JsonSchemaOptions};
use crate::limits::Limits;
use crate::regex::{regex_to_grammar, RegexOptions};
use crate::vocab::Vocabulary;

/// The tag as grammar IR, with `tools[r]` set for the root rule of each embedded JSON
/// Schema (a tool's arguments: the deferral roots of `compiler::deferred`). With
/// `compact`, embedded JSON Schemas are compact (`json_schema::to_grammar`) and
/// `always[r]` marks the rules the compile must inline; without, `always` is all false.
pub(super) fn lower(
    tag: &StructuralTag,
    vocab: Option<&Vocabulary>,
    limits: &Limits,
    compact: bool,
) -> Result<(Grammar, Vec<bool>, Vec<bool>), StructuralTagError> {
    let mut specials: Vec<(Vec<u8>, u32)> = vocab
        .map(|v| {
            v.special_tokens()
                .filter_map(|id| {
                    let b = v.token_bytes(id)?;
                    (!b.is_empty()).then(|| (b.to_vec(), id))
                })
                .collect()
        })
        .unwrap_or_default();
    // Longest first, so that a special token whose text contains another's wins.
    specials.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    let mut by_first: Vec<Vec<u32>> = vec![Vec::new(); 256];
    for (i, (t, _)) in specials.iter().enumerate() {
        by_first[t[0] as usize].push(i as u32);
    }
    let mut l = Lowerer {
        b: GrammarBuilder::default(),
        vocab,
        specials,
        by_first,
        limits: limits.clone(),
        schema_roots: Vec::new(),
        compact,
        always: Vec::new(),
        strings: Default::default(),
        anys: Default::default(),
    };
    let root = l.b.reserve("root");
    let body = l.format(&tag.format, "format", &[])?;
    l.b.set(root, body);
    let g = l.b.finish(root);
    let mut tools = vec![false; g.rules.len()];
    for r in l.schema_roots {
        tools[r.index()] = true;
    }
    let mut always = vec![false; g.rules.len()];
    for r in l.always {
        always[r.index()] = true;
    }
    Ok((g, tools, always))
}

/// Whether a format may match the empty string (conservative: false where unsure).
fn nullable(f: &Format) -> bool {
    match f {
        Format::ConstString { value } => value.is_empty(),
        Format::AnyText { .. } | Format::AnyTokens { .. } | Format::Dispatch { .. } => true,
        Format::Optional { .. } | Format::Star { .. } => true,
        Format::Repeat { min, content, .. } => *min == 0 || nullable(content),
        Format::Plus { content } => nullable(content),
        Format::Sequence { elements } => elements.iter().all(nullable),
        Format::Or { elements } => elements.iter().any(nullable),
        Format::TriggeredTags { at_least_one, .. }
        | Format::TagsWithSeparator { at_least_one, .. }
        | Format::TokenTriggeredTags { at_least_one, .. } => !at_least_one,
        _ => false,
    }
}

pub(super) struct Lowerer<'v> {
    pub(super) b: GrammarBuilder,
    vocab: Option<&'v Vocabulary>,
    /// The vocabulary's special tokens with non-empty text, longest text first.
    specials: Vec<(Vec<u8>, u32)>,
    /// Per first byte: the indices in `specials` of the tokens whose text starts with it,
    /// in `specials`' order (a vocabulary may have hundreds of special tokens).
    by_first: Vec<Vec<u32>>,
    /// The compiler's limits, applied to embedded JSON Schemas too.
    pub(super) limits: Limits,
    /// The root rules of the embedded JSON Schemas (not in XML style).
    schema_roots: Vec<crate::grammar::RuleId>,
    /// Embedded JSON Schemas are compact (`json_schema::to_grammar`).
    pub(super) compact: bool,
    /// The rules the compile must inline whatever their size (of compact JSON Schemas).
    always: Vec<crate::grammar::RuleId>,
    /// The JSON string rule every compact schema calls, by the strings it excludes.
    strings: rustc_hash::FxHashMap<Vec<String>, crate::grammar::RuleId>,
    /// The generic JSON value rule that the compact schemas calling one share, by their
    /// options (as `Debug` writes them).
    anys: rustc_hash::FxHashMap<String, crate::grammar::RuleId>,
}

impl Lowerer<'_> {
    /// Text as grammar: bytes, except where the text of a special token of the vocabulary
    /// occurs: there that token (atomic).
    pub(super) fn text(&self, s: &str) -> Expr {
        let bytes = s.as_bytes();
        let mut parts = Vec::new();
        let mut lit_start = 0;
        let mut i = 0;
        while i < bytes.len() {
            let hit = self.by_first[bytes[i] as usize]
                .iter()
                .map(|&k| &self.specials[k as usize])
                .find(|(t, _)| bytes[i..].starts_with(t));
            match hit {
                Some((t, id)) => {
                    if lit_start < i {
                        parts.push(Expr::Bytes(bytes[lit_start..i].to_vec()));
                    }
                    parts.push(Expr::Token(TokenRef::Id(*id)));
                    i += t.len();
                    lit_start = i;
                }
                None => i += 1,
            }
        }
        if lit_start < bytes.len() {
            parts.push(Expr::Bytes(bytes[lit_start..].to_vec()));
        }
        match parts.len() {
            0 => Expr::Empty,
            1 => parts.pop().expect("one part"),
            _ => Expr::Seq(parts),
        }
    }

    /// True when `s` is exactly one special token of the vocabulary.
    fn is_special_text(&self, s: &str) -> bool {
        matches!(self.text(s), Expr::Token(_))
    }

    fn token(&self, t: &TokenSpec, path: &str) -> Result<Expr, StructuralTagError> {
        let Some(vocab) = self.vocab else {
            return Ok(Expr::Token(match t {
                TokenSpec::Id(i) => TokenRef::Id(*i),
                TokenSpec::Text(s) => TokenRef::Text(s.clone()),
            }));
        };
        let id = match t {
            TokenSpec::Id(i) if (*i as usize) < vocab.tokenizer_size() => *i,
            TokenSpec::Id(i) => {
                return Err(StructuralTagError::Token {
                    path: path.to_string(),
                    reason: format!(
                        "token id {i} is past the vocabulary of {} tokens",
                        vocab.tokenizer_size()
                    ),
                })
            }
            TokenSpec::Text(s) => match vocab.special_token_id(s) {
                Some(id) => id,
                // An ordinary token: matched as its text, by any tokenization of it (the
                // compiler reads a terminal naming an ordinary token as its bytes too).
                None if !s.is_empty()
                    && (0..vocab.tokenizer_size() as u32)
                        .any(|id| vocab.token_bytes(id) == Some(s.as_bytes())) =>
                {
                    return Ok(Expr::Bytes(s.as_bytes().to_vec()))
                }
                None => {
                    return Err(StructuralTagError::Token {
                        path: path.to_string(),
                        reason: format!(
                            "{s:?} is not a token of the vocabulary (neither a special token \
                             nor an ordinary token spelled so)"
                        ),
                    })
                }
            },
        };
        if vocab.is_special(id) {
            Ok(Expr::Token(TokenRef::Id(id)))
        } else {
            let bytes = vocab.token_bytes(id).unwrap_or(&[]);
            Ok(if bytes.is_empty() {
                Expr::Empty
            } else {
                Expr::Bytes(bytes.to_vec())
            })
        }
    }

    fn delimiter(&self, d: &Delimiter, path: &str) -> Result<Expr, StructuralTagError> {
        match d {
            Delimiter::Text(s) => Ok(self.text(s)),
            Delimiter::Token(t) => self.token(t, path),
        }
    }

    /// The text a delimiter stops free text at: text ends that are not one special token.
    /// (A `token` end naming an ordinary token is its text.)
    fn stop_texts(&self, ends: &[Delimiter]) -> Vec<String> {
        ends.iter()
            .filter_map(|d| match d {
                Delimiter::Text(s) if !s.is_empty() && !self.is_special_text(s) => Some(s.clone()),
                Delimiter::Token(t) => match self.token(t, "") {
                    Ok(Expr::Bytes(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    fn free_text(&mut self, excludes: &[String], stop: &[String]) -> Expr {
        let all: Vec<String> = excludes.iter().chain(stop).cloned().collect();
        text_avoiding(&mut self.b, &all, "text")
    }

    fn embed(&mut self, g: Grammar, prefix: &str) -> Expr {
        Expr::Rule(self.b.embed(g, prefix))
    }

    /// The form of the JSON Schema grammars this lowering embeds.
    pub(super) fn json_form(&self) -> Form {
        if self.compact {
            Form::Embedded
        } else {
            Form::Written
        }
    }

    /// Embeds a JSON Schema's grammar made under `opts` (rules prefixed `prefix`), keeping
    /// its rules to inline, its JSON strings sent to the tag's one string rule for `opts`'
    /// excluded strings and its generic JSON values to the tag's one such rule for `opts`;
    /// returns its root.
    ///
    /// # Errors
    /// As [`Lowerer::string_rule`] and [`Lowerer::any_rule`].
    pub(super) fn embed_json(
        &mut self,
        g: crate::json_schema::JsonSchemaGrammar,
        opts: &JsonSchemaOptions,
        prefix: &str,
        path: &str,
    ) -> Result<RuleId, StructuralTagError> {
        let embedded = self.json_form() == Form::Embedded;
        let mut redirects = Vec::new();
        if let Some(p) = g.string_rule.filter(|_| embedded) {
            redirects.push((p.0, self.string_rule(opts, path)?));
        }
        if let Some(p) = g.any_rule.filter(|_| embedded) {
            redirects.push((p.0, self.any_rule(opts, path)?));
        }
        Ok(self.embed_json_redirecting(g, prefix, &redirects))
    }

    /// Embeds `g` with `redirects` ([`GrammarBuilder::embed_redirecting`]), its rules to
    /// inline marked; returns its root.
    fn embed_json_redirecting(
        &mut self,
        g: crate::json_schema::JsonSchemaGrammar,
        prefix: &str,
        redirects: &[(u32, RuleId)],
    ) -> RuleId {
        let base = self.b.rules_len() as u32;
        for (r, _) in g.always.iter().enumerate().filter(|(_, &a)| a) {
            self.always.push(RuleId(base + r as u32));
        }
        self.b.embed_redirecting(g.grammar, prefix, redirects)
    }

    /// The tag's rule of the generic JSON value under `opts` (its strings the tag's string
    /// rule), made on first use: every tool's generic values call it, so its automaton is
    /// built once (`compiler::machinery`) and its masks are walked once.
    ///
    /// # Errors
    /// The front end's error for `true` under `opts` (none is expected).
    fn any_rule(
        &mut self,
        opts: &JsonSchemaOptions,
        path: &str,
    ) -> Result<RuleId, StructuralTagError> {
        let only = JsonSchemaOptions {
            root_whitespace: false,
            ..opts.clone()
        };
        let key = format!("{only:?}");
        if let Some(&r) = self.anys.get(&key) {
            return Ok(r);
        }
        let g = json_schema_to_grammar_limited(
            &serde_json::Value::Bool(true),
            &only,
            &self.limits,
            Form::Embedded,
        )
        .map_err(|e| StructuralTagError::Schema {
            path: path.to_string(),
            source: Box::new(e),
        })?;
        let mut redirects = Vec::new();
        if let Some(p) = g.string_rule {
            redirects.push((p.0, self.string_rule(opts, path)?));
        }
        let base = self.b.rules_len() as u32;
        let root = g.any_rule.map(|r| RuleId(base + r.0));
        let top = self.embed_json_redirecting(g, "json", &redirects);
        let any = root.unwrap_or(top);
        self.anys.insert(key, any);
        Ok(any)
    }

    /// The tag's rule of any JSON string that holds none of `opts`' excluded strings,
    /// made on first use.
    ///
    /// # Errors
    /// The string schema's front-end error (none is expected: `{"type": "string"}`).
    fn string_rule(
        &mut self,
        opts: &JsonSchemaOptions,
        path: &str,
    ) -> Result<RuleId, StructuralTagError> {
        if let Some(&r) = self.strings.get(&opts.string_excludes) {
            return Ok(r);
        }
        let only = JsonSchemaOptions {
            string_excludes: opts.string_excludes.clone(),
            root_whitespace: false,
            ..JsonSchemaOptions::default()
        };
        let schema = serde_json::json!({"type": "string"});
        let g = json_schema_to_grammar_limited(&schema, &only, &self.limits, Form::Compact)
            .map_err(|e| StructuralTagError::Schema {
                path: path.to_string(),
                source: Box::new(e),
            })?;
        // The string rule itself; its root (the same strings) should it not have one.
        let base = self.b.rules_len() as u32;
        let root = self.b.embed(g.grammar, "json");
        let string = g.string_rule.map_or(root, |r| RuleId(base + r.0));
        self.strings.insert(opts.string_excludes.clone(), string);
        Ok(string)
    }

    /// Lowers `f` (at JSON path `path`); `stop` are the text ends of the enclosing tag when
    /// `f` is in last position inside it.
    pub(super) fn format(
        &mut self,
        f: &Format,
        path: &str,
        stop: &[String],
    ) -> Result<Expr, StructuralTagError> {
        Ok(match f {
            Format::ConstString { value } => self.text(value),
            Format::JsonSchema {
                json_schema,
                style,
                any_order,
                max_whitespace,
                max_whitespace_newlines,
                max_number_digits,
                string_excludes,
            } => {
                let opts = JsonSchemaOptions {
                    any_order: *any_order,
                    max_whitespace: *max_whitespace,
                    max_whitespace_newlines: *max_whitespace_newlines,
                    max_number_digits: *max_number_digits,
                    string_excludes: string_excludes.clone(),
                    ..JsonSchemaOptions::default()
                };
                match super::xml::style_of(style) {
                    None => {
                        let g = json_schema_to_grammar_limited(
                            json_schema,
                            &opts,
                            &self.limits,
                            self.json_form(),
                        )
                        .map_err(|e| StructuralTagError::Schema {
                            path: path.to_string(),
                            source: Box::new(e),
                        })?;
                        let root = self.embed_json(g, &opts, "json", path)?;
                        self.schema_roots.push(root);
                        Expr::Rule(root)
                    }
                    Some(xml) => super::xml::xml_params(self, json_schema, &opts, path, xml)?,
                }
            }
            Format::Regex { pattern } => {
                let g = regex_to_grammar(pattern, &RegexOptions::default()).map_err(|e| {
                    StructuralTagError::Regex {
                        path: path.to_string(),
                        source: e,
                    }
                })?;
                self.embed(g, "regex")
            }
            Format::Grammar { grammar } => {
                let g = parse_ebnf(grammar, "root").map_err(|e| StructuralTagError::Ebnf {
                    path: path.to_string(),
                    source: e,
                })?;
                self.embed(g, "grammar")
            }
            Format::AnyText { excludes } => self.free_text(excludes, stop),
            Format::Sequence { elements } => {
                // An element is in last position when everything after it may be empty.
                let mut can_be_last = vec![true; elements.len()];
                for i in (0..elements.len().saturating_sub(1)).rev() {
                    can_be_last[i] = can_be_last[i + 1] && nullable(&elements[i + 1]);
                }
                let mut parts = Vec::with_capacity(elements.len());
                for (i, e) in elements.iter().enumerate() {
                    let p = format!("{path}.elements[{i}]");
                    parts.push(self.format(e, &p, if can_be_last[i] { stop } else { &[] })?);
                }
                Expr::Seq(parts)
            }
            Format::Or { elements } => {
                if elements.is_empty() {
                    return Err(StructuralTagError::Field {
                        path: format!("{path}.elements"),
                        reason: "`or` needs at least one element".to_string(),
                    });
                }
                let mut alts = Vec::with_capacity(elements.len());
                for (i, e) in elements.iter().enumerate() {
                    alts.push(self.format(e, &format!("{path}.elements[{i}]"), stop)?);
                }
                Expr::Choice(alts)
            }
            Format::Optional { content } => self.repeat(content, 0, Some(1), path, stop)?,
            Format::Plus { content } => self.repeat(content, 1, None, path, stop)?,
            Format::Star { content } => self.repeat(content, 0, None, path, stop)?,
            Format::Repeat { min, max, content } => self.repeat(content, *min, *max, path, stop)?,
            Format::Tag(t) => self.tag(t, path)?,
            Format::TriggeredTags {
                triggers,
                tags,
                at_least_one,
                stop_after_first,
                excludes,
            } => {
                self.check_triggers(triggers, tags, path)?;
                let mut avoid: Vec<String> = triggers.clone();
                avoid.extend(excludes.iter().cloned());
                let text = self.free_text(&avoid, stop);
                let choice = self.tag_choice(tags, path)?;
                self.text_and_tags(text, choice, *at_least_one, *stop_after_first)
            }
            Format::TagsWithSeparator {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => {
                let tag = self.tag_choice(tags, path)?;
                let tag = Expr::Rule(self.b.add("tags", tag));
                let one_or_more = if *stop_after_first {
                    tag
                } else {
                    Expr::Seq(vec![
                        tag.clone(),
                        Expr::Repeat {
                            expr: Box::new(Expr::Seq(vec![self.text(separator), tag])),
                            min: 0,
                            max: None,
                        },
                    ])
                };
                if *at_least_one {
                    one_or_more
                } else {
                    Expr::Repeat {
                        expr: Box::new(one_or_more),
                        min: 0,
                        max: Some(1),
                    }
                }
            }
            Format::Dispatch {
                rules,
                repeat,
                excludes,
            } => {
                let mut avoid: Vec<String> = rules.iter().map(|(p, _)| p.clone()).collect();
                if let Some(i) = avoid.iter().position(String::is_empty) {
                    return Err(StructuralTagError::Field {
                        path: format!("{path}.rules[{i}][0]"),
                        reason: "an empty pattern".to_string(),
                    });
                }
                avoid.extend(excludes.iter().cloned());
                let text = self.free_text(&avoid, stop);
                let mut alts = Vec::with_capacity(rules.len());
                for (i, (pattern, f)) in rules.iter().enumerate() {
                    let body = self.format(f, &format!("{path}.rules[{i}][1]"), &[])?;
                    alts.push(Expr::Seq(vec![self.text(pattern), body]));
                }
                let item = Expr::Rule(self.b.add("dispatch", Expr::Choice(alts)));
                if *repeat {
                    self.text_and_tags(text, item, false, false)
                } else {
                    self.text_and_tags(text, item, false, true)
                }
            }
            Format::Token { token } => self.token(token, &format!("{path}.token"))?,
            Format::AnyTokens { exclude_tokens } => {
                let avoid =
                    self.ordinary_texts(exclude_tokens, &format!("{path}.exclude_tokens"))?;
                self.free_text(&avoid, stop)
            }
            Format::TokenTriggeredTags {
                trigger_tokens,
                tags,
                exclude_tokens,
                at_least_one,
                stop_after_first,
            } => {
                let mut triggers = Vec::with_capacity(trigger_tokens.len());
                for (i, t) in trigger_tokens.iter().enumerate() {
                    let p = format!("{path}.trigger_tokens[{i}]");
                    triggers.push(self.token(t, &p)?);
                }
                for (i, tag) in tags.iter().enumerate() {
                    let p = format!("{path}.tags[{i}].begin");
                    let begin = match &tag.begin {
                        Delimiter::Token(t) => self.token(t, &p)?,
                        Delimiter::Text(s) => self.text(s),
                    };
                    if !triggers.contains(&begin) {
                        return Err(StructuralTagError::Trigger {
                            path: p,
                            reason: "the tag's begin is none of the trigger tokens".to_string(),
                        });
                    }
                }
                for (i, t) in triggers.iter().enumerate() {
                    let used = tags.iter().any(|tag| match &tag.begin {
                        Delimiter::Token(x) => self.token(x, "").ok().as_ref() == Some(t),
                        Delimiter::Text(s) => &self.text(s) == t,
                    });
                    if !used {
                        return Err(StructuralTagError::Trigger {
                            path: format!("{path}.trigger_tokens[{i}]"),
                            reason: "no tag begins with this trigger token".to_string(),
                        });
                    }
                }
                let avoid =
                    self.ordinary_texts(exclude_tokens, &format!("{path}.exclude_tokens"))?;
                let text = self.free_text(&avoid, stop);
                let choice = self.tag_choice(tags, path)?;
                self.text_and_tags(text, choice, *at_least_one, *stop_after_first)
            }
        })
    }

    /// The texts of the ordinary (non-special) tokens among `tokens`: free text avoids them
    /// (special tokens never occur in free text anyway).
    fn ordinary_texts(
        &self,
        tokens: &[TokenSpec],
        path: &str,
    ) -> Result<Vec<String>, StructuralTagError> {
        let mut out = Vec::new();
        for (i, t) in tokens.iter().enumerate() {
            if let Expr::Bytes(b) = self.token(t, &format!("{path}[{i}]"))? {
                out.push(String::from_utf8_lossy(&b).into_owned());
            }
        }
        Ok(out)
    }

    fn repeat(
        &mut self,
        content: &Format,
        min: u32,
        max: Option<u32>,
        path: &str,
        stop: &[String],
    ) -> Result<Expr, StructuralTagError> {
        // Repeated free text is free text: excludes (and the enclosing end) must hold
        // across the pieces too, which a repetition of pieces would not ensure.
        if let Format::AnyText { excludes } = content {
            return Ok(self.free_text(excludes, stop));
        }
        let body = self.format(content, &format!("{path}.content"), stop)?;
        Ok(Expr::Repeat {
            expr: Box::new(body),
            min,
            max,
        })
    }

    fn tag(&mut self, t: &Tag, path: &str) -> Result<Expr, StructuralTagError> {
        let begin = self.delimiter(&t.begin, &format!("{path}.begin"))?;
        let stop = self.stop_texts(&t.end);
        let content = self.format(&t.content, &format!("{path}.content"), &stop)?;
        let mut ends = Vec::with_capacity(t.end.len());
        for (i, d) in t.end.iter().enumerate() {
            let p = if t.end.len() == 1 {
                format!("{path}.end")
            } else {
                format!("{path}.end[{i}]")
            };
            ends.push(self.delimiter(d, &p)?);
        }
        let end = if ends.len() == 1 {
            ends.pop().expect("one end")
        } else {
            Expr::Choice(ends)
        };
        Ok(Expr::Seq(vec![begin, content, end]))
    }

    fn tag_choice(&mut self, tags: &[Tag], path: &str) -> Result<Expr, StructuralTagError> {
        if tags.is_empty() {
            return Err(StructuralTagError::Field {
                path: format!("{path}.tags"),
                reason: "at least one tag is needed".to_string(),
            });
        }
        let mut alts = Vec::with_capacity(tags.len());
        for (i, t) in tags.iter().enumerate() {
            alts.push(self.tag(t, &format!("{path}.tags[{i}]"))?);
        }
        Ok(Expr::Choice(alts))
    }

    /// Each trigger starts some tag's `begin`, and each `begin` (text) starts with exactly
    /// one trigger.
    fn check_triggers(
        &self,
        triggers: &[String],
        tags: &[Tag],
        path: &str,
    ) -> Result<(), StructuralTagError> {
        if triggers.is_empty() {
            return Err(StructuralTagError::Field {
                path: format!("{path}.triggers"),
                reason: "at least one trigger is needed".to_string(),
            });
        }
        let mut begins = Vec::with_capacity(tags.len());
        for (i, t) in tags.iter().enumerate() {
            match &t.begin {
                Delimiter::Text(s) => begins.push(s.as_str()),
                Delimiter::Token(_) => {
                    return Err(StructuralTagError::Trigger {
                        path: format!("{path}.tags[{i}].begin"),
                        reason: "tags of `triggered_tags` begin with text (use \
                                 `token_triggered_tags` for token begins)"
                            .to_string(),
                    })
                }
            }
        }
        for (i, trig) in triggers.iter().enumerate() {
            if trig.is_empty() {
                return Err(StructuralTagError::Trigger {
                    path: format!("{path}.triggers[{i}]"),
                    reason: "an empty trigger".to_string(),
                });
            }
            if !begins.iter().any(|b| b.starts_with(trig.as_str())) {
                return Err(StructuralTagError::Trigger {
                    path: format!("{path}.triggers[{i}]"),
                    reason: format!(
                        "trigger {trig:?} is not a prefix of any tag's begin (each trigger must \
                         start the begin of the tags it opens)"
                    ),
                });
            }
        }
        for (i, b) in begins.iter().enumerate() {
            let n = triggers
                .iter()
                .filter(|t| b.starts_with(t.as_str()))
                .count();
            if n != 1 {
                return Err(StructuralTagError::Trigger {
                    path: format!("{path}.tags[{i}].begin"),
                    reason: format!(
                        "begin {b:?} starts with {n} of the triggers (it must start with exactly one)"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Free text and tags as XGrammar's `triggered_tags` flags say: `text (tag text)*`;
    /// `at_least_one`: `tag text (tag text)*`; `stop_after_first`: `text tag?`; both: `tag`.
    fn text_and_tags(
        &mut self,
        text: Expr,
        tag: Expr,
        at_least_one: bool,
        stop_after_first: bool,
    ) -> Expr {
        let tag = match tag {
            Expr::Rule(_) => tag,
            other => Expr::Rule(self.b.add("tag", other)),
        };
        match (at_least_one, stop_after_first) {
            (false, false) => Expr::Seq(vec![
                text.clone(),
                Expr::Repeat {
                    expr: Box::new(Expr::Seq(vec![tag, text])),
                    min: 0,
                    max: None,
                },
            ]),
            (false, true) => Expr::Seq(vec![
                text,
                Expr::Repeat {
                    expr: Box::new(tag),
                    min: 0,
                    max: Some(1),
                },
            ]),
            (true, false) => Expr::Seq(vec![
                tag.clone(),
                text.clone(),
                Expr::Repeat {
                    expr: Box::new(Expr::Seq(vec![tag, text])),
                    min: 0,
                    max: None,
                },
            ]),
            (true, true) => tag,
        }
    }
}
