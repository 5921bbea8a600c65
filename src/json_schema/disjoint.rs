//! `oneOf` planning: proofs that two branches accept no value in common (from types,
//! constants, number bounds, string lengths and literal patterns, item counts and items,
//! required against forbidden properties, recursively, within a budget), and the plan of
//! exclusive branches `A_i ∧ ¬A_j...` where they overlap.

use std::rc::Rc;

use serde_json::{Map, Value};

use super::references::{cmp_numbers, MAX_MERGE_DEPTH};
use super::strings::text_matches;
use super::types::{json_equal, parse_types, TypeSet};
use super::{is_annotation, Builder, InstanceType};
use crate::grammar::Expr;

/// The most properties, items and subschemas one disjointness proof looks at (shapes built
/// plus pairs compared); past it the proof gives up, which only ever means "not proven".
pub(super) const PROOF_BUDGET: usize = 4096;

/// The most array positions compared (or checked in a constant) by a proof.
pub(super) const MAX_PROOF_ITEMS: usize = 8;

/// A number bound: the bound (a JSON number) and whether it is exclusive.
pub(super) type Bound = (Value, bool);

/// The object keywords of one schema object, from which the schema a property's value
/// must match follows: its `properties` entry, else (when there are no
/// `patternProperties`, which could also apply) `additionalProperties`.
#[derive(Clone, Debug)]
pub(super) struct ObjectFacet {
    properties: Map<String, Value>,
    additional: Option<Value>,
    /// `patternProperties`: each pattern (its grammar, `None` when it has none) and schema.
    patterns: Vec<(Option<Rc<Expr>>, Value)>,
}

/// The grammar of the strings in which the ECMA-262 regex `p` finds a match (as `pattern`
/// compiles it), for [`text_matches`]; `None` when it has none.
pub(super) fn pattern_expr(p: &Value) -> Option<Rc<Expr>> {
    let rust = super::strings::ecma_to_rust(p.as_str()?).ok()?;
    let opts = crate::regex::RegexOptions::new().unanchored(true);
    crate::regex::regex_to_expr(&rust, &opts).ok().map(Rc::new)
}

/// The literal every string of `e` starts with, and whether `e` is exactly that literal.
pub(super) fn literal_prefix(e: &Expr) -> (String, bool) {
    pub(super) fn walk(e: &Expr, out: &mut String) -> bool {
        match e {
            Expr::Empty => true,
            Expr::Bytes(b) => match std::str::from_utf8(b) {
                Ok(t) => {
                    out.push_str(t);
                    true
                }
                Err(_) => false,
            },
            Expr::Seq(v) => v.iter().all(|x| walk(x, out)),
            _ => false,
        }
    }
    let mut out = String::new();
    let exact = walk(e, &mut out);
    (out, exact)
}

/// The array keywords of one schema object: the schema of item `k` is `prefix[k]`, then
/// `items`.
#[derive(Clone, Debug)]
pub(super) struct ArrayFacet {
    prefix: Vec<Value>,
    items: Option<Value>,
}

/// A superset of the values a schema may accept (every field is a necessary condition of
/// the schema, never a sufficient one), plus the types the schema accepts *entirely*: for
/// proving `oneOf` branches disjoint ([`Builder::one_of_plan`]).
///
/// Subschemas (of properties and items) are kept as schemas and shaped only when a proof
/// needs them, so recursive schemas cost nothing up front.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    /// The types of the values accepted (a superset).
    types: TypeSet,
    /// Types of which *every* value is accepted (a subset of what is accepted: no keyword
    /// of the schema constrains a value of these types). `integer` alone means every
    /// integer; `number` means every number.
    all: TypeSet,
    /// When known: the only values accepted.
    values: Option<Vec<Value>>,
    /// Numbers: the lower and upper bounds (the strictest known of each).
    lo: Option<Bound>,
    hi: Option<Bound>,
    /// Strings: the length in code points, `min..=max`, and the `pattern`s that must
    /// match (as grammars; a pattern without one is left out).
    len: (u64, Option<u64>),
    patterns: Vec<Rc<Expr>>,
    /// Arrays: the number of items, `min..=max`, and the item schemas.
    count: (u64, Option<u64>),
    arrays: Vec<ArrayFacet>,
    /// Objects: the required names, the names that must be absent, and the property
    /// schemas.
    required: Vec<String>,
    forbidden: Vec<String>,
    objects: Vec<ObjectFacet>,
}

