//! `$ref` (to `#` and `#/...` JSON pointers of the same document; `$defs` and `definitions`
//! are plain containers), recursion through rules, `anyOf`, and `allOf` where the
//! subschemas merge exactly.
//!
//! `allOf` (and `$ref` with sibling keywords, which 2020-12 applies like `allOf`) is merged
//! keyword by keyword: `type` lists intersect, bounds take the stricter value, `required`
//! lists join, shared `properties` become an `allOf` of both, and keywords present on both
//! sides must be equal; `patternProperties` unite (a shared pattern takes both schemas) and
//! `prefixItems` merge position by position. A name declared on one side only, where the
//! other has `additionalProperties` and no patterns, takes that schema beside its own (it
//! is an additional property there); likewise `prefixItems` beyond the other side's prefix
//! take its `items`. Anything else is refused: `additionalProperties` from one side with
//! `patternProperties` (or, beside patterns, `properties`) from another (the set of
//! "additional" keys would change), two `additionalProperties` or two `items`, two
//! `anyOf`s, two different `enum`s. References are inlined during the
//! merge (a recursive reference inside `allOf` is refused after a depth limit).
//!
//! The merged schema is compiled where the `allOf` is, but errors (and ignored keywords,
//! and the places of rules) name where the keyword they are about is written: the branch
//! (`#/allOf/0/additionalProperties`), the `$ref` target, or the `anyOf` branch merged
//! with its siblings (see [`Builder::relocate`]).

use serde_json::{Map, Value};

use super::disjoint::type_names;
use super::types::{json_equal, parse_types, TypeSet};
use super::{child, choice, is_annotation, never, Builder, JsonSchemaError};
use crate::grammar::Expr;

/// Where the keywords of a merged schema were written: per keyword, the JSON pointers of
/// the schema objects that hold it, in merge order (see [`Builder::relocated`]).
pub(crate) type Origins = std::collections::HashMap<String, Vec<String>>;

/// How deep references are inlined inside a merge.
pub(super) const MAX_MERGE_DEPTH: usize = 16;

