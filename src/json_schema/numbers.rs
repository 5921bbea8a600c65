//! Numbers: the JSON number syntax (RFC 8259 exactly: `-0` valid; `-05`, `-`, `1.` invalid),
//! exact integer range grammars for `integer` with `minimum`/`maximum`/`exclusiveMinimum`/
//! `exclusiveMaximum`, and exact ranges for `number` with integer bounds.
//!
//! * `integer` accepts integer syntax with an optional zero fraction (`6000`, `6000.0`,
//!   `-0.00`), except under a draft-04 `$schema` where an integer has no fraction part
//!   (and `-0`, which validators read as the float -0.0, is rejected);
//!   exponents (`1e3`, an integer per JSON Schema) are rejected.
//! * `number` with bounds accepts numbers without an exponent only (`1e2` is rejected), and
//!   refuses non-integer bounds (no exact construction yet); `-0` forms are accepted where 0 is.
//! * Bounds are read as serde_json reads them (`f64` unless they are integers), as validators do.

use serde_json::{Map, Value};

use super::{child, choice, class, lit, opt, repeat, seq, Builder, JsonSchemaError};
use crate::grammar::Expr;

/// Bounds beyond this magnitude are refused (they would not be read exactly).
const MAX_BOUND: f64 = 1e18;

fn digit() -> Expr {
    class(&[('0' as u32, '9' as u32)])
}

fn digits(lo: u8, hi: u8) -> Expr {
    class(&[(lo as u32, hi as u32)])
}

/// The upper end of a free digit run of at least `min` digits that follows `fixed` digits
/// of the same run already written, under [`JsonSchemaOptions::max_number_digits`]
/// (`cap`): `None` (unbounded) without a cap, else `max(min, cap - fixed)` so that a
/// required minimum stays satisfiable.
///
/// [`JsonSchemaOptions::max_number_digits`]: super::JsonSchemaOptions::max_number_digits
fn run_max(cap: Option<u32>, min: u32, fixed: u32) -> Option<u32> {
    cap.map(|n| n.saturating_sub(fixed).max(min))
}

/// A free run of at least `min` digits after `fixed` digits of the same run (see
/// [`run_max`]).
fn free_digits(cap: Option<u32>, min: u32, fixed: u32) -> Expr {
    repeat(digit(), min, run_max(cap, min, fixed))
}

/// Digit strings of the same length as `a` and `b` (leading zeros allowed) in `[a, b]`.
fn same_length_range(a: &[u8], b: &[u8]) -> Expr {
    if a.is_empty() {
        return Expr::Empty;
    }
    if a == b {
        return Expr::Bytes(a.to_vec());
    }
    let rest = a.len() - 1;
    if a[1..].iter().all(|&c| c == b'0') && b[1..].iter().all(|&c| c == b'9') {
        return seq(vec![
            digits(a[0], b[0]),
            repeat(digit(), rest as u32, Some(rest as u32)),
        ]);
    }
    if a[0] == b[0] {
        return seq(vec![
            Expr::Bytes(vec![a[0]]),
            same_length_range(&a[1..], &b[1..]),
        ]);
    }
    let nines = vec![b'9'; rest];
    let zeros = vec![b'0'; rest];
    let mut alts = vec![seq(vec![
        Expr::Bytes(vec![a[0]]),
        same_length_range(&a[1..], &nines),
    ])];
    if a[0] + 1 < b[0] {
        alts.push(seq(vec![
            digits(a[0] + 1, b[0] - 1),
            repeat(digit(), rest as u32, Some(rest as u32)),
        ]));
    }
    alts.push(seq(vec![
        Expr::Bytes(vec![b[0]]),
        same_length_range(&zeros, &b[1..]),
    ]));
    Expr::Choice(alts)
}

