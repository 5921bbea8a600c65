//! The declarations every built-in format shares, as macros used inside its
//! `impl ToolCallFormat`: the parse methods run by the shared driver
//! ([`crate::driver`]), the structural tag from an envelope ([`crate::tags::assemble`]) or
//! from the resolved choice, and the struct of a format that holds only its options. A
//! family then writes what is its own (markers, envelope, the tag and the reader of one
//! call), not the trait's signatures again.

/// The `parse_partial` of a built-in format: its `parse_partial_from` from the start
/// (every built-in format implements the resumable parse, so the plain one is this line
/// in each family's impl rather than the same three lines written per family).
macro_rules! parse_partial_from_start {
    () => {
        fn parse_partial(
            &self,
            text: &str,
            tools: &[$crate::Tool],
            at_end: bool,
        ) -> $crate::PartialOutput {
            self.parse_partial_from(text, &$crate::Settled::default(), tools, at_end)
        }
    };
}

/// The `parse_partial` and `parse_partial_from` of a family that the shared driver runs
/// (its reasoning block opening the output when `self.options.reasoning` is on):
/// * `calls: FAMILY, read` — calls begin at the markers of the [`crate::driver::Family`]
///   `FAMILY`; `read(text from the marker, marker index, tools, at_end)` reads one call
///   ([`crate::driver::Family::parse`]);
/// * `sections: SECTIONS, read` — calls sit in a section ([`crate::scan::parse_sectioned`]);
///   `read(call body, tools, at_end)` reads one;
/// * `arrays: FAMILY, marker_len` — each marker opens a JSON array of calls
///   ([`crate::call_array::parse_marked_arrays`]); `marker_len(marker index)` is its length;
/// * `own: METHOD` — the family's own `METHOD(&self, driver::Parse) -> PartialOutput`;
///   with `text_to_end: HOLDS`, a parse settled inside text that runs to the end of the
///   output reads the rest as content ([`crate::scan::rest_as_content`], holding back `HOLDS`).
macro_rules! parse_with_driver {
    (calls: $family:expr, $read:expr) => {
        parse_with_driver!(@parse |f: &Self, text, from, tools, at_end| {
            $family.parse(text, from, f.options.reasoning, tools, at_end, $read)
        });
    };
    (sections: $sections:expr, $read:expr) => {
        parse_with_driver!(@parse |f: &Self, text, from, tools: &[$crate::Tool], at_end| {
            let read = $read;
            let reasoning = f.options.reasoning;
            $crate::scan::parse_sectioned(text, from, reasoning, &$sections, at_end, |body| {
                read(body, tools, at_end)
            })
        });
    };
    (arrays: $family:expr, $marker_len:expr) => {
        parse_with_driver!(@parse |f: &Self, text, from, tools, at_end| {
            let reasoning = f.options.reasoning;
            $crate::call_array::parse_marked_arrays(
                &$family, text, from, reasoning, tools, at_end, $marker_len,
            )
        });
    };
    (own: $method:ident, text_to_end: $holds:expr) => {
        parse_with_driver!(@parse |f: &Self, text, from: &$crate::Settled, tools, at_end| {
            if from.content_open {
                // Settled inside text that runs to the end of the output: the rest of it.
                return $crate::scan::rest_as_content(text, from, $holds, at_end);
            }
            f.$method($crate::driver::Parse { text, from, tools, at_end })
        });
    };
    (own: $method:ident) => {
        parse_with_driver!(@parse |f: &Self, text, from, tools, at_end| {
            f.$method($crate::driver::Parse { text, from, tools, at_end })
        });
    };
    (@parse $parse:expr) => {
        parse_partial_from_start!();

        fn parse_partial_from(
            &self,
            text: &str,
            from: &$crate::Settled,
            tools: &[$crate::Tool],
            at_end: bool,
        ) -> $crate::PartialOutput {
            let parse = $parse;
            parse(self, text, from, tools, at_end)
        }
    };
}