/// The most exclusive branches one `oneOf` becomes (see [`Builder::one_of_exclusive`]).
const MAX_ONE_OF_BRANCHES: usize = 32;

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl<'a> Builder<'a> {
    /// Resolves `reference`, written at `ptr` (the place of the `$ref`), against the base
    /// URI in force there: a JSON pointer or an anchor of this document, of a subschema
    /// with an `$id`, or of one of [`JsonSchemaOptions::documents`]. Returns a copy of the
    /// target and its canonical location.
    ///
    /// [`JsonSchemaOptions::documents`]: super::JsonSchemaOptions::documents
    pub(crate) fn resolve(
        &self,
        reference: &Value,
        ptr: &str,
    ) -> Result<(Value, String), JsonSchemaError> {
        let target = self.resolve_location(reference, ptr)?;
        match self.res.lookup(self.root_schema, &target) {
            Some(value) => Ok((value.clone(), target)),
            None => Err(JsonSchemaError::UnresolvedRef {
                reference: reference.as_str().unwrap_or_default().to_string(),
                pointer: ptr.into(),
            }),
        }
    }

    /// The target of `reference` in the root document, borrowed (no copy): `None` when
    /// the canonical location `target` (from [`Builder::resolve_location`]) is in another
    /// document.
    fn in_root(&self, target: &str) -> Option<&'a Value> {
        let root: &'a Value = self.root_schema;
        if !target.starts_with('#') {
            return None;
        }
        super::resources::location_tokens(target)
            .iter()
            .try_fold(root, |cur, t| match cur {
                Value::Object(o) => o.get(t),
                Value::Array(a) => a.get(t.parse::<usize>().ok()?),
                _ => None,
            })
    }

    /// [`Builder::resolve`]'s canonical location of the target alone, with the same
    /// errors: the target is looked up, not copied (a `$ref` met again, or only checked,
    /// needs no copy of what it names).
    pub(crate) fn resolve_location(
        &self,
        reference: &Value,
        ptr: &str,
    ) -> Result<String, JsonSchemaError> {
        let Value::String(r) = reference else {
            return Err(JsonSchemaError::InvalidKeyword {
                keyword: "$ref".into(),
                pointer: ptr.into(),
                message: "must be a string".into(),
            });
        };
        let unresolved = || JsonSchemaError::UnresolvedRef {
            reference: r.clone(),
            pointer: ptr.into(),
        };
        // The base is the one in force where the `$ref` is written. A place built by the
        // compiler (a negation, a merge) is no location: there, only a document with a
        // single resource gives the same base everywhere.
        // (With a single resource, every place has the same base: no lookup needed.)
        let written_here = self.res.several
            && ptr
                .rsplit_once('/')
                .and_then(|(parent, _)| self.res.lookup(self.root_schema, parent))
                .and_then(|o| o.get("$ref"))
                .is_some_and(|v| v == reference);
        if !written_here && self.res.several {
            return Err(JsonSchemaError::Unsupported {
                keyword: "$ref".into(),
                pointer: ptr.into(),
                reason: "a reference in a subschema rewritten by the compiler, in a document \
                         with several base URIs"
                    .into(),
            });
        }
        let base = self.res.base_of(if written_here { ptr } else { "#" });
        let Some(abs) = super::resources::join(base, r) else {
            return Err(unresolved());
        };
        let (uri, frag) = abs.split_once('#').unwrap_or((&abs, ""));
        let Some(frag) = percent_decode(frag) else {
            return Err(unresolved());
        };
        let Some(resource) = self.res.resource(uri) else {
            return Err(JsonSchemaError::Unsupported {
                keyword: "$ref".into(),
                pointer: ptr.into(),
                reason: format!(
                    "{r:?} names the document {uri:?}, which is not given (documents are \
                     never fetched: pass it in `JsonSchemaOptions::documents`)"
                ),
            });
        };
        let target = if frag.is_empty() {
            resource.to_string()
        } else if let Some(path) = frag.strip_prefix('/') {
            let mut t = resource.to_string();
            for tok in path.split('/') {
                t = super::child(&t, &tok.replace("~1", "/").replace("~0", "~"));
            }
            t
        } else {
            match self.res.anchor(uri, &frag) {
                Some(a) => a.to_string(),
                None => return Err(unresolved()),
            }
        };
        if self.res.lookup(self.root_schema, &target).is_none() {
            return Err(unresolved());
        }
        Ok(target)
    }

    /// Checks that every `$ref` of the root document that points inside a given document
    /// (a JSON pointer or an anchor) finds its target, wherever it is written: a schema
    /// with a dangling reference is invalid (JSON Schema 2020-12 core, section 8.2.3.1)
    /// even when the front end never reaches it.
    ///
    /// # Errors
    /// [`JsonSchemaError::UnresolvedRef`] for the first dangling reference in document
    /// order. References to documents not given are reported only where compiled.
    pub(crate) fn check_references(&self) -> Result<(), JsonSchemaError> {
        // The root document's references only: the other documents are libraries, of
        // which a schema uses what it names.
        for loc in self.res.refs.iter().filter(|l| l.starts_with('#')) {
            let Some(reference) = self.res.lookup(self.root_schema, loc) else {
                continue;
            };
            if let Err(e @ JsonSchemaError::UnresolvedRef { .. }) =
                self.resolve_location(reference, loc)
            {
                return Err(e);
            }
        }
        Ok(())
    }

    /// A lone `$ref`: a rule per target (so recursion works).
    pub(crate) fn reference(
        &mut self,
        reference: &Value,
        ptr: &str,
    ) -> Result<Expr, JsonSchemaError> {
        let target_ptr = self.resolve_location(reference, ptr)?;
        if let Some(&id) = self.refs.get(&target_ptr) {
            return Ok(Expr::Rule(id));
        }
        // A target in the root document is borrowed; one in another document copied.
        let copied;
        let target: &Value = match self.in_root(&target_ptr) {
            Some(t) => t,
            None => {
                // Found by `resolve_location`: looked up again, not resolved again.
                copied = self
                    .res
                    .lookup(self.root_schema, &target_ptr)
                    .cloned()
                    .ok_or_else(|| JsonSchemaError::UnresolvedRef {
                        reference: reference.as_str().unwrap_or_default().to_string(),
                        pointer: ptr.into(),
                    })?;
                &copied
            }
        };
        let id = self.add_rule("ref", Expr::Empty);
        // Errors of this rule are errors of the target schema.
        self.pointers[id.index()] = target_ptr.clone();
        self.refs.insert(target_ptr.clone(), id);
        self.ref_depth += 1;
        if self.ref_depth > self.max_depth {
            let depth = self.ref_depth;
            self.ref_depth -= 1;
            return Err(super::limit_error(
                crate::Limit::SchemaDepth,
                self.max_depth,
                depth,
                &target_ptr,
            ));
        }
        let body = self.schema(target, &target_ptr);
        self.ref_depth -= 1;
        self.rules[id.index()].body = body?.unwrap_or_else(never);
        Ok(Expr::Rule(id))
    }

    /// `anyOf`, with the sibling keywords merged into every branch; `oneOf` (`kw`) the
    /// same on the types [`Builder::one_of_plan`] proves its branches disjoint on (the
    /// others, matched twice, left out), else as exclusive branches `A_i ∧ ¬A_j…`
    /// ([`Builder::one_of_exclusive`]), else refused: never more than `oneOf` accepts.
    pub(crate) fn any_of(
        &mut self,
        obj: &Map<String, Value>,
        kw: &str,
        any_of: &Value,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let aptr = child(ptr, kw);
        let Value::Array(branches) = any_of else {
            return Err(JsonSchemaError::InvalidKeyword {
                keyword: kw.into(),
                pointer: aptr,
                message: "must be an array of schemas".into(),
            });
        };
        if branches.is_empty() {
            return Err(JsonSchemaError::InvalidKeyword {
                keyword: kw.into(),
                pointer: aptr,
                message: "must not be empty".into(),
            });
        }
        let mut siblings = obj.clone();
        siblings.remove(kw);
        if kw == "oneOf" {
            // Exactly one branch must match: the same as anyOf on the types where no value
            // can match two branches, with the types two branches accept entirely left out
            // (see [`Builder::one_of_plan`]).
            match self.one_of_plan(branches) {
                Ok(plan) if plan.allowed == TypeSet::all() => {}
                Ok(plan) => {
                    let mut restricted = Some(siblings.clone());
                    let mut t = Map::new();
                    t.insert("type".into(), type_names(plan.allowed));
                    if matches!(&t["type"], Value::Array(a) if a.is_empty()) {
                        restricted = None;
                    }
                    merge_maps(&mut restricted, t, ptr)?;
                    return match restricted {
                        None => Ok(None),
                        Some(r) => self.union_with_siblings(&r, branches, ptr, &aptr),
                    };
                }
                Err((i, j)) => {
                    if let Some(exclusive) = self.one_of_exclusive(branches, &aptr)? {
                        return self.union_with_siblings(&siblings, &exclusive, ptr, &aptr);
                    }
                    // Lenient: enforced as anyOf (which accepts more).
                    self.unsupported(
                        "oneOf",
                        &aptr,
                        &format!(
                            "branches {i} and {j} are not provably disjoint (by type, \
                             const/enum, number bounds, lengths, item counts, or required \
                             properties), and a branch has no exact negation"
                        ),
                    )?;
                }
            }
        }
        let plain = !super::has_assertions(&siblings, ptr, &[]);
        let mut alts = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            let bptr = child(&aptr, &i.to_string());
            if plain {
                alts.push(self.schema(b, &bptr)?);
            } else {
                alts.push(self.merged_branch(&siblings, b, ptr, &bptr)?);
            }
        }
        Ok(choice(alts))
    }

    /// `oneOf` as a union of pairwise exclusive branches: branch `i` with the negation of
    /// every other branch it may overlap (`A_i ∧ ⋀_{j≠i} ¬A_j`, each `¬A_j` a union from
    /// [`Builder::negate`]; a branch `j` that [`Builder::overlaps`] proves disjoint from
    /// `i` is left out of branch `i`, since `A_i ∧ ¬A_j` is then `A_i`). `None` when a
    /// needed negation has no exact grammar or the branches would exceed
    /// [`MAX_ONE_OF_BRANCHES`].
    fn one_of_exclusive(
        &mut self,
        branches: &[Value],
        aptr: &str,
    ) -> Result<Option<Vec<Value>>, JsonSchemaError> {
        let overlap = self.overlaps(branches);
        let mut negs = Vec::new();
        for (j, b) in branches.iter().enumerate() {
            if !(0..branches.len()).any(|i| i != j && overlap[i][j]) {
                negs.push(None);
                continue;
            }
            match self.negate(b, &child(aptr, &j.to_string()), 0)? {
                Some(n) => negs.push(Some(n)),
                None => return Ok(None),
            }
        }
        let mut out = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            let mut combos: Vec<Vec<Value>> = vec![vec![b.clone()]];
            for (j, n) in negs.iter().enumerate() {
                if j == i || !overlap[i][j] {
                    continue;
                }
                let Some(n) = n else { return Ok(None) };
                let mut next = Vec::new();
                for c in &combos {
                    for x in n {
                        let mut c2 = c.clone();
                        c2.push(x.clone());
                        next.push(c2);
                    }
                }
                combos = next;
                if out.len() + combos.len() > MAX_ONE_OF_BRANCHES {
                    return Ok(None);
                }
            }
            out.extend(
                combos
                    .into_iter()
                    .map(|c| serde_json::json!({ "allOf": c })),
            );
        }
        Ok(Some(out))
    }

    /// The union of `alternatives`, each merged with `siblings` (the rest of the schema at
    /// `ptr`); `aptr` is where the alternatives come from, for errors.
    fn union_with_siblings(
        &mut self,
        siblings: &Map<String, Value>,
        alternatives: &[Value],
        ptr: &str,
        aptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let mut alts = Vec::new();
        for (i, b) in alternatives.iter().enumerate() {
            alts.push(self.merged_branch(siblings, b, ptr, &child(aptr, &i.to_string()))?);
        }
        Ok(choice(alts))
    }

    /// Branch `b` (at `bptr`) merged with `siblings` (the rest of the schema at `ptr`),
    /// compiled at `ptr`; errors name the place of the keyword they are about.
    fn merged_branch(
        &mut self,
        siblings: &Map<String, Value>,
        b: &Value,
        ptr: &str,
        bptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let mut merged = Some(siblings.clone());
        let mut origins = Origins::new();
        for k in siblings.keys() {
            origins.insert(k.clone(), vec![ptr.to_string()]);
        }
        self.merge_into(&mut merged, &mut origins, b, bptr, 0)?;
        match merged {
            None => Ok(None),
            Some(m) => self.traced(ptr, &origins, |s| s.schema(&Value::Object(m), ptr)),
        }
    }

    /// `schema` with its `allOf` and `$ref` merged into one map (`None`: accepts nothing).
    pub(crate) fn flatten(
        &mut self,
        schema: &Value,
        ptr: &str,
        depth: usize,
    ) -> Result<Option<Map<String, Value>>, JsonSchemaError> {
        Ok(self.flatten_traced(schema, ptr, depth)?.0)
    }

    /// As [`Builder::flatten`], also telling where each keyword of the result was written.
    pub(crate) fn flatten_traced(
        &mut self,
        schema: &Value,
        ptr: &str,
        depth: usize,
    ) -> Result<(Option<Map<String, Value>>, Origins), JsonSchemaError> {
        let mut acc = Some(Map::new());
        let mut origins = Origins::new();
        self.merge_into(&mut acc, &mut origins, schema, ptr, depth)?;
        Ok((acc, origins))
    }

    /// Merges `schema` (flattened) into `acc`, noting in `origins` where its keywords are
    /// written. An error of the merge names the place of the keyword it is about.
    pub(crate) fn merge_into(
        &mut self,
        acc: &mut Option<Map<String, Value>>,
        origins: &mut Origins,
        schema: &Value,
        ptr: &str,
        depth: usize,
    ) -> Result<(), JsonSchemaError> {
        if depth > MAX_MERGE_DEPTH {
            return Err(JsonSchemaError::Unsupported {
                keyword: "allOf".into(),
                pointer: ptr.into(),
                reason: "references nested too deep (recursive?) inside `allOf`".into(),
            });
        }
        let obj = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => {
                *acc = None;
                return Ok(());
            }
            Value::Object(o) => o,
            _ => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "(schema)".into(),
                    pointer: ptr.into(),
                    message: "a schema must be an object or a boolean".into(),
                })
            }
        };
        let rewritten = self.legacy(obj);
        let obj = rewritten.as_ref().unwrap_or(obj);
        // Own keywords first.
        let mut own = Map::new();
        for (k, v) in obj {
            if k == "allOf"
                || k == "$ref"
                || is_annotation(k, ptr)
                || (ptr == "#" && k == "id" && v.is_string())
                || super::harmless_id(obj, k, self.draft4)
            {
                continue;
            }
            own.insert(k.clone(), v.clone());
            origins.entry(k.clone()).or_default().push(ptr.to_string());
        }
        merge_maps(acc, own, ptr).map_err(|e| self.relocated(e, ptr, origins))?;
        if let Some(r) = obj.get("$ref") {
            let rptr = child(ptr, "$ref");
            let (target, target_ptr) = self.resolve(r, &rptr)?;
            self.merge_into(acc, origins, &target, &target_ptr, depth + 1)?;
        }
        if let Some(all) = obj.get("allOf") {
            let aptr = child(ptr, "allOf");
            let Value::Array(list) = all else {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "allOf".into(),
                    pointer: aptr,
                    message: "must be an array of schemas".into(),
                });
            };
            if list.is_empty() {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "allOf".into(),
                    pointer: aptr,
                    message: "must not be empty".into(),
                });
            }
            for (i, b) in list.iter().enumerate() {
                // Flatten the branch on its own, then merge it as one source.
                let (f, from) = self.flatten_traced(b, &child(&aptr, &i.to_string()), depth + 1)?;
                for (k, places) in from {
                    origins.entry(k).or_default().extend(places);
                }
                match f {
                    None => *acc = None,
                    Some(m) => {
                        merge_maps(acc, m, &aptr).map_err(|e| self.relocated(e, &aptr, origins))?
                    }
                }
            }
        }
        Ok(())
    }
}

