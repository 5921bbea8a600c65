//! Keywords enforced by rewriting a schema as a union (`anyOf`) of schemas the other
//! modules compile exactly: `dependentRequired`, `dependentSchemas` and draft 4-7
//! `dependencies` (JSON Schema 2020-12 §10.2.2.4 and §6.5.4), `if`/`then`/`else`
//! (§10.2.2.1-3) and `not` (§10.2.1.4) beyond a `type`.
//!
//! * A dependency on key `k` splits the objects in two: those without `k` (the branch
//!   declares `k` with the schema `false`) and those with it (`k` required, with the
//!   dependent keys or the dependent schema). `n` dependencies give `2^n` branches, so at
//!   most [`MAX_DEPENDENCIES`] are rewritten; more are refused.
//! * `not S` becomes the union of the complements of the keywords of `S` (De Morgan: a
//!   schema is the conjunction of its keywords). [`Builder::negate`] knows the complement
//!   of `type`, `const`/`enum` of nulls, booleans, numbers and strings (the other strings
//!   as a `pattern`: the complement of the constants' trie), the numeric bounds, the
//!   length and count bounds, `required`, `properties` (whose subschemas are negated in
//!   turn), `allOf`, `anyOf` (small), `not`, and `$ref`; anything else (`pattern`,
//!   `format`, `multipleOf`, object and array constants...) makes `not` refused.
//! * `if I then T else E` is `(I ∧ T) ∨ (¬I ∧ E)`, with `¬I` from [`Builder::negate`]; an
//!   `if` without `then` and `else` (or `then`/`else` without `if`) asserts nothing.
//!
//! Every branch is merged with the rest of its schema by the exact `allOf` merge of
//! `references.rs`, which refuses what it cannot merge; nothing is dropped.

use serde_json::{json, Map, Value};

use super::types::{json_equal, parse_types};
use super::{child, choice, has_assertions, is_annotation, Builder, JsonSchemaError};
use crate::grammar::Expr;

/// The most dependencies of one schema rewritten (`2^n` branches).
const MAX_DEPENDENCIES: usize = 5;

/// The most branches of one negation or one `if`/`then`/`else`.
const MAX_BRANCHES: usize = 48;

/// How deep negations and references nest inside one negation.
const MAX_NEGATION_DEPTH: usize = 8;

/// One schema from a union: itself when alone, else `anyOf`.
pub(crate) fn union(mut v: Vec<Value>) -> Value {
    match v.len() {
        0 => Value::Bool(false),
        1 => v.pop().unwrap_or(Value::Bool(false)),
        _ => json!({ "anyOf": v }),
    }
}