/// The types in both `a` and `b` (integers are numbers).
pub(super) fn meet(a: TypeSet, b: TypeSet) -> TypeSet {
    let number = a.number && b.number;
    TypeSet {
        null: a.null && b.null,
        boolean: a.boolean && b.boolean,
        string: a.string && b.string,
        integer: (a.integer || a.number) && (b.integer || b.number) && !number,
        number,
        object: a.object && b.object,
        array: a.array && b.array,
    }
}

/// The stricter of two lower (`upper == false`) or upper bounds; when the two cannot be
/// compared exactly, the first (either is a necessary condition).
pub(super) fn stricter(a: Option<Bound>, b: Option<Bound>, upper: bool) -> Option<Bound> {
    use std::cmp::Ordering;
    match (a, b) {
        (Some(x), Some(y)) => Some(match cmp_numbers(&x.0, &y.0) {
            Some(Ordering::Equal) => (x.0, x.1 || y.1),
            Some(Ordering::Less) if upper => x,
            Some(Ordering::Greater) if !upper => x,
            Some(_) => y,
            None => x,
        }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Whether every number within upper bound `hi` is below every number within lower bound
/// `lo` (exactly: [`cmp_numbers`] compares as parsed, `None` proves nothing).
pub(super) fn below(hi: &Bound, lo: &Bound) -> bool {
    use std::cmp::Ordering;
    match cmp_numbers(&hi.0, &lo.0) {
        Some(Ordering::Less) => true,
        Some(Ordering::Equal) => hi.1 || lo.1,
        _ => false,
    }
}

/// Whether the ranges `a` and `b` (`min..=max`) have no common value.
pub(super) fn ranges_apart(a: (u64, Option<u64>), b: (u64, Option<u64>)) -> bool {
    a.1.is_some_and(|m| m < b.0) || b.1.is_some_and(|m| m < a.0)
}

impl Shape {
    /// Any value (nothing known): accepts every type, none known to be accepted entirely.
    pub(super) fn any() -> Shape {
        Shape {
            types: TypeSet::all(),
            all: TypeSet::default(),
            values: None,
            lo: None,
            hi: None,
            len: (0, None),
            patterns: Vec::new(),
            count: (0, None),
            arrays: Vec::new(),
            required: Vec::new(),
            forbidden: Vec::new(),
            objects: Vec::new(),
        }
    }

    /// No value.
    pub(super) fn never() -> Shape {
        Shape {
            types: TypeSet::default(),
            values: Some(Vec::new()),
            ..Shape::any()
        }
    }

    /// The shape of both `self` and `other` (every condition of each holds).
    pub(super) fn intersect(&mut self, other: Shape) {
        self.types = meet(self.types, other.types);
        self.all = meet(self.all, other.all);
        self.values = match (self.values.take(), other.values) {
            (Some(a), Some(b)) => Some(
                a.into_iter()
                    .filter(|x| b.iter().any(|y| json_equal(x, y)))
                    .collect(),
            ),
            (Some(a), None) | (None, Some(a)) => Some(a),
            (None, None) => None,
        };
        self.lo = stricter(self.lo.take(), other.lo, false);
        self.hi = stricter(self.hi.take(), other.hi, true);
        let min_max = |a: (u64, Option<u64>), b: (u64, Option<u64>)| {
            let max = match (a.1, b.1) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, None) => x,
                (None, y) => y,
            };
            (a.0.max(b.0), max)
        };
        self.len = min_max(self.len, other.len);
        self.patterns.extend(other.patterns);
        self.count = min_max(self.count, other.count);
        self.arrays.extend(other.arrays);
        self.required.extend(other.required);
        self.forbidden.extend(other.forbidden);
        self.objects.extend(other.objects);
    }
}

/// One disjointness proof: the builder (to resolve references) and what is left of the
/// [`PROOF_BUDGET`].
pub(super) struct Prover<'p, 'b> {
    b: &'p Builder<'b>,
    budget: std::cell::Cell<usize>,
}

impl Prover<'_, '_> {
    /// Takes one unit of budget; `false` when there is none left.
    pub(super) fn spend(&self) -> bool {
        let left = self.budget.get();
        if left == 0 {
            return false;
        }
        self.budget.set(left - 1);
        true
    }

    /// The [`Shape`] of a schema (a superset of what it accepts, and a subset of the types
    /// it accepts entirely; anything not understood widens the first and narrows the
    /// second, so errors give [`Shape::any`]).
    pub(super) fn shape(&self, schema: &Value, depth: usize) -> Shape {
        let obj = match schema {
            Value::Bool(false) => return Shape::never(),
            Value::Bool(true) => {
                return Shape {
                    all: TypeSet::all(),
                    ..Shape::any()
                }
            }
            Value::Object(o) if depth <= MAX_MERGE_DEPTH && self.spend() => o,
            _ => return Shape::any(),
        };
        let rewritten = self.b.legacy(obj);
        let obj = rewritten.as_ref().unwrap_or(obj);
        let mut s = Shape::any();
        match parse_types(obj, "#") {
            Ok(t) => {
                s.types = t;
                s.all = t;
                s.all.integer |= t.number;
            }
            Err(_) => return Shape::any(),
        }
        // Which types every keyword leaves entirely accepted. `$ref`, `allOf`, `const` and
        // `enum` narrow `all` through `intersect`; `anyOf` below.
        for k in obj.keys() {
            let k = k.as_str();
            if k == "type"
                || matches!(k, "$ref" | "allOf" | "anyOf" | "oneOf" | "const" | "enum")
                || is_annotation(k, "#")
                || super::harmless_id(obj, k, self.b.draft4)
                // Ignored by the front end, and annotations for the specification.
                || (self.b.opts.ignore_unknown_keywords && !super::KNOWN_KEYWORDS.contains(&k))
            {
                continue;
            }
            match super::keyword_instance_type(k) {
                Some(InstanceType::Object) => s.all.object = false,
                Some(InstanceType::Array) => s.all.array = false,
                Some(InstanceType::String) => s.all.string = false,
                Some(InstanceType::Number) => {
                    s.all.number = false;
                    s.all.integer = false;
                }
                // `not`, `if`, `oneOf`, unknown keywords...: anything may fail.
                None => s.all = TypeSet::default(),
            }
        }
        if let Some(c) = obj.get("const") {
            s.intersect(Shape {
                values: Some(vec![c.clone()]),
                ..Shape::any()
            });
        }
        if let Some(e) = obj.get("enum") {
            s.intersect(Shape {
                values: e.as_array().cloned(),
                ..Shape::any()
            });
        }
        if let Some(r) = obj.get("$ref") {
            // Without the place of the `$ref`, only a single resource resolves it surely;
            // otherwise the shape stays wider (sound for disjointness).
            match self
                .b
                .resolve(r, "#/$ref")
                .ok()
                .filter(|_| !self.b.res.several)
            {
                Some((target, _)) => s.intersect(self.shape(&target, depth + 1)),
                None => s.all = TypeSet::default(),
            }
        }
        if let Some(all_of) = obj.get("allOf") {
            match all_of {
                Value::Array(list) => {
                    for b in list {
                        s.intersect(self.shape(b, depth + 1));
                    }
                }
                _ => s.all = TypeSet::default(),
            }
        }
        for kw in ["anyOf", "oneOf"] {
            let Some(list) = obj.get(kw) else { continue };
            let Value::Array(list) = list else {
                s.all = TypeSet::default();
                continue;
            };
            // A value of the union is a value of some branch: the union of the branches'
            // types and values. A type one branch accepts entirely, `anyOf` accepts
            // entirely (`oneOf` may not: a second branch can accept it too).
            let mut join = Shape {
                types: TypeSet::default(),
                values: Some(Vec::new()),
                ..Shape::any()
            };
            for b in list {
                let sb = self.shape(b, depth + 1);
                let (t, u) = (&mut join.types, sb.types);
                t.null |= u.null;
                t.boolean |= u.boolean;
                t.string |= u.string;
                t.integer |= u.integer;
                t.number |= u.number;
                t.object |= u.object;
                t.array |= u.array;
                join.values = match (join.values.take(), sb.values) {
                    (Some(mut a), Some(b)) => {
                        a.extend(b);
                        Some(a)
                    }
                    _ => None,
                };
                if kw == "anyOf" {
                    let (t, u) = (&mut join.all, sb.all);
                    t.null |= u.null;
                    t.boolean |= u.boolean;
                    t.string |= u.string;
                    t.integer |= u.integer || u.number;
                    t.number |= u.number;
                    t.object |= u.object;
                    t.array |= u.array;
                }
            }
            if join.types.number {
                join.types.integer = false;
            }
            s.intersect(join);
            s.all.integer |= s.all.number;
        }
        let bound = |k: &str, exclusive: bool| {
            obj.get(k)
                .filter(|v| v.is_number())
                .map(|v| (v.clone(), exclusive))
        };
        s.lo = stricter(
            bound("minimum", false),
            bound("exclusiveMinimum", true),
            false,
        );
        s.hi = stricter(
            bound("maximum", false),
            bound("exclusiveMaximum", true),
            true,
        );
        let size = |min: &str, max: &str| {
            (
                obj.get(min).and_then(Value::as_u64).unwrap_or(0),
                obj.get(max).and_then(Value::as_u64),
            )
        };
        s.len = size("minLength", "maxLength");
        if let Some(p) = obj.get("pattern") {
            s.patterns.extend(pattern_expr(p));
        }
        s.count = size("minItems", "maxItems");
        let items = obj.get("items").filter(|v| !v.is_array()).cloned();
        let prefix = obj.get("prefixItems").and_then(Value::as_array).cloned();
        if items.is_some() || prefix.is_some() {
            s.arrays.push(ArrayFacet {
                prefix: prefix.unwrap_or_default(),
                items,
            });
        }
        if let Some(Value::Array(req)) = obj.get("required") {
            s.required
                .extend(req.iter().filter_map(|r| r.as_str().map(String::from)));
        }
        // `not: {required: [p]}`: `p` is absent.
        if let Some(Value::Object(not)) = obj.get("not") {
            if let (1, Some(Value::Array(req))) = (not.len(), not.get("required")) {
                if let [Value::String(p)] = req.as_slice() {
                    s.forbidden.push(p.clone());
                }
            }
        }
        let properties = obj.get("properties").and_then(Value::as_object);
        let additional = obj.get("additionalProperties");
        if properties.is_some() || additional.is_some() || obj.contains_key("patternProperties") {
            let patterns = match obj.get("patternProperties") {
                None => Vec::new(),
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(p, sub)| (pattern_expr(&Value::String(p.clone())), sub.clone()))
                    .collect(),
                // Not understood: no name is surely additional.
                Some(_) => vec![(None, Value::Bool(true))],
            };
            s.objects.push(ObjectFacet {
                properties: properties.cloned().unwrap_or_default(),
                additional: additional.cloned(),
                patterns,
            });
        }
        s
    }

    /// The shape of property `name`'s value in an object of shape `s` (that has it).
    pub(super) fn property(&self, s: &Shape, name: &str, depth: usize) -> Shape {
        if s.forbidden.iter().any(|f| f == name) {
            return Shape::never();
        }
        let mut out = Shape {
            all: TypeSet::all(),
            ..Shape::any()
        };
        for f in &s.objects {
            // Every matching pattern's schema applies; `additionalProperties` when the name
            // is declared nowhere (surely: each pattern is known not to match).
            let mut declared = f.properties.contains_key(name);
            for (e, sub) in &f.patterns {
                match e.as_ref().and_then(|e| text_matches(e, name)) {
                    Some(false) => {}
                    Some(true) => {
                        declared = true;
                        out.intersect(self.shape(sub, depth + 1));
                    }
                    None => declared = true,
                }
            }
            if let Some(p) = f.properties.get(name) {
                out.intersect(self.shape(p, depth + 1));
            } else if let (false, Some(a)) = (declared, &f.additional) {
                out.intersect(self.shape(a, depth + 1));
            }
        }
        out
    }

    /// The shape of item `k` in an array of shape `s` (that has it).
    pub(super) fn item(&self, s: &Shape, k: usize, depth: usize) -> Shape {
        let mut out = Shape {
            all: TypeSet::all(),
            ..Shape::any()
        };
        for f in &s.arrays {
            if let Some(sub) = f.prefix.get(k).or(f.items.as_ref()) {
                out.intersect(self.shape(sub, depth + 1));
            }
        }
        out
    }

    /// Whether `v` may be accepted by a schema of shape `s` (`true` when unsure).
    pub(super) fn admits(&self, s: &Shape, v: &Value, depth: usize) -> bool {
        if !s.types.admits(v)
            || s.values
                .as_ref()
                .is_some_and(|vs| !vs.iter().any(|w| json_equal(v, w)))
        {
            return false;
        }
        if depth > MAX_MERGE_DEPTH || !self.spend() {
            return true;
        }
        let within = |n: u64, r: (u64, Option<u64>)| n >= r.0 && r.1.map_or(true, |m| n <= m);
        match v {
            Value::Number(_) => {
                let n = (v.clone(), false);
                !(s.lo.as_ref().is_some_and(|lo| below(&n, lo))
                    || s.hi.as_ref().is_some_and(|hi| below(hi, &n)))
            }
            Value::String(t) => {
                within(t.chars().count() as u64, s.len)
                    && s.patterns.iter().all(|e| text_matches(e, t) != Some(false))
            }
            Value::Array(xs) => {
                within(xs.len() as u64, s.count)
                    && xs
                        .iter()
                        .take(MAX_PROOF_ITEMS)
                        .enumerate()
                        .all(|(k, x)| self.admits(&self.item(s, k, depth), x, depth + 1))
            }
            Value::Object(m) => {
                s.required.iter().all(|r| m.contains_key(r))
                    && !s.forbidden.iter().any(|f| m.contains_key(f))
                    && m.iter()
                        .take(MAX_PROOF_ITEMS)
                        .all(|(k, x)| self.admits(&self.property(s, k, depth), x, depth + 1))
            }
            _ => true,
        }
    }

    /// Whether no value of the types `on` is accepted by both `a` and `b` (`false` when
    /// unsure): a common value would have to meet every condition of both shapes, so two
    /// contradicting conditions prove there is none.
    pub(super) fn disjoint(&self, a: &Shape, b: &Shape, on: TypeSet, depth: usize) -> bool {
        if depth > MAX_MERGE_DEPTH || !self.spend() {
            return false;
        }
        // Finitely many values: check each.
        for (x, y) in [(a, b), (b, a)] {
            if let Some(vs) = &x.values {
                return !vs
                    .iter()
                    .any(|v| on.admits(v) && self.admits(x, v, depth) && self.admits(y, v, depth));
            }
        }
        let t = meet(meet(a.types, b.types), on);
        if t.null || t.boolean {
            return false;
        }
        if t.string && !self.strings_disjoint(a, b, depth) {
            return false;
        }
        let numbers_apart =
            a.hi.as_ref()
                .zip(b.lo.as_ref())
                .is_some_and(|(h, l)| below(h, l))
                || b.hi
                    .as_ref()
                    .zip(a.lo.as_ref())
                    .is_some_and(|(h, l)| below(h, l));
        if (t.number || t.integer) && !numbers_apart {
            return false;
        }
        if t.array && !self.arrays_disjoint(a, b, depth) {
            return false;
        }
        if t.object && !self.objects_disjoint(a, b, depth) {
            return false;
        }
        true
    }

    /// Strings: lengths that cannot agree; a pattern that is one literal (`^abc$`) which
    /// the other side's lengths or patterns reject; or literal prefixes (`^abc`) that
    /// differ.
    pub(super) fn strings_disjoint(&self, a: &Shape, b: &Shape, depth: usize) -> bool {
        if ranges_apart(a.len, b.len) {
            return true;
        }
        let string_only = |s: &Shape| Shape {
            types: TypeSet {
                string: true,
                ..TypeSet::default()
            },
            values: None,
            ..s.clone()
        };
        let prefixes = |s: &Shape| -> Vec<(String, bool)> {
            s.patterns.iter().map(|e| literal_prefix(e)).collect()
        };
        let (pa, pb) = (prefixes(a), prefixes(b));
        for (x, y, px) in [(a, b, &pa), (b, a, &pb)] {
            for (lit, exact) in px {
                if *exact {
                    let v = Value::String(lit.clone());
                    if !self.admits(&string_only(x), &v, depth)
                        || !self.admits(&string_only(y), &v, depth)
                    {
                        return true;
                    }
                }
            }
        }
        pa.iter().any(|(x, ex)| {
            pb.iter().any(|(y, ey)| match (ex, ey) {
                (true, true) => x != y,
                (true, false) => !x.starts_with(y.as_str()),
                (false, true) => !y.starts_with(x.as_str()),
                (false, false) => !x.starts_with(y.as_str()) && !y.starts_with(x.as_str()),
            })
        })
    }

    /// Arrays: counts that cannot agree, or an item both require whose schemas cannot.
    pub(super) fn arrays_disjoint(&self, a: &Shape, b: &Shape, depth: usize) -> bool {
        if ranges_apart(a.count, b.count) {
            return true;
        }
        let both = a.count.0.min(b.count.0).min(MAX_PROOF_ITEMS as u64) as usize;
        (0..both).any(|k| {
            self.disjoint(
                &self.item(a, k, depth),
                &self.item(b, k, depth),
                TypeSet::all(),
                depth + 1,
            )
        })
    }

    /// Objects: a property one side requires whose value schemas cannot agree (or which
    /// the other side forbids: `false`, `additionalProperties: false`, `not: {required}`).
    pub(super) fn objects_disjoint(&self, a: &Shape, b: &Shape, depth: usize) -> bool {
        [(a, b), (b, a)].iter().any(|(x, y)| {
            x.required.iter().any(|p| {
                self.disjoint(
                    &self.property(x, p, depth),
                    &self.property(y, p, depth),
                    TypeSet::all(),
                    depth + 1,
                )
            })
        })
    }
}