/// Merges the keywords of one source into `acc` (exactly, or refuses).
pub(crate) fn merge_maps(
    acc: &mut Option<Map<String, Value>>,
    other: Map<String, Value>,
    ptr: &str,
) -> Result<(), JsonSchemaError> {
    let Some(a) = acc.as_mut() else {
        return Ok(());
    };
    let refuse = |k: &str, why: &str| JsonSchemaError::Unsupported {
        keyword: k.into(),
        pointer: child(ptr, k),
        reason: format!("cannot merge exactly in `allOf`: {why}"),
    };
    // `unevaluated*` depends on every sibling applicator of its own schema.
    for k in ["unevaluatedProperties", "unevaluatedItems"] {
        if (a.contains_key(k) && !other.is_empty()) || (other.contains_key(k) && !a.is_empty()) {
            return Err(refuse(
                k,
                &format!("`{k}` depends on the other keywords of its own schema"),
            ));
        }
    }
    // Keywords whose meaning depends on a sibling of the same source. A name that one
    // source declares and the other (with `additionalProperties`, and no patterns) does
    // not is an additional property there: it takes that schema beside its own. Prefix
    // entries beyond the other source's `prefixItems` likewise take its `items`.
    let mut other = other;
    merge_contains(a, &mut other, ptr)?;
    merge_conditional(a, &mut other, ptr)?;
    close_against(a, &mut other);
    close_against(&mut other, a);
    // Declaring a key beside another source's `additionalProperties` changes nothing when
    // the key is declared there too, or declared `false` (forbidden either way).
    let harmless_props = |with_dep: &Map<String, Value>, with_on: &Map<String, Value>| {
        let declared = with_dep.get("properties").and_then(Value::as_object);
        with_on
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| {
                p.iter().all(|(k, s)| {
                    s == &Value::Bool(false) || declared.is_some_and(|d| d.contains_key(k))
                })
            })
    };
    // Patterns declared on both sides (or `false`) likewise.
    let harmless_patterns = |with_dep: &Map<String, Value>, with_on: &Map<String, Value>| {
        let declared = with_dep.get("patternProperties").and_then(Value::as_object);
        with_on
            .get("patternProperties")
            .and_then(Value::as_object)
            .is_some_and(|p| {
                p.iter().all(|(k, s)| {
                    s == &Value::Bool(false) || declared.is_some_and(|d| d.contains_key(k))
                })
            })
    };
    // Prefix entries within the other source's prefix.
    let harmless_prefix = |with_dep: &Map<String, Value>, with_on: &Map<String, Value>| {
        let declared = with_dep
            .get("prefixItems")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        with_on
            .get("prefixItems")
            .and_then(Value::as_array)
            .is_some_and(|p| p.len() <= declared)
    };
    for (dep, on) in [
        ("additionalProperties", "properties"),
        ("additionalProperties", "patternProperties"),
        ("items", "prefixItems"),
    ] {
        let exempt = |x: &Map<String, Value>, y: &Map<String, Value>| match on {
            "properties" => harmless_props(x, y),
            "patternProperties" => harmless_patterns(x, y),
            _ => harmless_prefix(x, y),
        };
        // Both sides with `dep`: exact as the schema of both when the two declare the same
        // names (or prefix length) and no patterns, which the closing above gives.
        let same_declared = |x: &Map<String, Value>, y: &Map<String, Value>| match dep {
            "items" => {
                let len = |m: &Map<String, Value>| {
                    m.get("prefixItems")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len)
                };
                len(x) == len(y)
            }
            _ => {
                let names = |m: &Map<String, Value>| {
                    m.get("properties")
                        .and_then(Value::as_object)
                        .map(|p| p.keys().cloned().collect::<std::collections::BTreeSet<_>>())
                };
                !x.contains_key("patternProperties")
                    && !y.contains_key("patternProperties")
                    && names(x).unwrap_or_default() == names(y).unwrap_or_default()
            }
        };
        if (a.contains_key(dep) && other.contains_key(on) && !exempt(a, &other))
            || (other.contains_key(dep) && a.contains_key(on) && !exempt(&other, a))
            || (a.contains_key(dep) && other.contains_key(dep) && !same_declared(a, &other))
        {
            return Err(refuse(
                dep,
                &format!("`{dep}` depends on the `{on}` of its own schema"),
            ));
        }
    }
    for (k, v) in other {
        let Some(cur) = a.get(&k) else {
            a.insert(k, v);
            continue;
        };
        if json_equal(cur, &v) {
            continue;
        }
        let merged = match k.as_str() {
            "type" => {
                let t1 = parse_types(a, ptr)?;
                let mut tmp = Map::new();
                tmp.insert("type".into(), v.clone());
                let t2 = parse_types(&tmp, ptr)?;
                let mut names = Vec::new();
                let both_num = (t1.number || t1.integer) && (t2.number || t2.integer);
                for (name, x, y) in [
                    ("null", t1.null, t2.null),
                    ("boolean", t1.boolean, t2.boolean),
                    ("string", t1.string, t2.string),
                    ("object", t1.object, t2.object),
                    ("array", t1.array, t2.array),
                ] {
                    if x && y {
                        names.push(Value::String(name.into()));
                    }
                }
                if both_num {
                    let name = if t1.number && t2.number {
                        "number"
                    } else {
                        "integer"
                    };
                    names.push(Value::String(name.into()));
                }
                if names.is_empty() {
                    *acc = None;
                    return Ok(());
                }
                Value::Array(names)
            }
            "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties" => {
                match cmp_numbers(cur, &v) {
                    Some(o) if o == std::cmp::Ordering::Greater || o.is_eq() => cur.clone(),
                    Some(_) => v,
                    None => return Err(refuse(&k, "values not comparable exactly")),
                }
            }
            "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties" => {
                match cmp_numbers(cur, &v) {
                    Some(o) if o == std::cmp::Ordering::Less || o.is_eq() => cur.clone(),
                    Some(_) => v,
                    None => return Err(refuse(&k, "values not comparable exactly")),
                }
            }
            "required" => match (cur, &v) {
                (Value::Array(x), Value::Array(y)) => {
                    let mut out = x.clone();
                    for s in y {
                        if !out.contains(s) {
                            out.push(s.clone());
                        }
                    }
                    Value::Array(out)
                }
                _ => return Err(refuse(&k, "`required` must be arrays")),
            },
            "properties" => match (cur, &v) {
                (Value::Object(x), Value::Object(y)) => {
                    let mut out = x.clone();
                    for (name, s) in y {
                        let s2 = match out.get(name) {
                            Some(s1) if json_equal(s1, s) => s.clone(),
                            Some(s1) => serde_json::json!({ "allOf": [s1.clone(), s.clone()] }),
                            None => s.clone(),
                        };
                        out.insert(name.clone(), s2);
                    }
                    Value::Object(out)
                }
                _ => return Err(refuse(&k, "`properties` must be objects")),
            },
            "patternProperties" => match (cur, &v) {
                // A key takes the schemas of every pattern it matches, from both sides.
                (Value::Object(x), Value::Object(y)) => {
                    let mut out = x.clone();
                    for (p, s) in y {
                        let s2 = match out.get(p) {
                            Some(s1) if json_equal(s1, s) => s.clone(),
                            Some(s1) => serde_json::json!({ "allOf": [s1.clone(), s.clone()] }),
                            None => s.clone(),
                        };
                        out.insert(p.clone(), s2);
                    }
                    Value::Object(out)
                }
                _ => return Err(refuse(&k, "`patternProperties` must be objects")),
            },
            "prefixItems" => match (cur, &v) {
                // Position by position; the longer prefix goes on (neither side has
                // `items` beyond a shorter prefix: checked above).
                (Value::Array(x), Value::Array(y)) => {
                    let n = x.len().max(y.len());
                    let out = (0..n)
                        .map(|i| match (x.get(i), y.get(i)) {
                            (Some(s1), Some(s2)) if json_equal(s1, s2) => s1.clone(),
                            (Some(s1), Some(s2)) => {
                                serde_json::json!({ "allOf": [s1.clone(), s2.clone()] })
                            }
                            (Some(s), None) | (None, Some(s)) => s.clone(),
                            (None, None) => Value::Bool(true),
                        })
                        .collect();
                    Value::Array(out)
                }
                _ => return Err(refuse(&k, "`prefixItems` must be arrays")),
            },
            "uniqueItems" => {
                // true wins (it is the stronger assertion).
                Value::Bool(cur.as_bool() == Some(true) || v.as_bool() == Some(true))
            }
            // Both sides declare the same names (prefix length), checked above: the rest
            // takes both schemas.
            "additionalProperties" | "items" => both(cur, &v),
            // The values in both lists (JSON equality: 1 and 1.0 are one value).
            "enum" => match (cur, &v) {
                (Value::Array(x), Value::Array(y)) => {
                    let common: Vec<Value> = x
                        .iter()
                        .filter(|e| y.iter().any(|f| json_equal(e, f)))
                        .cloned()
                        .collect();
                    if common.is_empty() {
                        *acc = None;
                        return Ok(());
                    }
                    Value::Array(common)
                }
                _ => return Err(refuse(&k, "`enum` must be arrays")),
            },
            // Two different constants: no value is both.
            "const" => {
                *acc = None;
                return Ok(());
            }
            _ => return Err(refuse(&k, "present on both sides with different values")),
        };
        a.insert(k, merged);
    }
    Ok(())
}

