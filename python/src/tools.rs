//! Tool-calling bindings: tools from OpenAI JSON, `tool_choice`, a family's structural tag,
//! and the whole-output and streaming parsers (the crate `tokensieve-tools`).
//!
//! Every tool-calling binding lives in this file. Values cross the boundary as JSON text;
//! the Python side (`tokensieve/tools.py`) turns them into dicts.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde_json::{json, Value};

use tokensieve_tools::{
    format_by_name_with, format_names, FormatOptions, MalformedToolCall, ParsedOutput, StreamEvent,
    StreamingParser, Tool, ToolCall, ToolCallFormat, ToolChoice,
};

fn tool_err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn parse_json(text: &str, what: &str) -> PyResult<Value> {
    serde_json::from_str(text)
        .map_err(|e| PyValueError::new_err(format!("{what}: invalid JSON: {e}")))
}

/// A call in OpenAI's wire shape, with its id when the format carried one.
fn call_json(call: &ToolCall) -> Value {
    call.to_openai()
}

fn malformed_json(m: &MalformedToolCall) -> Value {
    json!({"text": m.text, "offset": m.offset, "error": m.error.to_string()})
}

fn parsed_json(out: &ParsedOutput) -> Value {
    json!({
        "content": out.content,
        "reasoning": out.reasoning,
        "tool_calls": out.tool_calls.iter().map(call_json).collect::<Vec<_>>(),
        "errors": out.errors.iter().map(malformed_json).collect::<Vec<_>>(),
    })
}

fn event_json(e: &StreamEvent) -> Value {
    match e {
        StreamEvent::Reasoning(t) => json!({"type": "reasoning", "text": t}),
        StreamEvent::Content(t) => json!({"type": "content", "text": t}),
        StreamEvent::ToolCallStart { index, id, name } => {
            json!({"type": "tool_call_start", "index": index, "id": id, "name": name})
        }
        StreamEvent::ToolCallArguments { index, delta } => {
            json!({"type": "tool_call_arguments", "index": index, "delta": delta})
        }
        StreamEvent::ToolCallEnd { index, call } => {
            json!({"type": "tool_call_end", "index": index, "tool_call": call_json(call)})
        }
        StreamEvent::Malformed(m) => {
            let mut v = malformed_json(m);
            v["type"] = json!("malformed");
            v
        }
    }
}

/// One model family's tool-call format with its tools (`tokensieve_tools::ToolCallFormat`).
#[pyclass(module = "tokensieve._core", name = "ToolCallFormat", frozen)]
struct PyToolCallFormat {
    format: Arc<dyn ToolCallFormat>,
    tools: Arc<Vec<Tool>>,
}

#[pymethods]
impl PyToolCallFormat {
    /// The format registered as `name` (see `format_names()`) for the tools of an OpenAI
    /// `tools` array (JSON text). `reasoning`: the output opens with the family's reasoning
    /// block; `any_order`: argument properties in any order; `text_after_calls`: free text
    /// may follow calls; `max_whitespace_cnt`: the most whitespace in one place in arguments
    /// (None: the engine's default).
    #[new]
    #[pyo3(signature = (name, tools_json, reasoning=false, any_order=false, text_after_calls=false, max_whitespace_cnt=None))]
    fn new(
        name: &str,
        tools_json: &str,
        reasoning: bool,
        any_order: bool,
        text_after_calls: bool,
        max_whitespace_cnt: Option<i64>,
    ) -> PyResult<Self> {
        let mut options = FormatOptions {
            reasoning,
            any_order,
            text_after_calls,
            ..FormatOptions::default()
        };
        if max_whitespace_cnt.is_some() {
            options.max_whitespace = crate::grammar::whitespace_count(max_whitespace_cnt)?;
        }
        let format = format_by_name_with(name, &options).ok_or_else(|| {
            PyValueError::new_err(format!(
                "no tool-call format named {name:?} (formats: {})",
                format_names().join(", ")
            ))
        })?;
        let tools = Tool::list_from_openai(&parse_json(tools_json, "tools")?).map_err(tool_err)?;
        Ok(Self {
            format,
            tools: Arc::new(tools),
        })
    }

