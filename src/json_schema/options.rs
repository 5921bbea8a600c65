//! [`JsonSchemaOptions`]: what the JSON Schema front end may choose (whitespace, digit
//! caps, property order, strictness, lenient mode, other documents).

use serde_json::Value;

use super::JsonSchemaError;

/// Options of the JSON Schema front end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonSchemaOptions {
    /// Allow any JSON whitespace (`[ \t\n\r]`) between tokens and around the value (default
    /// `true`, as XGrammar's `any_whitespace`). When `false`, the output is on one line:
    /// no whitespace but what [`JsonSchemaOptions::item_separator`] and
    /// [`JsonSchemaOptions::key_separator`] hold (none by default: compact JSON).
    pub any_whitespace: bool,
    /// With `any_whitespace`, the most whitespace characters in one place (default `None`:
    /// unbounded, as RFC 8259 allows). A cap stops a model from looping on whitespace.
    pub max_whitespace: Option<u32>,
    /// With `any_whitespace`, the most line feeds in one place (default `None`: as many as
    /// `max_whitespace` allows). `Some(1)` keeps pretty-printed JSON (a line break then
    /// indentation) and refuses runs of blank lines. Exact while `(max_whitespace + n
    /// choose n)` is at most 4096 (any `n` up to 3 within 12 characters); past that only
    /// `max_whitespace` applies.
    pub max_whitespace_newlines: Option<u32>,
    /// Whitespace before and after the root value when `any_whitespace` is on (default
    /// `true`: `" {}\n"` is accepted). `false` refuses it there, keeping it between tokens,
    /// as XGrammar 0.2.9's `compile_json_schema(any_whitespace=True)` does.
    pub root_whitespace: bool,
    /// The text between two members of an object and between two items of an array
    /// (default `","`: compact JSON). Python's `json.dumps` and XGrammar's
    /// `separators[0]`: XGrammar's default with `any_whitespace=False` is `", "` (`","`
    /// with an indent). Written as given; with `any_whitespace`, whitespace is still
    /// allowed before and after it. `const` and `enum` values are written compact
    /// whatever it is, as XGrammar writes them.
    pub item_separator: String,
    /// The text between a key and its value (default `":"`). `separators[1]` of
    /// `json.dumps` and XGrammar (whose default with `any_whitespace=False` is `": "`);
    /// written as [`JsonSchemaOptions::item_separator`] is.
    pub key_separator: String,
    /// The most digits in one run of a JSON `number` or `integer` (default `None`: unbounded,
    /// as RFC 8259 allows). Small models can loop on digits (`0.000000…`) until their token
    /// budget runs out; a cap ends such a run. Counted in digits per run: the integer part,
    /// the fraction, the exponent, and the zero fraction of an integer (`6000.000`) are
    /// each at most `n` digits (at least one where one is required). Only runs that the
    /// schema leaves unbounded are capped: a range such as `"maximum": 100000` still
    /// accepts `100000`, and `const`/`enum` numbers are written as given (within bounded
    /// ranges, a fraction of free digits may reach a little past `n`, never unbounded).
    /// Strings (`"pattern": "^[0-9]+$"`) are not affected, nor the digit automaton of an
    /// integer `multipleOf` without an upper bound. The cap only narrows: every number
    /// accepted is still valid for the schema.
    pub max_number_digits: Option<u32>,
    /// Declared properties in any order (default `false`: in the order of the schema's map),
    /// with required keys enforced and no key twice. Through
    /// [`crate::GrammarCompiler::compile_json_schema`], objects whose undeclared keys are
    /// open-ended (`additionalProperties` not `false`, no `patternProperties` but `.*`-like
    /// ones, no `propertyNames`) and that have no `maxProperties` take every order, whatever the number of properties (the
    /// matcher forbids repeated keys, so the grammar only counts the required names
    /// written). Other objects, and the grammar of [`json_schema_to_grammar`](super::json_schema_to_grammar), are exact
    /// for objects of up to 8 named properties, required names that `properties` does not
    /// declare included (fewer with `minProperties` or `maxProperties`: it has a state per
    /// set of written properties and count, at most 512); larger objects are cut into chunks
    /// of up to 6 (in declared order) whose members come in any order among themselves, a
    /// subset of the orders (extra keys may repeat in the grammar alone).
    pub any_order: bool,
    /// Undeclared properties are forbidden when `additionalProperties` is absent (the spec
    /// default allows them). Off by default.
    pub strict: bool,
    /// Ignore properties of schema objects that are not JSON Schema keywords of any draft
    /// (vendor extensions such as `x-kubernetes-group-version-kind`, or `example`), which
    /// assert nothing; they are listed in [`JsonSchemaGrammar::ignored`](super::JsonSchemaGrammar::ignored). Off by default:
    /// every keyword that is not enforced is then an error, misspellings included.
    pub ignore_unknown_keywords: bool,
    /// Ignore keywords that are not enforced instead of failing (they are listed in
    /// [`JsonSchemaGrammar::ignored`](super::JsonSchemaGrammar::ignored)). The grammar then accepts more than the schema.
    pub lenient: bool,
    /// Declared property names may be written in every spelling JSON allows (RFC 8259 §7):
    /// each character raw, as a two-character escape where one exists, or as `\uHHHH` in
    /// either case (a surrogate pair past U+FFFF), so `{"\u0061": 1}` is the declared
    /// property `a`, its value checked against `a`'s schema. Default `false`: declared names
    /// are written in their canonical spelling only (`serde_json`'s, as XGrammar and
    /// llguidance write them), which is what models write; the escaped spellings cost about
    /// five more automaton states per character of each name. Either way an undeclared key
    /// that decodes to a declared name is never an extra key, and no key appears twice
    /// decoded. With this option, a closed `any_order` object of more than 8 declared names
    /// takes the orders of its chunks only (the matcher's narrowing of keys to the names
    /// left reads names as written, not decoded).
    pub escaped_declared_keys: bool,
    /// Strings that never occur, as written, inside a JSON string the grammar writes freely
    /// (default none): string values without `pattern`, `format`, `minLength` or
    /// `maxLength`, keys of objects that declare no property, and strings and keys inside
    /// values of any shape (other keys and bounded strings are not narrowed). Tool-call formats list their markers here (`<tool_call>`,
    /// `</tool_call>`), so an argument cannot end or open a call from inside a string.
    /// Matched on the string as written: `\u003ctool_call>` (a decoded `<tool_call>`) is
    /// still allowed, and since an escape sequence restarts the match, a string holding
    /// `"`, `\` or a control character (which a JSON string writes only escaped) is not
    /// excluded. Enum and const values are written as the schema gives them.
    pub string_excludes: Vec<String>,
    /// Other documents that `$ref` may name, as (absolute URI, document) pairs. Nothing is
    /// fetched: a reference to a document that is not here is an error naming it.
    pub documents: Vec<(String, Value)>,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        JsonSchemaOptions {
            any_whitespace: true,
            max_whitespace: None,
            max_whitespace_newlines: None,
            root_whitespace: true,
            item_separator: ",".into(),
            key_separator: ":".into(),
            max_number_digits: None,
            any_order: false,
            strict: false,
            ignore_unknown_keywords: false,
            lenient: false,
            escaped_declared_keys: false,
            string_excludes: Vec::new(),
            documents: Vec::new(),
        }
    }
}