/// The exact order of two JSON numbers as parsed (integers of up to 128 bits exactly,
/// floats as their `f64` value, which is what the bounds compile to), or `None` when not
/// both numbers (or a float too large to compare exactly with an integer).
pub(super) fn cmp_numbers(x: &Value, y: &Value) -> Option<std::cmp::Ordering> {
    use std::cmp::Ordering;
    let int = |v: &Value| -> Option<i128> {
        let n = v.as_number()?;
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    // An integer against a float.
    let mixed = |i: i128, f: f64| -> Option<Ordering> {
        if !f.is_finite() || f.abs() > 1e30 {
            return None;
        }
        let fl = f.floor();
        let fi = fl as i128;
        Some(match i.cmp(&fi) {
            Ordering::Less => Ordering::Less,
            Ordering::Greater => Ordering::Greater,
            Ordering::Equal if fl == f => Ordering::Equal,
            Ordering::Equal => Ordering::Less,
        })
    };
    match (int(x), int(y)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        (Some(a), None) => mixed(a, y.as_f64()?),
        (None, Some(b)) => mixed(b, x.as_f64()?).map(Ordering::reverse),
        (None, None) => x.as_f64()?.partial_cmp(&y.as_f64()?),
    }
}

/// Removes the keywords `keys` from `m` as one unit: `Some` (keyword → value) when `m` has
/// `keys[0]` (the head, which gives the others their meaning), `None` otherwise (the others
/// then mean nothing and are dropped).
fn take_unit(m: &mut Map<String, Value>, keys: &[&str]) -> Option<Map<String, Value>> {
    let head = m.contains_key(keys[0]);
    let mut unit = Map::new();
    for k in keys {
        if let Some(v) = m.remove(*k) {
            unit.insert((*k).to_string(), v);
        }
    }
    head.then_some(unit)
}

/// `contains` with its `minContains`/`maxContains`, merged as one unit per side: a count
/// keyword never attaches to the other side's `contains`. Two units with the same
/// `contains` schema merge exactly (the greater minimum, the lesser maximum); two different
/// ones are refused (one schema holds one `contains`). The merged unit goes into `a`.
fn merge_contains(
    a: &mut Map<String, Value>,
    other: &mut Map<String, Value>,
    ptr: &str,
) -> Result<(), JsonSchemaError> {
    const KEYS: &[&str] = &["contains", "minContains", "maxContains"];
    let merged = match (take_unit(a, KEYS), take_unit(other, KEYS)) {
        (None, None) => return Ok(()),
        (Some(u), None) | (None, Some(u)) => u,
        (Some(x), Some(y)) if json_equal(&x["contains"], &y["contains"]) => {
            let count = |u: &Map<String, Value>, k: &str, default: Option<u64>| match u.get(k) {
                None => Ok(default),
                Some(v) => v
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| JsonSchemaError::InvalidKeyword {
                        keyword: k.into(),
                        pointer: child(ptr, k),
                        message: "must be a non-negative integer".into(),
                    }),
            };
            let lo = count(&x, "minContains", Some(1))?.max(count(&y, "minContains", Some(1))?);
            let hi = match (
                count(&x, "maxContains", None)?,
                count(&y, "maxContains", None)?,
            ) {
                (Some(p), Some(q)) => Some(p.min(q)),
                (p, q) => p.or(q),
            };
            let mut u = Map::new();
            u.insert("contains".into(), x["contains"].clone());
            if let Some(lo) = lo {
                u.insert("minContains".into(), lo.into());
            }
            if let Some(hi) = hi {
                u.insert("maxContains".into(), hi.into());
            }
            u
        }
        (Some(_), Some(_)) => {
            return Err(JsonSchemaError::Unsupported {
                keyword: "contains".into(),
                pointer: child(ptr, "contains"),
                reason: "cannot merge exactly in `allOf`: two different `contains` schemas (a \
                         schema holds one)"
                    .into(),
            })
        }
    };
    a.extend(merged);
    Ok(())
}