impl Builder<'_> {
    /// The branches of `obj` for its dependency keywords (`dependentRequired`,
    /// `dependentSchemas`, `dependencies`), each without them; `None` when `obj` has none.
    pub(crate) fn dependency_branches(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Vec<Map<String, Value>>>, JsonSchemaError> {
        let keys = ["dependentRequired", "dependentSchemas", "dependencies"];
        if !keys.iter().any(|k| obj.contains_key(*k)) {
            return Ok(None);
        }
        let mut rest = obj.clone();
        // (key, dependent keys, dependent schema), in order.
        let mut deps: Vec<(String, Vec<Value>, Option<Value>)> = Vec::new();
        for kw in keys {
            let Some(v) = rest.remove(kw) else { continue };
            let kptr = child(ptr, kw);
            let Value::Object(m) = v else {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: kw.into(),
                    pointer: kptr,
                    message: "must be an object".into(),
                });
            };
            for (k, d) in m {
                let bad = |message: &str| JsonSchemaError::InvalidKeyword {
                    keyword: kw.into(),
                    pointer: child(&kptr, &k),
                    message: message.into(),
                };
                let (names, schema) = match (kw, d) {
                    ("dependentRequired" | "dependencies", Value::Array(list)) => {
                        if list.iter().any(|x| !x.is_string()) {
                            return Err(bad("must be an array of strings"));
                        }
                        (list, None)
                    }
                    ("dependentRequired", _) => return Err(bad("must be an array of strings")),
                    ("dependencies", Value::String(s)) => (vec![Value::String(s)], None),
                    (_, s @ (Value::Object(_) | Value::Bool(_))) => (Vec::new(), Some(s)),
                    _ => return Err(bad("must be a schema")),
                };
                // Trivial dependencies assert nothing.
                let trivial = match &schema {
                    Some(s) => {
                        s == &Value::Bool(true) || s.as_object().is_some_and(|o| o.is_empty())
                    }
                    None => names.is_empty(),
                };
                if !trivial {
                    deps.push((k, names, schema));
                }
            }
        }
        if deps.len() > MAX_DEPENDENCIES {
            let kw = keys
                .iter()
                .find(|k| obj.contains_key(**k))
                .copied()
                .unwrap_or("dependencies");
            self.unsupported(
                kw,
                &child(ptr, kw),
                &format!("more than {MAX_DEPENDENCIES} dependencies (2^n branches)"),
            )?;
            return Ok(Some(vec![rest]));
        }
        let mut branches = vec![rest];
        for (k, names, schema) in deps {
            let mut next = Vec::new();
            for b in branches {
                let already_required = b
                    .get("required")
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.contains(&Value::String(k.clone())));
                if !already_required {
                    // `k` absent.
                    let mut absent = b.clone();
                    let props = absent
                        .entry("properties")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(p) = props {
                        p.insert(k.clone(), Value::Bool(false));
                    }
                    next.push(absent);
                }
                // `k` present.
                let mut present = b;
                let req = present
                    .entry("required")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(r) = req {
                    for n in std::iter::once(Value::String(k.clone())).chain(names.iter().cloned())
                    {
                        if !r.contains(&n) {
                            r.push(n);
                        }
                    }
                }
                if let Some(s) = &schema {
                    let mut all = match present.remove("allOf") {
                        Some(Value::Array(a)) => a,
                        _ => Vec::new(),
                    };
                    all.push(s.clone());
                    present.insert("allOf".into(), Value::Array(all));
                }
                next.push(present);
            }
            branches = next;
        }
        Ok(Some(branches))
    }

    /// `if`/`then`/`else` of `obj` as branches without them (`None`: `obj` has no `if`,
    /// `then` or `else`).
    pub(crate) fn conditional_branches(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Vec<Map<String, Value>>>, JsonSchemaError> {
        if !["if", "then", "else"].iter().any(|k| obj.contains_key(*k)) {
            return Ok(None);
        }
        let mut rest = obj.clone();
        let cond = rest.remove("if");
        let then = rest.remove("then");
        let els = rest.remove("else");
        let Some(cond) = cond else {
            return Ok(Some(vec![rest]));
        };
        if then.is_none() && els.is_none() {
            return Ok(Some(vec![rest]));
        }
        let iptr = child(ptr, "if");
        let Some(negated) = self.negate(&cond, &iptr, 0)? else {
            self.unsupported("if", &iptr, "the negation of `if` has no exact grammar")?;
            return Ok(Some(vec![rest]));
        };
        let mut out = Vec::new();
        let with = |extra: Vec<Value>| {
            let mut b = rest.clone();
            let mut all = match b.remove("allOf") {
                Some(Value::Array(a)) => a,
                _ => Vec::new(),
            };
            all.extend(extra);
            b.insert("allOf".into(), Value::Array(all));
            b
        };
        out.push(with(vec![cond, then.unwrap_or(Value::Bool(true))]));
        let els = els.unwrap_or(Value::Bool(true));
        for n in negated {
            out.push(with(vec![n, els.clone()]));
        }
        Ok(Some(out))
    }

    /// The branches of `obj` (which has a `not` that is not a plain `type`), or `None` when
    /// the negation has no exact grammar (the caller refuses).
    pub(crate) fn not_branches(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Vec<Map<String, Value>>>, JsonSchemaError> {
        let mut rest = obj.clone();
        let Some(n) = rest.remove("not") else {
            return Ok(None);
        };
        let Some(negated) = self.negate(&n, &child(ptr, "not"), 0)? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        for x in negated {
            let mut b = rest.clone();
            let mut all = match b.remove("allOf") {
                Some(Value::Array(a)) => a,
                _ => Vec::new(),
            };
            all.push(x);
            b.insert("allOf".into(), Value::Array(all));
            out.push(b);
        }
        Ok(Some(out))
    }

    /// Compiles each branch (at `ptr`) and unites them.
    pub(crate) fn branches(
        &mut self,
        branches: Vec<Map<String, Value>>,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let mut alts = Vec::new();
        for b in branches {
            alts.push(self.schema(&Value::Object(b), ptr)?);
        }
        Ok(choice(alts))
    }

    /// Schemas whose union accepts exactly the instances `s` rejects, or `None` when that is
    /// not known to have an exact grammar. An empty list: `s` accepts everything.
    pub(crate) fn negate(
        &mut self,
        s: &Value,
        ptr: &str,
        depth: usize,
    ) -> Result<Option<Vec<Value>>, JsonSchemaError> {
        if depth > MAX_NEGATION_DEPTH {
            return Ok(None);
        }
        let o = match s {
            Value::Bool(b) => return Ok(Some(if *b { vec![] } else { vec![json!(true)] })),
            Value::Object(o) => o,
            _ => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "(schema)".into(),
                    pointer: ptr.into(),
                    message: "a schema must be an object or a boolean".into(),
                })
            }
        };
        let rewritten = self.legacy(o);
        let o = rewritten.as_ref().unwrap_or(o);
        let mut out: Vec<Value> = Vec::new();
        for (k, v) in o {
            if is_annotation(k, ptr) || super::harmless_id(o, k, self.draft4) {
                continue;
            }
            let num = |v: &Value| v.is_number();
            let part: Option<Vec<Value>> = match k.as_str() {
                "type" => {
                    let t = parse_types(o, ptr)?;
                    if t.integer && !t.number {
                        // "a number that is not an integer" has no grammar here.
                        None
                    } else {
                        let mut names = Vec::new();
                        for (name, has) in [
                            ("null", t.null),
                            ("boolean", t.boolean),
                            ("string", t.string),
                            ("number", t.number),
                            ("object", t.object),
                            ("array", t.array),
                        ] {
                            if !has {
                                names.push(Value::String(name.into()));
                            }
                        }
                        Some(if names.is_empty() {
                            vec![]
                        } else {
                            vec![json!({ "type": names })]
                        })
                    }
                }
                "const" => negate_values(std::slice::from_ref(v)),
                "enum" => match v {
                    Value::Array(list) => negate_values(list),
                    _ => None,
                },
                "minimum" if num(v) => Some(vec![json!({"type": "number", "exclusiveMaximum": v})]),
                "exclusiveMinimum" if num(v) => Some(vec![json!({"type": "number", "maximum": v})]),
                "maximum" if num(v) => Some(vec![json!({"type": "number", "exclusiveMinimum": v})]),
                "exclusiveMaximum" if num(v) => Some(vec![json!({"type": "number", "minimum": v})]),
                "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
                | "maxProperties" => {
                    let (t, opposite) = match k.as_str() {
                        "minLength" => ("string", "maxLength"),
                        "maxLength" => ("string", "minLength"),
                        "minItems" => ("array", "maxItems"),
                        "maxItems" => ("array", "minItems"),
                        "minProperties" => ("object", "maxProperties"),
                        _ => ("object", "minProperties"),
                    };
                    match v.as_u64() {
                        None => None,
                        Some(0) if k.starts_with("min") => Some(vec![]),
                        Some(n) => {
                            let bound = if k.starts_with("min") { n - 1 } else { n + 1 };
                            Some(vec![json!({ "type": t, opposite: bound })])
                        }
                    }
                }
                "required" => match v {
                    Value::Array(names) if names.iter().all(Value::is_string) => {
                        if names.is_empty() {
                            Some(vec![])
                        } else {
                            let mut p = Vec::new();
                            for n in names {
                                let name = n.as_str().unwrap_or_default();
                                p.push(json!({"type": "object", "properties": { name: false }}));
                            }
                            Some(p)
                        }
                    }
                    _ => None,
                },
                "properties"
                    if !o.contains_key("additionalProperties")
                        && !o.contains_key("patternProperties")
                        && !o.contains_key("unevaluatedProperties") =>
                {
                    match v {
                        Value::Object(props) => {
                            let mut p = Vec::new();
                            let pptr = child(ptr, "properties");
                            let mut ok = true;
                            for (name, sub) in props {
                                match self.negate(sub, &child(&pptr, name), depth + 1)? {
                                    None => {
                                        ok = false;
                                        break;
                                    }
                                    Some(n) if n.is_empty() => {}
                                    Some(n) => p.push(json!({
                                        "type": "object",
                                        "required": [name],
                                        "properties": { name.as_str(): union(n) }
                                    })),
                                }
                            }
                            ok.then_some(p)
                        }
                        _ => None,
                    }
                }
                "allOf" => match v {
                    Value::Array(list) => {
                        let aptr = child(ptr, "allOf");
                        let mut p = Vec::new();
                        let mut ok = true;
                        for (i, b) in list.iter().enumerate() {
                            match self.negate(b, &child(&aptr, &i.to_string()), depth + 1)? {
                                Some(n) => p.extend(n),
                                None => {
                                    ok = false;
                                    break;
                                }
                            }
                        }
                        ok.then_some(p)
                    }
                    _ => None,
                },
                "anyOf" => match v {
                    // ¬A ∧ ¬B: every combination of one branch of each negation.
                    Value::Array(list) => {
                        let aptr = child(ptr, "anyOf");
                        let mut combos: Option<Vec<Vec<Value>>> = Some(vec![vec![]]);
                        for (i, b) in list.iter().enumerate() {
                            let Some(n) =
                                self.negate(b, &child(&aptr, &i.to_string()), depth + 1)?
                            else {
                                combos = None;
                                break;
                            };
                            let Some(cs) = combos.take() else { break };
                            let mut next = Vec::new();
                            for c in &cs {
                                for x in &n {
                                    let mut c2 = c.clone();
                                    c2.push(x.clone());
                                    next.push(c2);
                                }
                            }
                            if next.len() > MAX_BRANCHES {
                                break;
                            }
                            combos = Some(next);
                        }
                        combos.map(|cs| {
                            cs.into_iter()
                                .map(|c| json!({ "allOf": c }))
                                .collect::<Vec<_>>()
                        })
                    }
                    _ => None,
                },
                "not" => Some(vec![v.clone()]),
                // Some item fails `items`: `contains` of its negation.
                "items"
                    if !o.contains_key("prefixItems") && !o.contains_key("unevaluatedItems") =>
                {
                    match self.negate(v, &child(ptr, "items"), depth + 1)? {
                        None => None,
                        Some(n) if n.is_empty() => Some(vec![]),
                        Some(n) => Some(vec![json!({"type": "array", "contains": union(n)})]),
                    }
                }
                // No item matches: every item in the negation.
                "contains" if !o.contains_key("minContains") && !o.contains_key("maxContains") => {
                    self.negate(v, &child(ptr, "contains"), depth + 1)?
                        .map(|n| vec![json!({"type": "array", "items": union(n)})])
                }
                "$ref" => match self.resolve(v, &child(ptr, "$ref")) {
                    Ok((target, tptr)) => self.negate(&target, &tptr, depth + 1)?,
                    Err(_) => None,
                },
                _ => None,
            };
            let Some(p) = part else {
                return Ok(None);
            };
            out.extend(p);
        }
        if !has_assertions(o, ptr, &[]) {
            return Ok(Some(vec![]));
        }
        if out.len() > MAX_BRANCHES {
            return Ok(None);
        }
        Ok(Some(out))
    }
}

