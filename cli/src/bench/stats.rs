//! Figures from the runs: distributions, the per-engine table, the ratio table.

use std::fmt::Write as _;

use serde::Serialize;

use super::engine::{Outcome, SchemaRun};

/// A distribution: count, mean and nearest-rank percentiles, in the unit of its samples.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Dist {
    /// Number of samples.
    pub n: usize,
    /// Arithmetic mean (0 when empty).
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest sample.
    pub max: f64,
}

impl Dist {
    /// The distribution of `samples` (sorted here). Percentile p is the sample at rank
    /// `ceil(p·n)` (1-based).
    pub fn of(mut samples: Vec<f64>) -> Dist {
        if samples.is_empty() {
            return Dist::default();
        }
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let pct = |p: f64| samples[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
        Dist {
            n,
            mean: samples.iter().sum::<f64>() / n as f64,
            p50: pct(0.50),
            p90: pct(0.90),
            p99: pct(0.99),
            p999: pct(0.999),
            max: samples[n - 1],
        }
    }
}

/// One schema's own figures, every schema of the run in order (the report's `per_schema`),
/// so a slow schema can be followed across runs without the raw per-step times.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SchemaFigures {
    /// The schema (`<collection>/<file>`).
    pub schema: String,
    /// ms from the schema to the first mask; `None` when the engine refused it or failed
    /// on its first mask.
    pub compile_ms: Option<f64>,
    /// Masks computed over all its instances.
    pub masks: usize,
    /// Mean mask time, µs (0 when no mask was computed).
    pub mask_mean_us: f64,
    /// Slowest single mask, µs (0 when no mask was computed).
    pub mask_max_us: f64,
    /// Memory of the compiled grammar after its instances, KiB, when the engine says.
    pub memory_kib: Option<f64>,
}

impl SchemaFigures {
    /// The figures of one schema's run.
    pub fn of(run: &SchemaRun) -> SchemaFigures {
        let times = run.instances.iter().flat_map(|i| &i.mask_us);
        let (mut sum, mut max, mut masks) = (0.0f64, 0.0f64, 0usize);
        for &us in times {
            sum += us as f64;
            max = max.max(us as f64);
            masks += 1;
        }
        SchemaFigures {
            schema: run.schema.clone(),
            compile_ms: run.compile_ms,
            masks,
            mask_mean_us: if masks == 0 { 0.0 } else { sum / masks as f64 },
            mask_max_us: max,
            memory_kib: run.memory_bytes.map(|b| b as f64 / 1024.0),
        }
    }
}

/// One schema's value of some figure, for the "worst schemas" lists.
#[derive(Clone, Debug, Serialize)]
pub struct Worst {
    /// The schema (`<collection>/<file>`).
    pub schema: String,
    /// The value (unit given by the list).
    pub value: f64,
    /// Where: instance and step of a mask, when the figure is one mask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<(usize, usize)>,
}

/// Everything measured for one engine over a selection of schemas and instances.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Figures {
    /// Schemas selected.
    pub schemas: usize,
    /// Of those, compiled to a first mask.
    pub compiled: usize,
    /// Of those, refused or failed.
    pub failed: usize,
    /// Valid instances of the compiled schemas selected.
    pub instances: usize,
    /// Of those, accepted to the end (stop token included).
    pub accepted: usize,
    /// Of those, rejected at some token (or whose mask failed).
    pub rejected: usize,
    /// Tokens fed (stop tokens included, rejected tokens included).
    pub tokens_fed: usize,
    /// Steps where the mask bit of the forced token disagreed with `accept`.
    pub mask_mismatches: usize,
    /// Schema → first mask, ms.
    pub compile_ms: Dist,
    /// Every mask, µs.
    pub mask_us: Dist,
    /// Masks that allowed exactly one token, µs.
    pub forced_mask_us: Dist,
    /// Masks that allowed zero or several tokens, µs.
    pub other_mask_us: Dist,
    /// Every accept call, µs.
    pub accept_us: Dist,
    /// Memory per compiled grammar, bytes (`None` when the engine does not say).
    pub memory_bytes: Option<Dist>,
    /// Total number of masks computed (= `mask_us.n`).
    pub total_masks: usize,
    /// Slowest compiles to first mask (ms), worst first.
    pub worst_compile: Vec<Worst>,
    /// Slowest single masks (µs), one per schema, worst first.
    pub worst_mask: Vec<Worst>,
    /// Largest per-schema mean mask time (µs), worst first.
    pub worst_mean_mask: Vec<Worst>,
    /// Largest grammars (memory at the end of the schema's run, KiB), largest first; empty
    /// when the engine does not say.
    pub worst_memory: Vec<Worst>,
    /// Refusal reasons (first words of the message) with their counts, most common first.
    pub failures: Vec<(String, usize)>,
}

const WORST: usize = 8;

fn top(mut v: Vec<Worst>) -> Vec<Worst> {
    v.sort_by(|a, b| b.value.total_cmp(&a.value));
    v.truncate(WORST);
    v
}