/// `if` with its `then`/`else`, merged as one unit per side: a `then`/`else` never
/// combines with the other side's `if` (without an `if` of its own side it means nothing).
/// Two units with the same `if` merge exactly (`then`s and `else`s each under `allOf`);
/// two different ones are refused. The merged unit goes into `a`.
fn merge_conditional(
    a: &mut Map<String, Value>,
    other: &mut Map<String, Value>,
    ptr: &str,
) -> Result<(), JsonSchemaError> {
    const KEYS: &[&str] = &["if", "then", "else"];
    let merged = match (take_unit(a, KEYS), take_unit(other, KEYS)) {
        (None, None) => return Ok(()),
        (Some(u), None) | (None, Some(u)) => u,
        (Some(x), Some(y)) if json_equal(&x["if"], &y["if"]) => {
            let mut u = Map::new();
            u.insert("if".into(), x["if"].clone());
            for k in ["then", "else"] {
                let v = match (x.get(k), y.get(k)) {
                    (None, None) => continue,
                    (Some(s), None) | (None, Some(s)) => s.clone(),
                    (Some(s), Some(t)) if json_equal(s, t) => s.clone(),
                    (Some(s), Some(t)) => serde_json::json!({ "allOf": [s, t] }),
                };
                u.insert(k.into(), v);
            }
            u
        }
        (Some(_), Some(_)) => {
            return Err(JsonSchemaError::Unsupported {
                keyword: "if".into(),
                pointer: child(ptr, "if"),
                reason: "cannot merge exactly in `allOf`: two different `if` schemas (a schema \
                         holds one)"
                    .into(),
            })
        }
    };
    a.extend(merged);
    Ok(())
}

