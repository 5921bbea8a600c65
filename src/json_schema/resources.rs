//! Schema resources and base URIs: `$id` (and draft 4's `id`), `$anchor`,
//! `$dynamicAnchor` (as a plain anchor), and other documents given in
//! [`JsonSchemaOptions::documents`](super::JsonSchemaOptions::documents).
//!
//! Every subschema has a canonical location: a JSON pointer into the document that holds
//! it (`#/...` in the root document, `<uri>#/...` in another one). The index built here maps
//! each absolute URI (a document, or a subschema with an `$id`) and each anchor to such a
//! location, and each location to its base URI, so that `$ref` resolves by RFC 3986 against
//! the base in force where it is written. Nothing is fetched: a document that is not given
//! is an error naming the reference.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use super::JsonSchemaError;

/// The base URI of a root document without `$id`: references relative to it resolve inside
/// it, and nothing else is named by it.
pub(crate) const DEFAULT_BASE: &str = "tokensieve:///schema.json";

/// Keywords whose value is one subschema.
const ONE: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "items",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas.
const MANY: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value is a map of subschemas.
const MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];

/// Checks the identifiers and containers of the document `root` (its subschemas, not the
/// values of `const`/`enum` or other documents) against its draft (its `$schema`: drafts
/// 3-7, 2019-09, else 2020-12):
/// * `definitions` (and, from 2019-09, `$defs`) must be an object of schemas;
/// * from 2019-09, `$id` must be a string without a non-empty fragment (core §8.2.1;
///   drafts 6-7 read `"$id": "#name"` as a plain-name anchor, which stays allowed), and
///   `$anchor`/`$dynamicAnchor` must be a plain name: `^[A-Za-z_][-A-Za-z0-9._]*$` in
///   2020-12 (core §8.2.2), `^[A-Za-z][-A-Za-z0-9.:_]*$` in 2019-09 (where
///   `$dynamicAnchor` is no keyword).
///
/// # Errors
/// [`JsonSchemaError::InvalidKeyword`] naming the keyword and its pointer, for the first
/// invalid one in document order.
pub(crate) fn check_identifiers(root: &Value) -> Result<(), JsonSchemaError> {
    let draft = root.get("$schema").and_then(Value::as_str).unwrap_or("");
    let before_2019 = ["draft-03", "draft-04", "draft-06", "draft-07"]
        .iter()
        .any(|d| draft.contains(d));
    let is_2019 = draft.contains("2019-09");
    let invalid = |keyword: &str, loc: &str, message: String| JsonSchemaError::InvalidKeyword {
        keyword: keyword.into(),
        pointer: child(loc, keyword),
        message,
    };
    let plain_name = |a: &str| {
        let mut cs = a.chars();
        let first = cs.next();
        if is_2019 {
            first.is_some_and(|c| c.is_ascii_alphabetic())
                && cs.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':' | '_'))
        } else {
            first.is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && cs.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        }
    };
    // (schema, location), without recursion (the depth is bounded before, but a stack of
    // frames costs nothing).
    let mut stack = vec![(root, "#".to_string())];
    while let Some((node, loc)) = stack.pop() {
        let Value::Object(o) = node else { continue };
        for k in ["definitions", "$defs"] {
            if k == "$defs" && before_2019 {
                continue;
            }
            let Some(v) = o.get(k) else { continue };
            let Value::Object(m) = v else {
                return Err(invalid(
                    k,
                    &loc,
                    format!("must be an object of schemas by name, not {v}"),
                ));
            };
            if let Some((name, s)) = m.iter().find(|(_, s)| !(s.is_object() || s.is_boolean())) {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: k.into(),
                    pointer: child(&child(&loc, k), name),
                    message: format!(
                        "entry {name:?} must be a schema (an object or a boolean), not {s}"
                    ),
                });
            }
        }
        if !before_2019 {
            if let Some(id) = o.get("$id") {
                let Value::String(id) = id else {
                    return Err(invalid(
                        "$id",
                        &loc,
                        format!("must be a string (a URI reference), not {id}"),
                    ));
                };
                if id.split_once('#').is_some_and(|(_, f)| !f.is_empty()) {
                    return Err(invalid(
                        "$id",
                        &loc,
                        format!(
                            "{id:?} has a fragment, which an `$id` must not have from draft \
                             2019-09 on (2020-12 core §8.2.1); name the place with `$anchor` \
                             (and refer to it as \"#name\") instead"
                        ),
                    ));
                }
            }
            for k in ["$anchor", "$dynamicAnchor"] {
                if k == "$dynamicAnchor" && is_2019 {
                    continue;
                }
                let Some(a) = o.get(k) else { continue };
                if !a.as_str().is_some_and(plain_name) {
                    let syntax = if is_2019 {
                        "^[A-Za-z][-A-Za-z0-9.:_]*$ (draft 2019-09 core §8.2.3)"
                    } else {
                        "^[A-Za-z_][-A-Za-z0-9._]*$ (draft 2020-12 core §8.2.2)"
                    };
                    return Err(invalid(
                        k,
                        &loc,
                        format!("must be a plain name matching {syntax}, not {a}"),
                    ));
                }
            }
        }
        let mut next = Vec::new();
        for (k, v) in o {
            let k = k.as_str();
            if ONE.contains(&k) && v.is_object() {
                next.push((v, child(&loc, k)));
            }
            if MANY.contains(&k) {
                if let Value::Array(a) = v {
                    for (i, s) in a.iter().enumerate() {
                        next.push((s, child(&child(&loc, k), &i.to_string())));
                    }
                }
            }
            if MAP.contains(&k) {
                if let Value::Object(m) = v {
                    for (name, s) in m {
                        next.push((s, child(&child(&loc, k), name)));
                    }
                }
            }
        }
        // In document order.
        stack.extend(next.into_iter().rev());
    }
    Ok(())
}

