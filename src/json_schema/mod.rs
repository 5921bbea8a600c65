//! The JSON Schema front end (draft 2020-12): a schema becomes grammar IR.
//!
//! [`json_schema_to_grammar`] turns a schema into a [`Grammar`];
//! [`crate::GrammarCompiler::compile_json_schema`] compiles it against a vocabulary.
//!
//! **Soundness first.** The grammar never accepts an instance that the schema rejects. Where
//! no exact construction exists, the schema is refused with a typed [`JsonSchemaError`] that
//! names the keyword and its JSON pointer; a keyword is never dropped silently (unless
//! [`JsonSchemaOptions::lenient`] is set, and then the result lists what was ignored). The
//! grammar may reject some valid instances (documented per keyword below), never the reverse.
//!
//! Where each keyword becomes grammar:
//! * `types.rs`: `type`, `enum`, `const`, boolean schemas, the generic JSON value.
//! * `strings.rs`: `minLength`, `maxLength` (code points of the decoded value), `pattern`
//!   (ECMA-262 semantics over code points, unanchored search, via [`crate::regex`]; `\d`,
//!   `\w`, `\s`, `.` get their ECMAScript classes; constructs that differ between ECMAScript
//!   and Rust regexes are refused; not combined with `format`; with `minLength`/`maxLength`
//!   only when every match of the pattern satisfies them, such as `^[a-z]{2,4}$` with
//!   `maxLength: 8`, or none does).
//! * `numbers.rs`: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
//!   `multipleOf` (§6.2.1; integer steps, and steps `10^-k` as at most `k` fraction digits).
//! * `objects.rs`: `properties`, `required`, `additionalProperties`, `minProperties`,
//!   `maxProperties`, `patternProperties` (§10.3.2.2; any patterns the regex front end
//!   reads, up to 32: `key_dfa.rs` splits the keys by the set of patterns they match, and
//!   each set's values take all of their schemas, `additionalProperties` for none);
//!   properties in declared order, or in any
//!   order with [`JsonSchemaOptions::any_order`].
//! * `arrays.rs`: `items`, `prefixItems`, `minItems`, `maxItems`, `contains`,
//!   `minContains`, `maxContains` (§10.3.1.3, §6.4.4-5); draft 4-2019 `items` arrays and
//!   `additionalItems` (rewritten as `prefixItems`/`items`); `uniqueItems: true` as a
//!   subset (items of pairwise different kinds: at most one null, true, false, number,
//!   string, object, array).
//! * `references.rs`: `$ref` (`#` JSON pointers), `$defs`, `definitions`, `allOf`, `anyOf`,
//!   `oneOf` (§10.2.1.3: disjoint branches as they are, overlapping ones as exclusive
//!   branches `A_i ∧ ¬A_j...` when every negation exists; disjointness is proven from
//!   types, constants, number bounds, string lengths and literal patterns, item counts and
//!   items, and required properties against forbidden or disjoint ones, recursively, and
//!   the types two branches accept entirely are left out, since they match twice). `allOf`, `$ref` siblings and
//!   `anyOf` siblings merge keyword by keyword; `contains` with `minContains`/`maxContains`
//!   and `if` with `then`/`else` merge as one unit per source (a count or a `then`/`else`
//!   never attaches to another source's `contains`/`if`; two different ones are refused).
//!   Two `enum`s keep their common values, two different `const`s accept nothing; an
//!   `additionalProperties` (`items`) on both sides holds both schemas once each side
//!   declares the other's names (prefix), when neither has `patternProperties`.
//!   Drafts: under a draft 3-7 `$schema` (`draft-03`, `draft-04`, `draft-06`, `draft-07`)
//!   a schema with `$ref` is the reference alone: every sibling keyword is ignored, `$id`/
//!   `id` included (so it does not change the base URI either); from 2019-09 on (and
//!   without `$schema`, read as 2020-12) the siblings apply beside the reference. Draft 4's
//!   boolean `exclusiveMinimum`/`exclusiveMaximum` make `minimum`/`maximum` exclusive.
//! * `conditionals.rs`: `dependentRequired`, `dependentSchemas`, draft 4-7 `dependencies`
//!   (§6.5.4, §10.2.2.4), `if`/`then`/`else` (§10.2.2.1-3) and `not` (§10.2.1.4) of types,
//!   null/boolean/number constants, bounds, `required`, `properties`, `items`, `contains`,
//!   `allOf`/`anyOf` of those: each a union of branches merged exactly.
//! * `formats.rs`: `format` (date, time, date-time, duration, uuid, ipv4, ipv6, email,
//!   idn-email, hostname, idn-hostname, uri, uri-reference, iri, iri-reference,
//!   uri-template, json-pointer, relative-json-pointer, regex; each a sound subset);
//!   formats no draft defines are ignored with
//!   [`JsonSchemaOptions::ignore_unknown_keywords`].
//! * `types.rs`: `enum`/`const` beside `minLength`, `maxLength`, `minimum`, `maximum`,
//!   `exclusiveMinimum`, `exclusiveMaximum`, `minItems`, `maxItems`, `minProperties`,
//!   `maxProperties` (the values are filtered).
//! * `mod.rs`: [`Limits::max_schema_depth`] (on the document, before anything else),
//!   [`Limits::max_enum_values`] and [`Limits::max_repeat_bound`] (on `minLength`,
//!   `maxLength`, `minItems`, `maxItems` where they become a repetition; the error's
//!   pointer ends in the keyword), as [`crate::CompileError::Limit`]; `not` of a boolean, of `{}`
//!   or of a `type` (folded into `type`);
//!   `unevaluatedProperties` / `unevaluatedItems` in schemas without in-place applicators
//!   (where they mean `additionalProperties` / `items`); annotations.
//! * `unevaluated.rs`: `unevaluatedProperties` / `unevaluatedItems` beside (or under)
//!   `allOf`, `anyOf`, `oneOf`, `$ref`, `if`/`then`/`else` and `dependentSchemas`: the
//!   schema becomes a union of branches, each knowing the names, patterns, prefix and
//!   `contains` schemas it evaluates, and each closed with `additionalProperties` / `items`
//!   for the rest (refused where a branch cannot be merged or negated exactly).
//! * `resources.rs`: base URIs of `$id` (and draft 4's `id`), `$anchor`, `$dynamicAnchor`
//!   (as a plain anchor), and other documents named by absolute URI in
//!   [`JsonSchemaOptions::documents`] (never fetched); `references.rs` resolves `$ref`
//!   through them by RFC 3986 against the base in force where it is written. Before
//!   anything is compiled, the root document's `definitions`/`$defs` must be objects of
//!   schemas and, from 2019-09 on, `$id` has no non-empty fragment and
//!   `$anchor`/`$dynamicAnchor` are plain names (else [`JsonSchemaError::InvalidKeyword`]).
//! * `keywords.rs`: before anything is compiled too, the value of every keyword the front
//!   end reads has the shape its meta-schema gives it (`minItems` a non-negative integer,
//!   `required` an array of names, `not` a schema...), wherever it is written: also where
//!   the instance type it constrains does not apply (`{"type": "string", "minItems": "x"}`),
//!   in unused `$defs` and under `not`; else [`JsonSchemaError::InvalidKeyword`] with the
//!   value's pointer. Draft 3's `"required": true` inside a property's schema gets a
//!   message with the 2020-12 spelling (refused as [`JsonSchemaError::Unsupported`] under a
//!   draft 3 `$schema`, where it is valid but not read). [`JsonSchemaOptions::lenient`]
//!   does not skip these (it skips keywords that are not enforced, not malformed ones), and
//!   nothing inside a keyword that [`JsonSchemaOptions::ignore_unknown_keywords`] ignores
//!   is checked.
//!
//! Everything else is refused, for example `not` (and `if`, and overlapping `oneOf`
//! branches) of `pattern`, `format`, `multipleOf`, object or array constants or closed
//! objects,
//! `uniqueItems: true` beside `contains`, `propertyNames` beside `patternProperties`,
//! patterns the regex front end refuses, `multipleOf` steps such as `0.5`, more than 5 dependencies,
//! `$dynamicRef`, `$ref` to documents not given in [`JsonSchemaOptions::documents`], a
//! `$ref` inside a subschema the front end rewrote when the document has several bases,
//! other formats (`color`, ...), `allOf` that cannot be merged exactly,
//! `minProperties` above 1 when extra properties are allowed, `pattern` with `format`,
//! and `pattern`/`format` with length bounds that some of their matches break.
//! Numbers are compared as exact decimals (the bounds as serde_json reads them).
//!
//! Choices that reject valid instances (never the reverse):
//! * `integer` accepts `-?(0|[1-9][0-9]*)` with an optional zero fraction (`6000.0`,
//!   `-0.0`); exponents (`1e3`) are rejected. Under a draft-04 `$schema` (where an integer
//!   has no fraction part) neither fractions nor `-0` are accepted.
//! * `number` with bounds or `multipleOf` accepts numbers without an exponent only; with a
//!   step `10^-k`, at most `k` fraction digits (`1.50` for 0.01 is rejected).
//! * `patternProperties` matching every key: undeclared keys contain no `\u2028`/`\u2029`
//!   (and are not empty for `.+`-like patterns).
//! * Strings with a `pattern` or a `format` accept only the canonical escaping of each
//!   character (raw, unless JSON requires an escape).
//! * Strings reject escaped lone surrogates (`"\ud800"`), which are not Unicode text.
//! * Declared object keys are written in the canonical escaping of `serde_json` (so
//!   `{"\u0061": 1}` is refused for a declared `a`), unless
//!   [`JsonSchemaOptions::escaped_declared_keys`] asks for every spelling (then it is the
//!   declared `a`, its value checked against `a`'s schema). Extra keys (allowed by
//!   `additionalProperties`) may hold every JSON escape; they are compared with the
//!   declared names decoded, so `"\u0061"` is never an extra key beside a declared `a`.
//!   For [`crate::GrammarCompiler::compile_json_schema`] such a key is the plain JSON
//!   string and the matcher's chart drops it when it ends on a declared name
//!   (`parser::key_filter`); [`json_schema_to_grammar`], whose grammar any matcher may
//!   run, spells the names' trie out in every escape instead. (Keys of
//!   `patternProperties` and `propertyNames` take the canonical escaping only.)
//!   Declared properties come in the order of the schema's `serde_json::Map` (sorted by key
//!   unless serde_json's `preserve_order` feature is on), with extra keys anywhere between.
//! * **No key appears twice in one object.** Matchers of
//!   [`crate::GrammarCompiler::compile_json_schema`] read their output as JSON and reject (and
//!   leave out of the token bitmask) a token that would close a key already in its object,
//!   compared decoded (`"\u0061"` repeats `"a"`); see [`crate::TokenRejection::DuplicateKey`].
//!   The grammar alone cannot do it: names of extra keys are unbounded. `minProperties`
//!   above 1 beside open-ended extra keys is then exact. **A dead end remains possible**
//!   where extra names are restricted (`patternProperties` beside `additionalProperties:
//!   false`, or `propertyNames`): once an extra name that no longer name extends is
//!   written (`x` for `^x$` or `^(x|y.*)$`, `k` for `"const": "k"`, any name at a
//!   `maxLength`), the grammar still offers it again and only the key's closing quote is
//!   refused, so the token bitmask is empty inside that key. (The grammar alone would
//!   have accepted the repeated key.) Declared names, and extra keys beside
//!   `additionalProperties` that is not `false` with no `propertyNames`, never dead-end.
//! * With `any_order`, named properties (those in `properties`, and required names that
//!   are not) come in any order. Beside open-ended extra keys (`additionalProperties` not
//!   `false`, no `propertyNames`, and `patternProperties` `.*`-like or whose every set of
//!   patterns takes some value, with plain declared names) and without
//!   `maxProperties`, every order
//!   of any number of them, in a grammar linear in their count (a state per number of
//!   distinct required names written; the key check keeps names distinct, and a key that
//!   starts like a written one can always go on as a new extra key). Closed objects
//!   (`additionalProperties: false`, no `patternProperties` or one pattern `^text` of
//!   letters, digits, `-`, `_` that no declared name matches) past the exact budget below,
//!   with plain names, no `maxProperties` under their count and no `minProperties` over
//!   it, take every order too, in the same linear grammar with every declared name
//!   offered at every key: the matcher narrows each key to the names not yet written
//!   (a key that starts no name left, or a `,` once every name is written, is a
//!   [`crate::TokenRejection::KeyNotAllowed`] and left out of the mask), so no state is a
//!   dead end; beside a pattern `^text`, a key that can still start with `text` is
//!   admitted too, and a `,` is never refused (a new undeclared key can always follow). The narrowing is applied at run time on the tokens that could write a key
//!   or a `,`, as the duplicate check is, so the node masks stay context-free; the
//!   matcher learns which object a `{` opens from the chart when the step is accepted
//!   (a token that opens such an object is checked within itself for duplicates only).
//!   Otherwise, and in the
//!   grammar of [`json_schema_to_grammar`] (no matcher behind it, where extra keys may also
//!   repeat and `minProperties` above 1 beside extra keys is refused), the grammar itself
//!   tracks the written names: exact (a state per set of written names × a member count)
//!   for objects that name at most 8 properties within 512 states; larger objects are cut,
//!   in map order, into chunks of up to 6 whose members come in any order among themselves
//!   while the chunks keep their order (at most 256 states an object).
//! * `enum`/`const` values are matched in their compact `serde_json` spelling (with the
//!   configured whitespace inside arrays and objects); integral numbers also as integers.
//! * `format` is asserted (2020-12 makes it an annotation by default).