/// The complement of a finite set of values (`const`/`enum`), when every value is a null,
/// a boolean or a number: the other types, the other boolean, and the open intervals
/// between the numbers.
/// The most characters of the string constants one negation spells out as a pattern.
const MAX_NEGATED_STRING_CHARS: usize = 4096;

/// An ECMA-262 pattern that matches exactly the strings not in `strings`: the complement
/// of their trie, `^(?:…)$`, where at each node (a prefix `p` of some constant) a string
/// continues as (1) nothing, when `p` itself is not a constant, (2) a character no
/// constant continues `p` with, then anything (`[^…][\s\S]*`), or (3) a character some
/// constant continues `p` with, then the node of that longer prefix. Every string falls in
/// exactly the case its longest prefix in the trie gives, so the pattern is exact.
/// `None` when a constant has a control character or one outside the Basic Multilingual
/// Plane (whose meaning in a pattern differs between dialects), or they are too long.
fn other_strings(strings: &[&str]) -> Option<String> {
    use std::collections::BTreeMap;
    #[derive(Default)]
    struct Node {
        end: bool,
        next: BTreeMap<char, Node>,
    }
    let total: usize = strings.iter().map(|s| s.chars().count()).sum();
    if total > MAX_NEGATED_STRING_CHARS {
        return None;
    }
    let mut root = Node::default();
    for s in strings {
        let mut n = &mut root;
        for c in s.chars() {
            if c < ' ' || c == '\u{7f}' || u32::from(c) > 0xFFFF {
                return None;
            }
            n = n.next.entry(c).or_default();
        }
        n.end = true;
    }
    fn esc(c: char, out: &mut String) {
        if regex_syntax::is_meta_character(c) {
            out.push('\\');
        }
        out.push(c);
    }
    fn walk(n: &Node, out: &mut String) {
        out.push_str("(?:");
        let mut first = true;
        let mut alt = |out: &mut String| {
            if !first {
                out.push('|');
            }
            first = false;
        };
        if !n.end {
            alt(out);
        }
        alt(out);
        if n.next.is_empty() {
            out.push_str("[\\s\\S]+");
        } else {
            out.push_str("[^");
            for c in n.next.keys() {
                esc(*c, out);
            }
            out.push_str("][\\s\\S]*");
        }
        for (c, child) in &n.next {
            alt(out);
            esc(*c, out);
            walk(child, out);
        }
        out.push(')');
    }
    let mut out = String::from("^");
    walk(&root, &mut out);
    out.push('$');
    Some(out)
}