/// A short key for a failure message: up to its first 60 characters, numbers and pointers
/// cut off at the first `#/` or `:`.
fn failure_key(msg: &str) -> String {
    let cut = msg
        .find(" at #")
        .or_else(|| msg.find(" at /"))
        .unwrap_or(msg.len());
    msg[..cut].chars().take(70).collect()
}

impl Figures {
    /// Figures of `runs` (one per schema) over the schemas `keep_schema` selects and, of
    /// their instances, those `keep_instance(schema, instance)` selects.
    pub fn of(
        runs: &[SchemaRun],
        keep_schema: impl Fn(usize) -> bool,
        keep_instance: impl Fn(usize, usize) -> bool,
    ) -> Figures {
        let mut f = Figures::default();
        let (mut compile, mut masks, mut forced, mut other, mut accepts, mut memory) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let (mut worst_compile, mut worst_mask, mut worst_mean) = (vec![], vec![], vec![]);
        let mut worst_memory = vec![];
        let mut failures: std::collections::BTreeMap<String, usize> = Default::default();
        let mut has_memory = false;
        for (s, run) in runs.iter().enumerate() {
            if !keep_schema(s) {
                continue;
            }
            f.schemas += 1;
            let Some(ms) = run.compile_ms else {
                f.failed += 1;
                let key = failure_key(run.error.as_deref().unwrap_or("?"));
                *failures.entry(key).or_default() += 1;
                continue;
            };
            f.compiled += 1;
            compile.push(ms);
            worst_compile.push(Worst {
                schema: run.schema.clone(),
                value: ms,
                at: None,
            });
            if let Some(b) = run.memory_bytes {
                has_memory = true;
                memory.push(b as f64);
                worst_memory.push(Worst {
                    schema: run.schema.clone(),
                    value: b as f64 / 1024.0,
                    at: None,
                });
            }
            let (mut sum, mut n, mut slowest) = (0.0f64, 0usize, None::<(f64, usize, usize)>);
            for (i, inst) in run.instances.iter().enumerate() {
                if !keep_instance(s, i) {
                    continue;
                }
                f.instances += 1;
                match inst.outcome {
                    Outcome::Accepted => f.accepted += 1,
                    _ => f.rejected += 1,
                }
                f.tokens_fed += inst.accept_us.len();
                f.mask_mismatches += inst.mask_mismatches;
                for (step, (&us, &one)) in inst.mask_us.iter().zip(&inst.forced).enumerate() {
                    let us = us as f64;
                    masks.push(us);
                    if one {
                        forced.push(us);
                    } else {
                        other.push(us);
                    }
                    sum += us;
                    n += 1;
                    if slowest.map_or(true, |(w, _, _)| us > w) {
                        slowest = Some((us, i, step));
                    }
                }
                accepts.extend(inst.accept_us.iter().map(|&us| us as f64));
            }
            if let Some((us, i, step)) = slowest {
                worst_mask.push(Worst {
                    schema: run.schema.clone(),
                    value: us,
                    at: Some((i, step)),
                });
                worst_mean.push(Worst {
                    schema: run.schema.clone(),
                    value: sum / n as f64,
                    at: None,
                });
            }
        }
        f.total_masks = masks.len();
        f.compile_ms = Dist::of(compile);
        f.mask_us = Dist::of(masks);
        f.forced_mask_us = Dist::of(forced);
        f.other_mask_us = Dist::of(other);
        f.accept_us = Dist::of(accepts);
        f.memory_bytes = has_memory.then(|| Dist::of(memory));
        f.worst_compile = top(worst_compile);
        f.worst_mask = top(worst_mask);
        f.worst_mean_mask = top(worst_mean);
        f.worst_memory = top(worst_memory);
        let mut failures: Vec<_> = failures.into_iter().collect();
        failures.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        failures.truncate(12);
        f.failures = failures;
        f
    }
}