mod arrays;
mod conditionals;
mod depth;
mod disjoint;
mod error;
mod expr;
mod extra_keys;
mod extra_members;
mod formats;
mod key_dfa;
mod keywords;
pub(crate) mod numbers;
/// Integer ranges as grammar: the bounds a schema gives an integer and the exact expression
/// of the integers between them, for builders of other grammars (tool-call families whose
/// arguments are not JSON).
pub use numbers::{int_bounds, integer_range};
mod objects;
mod options;
mod references;
mod resources;
mod rewrite;
mod strings;
pub(crate) use strings::{raw_string_admits, raw_string_grammar, RAW_STRING_KEYWORDS};
mod types;
mod unevaluated;

use std::collections::HashMap;

use serde_json::{Map, Value};

use depth::check_depth;
pub(crate) use error::{json_error_message, limit_error, repeat_limit_error};
pub use error::{IgnoredKeyword, JsonSchemaError};
use expr::{binomial, blank, whitespace_lines, MAX_WHITESPACE_SHAPES};
pub(crate) use expr::{choice, class, lit, never, opt, repeat, seq};
pub(crate) use keywords::{harmless_id, is_annotation, KNOWN_KEYWORDS};
pub use options::JsonSchemaOptions;
pub(crate) use rewrite::legacy_items;
use rewrite::{legacy_bounds, strip_unevaluated, unevaluated_as_additional};