impl JsonSchemaOptions {
    /// [`JsonSchemaError::InvalidOption`] unless `item_separator` holds exactly one `,` and
    /// `key_separator` exactly one `:`, and neither holds the other one's character, a
    /// quote, a backslash or a bracket: the matcher reads its output as JSON to keep object
    /// keys unique (`matcher::keys`), so a separator must read as the one it stands for.
    /// Other text (spaces, a newline) may surround it. XGrammar also takes separators such
    /// as `(";", "=")`; they are refused here.
    ///
    /// # Errors
    /// [`JsonSchemaError::InvalidOption`] naming the separator and its value.
    pub fn check_separators(&self) -> Result<(), JsonSchemaError> {
        let check = |option: &'static str, sep: &str, want: char, other: char| {
            let count = sep.chars().filter(|&c| c == want).count();
            let bad = sep
                .chars()
                .find(|&c| c == other || matches!(c, '"' | '\\' | '{' | '}' | '[' | ']'));
            let reason = if count != 1 {
                format!("{sep:?} must hold exactly one `{want}` (it holds {count})")
            } else if let Some(c) = bad {
                format!("{sep:?} must not hold {c:?}")
            } else {
                return Ok(());
            };
            Err(JsonSchemaError::InvalidOption { option, reason })
        };
        check("item_separator", &self.item_separator, ',', ':')?;
        check("key_separator", &self.key_separator, ':', ',')
    }
}
