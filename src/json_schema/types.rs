//! `type` (one name or a list), `enum`, `const`, and the generic JSON value (for `true`
//! and `{}`).

use serde_json::{Map, Value};

use super::{child, choice, lit, opt, repeat, seq, Builder, JsonSchemaError};
use crate::grammar::{Expr, RuleId};

/// The rules of the generic JSON value, built once per grammar.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AnyRules {
    pub(crate) value: RuleId,
}

/// The six JSON types (with `integer` separate from `number`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TypeSet {
    pub(crate) null: bool,
    pub(crate) boolean: bool,
    pub(crate) string: bool,
    pub(crate) integer: bool,
    pub(crate) number: bool,
    pub(crate) object: bool,
    pub(crate) array: bool,
}

impl TypeSet {
    pub(crate) fn all() -> Self {
        TypeSet {
            null: true,
            boolean: true,
            string: true,
            integer: true,
            number: true,
            object: true,
            array: true,
        }
    }

    fn add(&mut self, name: &str) -> bool {
        match name {
            "null" => self.null = true,
            "boolean" => self.boolean = true,
            "string" => self.string = true,
            "integer" => self.integer = true,
            "number" => self.number = true,
            "object" => self.object = true,
            "array" => self.array = true,
            _ => return false,
        }
        true
    }

    /// Whether a JSON value has one of these types.
    pub(crate) fn admits(&self, v: &Value) -> bool {
        match v {
            Value::Null => self.null,
            Value::Bool(_) => self.boolean,
            Value::String(_) => self.string,
            Value::Number(n) => {
                self.number || (self.integer && (n.is_i64() || n.is_u64() || is_integral(n)))
            }
            Value::Object(_) => self.object,
            Value::Array(_) => self.array,
        }
    }
}