/// Where the resources, anchors and documents of one compilation are.
#[derive(Debug, Default)]
pub(crate) struct Resources {
    /// Absolute URI (no fragment) → canonical location.
    by_uri: HashMap<String, String>,
    /// (resource URI, anchor name) → canonical location.
    anchors: HashMap<(String, String), String>,
    /// Canonical locations of resource roots with their base URIs.
    bases: Vec<(String, String)>,
    /// Other documents: (location prefix `<uri>#`, document).
    docs: Vec<(String, Value)>,
    /// Whether anything but the root document's own resource exists (a nested `$id`, or
    /// another document): then a reference's base depends on where it is written.
    pub(crate) several: bool,
    /// Drafts 3-7: a schema with `$ref` has no `$id` (its siblings are ignored).
    ref_alone: bool,
    /// Canonical locations of every `$ref` keyword whose value is a string, in document
    /// order: checked before compiling, so a dangling reference is an error even where
    /// the front end never goes (an `items` under `maxItems: 0`, an unused `$defs` entry).
    pub(crate) refs: Vec<String>,
}

/// Splits `uri` into its scheme+authority (`scheme://host`), path, and query.
fn split(uri: &str) -> (Option<&str>, &str) {
    // Returns (prefix up to and including the authority, the rest).
    let Some(colon) = uri.find(':') else {
        return (None, uri);
    };
    if uri[..colon].contains('/') || uri[..colon].contains('?') || uri[..colon].contains('#') {
        return (None, uri);
    }
    let after = &uri[colon + 1..];
    if let Some(rest) = after.strip_prefix("//") {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let cut = colon + 3 + end;
        (Some(&uri[..cut]), &uri[cut..])
    } else {
        (Some(&uri[..=colon]), after)
    }
}

