//! Arrays: `prefixItems`, `items` (the items after the prefix), `minItems`, `maxItems`, and
//! `uniqueItems` when it cannot matter (`false`, or at most one item).

use serde_json::{Map, Value};

use super::strings::count_keyword;
use super::{child, lit, opt, repeat, seq, Builder, JsonSchemaError};
use crate::grammar::Expr;

/// The longest `prefixItems` supported (the grammar nests one level per item).
const MAX_PREFIX: usize = 256;

impl Builder<'_> {
    /// The arrays `obj` accepts, or `None`.
    pub(crate) fn array(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let min = count_keyword(obj, "minItems", ptr)?.unwrap_or(0);
        let mut max = count_keyword(obj, "maxItems", ptr)?;
        match obj.get("uniqueItems") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) if max.is_some_and(|m| m <= 1) => {}
            Some(Value::Bool(true)) => self.unsupported(
                "uniqueItems",
                &child(ptr, "uniqueItems"),
                "`uniqueItems: true` has no exact grammar (unless maxItems <= 1)",
            )?,
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
            Some(s) => self.schema(s, &items_ptr)?,
        };
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
        let k = prefix.len() as u32;
        if items.is_none() {
            max = Some(max.map_or(k, |m| m.min(k)));
        }
        if max.is_some_and(|m| m < min) {
            return Ok(None);
        }
        let ws = self.ws();
        let body = self.tail(0, &prefix, items.as_ref(), min, max);
        Ok(Some(seq(vec![lit("["), ws, body, lit("]")])))
    }

    /// The items from index `j` on.
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
