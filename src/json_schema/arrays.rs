//! Arrays: `prefixItems`, `items` (the items after the prefix), `minItems`, `maxItems`,
//! `contains` with `minContains`/`maxContains` (see [`Builder::contains`]), and
//! `uniqueItems` when it cannot matter (`false`, or at most one item), and exactly for
//! items that can only be `null`, `true` or `false`: at most one of each (see
//! [`Builder::unique_kinds`]); for other items it is refused (an error naming it).

use serde_json::{Map, Value};

use super::strings::count_keyword;
use super::{child, choice, lit, opt, repeat, seq, Builder, JsonSchemaError};
use crate::grammar::Expr;

/// The longest `prefixItems` supported (the grammar nests one level per item).
const MAX_PREFIX: usize = 256;

/// The largest `minContains`/`maxContains` supported (one rule per count).
const MAX_CONTAINS: u32 = 256;

impl Builder<'_> {
    /// The arrays `obj` accepts, or `None`.
    pub(crate) fn array(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let min = count_keyword(obj, "minItems", ptr)?.unwrap_or(0);
        let mut max = count_keyword(obj, "maxItems", ptr)?;
        let mut unique = false;
        match obj.get("uniqueItems") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) if max.is_some_and(|m| m <= 1) => {}
            Some(Value::Bool(true)) if obj.contains_key("contains") => self.unsupported(
                "uniqueItems",
                &child(ptr, "uniqueItems"),
                "`uniqueItems: true` beside `contains` is not supported",
            )?,
            Some(Value::Bool(true)) => unique = true,
            Some(v) => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "uniqueItems".into(),
                    pointer: child(ptr, "uniqueItems"),
                    message: format!("must be a boolean, not {v}"),
                })
            }
        }
        let prefix_schemas: &[Value] = match obj.get("prefixItems") {
            None => &[],
            Some(Value::Array(v)) => v,
            Some(_) => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "prefixItems".into(),
                    pointer: child(ptr, "prefixItems"),
                    message: "must be an array of schemas".into(),
                })
            }
        };
        if prefix_schemas.len() > MAX_PREFIX {
            return Err(JsonSchemaError::Unsupported {
                keyword: "prefixItems".into(),
                pointer: child(ptr, "prefixItems"),
                reason: format!("more than {MAX_PREFIX} prefix items"),
            });
        }
        let items_ptr = child(ptr, "items");
        let items = match obj.get("items") {
            None => Some(self.any_value()),
            Some(Value::Array(_)) => {
                return Err(JsonSchemaError::Unsupported {
                    keyword: "items".into(),
                    pointer: items_ptr,
                    reason: "`items` as an array (draft 4-2019) is not supported; use prefixItems"
                        .into(),
                })
            }
            Some(s) => {
                let counted = max.is_some() || min > 1;
                self.numbers_written_if(counted, |b| b.schema(s, &items_ptr))?
            }
        };
        if unique {
            if let Some(e) = self.unique_kinds(obj, prefix_schemas, min, max, ptr)? {
                return Ok(e);
            }
            // Lenient mode: the keyword was refused and is ignored.
        }
        let pp = child(ptr, "prefixItems");
        let mut prefix = Vec::new();
        for (i, s) in prefix_schemas.iter().enumerate() {
            match self.schema(s, &child(&pp, &i.to_string()))? {
                Some(e) => prefix.push(e),
                None => {
                    // No array may have an item at index i.
                    max = Some(max.map_or(i as u32, |m| m.min(i as u32)));
                    break;
                }
            }
        }
        if let Some(c) = obj.get("contains") {
            if let Some(e) = self.contains(obj, c, prefix_schemas, min, max, ptr)? {
                return Ok(e);
            }
        }
        let k = prefix.len() as u32;
        if items.is_none() {
            max = Some(max.map_or(k, |m| m.min(k)));
        }
        if max.is_some_and(|m| m < min) {
            return Ok(None);
        }
        if items.is_some() {
            // The items after the prefix repeat up to `count - max(k, 1)` times (the
            // first item has no comma before it).
            let reps = |n: u32| n.saturating_sub(k.max(1));
            self.check_count("minItems", reps(min), min, ptr)?;
            if let Some(m) = max {
                self.check_count("maxItems", reps(m), m, ptr)?;
            }
        }
        let ws = self.ws();
        let body = self.tail(0, &prefix, items.as_ref(), min, max);
        Ok(Some(seq(vec![lit("["), ws, body, lit("]")])))
    }

    /// `contains` with `minContains`/`maxContains` (2020-12 §10.3.1.3, §6.4.4-5): `None`
    /// when they assert nothing (`minContains: 0` without `maxContains`), else the arrays
    /// (`Some(None)`: none).
    ///
    /// Without `maxContains`, at least `k = minContains` items must match `items ∧
    /// contains` and the rest only `items`: `(X ,)* Y ((, X)* , Y){k-1} (, X)*`. With
    /// `maxContains`, every item matches exactly one of `items ∧ contains` and `items ∧
    /// ¬contains` (the negation from [`Builder::negate`]), and the grammar counts the
    /// first kind up to `maxContains` (at most [`MAX_CONTAINS`]). Refused beside
    /// `prefixItems`, `maxItems`, or a `minItems` above `minContains`.
    fn contains(
        &mut self,
        obj: &Map<String, Value>,
        c: &Value,
        prefix_schemas: &[Value],
        min_items: u32,
        max_items: Option<u32>,
        ptr: &str,
    ) -> Result<Option<Option<Expr>>, JsonSchemaError> {
        let cptr = child(ptr, "contains");
        let k = count_keyword(obj, "minContains", ptr)?.unwrap_or(1);
        let m = count_keyword(obj, "maxContains", ptr)?;
        if k == 0 && m.is_none() {
            return Ok(None);
        }
        if m.is_some_and(|m| m < k) {
            return Ok(Some(None));
        }
        if !prefix_schemas.is_empty() || max_items.is_some() || min_items > k {
            self.unsupported(
                "contains",
                &cptr,
                "`contains` beside `prefixItems`, `maxItems`, or a `minItems` above \
                 `minContains` is not supported",
            )?;
            return Ok(None);
        }
        if k > MAX_CONTAINS || m.is_some_and(|m| m > MAX_CONTAINS) {
            let kw = if k > MAX_CONTAINS {
                "minContains"
            } else {
                "maxContains"
            };
            self.unsupported(
                kw,
                &child(ptr, kw),
                &format!("bounds above {MAX_CONTAINS} are not supported"),
            )?;
            return Ok(None);
        }
        let items = obj.get("items").cloned().unwrap_or(Value::Bool(true));
        let both = serde_json::json!({ "allOf": [items.clone(), c.clone()] });
        // Without `maxContains`, the items after the first match repeat `k - 1` times.
        let counted = m.is_none() && k > 1;
        let yes = self.numbers_written_if(counted, |b| b.schema(&both, &cptr))?;
        let ws = self.ws();
        let comma = self.comma();
        let Some(max_c) = m else {
            let Some(yes) = yes else {
                return Ok(Some(None));
            };
            let any = self.numbers_written_if(counted, |b| b.schema(&items, &child(ptr, "items")));
            let Some(any) = any? else {
                return Ok(Some(None));
            };
            let ex = seq(vec![any, ws.clone()]);
            let ey = seq(vec![yes, ws.clone()]);
            let between = seq(vec![
                repeat(seq(vec![comma.clone(), ex.clone()]), 0, None),
                comma.clone(),
                ey.clone(),
            ]);
            let body = seq(vec![
                repeat(seq(vec![ex.clone(), comma.clone()]), 0, None),
                ey,
                repeat(between, k - 1, Some(k - 1)),
                repeat(seq(vec![comma, ex]), 0, None),
            ]);
            return Ok(Some(Some(seq(vec![lit("["), ws, body, lit("]")]))));
        };
        let mptr = child(ptr, "maxContains");
        let Some(neg) = self.negate(c, &cptr, 0)? else {
            self.unsupported(
                "maxContains",
                &mptr,
                "the negation of `contains` has no exact grammar",
            )?;
            return Ok(None);
        };
        let not_c = super::conditionals::union(neg);
        let no = self.schema(&serde_json::json!({ "allOf": [items, not_c] }), &cptr)?;
        // after[y]: after at least one item, y of them matching `contains`.
        let after: Vec<_> = (0..=max_c)
            .map(|_| self.add_rule("contains", Expr::Empty))
            .collect();
        let item = |e: &Option<Expr>| e.as_ref().map(|e| seq(vec![e.clone(), ws.clone()]));
        let (ey, en) = (item(&yes), item(&no));
        for y in 0..=max_c {
            let mut alts = Vec::new();
            if y >= k {
                alts.push(Some(Expr::Empty));
            }
            if let Some(en) = &en {
                alts.push(Some(seq(vec![
                    comma.clone(),
                    en.clone(),
                    Expr::Rule(after[y as usize]),
                ])));
            }
            if let (Some(ey), true) = (&ey, y < max_c) {
                alts.push(Some(seq(vec![
                    comma.clone(),
                    ey.clone(),
                    Expr::Rule(after[y as usize + 1]),
                ])));
            }
            self.rules[after[y as usize].index()].body = choice(alts).unwrap_or_else(super::never);
        }
        let mut start = Vec::new();
        if k == 0 {
            start.push(Some(Expr::Empty));
        }
        if let Some(en) = en {
            start.push(Some(seq(vec![en, Expr::Rule(after[0])])));
        }
        if let (Some(ey), true) = (ey, max_c > 0) {
            start.push(Some(seq(vec![ey, Expr::Rule(after[1])])));
        }
        Ok(Some(
            choice(start).map(|b| seq(vec![lit("["), ws, b, lit("]")])),
        ))
    }

    /// The items from index `j` on.
    /// `uniqueItems: true` (with more than one item possible) for items that can only be
    /// `null`, `true` or `false`: arrays whose items are pairwise different values, which
    /// for these is pairwise different kinds. Each item also satisfies its `prefixItems`
    /// or `items` schema. The state is the set of kinds written (its size is the item
    /// count). Refused (`Ok(None)` in lenient mode: the keyword is ignored) when an item
    /// may be a number, string, object or array (uniqueness of those is not a grammar this
    /// compiler builds), or when no array of at least `minItems` items fits.
    fn unique_kinds(
        &mut self,
        obj: &Map<String, Value>,
        prefix_schemas: &[Value],
        min: u32,
        max: Option<u32>,
        ptr: &str,
    ) -> Result<Option<Option<Expr>>, JsonSchemaError> {
        const KINDS: usize = 7;
        let kind_schema = |k: usize| match k {
            0 => serde_json::json!({"type": "null"}),
            1 => serde_json::json!({"const": true}),
            2 => serde_json::json!({"const": false}),
            3 => serde_json::json!({"type": "number"}),
            4 => serde_json::json!({"type": "string"}),
            5 => serde_json::json!({"type": "object"}),
            _ => serde_json::json!({"type": "array"}),
        };
        let items_schema = obj.get("items").cloned().unwrap_or(Value::Bool(true));
        // rows[p][k]: prefix item p (of the first seven), then (last row) every item after
        // the prefix, of kind k.
        let prefix_len = prefix_schemas.len();
        let mut rows: Vec<Vec<Option<Expr>>> = Vec::new();
        let pp = child(ptr, "prefixItems");
        let sources: Vec<(Value, String)> = prefix_schemas
            .iter()
            .take(KINDS)
            .enumerate()
            .map(|(p, s)| (s.clone(), child(&pp, &p.to_string())))
            .chain(std::iter::once((items_schema, child(ptr, "items"))))
            .collect();
        for (s, sptr) in sources {
            let mut row = Vec::new();
            for k in 0..KINDS {
                let both = serde_json::json!({"allOf": [s.clone(), kind_schema(k)]});
                let e = self.schema(&both, &sptr)?;
                row.push(e.map(|e| Expr::Rule(self.add_rule("unique_item", e))));
            }
            rows.push(row);
        }
        // Exact only when every item can only be null, true or false: then items of
        // different kinds are exactly items of different values. Items that may be numbers,
        // strings, objects or arrays would be cut to one of each, a silent narrowing.
        if rows.iter().any(|r| r[3..].iter().any(Option::is_some)) {
            self.unsupported(
                "uniqueItems",
                &child(ptr, "uniqueItems"),
                "`uniqueItems: true` is enforced only for items that can only be null, true \
                 or false (a finite set of values a grammar can keep apart); these items \
                 may be numbers, strings, objects or arrays",
            )?;
            return Ok(None);
        }
        let item = |n: usize, k: usize| -> Option<Expr> {
            if n < prefix_len {
                rows.get(n).filter(|_| n < KINDS)?[k].clone()
            } else {
                rows.last()?[k].clone()
            }
        };
        let may_add = |n: usize| max.map_or(true, |m| (n as u32) < m);
        // Liveness, from the fullest sets down.
        let full = 1usize << KINDS;
        let mut live = vec![false; full];
        let mut masks: Vec<usize> = (0..full).collect();
        masks.sort_by_key(|m| std::cmp::Reverse(m.count_ones()));
        for &m in &masks {
            let n = m.count_ones() as usize;
            let mut ok = n as u32 >= min;
            if may_add(n) {
                for k in 0..KINDS {
                    if m & (1 << k) == 0 && live[m | 1 << k] && item(n, k).is_some() {
                        ok = true;
                    }
                }
            }
            live[m] = ok;
        }
        if !live[0] {
            self.unsupported(
                "uniqueItems",
                &child(ptr, "uniqueItems"),
                "`uniqueItems: true` is enforced for items of pairwise different kinds \
                 (at most one null, true, false, number, string, object, array), and no \
                 such array satisfies the other keywords",
            )?;
            return Ok(None);
        }
        let ids: Vec<Option<crate::grammar::RuleId>> = (0..full)
            .map(|m| live[m].then(|| self.add_rule("unique_arr", Expr::Empty)))
            .collect();
        let ws = self.ws();
        for m in 0..full {
            let Some(id) = ids[m] else { continue };
            let n = m.count_ones() as usize;
            let sep = if n == 0 { Expr::Empty } else { self.comma() };
            let mut alts = Vec::new();
            if n as u32 >= min {
                alts.push(Some(lit("]")));
            }
            if may_add(n) {
                for k in 0..KINDS {
                    let next = m | 1 << k;
                    if m & (1 << k) != 0 || !live[next] {
                        continue;
                    }
                    if let (Some(e), Some(nid)) = (item(n, k), ids[next]) {
                        alts.push(Some(seq(vec![sep.clone(), e, ws.clone(), Expr::Rule(nid)])));
                    }
                }
            }
            self.rules[id.index()].body = choice(alts).unwrap_or_else(super::never);
        }
        let start = ids[0].map(Expr::Rule);
        Ok(Some(start.map(|s| seq(vec![lit("["), ws, s]))))
    }

    fn tail(
        &mut self,
        j: u32,
        prefix: &[Expr],
        items: Option<&Expr>,
        min: u32,
        max: Option<u32>,
    ) -> Expr {
        let ws = self.ws();
        let sep = if j == 0 { Expr::Empty } else { self.comma() };
        if max.is_some_and(|m| j >= m) {
            return Expr::Empty;
        }
        if (j as usize) < prefix.len() {
            let rest = self.tail(j + 1, prefix, items, min, max);
            let this = seq(vec![sep, prefix[j as usize].clone(), ws, rest]);
            return if j >= min {
                Expr::Choice(vec![Expr::Empty, this])
            } else {
                this
            };
        }
        let Some(items) = items else {
            return Expr::Empty;
        };
        let cmin = min.saturating_sub(j);
        let cmax = max.map(|m| m - j);
        let element = seq(vec![items.clone(), ws]);
        if j == 0 {
            // No comma before the first.
            let rest = repeat(
                seq(vec![self.comma(), element.clone()]),
                cmin.saturating_sub(1),
                cmax.map(|m| m - 1),
            );
            let all = seq(vec![element, rest]);
            if cmin == 0 {
                opt(all)
            } else {
                all
            }
        } else {
            repeat(seq(vec![sep, element]), cmin, cmax)
        }
    }
}
