//! The members beyond the declared properties: `propertyNames` (which names an extra key
//! may have), `patternProperties` (the schemas of the keys each set of patterns matches,
//! through a key automaton when needed) and their `additionalProperties`.

use serde_json::{Map, Value};

use super::objects::literal_prefix;
use super::{child, choice, lit, seq, Builder, JsonSchemaError};
use crate::grammar::{Expr, RuleId};

/// ECMAScript line terminators that JSON writes raw (`\u2028`, `\u2029`): `.` does not
/// match them.
pub(super) const LINE_TERMINATORS: &[(u32, u32)] = &[(0x2028, 0x2029)];

/// `propertyNames` (2020-12 §10.3.2.4) of string keywords: which names it admits, and
/// the grammar of the admitted keys (a whole JSON string, quotes included).
pub(super) struct NamesRule {
    pub(super) min: u64,
    pub(super) max: Option<u64>,
    /// The decoded-text grammar of `pattern`.
    pub(super) pattern: Option<Expr>,
    /// `enum`/`const`: the only names.
    pub(super) values: Option<Vec<Value>>,
    /// `false`: no name.
    pub(super) none: bool,
    pub(super) key: Expr,
}

impl NamesRule {
    pub(super) fn admits(&self, name: &str) -> bool {
        let n = name.chars().count() as u64;
        !self.none
            && n >= self.min
            && self.max.map_or(true, |m| n <= m)
            && self.pattern.as_ref().map_or(true, |p| {
                super::strings::text_matches(p, name) == Some(true)
            })
            && self
                .values
                .as_ref()
                .map_or(true, |vs| vs.iter().any(|v| v.as_str() == Some(name)))
    }
}

impl Builder<'_> {
    /// The [`NamesRule`] of `obj`'s `propertyNames`, `None` when it has none (or one that
    /// admits every name). Supports `false`, and schemas of `type`, `minLength`,
    /// `maxLength`, `pattern`, `enum`, `const`; anything else is refused.
    pub(super) fn property_names(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<NamesRule>, JsonSchemaError> {
        let nptr = child(ptr, "propertyNames");
        let Some(n) = obj.get("propertyNames") else {
            return Ok(None);
        };
        let m = match n {
            Value::Bool(true) => return Ok(None),
            Value::Bool(false) => {
                return Ok(Some(NamesRule {
                    min: 0,
                    max: None,
                    pattern: None,
                    values: None,
                    none: true,
                    key: super::never(),
                }))
            }
            Value::Object(m) => m,
            _ => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "propertyNames".into(),
                    pointer: nptr,
                    message: "must be a schema".into(),
                })
            }
        };
        const OK: &[&str] = &["type", "minLength", "maxLength", "pattern", "enum", "const"];
        if let Some(k) = m
            .keys()
            .find(|k| !OK.contains(&k.as_str()) && !super::is_annotation(k, &nptr))
        {
            self.unsupported(
                "propertyNames",
                &child(&nptr, k),
                "`propertyNames` with this keyword is not supported",
            )?;
            return Ok(None);
        }
        if !super::has_assertions(m, &nptr, &[]) {
            return Ok(None);
        }
        let types = super::types::parse_types(m, &nptr)?;
        let min = super::strings::count_keyword(m, "minLength", &nptr)?.unwrap_or(0) as u64;
        let max = super::strings::count_keyword(m, "maxLength", &nptr)?.map(u64::from);
        let pattern = match m.get("pattern") {
            Some(Value::String(p)) => match self.pattern_raw(p) {
                Ok(e) => Some(e),
                Err(why) => {
                    self.unsupported("propertyNames", &child(&nptr, "pattern"), &why)?;
                    return Ok(None);
                }
            },
            _ => None,
        };
        let mut values: Option<Vec<Value>> = match m.get("enum") {
            Some(Value::Array(v)) => Some(v.clone()),
            _ => None,
        };
        if let Some(c) = m.get("const") {
            values = Some(match values {
                Some(v) => v.into_iter().filter(|x| x == c).collect(),
                None => vec![c.clone()],
            });
        }
        // The keys: strings of the name schema (only strings are names).
        let key = self.schema(
            &serde_json::json!({ "allOf": [Value::Object(m.clone()), {"type": "string"}] }),
            &nptr,
        )?;
        Ok(Some(NamesRule {
            min,
            max,
            pattern,
            values,
            none: !types.string || key.is_none(),
            key: key.unwrap_or_else(super::never),
        }))
    }
}