/// `{"type": [...]}` value naming the types of `t` (`integer` only when not `number`).
pub(super) fn type_names(t: TypeSet) -> Value {
    let mut names = Vec::new();
    for (name, has) in [
        ("null", t.null),
        ("boolean", t.boolean),
        ("string", t.string),
        ("number", t.number),
        ("integer", t.integer && !t.number),
        ("object", t.object),
        ("array", t.array),
    ] {
        if has {
            names.push(Value::String(name.into()));
        }
    }
    Value::Array(names)
}

/// How `oneOf` compiles exactly as a union ([`Builder::one_of_plan`]).
pub(crate) struct OneOfPlan {
    /// The types the `oneOf` may accept: without those that two branches accept entirely.
    pub(crate) allowed: TypeSet,
}

impl Builder<'_> {
    /// Proves `oneOf` over `branches` a union: returns the types it may accept, such that
    /// on them no two branches share a value; or the first pair `(i, j)` not proven
    /// disjoint.
    ///
    /// Sound because (1) a type that two branches accept entirely (no keyword of either
    /// constrains its values: see [`Shape`]'s `all`) has every value matched twice, so
    /// `oneOf` accepts none of it and it is left out; (2) on the remaining types every
    /// pair of branches is disjoint by [`Shape`] conditions that contradict (types,
    /// constants, number bounds, string lengths, item counts, item or required-property
    /// schemas, recursively), so a value matches at most one branch and `oneOf` there is
    /// exactly `anyOf`. Anything not understood only widens a shape (proving less).
    pub(crate) fn one_of_plan(&self, branches: &[Value]) -> Result<OneOfPlan, (usize, usize)> {
        self.one_of_plan_with(branches, true)
    }

    /// [`Builder::one_of_plan`] without leaving types out: `true` when every pair of
    /// branches is disjoint on every type.
    pub(crate) fn branches_disjoint(&self, branches: &[Value]) -> bool {
        self.one_of_plan_with(branches, false).is_ok()
    }

    /// `overlaps(branches)[i][j]`: whether branches `i` and `j` are *not* proven disjoint
    /// (on every type, as [`Builder::branches_disjoint`] proves them). `false` only when no
    /// value matches both.
    pub(crate) fn overlaps(&self, branches: &[Value]) -> Vec<Vec<bool>> {
        let p = Prover {
            b: self,
            budget: std::cell::Cell::new(PROOF_BUDGET),
        };
        let shapes: Vec<Shape> = branches.iter().map(|b| p.shape(b, 0)).collect();
        let n = shapes.len();
        let mut m = vec![vec![true; n]; n];
        for i in 0..n {
            for j in i + 1..n {
                let o = !p.disjoint(&shapes[i], &shapes[j], TypeSet::all(), 0);
                m[i][j] = o;
                m[j][i] = o;
            }
        }
        m
    }

    pub(super) fn one_of_plan_with(
        &self,
        branches: &[Value],
        exclude: bool,
    ) -> Result<OneOfPlan, (usize, usize)> {
        let p = Prover {
            b: self,
            budget: std::cell::Cell::new(PROOF_BUDGET),
        };
        let shapes: Vec<Shape> = branches.iter().map(|b| p.shape(b, 0)).collect();
        let twice = |f: fn(&TypeSet) -> bool| shapes.iter().filter(|s| f(&s.all)).count() >= 2;
        let mut allowed = TypeSet::all();
        if exclude {
            allowed.null = !twice(|t| t.null);
            allowed.boolean = !twice(|t| t.boolean);
            allowed.string = !twice(|t| t.string);
            allowed.object = !twice(|t| t.object);
            allowed.array = !twice(|t| t.array);
            allowed.number = !twice(|t| t.number);
            allowed.integer = allowed.number;
        }
        for i in 0..shapes.len() {
            for j in i + 1..shapes.len() {
                if !p.disjoint(&shapes[i], &shapes[j], allowed, 0) {
                    return Err((i, j));
                }
            }
        }
        Ok(OneOfPlan { allowed })
    }
}
