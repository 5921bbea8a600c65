//! `unevaluatedProperties` and `unevaluatedItems` beside in-place applicators (JSON Schema
//! 2020-12 §11), rewritten as schemas without them.
//!
//! A schema is expanded into a union of *branches*. A branch is a conjunction of parts
//! (schema maps without in-place applicators) together with what it is known to evaluate
//! when all of its parts hold: property names (`properties`), patterns
//! (`patternProperties`), all properties (`additionalProperties`, or a nested
//! `unevaluatedProperties`), a prefix length (`prefixItems`), all items (`items`, nested
//! `unevaluatedItems`) and the `contains` schemas (whose matching items are evaluated).
//! Parts that come from negations (`¬if` of an `else`, `¬A_j` of an overlapping `oneOf`,
//! the absent key of a `dependentSchemas`) evaluate nothing.
//!
//! * `allOf`, `$ref`: the product of the branches of each subschema.
//! * `anyOf`: one branch per non-empty subset of the subschemas (all of them hold, and the
//!   keys they evaluate are united); every subset whose subschemas hold evaluates at most
//!   what the instance's matching subschemas evaluate, and the subset of exactly those
//!   evaluates the same. At most [`MAX_ANY_OF`] subschemas evaluate anything.
//! * `oneOf`: branch `i` with the negation of every other subschema (or without them when
//!   the subschemas are provably disjoint); refused when a negation has no exact grammar.
//! * `if`/`then`/`else`: `(I ∧ T) ∨ (¬I ∧ E)`; an `if` alone is `I ∨ true`.
//! * `dependentSchemas`: per key, absent (or not an object), or present in an object with
//!   its schema.
//!
//! `unevaluatedProperties: U` then closes each branch: the parts are merged exactly (the
//! `allOf` merge of `references.rs`), the evaluated names and patterns are declared (as
//! `true`), `U` goes into `additionalProperties`, and every other declared name or pattern
//! (from a part that evaluates nothing) gets `U` beside its own schema. `unevaluatedItems:
//! U` likewise becomes `items` after the evaluated prefix (`anyOf` of `U` and the
//! `contains` schemas), and the prefix entries beyond it take `U` too. A branch never
//! counts a key as evaluated unless it is, so the result accepts no instance the schema
//! rejects; what cannot be merged or negated exactly is refused.

use std::collections::{BTreeSet, HashSet};

use serde_json::{json, Map, Value};

use super::{child, choice, Builder, JsonSchemaError};
use crate::grammar::Expr;

/// The most subschemas of one `anyOf` that evaluate something (`2^n - 1` subsets).
const MAX_ANY_OF: usize = 4;

/// The most branches of one expansion.
const MAX_BRANCHES: usize = 64;

/// How deep references and subschemas are expanded.
const MAX_DEPTH: usize = 12;