/// How `patternProperties` (2020-12 §10.3.2.2) is enforced, from
/// [`Builder::pattern_plan`].
pub(super) enum PatternPlan {
    /// No `patternProperties` (or only ones that assert nothing).
    None,
    /// The pattern matches every key without an ECMAScript line terminator (`.*`,
    /// `^.*$`), or every such non-empty key (`.+`, `^.+$`, `.`): undeclared keys (written
    /// without line terminators, and not empty when `nonempty`) take `schema`.
    All {
        /// The pattern's subschema.
        schema: Value,
        /// Whether the empty key is left out (it does not match).
        nonempty: bool,
    },
    /// `additionalProperties: false` (or strict): undeclared keys must match the pattern
    /// (`content`, a JSON string's content) and take `schema`. No declared name matches.
    Closed {
        /// The pattern's subschema.
        schema: Value,
        /// The keys, as the content of a JSON string.
        content: Expr,
        /// For a pattern `^` and literal text: that text, which the keys are exactly the
        /// names that start with (`^x-`).
        prefix: Option<String>,
    },
    /// Any patterns beside any `additionalProperties`: a key automaton
    /// ([`super::key_dfa::KeyDfa`]) splits the undeclared keys by the set of patterns they
    /// match; each set's keys take the schemas of its patterns (or `additionalProperties`
    /// for the empty set).
    General(GeneralPlan),
}

/// The patterns of [`PatternPlan::General`].
pub(super) struct GeneralPlan {
    /// Each pattern's subschema.
    schemas: Vec<Value>,
    /// Each pattern's decoded-text grammar (unanchored search).
    raws: Vec<Expr>,
}

impl GeneralPlan {
    /// The subschemas of the patterns matching `name`, or `None` when that is not decided.
    pub(super) fn schemas_for(&self, name: &str) -> Option<Vec<Value>> {
        let mut v = Vec::new();
        for (raw, s) in self.raws.iter().zip(&self.schemas) {
            if super::strings::text_matches(raw, name)? {
                v.push(s.clone());
            }
        }
        Some(v)
    }
}

impl PatternPlan {
    /// The pattern's schema when it matches the declared name `name` (for `General`,
    /// see [`GeneralPlan::schemas_for`]).
    pub(super) fn schema_for(&self, name: &str) -> Option<&Value> {
        match self {
            PatternPlan::General(_) => None,
            PatternPlan::All { schema, nonempty } => {
                let lt = name
                    .chars()
                    .any(|c| matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}'));
                (!(lt || (*nonempty && name.is_empty()))).then_some(schema)
            }
            // No declared name matches (checked when the plan is made).
            PatternPlan::Closed { .. } | PatternPlan::None => None,
        }
    }
}

/// Patterns that match every string without a line terminator.
pub(super) const MATCH_ALL: &[&str] = &[
    "", ".*", "^.*", ".*$", "^.*$", "^(.*)$", "(.*)", "^.*?$", ".*?",
];

/// Patterns that match every non-empty string without a line terminator.
pub(super) const MATCH_NONEMPTY: &[&str] = &[
    ".+", "^.+", ".+$", "^.+$", "^(.+)$", "(.+)", ".", "^.", ".$",
];

impl Builder<'_> {
    /// How `patternProperties` of `obj` is enforced, or a refusal: one pattern, either
    /// matching every key (see [`PatternPlan::All`]) or beside `additionalProperties:
    /// false` with no declared name matching it. Other uses need the complement of a
    /// regex, which has no grammar here.
    pub(super) fn pattern_plan(
        &mut self,
        obj: &Map<String, Value>,
        props: &Map<String, Value>,
        required: &[String],
        extra_schema: &Value,
        ptr: &str,
    ) -> Result<PatternPlan, JsonSchemaError> {
        let pptr = child(ptr, "patternProperties");
        let pats = match obj.get("patternProperties") {
            None => return Ok(PatternPlan::None),
            Some(Value::Object(m)) => m,
            Some(_) => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "patternProperties".into(),
                    pointer: pptr,
                    message: "must be an object".into(),
                })
            }
        };
        // Subschemas that accept everything assert nothing, when undeclared keys take any
        // value anyway; otherwise such a pattern still admits its keys (beside
        // `additionalProperties: false`) or frees their values.
        let accepts_all = |s: &Value| {
            s == &Value::Bool(true)
                || s.as_object()
                    .is_some_and(|o| !super::has_assertions(o, ptr, &[]))
        };
        let extra_free = accepts_all(extra_schema);
        let live: Vec<(&String, &Value)> = pats
            .iter()
            .filter(|(_, s)| !(extra_free && accepts_all(s)))
            .collect();
        let refuse = |b: &mut Self, why: &str| -> Result<PatternPlan, JsonSchemaError> {
            b.unsupported("patternProperties", &pptr, why)?;
            Ok(PatternPlan::None)
        };
        let (p, schema) = match live.as_slice() {
            [] if extra_schema == &Value::Bool(true) => return Ok(PatternPlan::None),
            [(p, s)] => ((*p).clone(), (*s).clone()),
            _ => return self.general_plan(pats, &pptr),
        };
        if MATCH_ALL.contains(&p.as_str()) || MATCH_NONEMPTY.contains(&p.as_str()) {
            let nonempty = MATCH_NONEMPTY.contains(&p.as_str());
            return Ok(PatternPlan::All { schema, nonempty });
        }
        if extra_schema != &Value::Bool(false) {
            return self.general_plan(pats, &pptr);
        }
        let raw = match self.pattern_raw(&p) {
            Ok(e) => e,
            Err(why) => return refuse(self, &why),
        };
        if props
            .keys()
            .any(|name| super::strings::text_matches(&raw, name) != Some(false))
        {
            return self.general_plan(pats, &pptr);
        }
        // A required name the pattern governs: the general plan gives it the schema.
        if required
            .iter()
            .any(|name| super::strings::text_matches(&raw, name) != Some(false))
        {
            return self.general_plan(pats, &pptr);
        }
        match self.pattern_content(&p) {
            Ok(content) => Ok(PatternPlan::Closed {
                prefix: literal_prefix(&p),
                schema,
                content,
            }),
            Err(why) => refuse(self, &why),
        }
    }
}