use crate::grammar::{CharClass, Expr, Grammar, Rule, RuleId};
use crate::limits::Limits;

/// The result of [`json_schema_to_grammar_with_report`].
#[derive(Clone, Debug)]
pub struct JsonSchemaGrammar {
    /// The grammar (root rule `root`).
    pub grammar: Grammar,
    /// Keywords not enforced (only ever non-empty with [`JsonSchemaOptions::lenient`]).
    pub ignored: Vec<IgnoredKeyword>,
    /// Per rule of `grammar`: the JSON pointer of the schema it was built for.
    pub(crate) pointers: Vec<String>,
    /// Per rule of `grammar`: kept a rule when compiled (not inlined into its callers): the
    /// shared rule of any JSON string (see `Builder::string_any`).
    pub(crate) keep: Vec<bool>,
    /// Per rule of `grammar`: inlined into its callers when compiled, whatever its size:
    /// the one whitespace rule of a compact grammar (see `Builder::ws`), and under
    /// [`Form::Embedded`] the one rule of any number and the one of any integer (see
    /// `Builder::shared_number`). A deferred tool's build keeps them rules.
    pub(crate) always: Vec<bool>,
    /// The rule of any JSON string, when the grammar calls it. Under [`Form::Embedded`] a
    /// placeholder with an empty body: the embedder must send its calls to a string rule
    /// of its own, built for the same [`JsonSchemaOptions::string_excludes`].
    pub(crate) string_rule: Option<RuleId>,
    /// The rule of the generic JSON value, when the grammar calls it (an embedder may send
    /// its calls to one rule of its own built for the same options, `structural_tag`).
    pub(crate) any_rule: Option<RuleId>,
    /// Built for a matcher that forbids repeated keys (`compile_json_schema`), so objects
    /// rely on it (see `Builder::unique_keys`).
    pub(crate) unique_keys: bool,
    /// The closed objects whose keys that matcher narrows (see `Builder::closed_objects`).
    pub(crate) closed: Vec<(RuleId, Vec<String>)>,
    /// The key rules of undeclared properties whose names that matcher's chart checks when
    /// they end, with the declared names they must not decode to (see
    /// `Builder::key_not_in`; `parser::key_filter`).
    pub(crate) key_filters: Vec<(RuleId, Vec<String>)>,
}

/// A schema given as text or as a parsed value.
pub trait JsonSchemaSource {
    /// The schema as a value.
    ///
    /// # Errors
    /// [`JsonSchemaError::NotJson`] when text does not parse.
    fn to_schema_value(&self) -> Result<std::borrow::Cow<'_, Value>, JsonSchemaError>;
}

impl JsonSchemaSource for str {
    fn to_schema_value(&self) -> Result<std::borrow::Cow<'_, Value>, JsonSchemaError> {
        serde_json::from_str(self)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| {
                JsonSchemaError::NotJson(json_error_message(
                    &e,
                    "flatten it, e.g. with `$defs` and `$ref`",
                ))
            })
    }
}

impl JsonSchemaSource for String {
    fn to_schema_value(&self) -> Result<std::borrow::Cow<'_, Value>, JsonSchemaError> {
        self.as_str().to_schema_value()
    }
}

impl JsonSchemaSource for Value {
    fn to_schema_value(&self) -> Result<std::borrow::Cow<'_, Value>, JsonSchemaError> {
        Ok(std::borrow::Cow::Borrowed(self))
    }
}

impl<T: JsonSchemaSource + ?Sized> JsonSchemaSource for &T {
    fn to_schema_value(&self) -> Result<std::borrow::Cow<'_, Value>, JsonSchemaError> {
        (**self).to_schema_value()
    }
}

/// Turns a JSON Schema into a grammar of the JSON texts it accepts (root rule `root`).
///
/// # Errors
/// A [`JsonSchemaError`] naming the keyword and JSON pointer of the first part that cannot
/// be enforced exactly (or is invalid, or unsatisfiable).
pub fn json_schema_to_grammar(
    schema: &Value,
    options: &JsonSchemaOptions,
) -> Result<Grammar, JsonSchemaError> {
    json_schema_to_grammar_with_report(schema, options).map(|g| g.grammar)
}