/// Keywords that apply subschemas to the same instance (and so pass on annotations),
/// handled by the expansion; `not` passes none and stays a plain part.
const IN_PLACE: &[&str] = &[
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// One conjunction of parts and what it evaluates.
#[derive(Clone, Debug, Default)]
struct Branch {
    /// (schema, its JSON pointer).
    parts: Vec<(Value, String)>,
    names: BTreeSet<String>,
    patterns: BTreeSet<String>,
    all_properties: bool,
    prefix: usize,
    all_items: bool,
    contains: Vec<Value>,
}

impl Branch {
    /// A branch of one part that evaluates nothing.
    fn plain(part: Value, ptr: &str) -> Branch {
        Branch {
            parts: vec![(part, ptr.to_string())],
            ..Branch::default()
        }
    }

    /// Adds the keywords of `own` (a schema map without in-place applicators) as a part
    /// that evaluates what its keywords do.
    fn add_own(&mut self, own: Map<String, Value>, ptr: &str) {
        if let Some(Value::Object(p)) = own.get("properties") {
            self.names.extend(p.keys().cloned());
        }
        if let Some(Value::Object(p)) = own.get("patternProperties") {
            self.patterns.extend(p.keys().cloned());
        }
        if own.contains_key("additionalProperties") {
            self.all_properties = true;
        }
        if let Some(Value::Array(p)) = own.get("prefixItems") {
            self.prefix = self.prefix.max(p.len());
        }
        if own.contains_key("items") {
            self.all_items = true;
        }
        if let Some(c) = own.get("contains") {
            self.contains.push(c.clone());
        }
        self.parts.push((Value::Object(own), ptr.to_string()));
    }

    /// Both branches at once.
    fn and(&self, other: &Branch) -> Branch {
        let mut b = self.clone();
        b.parts.extend(other.parts.iter().cloned());
        b.names.extend(other.names.iter().cloned());
        b.patterns.extend(other.patterns.iter().cloned());
        b.all_properties |= other.all_properties;
        b.prefix = b.prefix.max(other.prefix);
        b.all_items |= other.all_items;
        b.contains.extend(other.contains.iter().cloned());
        b
    }

    /// Whether the branch evaluates anything.
    fn evaluates(&self) -> bool {
        !self.names.is_empty()
            || !self.patterns.is_empty()
            || self.all_properties
            || self.prefix > 0
            || self.all_items
            || !self.contains.is_empty()
    }
}

fn refuse(keyword: &str, pointer: &str, reason: &str) -> JsonSchemaError {
    JsonSchemaError::Unsupported {
        keyword: keyword.into(),
        pointer: pointer.into(),
        reason: format!(
            "{reason}; simplify the schema (or drop `unevaluated*`), or set \
             JsonSchemaOptions::lenient to compile without enforcing it (it is then listed as \
             ignored)"
        ),
    }
}

/// Every combination of one branch of `a` and one of `b`.
fn product(a: &[Branch], b: &[Branch], ptr: &str) -> Result<Vec<Branch>, JsonSchemaError> {
    if a.len() * b.len() > MAX_BRANCHES {
        return Err(refuse(
            "unevaluatedProperties",
            ptr,
            &format!(
                "the in-place applicators beside `unevaluated*` give more than \
                 {MAX_BRANCHES} branches"
            ),
        ));
    }
    Ok(a.iter()
        .flat_map(|x| b.iter().map(move |y| x.and(y)))
        .collect())
}

/// `U` beside the schema `v`.
fn with(v: &Value, u: &Value) -> Value {
    match (v, u) {
        (_, Value::Bool(true)) => v.clone(),
        (Value::Bool(true), _) => u.clone(),
        (_, Value::Bool(false)) | (Value::Bool(false), _) => Value::Bool(false),
        _ => json!({ "allOf": [v, u] }),
    }
}

impl Builder<'_> {
    /// Whether `obj` has `unevaluatedProperties`/`unevaluatedItems`, itself or in a
    /// subschema applied in place (through `allOf`, `anyOf`, `oneOf`, `if`/`then`/`else`,
    /// `dependentSchemas` and `$ref`, each reference target visited once).
    pub(crate) fn mentions_unevaluated(&self, obj: &Map<String, Value>, ptr: &str) -> bool {
        self.has_unevaluated && self.mentions(obj, ptr, 0, &mut HashSet::new())
    }

    fn mentions(
        &self,
        obj: &Map<String, Value>,
        ptr: &str,
        depth: usize,
        seen: &mut HashSet<String>,
    ) -> bool {
        if obj.contains_key("unevaluatedProperties") || obj.contains_key("unevaluatedItems") {
            return true;
        }
        if depth > MAX_DEPTH {
            return false;
        }
        if !seen.insert(ptr.to_string()) {
            return false;
        }
        let mut sub = |v: &Value, p: &str| match v {
            Value::Object(o) => self.mentions(o, p, depth + 1, seen),
            _ => false,
        };
        for k in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(list)) = obj.get(k) {
                let kp = child(ptr, k);
                for (i, v) in list.iter().enumerate() {
                    if sub(v, &child(&kp, &i.to_string())) {
                        return true;
                    }
                }
            }
        }
        for k in ["if", "then", "else"] {
            if let Some(v) = obj.get(k) {
                if sub(v, &child(ptr, k)) {
                    return true;
                }
            }
        }
        if let Some(Value::Object(m)) = obj.get("dependentSchemas") {
            let kp = child(ptr, "dependentSchemas");
            for (k, v) in m {
                if sub(v, &child(&kp, k)) {
                    return true;
                }
            }
        }
        if let Some(r) = obj.get("$ref") {
            if let Ok((target, tptr)) = self.resolve(r, &child(ptr, "$ref")) {
                return sub(&target, &tptr);
            }
        }
        false
    }

    /// A schema with `unevaluated*` beside (or under) in-place applicators: the union of
    /// its branches, each merged into one schema without `unevaluated*`.
    pub(crate) fn unevaluated(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let branches = self.expand(&Value::Object(obj.clone()), ptr, 0)?;
        let mut alts = Vec::new();
        for b in branches {
            let Some(m) = self.merge_parts(&b, ptr)? else {
                continue;
            };
            alts.push(self.schema(&Value::Object(m), ptr)?);
        }
        Ok(choice(alts))
    }

    /// The parts of `b` merged into one map (`None`: they accept nothing together).
    fn merge_parts(
        &mut self,
        b: &Branch,
        ptr: &str,
    ) -> Result<Option<Map<String, Value>>, JsonSchemaError> {
        let mut acc = Some(Map::new());
        for (part, pptr) in &b.parts {
            let Some(m) = self.flatten(part, pptr, 0)? else {
                return Ok(None);
            };
            super::references::merge_maps(&mut acc, m, pptr)?;
            if acc.is_none() {
                return Ok(None);
            }
        }
        if let Some(m) = &acc {
            for k in ["unevaluatedProperties", "unevaluatedItems"] {
                if m.contains_key(k) {
                    return Err(refuse(
                        k,
                        &child(ptr, k),
                        "`unevaluated*` inside a negated subschema has no exact grammar",
                    ));
                }
            }
        }
        Ok(acc)
    }

    /// The branches of `schema` (at `ptr`): an empty list when it accepts nothing.
    fn expand(
        &mut self,
        schema: &Value,
        ptr: &str,
        depth: usize,
    ) -> Result<Vec<Branch>, JsonSchemaError> {
        let obj = match schema {
            Value::Bool(true) => return Ok(vec![Branch::default()]),
            Value::Bool(false) => return Ok(Vec::new()),
            Value::Object(o) => o,
            _ => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "(schema)".into(),
                    pointer: ptr.into(),
                    message: "a schema must be an object or a boolean".into(),
                })
            }
        };
        if depth > MAX_DEPTH {
            return Err(refuse(
                "unevaluatedProperties",
                ptr,
                "in-place applicators nested too deep (recursive?) around `unevaluated*`",
            ));
        }
        let rewritten = self.legacy(obj);
        let obj = rewritten.as_ref().unwrap_or(obj);
        let mut own = Map::new();
        for (k, v) in obj {
            if !IN_PLACE.contains(&k.as_str()) {
                own.insert(k.clone(), v.clone());
            }
        }
        let mut first = Branch::default();
        first.add_own(own, ptr);
        let mut branches = vec![first];
        if let Some(r) = obj.get("$ref") {
            let (target, tptr) = self.resolve(r, &child(ptr, "$ref"))?;
            let sub = self.expand(&target, &tptr, depth + 1)?;
            branches = product(&branches, &sub, ptr)?;
        }
        if let Some(all) = obj.get("allOf") {
            let aptr = child(ptr, "allOf");
            for (i, s) in list(all, "allOf", &aptr)?.iter().enumerate() {
                let sub = self.expand(s, &child(&aptr, &i.to_string()), depth + 1)?;
                branches = product(&branches, &sub, ptr)?;
            }
        }
        if let Some(any) = obj.get("anyOf") {
            let sub = self.any_of_branches(any, &child(ptr, "anyOf"), depth)?;
            branches = product(&branches, &sub, ptr)?;
        }
        if let Some(one) = obj.get("oneOf") {
            let sub = self.one_of_branches(one, &child(ptr, "oneOf"), depth)?;
            branches = product(&branches, &sub, ptr)?;
        }
        if let Some(cond) = obj.get("if") {
            let sub = self.if_branches(cond, obj, ptr, depth)?;
            branches = product(&branches, &sub, ptr)?;
        }
        if let Some(deps) = obj.get("dependentSchemas") {
            let dptr = child(ptr, "dependentSchemas");
            let Value::Object(m) = deps else {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "dependentSchemas".into(),
                    pointer: dptr,
                    message: "must be an object".into(),
                });
            };
            for (k, s) in m {
                let kptr = child(&dptr, k);
                // The key is present only in an object: an array never takes this branch
                // (nor has the items of `s` evaluated).
                let mut present = vec![Branch::plain(
                    json!({ "type": "object", "required": [k] }),
                    &kptr,
                )];
                present = product(&present, &self.expand(s, &kptr, depth + 1)?, ptr)?;
                let mut sub = vec![Branch::plain(
                    json!({ "properties": { k.as_str(): false } }),
                    &kptr,
                )];
                sub.extend(present);
                branches = product(&branches, &sub, ptr)?;
            }
        }
        let uprops = obj.get("unevaluatedProperties");
        let uitems = obj.get("unevaluatedItems");
        if uprops.is_none() && uitems.is_none() {
            return Ok(branches);
        }
        let mut out = Vec::new();
        for b in branches {
            if let Some(c) = self.close(b, uprops, uitems, ptr)? {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// `anyOf`: a branch per non-empty subset of the subschemas that evaluate something
    /// (or per subschema, when none does).
    fn any_of_branches(
        &mut self,
        any: &Value,
        aptr: &str,
        depth: usize,
    ) -> Result<Vec<Branch>, JsonSchemaError> {
        let items = list(any, "anyOf", aptr)?;
        let mut subs = Vec::new();
        for (i, s) in items.iter().enumerate() {
            subs.push(self.expand(s, &child(aptr, &i.to_string()), depth + 1)?);
        }
        let evaluating: Vec<usize> = (0..subs.len())
            .filter(|&i| subs[i].iter().any(Branch::evaluates))
            .collect();
        if evaluating.len() > MAX_ANY_OF {
            return Err(refuse(
                "anyOf",
                aptr,
                &format!(
                    "more than {MAX_ANY_OF} `anyOf` subschemas evaluate properties or items \
                     beside `unevaluated*`"
                ),
            ));
        }
        // A subschema that evaluates nothing adds nothing when it holds beside others:
        // it is only needed alone.
        let mut out: Vec<Branch> = Vec::new();
        for (i, s) in subs.iter().enumerate() {
            if !evaluating.contains(&i) {
                out.extend(s.iter().cloned());
            }
        }
        for mask in 1u32..(1u32 << evaluating.len()) {
            let mut acc = vec![Branch::default()];
            for (bit, &i) in evaluating.iter().enumerate() {
                if mask & (1 << bit) != 0 {
                    acc = product(&acc, &subs[i], aptr)?;
                }
            }
            out.extend(acc);
            if out.len() > MAX_BRANCHES {
                return Err(refuse(
                    "anyOf",
                    aptr,
                    &format!("more than {MAX_BRANCHES} branches beside `unevaluated*`"),
                ));
            }
        }
        Ok(out)
    }

    /// `oneOf`: subschema `i` with the negation of the others (none needed when they are
    /// provably disjoint).
    fn one_of_branches(
        &mut self,
        one: &Value,
        aptr: &str,
        depth: usize,
    ) -> Result<Vec<Branch>, JsonSchemaError> {
        let items = list(one, "oneOf", aptr)?;
        let disjoint = self.branches_disjoint(items);
        let mut negs = Vec::new();
        if !disjoint {
            for (i, s) in items.iter().enumerate() {
                let iptr = child(aptr, &i.to_string());
                match self.negate(s, &iptr, 0)? {
                    Some(n) => negs.push(
                        n.into_iter()
                            .map(|x| Branch::plain(x, &iptr))
                            .collect::<Vec<_>>(),
                    ),
                    None => {
                        return Err(refuse(
                            "oneOf",
                            aptr,
                            &format!(
                                "beside `unevaluated*`, overlapping `oneOf` subschemas need \
                                 the negation of subschema {i}, which has no exact grammar"
                            ),
                        ))
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (i, s) in items.iter().enumerate() {
            let mut acc = self.expand(s, &child(aptr, &i.to_string()), depth + 1)?;
            if !disjoint {
                for (j, n) in negs.iter().enumerate() {
                    if j != i {
                        acc = product(&acc, n, aptr)?;
                    }
                }
            }
            out.extend(acc);
            if out.len() > MAX_BRANCHES {
                return Err(refuse(
                    "oneOf",
                    aptr,
                    &format!("more than {MAX_BRANCHES} branches beside `unevaluated*`"),
                ));
            }
        }
        Ok(out)
    }

    /// `if`/`then`/`else` of `obj`: `(I ∧ T) ∨ (¬I ∧ E)`, or `I ∨ true` for an `if` alone.
    fn if_branches(
        &mut self,
        cond: &Value,
        obj: &Map<String, Value>,
        ptr: &str,
        depth: usize,
    ) -> Result<Vec<Branch>, JsonSchemaError> {
        let iptr = child(ptr, "if");
        let mut holds = self.expand(cond, &iptr, depth + 1)?;
        let then = obj.get("then");
        let els = obj.get("else");
        if let Some(t) = then {
            let tb = self.expand(t, &child(ptr, "then"), depth + 1)?;
            holds = product(&holds, &tb, ptr)?;
        }
        let otherwise = match els {
            Some(e) => self.expand(e, &child(ptr, "else"), depth + 1)?,
            None if then.is_none() => {
                // An `if` alone asserts nothing; it evaluates what it does when it holds.
                holds.push(Branch::default());
                return Ok(holds);
            }
            None => vec![Branch::default()],
        };
        self.negated_or(holds, cond, &iptr, otherwise, ptr)
    }

    /// `holds ∨ (¬cond ∧ otherwise)`.
    fn negated_or(
        &mut self,
        mut holds: Vec<Branch>,
        cond: &Value,
        iptr: &str,
        otherwise: Vec<Branch>,
        ptr: &str,
    ) -> Result<Vec<Branch>, JsonSchemaError> {
        let Some(n) = self.negate(cond, iptr, 0)? else {
            return Err(refuse(
                "if",
                iptr,
                "the negation of `if` (beside `unevaluated*`) has no exact grammar",
            ));
        };
        let n: Vec<Branch> = n.into_iter().map(|x| Branch::plain(x, iptr)).collect();
        holds.extend(product(&n, &otherwise, ptr)?);
        Ok(holds)
    }

    /// Applies `unevaluatedProperties: uprops` / `unevaluatedItems: uitems` to the keys and
    /// items that branch `b` does not evaluate (`None`: the branch accepts nothing).
    fn close(
        &mut self,
        b: Branch,
        uprops: Option<&Value>,
        uitems: Option<&Value>,
        ptr: &str,
    ) -> Result<Option<Branch>, JsonSchemaError> {
        let Some(mut m) = self.merge_parts(&b, ptr)? else {
            return Ok(None);
        };
        if let Some(u) = uprops.filter(|_| !b.all_properties) {
            let uptr = child(ptr, "unevaluatedProperties");
            if m.contains_key("additionalProperties") {
                return Err(refuse(
                    "unevaluatedProperties",
                    &uptr,
                    "`additionalProperties` from a negated subschema beside \
                     `unevaluatedProperties` has no exact grammar",
                ));
            }
            if u != &Value::Bool(true) {
                let mut props = match m.remove("properties") {
                    Some(Value::Object(p)) => p,
                    _ => Map::new(),
                };
                for (name, v) in props.iter_mut() {
                    if !b.names.contains(name) {
                        *v = with(v, u);
                    }
                }
                for name in &b.names {
                    props.entry(name.clone()).or_insert(Value::Bool(true));
                }
                if !props.is_empty() {
                    m.insert("properties".into(), Value::Object(props));
                }
                let mut pats = match m.remove("patternProperties") {
                    Some(Value::Object(p)) => p,
                    _ => Map::new(),
                };
                for (p, v) in pats.iter_mut() {
                    if !b.patterns.contains(p) {
                        *v = with(v, u);
                    }
                }
                for p in &b.patterns {
                    pats.entry(p.clone()).or_insert(Value::Bool(true));
                }
                if !pats.is_empty() {
                    m.insert("patternProperties".into(), Value::Object(pats));
                }
                m.insert("additionalProperties".into(), u.clone());
            }
        }
        if let Some(u) = uitems.filter(|_| !b.all_items) {
            let uptr = child(ptr, "unevaluatedItems");
            if m.contains_key("items") {
                return Err(refuse(
                    "unevaluatedItems",
                    &uptr,
                    "`items` from a negated subschema beside `unevaluatedItems` has no exact \
                     grammar",
                ));
            }
            // An item is evaluated by the prefix or by a `contains` it matches.
            let rest = if b.contains.is_empty() || u == &Value::Bool(true) {
                u.clone()
            } else {
                let mut alts = b.contains.clone();
                alts.push(u.clone());
                json!({ "anyOf": alts })
            };
            if rest != Value::Bool(true) {
                let mut prefix = match m.remove("prefixItems") {
                    Some(Value::Array(p)) => p,
                    _ => Vec::new(),
                };
                for v in prefix.iter_mut().skip(b.prefix) {
                    *v = with(v, &rest);
                }
                while prefix.len() < b.prefix {
                    prefix.push(Value::Bool(true));
                }
                if !prefix.is_empty() {
                    m.insert("prefixItems".into(), Value::Array(prefix));
                }
                m.insert("items".into(), rest);
            }
        }
        let mut out = b;
        out.parts = vec![(Value::Object(m), ptr.to_string())];
        out.all_properties |= uprops.is_some();
        out.all_items |= uitems.is_some();
        Ok(Some(out))
    }
}

/// The array of subschemas of `keyword`.
fn list<'v>(v: &'v Value, keyword: &str, ptr: &str) -> Result<&'v [Value], JsonSchemaError> {
    match v {
        Value::Array(a) if !a.is_empty() => Ok(a),
        _ => Err(JsonSchemaError::InvalidKeyword {
            keyword: keyword.into(),
            pointer: ptr.into(),
            message: "must be a non-empty array of schemas".into(),
        }),
    }
}

/// Whether `v` has an object key `unevaluatedProperties` or `unevaluatedItems` at any
/// depth (without recursion).
pub(super) fn has_unevaluated_key(v: &Value) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(o) => {
                if o.contains_key("unevaluatedProperties") || o.contains_key("unevaluatedItems") {
                    return true;
                }
                stack.extend(o.values());
            }
            Value::Array(a) => stack.extend(a.iter()),
            _ => {}
        }
    }
    false
}
