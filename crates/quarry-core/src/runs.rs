//! The runs of a clustered table (see [`crate::cluster`]) that a box query
//! reads: the table's keys (`MDBin` numbers) whose every axis' 1-D bin is
//! inside the box are runs of whole rows, those with a bin on an edge of the
//! box (and none outside it) are runs of rows to filter.
//!
//! A key is `Σ c_k stride_k` with `c_k` below axis `k`'s slot count and
//! strides row-major (the last axis' is 1), so the keys sharing their leading
//! axes' bins are one contiguous range of a part's sorted table. The search
//! descends axis by axis through those ranges, by binary search, visiting
//! only the bins present in the table and not outside the box, and stops
//! descending where the axes left cannot change the state: the work follows
//! what the box touches, not the table's length nor the product of the axes'
//! bin counts.

/// A 1-D bin the box holds none of.
pub const OUTSIDE: u8 = 0;
/// A 1-D bin whose values may or may not lie in the box.
pub const BOUNDARY: u8 = 1;
/// A 1-D bin whose every value lies in the box.
pub const INSIDE: u8 = 2;

/// A clustered table's offset table, every part's laid end to end.
pub struct Table<'a> {
    /// The keys present, ascending within each part.
    pub keys: &'a [u64],
    /// Each entry's first row, counted from its part's first.
    pub starts: &'a [i64],
    /// Where each entry's rows end, counted from its part's first.
    pub ends: &'a [i64],
    /// Each part's entries: `(first, count)`, in order.
    pub parts: &'a [(usize, usize)],
}

/// What a box reads, as `(part, offset, length)` runs of rows in table
/// order: `whole` (every row a hit) and `boundary` (rows to filter).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BoxRuns {
    pub whole: Vec<[i64; 3]>,
    pub boundary: Vec<[i64; 3]>,
}

/// The runs of `table` a box reads, given each axis' `strides` and the
/// state ([`OUTSIDE`], [`BOUNDARY`] or [`INSIDE`]) of each of its slots
/// (`states[k][c]`: axis `k`, 1-D bin `c`). A key's state is the least of
/// its bins'; consecutive entries of one part and one state are one run.
///
/// # Panics
/// If `strides` and `states` differ in length, or an entry or part lies
/// outside the table.
#[must_use]
pub fn box_runs(table: &Table<'_>, strides: &[u64], states: &[&[u8]]) -> BoxRuns {
    assert_eq!(strides.len(), states.len(), "one stride per axis");
    let axes: Vec<AxisRuns> = states.iter().map(|s| AxisRuns::of(s)).collect();
    // The least state of the axes from k on: below it nothing can lower a state.
    let mut least_from = vec![INSIDE; axes.len() + 1];
    for k in (0..axes.len()).rev() {
        least_from[k] = least_from[k + 1].min(axes[k].least);
    }
    let mut out = Emitter::new(table);
    for (part, &(first, count)) in table.parts.iter().enumerate() {
        let search = Search {
            keys: &table.keys[first..first + count],
            strides,
            axes: &axes,
            least_from: &least_from,
        };
        search.descend(0, count, 0, 0, INSIDE, &mut |a, b, state| {
            out.push(part, first + a, first + b, state);
        });
        out.flush();
    }
    out.runs
}

/// One axis' slots grouped into maximal runs of one state, outside ones left out.
struct AxisRuns {
    runs: Vec<(u64, u64, u8)>,
    least: u8,
}

impl AxisRuns {
    fn of(states: &[u8]) -> Self {
        let mut runs: Vec<(u64, u64, u8)> = Vec::new();
        for (c, &state) in (0u64..).zip(states) {
            match runs.last_mut() {
                Some(last) if last.1 == c && last.2 == state => last.1 = c + 1,
                _ if state != OUTSIDE => runs.push((c, c + 1, state)),
                _ => {}
            }
        }
        let least = states.iter().copied().min().unwrap_or(OUTSIDE);
        Self { runs, least }
    }
}

/// The descent through one part's sorted keys.
struct Search<'s> {
    keys: &'s [u64],
    strides: &'s [u64],
    axes: &'s [AxisRuns],
    least_from: &'s [u8],
}

impl Search<'_> {
    /// Hand `emit` the entries in `[lo, hi)` (all keys from `base` with
    /// axes before `k` fixed, their least state `state`), by state, ascending.
    fn descend(
        &self,
        lo: usize,
        hi: usize,
        k: usize,
        base: u64,
        state: u8,
        emit: &mut impl FnMut(usize, usize, u8),
    ) {
        if lo == hi {
            return;
        }
        if k == self.axes.len() || self.least_from[k] >= state {
            emit(lo, hi, state);
            return;
        }
        let stride = self.strides[k];
        for &(c_lo, c_hi, axis_state) in &self.axes[k].runs {
            let within = state.min(axis_state);
            let a = lo + self.keys[lo..hi].partition_point(|&key| key < base + c_lo * stride);
            let b = a + self.keys[a..hi].partition_point(|&key| key < base + c_hi * stride);
            if a == b {
                continue;
            }
            if self.least_from[k + 1] >= within {
                emit(a, b, within);
                continue;
            }
            // Each bin of this run present in the table, one at a time.
            let mut at = a;
            while at < b {
                let c = (self.keys[at] - base) / stride;
                let next_base = base + c * stride;
                let end = at + self.keys[at..b].partition_point(|&key| key < next_base + stride);
                self.descend(at, end, k + 1, next_base, within, emit);
                at = end;
            }
        }
    }
}