/// The `structural_tag` method of a built-in format around `tag`, a closure
/// `|f: &Self, tools, choice, parallel| -> Result<StructuralTag, ToolError>` (the trait's
/// signature written once for the two ways below).
macro_rules! structural_tag_fn {
    ($tag:expr) => {
        fn structural_tag(
            &self,
            tools: &[$crate::Tool],
            choice: &$crate::ToolChoice,
            parallel: bool,
        ) -> Result<$crate::StructuralTag, $crate::ToolError> {
            let tag = $tag;
            tag(self, tools, choice, parallel)
        }
    };
}

/// The `structural_tag` of a family assembled from its envelope ([`crate::tags::assemble`] over
/// `self.envelope()` and `self.options`): `|f, options, t| { … }` gives the tag of one
/// call to the tool `t` (`f` is `self`, or `_`).
macro_rules! structural_tag_from_envelope {
    (|$f:pat_param, $options:ident, $t:pat_param| $body:block) => {
        structural_tag_fn!(|f: &Self,
                            tools: &[$crate::Tool],
                            choice: &$crate::ToolChoice,
                            parallel: bool|
         -> Result<$crate::StructuralTag, $crate::ToolError> {
            let $f = f;
            let $options = &f.options;
            let envelope = f.envelope();
            $crate::tags::assemble(&envelope, tools, choice, parallel, $options, |$t| $body)
        });
    };
}

/// The `structural_tag` of a family that builds its own structural-tag format from the
/// resolved choice ([`crate::ToolChoice::resolve`]): `|f, choice, mode, allowed, parallel| { … }`
/// returns the format for the [`CallMode`] `mode` over the `allowed` tools (`f` is
/// `self`); the tag is built under the family's name ([`crate::tags::structural_tag`]).
macro_rules! structural_tag_from_choice {
    (|$f:pat_param, $choice:pat_param, $mode:pat_param, $allowed:pat_param, $parallel:pat_param| $body:block) => {
        structural_tag_fn!(|f: &Self,
                            tools: &[$crate::Tool],
                            choice: &$crate::ToolChoice,
                            parallel: bool|
         -> Result<$crate::StructuralTag, $crate::ToolError> {
            let (mode, allowed) = choice.resolve(tools)?;
            let build = |$f: &Self,
                         $choice: &$crate::ToolChoice,
                         $mode: $crate::CallMode,
                         $allowed: Vec<&$crate::Tool>,
                         $parallel: bool|
             -> Result<serde_json::Value, $crate::ToolError> { $body };
            let format = build(f, choice, mode, allowed, parallel)?;
            $crate::tags::structural_tag(format, f.name())
        });
    };
}

/// Declares a built-in format that holds only its [`FormatOptions`]: the struct (with the
/// doc comment given), `new(options)` and `options()`.
macro_rules! format_with_options {
    ($(#[$attr:meta])* pub struct $name:ident;) => {
        $(#[$attr])*
        #[derive(Clone, Debug, Default)]
        pub struct $name {
            options: FormatOptions,
        }

        impl $name {
            /// The format with `options`.
            pub fn new(options: FormatOptions) -> Self {
                Self { options }
            }

            /// The options.
            pub fn options(&self) -> &FormatOptions {
                &self.options
            }
        }
    };
}

/// The `name` of a built-in format: the constant name it is registered under (the trait's
/// signature written once rather than in every family's impl).
macro_rules! format_name {
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }
    };
}

/// The `name`, `structural_tag`, parse, `render_calls` and `render_tool_result` of the
/// family `NAME` whose calls are the JSON blocks described by `BLOCK`
/// ([`crate::hermes::JsonBlock`]), found at the markers of the [`crate::driver::Family`]
/// `FAMILY` (the tag assembled from `self.envelope()`).
macro_rules! json_block_codec {
    ($name:literal, $block:expr, $family:expr) => {
        format_name!($name);

        structural_tag_from_envelope!(|_, options, t| { Ok($block.call_tag(t, options)) });

        parse_with_driver!(calls: $family, |s, _, tools, at_end| {
            $crate::hermes::read_json_block(s, $block, tools, at_end)
        });

        fn render_calls(&self, calls: &[$crate::ToolCall]) -> String {
            $block.render(calls)
        }

        fn render_tool_result(&self, _call: &$crate::ToolCall, result: &serde_json::Value) -> String {
            $block.render_result(result)
        }
    };
}
