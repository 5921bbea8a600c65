//! Objects: `properties`, `required`, `additionalProperties` (boolean or schema),
//! `minProperties` and `maxProperties` (up to 64).
//!
//! Declared properties come in the order of the schema's map, each at most once; required
//! ones must be present. Extra properties (allowed by `additionalProperties`, which defaults
//! to `true` unless [`super::JsonSchemaOptions::strict`]) may come anywhere between them;
//! their keys are any JSON strings, every escape included, whose *decoded* name is none
//! of the declared ones, so an extra key can never be a declared property in disguise
//! (`"f\u006fo"` is `foo`; see `not_in`). Declared names are matched in their canonical
//! spelling (`serde_json`'s) only.
//!
//! With [`super::JsonSchemaOptions::any_order`], declared properties may come in any order:
//! for a matcher that forbids repeated keys ([`Builder::unique_keys`]), in a grammar
//! linear in the members ([`Builder::any_order_unique`]); otherwise with a state per set
//! of keys written ([`Builder::any_order_members`], for its size limits).
//!
//! `patternProperties` that match every key, or one pattern beside `additionalProperties:
//! false`, are written directly; any other patterns go through a key automaton
//! ([`super::key_dfa::KeyDfa`]): the extra members are one alternative per set of patterns
//! some undeclared key matches exactly, with all their schemas (see
//! [`Builder::general_extra`]).

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use super::extra_members::{PatternPlan, LINE_TERMINATORS};
use super::strings::count_keyword;
use super::{child, choice, lit, seq, Builder, JsonSchemaError};
use crate::grammar::{Expr, RuleId};

/// Keys longer than this (in characters) make extra properties unsupported (the key
/// exclusion grammar nests one level per character).
const MAX_KEY_CHARS: usize = 200;

/// The largest `minProperties`/`maxProperties` supported (the grammar has one rule per
/// member position and count).
const MAX_COUNTED_PROPERTIES: u32 = 64;

/// The most declared members written in any order among themselves (see
/// [`Builder::any_order_members`]): `2^k` subsets each.
const MAX_ANY_ORDER_CHUNK: usize = 6;

/// The most states (chunks × subsets × counts) of one any-order object cut into chunks.
const MAX_ANY_ORDER_STATES: usize = 256;

/// The most states (subsets × counts) of one any-order object written as a single chunk
/// (every order accepted): 2^8 sets with a count of 0 or 1. Measured on MaskBench (byte
/// vocabulary): 512 gains 12 schemas over 6-member chunks with 11 compiles above 1 s
/// (9 before); 1,024 gains one more with 23; 4,096 gains 4 more with 142 and 5 refusals.
const MAX_EXACT_ANY_ORDER_STATES: usize = 512;

/// A state of the any-order object automaton.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum OrderState {
    /// In chunk `.0`, with the members `.1` (bits, relative to the chunk) written, `.2`
    /// members written so far (capped).
    In(usize, u32, usize),
    /// About to write the first member of chunk `.0` or a later one, `.1` written so far.
    Enter(usize, usize),
}

/// What a transition writes.
#[derive(Clone, Copy, Debug)]
enum Edge {
    /// The object ends.
    End,
    /// Declared member `.0`.
    Member(usize),
    /// An extra member.
    Extra,
    /// Nothing (go to the next chunk).
    Skip,
}

/// The any-order automaton of one object.
struct AnyOrder {
    chunks: Vec<std::ops::Range<usize>>,
    req_mask: Vec<u32>,
    free_from: Vec<bool>,
    cap: usize,
    min: usize,
    max: Option<usize>,
    has_extra: bool,
}

impl AnyOrder {
    fn bump(&self, c: usize) -> usize {
        (c + 1).min(self.cap)
    }

    fn may_add(&self, c: usize) -> bool {
        self.max.map_or(true, |m| c < m)
    }

