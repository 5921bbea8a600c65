//! Pieces every tool-call parser needs, one file a concern: JSON reading ([`json`]),
//! free text and settling ([`content`]), a call's name and arguments ([`calls`]), JSON
//! arguments up to an end marker ([`arguments`]), call sections ([`sections`]), Python
//! literals ([`python`]) and XML parameter values ([`xml`]). The families reach them all as
//! `scan::NAME`.

#[allow(unused_imports)]
use serde_json::Value;

#[allow(unused_imports)]
use super::{PartialCall, PartialOutput, Tool, ToolCall, ToolParseError};

mod arguments;
mod calls;
mod content;
mod json;
mod python;
mod sections;
mod xml;

pub use arguments::*;
pub use calls::*;
pub use content::*;
pub use json::*;
pub use python::*;
pub use sections::*;
pub use xml::*;

#[cfg(test)]
mod tests;