/// A row of counts: label, and how to print it from [`Figures`].
type CountRow = (&'static str, fn(&Figures) -> String);

/// The rows of the tables: label, and how to read the value from [`Figures`].
type Row = (&'static str, fn(&Figures) -> Option<f64>);

const ROWS: &[Row] = &[
    ("compile → first mask p50 (ms)", |f| {
        Some(f.compile_ms.p50)
    }),
    ("compile → first mask p90 (ms)", |f| {
        Some(f.compile_ms.p90)
    }),
    ("compile → first mask p99 (ms)", |f| {
        Some(f.compile_ms.p99)
    }),
    ("compile → first mask max (ms)", |f| {
        Some(f.compile_ms.max)
    }),
    ("mask mean (µs)", |f| Some(f.mask_us.mean)),
    ("mask p50 (µs)", |f| Some(f.mask_us.p50)),
    ("mask p90 (µs)", |f| Some(f.mask_us.p90)),
    ("mask p99 (µs)", |f| Some(f.mask_us.p99)),
    ("mask p99.9 (µs)", |f| Some(f.mask_us.p999)),
    ("mask max (µs)", |f| Some(f.mask_us.max)),
    ("forced (1-token) masks", |f| {
        Some(f.forced_mask_us.n as f64)
    }),
    ("forced mask mean (µs)", |f| Some(f.forced_mask_us.mean)),
    ("forced mask p50 (µs)", |f| Some(f.forced_mask_us.p50)),
    ("forced mask p99 (µs)", |f| Some(f.forced_mask_us.p99)),
    ("other masks mean (µs)", |f| Some(f.other_mask_us.mean)),
    ("other masks p50 (µs)", |f| Some(f.other_mask_us.p50)),
    ("accept_token mean (µs)", |f| Some(f.accept_us.mean)),
    ("accept_token p99 (µs)", |f| Some(f.accept_us.p99)),
    ("memory per grammar mean (KiB)", |f| {
        f.memory_bytes.as_ref().map(|d| d.mean / 1024.0)
    }),
    ("memory per grammar p50 (KiB)", |f| {
        f.memory_bytes.as_ref().map(|d| d.p50 / 1024.0)
    }),
    ("memory per grammar max (KiB)", |f| {
        f.memory_bytes.as_ref().map(|d| d.max / 1024.0)
    }),
    ("total masks", |f| Some(f.total_masks as f64)),
];

fn num(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if v == v.trunc() || v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

/// A Markdown table with one column per engine: counts, then every row of [`ROWS`].
pub fn engine_table(engines: &[(&str, &Figures)]) -> String {
    let mut s = String::new();
    let _ = write!(s, "| |");
    for (name, _) in engines {
        let _ = write!(s, " {name} |");
    }
    let _ = write!(s, "\n|:--|");
    for _ in engines {
        let _ = write!(s, "--:|");
    }
    s.push('\n');
    let counts: [CountRow; 3] = [
        ("schemas compiled / failed", |f| {
            format!("{} / {}", f.compiled, f.failed)
        }),
        ("instances accepted / rejected", |f| {
            format!("{} / {}", f.accepted, f.rejected)
        }),
        ("mask ≠ accept steps", |f| f.mask_mismatches.to_string()),
    ];
    for (label, get) in counts {
        let _ = write!(s, "| {label} |");
        for (_, f) in engines {
            let _ = write!(s, " {} |", get(f));
        }
        s.push('\n');
    }
    for (label, get) in ROWS {
        let _ = write!(s, "| {label} |");
        for (_, f) in engines {
            let _ = write!(s, " {} |", num(get(f)));
        }
        s.push('\n');
    }
    s
}

/// One row of the ratio table.
#[derive(Clone, Debug, Serialize)]
pub struct RatioRow {
    /// The figure.
    pub figure: &'static str,
    /// tokensieve's value.
    pub tokensieve: Option<f64>,
    /// llguidance's value.
    pub llguidance: Option<f64>,
    /// tokensieve / llguidance (`None` when either is missing or llguidance's is 0).
    pub ratio: Option<f64>,
}

/// The ratio rows of two engines' figures on the same selection.
pub fn ratios(ts: &Figures, llg: &Figures) -> Vec<RatioRow> {
    ROWS.iter()
        .map(|(figure, get)| {
            let (a, b) = (get(ts), get(llg));
            RatioRow {
                figure,
                tokensieve: a,
                llguidance: b,
                ratio: match (a, b) {
                    (Some(a), Some(b)) if b != 0.0 => Some(a / b),
                    _ => None,
                },
            }
        })
        .collect()
}

/// The ratio table in Markdown.
pub fn ratio_table(rows: &[RatioRow]) -> String {
    let mut s = String::from(
        "| | tokensieve | llguidance | tokensieve / llguidance |\n|:--|--:|--:|--:|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            r.figure,
            num(r.tokensieve),
            num(r.llguidance),
            r.ratio.map_or("n/a".into(), |x| format!("{x:.2}"))
        );
    }
    s
}

/// The worst-schema lists of one engine, as Markdown bullet lists. `context(schema name,
/// instance, step)` describes the state of a mask (the text before it).
pub fn worst_lists(
    name: &str,
    f: &Figures,
    context: &dyn Fn(&str, usize, usize) -> String,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{name}, slowest compile → first mask:");
    for w in &f.worst_compile {
        let _ = writeln!(s, "- {:.1} ms `{}`", w.value, w.schema);
    }
    let _ = writeln!(s, "{name}, slowest single mask (one per schema):");
    for w in &f.worst_mask {
        let (i, step) = w.at.unwrap_or((0, 0));
        let _ = writeln!(
            s,
            "- {:.0} µs `{}` instance {i} step {step}, after {}",
            w.value,
            w.schema,
            context(&w.schema, i, step)
        );
    }
    let _ = writeln!(s, "{name}, largest mean mask per schema:");
    for w in &f.worst_mean_mask {
        let _ = writeln!(s, "- {:.1} µs `{}`", w.value, w.schema);
    }
    if !f.worst_memory.is_empty() {
        let _ = writeln!(
            s,
            "{name}, largest grammars (memory at the end of the run):"
        );
        for w in &f.worst_memory {
            let _ = writeln!(s, "- {:.0} KiB `{}`", w.value, w.schema);
        }
    }
    if !f.failures.is_empty() {
        let _ = writeln!(s, "{name}, most common refusals:");
        for (k, n) in &f.failures {
            let _ = writeln!(s, "- {n} × {k}");
        }
    }
    s
}