/// Where `with_dep` has `additionalProperties` and no `patternProperties`, every name that
/// `with_on` declares and `with_dep` does not is an additional property of `with_dep`: its
/// schema in `with_on` takes `additionalProperties` beside it and `with_dep` declares it
/// (as `true`), so the merge keeps the meaning of both. Likewise the `prefixItems` of
/// `with_on` beyond those of `with_dep` (which has `items`) take its `items`, and
/// `with_dep` declares them. Does nothing otherwise.
fn close_against(with_dep: &mut Map<String, Value>, with_on: &mut Map<String, Value>) {
    if let (Some(extra), None, Some(Value::Object(props))) = (
        with_dep.get("additionalProperties").cloned(),
        with_dep.get("patternProperties"),
        with_on.get_mut("properties"),
    ) {
        let mut declared = match with_dep.get("properties") {
            Some(Value::Object(d)) => d.clone(),
            Some(_) => return,
            None => Map::new(),
        };
        for (name, s) in props.iter_mut() {
            if declared.contains_key(name) || s == &Value::Bool(false) {
                continue;
            }
            *s = both(s, &extra);
            declared.insert(name.clone(), Value::Bool(true));
        }
        with_dep.insert("properties".into(), Value::Object(declared));
    }
    if let (Some(rest), Some(Value::Array(prefix))) = (
        with_dep.get("items").cloned(),
        with_on.get_mut("prefixItems"),
    ) {
        let mut own = match with_dep.get("prefixItems") {
            Some(Value::Array(p)) => p.clone(),
            Some(_) => return,
            None => Vec::new(),
        };
        if prefix.len() <= own.len() {
            return;
        }
        for s in prefix.iter_mut().skip(own.len()) {
            *s = both(s, &rest);
        }
        own.resize(prefix.len(), Value::Bool(true));
        with_dep.insert("prefixItems".into(), Value::Array(own));
    }
}

/// The schema of both `a` and `b`.
fn both(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Bool(true), x) | (x, Value::Bool(true)) => x.clone(),
        (Value::Bool(false), _) | (_, Value::Bool(false)) => Value::Bool(false),
        _ if json_equal(a, b) => a.clone(),
        _ => serde_json::json!({ "allOf": [a, b] }),
    }
}