/// Canonical decimal integers (no leading zeros) in `[lo, hi]` (`hi = None`: unbounded);
/// `None` when the range is empty. `lo` below 0 counts as 0. Without `hi`, the numbers
/// longer than `lo` have at most `max(cap, digits of lo + 1)` digits under a `cap`.
pub(crate) fn uint_range(lo: i128, hi: Option<i128>, cap: Option<u32>) -> Option<Expr> {
    let lo = lo.max(0);
    if hi.is_some_and(|h| h < lo) {
        return None;
    }
    let lo_len = lo.to_string().len();
    let (finite_hi, tail) = match hi {
        Some(h) => (h, None),
        None => {
            // Every number with more digits than `lo`.
            let more = seq(vec![digits(b'1', b'9'), free_digits(cap, lo_len as u32, 1)]);
            (10i128.pow(lo_len as u32) - 1, Some(more))
        }
    };
    let hi_len = finite_hi.to_string().len();
    let mut alts = Vec::new();
    for len in lo_len..=hi_len {
        let start = if len == 1 {
            lo
        } else {
            lo.max(10i128.pow(len as u32 - 1))
        };
        let end = finite_hi.min(10i128.pow(len as u32) - 1);
        if start <= end {
            alts.push(Some(same_length_range(
                start.to_string().as_bytes(),
                end.to_string().as_bytes(),
            )));
        }
    }
    alts.push(tail);
    choice(alts)
}

/// A numeric bound keyword: an integer, or a float.
#[derive(Clone, Copy, Debug)]
enum Bound {
    Int(i128),
    Float(f64),
}