/// Removes `.` and `..` segments (RFC 3986 §5.2.4).
fn remove_dots(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segs: Vec<&str> = path.split('/').collect();
    for (i, s) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        match *s {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 || (out.len() == 1 && !out[0].is_empty()) {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    out.join("/")
}

/// Resolves `reference` against the absolute `base` (RFC 3986 §5.2, without query
/// subtleties). Returns `None` where the base is not hierarchical and the reference relative.
pub(crate) fn join(base: &str, reference: &str) -> Option<String> {
    if let (Some(_), _) = split(reference) {
        let (pre, rest) = split(reference);
        return Some(format!("{}{}", pre.unwrap_or(""), remove_dots(rest)));
    }
    let base_nofrag = base.split('#').next().unwrap_or(base);
    if reference.is_empty() {
        return Some(base_nofrag.to_string());
    }
    if reference.starts_with('#') {
        return Some(format!("{base_nofrag}{reference}"));
    }
    let (pre, path) = split(base_nofrag);
    let pre = pre?;
    if let Some(r) = reference.strip_prefix("//") {
        let scheme = pre.split(':').next().unwrap_or("");
        return Some(format!("{scheme}://{r}"));
    }
    if !pre.ends_with(':') && !pre.contains("//") {
        return None;
    }
    let (rpath, tail) = match reference.find(['?', '#']) {
        Some(i) => (&reference[..i], &reference[i..]),
        None => (reference, ""),
    };
    if rpath.is_empty() {
        let path = path.split('?').next().unwrap_or(path);
        return Some(format!("{pre}{path}{tail}"));
    }
    let merged = if rpath.starts_with('/') {
        rpath.to_string()
    } else {
        let path = path.split('?').next().unwrap_or(path);
        match path.rfind('/') {
            Some(i) => format!("{}{rpath}", &path[..=i]),
            None if pre.contains("//") => format!("/{rpath}"),
            None => rpath.to_string(),
        }
    };
    Some(format!("{pre}{}{tail}", remove_dots(&merged)))
}

/// `ptr` + `/` + the escaped `token`.
fn child(ptr: &str, token: &str) -> String {
    super::child(ptr, token)
}

/// Unescaped tokens of the pointer part (after `#`) of a canonical location.
pub(crate) fn location_tokens(loc: &str) -> Vec<String> {
    location_token_iter(loc).map(Cow::into_owned).collect()
}

/// [`location_tokens`] one at a time, copied only when one has an escape (`~`).
fn location_token_iter(loc: &str) -> impl Iterator<Item = Cow<'_, str>> {
    let frag = loc.split_once('#').map_or("", |(_, f)| f);
    let tokens = match frag.is_empty() {
        true => None,
        false => Some(frag.trim_start_matches('/').split('/')),
    };
    tokens.into_iter().flatten().map(|t| match t.contains('~') {
        true => Cow::Owned(t.replace("~1", "/").replace("~0", "~")),
        false => Cow::Borrowed(t),
    })
}

impl Resources {
    /// Indexes the root document (with draft 4's `id` when `draft4`) and `documents`.
    /// Under `ref_alone` (drafts 3-7) the `$id` of a schema with `$ref` is ignored.
    pub(crate) fn new(
        root: &Value,
        documents: &[(String, Value)],
        draft4: bool,
        ref_alone: bool,
    ) -> Self {
        let mut r = Resources {
            ref_alone,
            ..Resources::default()
        };
        r.bases.push(("#".into(), DEFAULT_BASE.into()));
        r.by_uri.insert(DEFAULT_BASE.into(), "#".into());
        r.index(root, "#", DEFAULT_BASE, draft4, true);
        for (uri, doc) in documents {
            let uri = uri.split('#').next().unwrap_or(uri).to_string();
            let loc = format!("{uri}#");
            r.several = true;
            r.bases.push((loc.clone(), uri.clone()));
            r.by_uri.entry(uri.clone()).or_insert_with(|| loc.clone());
            r.docs.push((loc.clone(), doc.clone()));
            r.index(doc, &loc, &uri, draft4, true);
        }
        r
    }

    fn index(&mut self, node: &Value, loc: &str, base: &str, draft4: bool, doc_root: bool) {
        let Value::Object(o) = node else { return };
        let mut base = base.to_string();
        let id = o
            .get("$id")
            .or(if draft4 { o.get("id") } else { None })
            .and_then(Value::as_str)
            .filter(|_| !(self.ref_alone && o.contains_key("$ref")));
        if let Some(id) = id {
            if let Some(a) = id.strip_prefix('#') {
                // Draft 6/7: `"$id": "#name"` is an anchor.
                if !a.is_empty() {
                    self.anchors
                        .insert((base.clone(), a.to_string()), loc.to_string());
                }
            } else if let Some(abs) = join(&base, id) {
                let abs = abs.split('#').next().unwrap_or(&abs).to_string();
                if !doc_root {
                    self.several = true;
                }
                base = abs;
                self.bases.push((loc.to_string(), base.clone()));
                self.by_uri
                    .entry(base.clone())
                    .or_insert_with(|| loc.to_string());
            }
        }
        if o.get("$ref").is_some_and(Value::is_string) {
            self.refs.push(child(loc, "$ref"));
        }
        for k in ["$anchor", "$dynamicAnchor"] {
            if let Some(a) = o.get(k).and_then(Value::as_str) {
                self.anchors
                    .entry((base.clone(), a.to_string()))
                    .or_insert_with(|| loc.to_string());
            }
        }
        for (k, v) in o {
            let k = k.as_str();
            if ONE.contains(&k) && (v.is_object() || v.is_boolean()) {
                self.index(v, &child(loc, k), &base, draft4, false);
            }
            if MANY.contains(&k) {
                if let Value::Array(a) = v {
                    for (i, s) in a.iter().enumerate() {
                        self.index(
                            s,
                            &child(&child(loc, k), &i.to_string()),
                            &base,
                            draft4,
                            false,
                        );
                    }
                }
            }
            if MAP.contains(&k) {
                if let Value::Object(m) = v {
                    for (name, s) in m {
                        self.index(s, &child(&child(loc, k), name), &base, draft4, false);
                    }
                }
            }
        }
    }

    /// The base URI in force at canonical location `loc`.
    pub(crate) fn base_of(&self, loc: &str) -> &str {
        let mut best: Option<&(String, String)> = None;
        for e in &self.bases {
            let p = e.0.as_str();
            let inside = loc == p
                || (loc.starts_with(p) && loc[p.len()..].starts_with('/'))
                || (p.ends_with('#') && loc.starts_with(p));
            if inside && best.map_or(true, |b| p.len() >= b.0.len()) {
                best = Some(e);
            }
        }
        best.map_or(DEFAULT_BASE, |b| b.1.as_str())
    }

    /// The document holding canonical location `loc`, and the location's value in it.
    pub(crate) fn lookup<'v>(&'v self, root: &'v Value, loc: &str) -> Option<&'v Value> {
        let (prefix, _) = loc.split_once('#')?;
        let mut cur = if prefix.is_empty() {
            root
        } else {
            &self
                .docs
                .iter()
                .find(|(p, _)| p[..p.len() - 1] == *prefix)?
                .1
        };
        for t in location_token_iter(loc) {
            cur = match cur {
                Value::Object(o) => o.get(t.as_ref())?,
                Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(cur)
    }

    /// The canonical location of the resource named by absolute `uri` (no fragment).
    pub(crate) fn resource(&self, uri: &str) -> Option<&str> {
        self.by_uri.get(uri).map(String::as_str)
    }

    /// The canonical location of anchor `name` in resource `uri`.
    pub(crate) fn anchor(&self, uri: &str, name: &str) -> Option<&str> {
        self.anchors
            .get(&(uri.to_string(), name.to_string()))
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::join;

    #[test]
    fn joins_like_rfc_3986() {
        let b = "http://localhost:1234/draft2020-12/tree.json";
        assert_eq!(
            join(b, "node.json").unwrap(),
            "http://localhost:1234/draft2020-12/node.json"
        );
        assert_eq!(
            join(b, "#/a").unwrap(),
            "http://localhost:1234/draft2020-12/tree.json#/a"
        );
        assert_eq!(join(b, "/x.json").unwrap(), "http://localhost:1234/x.json");
        assert_eq!(
            join(b, "../x.json").unwrap(),
            "http://localhost:1234/x.json"
        );
        assert_eq!(
            join(b, "folder/").unwrap(),
            "http://localhost:1234/draft2020-12/folder/"
        );
        assert_eq!(join("urn:uuid:1234", "#foo").unwrap(), "urn:uuid:1234#foo");
        assert_eq!(join("urn:uuid:1234", "urn:other").unwrap(), "urn:other");
        assert_eq!(
            join("tokensieve:///schema.json", "a.json").unwrap(),
            "tokensieve:///a.json"
        );
    }
}
