//! Every `compile_*` entry point of [`GrammarCompiler`], in one place: each reads its
//! input, calls its front end's pure lowering (input, options and the compiler's [`Limits`]
//! in, grammar IR or the front end's error out), and compiles the IR through the grammar
//! cache and the pipeline. Every one returns [`CompileError`].

use super::pipeline::{KeyChecks, Source};
use super::{CompileError, CompiledGrammar, GrammarCompiler};
use crate::grammar::ebnf::parse_ebnf;
use crate::grammar::Grammar;
use crate::json_schema::{
    self, JsonSchemaError, JsonSchemaGrammar, JsonSchemaOptions, JsonSchemaSource,
};
use crate::regex::{regex_to_grammar, RegexOptions};
use crate::structural_tag::{self, StructuralTagSource};
use std::sync::Arc;

impl GrammarCompiler {
    /// Compiles an EBNF grammar (XGrammar's dialect or llama.cpp GBNF) whose root rule is
    /// named `root`.
    ///
    /// Token terminals (`<|im_end|>`, `<[151645]>`) naming a *special* token match exactly
    /// that token id; naming an ordinary token (such as Qwen3's non-special `<think>`), they
    /// match its text, by any tokenization. Stop tokens are allowed exactly where the root
    /// rule can end and never match grammar text.
    ///
    /// # Errors
    /// [`CompileError::Ebnf`] for syntax errors and undefined rules (with line:column),
    /// [`CompileError::UnknownToken`] / [`CompileError::TokenOutOfRange`] for token
    /// terminals the vocabulary lacks, [`CompileError::Automaton`] past size limits.
    pub fn compile_grammar(&self, ebnf: &str) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.compile_grammar_with_root(ebnf, "root")
    }

    /// As [`GrammarCompiler::compile_grammar`], with the root rule named `root`.
    ///
    /// # Errors
    /// As [`GrammarCompiler::compile_grammar`].
    pub fn compile_grammar_with_root(
        &self,
        ebnf: &str,
        root: &str,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.cached(
            "ebnf",
            || (ebnf.to_string(), root.to_string()),
            || {
                let g = parse_ebnf(ebnf, root)?;
                self.compile_ir(&g)
            },
        )
    }

    /// Compiles the built-in grammar of any JSON value (RFC 8259).
    ///
    /// # Errors
    /// None in practice; the signature matches the other compile calls.
    pub fn compile_builtin_json(&self) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.cached("builtin_json", Default::default, || {
            self.compile_ir(&crate::grammar::builtin::json_grammar())
        })
    }

    /// Compiles XGrammar's built-in JSON grammar: an object or an array with no whitespace
    /// around it ([`crate::grammar::json_object_or_array_grammar`]).
    ///
    /// # Errors
    /// None in practice; the signature matches the other compile calls.
    pub fn compile_builtin_json_object_or_array(
        &self,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.cached("builtin_json_object_or_array", Default::default, || {
            self.compile_ir(&crate::grammar::builtin::json_object_or_array_grammar())
        })
    }

    /// Compiles a grammar given as IR (what every front end produces).
    ///
    /// # Errors
    /// [`CompileError::Invalid`] when the IR breaks an invariant (dangling rule id, max <
    /// min), plus the errors of [`GrammarCompiler::compile_grammar`] after parsing.
    pub fn compile_ir(&self, grammar: &Grammar) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.compile_ir_keeping(
            Source::Borrowed(grammar),
            &[],
            &[],
            false,
            KeyChecks::default(),
        )
    }

    /// As [`GrammarCompiler::compile_ir`], but the rules with `keep[r]` set (indices past
    /// `keep`'s end count as unset) are never inlined into their callers: a front end's
    /// shared rules whose masks do not depend on where they are called (see
    /// `inline_rules`); those with `always[r]` set are inlined whatever their size (a front
    /// end's shorthand). The language is the same either way. With `unique_keys`, the
    /// output is one JSON value and matchers also forbid a key repeated in its object
    /// (`matcher::keys`); `keys.closed` (rule name, declared names) lists the closed
    /// objects whose keys they narrow to the names not yet written, each opened by its
    /// rule, and `keys.filters` the key rules whose completions their chart drops when
    /// they decode to one of the names (`parser::key_filter`).
    ///
    /// # Errors
    /// As [`GrammarCompiler::compile_ir`].
    pub(crate) fn compile_ir_keeping(
        &self,
        grammar: Source<'_>,
        keep: &[bool],
        always: &[bool],
        unique_keys: bool,
        keys: KeyChecks<'_>,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        let _compile = crate::mask::background::ForegroundCall::enter();
        let run = || self.compile_on_pool(grammar, keep, always, unique_keys, keys);
        match &self.pool {
            Some(pool) => pool.install(run),
            None => run(),
        }
    }

    /// Compiles a JSON Schema (text or `serde_json::Value`) against this compiler's
    /// vocabulary. See [`crate::json_schema::json_schema_to_grammar`] for what is
    /// supported.
    ///
    /// # Errors
    /// [`CompileError::JsonSchema`] with the [`JsonSchemaError`] of the front end (the
    /// keyword and JSON pointer of the first part that cannot be enforced exactly),
    /// [`CompileError::Limit`] for a limit exceeded (with the schema's pointer when one
    /// rule is to blame), or the errors of [`GrammarCompiler::compile_ir`].
    pub fn compile_json_schema<S: JsonSchemaSource + ?Sized>(
        &self,
        schema: &S,
        options: &JsonSchemaOptions,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        let value = schema.to_schema_value()?;
        self.cached(
            "json_schema",
            || (value.to_string(), format!("{options:?}")),
            || {
                let g = json_schema::to_grammar(
                    &value,
                    options,
                    self.limits(),
                    true,
                    json_schema::Form::Compact,
                )?;
                self.compile_json_schema_grammar(g)
            },
        )
    }

    /// Compiles the grammar of a JSON Schema, naming the schema place (JSON pointer) in the
    /// errors that come from one rule: a limit exceeded in a rule gets
    /// [`crate::LimitExceeded::pointer`]; a grammar that matches nothing because
    /// references only lead back to themselves becomes [`JsonSchemaError::Unsatisfiable`]
    /// at the first such `$ref`.
    fn compile_json_schema_grammar(
        &self,
        g: JsonSchemaGrammar,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        // Moved, not copied: the compiled grammar keeps it (a copy, and dropping the
        // front end's, were a tenth of a small schema's compile).
        let grammar = Arc::new(g.grammar);
        let place = |rule: &str| {
            // Helper rules of the lowering are named `{written rule}/{kind}`.
            let rule = rule.split('/').next().unwrap_or(rule);
            let i = grammar.rules.iter().position(|r| r.name == rule)?;
            g.pointers.get(i).cloned()
        };
        let by_name =
            |list: &[(crate::grammar::RuleId, Vec<String>)]| -> Vec<(String, Vec<String>)> {
                list.iter()
                    .map(|(r, names)| (grammar.rules[r.index()].name.clone(), names.clone()))
                    .collect()
            };
        let (closed, filters) = (by_name(&g.closed), by_name(&g.key_filters));
        let compiled = self.compile_ir_keeping(
            Source::Shared(grammar.clone()),
            &g.keep,
            &g.always,
            g.unique_keys,
            KeyChecks {
                closed: &closed,
                filters: &filters,
            },
        );
        compiled.map_err(|e| match e {
            CompileError::Limit(mut l) => {
                if l.pointer.is_none() {
                    l.pointer = l.rule.as_deref().and_then(place);
                }
                CompileError::Limit(l)
            }
            CompileError::EmptyLanguage { root } => {
                match grammar
                    .unproductive_rules()
                    .into_iter()
                    .find(|&r| r != grammar.root.index())
                {
                    Some(r) => CompileError::JsonSchema(JsonSchemaError::Unsatisfiable {
                        pointer: g.pointers[r].clone(),
                        reason: "this schema can never be completed: its references lead \
                                 back to it without a way out (a `$ref` cycle with no \
                                 alternative that ends)"
                            .into(),
                    }),
                    None => CompileError::EmptyLanguage { root },
                }
            }
            e => e,
        })
    }

    /// Compiles a regex: the whole output must match it (as Rust's `regex` with
    /// `^(?:pattern)$`). See the [`crate::regex`] module for the syntax and semantics
    /// supported; stop tokens are allowed exactly where the text matches.
    ///
    /// # Errors
    /// [`CompileError::Regex`] for syntax errors and unsupported constructs (with their
    /// position), the other variants when the grammar is refused (a size limit, or a
    /// pattern that matches nothing such as `[^\s\S]`: [`CompileError::EmptyLanguage`]).
    pub fn compile_regex(&self, pattern: &str) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.compile_regex_with(pattern, &RegexOptions::default())
    }

    /// As [`GrammarCompiler::compile_regex`], with options (unanchored mode, `.` and `\n`,
    /// case, nest limit).
    ///
    /// # Errors
    /// As [`GrammarCompiler::compile_regex`].
    pub fn compile_regex_with(
        &self,
        pattern: &str,
        opts: &RegexOptions,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.cached(
            "regex",
            || (pattern.to_string(), format!("{opts:?}")),
            || {
                let g = regex_to_grammar(pattern, opts)?;
                self.compile_ir(&g)
            },
        )
    }

    /// Compiles a structural tag in XGrammar's JSON (text, a `serde_json::Value`, or a
    /// [`crate::StructuralTag`]) against this compiler's vocabulary. See
    /// [`crate::structural_tag`] for the formats and their semantics.
    ///
    /// # Errors
    /// [`CompileError::StructuralTag`] for a tag that cannot be read or lowered (with its
    /// JSON path), or the errors of [`GrammarCompiler::compile_ir`].
    pub fn compile_structural_tag<S: StructuralTagSource + ?Sized>(
        &self,
        tag: &S,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        let tag = tag.to_structural_tag()?;
        let options = if self.defer_tool_rules {
            "deferred"
        } else {
            ""
        };
        self.cached(
            "structural_tag",
            || (format!("{tag:?}"), options.to_string()),
            || {
                // The compiler's limits hold for the schemas inside the tag too.
                let (grammar, tools, always) =
                    structural_tag::structural_tag_to_grammar_marking_tools(
                        &tag,
                        Some(self.vocabulary()),
                        self.limits(),
                    )?;
                if self.defer_tool_rules {
                    let run = || self.compile_deferring(grammar, tools, always);
                    match &self.pool {
                        Some(pool) => pool.install(run),
                        None => run(),
                    }
                } else {
                    self.compile_ir_keeping(
                        Source::Shared(Arc::new(grammar)),
                        &[],
                        &always,
                        false,
                        KeyChecks::default(),
                    )
                }
            },
        )
    }
}