fn bound(obj: &Map<String, Value>, key: &str, ptr: &str) -> Result<Option<Bound>, JsonSchemaError> {
    let Some(v) = obj.get(key) else {
        return Ok(None);
    };
    let Value::Number(n) = v else {
        if v.is_boolean() {
            return Err(JsonSchemaError::Unsupported {
                keyword: key.into(),
                pointer: child(ptr, key),
                reason: "boolean exclusive bounds (draft 4) are not supported".into(),
            });
        }
        return Err(JsonSchemaError::InvalidKeyword {
            keyword: key.into(),
            pointer: child(ptr, key),
            message: format!("must be a number, not {v}"),
        });
    };
    if let Some(i) = n.as_i64() {
        return Ok(Some(Bound::Int(i as i128)));
    }
    if let Some(u) = n.as_u64() {
        return Ok(Some(Bound::Int(u as i128)));
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if !f.is_finite() || f.abs() > MAX_BOUND {
        return Err(JsonSchemaError::Unsupported {
            keyword: key.into(),
            pointer: child(ptr, key),
            reason: format!("bound {f} is too large to be enforced exactly"),
        });
    }
    Ok(Some(Bound::Float(f)))
}

/// The largest integer `multipleOf` compiled as a residue automaton (one rule per
/// residue).
const MAX_MODULUS: u32 = 1000;

/// The most multiples listed one by one within bounds.
const MAX_LISTED_MULTIPLES: i128 = 1000;

/// Fraction parts.
fn frac_any(cap: Option<u32>) -> Expr {
    opt(seq(vec![lit("."), free_digits(cap, 1, 0)]))
}

impl Builder<'_> {
    /// [`JsonSchemaOptions::max_number_digits`](super::JsonSchemaOptions::max_number_digits).
    fn digit_cap(&self) -> Option<u32> {
        self.opts.max_number_digits
    }

    /// Any JSON number (a call of the grammar's one number rule when numbers are shared:
    /// [`Builder::shared_number`]).
    pub(crate) fn number_any(&mut self) -> Expr {
        self.shared_number(0, "json_number", Self::number_written)
    }

    /// Any JSON number, written out.
    pub(super) fn number_written(&self) -> Expr {
        let cap = self.digit_cap();
        seq(vec![
            opt(lit("-")),
            int_part(cap),
            frac_any(cap),
            opt(seq(vec![
                class(&[('e' as u32, 'e' as u32), ('E' as u32, 'E' as u32)]),
                opt(class(&[('+' as u32, '+' as u32), ('-' as u32, '-' as u32)])),
                free_digits(cap, 1, 0),
            ])),
        ])
    }

    /// `body` (any number, `which` 0, or any integer, 1; written only when the rule is
    /// made or numbers are not shared) as a call of one rule per grammar when numbers are
    /// shared ([`super::Form::Embedded`]: the schemas of a tag's tools), else `body`
    /// itself. The rule is marked for inlining back
    /// ([`super::JsonSchemaGrammar::always`]), so a whole compile writes it out where it
    /// is called, as it writes capped whitespace out; a tool's build keeps it a rule
    /// (`compiler::deferred`), whose automaton the compile builds once for every tool of
    /// the tag (`compiler::machinery`): a number capped at 24 digits is one state per
    /// digit place, and an object of two integers was most of a small tool's automaton
    /// (BFCL's `math.hcf`).
    fn shared_number(&mut self, which: usize, name: &str, body: fn(&Self) -> Expr) -> Expr {
        if !self.shared_numbers {
            return body(self);
        }
        if let Some(r) = self.number_rules[which] {
            return Expr::Rule(r);
        }
        let id = self.add_rule(name, body(self));
        // Shared by every place that calls it: its place is the document's.
        self.pointers[id.index()] = "#".into();
        self.number_rules[which] = Some(id);
        Expr::Rule(id)
    }

    /// Integers in the bounds of `obj`, or `None`.
    pub(crate) fn integer(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let (lo, hi) = int_bounds(obj, ptr)?;
        Ok(self.integers_in(lo, hi))
    }

    /// Runs `f` (which compiles the items of an array) with the numbers it writes not
    /// calls of the shared number rules when `counted` (the items repeat a bounded number
    /// of times) and whitespace is written out: `lower_repeats` counts such a repetition
    /// (one copy of its body's automaton, whatever the bound) only when its body calls no
    /// rule. Whitespace that is a rule (a line cap, as the tool families set) is already
    /// a call there, so numbers stay calls too.
    pub(super) fn numbers_written_if<T>(
        &mut self,
        counted: bool,
        f: impl FnOnce(&mut Self) -> T,
    ) -> T {
        let shared = self.shared_numbers;
        self.shared_numbers &= !(counted && self.ws_rule.is_none());
        let r = f(self);
        self.shared_numbers = shared;
        r
    }

    /// Integer syntax in `[lo, hi]` (with a zero fraction allowed after draft 4); without
    /// bounds, a call of the grammar's one integer rule when numbers are shared
    /// ([`Builder::shared_number`]).
    fn integers_in(&mut self, lo: Option<i128>, hi: Option<i128>) -> Option<Expr> {
        match (lo, hi) {
            // Integers without bounds always have a grammar (`never` is not reached).
            (None, None) => Some(self.shared_number(1, "json_integer", |b| {
                b.integers_written(None, None).unwrap_or_else(super::never)
            })),
            _ => self.integers_written(lo, hi),
        }
    }

    /// [`Builder::integers_in`] written out.
    fn integers_written(&self, lo: Option<i128>, hi: Option<i128>) -> Option<Expr> {
        // A zero fraction (`6000.0`, `-0.00`) keeps the value an integer (JSON Schema
        // compares values): every integer also with `.0+`.
        // Not in draft 4, where an integer is a number without a fraction part.
        // `-0` is left out there too: validators read it as the float -0.0, no integer.
        if self.draft4 {
            return integer_range_with(lo, hi, false, self.digit_cap());
        }
        integer_range(lo, hi, self.digit_cap()).map(|e| seq(vec![e, self.zero_fraction()]))
    }

    /// `(.0+)?` after an integer (none under draft 4).
    fn zero_fraction(&self) -> Expr {
        if self.draft4 {
            Expr::Empty
        } else {
            opt(seq(vec![
                lit("."),
                repeat(lit("0"), 1, run_max(self.digit_cap(), 1, 0)),
            ]))
        }
    }

    /// The numbers of `obj` that also satisfy its `multipleOf` (2020-12 §6.2.1), for
    /// `integer` and `number` alike; `None` when none. Exact for an integer step (a
    /// residue automaton of up to [`MAX_MODULUS`] states without bounds, the multiples
    /// listed within bounds that hold at most [`MAX_LISTED_MULTIPLES`], a lower bound
    /// of at most the step) and for a step `10^-k` (numbers of at most `k` fraction
    /// digits, with integer bounds of at least 0). Anything else is refused.
    pub(crate) fn multiple_of(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
        integer_only: bool,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let mptr = child(ptr, "multipleOf");
        let m = obj.get("multipleOf").cloned().unwrap_or(Value::Null);
        let Some(mf) = m.as_f64().filter(|f| *f > 0.0 && f.is_finite()) else {
            return Err(JsonSchemaError::InvalidKeyword {
                keyword: "multipleOf".into(),
                pointer: mptr,
                message: format!("must be a number above 0, not {m}"),
            });
        };
        let refuse = |why: &str| JsonSchemaError::Unsupported {
            keyword: "multipleOf".into(),
            pointer: mptr.clone(),
            reason: why.into(),
        };
        let step = m
            .as_u64()
            .map(|u| u as i128)
            .or_else(|| (mf.fract() == 0.0 && mf < 1e15).then_some(mf as i128));
        if let Some(step) = step {
            let (lo, hi) = int_bounds(obj, ptr)?;
            if step == 1 {
                return Ok(self.integers_in(lo, hi));
            }
            if let (Some(l), Some(h)) = (lo, hi) {
                if l > h {
                    return Ok(None);
                }
                let first = l.div_euclid(step) + i128::from(l.rem_euclid(step) != 0);
                let last = h.div_euclid(step);
                if last < first {
                    return Ok(None);
                }
                if last - first < MAX_LISTED_MULTIPLES {
                    let z = self.zero_fraction();
                    let alts = (first..=last)
                        .map(|q| {
                            let v = q * step;
                            let mut e = lit(&v.to_string());
                            if v == 0 && !self.draft4 {
                                e = Expr::Choice(vec![e, lit("-0")]);
                            }
                            Some(seq(vec![e, z.clone()]))
                        })
                        .collect();
                    return Ok(choice(alts));
                }
            }
            if step > MAX_MODULUS as i128 {
                return Err(refuse(&format!("an integer step above {MAX_MODULUS}")));
            }
            let nonneg = match (lo, hi) {
                (None, None) => false,
                (Some(l), None) if l <= step && l >= 0 => true,
                _ => return Err(refuse("an integer step with these bounds is not supported")),
            };
            let positive = lo.is_some_and(|l| l > 0);
            let mag = self.residue_zero(step as u32, positive);
            let z = self.zero_fraction();
            let body = if nonneg {
                mag
            } else {
                seq(vec![opt(lit("-")), mag])
            };
            return Ok(Some(seq(vec![body, z])));
        }
        if integer_only {
            return Err(refuse("a fractional step for `integer`"));
        }
        // 10^-k: at most k fraction digits.
        let text = format!("{mf}");
        let k = match text.strip_prefix("0.") {
            Some(f) if f.ends_with('1') && f[..f.len() - 1].bytes().all(|b| b == b'0') => {
                f.len() as u32
            }
            _ => {
                return Err(refuse(
                    "a step that is neither an integer nor a power of ten",
                ))
            }
        };
        let frac = opt(seq(vec![lit("."), repeat(digit(), 1, Some(k))]));
        let has_bounds = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
            .iter()
            .any(|b| obj.contains_key(*b));
        if !has_bounds {
            return Ok(Some(seq(vec![
                opt(lit("-")),
                int_part(self.digit_cap()),
                frac,
            ])));
        }
        let int_val = |key: &str| -> Result<Option<i128>, JsonSchemaError> {
            match bound(obj, key, ptr)? {
                None => Ok(None),
                Some(Bound::Int(i)) => Ok(Some(i)),
                Some(Bound::Float(f)) if f.fract() == 0.0 => Ok(Some(f as i128)),
                Some(Bound::Float(_)) => Err(refuse("a decimal step with fractional bounds")),
            }
        };
        if obj.contains_key("exclusiveMinimum") {
            return Err(refuse("a decimal step with `exclusiveMinimum`"));
        }
        let lo = int_val("minimum")?;
        let (max, xmax) = (int_val("maximum")?, int_val("exclusiveMaximum")?);
        let Some(lo) = lo.filter(|l| *l >= 0) else {
            return Err(refuse(
                "a decimal step with bounds needs a `minimum` of at least 0",
            ));
        };
        // The largest integer part with any fraction, and an inclusive top.
        let (top_any, top_exact) = match (max, xmax) {
            (None, None) => (None, None),
            (Some(m), None) => (Some(m - 1), Some(m)),
            (None, Some(x)) => (Some(x - 1), None),
            (Some(m), Some(x)) if m < x => (Some(m - 1), Some(m)),
            (Some(_), Some(x)) => (Some(x - 1), None),
        };
        let mut alts =
            vec![uint_range(lo, top_any, self.digit_cap()).map(|e| seq(vec![e, frac.clone()]))];
        if let Some(t) = top_exact.filter(|t| *t >= lo) {
            alts.push(Some(seq(vec![
                lit(&t.to_string()),
                opt(seq(vec![lit("."), repeat(lit("0"), 1, Some(k))])),
            ])));
        }
        Ok(choice(alts))
    }

    /// Unsigned integers (`0 | [1-9][0-9]*`) divisible by `m`: one rule per residue.
    /// Without `0` when `positive`.
    fn residue_zero(&mut self, m: u32, positive: bool) -> Expr {
        let ids: Vec<_> = (0..m).map(|_| self.add_rule("mod", Expr::Empty)).collect();
        for r in 0..m {
            // Digits grouped by the residue they lead to.
            let mut alts: Vec<Option<Expr>> = Vec::new();
            if r == 0 {
                alts.push(Some(Expr::Empty));
            }
            for d in 0..10u32 {
                let next = (r * 10 + d) % m;
                alts.push(Some(seq(vec![
                    Expr::Bytes(vec![b'0' + d as u8]),
                    Expr::Rule(ids[next as usize]),
                ])));
            }
            self.rules[ids[r as usize].index()].body = choice(alts).unwrap_or(Expr::Empty);
        }
        let mut start: Vec<Option<Expr>> = Vec::new();
        if !positive {
            start.push(Some(lit("0")));
        }
        for d in 1..10u32 {
            start.push(Some(seq(vec![
                Expr::Bytes(vec![b'0' + d as u8]),
                Expr::Rule(ids[(d % m) as usize]),
            ])));
        }
        choice(start).unwrap_or(Expr::Empty)
    }
}