/// Entries to runs of rows: consecutive entries of one state extend the open run.
struct Emitter<'t> {
    table: &'t Table<'t>,
    open: [Option<(usize, usize, usize)>; 2],
    runs: BoxRuns,
}

impl<'t> Emitter<'t> {
    fn new(table: &'t Table<'t>) -> Self {
        Self {
            table,
            open: [None, None],
            runs: BoxRuns::default(),
        }
    }

    fn push(&mut self, part: usize, a: usize, b: usize, state: u8) {
        if state == OUTSIDE {
            return;
        }
        let slot = usize::from(state == INSIDE);
        match &mut self.open[slot] {
            Some((_, _, end)) if *end == a => *end = b,
            open => {
                let done = open.replace((part, a, b));
                self.close(slot, done);
            }
        }
    }

    fn flush(&mut self) {
        for slot in 0..2 {
            let done = self.open[slot].take();
            self.close(slot, done);
        }
    }

    fn close(&mut self, slot: usize, run: Option<(usize, usize, usize)>) {
        let Some((part, a, b)) = run else { return };
        let offset = self.table.starts[a];
        let row = [
            i64::try_from(part).expect("part number fits i64"),
            offset,
            self.table.ends[b - 1] - offset,
        ];
        if slot == 1 {
            self.runs.whole.push(row);
        } else {
            self.runs.boundary.push(row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runs by brute force: every entry's state from its decoded bins.
    fn by_hand(table: &Table<'_>, strides: &[u64], states: &[&[u8]]) -> BoxRuns {
        let mut out = Emitter::new(table);
        for (part, &(first, count)) in table.parts.iter().enumerate() {
            for e in first..first + count {
                let key = table.keys[e];
                let state = (0..strides.len())
                    .map(|k| {
                        let slots = states[k].len() as u64;
                        states[k][usize::try_from(key / strides[k] % slots).unwrap()]
                    })
                    .min()
                    .unwrap_or(INSIDE);
                out.push(part, e, e + 1, state);
            }
            out.flush();
        }
        out.runs
    }

    /// A small deterministic generator (xorshift), so the test needs no crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below
        }
    }

    #[test]
    fn equals_every_entry_decoded() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..400 {
            let n_axes = 1 + usize::try_from(rng.next(4)).unwrap();
            let slots: Vec<u64> = (0..n_axes).map(|_| 1 + rng.next(6)).collect();
            let mut strides = vec![1u64; n_axes];
            for k in (0..n_axes - 1).rev() {
                strides[k] = strides[k + 1] * slots[k + 1];
            }
            let total = strides[0] * slots[0];
            let states: Vec<Vec<u8>> = slots
                .iter()
                .map(|&s| (0..s).map(|_| u8::try_from(rng.next(3)).unwrap()).collect())
                .collect();
            let views: Vec<&[u8]> = states.iter().map(Vec::as_slice).collect();
            let (mut keys, mut starts, mut ends, mut parts) = (vec![], vec![], vec![], vec![]);
            for _ in 0..=rng.next(3) {
                let first = keys.len();
                let mut row = 0i64;
                for key in 0..total {
                    if rng.next(3) > 0 {
                        let rows = 1 + i64::try_from(rng.next(5)).unwrap();
                        keys.push(key);
                        starts.push(row);
                        row += rows;
                        ends.push(row);
                    }
                }
                parts.push((first, keys.len() - first));
            }
            let table = Table {
                keys: &keys,
                starts: &starts,
                ends: &ends,
                parts: &parts,
            };
            assert_eq!(
                box_runs(&table, &strides, &views),
                by_hand(&table, &strides, &views)
            );
        }
    }

    #[test]
    fn whole_axis_inside_is_one_run() {
        let keys = [0, 1, 2, 5, 7];
        let starts = [0, 3, 4, 9, 10];
        let ends = [3, 4, 9, 10, 12];
        let table = Table {
            keys: &keys,
            starts: &starts,
            ends: &ends,
            parts: &[(0, 5)],
        };
        let inside = [INSIDE; 4];
        let edge = [BOUNDARY, INSIDE];
        let runs = box_runs(&table, &[2, 1], &[&inside, &edge]);
        assert_eq!(runs.whole, vec![[0, 3, 1], [0, 9, 3]]);
        assert_eq!(runs.boundary, vec![[0, 0, 3], [0, 4, 5]]);
    }
}