/// As [`json_schema_to_grammar`], also listing the keywords ignored in lenient mode.
///
/// # Errors
/// As [`json_schema_to_grammar`].
pub fn json_schema_to_grammar_with_report(
    schema: &Value,
    options: &JsonSchemaOptions,
) -> Result<JsonSchemaGrammar, JsonSchemaError> {
    to_grammar(schema, options, &Limits::default(), false, Form::Written)
}

/// As [`json_schema_to_grammar`] under `limits` (a caller's, for front ends that embed
/// a schema: structural tags), in the form `form`.
pub(crate) fn json_schema_to_grammar_limited(
    schema: &Value,
    options: &JsonSchemaOptions,
    limits: &Limits,
    form: Form,
) -> Result<JsonSchemaGrammar, JsonSchemaError> {
    to_grammar(schema, options, limits, false, form)
}

/// How [`to_grammar`] writes the grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// Everything written out where it goes (the grammars users print).
    Written,
    /// For the compile: whitespace with a line cap (written out, one alternative per place
    /// of the line feed) is one rule called where whitespace goes, marked in
    /// [`JsonSchemaGrammar::always`] for the compile to inline back: a smaller IR.
    Compact,
    /// [`Form::Compact`], and any JSON string is a call of an empty placeholder rule
    /// ([`JsonSchemaGrammar::string_rule`]) that the embedder sends to one string
    /// rule shared by every schema it embeds (a tag's tools); any number and any integer
    /// are each a call of one rule, marked in [`JsonSchemaGrammar::always`] (see
    /// `Builder::shared_number`).
    Embedded,
}

/// As [`json_schema_to_grammar_with_report`] under `limits`: [`Limits::max_schema_depth`]
/// (checked on the document before anything else), [`Limits::max_enum_values`] and
/// [`Limits::max_repeat_bound`] (on the count keywords). With `unique_keys`, the grammar
/// is for a matcher that forbids repeated object keys (`matcher::keys`): it leaves them
/// to it. `form`: see [`Form`].
pub(crate) fn to_grammar(
    schema: &Value,
    options: &JsonSchemaOptions,
    limits: &Limits,
    unique_keys: bool,
    form: Form,
) -> Result<JsonSchemaGrammar, JsonSchemaError> {
    options.check_separators()?;
    check_depth(schema, limits.max_schema_depth)?;
    resources::check_identifiers(schema)?;
    let draft = schema.get("$schema").and_then(Value::as_str).unwrap_or("");
    keywords::check_keyword_values(schema, "#", draft)?;
    for (uri, doc) in &options.documents {
        keywords::check_keyword_values(doc, &format!("{uri}#"), draft)?;
    }
    let mut b = Builder::new(schema, options.clone());
    b.unique_keys = unique_keys;
    b.max_enum_values = limits.max_enum_values;
    b.max_repeat = limits.max_repeat_bound;
    b.max_depth = limits.max_schema_depth;
    b.check_references()?;
    let root = b.add_rule("root", Expr::Empty);
    b.external_strings = form == Form::Embedded;
    b.shared_numbers = form == Form::Embedded;
    if form != Form::Written {
        // Whitespace with a line cap is written out as one alternative per place of the
        // line feed: one rule, called where whitespace goes, instead of a copy at every
        // place (the compile inlines it back).
        let ws = b.ws();
        if matches!(ws, Expr::Choice(_)) {
            b.ws_rule = Some(b.add_rule("ws", ws));
        }
    }
    let value = b.schema(schema, "#")?;
    let Some(value) = value else {
        return Err(JsonSchemaError::Unsatisfiable {
            pointer: "#".into(),
            reason: "the schema accepts no value".into(),
        });
    };
    let ws = b.ws();
    b.rules[root.index()].body = if b.opts.root_whitespace {
        Expr::Seq(vec![ws.clone(), value, ws])
    } else {
        value
    };
    let grammar = Grammar {
        rules: b.rules,
        root,
    };
    let mut keep = vec![false; grammar.rules.len()];
    if let Some(r) = b.string_rule {
        keep[r.index()] = true;
    }
    for (r, _) in &b.closed_objects {
        keep[r.index()] = true;
    }
    for r in &b.key_rules.kept {
        keep[r.index()] = true;
    }
    let mut always = vec![false; grammar.rules.len()];
    b.ws_rule.inspect(|r| always[r.index()] = true);
    for r in b.number_rules.iter().flatten() {
        always[r.index()] = true;
    }
    // A format's rule called from one place is written out there.
    let mut grammar = grammar;
    formats::write_out_single_use(&mut grammar, &b.formats, form == Form::Written);
    Ok(JsonSchemaGrammar {
        grammar,
        ignored: b.ignored,
        pointers: b.pointers,
        keep,
        always,
        string_rule: b.string_rule,
        any_rule: b.any.map(|a| a.value),
        unique_keys,
        closed: b.closed_objects,
        key_filters: b.key_rules.filters,
    })
}

/// `ptr` + `/` + the escaped `token` (RFC 6901): one allocation when the token has nothing
/// to escape (the front end makes one per schema node it walks).
pub(crate) fn child(ptr: &str, token: &str) -> String {
    let mut s = String::with_capacity(ptr.len() + 1 + token.len());
    s.push_str(ptr);
    s.push('/');
    if token.contains(['~', '/']) {
        for c in token.chars() {
            match c {
                '~' => s.push_str("~0"),
                '/' => s.push_str("~1"),
                c => s.push(c),
            }
        }
    } else {
        s.push_str(token);
    }
    s
}