    /// The transitions of `st` (`None`: no next state).
    fn edges(&self, st: OrderState) -> Vec<(Edge, Option<OrderState>)> {
        let mut out = Vec::new();
        match st {
            OrderState::In(g, s, c) => {
                let done = s & self.req_mask[g] == self.req_mask[g];
                if done && self.free_from[g + 1] && c >= self.min {
                    out.push((Edge::End, None));
                }
                if self.may_add(c) {
                    for j in self.chunks[g].clone() {
                        let bit = 1 << (j - self.chunks[g].start);
                        if s & bit == 0 {
                            out.push((
                                Edge::Member(j),
                                Some(OrderState::In(g, s | bit, self.bump(c))),
                            ));
                        }
                    }
                    if self.has_extra {
                        out.push((Edge::Extra, Some(OrderState::In(g, s, self.bump(c)))));
                    }
                }
                if done && g + 1 < self.chunks.len() {
                    out.push((Edge::Skip, Some(OrderState::Enter(g + 1, c))));
                }
            }
            OrderState::Enter(h, c) => {
                if self.may_add(c) {
                    for j in self.chunks[h].clone() {
                        let bit = 1 << (j - self.chunks[h].start);
                        out.push((Edge::Member(j), Some(OrderState::In(h, bit, self.bump(c)))));
                    }
                }
                if self.req_mask[h] == 0 && h + 1 < self.chunks.len() {
                    out.push((Edge::Skip, Some(OrderState::Enter(h + 1, c))));
                }
            }
        }
        out
    }

    /// Whether some object completes from `st` (every transition but an extra at the count
    /// cap moves strictly forward, so the recursion ends).
    fn live(&self, st: OrderState, memo: &mut HashMap<OrderState, bool>) -> bool {
        if let Some(&b) = memo.get(&st) {
            return b;
        }
        let mut ok = false;
        for (_, next) in self.edges(st) {
            ok |= match next {
                None => true,
                Some(nx) if nx == st => false,
                Some(nx) => self.live(nx, memo),
            };
            if ok {
                break;
            }
        }
        memo.insert(st, ok);
        ok
    }
}

