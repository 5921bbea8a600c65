//! Partition refinement with a worklist, shared by the mask classes of a whole automaton
//! (`classes.rs`) and the minimization of one rule's automaton (`minimize.rs`).
//!
//! Moore's refinement splits every class by the signatures of its members (their edges,
//! with targets replaced by classes) until nothing splits. Here a round re-signs only the
//! members whose signature reads a class that lost members in the round before (the
//! dependents of the moved states), and the largest group of a splitting class keeps its
//! id, so a state moves at most log₂ n times and the work is about O(m log n) signatures
//! of the moved states' dependents (Hopcroft's bound), not one pass over every edge per
//! round. The partition found is Moore's: the coarsest one finer than the initial classes
//! in which members of a class sign alike.

use crate::limits::{Deadline, LimitExceeded};
use std::hash::BuildHasher;

/// The outcome of [`refine`]: a class per state (dense ids `0..count`), and whether the
/// refinement settled within its rounds (when not, every class still holding several
/// states was split into single states: sound, but no longer the coarsest).
pub(crate) struct Refined {
    pub class: Vec<u32>,
    pub count: usize,
    pub settled: bool,
}

/// Compressed rows of "who reads whom": from `(read, reader)` pairs over states `0..n`,
/// `(offsets, readers)` with row `m` = `readers[offsets[m]..offsets[m + 1]]`, the states
/// whose signature reads `m`'s class.
pub(crate) fn dependents(n: usize, pairs: &[(u32, u32)]) -> (Vec<u32>, Vec<u32>) {
    let mut offsets = vec![0u32; n + 1];
    for &(m, _) in pairs {
        offsets[m as usize + 1] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut fill = offsets.clone();
    let mut readers = vec![0u32; pairs.len()];
    for &(m, v) in pairs {
        readers[fill[m as usize] as usize] = v;
        fill[m as usize] += 1;
    }
    (offsets, readers)
}

/// "Who reads whom" for [`refine`]: compressed rows ([`dependents`]) over every state, or
/// the rows of an automaton that a splice extended (`Automaton::splice`): the states below
/// `from` read by the rows of the automaton it extended, the others by rows of their own.
/// Rows may list more readers than read (sound: a state listed needlessly is marked and
/// signed again, which may split its class more finely than needed, never wrongly).
#[derive(Clone, Copy)]
pub(crate) struct Deps<'a> {
    base: &'a (Vec<u32>, Vec<u32>),
    from: usize,
    top: Option<&'a (Vec<u32>, Vec<u32>)>,
}

impl<'a> Deps<'a> {
    /// The rows `rows` of every state.
    pub(crate) fn whole(rows: &'a (Vec<u32>, Vec<u32>)) -> Self {
        Deps {
            base: rows,
            from: usize::MAX,
            top: None,
        }
    }

    /// States below `from` by `base`'s rows, state `from + i` by `top`'s row `i`.
    pub(crate) fn layered(
        base: &'a (Vec<u32>, Vec<u32>),
        from: usize,
        top: &'a (Vec<u32>, Vec<u32>),
    ) -> Self {
        Deps {
            base,
            from,
            top: Some(top),
        }
    }

    /// The states whose signature reads state `m`'s class.
    #[inline]
    fn row(&self, m: u32) -> &'a [u32] {
        let (rows, i) = match self.top {
            Some(top) if m as usize >= self.from => (top, m as usize - self.from),
            _ => (self.base, m as usize),
        };
        &rows.1[rows.0[i] as usize..rows.0[i + 1] as usize]
    }
}

