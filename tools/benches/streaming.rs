//! Streaming tool-call parsing against the whole-output parse, per family (issue 23, item 2):
//! each text is parsed whole (`ToolCallFormat::parse`) and streamed in 8-byte deltas through a
//! `StreamingParser`, each event forwarded after its delta, in two ways: `push_with` (events
//! shown by reference, buffers reused: the cheapest) and `push_into` one vector drained after
//! each delta (the events owned); then `finish`. Two texts per family, written by the
//! family's own renderer:
//!
//! * `calls`: back-to-back calls of one tool (`{"text": "file N …"}`), about 1 MB;
//! * `long`: one call whose string argument is 1 MB of prose.
//!
//! The Mistral pre-v11 array syntax (`[TOOL_CALLS][{…}, {…}]`) is measured as
//! `mistral_array` beside the registered `mistral` (v11+ `[TOOL_CALLS]NAME[ARGS]{…}`);
//! the aliases `openai`, `qwen3_xml` and `json` are the formats of `harmony`, `qwen3_coder`
//! and `json_array`, and are skipped.
//!
//! Before criterion runs, a table is printed: per family and text, the median of `ROUNDS`
//! whole parses and streams of each way timed side by side, their ratios, and the stream's
//! parse work (bytes handed to the format's parser per byte of text,
//! `StreamingParser::scanned_bytes`). The target is a ratio of at most 3.
//!
//! ```text
//! taskset -c 1 cargo bench -p tokensieve-tools --bench streaming [-- FILTER]
//! ```
//!
//! FILTER: a family's name selects it alone, other text every family whose name holds it.
//!
//! `STREAMING_TABLE_ONLY=1` prints the table and skips criterion; `STREAMING_TEXT=calls` or
//! `long` limits the table to one text, `STREAMING_ROUNDS=N` sets the runs per figure (3),
//! and `STREAMING_API=with` or `into` streams one way only (for a count of instructions
//! under callgrind: `streaming::stream` is then the stream, `ToolCallFormat::parse` the
//! whole parse).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use serde_json::json;
use tokensieve_tools::{
    format_by_name, format_names, Mistral, StreamEvent, Tool, ToolCall, ToolCallFormat,
};

/// Bytes per delta.
const DELTA: usize = 8;
/// Target length of each text.
const SIZE: usize = 1 << 20;
/// Timed runs per figure of the table (the median is printed).
const ROUNDS: usize = 3;

fn tools() -> Vec<Tool> {
    Tool::list_from_openai(&json!([{"type": "function", "function": {
        "name": "write_file", "description": "Writes a file",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                       "required": ["text"]}}}]))
    .expect("one valid tool")
}

/// `SIZE` bytes of prose with spaces and newlines (a JSON string escapes the newlines).
fn prose(len: usize) -> String {
    let words = ["lorem ", "ipsum ", "dolor ", "sit ", "amet,\n", "elit. "];
    let mut s = String::with_capacity(len + 8);
    let mut w = 0;
    while s.len() < len {
        s.push_str(words[w % words.len()]);
        w += 1;
    }
    s
}

/// The families measured: every registered name but the aliases, and the Mistral array.
fn families() -> Vec<(String, Arc<dyn ToolCallFormat>)> {
    let mut out: Vec<(String, Arc<dyn ToolCallFormat>)> = format_names()
        .into_iter()
        .filter(|n| !matches!(n.as_str(), "openai" | "qwen3_xml" | "json"))
        .map(|n| {
            let f = format_by_name(&n).expect("a registered name");
            (n, f)
        })
        .collect();
    out.push(("mistral_array".into(), Arc::new(Mistral::array())));
    out
}

/// Back-to-back calls rendered by `f`, about `SIZE` bytes.
fn many_calls(f: &dyn ToolCallFormat) -> (String, usize) {
    let one = f.render_calls(&[call(0)]).len();
    let n = SIZE / one.max(1) + 1;
    let calls: Vec<ToolCall> = (0..n).map(call).collect();
    (f.render_calls(&calls), n)
}

fn call(i: usize) -> ToolCall {
    ToolCall::new(
        "write_file",
        json!({ "text": format!("file {i}: lorem ipsum dolor") }),
    )
}

/// One call with a `SIZE`-byte string argument.
fn long_call(f: &dyn ToolCallFormat) -> String {
    f.render_calls(&[ToolCall::new("write_file", json!({ "text": prose(SIZE) }))])
}

/// How the stream hands its events over.
#[derive(Clone, Copy)]
enum Api {
    /// `StreamingParser::push_with`: each event shown by reference, its buffers reused.
    With,
    /// `StreamingParser::push_into` one vector, drained (the events owned) after each delta.
    Into,
}