/// The integer bounds of `obj` (`minimum`, `exclusiveMinimum`, `maximum`,
/// `exclusiveMaximum`, rounded inwards): the least and the greatest integer allowed, each
/// `None` when unbounded. `ptr` is the schema's JSON pointer, for errors.
///
/// # Errors
/// [`JsonSchemaError::InvalidKeyword`] for a bound that is not a number;
/// [`JsonSchemaError::Unsupported`] for draft 4's boolean exclusive bounds and for
/// non-integer bounds beyond 1e18 in magnitude.
pub fn int_bounds(
    obj: &Map<String, Value>,
    ptr: &str,
) -> Result<(Option<i128>, Option<i128>), JsonSchemaError> {
    {
        let mut lo: Option<i128> = None;
        let mut hi: Option<i128> = None;
        let mut tighten = |v: i128, is_lo: bool| {
            if is_lo {
                lo = Some(lo.map_or(v, |x| x.max(v)));
            } else {
                hi = Some(hi.map_or(v, |x| x.min(v)));
            }
        };
        if let Some(b) = bound(obj, "minimum", ptr)? {
            tighten(
                match b {
                    Bound::Int(i) => i,
                    Bound::Float(f) => f.ceil() as i128,
                },
                true,
            );
        }
        if let Some(b) = bound(obj, "exclusiveMinimum", ptr)? {
            tighten(
                match b {
                    Bound::Int(i) => i + 1,
                    Bound::Float(f) => f.floor() as i128 + 1,
                },
                true,
            );
        }
        if let Some(b) = bound(obj, "maximum", ptr)? {
            tighten(
                match b {
                    Bound::Int(i) => i,
                    Bound::Float(f) => f.floor() as i128,
                },
                false,
            );
        }
        if let Some(b) = bound(obj, "exclusiveMaximum", ptr)? {
            tighten(
                match b {
                    Bound::Int(i) => i - 1,
                    Bound::Float(f) => f.ceil() as i128 - 1,
                },
                false,
            );
        }
        Ok((lo, hi))
    }
}