impl Builder<'_> {
    /// The objects `obj` accepts, or `None`.
    pub(crate) fn object(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let min_props = count_keyword(obj, "minProperties", ptr)?.unwrap_or(0);
        let max_props = count_keyword(obj, "maxProperties", ptr)?;
        if min_props.max(max_props.unwrap_or(0)) > MAX_COUNTED_PROPERTIES {
            let k = if min_props > MAX_COUNTED_PROPERTIES {
                "minProperties"
            } else {
                "maxProperties"
            };
            return Err(JsonSchemaError::Unsupported {
                keyword: k.into(),
                pointer: child(ptr, k),
                reason: format!("bounds above {MAX_COUNTED_PROPERTIES} are not supported"),
            });
        }
        if max_props.is_some_and(|m| m < min_props) {
            return Ok(None);
        }
        let empty = Map::new();
        let props = match obj.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "properties".into(),
                    pointer: child(ptr, "properties"),
                    message: "must be an object".into(),
                })
            }
        };
        let mut required: Vec<String> = Vec::new();
        match obj.get("required") {
            None => {}
            Some(Value::Array(list)) => {
                for x in list {
                    match x {
                        Value::String(s) => {
                            if !required.contains(s) {
                                required.push(s.clone())
                            }
                        }
                        _ => {
                            return Err(JsonSchemaError::InvalidKeyword {
                                keyword: "required".into(),
                                pointer: child(ptr, "required"),
                                message: "must be an array of strings".into(),
                            })
                        }
                    }
                }
            }
            Some(_) => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "required".into(),
                    pointer: child(ptr, "required"),
                    message: "must be an array of strings".into(),
                })
            }
        }
        // The schema of extra properties (None: forbidden).
        let extra_schema = match obj.get("additionalProperties") {
            Some(s) => s.clone(),
            None => Value::Bool(!self.opts.strict),
        };
        let extra_ptr = child(ptr, "additionalProperties");
        let plan = self.pattern_plan(obj, props, &required, &extra_schema, ptr)?;
        let names_rule = self.property_names(obj, ptr)?;
        // What every undeclared key's value must satisfy: the pattern's schema when every
        // undeclared key matches it.
        let extra_value = match &plan {
            PatternPlan::None => self.schema(&extra_schema, &extra_ptr)?,
            // Built per set of patterns ([`Builder::general_extra`]).
            PatternPlan::General(_) => None,
            PatternPlan::All { schema, .. } | PatternPlan::Closed { schema, .. } => {
                let pp = child(ptr, "patternProperties");
                self.schema(schema, &pp)?
            }
        };

        // Declared members, in map order: (name, value grammar or None, required).
        let mut declared: Vec<(String, Option<Expr>, bool)> = Vec::new();
        let props_ptr = child(ptr, "properties");
        for (name, s) in props {
            let v = match (&plan, plan.schema_for(name)) {
                (PatternPlan::General(g), _) => {
                    let Some(mut parts) = g.schemas_for(name) else {
                        return self.refuse_undecided(name, ptr);
                    };
                    parts.insert(0, s.clone());
                    let sch = if parts.len() == 1 {
                        s.clone()
                    } else {
                        serde_json::json!({ "allOf": parts })
                    };
                    self.schema(&sch, &child(&props_ptr, name))?
                }
                // A declared key that the pattern matches: both schemas hold.
                (_, Some(p)) => self.schema(
                    &serde_json::json!({ "allOf": [s.clone(), p.clone()] }),
                    &child(&props_ptr, name),
                )?,
                (_, None) => self.schema(s, &child(&props_ptr, name))?,
            };
            // A name that `propertyNames` rejects can never appear.
            let v = v.filter(|_| names_rule.as_ref().map_or(true, |r| r.admits(name)));
            declared.push((name.clone(), v, required.contains(name)));
        }
        // Required names without a declared schema are governed by additionalProperties.
        let mut extra_required: BTreeMap<String, ()> = BTreeMap::new();
        for r in &required {
            if !props.contains_key(r) {
                extra_required.insert(r.clone(), ());
            }
        }
        for name in extra_required.keys() {
            // Only keys the pattern matches get its schema; the others get
            // `additionalProperties` (with `Closed`, forbidden).
            let v = match (&plan, plan.schema_for(name)) {
                (PatternPlan::General(g), _) => {
                    let Some(parts) = g.schemas_for(name) else {
                        return self.refuse_undecided(name, ptr);
                    };
                    match parts.len() {
                        0 => self.schema(&extra_schema, &extra_ptr)?,
                        1 => self.schema(&parts[0], &child(ptr, "patternProperties"))?,
                        _ => self.schema(
                            &serde_json::json!({ "allOf": parts }),
                            &child(ptr, "patternProperties"),
                        )?,
                    }
                }
                (PatternPlan::None, _) | (_, Some(_)) => extra_value.clone(),
                (_, None) => self.schema(&extra_schema, &extra_ptr)?,
            };
            let v = v.filter(|_| names_rule.as_ref().map_or(true, |r| r.admits(name)));
            declared.push((name.clone(), v, true));
        }
        // A required property that accepts no value: no object is accepted.
        if declared.iter().any(|(_, v, req)| *req && v.is_none()) {
            return Ok(None);
        }
        let names: Vec<String> = declared.iter().map(|(n, _, _)| n.clone()).collect();
        let mut member_names: Vec<String> = Vec::new();
        let members: Vec<(Expr, bool)> = declared
            .into_iter()
            .filter_map(|(name, v, req)| {
                v.map(|v| {
                    let m = self.member(&name, v);
                    let id = self.add_rule("obj_member", m);
                    // Errors in a member's rule are errors of its property's schema.
                    self.pointers[id.index()] = child(&props_ptr, &name);
                    member_names.push(name);
                    (Expr::Rule(id), req)
                })
            })
            .collect();
        // Undeclared keys are open-ended: whatever keys were written, a key being written can
        // still be completed as a new one (names are unbounded), so a grammar that offers a
        // declared key again leads nowhere only at the key's closing quote, which the
        // matcher's key check refuses, never into a dead end.
        // (Keys split by patterns, or restricted by `propertyNames`, may be finitely many;
        // a general plan's are open-ended when every set of patterns takes some value.)
        let mut extra_open = extra_value.is_some()
            && names_rule.is_none()
            && matches!(plan, PatternPlan::None | PatternPlan::All { .. });
        let extra = match (extra_value, &plan) {
            (_, PatternPlan::General(g)) => {
                if names_rule.is_some() {
                    self.unsupported(
                        "propertyNames",
                        &child(ptr, "propertyNames"),
                        "`propertyNames` beside `patternProperties` is not supported",
                    )?;
                }
                let (extra, every_key) = self.general_extra(g, &names, &extra_schema, ptr)?;
                // The extras are plain keys: a declared name's prefix can go on as one only
                // when the name is plain too.
                extra_open =
                    every_key && names_rule.is_none() && member_names.iter().all(|m| plain_name(m));
                extra
            }
            (None, _) => None,
            (Some(v), _) => {
                let key = if let Some(r) = &names_rule {
                    if !matches!(plan, PatternPlan::None) {
                        self.unsupported(
                            "propertyNames",
                            &child(ptr, "propertyNames"),
                            "`propertyNames` beside `patternProperties` is not supported",
                        )?;
                    }
                    if let Some(n) = names.iter().find(|n| r.admits(n)) {
                        return Err(JsonSchemaError::Unsupported {
                            keyword: "propertyNames".into(),
                            pointer: child(ptr, "propertyNames"),
                            reason: format!(
                                "extra keys beside the declared name {n:?}, which \
                                 `propertyNames` admits, would need a complement"
                            ),
                        });
                    }
                    // No declared name is admitted, so no admitted key is declared.
                    r.key.clone()
                } else if let PatternPlan::Closed { content, .. } = &plan {
                    seq(vec![lit("\""), content.clone(), lit("\"")])
                } else if let PatternPlan::All { nonempty, .. } = &plan {
                    let mut avoid = names.clone();
                    if *nonempty {
                        avoid.push(String::new());
                    }
                    self.key_not_in_except(&avoid, LINE_TERMINATORS)
                } else if names.is_empty() {
                    self.string_any()
                } else {
                    if let Some(n) = names.iter().find(|n| n.chars().count() > MAX_KEY_CHARS) {
                        return Err(JsonSchemaError::Unsupported {
                            keyword: "additionalProperties".into(),
                            pointer: extra_ptr,
                            reason: format!(
                                "extra properties beside a declared key of more than \
                                 {MAX_KEY_CHARS} characters ({} characters)",
                                n.chars().count()
                            ),
                        });
                    }
                    self.key_not_in(&names)
                };
                let ws = self.ws();
                let body = seq(vec![key, self.colon(), v, ws]);
                // A rule: it is referenced from every state.
                Some(Expr::Rule(self.add_rule("obj_extra", body)))
            }
        };
        if min_props > 1 && extra.is_some() && !(self.unique_keys && extra_open) {
            // Extra keys may repeat (`{"x":1,"x":2}` has one property), so counting written
            // members would over-count: only a bound of 1 is exact then. (Not so when the
            // matcher forbids repeated keys and extra names are open-ended: a new one can
            // always be written, so counting never leads into a dead end.)
            self.unsupported(
                "minProperties",
                &child(ptr, "minProperties"),
                "`minProperties` above 1 when extra properties are allowed is not supported",
            )?;
        }
        if self.opts.any_order && members.len() > 1 {
            // With `maxProperties`, a state may offer only required names (the room left is
            // theirs), and a written one's prefix would then lead nowhere.
            if self.unique_keys && extra_open && max_props.is_none() {
                return Ok(self.any_order_unique(&members, extra, min_props, max_props));
            }
            let n = members.len();
            let cap = min_props.max(max_props.unwrap_or(0)).max(1) as usize;
            // A closed object past the exact budget: the matcher narrows its keys to the
            // names left (a `maxProperties` of at least `n` bounds nothing here), and to
            // the prefix of its undeclared keys when they are the names with a prefix.
            let open = match (&extra, &plan) {
                (None, _) => Some(None),
                (
                    Some(_),
                    PatternPlan::Closed {
                        prefix: Some(p), ..
                    },
                ) if max_props.is_none() => Some(Some(p.clone())),
                _ => None,
            };
            if let (true, Some(open)) = (self.unique_keys, open) {
                if !exact_any_order(n, cap)
                    && min_props as usize <= n
                    && max_props.map_or(true, |m| m as usize >= n)
                    && member_names.iter().all(|m| plain_name(m))
                    && !self.opts.escaped_declared_keys
                {
                    return Ok(self.any_order_closed(
                        &members,
                        member_names,
                        extra,
                        open,
                        min_props,
                    ));
                }
            }
            return Ok(self.any_order_members(&members, extra, min_props, max_props));
        }
        let ws = self.ws();
        // States (i, c, k): members i.. still to come, c members written so far (capped at
        // `cap`; c == 0 means no comma before the next member), k == 0 when extra members
        // may come next, k == 1 right after a skipped optional member. Extras are written
        // before skips, never after, so every object has one parse (no ambiguity).
        let n = members.len();
        let cap = min_props.max(max_props.unwrap_or(0)).max(1) as usize;
        let bump = |c: usize| (c + 1).min(cap);
        let may_add = |c: usize| max_props.map_or(true, |m| c < m as usize);
        let mut live = vec![vec![[false; 2]; cap + 1]; n + 1];
        for i in (0..=n).rev() {
            for c in (0..=cap).rev() {
                for k in [1, 0] {
                    let mut ok = i == n && c >= min_props as usize;
                    if i < n {
                        ok |= may_add(c) && live[i + 1][bump(c)][0];
                        ok |= !members[i].1 && live[i + 1][c][1];
                    }
                    if k == 0 && extra.is_some() && may_add(c) && bump(c) != c {
                        ok |= live[i][bump(c)][0];
                    }
                    live[i][c][k] = ok;
                }
            }
        }
        if !live[0][0][0] {
            return Ok(None);
        }
        let mut ids = vec![vec![[None; 2]; cap + 1]; n + 1];
        for (i, row) in ids.iter_mut().enumerate() {
            for (c, pair) in row.iter_mut().enumerate() {
                for (k, id) in pair.iter_mut().enumerate() {
                    if live[i][c][k] {
                        *id = Some(self.add_rule("obj", Expr::Empty));
                    }
                }
            }
        }
        for i in 0..=n {
            for c in 0..=cap {
                for k in 0..2 {
                    let Some(id) = ids[i][c][k] else {
                        continue;
                    };
                    let sep = if c == 0 { Expr::Empty } else { self.comma() };
                    let mut alts: Vec<Option<Expr>> = Vec::new();
                    if i == n && c >= min_props as usize {
                        alts.push(Some(Expr::Empty));
                    }
                    if i < n {
                        let (m, req) = &members[i];
                        if may_add(c) {
                            if let Some(next) = ids[i + 1][bump(c)][0] {
                                alts.push(Some(seq(vec![
                                    sep.clone(),
                                    m.clone(),
                                    Expr::Rule(next),
                                ])));
                            }
                        }
                        if !req {
                            if let Some(next) = ids[i + 1][c][1] {
                                alts.push(Some(Expr::Rule(next)));
                            }
                        }
                    }
                    if let (Some(e), 0) = (&extra, k) {
                        if may_add(c) {
                            if let Some(next) = ids[i][bump(c)][0] {
                                alts.push(Some(seq(vec![sep, e.clone(), Expr::Rule(next)])));
                            }
                        }
                    }
                    self.rules[id.index()].body = choice(alts).unwrap_or_else(super::never);
                }
            }
        }
        let Some(start) = ids[0][0][0] else {
            return Ok(None);
        };
        Ok(Some(seq(vec![lit("{"), ws, Expr::Rule(start), lit("}")])))
    }

    /// The members of an object in any order ([`super::JsonSchemaOptions::any_order`]):
    /// `{`, members, `}`, or `None` when no object is accepted.
    ///
    /// A state is (chunk `g`, members `S` of chunk `g` written, count `c` capped), so each
    /// member appears at most once and a chunk is left only once its required members are
    /// written. When the `2^n` sets of all `n` members (times counts) fit
    /// [`MAX_EXACT_ANY_ORDER_STATES`], there is one chunk and every order is accepted.
    /// Otherwise the declared members are cut, in map order, into chunks of at most
    /// [`MAX_ANY_ORDER_CHUNK`] members (fewer when the states would exceed
    /// [`MAX_ANY_ORDER_STATES`]): members of one chunk come in any order, chunks in order,
    /// a subset of the orders (never a duplicate, never a missing required key). Every key
    /// decides the next state, so each object has one parse.
    fn any_order_members(
        &mut self,
        members: &[(Expr, bool)],
        extra: Option<Expr>,
        min_props: u32,
        max_props: Option<u32>,
    ) -> Option<Expr> {
        let n = members.len();
        let cap = min_props.max(max_props.unwrap_or(0)).max(1) as usize;
        // One chunk (every order) when its sets fit the exact budget; otherwise the largest
        // chunk size that keeps the state count in the chunked budget.
        let exact = exact_any_order(n, cap);
        let mut size = if exact { n } else { n.min(MAX_ANY_ORDER_CHUNK) };
        while !exact
            && size > 1
            && n.div_ceil(size) * (1usize << size) * (cap + 1) > MAX_ANY_ORDER_STATES
        {
            size -= 1;
        }
        // Past a few members, each member is one rule, so that the states share it.
        let shared: Vec<(Expr, bool)>;
        let members = if n > MAX_ANY_ORDER_CHUNK {
            shared = members
                .iter()
                .map(|(e, req)| (Expr::Rule(self.add_rule("obj_member", e.clone())), *req))
                .collect();
            &shared[..]
        } else {
            members
        };
        let chunks: Vec<std::ops::Range<usize>> =
            (0..n).step_by(size).map(|s| s..(s + size).min(n)).collect();
        let req_mask: Vec<u32> = chunks
            .iter()
            .map(|r| {
                r.clone()
                    .filter(|&j| members[j].1)
                    .fold(0u32, |m, j| m | 1 << (j - r.start))
            })
            .collect();
        // Whether chunks g.. have no required member.
        let mut free_from = vec![true; chunks.len() + 1];
        for g in (0..chunks.len()).rev() {
            free_from[g] = free_from[g + 1] && req_mask[g] == 0;
        }
        let ctx = AnyOrder {
            chunks,
            req_mask,
            free_from,
            cap,
            min: min_props as usize,
            max: max_props.map(|m| m as usize),
            has_extra: extra.is_some(),
        };
        let mut live: HashMap<OrderState, bool> = HashMap::new();
        let start = OrderState::In(0, 0, 0);
        if !ctx.live(start, &mut live) {
            return None;
        }
        let mut ids: HashMap<OrderState, RuleId> = HashMap::new();
        let mut todo = vec![start];
        ids.insert(start, self.add_rule("obj_any", Expr::Empty));
        while let Some(st) = todo.pop() {
            let mut alts: Vec<Option<Expr>> = Vec::new();
            let c = match st {
                OrderState::In(_, _, c) | OrderState::Enter(_, c) => c,
            };
            let sep = if c == 0 { Expr::Empty } else { self.comma() };
            for (edge, next) in ctx.edges(st) {
                if next.is_some_and(|nx| !ctx.live(nx, &mut live)) {
                    continue;
                }
                let next_rule = next.map(|nx| match ids.get(&nx) {
                    Some(&id) => id,
                    None => {
                        let id = self.add_rule("obj_any", Expr::Empty);
                        ids.insert(nx, id);
                        todo.push(nx);
                        id
                    }
                });
                let e = match edge {
                    Edge::End => Expr::Empty,
                    Edge::Member(j) => seq(vec![
                        sep.clone(),
                        members[j].0.clone(),
                        Expr::Rule(next_rule?),
                    ]),
                    Edge::Extra => seq(vec![sep.clone(), extra.clone()?, Expr::Rule(next_rule?)]),
                    Edge::Skip => Expr::Rule(next_rule?),
                };
                alts.push(Some(e));
            }
            let id = ids[&st];
            self.rules[id.index()].body = choice(alts).unwrap_or_else(super::never);
        }
        let ws = self.ws();
        Some(seq(vec![lit("{"), ws, Expr::Rule(ids[&start]), lit("}")]))
    }

    /// The members of an object in any order, for a matcher that forbids repeated keys
    /// ([`Builder::unique_keys`]), beside open-ended extra keys: `{`, members, `}`, or
    /// `None` when no object is accepted.
    ///
    /// Every order of every subset is accepted, in a grammar linear in the members: a
    /// state is (`c` distinct required members written, `p` members written, capped for
    /// `minProperties`/`maxProperties`). Any required member moves `c` on, any optional or
    /// extra member keeps it; the object may end once `c` is the number of required
    /// members. The grammar alone would let a member come twice; the matcher's key check
    /// does not, so `c` counts distinct names. Members and extras have disjoint keys, so
    /// each object has one parse. Only used beside open-ended extra keys: then a key that
    /// starts like a declared one already written can always go on as a new extra key, so
    /// the token bitmask never leads into a dead end (in a closed object, the grammar would
    /// offer `,` after the last free key, and nothing after it).
    fn any_order_unique(
        &mut self,
        members: &[(Expr, bool)],
        extra: Option<Expr>,
        min_props: u32,
        max_props: Option<u32>,
    ) -> Option<Expr> {
        let required: Vec<Option<Expr>> = members
            .iter()
            .filter(|m| m.1)
            .map(|m| Some(m.0.clone()))
            .collect();
        let r = required.len();
        let required = choice(required).map(|e| Expr::Rule(self.add_rule("obj_required", e)));
        let optional: Vec<Option<Expr>> = members
            .iter()
            .filter(|m| !m.1)
            .map(|m| Some(m.0.clone()))
            .chain(std::iter::once(extra))
            .collect();
        let optional = choice(optional).map(|e| Expr::Rule(self.add_rule("obj_optional", e)));
        let cap = min_props.max(max_props.unwrap_or(0)).max(1) as usize;
        let min = min_props as usize;
        let bump = |p: usize| (p + 1).min(cap);
        let may_add = |p: usize| max_props.map_or(true, |m| p < m as usize);
        // live[c][p]: the object can still be completed from state (c, p).
        let mut live = vec![vec![false; cap + 1]; r + 1];
        for c in (0..=r).rev() {
            for p in (0..=cap).rev() {
                let mut ok = c == r && p >= min;
                if may_add(p) && bump(p) != p {
                    ok |= c < r && live[c + 1][bump(p)];
                    ok |= optional.is_some() && live[c][bump(p)];
                } else if may_add(p) {
                    ok |= c < r && live[c + 1][p];
                }
                live[c][p] = ok;
            }
        }
        if !live[0][0] {
            return None;
        }
        let ids: Vec<Vec<Option<RuleId>>> = (0..=r)
            .map(|c| {
                (0..=cap)
                    .map(|p| live[c][p].then(|| self.add_rule("obj_any", Expr::Empty)))
                    .collect()
            })
            .collect();
        for c in 0..=r {
            for p in 0..=cap {
                let Some(id) = ids[c][p] else {
                    continue;
                };
                let sep = if p == 0 { Expr::Empty } else { self.comma() };
                let mut alts: Vec<Option<Expr>> = Vec::new();
                if c == r && p >= min {
                    alts.push(Some(Expr::Empty));
                }
                if may_add(p) {
                    let next = bump(p);
                    if let (Some(req), true) = (&required, c < r) {
                        if let Some(to) = ids[c + 1][next] {
                            alts.push(Some(seq(vec![sep.clone(), req.clone(), Expr::Rule(to)])));
                        }
                    }
                    if let Some(opt) = &optional {
                        if let Some(to) = ids[c][next] {
                            alts.push(Some(seq(vec![sep, opt.clone(), Expr::Rule(to)])));
                        }
                    }
                }
                self.rules[id.index()].body = choice(alts).unwrap_or_else(super::never);
            }
        }
        let ws = self.ws();
        let start = ids[0][0]?;
        Some(seq(vec![lit("{"), ws, Expr::Rule(start), lit("}")]))
    }

    /// The members of a closed object (no extra keys) in any order, for a matcher that
    /// forbids repeated keys and narrows this object's keys to the names not yet written
    /// (`matcher::keys`): `{`, members, `}`, in a kept rule recorded in
    /// [`Builder::closed_objects`] with the declared names, or `None` when no object is
    /// accepted.
    ///
    /// The grammar is [`Builder::any_order_unique`]'s without extras: every declared name
    /// at every key, a state per number of distinct required names written. The node
    /// masks cannot know which names an object has written (they are context-free), so
    /// the matcher applies the rest at run time: a key must start a name not yet written,
    /// and a `,` needs a name left. With no `maxProperties` below `n` and a
    /// `minProperties` of at most `n`, the names the grammar offers at a key are exactly
    /// the names left, so every order of every valid subset is accepted and no state is a
    /// dead end. Names that need an escape are not narrowed (the caller falls back to
    /// [`Builder::any_order_members`]).
    ///
    /// With `open`, `extra` is the undeclared members, whose keys are exactly the names
    /// that start with `open` (none of them declared): the matcher admits every key that
    /// can still start with it, and a `,` after every name (an undeclared key can always
    /// follow), so there is still no dead end. `min_props` is at most 1 then (the caller
    /// refuses more beside extras that may be finitely many).
    fn any_order_closed(
        &mut self,
        members: &[(Expr, bool)],
        mut names: Vec<String>,
        extra: Option<Expr>,
        open: Option<String>,
        min_props: u32,
    ) -> Option<Expr> {
        let body = self.any_order_unique(members, extra, min_props, None)?;
        let id = self.add_rule("obj_closed", body);
        if let Some(p) = open {
            names.push(format!("{}{p}", crate::grammar::OPEN_PREFIX_MARK));
        }
        self.closed_objects.push((id, names));
        Some(Expr::Rule(id))
    }

    /// `"name" ws ":" ws value ws` (the key separator of the options for `:`); the name in
    /// its canonical spelling, or in every spelling under
    /// [`JsonSchemaOptions::escaped_declared_keys`](super::JsonSchemaOptions::escaped_declared_keys).
    fn member(&mut self, name: &str, value: Expr) -> Expr {
        let key = if self.opts.escaped_declared_keys {
            let mut parts = vec![lit("\"")];
            for c in name.chars() {
                let cp = c as u32;
                parts.extend(super::extra_keys::char_spellings(&[(cp, cp)]));
            }
            parts.push(lit("\""));
            seq(parts)
        } else {
            lit(&Value::String(name.to_string()).to_string())
        };
        seq(vec![key, self.colon(), value, self.ws()])
    }
}

/// Whether the `2^n` sets of `n` any-order members times `cap + 1` counts fit
/// [`MAX_EXACT_ANY_ORDER_STATES`] (one automaton state per set: every order accepted).
fn exact_any_order(n: usize, cap: usize) -> bool {
    n < 31 && (1usize << n) * (cap + 1) <= MAX_EXACT_ANY_ORDER_STATES
}

/// The literal text of a pattern `^text` whose text has no regex syntax (ASCII letters,
/// digits, `-`, `_`): the keys it matches are the names that start with the text.
pub(super) fn literal_prefix(pattern: &str) -> Option<String> {
    let text = pattern.strip_prefix('^')?;
    (!text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    .then(|| text.to_string())
}

/// A name written as its own bytes in a JSON key (no character needs an escape).
fn plain_name(name: &str) -> bool {
    !name.chars().any(|c| c < ' ' || c == '"' || c == '\\')
}