/// Streams `text` in `DELTA`-byte deltas as a serving engine would, forwarding each event
/// after each delta (here: counting the ends); returns the calls ended and the parse work.
fn stream(f: &dyn ToolCallFormat, tools: &[Tool], text: &str, api: Api) -> (usize, usize) {
    let mut p = f.streaming_parser(tools);
    let mut ends = 0;
    let mut events = Vec::new();
    let mut forward = |e: &StreamEvent| {
        ends += usize::from(matches!(e, StreamEvent::ToolCallEnd { .. }));
        black_box(e);
    };
    let mut i = 0;
    while i < text.len() {
        let mut j = (i + DELTA).min(text.len());
        while !text.is_char_boundary(j) {
            j += 1;
        }
        match api {
            Api::With => p.push_with(&text[i..j], &mut forward),
            Api::Into => {
                p.push_into(&text[i..j], &mut events);
                events.drain(..).for_each(|e| forward(&e));
            }
        }
        i = j;
    }
    p.finish().iter().for_each(forward);
    (ends, p.scanned_bytes())
}

/// The median of `v` (NaN for none: a way not streamed).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// One row of the table: whole (ms), streamed with `push_with` (ms), ratio, with
/// `push_into` (ms), ratio, work per byte.
fn row(f: &dyn ToolCallFormat, tools: &[Tool], text: &str, calls: usize) -> String {
    let (mut whole, mut with, mut into) = (Vec::new(), Vec::new(), Vec::new());
    let mut work = 0;
    let mut note = "";
    let rounds = std::env::var("STREAMING_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS);
    let api = std::env::var("STREAMING_API").ok();
    for _ in 0..rounds {
        let t = Instant::now();
        let parsed = black_box(f.parse(black_box(text), tools));
        whole.push(t.elapsed().as_secs_f64());
        for (api, times) in [(Api::With, &mut with), (Api::Into, &mut into)]
            .into_iter()
            .filter(|(a, _)| {
                let name = match a {
                    Api::With => "with",
                    Api::Into => "into",
                };
                api.as_deref().map_or(true, |only| only == name)
            })
        {
            let t = Instant::now();
            let (ends, scanned) = stream(f, tools, black_box(text), api);
            times.push(t.elapsed().as_secs_f64());
            work = scanned;
            if parsed.tool_calls.len() != calls || ends != calls {
                note = "  CALLS DIFFER";
            }
        }
    }
    let (w, s, o) = (median(whole), median(with), median(into));
    format!(
        "{:>9.1} {:>9.1} {:>6.2} {:>9.1} {:>6.2} {:>5.1}x{note}",
        w * 1e3,
        s * 1e3,
        s / w,
        o * 1e3,
        o / w,
        work as f64 / text.len() as f64
    )
}

fn main() {
    let tools = tools();
    let filter: Option<String> = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-') && a != "streaming");
    // A filter naming a family exactly selects it alone (`glm4`, not `glm45`), else every
    // family whose name contains it.
    let all = families();
    let exact = filter.as_ref().filter(|f| all.iter().any(|(n, _)| n == *f));
    let families: Vec<_> = all
        .into_iter()
        .filter(|(n, _)| match (exact, &filter) {
            (Some(f), _) => n == f,
            (None, Some(f)) => n.contains(f.as_str()),
            (None, None) => true,
        })
        .collect();
    let only = std::env::var("STREAMING_TEXT").ok();
    let texts: Vec<(String, String, usize, String)> = families
        .iter()
        .map(|(name, f)| {
            let (calls, n) = many_calls(f.as_ref());
            (name.clone(), calls, n, long_call(f.as_ref()))
        })
        .collect();
    println!(
        "{:<19} {:<6} {:>5} {:>9} {:>9} {:>6} {:>9} {:>6} {:>6}",
        "family", "text", "KB", "whole ms", "with ms", "ratio", "into ms", "ratio", "work"
    );
    for ((name, f), (_, calls, n, long)) in families.iter().zip(&texts) {
        for (kind, text, k) in [("calls", calls, *n), ("long", long, 1)] {
            if only.as_deref().is_some_and(|o| o != kind) {
                continue;
            }
            println!(
                "{name:<19} {kind:<6} {:>5} {}",
                text.len() / 1024,
                row(f.as_ref(), &tools, text, k)
            );
        }
    }
    if std::env::var_os("STREAMING_TABLE_ONLY").is_some() {
        return;
    }
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    for ((name, f), (_, calls, _, long)) in families.iter().zip(&texts) {
        let mut g = c.benchmark_group(format!("streaming/{name}"));
        for (kind, text) in [("calls", calls), ("long", long)] {
            g.throughput(Throughput::Bytes(text.len() as u64));
            g.bench_with_input(BenchmarkId::new("whole", kind), text, |b, t| {
                b.iter(|| f.parse(black_box(t), &tools))
            });
            g.bench_with_input(BenchmarkId::new("8B push_with", kind), text, |b, t| {
                b.iter(|| stream(f.as_ref(), &tools, black_box(t), Api::With))
            });
            g.bench_with_input(BenchmarkId::new("8B push_into", kind), text, |b, t| {
                b.iter(|| stream(f.as_ref(), &tools, black_box(t), Api::Into))
            });
        }
        g.finish();
    }
    c.final_summary();
}