/// Builds the rules of one grammar.
pub(crate) struct Builder<'a> {
    pub(crate) root_schema: &'a Value,
    pub(crate) opts: JsonSchemaOptions,
    pub(crate) rules: Vec<Rule>,
    pub(crate) ignored: Vec<IgnoredKeyword>,
    /// Rules of `$ref` targets, by pointer.
    pub(crate) refs: HashMap<String, RuleId>,
    /// The grammar of each `format` met so far, by name, with the rule of its JSON-escaped
    /// form once made (`None` inside: it has none): many `uri` strings build, escape and
    /// make an automaton of the IRI grammar once (`formats::write_out_single_use`).
    pub(crate) formats: HashMap<String, (Expr, Option<Option<RuleId>>)>,
    /// The content made for each `pattern` with character bounds `(min, max)` met so far
    /// (`Builder::pattern_bounded`: a product automaton of hundreds of rules; `None`, no
    /// string satisfies both): met again, the same rules are called. (Their rules keep the
    /// pointer of the first place, which a later error about them names; a product that
    /// failed is not kept, so each place reports its own refusal.)
    pub(crate) bounded_patterns: HashMap<(String, u32, Option<u32>), Option<Expr>>,
    /// Rules of the generic JSON value and its parts.
    pub(crate) any: Option<types::AnyRules>,
    /// The rule of any JSON string (see [`Builder::string_any`]), made on first use.
    pub(crate) string_rule: Option<RuleId>,
    /// Any JSON string is a call of an empty placeholder rule ([`Form::Embedded`]).
    external_strings: bool,
    /// The one whitespace rule of a compact grammar, which [`Builder::ws`] calls (`None`:
    /// whitespace is written out where it goes).
    ws_rule: Option<RuleId>,
    /// Any number and any integer are each a call of one rule ([`Form::Embedded`]; see
    /// [`Builder::shared_number`]).
    shared_numbers: bool,
    /// The rules of any number (`[0]`) and any integer (`[1]`), made on first use when
    /// [`Builder::shared_numbers`] is set.
    number_rules: [Option<RuleId>; 2],
    /// The shared rules of undeclared keys, made on first use.
    pub(crate) key_rules: extra_keys::KeyRules,
    /// Closed `any_order` objects whose keys the matcher narrows to the names not yet
    /// written: the rule that opens each (kept when compiled), and its declared names
    /// (see `Builder::any_order_closed`).
    pub(crate) closed_objects: Vec<(RuleId, Vec<String>)>,
    /// Nesting depth of schema compilation (guards against runaway merges).
    pub(crate) depth: usize,
    /// [`Limits::max_enum_values`].
    pub(crate) max_enum_values: usize,
    /// [`Limits::max_repeat_bound`], checked on the count keywords that become a repetition
    /// (`minLength`, `maxLength`, `minItems`, `maxItems`) so that the error names them.
    pub(crate) max_repeat: u32,
    /// [`Limits::max_schema_depth`], for `$ref` chains (the document's own nesting is
    /// checked against it before compiling).
    pub(crate) max_depth: usize,
    /// `$ref`s being followed (compiled into their rules) at this point of compilation.
    pub(crate) ref_depth: usize,
    /// The root's `$schema` names draft 4 (or 3): an `integer` has no fraction at all there
    /// (`1.0` is not an integer), while later drafts count `1.0` as one.
    pub(crate) draft4: bool,
    /// The root's `$schema` names draft 3-7, where a schema with `$ref` is that reference
    /// alone: its other keywords (`$id`/`id` included) are ignored.
    pub(crate) ref_alone: bool,
    /// Resources, anchors and base URIs of the root document and the other documents.
    pub(crate) res: resources::Resources,
    /// Per rule (same index): the JSON pointer of the schema it was built for (for a
    /// `$ref`'s rule, its target), so errors of the compiled grammar name a place.
    pub(crate) pointers: Vec<String>,
    /// The pointer of the schema being compiled.
    cur: String,
    /// Some document has an `unevaluatedProperties`/`unevaluatedItems` key somewhere
    /// (else the search for them in applicators is skipped).
    pub(crate) has_unevaluated: bool,
    /// The matcher forbids an object key repeated in its object (grammars of
    /// [`crate::GrammarCompiler::compile_json_schema`]): extra keys may then be counted, and
    /// `any_order` objects need no state per set of keys written.
    pub(crate) unique_keys: bool,
}

/// The deepest nesting of compilation (subschemas, and references inlined by merges and
/// branches), whatever the limits: it bounds the recursion of the front end. The
/// document's own nesting is bounded first by [`Limits::max_schema_depth`].
const MAX_SCHEMA_DEPTH: usize = 200;

impl<'a> Builder<'a> {
    fn new(root_schema: &'a Value, opts: JsonSchemaOptions) -> Self {
        let draft4 = root_schema
            .get("$schema")
            .and_then(Value::as_str)
            .is_some_and(|s| s.contains("draft-04") || s.contains("draft-03"));
        let ref_alone = root_schema
            .get("$schema")
            .and_then(Value::as_str)
            .is_some_and(|s| {
                ["draft-03", "draft-04", "draft-06", "draft-07"]
                    .iter()
                    .any(|d| s.contains(d))
            });
        let res = resources::Resources::new(root_schema, &opts.documents, draft4, ref_alone);
        let has_unevaluated = unevaluated::has_unevaluated_key(root_schema)
            || opts
                .documents
                .iter()
                .any(|(_, d)| unevaluated::has_unevaluated_key(d));
        Builder {
            res,
            root_schema,
            opts,
            rules: Vec::new(),
            ignored: Vec::new(),
            refs: HashMap::new(),
            any: None,
            string_rule: None,
            formats: HashMap::new(),
            bounded_patterns: HashMap::new(),
            ws_rule: None,
            shared_numbers: false,
            number_rules: [None; 2],
            external_strings: false,
            key_rules: extra_keys::KeyRules::default(),
            closed_objects: Vec::new(),
            depth: 0,
            max_enum_values: Limits::default().max_enum_values,
            max_repeat: Limits::default().max_repeat_bound,
            max_depth: Limits::default().max_schema_depth,
            ref_depth: 0,
            draft4,
            ref_alone,
            pointers: Vec::new(),
            cur: "#".to_string(),
            has_unevaluated,
            unique_keys: false,
        }
    }

    /// Adds a rule named `base` (made unique) and returns its id.
    pub(crate) fn add_rule(&mut self, base: &str, body: Expr) -> RuleId {
        let id = RuleId(self.rules.len() as u32);
        let name = if self.rules.is_empty() {
            base.to_string()
        } else {
            format!("{base}_{}", self.rules.len())
        };
        self.rules.push(Rule { name, body });
        self.pointers.push(self.cur.clone());
        id
    }

    /// Runs `f`, which compiles a schema merged from several places (an `allOf`, a `$ref`
    /// with siblings, an `anyOf` branch with its siblings) at `ptr`, and points what it
    /// reports about a keyword at the place where that keyword is written (see
    /// [`Builder::relocate`]): its error, the ignored keywords it notes and the places of
    /// the rules it adds.
    pub(crate) fn traced<T>(
        &mut self,
        ptr: &str,
        origins: &references::Origins,
        f: impl FnOnce(&mut Self) -> Result<T, JsonSchemaError>,
    ) -> Result<T, JsonSchemaError> {
        let (ignored, rules) = (self.ignored.len(), self.pointers.len());
        let r = f(self).map_err(|e| self.relocated(e, ptr, origins));
        for i in ignored..self.ignored.len() {
            if let Some(p) = self.relocate(&self.ignored[i].pointer, ptr, origins) {
                self.ignored[i].pointer = p;
            }
        }
        for i in rules..self.pointers.len() {
            if let Some(p) = self.relocate(&self.pointers[i], ptr, origins) {
                self.pointers[i] = p;
            }
        }
        r
    }