impl Builder<'_> {
    /// Numbers in the bounds of `obj`, or `None`.
    pub(crate) fn number(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let mut lower: Option<NumBound> = None;
        let mut lower_key = "minimum";
        let mut upper: Option<NumBound> = None;
        for (key, is_upper, excl) in [
            ("minimum", false, false),
            ("exclusiveMinimum", false, true),
            ("maximum", true, false),
            ("exclusiveMaximum", true, true),
        ] {
            let Some(b) = bound(obj, key, ptr)? else {
                continue;
            };
            let nb = NumBound::new(b, excl).ok_or_else(|| JsonSchemaError::Unsupported {
                keyword: key.into(),
                pointer: child(ptr, key),
                reason: "a bound with more than 30 fraction digits is not supported".into(),
            })?;
            if !is_upper {
                lower_key = key;
            }
            let slot = if is_upper { &mut upper } else { &mut lower };
            // Compared exactly (not as f64: 2^53 + 1 is not 2^53).
            let replace = match slot {
                None => true,
                Some(cur) => match nb.cmp_value(cur) {
                    std::cmp::Ordering::Equal => nb.excl,
                    o => (o == std::cmp::Ordering::Less) == is_upper,
                },
            };
            if replace {
                *slot = Some(nb);
            }
        }
        if lower.is_none() && upper.is_none() {
            return Ok(Some(self.number_any()));
        }
        let cap = self.digit_cap();
        let zero = Dec {
            int: 0,
            frac: Vec::new(),
        };
        let refuse = |reason: String| JsonSchemaError::Unsupported {
            keyword: lower_key.into(),
            pointer: child(ptr, lower_key),
            reason,
        };
        let mut alts = Vec::new();
        // Non-negative values (no sign).
        if upper.as_ref().map_or(true, |u| u.val >= 0.0) {
            let lo = match &lower {
                Some(l) if l.val >= 0.0 => (l.mag.clone(), l.excl),
                _ => (zero.clone(), false),
            };
            let hi = upper.as_ref().map(|u| (u.mag.clone(), u.excl));
            alts.push(magnitude(lo, hi, cap).map_err(refuse)?);
        }
        // `-0` (and `-0.0`, ...) is the value 0: in when 0 is.
        let zero_in = lower
            .as_ref()
            .map_or(true, |l| l.val < 0.0 || (l.val == 0.0 && !l.excl))
            && upper
                .as_ref()
                .map_or(true, |u| u.val > 0.0 || (u.val == 0.0 && !u.excl));
        if zero_in {
            alts.push(Some(seq(vec![
                lit("-0"),
                opt(seq(vec![lit("."), repeat(lit("0"), 1, run_max(cap, 1, 0))])),
            ])));
        }
        // Negative values: "-" and a magnitude m > 0 with -m in the bounds.
        if lower.as_ref().map_or(true, |l| l.val < 0.0) {
            let mag_lo = match &upper {
                Some(u) if u.val < 0.0 => (u.mag.clone(), u.excl),
                _ => (zero, true),
            };
            let mag_hi = lower.as_ref().map(|l| (l.mag.clone(), l.excl));
            alts.push(
                magnitude(mag_lo, mag_hi, cap)
                    .map_err(refuse)?
                    .map(|m| seq(vec![lit("-"), m])),
            );
        }
        Ok(choice(alts))
    }
}