fn is_integral(n: &serde_json::Number) -> bool {
    n.as_f64()
        .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// The type names in `type` (error for a bad value).
pub(crate) fn parse_types(obj: &Map<String, Value>, ptr: &str) -> Result<TypeSet, JsonSchemaError> {
    let Some(t) = obj.get("type") else {
        return Ok(TypeSet::all());
    };
    let bad = |message: String| JsonSchemaError::InvalidKeyword {
        keyword: "type".into(),
        pointer: child(ptr, "type"),
        message,
    };
    let mut set = TypeSet::default();
    match t {
        Value::String(s) => {
            if !set.add(s) {
                return Err(bad(format!("names an unknown type {s:?}")));
            }
        }
        Value::Array(list) => {
            for x in list {
                match x {
                    Value::String(s) if set.add(s) => {}
                    _ => return Err(bad(format!("lists an unknown type {x}"))),
                }
            }
        }
        _ => return Err(bad("must be a type name or a list of them".into())),
    }
    Ok(set)
}

impl Builder<'_> {
    /// Whether the schema object `obj` accepts every JSON value as `true` does, so that it
    /// is the generic value rule ([`Self::any_value`]) rather than each type written out
    /// where it is used: it holds annotations alone (`keywords::is_annotation`: titles,
    /// `$defs`, identifiers...) or nothing, and undeclared keys are allowed where no
    /// keyword says otherwise (not [`super::JsonSchemaOptions::strict`], under which its
    /// objects are closed).
    pub(crate) fn untyped(&self, obj: &Map<String, Value>) -> bool {
        !self.opts.strict && obj.keys().all(|k| super::keywords::is_annotation(k, ""))
    }

    /// The generic JSON value (a rule).
    pub(crate) fn any_value(&mut self) -> Expr {
        if let Some(a) = self.any {
            return Expr::Rule(a.value);
        }
        let value = self.add_rule("any_value", Expr::Empty);
        // Shared by every untyped schema: its place is the document's (as `string_any`'s).
        self.pointers[value.index()] = "#".into();
        self.any = Some(AnyRules { value });
        let ws = self.ws();
        let v = Expr::Rule(value);
        let member = seq(vec![self.string_any(), self.colon(), v.clone(), ws.clone()]);
        let object_body = seq(vec![
            lit("{"),
            ws.clone(),
            opt(seq(vec![
                member.clone(),
                repeat(seq(vec![self.comma(), member]), 0, None),
            ])),
            lit("}"),
        ]);
        let object = self.add_rule("any_object", object_body);
        self.pointers[object.index()] = "#".into();
        let element = seq(vec![v, ws.clone()]);
        let array_body = seq(vec![
            lit("["),
            ws,
            opt(seq(vec![
                element.clone(),
                repeat(seq(vec![self.comma(), element]), 0, None),
            ])),
            lit("]"),
        ]);
        let array = self.add_rule("any_array", array_body);
        self.pointers[array.index()] = "#".into();
        // The last things of their rule: written out (see `string_inline`), the string
        // unless it must avoid strings (a shared rule of several).
        let number = self.number_written();
        let string = if self.opts.string_excludes.is_empty() {
            super::strings::string_inline()
        } else {
            self.string_any()
        };
        self.rules[value.index()].body = Expr::Choice(vec![
            Expr::Rule(object),
            Expr::Rule(array),
            string,
            number,
            lit("true"),
            lit("false"),
            lit("null"),
        ]);
        Expr::Rule(value)
    }

    /// A schema object without `allOf`/`anyOf`/`$ref`: the union over its allowed types.
    pub(crate) fn typed(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let types = parse_types(obj, ptr)?;
        if obj.contains_key("enum") || obj.contains_key("const") {
            return self.enumeration(obj, ptr, types);
        }
        let mut alts = Vec::new();
        if types.null {
            alts.push(Some(lit("null")));
        }
        if types.boolean {
            alts.push(Some(Expr::Choice(vec![lit("true"), lit("false")])));
        }
        if types.string {
            alts.push(self.string(obj, ptr)?);
        }
        if (types.number || types.integer) && obj.contains_key("multipleOf") {
            alts.push(self.multiple_of(obj, ptr, !types.number)?);
        } else if types.number {
            alts.push(self.number(obj, ptr)?);
        } else if types.integer {
            alts.push(self.integer(obj, ptr)?);
        }
        if types.object {
            alts.push(self.object(obj, ptr)?);
        }
        if types.array {
            alts.push(self.array(obj, ptr)?);
        }
        Ok(choice(alts))
    }

    /// `enum` and/or `const` (with `type` as a filter): a choice of literals.
    fn enumeration(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
        types: TypeSet,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        // Keywords checked here value by value (the literal values are filtered).
        const FILTERS: &[&str] = &[
            "minLength",
            "maxLength",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "minItems",
            "maxItems",
            "minProperties",
            "maxProperties",
        ];
        // Other keywords (`properties`, `items`, `format`, `multipleOf`...): each value is
        // validated against them (see `sibling_filter`).
        let mut others = Vec::new();
        for k in obj.keys() {
            if super::is_annotation(k, ptr)
                || matches!(k.as_str(), "enum" | "const" | "type" | "pattern")
                || FILTERS.contains(&k.as_str())
                || super::harmless_id(obj, k, self.draft4)
                || (ptr == "#" && k == "id" && obj[k].is_string())
            {
                continue;
            }
            if self.opts.ignore_unknown_keywords && !super::KNOWN_KEYWORDS.contains(&k.as_str()) {
                self.ignored.push(super::IgnoredKeyword {
                    keyword: k.clone(),
                    pointer: child(ptr, k),
                    reason: "not a JSON Schema keyword".into(),
                });
                continue;
            }
            others.push(k.clone());
        }
        let mut checks = Vec::new();
        for k in FILTERS {
            if let Some(v) = obj.get(*k) {
                let bad = || JsonSchemaError::InvalidKeyword {
                    keyword: (*k).into(),
                    pointer: child(ptr, k),
                    message: format!("must be a number, not {v}"),
                };
                if v.is_boolean() {
                    return Err(JsonSchemaError::Unsupported {
                        keyword: (*k).into(),
                        pointer: child(ptr, k),
                        reason: "boolean exclusive bounds (draft 4) beside `enum`/`const`".into(),
                    });
                }
                let n = v.as_f64().ok_or_else(bad)?;
                checks.push((*k, n));
            }
        }
        let mut values: Vec<&Value> = match obj.get("enum") {
            Some(Value::Array(v)) => v.iter().collect(),
            Some(_) => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "enum".into(),
                    pointer: child(ptr, "enum"),
                    message: "must be an array".into(),
                })
            }
            None => obj.get("const").into_iter().collect(),
        };
        if values.len() > self.max_enum_values {
            return Err(super::limit_error(
                crate::limits::Limit::EnumValues,
                self.max_enum_values,
                values.len(),
                &child(ptr, "enum"),
            ));
        }
        if let (Some(c), true) = (obj.get("const"), obj.contains_key("enum")) {
            values.retain(|v| json_equal(v, c));
        }
        values.retain(|v| types.admits(v));
        values.retain(|v| checks.iter().all(|(k, n)| passes(v, k, *n)));
        if let Some(p) = obj.get("pattern") {
            // Each string constant tested against the pattern exactly (as
            // `patternProperties` names are); other values pass `pattern`.
            let pptr = child(ptr, "pattern");
            let Value::String(ps) = p else {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "pattern".into(),
                    pointer: pptr,
                    message: "must be a string".into(),
                });
            };
            match self.pattern_raw(ps) {
                Ok(e) => {
                    let mut kept = Vec::new();
                    for v in values {
                        match v {
                            Value::String(s) => match super::strings::text_matches(&e, s) {
                                Some(true) => kept.push(v),
                                Some(false) => {}
                                None => {
                                    self.unsupported(
                                        "pattern",
                                        &pptr,
                                        "the pattern cannot be tested on an `enum`/`const` value",
                                    )?;
                                    kept.push(v);
                                }
                            },
                            _ => kept.push(v),
                        }
                    }
                    values = kept;
                }
                Err(reason) => self.unsupported("pattern", &pptr, &reason)?,
            }
        }
        if !others.is_empty() {
            values = self.sibling_filter(obj, ptr, &others, values)?;
        }
        let mut alts = Vec::new();
        for v in values {
            alts.push(Some(self.literal(v)));
        }
        Ok(choice(alts))
    }

    /// The `values` of an `enum`/`const` that also satisfy the sibling keywords `others`
    /// of `obj` (those that [`Self::enumeration`] does not test itself): each value is
    /// validated by the `jsonschema` crate against `obj` without `enum`/`const`, in the
    /// root's draft, formats enforced (as the grammar enforces them). When that cannot be
    /// done exactly (a reference, which needs its document; an unknown format; a schema
    /// the validator refuses), a keyword still decides nothing for a value of another type
    /// than the one it constrains (`properties` for a string), and a value it does
    /// constrain makes the keyword unsupported.
    fn sibling_filter<'v>(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
        others: &[String],
        values: Vec<&'v Value>,
    ) -> Result<Vec<&'v Value>, JsonSchemaError> {
        if values.is_empty() {
            return Ok(values);
        }
        let mut sub = obj.clone();
        sub.remove("enum");
        sub.remove("const");
        let sub = Value::Object(sub);
        if let Some(validator) = self.sibling_validator(&sub) {
            return Ok(values
                .into_iter()
                .filter(|v| validator.is_valid(v))
                .collect());
        }
        let mut kept = Vec::new();
        'values: for v in values {
            for k in others {
                if keyword_applies(k, v) {
                    self.unsupported(
                        k,
                        &child(ptr, k),
                        "`enum`/`const` together with this keyword could not be checked \
                         value by value (it holds a `$ref`, an unknown format, or a schema \
                         the validator refuses)",
                    )?;
                    // Lenient: the keyword is listed as ignored; the value stays.
                    kept.push(v);
                    continue 'values;
                }
            }
            kept.push(v);
        }
        Ok(kept)
    }

    /// A validator of `sub` alone (no reference out of it), in the root's draft.
    fn sibling_validator(&self, sub: &Value) -> Option<jsonschema::Validator> {
        fn scan(v: &Value, refs: &mut bool, legacy: &mut bool, modern: &mut bool) {
            match v {
                Value::Object(o) => {
                    for (k, x) in o {
                        match k.as_str() {
                            "$ref" | "$dynamicRef" | "$recursiveRef" => *refs = true,
                            "dependencies" | "additionalItems" => *legacy = true,
                            "items" if x.is_array() => *legacy = true,
                            "prefixItems"
                            | "dependentRequired"
                            | "dependentSchemas"
                            | "unevaluatedProperties"
                            | "unevaluatedItems"
                            | "$defs" => *modern = true,
                            _ => {}
                        }
                        scan(x, refs, legacy, modern);
                    }
                }
                Value::Array(a) => a.iter().for_each(|x| scan(x, refs, legacy, modern)),
                _ => {}
            }
        }
        let (mut refs, mut legacy, mut modern) = (false, false, false);
        scan(sub, &mut refs, &mut legacy, &mut modern);
        if refs {
            return None;
        }
        use jsonschema::Draft;
        let declared = self.root_schema.get("$schema").and_then(Value::as_str);
        let draft = match declared {
            Some(s) if s.contains("draft-03") => return None,
            Some(s) if s.contains("draft-04") => Draft::Draft4,
            Some(s) if s.contains("draft-06") => Draft::Draft6,
            Some(s) if s.contains("draft-07") => Draft::Draft7,
            Some(s) if s.contains("2019-09") => Draft::Draft201909,
            Some(s) if s.contains("2020-12") => Draft::Draft202012,
            // No (known) draft: the keywords used tell which one is meant.
            _ if legacy && modern => return None,
            _ if legacy => Draft::Draft7,
            _ => Draft::Draft202012,
        };
        jsonschema::options()
            .with_draft(draft)
            .should_validate_formats(true)
            .should_ignore_unknown_formats(false)
            .build(sub)
            .ok()
    }

    /// The compact spelling of `v` (whitespace allowed inside arrays and objects); always
    /// `,` and `:`, whatever the separators of the options, as XGrammar writes `const`.
    pub(crate) fn literal(&mut self, v: &Value) -> Expr {
        match v {
            Value::Array(items) => {
                let ws = self.ws();
                let mut parts = vec![lit("["), ws.clone()];
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        parts.extend([lit(","), ws.clone()]);
                    }
                    parts.push(self.literal(x));
                    parts.push(ws.clone());
                }
                parts.push(lit("]"));
                seq(parts)
            }
            Value::Object(map) => {
                let ws = self.ws();
                let mut parts = vec![lit("{"), ws.clone()];
                for (i, (k, x)) in map.iter().enumerate() {
                    if i > 0 {
                        parts.extend([lit(","), ws.clone()]);
                    }
                    parts.push(lit(&Value::String(k.clone()).to_string()));
                    parts.push(ws.clone());
                    parts.push(lit(":"));
                    parts.push(ws.clone());
                    parts.push(self.literal(x));
                    parts.push(ws.clone());
                }
                parts.push(lit("}"));
                seq(parts)
            }
            Value::Number(n) => {
                let text = n.to_string();
                match n.as_f64() {
                    Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 1e15 => {
                        let int = format!("{}", f as i64);
                        let mut alts = vec![lit(&text)];
                        if int != text {
                            alts.push(lit(&int));
                        }
                        if f == 0.0 && f.is_sign_negative() {
                            alts.push(lit("0"));
                        }
                        Expr::Choice(alts)
                    }
                    _ => lit(&text),
                }
            }
            other => lit(&other.to_string()),
        }
    }
}