    /// Runs `f`, which compiles a schema the front end wrote, and rewrites the places it
    /// reports (its error, the ignored keywords it notes, the places of the rules it adds)
    /// under a written place `from` of each alias `(from, to)` to the same place under
    /// `to`, where the user wrote that part.
    pub(crate) fn aliased<T>(
        &mut self,
        aliases: &[(String, String)],
        f: impl FnOnce(&mut Self) -> Result<T, JsonSchemaError>,
    ) -> Result<T, JsonSchemaError> {
        let alias = |p: &str| {
            aliases.iter().find_map(|(from, to)| {
                let rest = p.strip_prefix(from.as_str())?;
                (rest.is_empty() || rest.starts_with('/')).then(|| format!("{to}{rest}"))
            })
        };
        let (ignored, rules) = (self.ignored.len(), self.pointers.len());
        let r = f(self).map_err(|mut e| {
            if let Some(p) = e.pointer_mut() {
                if let Some(q) = alias(p) {
                    *p = q;
                }
            }
            e
        });
        for i in ignored..self.ignored.len() {
            if let Some(q) = alias(&self.ignored[i].pointer) {
                self.ignored[i].pointer = q;
            }
        }
        for i in rules..self.pointers.len() {
            if let Some(q) = alias(&self.pointers[i]) {
                self.pointers[i] = q;
            }
        }
        r
    }

    /// `e` with its pointer relocated by [`Builder::relocate`].
    pub(crate) fn relocated(
        &self,
        mut e: JsonSchemaError,
        ptr: &str,
        origins: &references::Origins,
    ) -> JsonSchemaError {
        if let Some(p) = e.pointer_mut() {
            if let Some(q) = self.relocate(p, ptr, origins) {
                *p = q;
            }
        }
        e
    }