/// Refines the partition `initial` (a class per state, ids dense from 0) until members of
/// a class have equal signatures. `sign(v, class, out)` appends state `v`'s signature
/// under the classes `class` to `out`; it may read only the classes of the states that
/// `deps` lists `v` as a reader of. At most `max_rounds` rounds
/// (then see [`Refined::settled`]). `Err` when `deadline` passes (looked at every round).
///
/// `changed`: `None`, the first round signs every state; `Some(list)`, `initial` is
/// already stable except at the states of `list` and the states that read them (a
/// partition refined before, with new states in classes of their own), and the first
/// round signs only those. Either way the result is stable; seeded, it may be finer than
/// the coarsest (classes are never merged).
pub(crate) fn refine(
    initial: Vec<u32>,
    changed: Option<&[u32]>,
    deps: &Deps<'_>,
    mut sign: impl FnMut(u32, &[u32], &mut Vec<u64>),
    max_rounds: usize,
    deadline: &Deadline,
) -> Result<Refined, LimitExceeded> {
    let n = initial.len();
    let mut p = Partition::new(initial);
    // Per touched class: its signature records `recs[lo..hi]`, (state, arena range, hash).
    let mut arena: Vec<u64> = Vec::new();
    let mut recs: Vec<(u32, u32, u32, u64)> = Vec::new();
    let mut spans: Vec<(u32, usize, usize)> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    let mut moved: Vec<u32> = Vec::with_capacity(n);
    let mut runs: Vec<(usize, usize)> = Vec::new();
    recs.reserve(n);
    for round in 0..max_rounds {
        deadline.check()?;
        touched.clear();
        if round == 0 && changed.is_none() {
            for v in 0..n as u32 {
                p.mark(v, &mut touched);
            }
        } else {
            if round == 0 {
                for &v in changed.unwrap_or(&[]) {
                    p.mark(v, &mut touched);
                }
                moved.extend_from_slice(changed.unwrap_or(&[]));
            }
            for &d in &moved {
                for &v in deps.row(d) {
                    p.mark(v, &mut touched);
                }
            }
        }
        if touched.is_empty() {
            let count = p.start.len();
            return Ok(Refined {
                class: p.class,
                count,
                settled: true,
            });
        }
        // Sign every marked state against the classes as they were at the start of the
        // round.
        arena.clear();
        recs.clear();
        spans.clear();
        for &c in &touched {
            let (start, len, marked) = p.range(c);
            let lo = recs.len();
            for &v in &p.elems[start + len - marked..start + len] {
                let a = arena.len() as u32;
                sign(v, &p.class, &mut arena);
                let b = arena.len() as u32;
                let h = rustc_hash::FxBuildHasher.hash_one(&arena[a as usize..b as usize]);
                recs.push((v, a, b, h));
            }
            spans.push((c, lo, recs.len()));
        }
        moved.clear();
        for &(c, lo, hi) in &spans {
            let group = &mut recs[lo..hi];
            // By hash alone: equal signatures are then adjacent unless two signatures
            // share a hash and interleave, and `split` makes a class of each run of equal
            // (hash, signature), so such a collision only splits a class more finely
            // than needed (sound: classes only need equal masks).
            group.sort_unstable_by_key(|r| r.3);
            p.split(c, group, &arena, &mut moved, &mut runs);
        }
    }
    // Not settled: classes that still hold several states become one class per state.
    let mut class = p.class;
    let mut count = p.start.len();
    let mut seen = vec![false; count];
    for c in class.iter_mut() {
        if p.len[*c as usize] > 1 {
            if seen[*c as usize] {
                *c = count as u32;
                count += 1;
            } else {
                seen[*c as usize] = true;
            }
        }
    }
    Ok(Refined {
        class,
        count,
        settled: false,
    })
}

/// A partition of the states into classes, each class a contiguous range of `elems`; the
/// marked members of a class (to be signed this round) sit at the end of its range.
struct Partition {
    elems: Vec<u32>,
    pos: Vec<u32>,
    class: Vec<u32>,
    start: Vec<u32>,
    len: Vec<u32>,
    marked: Vec<u32>,
}

impl Partition {
    /// The partition with class `class[v]` for each state `v` (ids dense from 0).
    fn new(class: Vec<u32>) -> Partition {
        let count = class.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        // Classes only split, so there are never more than states: with room for that
        // many, `split` never grows these three (their growth was a tenth of a large
        // schema's mask-class refinement).
        let n = class.len().max(count);
        let mut len = Vec::with_capacity(n);
        len.resize(count, 0u32);
        for &c in &class {
            len[c as usize] += 1;
        }
        let mut start = Vec::with_capacity(n);
        start.resize(count, 0u32);
        for c in 1..count {
            start[c] = start[c - 1] + len[c - 1];
        }
        let mut marked = Vec::with_capacity(n);
        marked.resize(count, 0u32);
        let mut fill = start.clone();
        let mut elems = vec![0u32; class.len()];
        let mut pos = vec![0u32; class.len()];
        for (v, &c) in class.iter().enumerate() {
            let i = fill[c as usize];
            elems[i as usize] = v as u32;
            pos[v] = i;
            fill[c as usize] += 1;
        }
        Partition {
            elems,
            pos,
            class,
            start,
            len,
            marked,
        }
    }

