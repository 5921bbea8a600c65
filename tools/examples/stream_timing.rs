//! Streaming-parse timing for every registered tool-call format (issue 5): (a) one call
//! whose string argument is 80 KB, pushed in 4-byte deltas, and (b) 2,000 small calls
//! pushed in 64-byte deltas. Each text is built with the format's own renderer; the
//! streamed calls are checked against the whole-output parse. `work` is the bytes the
//! format's parser was handed per byte of text (`StreamingParser::scanned_bytes`).
//! Then (c) 80 KB of plain content and (d) 80 KB of reasoning (families with a reasoning
//! block), pushed in 4-byte deltas: `lag` is the most bytes that had arrived but not been
//! sent as content (reasoning) after any push, `quiet` the pushes that sent nothing.
//!
//! ```sh
//! cargo run --release --example stream_timing [-- FORMAT...]
//! ```

use std::time::Instant;

use serde_json::json;
use tokensieve_tools::{format_by_name, format_names, StreamEvent, Tool, ToolCall};

/// Seconds, `ToolCallEnd` events, and the bytes the parser was handed per byte of text.
fn stream(
    format: &dyn tokensieve_tools::ToolCallFormat,
    tools: &[Tool],
    text: &str,
    k: usize,
) -> (f64, usize, f64) {
    let t = Instant::now();
    let mut p = format.streaming_parser(tools);
    let mut ends = 0;
    let mut i = 0;
    let mut count = |events: Vec<StreamEvent>| {
        ends += events
            .iter()
            .filter(|e| matches!(e, StreamEvent::ToolCallEnd { .. }))
            .count()
    };
    while i < text.len() {
        let mut j = (i + k).min(text.len());
        while !text.is_char_boundary(j) {
            j += 1;
        }
        count(p.push(&text[i..j]));
        i = j;
    }
    count(p.finish());
    let work = p.scanned_bytes() as f64 / text.len() as f64;
    (t.elapsed().as_secs_f64(), ends, work)
}

/// Seconds, work per byte, the largest lag of the sent text behind what arrived, and the
/// pushes that sent nothing, for `opener` followed by `body` in `k`-byte deltas.
fn stream_text(
    format: &dyn tokensieve_tools::ToolCallFormat,
    tools: &[Tool],
    opener: &str,
    body: &str,
    k: usize,
) -> (f64, f64, usize, usize) {
    let text = format!("{opener}{body}");
    let t = Instant::now();
    let mut p = format.streaming_parser(tools);
    let (mut sent, mut lag, mut quiet) = (0, 0, 0);
    let mut i = 0;
    while i < text.len() {
        let j = (i + k).min(text.len());
        let events = p.push(&text[i..j]);
        i = j;
        let before = sent;
        for e in events {
            if let StreamEvent::Content(d) | StreamEvent::Reasoning(d) = e {
                sent += d.len();
            }
        }
        if i > opener.len() {
            lag = lag.max(i - opener.len() - sent);
            quiet += usize::from(sent == before);
        }
    }
    p.finish();
    let work = p.scanned_bytes() as f64 / text.len() as f64;
    (t.elapsed().as_secs_f64(), work, lag, quiet)
}

fn main() {
    let filter: Vec<String> = std::env::args().skip(1).collect();
    let tools = Tool::list_from_openai(&json!([{"type": "function", "function": {
        "name": "write_file", "description": "Writes a file",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                       "required": ["text"]}}}]))
    .unwrap();
    let words = [
        "lorem ",
        "ipsum ",
        "dolor ",
        "sit ",
        "amet, ",
        "consectetur\n",
        "adipiscing ",
        "elit. ",
    ];
    let mut long = String::new();
    let mut w = 0;
    while long.len() < 80_000 {
        long.push_str(words[w % words.len()]);
        w += 1;
    }
    let one = [ToolCall::new("write_file", json!({ "text": long }))];
    let many: Vec<ToolCall> = (0..2000)
        .map(|i| ToolCall::new("write_file", json!({ "text": format!("file {i}") })))
        .collect();
    println!(
        "{:<14} {:>12} {:>6} {:>18} {:>6}",
        "format", "80KB/4B (s)", "work", "2000 calls/64B (s)", "work"
    );
    let mut text_rows = Vec::new();
    for name in format_names() {
        if !filter.is_empty() && !filter.contains(&name) {
            continue;
        }
        let f = format_by_name(&name).unwrap();
        let a = f.render_calls(&one);
        let b = f.render_calls(&many);
        let (ta, na, wka) = stream(f.as_ref(), &tools, &a, 4);
        let (tb, nb, wkb) = stream(f.as_ref(), &tools, &b, 64);
        let wa = f.parse(&a, &tools).tool_calls.len();
        let wb = f.parse(&b, &tools).tool_calls.len();
        let ok = if na == wa && nb == wb && wa == 1 && wb == 2000 {
            ""
        } else {
            "  MISMATCH"
        };
        println!(
            "{name:<14} {ta:>12.3} {wka:>5.1}x {tb:>18.3} {wkb:>5.1}x   calls {na}/{wa} {nb}/{wb}{ok}"
        );
        // The way into plain content, and into reasoning, that this format reads.
        let reads = |opener: &str, reasoning: bool| {
            let p = f.parse(&format!("{opener}lorem ipsum"), &tools);
            let got = if reasoning { p.reasoning } else { p.content };
            got.as_deref() == Some("lorem ipsum")
        };
        let content = ["<|channel|>final<|message|>", ""]
            .into_iter()
            .find(|o| reads(o, false));
        let thinking = ["<think>", "[THINK]", "<|channel|>analysis<|message|>"]
            .into_iter()
            .find(|o| reads(o, true));
        let row = |o: Option<&str>| match o {
            Some(o) => {
                let (t, w, lag, quiet) = stream_text(f.as_ref(), &tools, o, &long, 4);
                format!("{t:>8.3} {w:>5.1}x {lag:>4} {quiet:>5}")
            }
            None => format!("{:>8} {:>6} {:>4} {:>5}", "-", "-", "-", "-"),
        };
        text_rows.push(format!("{name:<14} {}   {}", row(content), row(thinking)));
    }
    println!(
        "\n{:<14} {:>8} {:>6} {:>4} {:>5}   {:>8} {:>6} {:>4} {:>5}",
        "format", "text (s)", "work", "lag", "quiet", "think(s)", "work", "lag", "quiet"
    );
    for r in text_rows {
        println!("{r}");
    }
}