    /// Where `p`, a place inside the schema merged at `ptr`, is written in the documents:
    /// `ptr/k/rest` for a keyword `k` that `origins` says is written at `o` becomes
    /// `o/k/rest`, cut to the deepest part that names a place of the document (the merge
    /// builds an `allOf` of both schemas for a name declared on two sides: such `allOf/i`
    /// steps are skipped). Of several origins, the one that names the deepest place wins
    /// (the first on a tie). `None` when `p` is not such a place, or the keyword is written
    /// at `ptr` itself.
    pub(crate) fn relocate(
        &self,
        p: &str,
        ptr: &str,
        origins: &references::Origins,
    ) -> Option<String> {
        let rest = p.strip_prefix(ptr)?.strip_prefix('/')?;
        let (token, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let k = token.replace("~1", "/").replace("~0", "~");
        let places = origins.get(&k)?;
        if places.iter().all(|o| o == ptr) {
            return None;
        }
        let tail: Vec<&str> = if tail.is_empty() {
            Vec::new()
        } else {
            tail.split('/').collect()
        };
        let unescape = |t: &str| t.replace("~1", "/").replace("~0", "~");
        let mut best: Option<(usize, String)> = None;
        for o in places {
            let mut q = format!("{o}/{token}");
            let Some(mut node) = self.res.lookup(self.root_schema, &q) else {
                // Not a place of the documents (a schema the front end built): keep the
                // whole path under it.
                if best.is_none() {
                    let mut full = q.clone();
                    for t in &tail {
                        full = format!("{full}/{t}");
                    }
                    best = Some((0, full));
                }
                continue;
            };
            let mut depth = 1;
            let mut i = 0;
            while i < tail.len() {
                let t = unescape(tail[i]);
                let next = match node {
                    Value::Object(m) => m.get(&t),
                    Value::Array(a) => t.parse::<usize>().ok().and_then(|j| a.get(j)),
                    _ => None,
                };
                if let Some(n) = next {
                    node = n;
                    q = format!("{q}/{}", tail[i]);
                    depth += 1;
                    i += 1;
                } else if t == "allOf"
                    && tail.get(i + 1).is_some_and(|j| j.parse::<usize>().is_ok())
                {
                    i += 2;
                } else {
                    break;
                }
            }
            if best.as_ref().map_or(true, |(d, _)| depth > *d) {
                best = Some((depth, q));
            }
        }
        best.map(|(_, q)| q)
    }

    /// Whitespace between tokens (a call of the whitespace rule in a compact grammar).
    pub(crate) fn ws(&self) -> Expr {
        if let Some(r) = self.ws_rule {
            return Expr::Rule(r);
        }
        if !self.opts.any_whitespace || self.opts.max_whitespace == Some(0) {
            return Expr::Empty;
        }
        let any = |max| Expr::Repeat {
            expr: Box::new(Expr::Class(CharClass {
                negated: false,
                ranges: vec![(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)],
            })),
            min: 0,
            max,
        };
        let Some(lines) = self.opts.max_whitespace_newlines else {
            return any(self.opts.max_whitespace);
        };
        let Some(n) = self.opts.max_whitespace else {
            // h* (\n h*){0,lines}
            let tail = seq(vec![lit("\n"), repeat(blank(), 0, None)]);
            return seq(vec![repeat(blank(), 0, None), repeat(tail, 0, Some(lines))]);
        };
        if lines >= n || binomial(n + lines, lines) > MAX_WHITESPACE_SHAPES {
            return any(Some(n));
        }
        whitespace_lines(n, lines)
    }

    /// `item_separator ws` (`"," ws` by default): between members and items, after the
    /// whitespace that ends the one before.
    pub(crate) fn comma(&self) -> Expr {
        seq(vec![lit(&self.opts.item_separator), self.ws()])
    }

    /// `ws key_separator ws` (`ws ":" ws` by default): between a key and its value.
    pub(crate) fn colon(&self) -> Expr {
        let ws = self.ws();
        seq(vec![ws.clone(), lit(&self.opts.key_separator), ws])
    }

    /// A keyword that is not enforced: an error, or (lenient) a note.
    pub(crate) fn unsupported(
        &mut self,
        keyword: &str,
        pointer: &str,
        reason: &str,
    ) -> Result<(), JsonSchemaError> {
        if self.opts.lenient {
            self.ignored.push(IgnoredKeyword {
                keyword: keyword.into(),
                pointer: pointer.into(),
                reason: reason.into(),
            });
            Ok(())
        } else {
            Err(JsonSchemaError::Unsupported {
                keyword: keyword.into(),
                pointer: pointer.into(),
                reason: format!(
                    "{reason}; remove it, or set JsonSchemaOptions::lenient to compile \
                     without enforcing it (it is then listed as ignored)"
                ),
            })
        }
    }

    /// The grammar of the JSON values `schema` accepts (no surrounding whitespace), or
    /// `None` when it accepts none.
    pub(crate) fn schema(
        &mut self,
        schema: &Value,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        self.depth += 1;
        if self.depth > MAX_SCHEMA_DEPTH {
            self.depth -= 1;
            return Err(JsonSchemaError::Unsupported {
                keyword: "(nesting)".into(),
                pointer: ptr.into(),
                reason: format!(
                    "subschemas and `$ref` chains nested more than {MAX_SCHEMA_DEPTH} deep, the \
                     compiler's own bound (Limits::max_schema_depth cannot raise it); flatten \
                     the schema"
                ),
            });
        }
        let outer = std::mem::replace(&mut self.cur, ptr.to_string());
        let r = self.schema_inner(schema, ptr);
        self.cur = outer;
        self.depth -= 1;
        r
    }

    fn schema_inner(&mut self, schema: &Value, ptr: &str) -> Result<Option<Expr>, JsonSchemaError> {
        let obj = match schema {
            Value::Bool(b) => return Ok(b.then(|| self.any_value())),
            Value::Object(o) if self.untyped(o) => return Ok(Some(self.any_value())),
            Value::Object(o) => o,
            _ => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "(schema)".into(),
                    pointer: ptr.into(),
                    message: "a schema must be an object or a boolean".into(),
                })
            }
        };
        if let Some(o) = self.legacy(obj) {
            return self.schema_inner(&Value::Object(o), ptr);
        }
        if let Some(o) = unevaluated_as_additional(obj) {
            return self.schema_inner(&Value::Object(o), ptr);
        }
        if self.mentions_unevaluated(obj, ptr) {
            return match self.unevaluated(obj, ptr) {
                Err(JsonSchemaError::Unsupported {
                    keyword,
                    pointer,
                    reason,
                }) if self.opts.lenient => {
                    // Not enforced: compiled without `unevaluated*` (which accepts more).
                    let stripped = strip_unevaluated(obj);
                    if self.mentions_unevaluated(&stripped, ptr) {
                        return Err(JsonSchemaError::Unsupported {
                            keyword,
                            pointer,
                            reason,
                        });
                    }
                    // What is dropped is `unevaluated*` (here or in an in-place subschema).
                    let dropped = if obj.contains_key("unevaluatedItems")
                        && !obj.contains_key("unevaluatedProperties")
                    {
                        "unevaluatedItems"
                    } else {
                        "unevaluatedProperties"
                    };
                    self.ignored.push(IgnoredKeyword {
                        keyword: dropped.into(),
                        pointer: child(ptr, dropped),
                        reason: format!("`{keyword}` at {pointer}: {reason}"),
                    });
                    self.schema_inner(&Value::Object(stripped), ptr)
                }
                r => r,
            };
        }
        if obj.contains_key("allOf")
            || (obj.contains_key("$ref") && has_assertions(obj, ptr, &["$ref"]))
        {
            let (merged, origins) = self.flatten_traced(schema, ptr, 0)?;
            return match merged {
                None => Ok(None),
                Some(m) => self.traced(ptr, &origins, |s| s.object_schema(&m, ptr)),
            };
        }
        if let Some(r) = obj.get("$ref") {
            return self.reference(r, &child(ptr, "$ref")).map(Some);
        }
        self.object_schema(obj, ptr)
    }

    /// A schema object without `allOf` (and `$ref` only alone).
    fn object_schema(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        if let Some(r) = obj.get("$ref") {
            // Only reached after a merge that kept a lone `$ref` (cannot happen: merges
            // inline references); handled for completeness.
            if !has_assertions(obj, ptr, &["$ref"]) {
                return self.reference(r, &child(ptr, "$ref")).map(Some);
            }
        }
        if let Some(b) = self.dependency_branches(obj, ptr)? {
            return self.branches(b, ptr);
        }
        if let Some(b) = self.conditional_branches(obj, ptr)? {
            // Each branch is the rest with `if` and `then` (or a part of the negation of
            // `if`, and `else`) appended to its `allOf`: their places there are aliases.
            let n = obj
                .get("allOf")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let at = |i: usize| child(&child(ptr, "allOf"), &i.to_string());
            let mut alts = Vec::new();
            for (i, b) in b.into_iter().enumerate() {
                let aliases = [
                    (at(n), child(ptr, "if")),
                    (at(n + 1), child(ptr, if i == 0 { "then" } else { "else" })),
                ];
                alts.push(self.aliased(&aliases, |s| s.schema(&Value::Object(b), ptr))?);
            }
            return Ok(choice(alts));
        }
        if let Some(n) = obj.get("not") {
            if simple_not(n, &child(ptr, "not")) {
                let o = self.not_type(obj, n, ptr)?;
                return self.object_schema(&o, ptr);
            }
            if let Some(b) = self.not_branches(obj, ptr)? {
                return self.branches(b, ptr);
            }
            self.unsupported(
                "not",
                &child(ptr, "not"),
                "the negation of this schema has no exact grammar (`not` is enforced for \
                 types, null/boolean/number constants, bounds, `required` and `properties` \
                 of those)",
            )?;
            let mut o = obj.clone();
            o.remove("not");
            return self.object_schema(&o, ptr);
        }
        if let Some(one_of) = obj.get("oneOf") {
            return self.any_of(obj, "oneOf", one_of, ptr);
        }
        if let Some(any_of) = obj.get("anyOf") {
            return self.any_of(obj, "anyOf", any_of, ptr);
        }
        self.check_keywords(obj, ptr)?;
        self.typed(obj, ptr)
    }

    /// Refuses (or notes) every keyword that is not enforced.
    fn check_keywords(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<(), JsonSchemaError> {
        const SUPPORTED: &[&str] = &[
            "type",
            "enum",
            "const",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "prefixItems",
            "minItems",
            "maxItems",
            "uniqueItems",
            "minLength",
            "maxLength",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "format",
            "minProperties",
            "maxProperties",
            "pattern",
            "contains",
            "minContains",
            "maxContains",
            "patternProperties",
            "multipleOf",
            "propertyNames",
        ];
        for k in obj.keys() {
            if is_annotation(k, ptr)
                || SUPPORTED.contains(&k.as_str())
                || (ptr == "#" && k == "id" && obj[k].is_string())
                || harmless_id(obj, k, self.draft4)
            {
                continue;
            }
            if self.opts.ignore_unknown_keywords && !KNOWN_KEYWORDS.contains(&k.as_str()) {
                self.ignored.push(IgnoredKeyword {
                    keyword: k.clone(),
                    pointer: child(ptr, k),
                    reason: "not a JSON Schema keyword".into(),
                });
                continue;
            }
            let reason = match k.as_str() {
                "not" | "if" | "then" | "else" => "no exact construction yet",
                "$dynamicRef" | "$vocabulary" | "$recursiveRef" => {
                    "dynamic scopes and vocabularies are not supported; `$ref` is"
                }
                _ if KNOWN_KEYWORDS.contains(&k.as_str()) => "keyword not supported",
                _ => {
                    "not a JSON Schema 2020-12 keyword (set \
                     JsonSchemaOptions::ignore_unknown_keywords to skip such keywords)"
                }
            };
            self.unsupported(k, &child(ptr, k), reason)?;
        }
        Ok(())
    }
}

