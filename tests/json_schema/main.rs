//! The JSON Schema front end: keywords, formats, references, unique keys, the official
//! test suite and random walks over MaskBench schemas. One test binary; each module checks
//! one topic (its first lines say which).
//!
//! Run with `cargo test --release --test json_schema [filter]`.

#[path = "../common/mod.rs"]
mod common;
mod schema_check;

mod combinations;
mod conditionals;
mod core;
mod drafts;
mod enum_const;
mod formats_rfc;
mod formats_suite;
mod keyword_values;
mod merged_keywords;
mod one_of;
mod pattern_properties;
mod random_walks;
mod test_suite;
mod unevaluated;
mod unique_keys;