    /// `(start, len, marked)` of class `c`, as indices into `elems`.
    fn range(&self, c: u32) -> (usize, usize, usize) {
        let c = c as usize;
        (
            self.start[c] as usize,
            self.len[c] as usize,
            self.marked[c] as usize,
        )
    }

    /// Marks state `v` to be signed (unless its class has one state or it is marked), and
    /// lists its class in `touched` at its first mark.
    fn mark(&mut self, v: u32, touched: &mut Vec<u32>) {
        let c = self.class[v as usize] as usize;
        let (start, len, marked) = (self.start[c], self.len[c], self.marked[c]);
        let first_marked = start + len - marked;
        let i = self.pos[v as usize];
        if len <= 1 || i >= first_marked {
            return;
        }
        let j = first_marked - 1;
        let w = self.elems[j as usize];
        self.elems.swap(i as usize, j as usize);
        self.pos[w as usize] = i;
        self.pos[v as usize] = j;
        self.marked[c] += 1;
        if marked == 0 {
            touched.push(c as u32);
        }
    }

    /// Splits class `c` by the signatures of its marked members, `group` (state, range in
    /// `arena`, hash of the signature), sorted by hash: a group is a run of equal (hash,
    /// signature). The unmarked members keep `c`; when all are marked, the largest group
    /// keeps it. Every other group becomes a new class; its states are appended to
    /// `moved`. `runs`: scratch space.
    ///
    /// A marked member never signs like an unmarked one: it is marked because a state its
    /// signature reads moved to a class made in the round before, and an unmarked member
    /// reads no such class. So with unmarked members, every group of marked ones is a
    /// class of its own. (In a seeded first round, and for states marked needlessly, a
    /// marked member may sign like the unmarked ones: it still gets a class of its own,
    /// finer than needed, never wrong.)
    fn split(
        &mut self,
        c: u32,
        group: &[(u32, u32, u32, u64)],
        arena: &[u64],
        moved: &mut Vec<u32>,
        runs: &mut Vec<(usize, usize)>,
    ) {
        let ci = c as usize;
        let sig = |r: &(u32, u32, u32, u64)| (r.3, &arena[r.1 as usize..r.2 as usize]);
        // Runs of equal signatures: (lo, hi) into `group`.
        runs.clear();
        let mut lo = 0;
        for i in 1..=group.len() {
            if i == group.len() || sig(&group[i]) != sig(&group[lo]) {
                runs.push((lo, i));
                lo = i;
            }
        }
        self.marked[ci] = 0;
        let unmarked = self.len[ci] as usize - group.len();
        let keeper = if unmarked > 0 {
            None
        } else if runs.len() == 1 {
            return;
        } else {
            (0..runs.len()).max_by_key(|&k| runs[k].1 - runs[k].0)
        };
        let mut at = self.start[ci] as usize + unmarked;
        let mut place = |p: &mut Partition, run: (usize, usize), class: u32, at: &mut usize| {
            for r in &group[run.0..run.1] {
                let v = r.0;
                p.elems[*at] = v;
                p.pos[v as usize] = *at as u32;
                if p.class[v as usize] != class {
                    p.class[v as usize] = class;
                    moved.push(v);
                }
                *at += 1;
            }
        };
        let mut kept = unmarked;
        if let Some(k) = keeper {
            place(self, runs[k], c, &mut at);
            kept += runs[k].1 - runs[k].0;
        }
        self.len[ci] = kept as u32;
        for (k, &run) in runs.iter().enumerate() {
            if Some(k) == keeper {
                continue;
            }
            let new = self.start.len() as u32;
            self.start.push(at as u32);
            self.len.push((run.1 - run.0) as u32);
            self.marked.push(0);
            place(self, run, new, &mut at);
        }
    }
}