impl Builder<'_> {
    /// `obj` rewritten in the terms of 2020-12, or `None` when nothing changes: under a
    /// draft 3-7 `$schema`, a schema with `$ref` is the reference alone; draft 4's boolean
    /// `exclusiveMinimum`/`exclusiveMaximum` make their `minimum`/`maximum` exclusive
    /// (`false`: inclusive, so dropped); and [`legacy_items`].
    pub(crate) fn legacy(&self, obj: &Map<String, Value>) -> Option<Map<String, Value>> {
        if self.ref_alone && obj.len() > 1 {
            if let Some(r) = obj.get("$ref") {
                let mut o = Map::new();
                o.insert("$ref".into(), r.clone());
                return Some(o);
            }
        }
        let bounds = legacy_bounds(obj);
        let cur = bounds.as_ref().unwrap_or(obj);
        legacy_items(cur).or(bounds)
    }
}

impl Builder<'_> {
    /// `not` whose subschema is a boolean or only a `type`: folded into `type`.
    fn not_type(
        &mut self,
        obj: &Map<String, Value>,
        n: &Value,
        ptr: &str,
    ) -> Result<Map<String, Value>, JsonSchemaError> {
        let nptr = child(ptr, "not");
        let mut o = obj.clone();
        o.remove("not");
        let excluded = match n {
            Value::Bool(false) => return Ok(o),
            Value::Bool(true) => types::TypeSet::all(),
            // `not: {}` (annotations only): nothing is accepted.
            Value::Object(m) if !has_assertions(m, &nptr, &[]) => types::TypeSet::all(),
            Value::Object(m) if m.contains_key("type") && !has_assertions(m, &nptr, &["type"]) => {
                types::parse_types(m, &nptr)?
            }
            _ => {
                self.unsupported(
                    "not",
                    &nptr,
                    "only `not` of a boolean or of a `type` is supported",
                )?;
                return Ok(o);
            }
        };
        let own = types::parse_types(obj, ptr)?;
        if excluded.integer && !excluded.number && own.number {
            self.unsupported(
                "not",
                &nptr,
                "`not` integer inside number has no exact grammar",
            )?;
            return Ok(o);
        }
        let mut names = Vec::new();
        for (name, a, b) in [
            ("null", own.null, excluded.null),
            ("boolean", own.boolean, excluded.boolean),
            ("string", own.string, excluded.string),
            ("object", own.object, excluded.object),
            ("array", own.array, excluded.array),
            ("number", own.number, excluded.number),
            (
                "integer",
                own.integer && !own.number,
                excluded.number || excluded.integer,
            ),
        ] {
            if a && !b {
                names.push(Value::String(name.into()));
            }
        }
        if names.is_empty() {
            // Nothing is left: no value is accepted.
            o.insert("enum".into(), Value::Array(Vec::new()));
            o.remove("type");
            o.remove("const");
        } else {
            o.insert("type".into(), Value::Array(names));
        }
        Ok(o)
    }
}

/// Whether `not: n` folds into `type` ([`Builder::not_type`]): a boolean, a schema of
/// annotations only, or one with only `type`.
fn simple_not(n: &Value, nptr: &str) -> bool {
    match n {
        Value::Bool(_) => true,
        Value::Object(m) => {
            !has_assertions(m, nptr, &[])
                || (m.contains_key("type") && !has_assertions(m, nptr, &["type"]))
        }
        _ => false,
    }
}

/// Whether `obj` has keywords besides annotations and `except`.
pub(crate) fn has_assertions(obj: &Map<String, Value>, ptr: &str, except: &[&str]) -> bool {
    obj.keys()
        .any(|k| !is_annotation(k, ptr) && !except.contains(&k.as_str()))
}

/// The instance type a keyword constrains alone: an instance of any other type passes it
/// (JSON Schema 2020-12 Validation §6, Core §10.3; draft 4–7 `dependencies` and
/// `additionalItems`, draft 3 `divisibleBy`). Every format JSON Schema defines is a string
/// format. `None` for keywords that may reject any value (`allOf`, `not`, `$ref`, `enum`...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InstanceType {
    Object,
    Array,
    String,
    Number,
}

/// See [`InstanceType`].
pub(crate) fn keyword_instance_type(k: &str) -> Option<InstanceType> {
    Some(match k {
        "properties"
        | "required"
        | "additionalProperties"
        | "patternProperties"
        | "propertyNames"
        | "minProperties"
        | "maxProperties"
        | "dependentRequired"
        | "dependentSchemas"
        | "dependencies"
        | "unevaluatedProperties" => InstanceType::Object,
        "items" | "prefixItems" | "additionalItems" | "contains" | "minContains"
        | "maxContains" | "minItems" | "maxItems" | "uniqueItems" | "unevaluatedItems" => {
            InstanceType::Array
        }
        "minLength" | "maxLength" | "pattern" | "format" => InstanceType::String,
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf"
        | "divisibleBy" => InstanceType::Number,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    /// RFC 6901: `~` is written `~0` and `/` is written `~1`, in that order of meaning.
    #[test]
    fn a_child_pointer_escapes_its_token() {
        assert_eq!(super::child("#/properties", "a"), "#/properties/a");
        assert_eq!(super::child("#", "a/b~c"), "#/a~1b~0c");
        assert_eq!(super::child("#", "~1"), "#/~01");
        assert_eq!(super::child("", ""), "/");
    }
}