    /// The registry name of the format.
    #[getter]
    fn name(&self) -> String {
        self.format.name().to_string()
    }

    /// The tools' names, in order.
    #[getter]
    fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.clone()).collect()
    }

    /// The structural tag (XGrammar's JSON text) for an OpenAI `tool_choice` (JSON text)
    /// and `parallel_tool_calls`.
    fn structural_tag(
        &self,
        tool_choice_json: &str,
        parallel_tool_calls: bool,
    ) -> PyResult<String> {
        let choice = ToolChoice::from_openai(&parse_json(tool_choice_json, "tool_choice")?)
            .map_err(tool_err)?;
        let tag = self
            .format
            .structural_tag(&self.tools, &choice, parallel_tool_calls)
            .map_err(tool_err)?;
        Ok(tag.to_json().to_string())
    }

    /// Parses a whole output: JSON text of `{"content", "reasoning", "tool_calls" (OpenAI
    /// shape), "errors"}`.
    fn parse(&self, text: &str) -> String {
        parsed_json(&self.format.parse(text, &self.tools)).to_string()
    }

    /// The tools' declaration for the prompt, as the family's template writes it.
    fn render_tools_prompt(&self) -> String {
        self.format.render_tools_prompt(&self.tools)
    }

    /// A streaming parser over this format and its tools.
    fn streaming_parser(&self) -> PyStreamingParser {
        PyStreamingParser::new(self.format.clone(), self.tools.clone())
    }
}

/// The streaming parser (`tokensieve_tools::StreamingParser`), owning its format and tools.
#[pyclass(module = "tokensieve._core", name = "StreamingParser", frozen)]
struct PyStreamingParser {
    // Declared first so it is dropped before the values it borrows.
    parser: Mutex<StreamingParser<'static>>,
    _format: Arc<dyn ToolCallFormat>,
    _tools: Arc<Vec<Tool>>,
}

impl PyStreamingParser {
    fn new(format: Arc<dyn ToolCallFormat>, tools: Arc<Vec<Tool>>) -> Self {
        // SAFETY: the parser borrows the format and the tools, which live on the heap behind
        // the two `Arc`s this struct keeps (they never move and are never mutated), and the
        // parser field is dropped before them.
        let f: &'static dyn ToolCallFormat = unsafe { &*(Arc::as_ptr(&format)) };
        let t: &'static [Tool] = unsafe { &*(tools.as_slice() as *const [Tool]) };
        Self {
            parser: Mutex::new(StreamingParser::new(f, t)),
            _format: format,
            _tools: tools,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut StreamingParser<'static>) -> R) -> PyResult<R> {
        let mut p = self
            .parser
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the streaming parser panicked earlier"))?;
        Ok(f(&mut p))
    }
}

fn events_json(events: &[StreamEvent]) -> String {
    Value::Array(events.iter().map(event_json).collect()).to_string()
}

#[pymethods]
impl PyStreamingParser {
    /// Feeds a delta of model output; the events it settled, as a JSON array.
    fn push(&self, delta: &str) -> PyResult<String> {
        self.with(|p| events_json(&p.push(delta)))
    }

    /// Ends the output; the remaining events, as a JSON array.
    fn finish(&self) -> PyResult<String> {
        self.with(|p| events_json(&p.finish()))
    }

    /// The output received so far.
    fn text(&self) -> PyResult<String> {
        self.with(|p| p.text().to_string())
    }
}

/// The names of the registered tool-call formats, sorted.
#[pyfunction(name = "tool_call_format_names")]
fn py_format_names() -> Vec<String> {
    format_names()
}

/// Adds the tool-calling classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyToolCallFormat>()?;
    m.add_class::<PyStreamingParser>()?;
    m.add_function(wrap_pyfunction!(py_format_names, m)?)?;
    Ok(())
}