/// A non-negative decimal: integer part and fraction digits (no trailing zeros).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Dec {
    int: i128,
    frac: Vec<u8>,
}

/// A bound of `number`: its value (for choosing the stricter), magnitude, exclusivity.
#[derive(Clone, Debug)]
struct NumBound {
    val: f64,
    mag: Dec,
    excl: bool,
}

impl NumBound {
    /// The exact order of the values of two bounds.
    fn cmp_value(&self, other: &NumBound) -> std::cmp::Ordering {
        let neg = |b: &NumBound| b.val < 0.0 && (b.mag.int != 0 || !b.mag.frac.is_empty());
        let mag = (self.mag.int, &self.mag.frac).cmp(&(other.mag.int, &other.mag.frac));
        match (neg(self), neg(other)) {
            (false, false) => mag,
            (true, true) => mag.reverse(),
            (false, true) => std::cmp::Ordering::Greater,
            (true, false) => std::cmp::Ordering::Less,
        }
    }

    fn new(b: Bound, excl: bool) -> Option<NumBound> {
        match b {
            Bound::Int(i) => Some(NumBound {
                val: i as f64,
                mag: Dec {
                    int: i.abs(),
                    frac: Vec::new(),
                },
                excl,
            }),
            Bound::Float(f) => {
                // Display of f64 is the shortest round-trip decimal, without exponent.
                let text = format!("{}", f.abs());
                let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
                let frac = frac.trim_end_matches('0');
                if frac.len() > 30 {
                    return None;
                }
                Some(NumBound {
                    val: f,
                    mag: Dec {
                        int: int.parse().ok()?,
                        frac: frac.bytes().collect(),
                    },
                    excl,
                })
            }
        }
    }
}