/// JSON Schema equality (numbers by value).
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(p), Some(q)) => p == q,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(p), Some(q)) => p == q,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Whether `v` satisfies the keyword `k` with the numeric value `n` (keywords of other
/// types than `v`'s pass, as the specification says).
fn passes(v: &Value, k: &str, n: f64) -> bool {
    let len = |x: usize| x as f64;
    match (k, v) {
        ("minLength", Value::String(s)) => len(s.chars().count()) >= n,
        ("maxLength", Value::String(s)) => len(s.chars().count()) <= n,
        ("minItems", Value::Array(a)) => len(a.len()) >= n,
        ("maxItems", Value::Array(a)) => len(a.len()) <= n,
        ("minProperties", Value::Object(o)) => len(o.len()) >= n,
        ("maxProperties", Value::Object(o)) => len(o.len()) <= n,
        (_, Value::Number(x)) => {
            let Some(x) = x.as_f64() else { return false };
            match k {
                "minimum" => x >= n,
                "maximum" => x <= n,
                "exclusiveMinimum" => x > n,
                "exclusiveMaximum" => x < n,
                _ => true,
            }
        }
        _ => true,
    }
}

/// Whether keyword `k` can reject the value `v`: keywords of one instance type (object,
/// array, string, number keywords) assert nothing about values of other types; every
/// other keyword (`allOf`, `not`, `$ref`...) may reject any value.
fn keyword_applies(k: &str, v: &Value) -> bool {
    match super::keyword_instance_type(k) {
        Some(super::InstanceType::Object) => v.is_object(),
        Some(super::InstanceType::Array) => v.is_array(),
        Some(super::InstanceType::String) => v.is_string(),
        Some(super::InstanceType::Number) => v.is_number(),
        None => true,
    }
}