impl Builder<'_> {
    /// Refuses a declared name whose matching patterns cannot be decided.
    pub(super) fn refuse_undecided(
        &mut self,
        name: &str,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        Err(JsonSchemaError::Unsupported {
            keyword: "patternProperties".into(),
            pointer: child(ptr, "patternProperties"),
            reason: format!("cannot decide which patterns match the declared name {name:?}"),
        })
    }

    /// The [`PatternPlan::General`] of the patterns `pats`, or a refusal.
    pub(super) fn general_plan(
        &mut self,
        pats: &Map<String, Value>,
        pptr: &str,
    ) -> Result<PatternPlan, JsonSchemaError> {
        let mut schemas = Vec::new();
        let mut raws = Vec::new();
        for (p, s) in pats {
            match self.pattern_raw(p) {
                Ok(e) => raws.push(e),
                Err(why) => {
                    self.unsupported("patternProperties", &child(pptr, p), &why)?;
                    return Ok(PatternPlan::None);
                }
            }
            schemas.push(s.clone());
        }
        if raws.len() > 32 {
            self.unsupported("patternProperties", pptr, "more than 32 patterns")?;
            return Ok(PatternPlan::None);
        }
        Ok(PatternPlan::General(GeneralPlan { schemas, raws }))
    }

    /// The extra members of a [`PatternPlan::General`] object: one alternative per set of
    /// patterns that some undeclared key matches exactly, the key drawn from the keys of
    /// that set (never a name of `names`), the value satisfying all their schemas (or
    /// `extra_schema` for keys matching none). `None` when no extra member is possible.
    /// Beside it, whether every undeclared key is admitted (each set's schemas take some
    /// value), so that a key being written can always be completed as a new one.
    pub(super) fn general_extra(
        &mut self,
        plan: &GeneralPlan,
        names: &[String],
        extra_schema: &Value,
        ptr: &str,
    ) -> Result<(Option<Expr>, bool), JsonSchemaError> {
        let pptr = child(ptr, "patternProperties");
        let mut langs = plan.raws.clone();
        let name_bit = 1u64 << langs.len();
        // The declared names (the empty one included) as one more language.
        langs.push(Expr::Choice(names.iter().map(|n| lit(n)).collect()));
        let dfa = match super::key_dfa::KeyDfa::new(&langs) {
            Ok(d) => d,
            Err(why) => {
                self.unsupported("patternProperties", &pptr, &why)?;
                return Ok((None, false));
            }
        };
        let mut alts = Vec::new();
        let mut every_key = true;
        for set in dfa.tag_sets() {
            if set & name_bit != 0 {
                continue;
            }
            let mut parts: Vec<Value> = (0..plan.schemas.len())
                .filter(|i| set & (1 << i) != 0)
                .map(|i| plan.schemas[i].clone())
                .collect();
            if parts.is_empty() {
                parts.push(extra_schema.clone());
            }
            let vptr = if set == 0 {
                child(ptr, "additionalProperties")
            } else {
                pptr.clone()
            };
            let value = if parts.len() == 1 {
                self.schema(&parts[0], &vptr)?
            } else {
                self.schema(&serde_json::json!({ "allOf": parts }), &vptr)?
            };
            let Some(value) = value else {
                every_key = false;
                continue;
            };
            let mut bodies: Vec<(RuleId, Expr)> = Vec::new();
            let key = dfa.keys_with(
                set,
                &mut |body| self.add_rule("obj_key", body),
                &mut |id, b| bodies.push((id, b)),
            );
            for (id, b) in bodies {
                self.rules[id.index()].body = b;
            }
            let Some(key) = key else { continue };
            let body = seq(vec![lit("\""), key, self.colon(), value, self.ws()]);
            alts.push(Some(Expr::Rule(self.add_rule("obj_extra", body))));
        }
        Ok((choice(alts), every_key))
    }
}