/// Fraction digit strings (after the `.`): whether the empty fraction (no `.` at all) is in
/// the set, and the non-empty ones.
type FracSet = (bool, Option<Expr>);

fn frac_render(fs: FracSet) -> Option<Expr> {
    let (eps, ne) = fs;
    choice(vec![
        eps.then_some(Expr::Empty),
        ne.map(|e| seq(vec![lit("."), e])),
    ])
}

/// The digit `d` followed by a string of `rest`.
fn digit_then(d: u8, rest: FracSet) -> Option<Expr> {
    let head = Expr::Bytes(vec![d]);
    match rest {
        (true, Some(e)) => Some(seq(vec![head, opt(e)])),
        (false, Some(e)) => Some(seq(vec![head, e])),
        (true, None) => Some(head),
        (false, None) => None,
    }
}

/// Fractions `0.F` compared with `0.d`: `greater` picks `>`/`>=` (else `<`/`<=`), `strict`
/// the strict form. Under a `cap`, every free run of digits has at most `cap` digits.
fn frac_cmp(d: &[u8], greater: bool, strict: bool, cap: Option<u32>) -> FracSet {
    let any_digits = || free_digits(cap, 0, 0);
    if d.is_empty() {
        return match (greater, strict) {
            (true, false) => (true, Some(free_digits(cap, 1, 0))),
            (true, true) => (
                false,
                Some(seq(vec![any_digits(), digits(b'1', b'9'), any_digits()])),
            ),
            (false, false) => (true, Some(repeat(lit("0"), 1, run_max(cap, 1, 0)))),
            (false, true) => (false, None),
        };
    }
    let d1 = d[0];
    let mut alts = Vec::new();
    if greater && d1 < b'9' {
        alts.push(Some(seq(vec![digits(d1 + 1, b'9'), any_digits()])));
    }
    if !greater && d1 > b'0' {
        alts.push(Some(seq(vec![digits(b'0', d1 - 1), any_digits()])));
    }
    alts.push(digit_then(d1, frac_cmp(&d[1..], greater, strict, cap)));
    // The empty fraction is 0, below every non-zero `0.d`.
    (!greater, choice(alts))
}

/// Non-zero fractions `0.F` below (`strict`) or at most `0.d`, `d` non-empty.
fn frac_below_nonzero(d: &[u8], strict: bool, cap: Option<u32>) -> FracSet {
    let Some(&d1) = d.first() else {
        return (false, None);
    };
    let any_digits = || free_digits(cap, 0, 0);
    let mut alts = Vec::new();
    if d1 > b'1' {
        alts.push(Some(seq(vec![digits(b'1', d1 - 1), any_digits()])));
    }
    if d1 > b'0' {
        alts.push(Some(seq(vec![
            lit("0"),
            any_digits(),
            digits(b'1', b'9'),
            any_digits(),
        ])));
        alts.push(digit_then(d1, frac_cmp(&d[1..], false, strict, cap)));
    } else {
        alts.push(digit_then(b'0', frac_below_nonzero(&d[1..], strict, cap)));
    }
    (false, choice(alts))
}