fn negate_values(values: &[Value]) -> Option<Vec<Value>> {
    let mut nums: Vec<&Value> = Vec::new();
    let mut strings: Vec<&str> = Vec::new();
    let (mut null, mut t, mut f) = (false, false, false);
    for v in values {
        match v {
            Value::Null => null = true,
            Value::Bool(true) => t = true,
            Value::Bool(false) => f = true,
            Value::Number(_) => nums.push(v),
            Value::String(s) => strings.push(s),
            _ => return None,
        }
    }
    let mut out = Vec::new();
    let mut others: Vec<Value> = ["object", "array"]
        .iter()
        .map(|s| Value::String((*s).into()))
        .collect();
    if strings.is_empty() {
        others.push("string".into());
    } else {
        out.push(json!({"type": "string", "pattern": other_strings(&strings)?}));
    }
    if !null {
        others.push("null".into());
    }
    if !t && !f {
        others.push("boolean".into());
    }
    if nums.is_empty() {
        others.push("number".into());
    }
    out.push(json!({ "type": others }));
    match (t, f) {
        (true, false) => out.push(json!({"const": false})),
        (false, true) => out.push(json!({"const": true})),
        _ => {}
    }
    if !nums.is_empty() {
        nums.sort_by(|a, b| {
            let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal)
        });
        nums.dedup_by(|a, b| json_equal(a, b));
        out.push(json!({"type": "number", "exclusiveMaximum": nums[0]}));
        for w in nums.windows(2) {
            out.push(json!({"type": "number", "exclusiveMinimum": w[0], "exclusiveMaximum": w[1]}));
        }
        out.push(json!({"type": "number", "exclusiveMinimum": nums[nums.len() - 1]}));
    }
    Some(out)
}