/// Unsigned decimals `I(.F)?` (no exponent) with value in the interval `lower` (a magnitude
/// and exclusivity) .. `upper`; `Err` when no exact grammar is built. Free digit runs are
/// capped by `cap`.
fn magnitude(
    lower: (Dec, bool),
    upper: Option<(Dec, bool)>,
    cap: Option<u32>,
) -> Result<Option<Expr>, String> {
    let (l, lx) = lower;
    let mut alts = Vec::new();
    match &upper {
        Some((u, _)) if u.int < l.int => return Ok(None),
        Some((u, ux)) if u.int == l.int => {
            let set = if l.frac.is_empty() && !lx {
                frac_cmp(&u.frac, false, *ux, cap)
            } else if u.frac.is_empty() && !*ux {
                // 0.F <= 0: only zeros, which must also pass the lower side.
                if l.frac.is_empty() && !lx {
                    frac_cmp(&[], false, false, cap)
                } else {
                    (false, None)
                }
            } else if u.frac.is_empty() && *ux {
                (false, None)
            } else if l.frac.is_empty() && lx {
                // 0 < 0.F (<|<=) 0.u
                frac_below_nonzero(&u.frac, *ux, cap)
            } else {
                return Err("`number` bounds within the same integer are not supported".into());
            };
            alts.push(frac_render(set).map(|f| seq(vec![lit(&l.int.to_string()), f])));
            return Ok(choice(alts));
        }
        _ => {}
    }
    // I strictly between: any fraction.
    alts.push(
        uint_range(l.int + 1, upper.as_ref().map(|(u, _)| u.int - 1), cap)
            .map(|e| seq(vec![e, frac_any(cap)])),
    );
    // I == L.int, fraction at or above L's.
    alts.push(
        frac_render(frac_cmp(&l.frac, true, lx, cap))
            .map(|f| seq(vec![lit(&l.int.to_string()), f])),
    );
    // I == U.int, fraction at or below U's.
    if let Some((u, ux)) = &upper {
        alts.push(
            frac_render(frac_cmp(&u.frac, false, *ux, cap))
                .map(|f| seq(vec![lit(&u.int.to_string()), f])),
        );
    }
    Ok(choice(alts))
}

/// `0 | [1-9][0-9]*` (at most `cap` digits under a `cap`).
fn int_part(cap: Option<u32>) -> Expr {
    Expr::Choice(vec![
        lit("0"),
        seq(vec![digits(b'1', b'9'), free_digits(cap, 0, 1)]),
    ])
}

/// Integers (integer syntax) in `[lo, hi]`, `-0` included when 0 is; an open end has
/// numbers of at most `cap` digits (or of the digits of the other end) under a `cap`.
pub fn integer_range(lo: Option<i128>, hi: Option<i128>, cap: Option<u32>) -> Option<Expr> {
    integer_range_with(lo, hi, true, cap)
}

/// As [`integer_range`], with `-0` only when `neg_zero`.
fn integer_range_with(
    lo: Option<i128>,
    hi: Option<i128>,
    neg_zero: bool,
    cap: Option<u32>,
) -> Option<Expr> {
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            return None;
        }
    }
    let mut alts = Vec::new();
    if hi.map_or(true, |h| h >= 0) {
        alts.push(uint_range(lo.unwrap_or(0).max(0), hi, cap));
    }
    if lo.map_or(true, |l| l < 0) {
        let mag_lo = match hi {
            Some(h) if h < 0 => -h,
            _ => 1,
        };
        let mag_hi = lo.map(|l| -l);
        alts.push(uint_range(mag_lo, mag_hi, cap).map(|m| seq(vec![lit("-"), m])));
    }
    if neg_zero && lo.map_or(true, |l| l <= 0) && hi.map_or(true, |h| h >= 0) {
        alts.push(Some(lit("-0")));
    }
    choice(alts)
}
