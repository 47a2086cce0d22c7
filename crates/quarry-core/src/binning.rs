//! Bin edges shared by all blocks of a variable.
//!
//! `edges` is sorted and strictly increasing; bin 0 holds values below
//! `edges[0]`, bin `i` holds `[edges[i-1], edges[i])`, and the last bin holds
//! values at or above the last edge. Any edges give exact answers (boundary
//! bins are checked); good edges make the boundary bins small.

use crate::key::Key;

/// The bin a (non-missing) value falls in.
///
/// # Examples
/// ```
/// use quarry_core::binning::bin_of;
/// let edges = [1.0, 2.0];
/// assert_eq!(bin_of(&edges, 0.5), 0);
/// assert_eq!(bin_of(&edges, 1.0), 1);
/// assert_eq!(bin_of(&edges, 7.0), 2);
/// ```
#[inline]
pub fn bin_of<K: Key>(edges: &[K], value: K) -> usize {
    edges.partition_point(|edge| *edge <= value)
}

/// Constant-time bin lookup: a table over buckets of the keys' ordered
/// images. Buckets are fine enough that nearly all hold at most one edge
/// strictly inside them; for those, a value's bin is the bucket's starting
/// bin plus one comparison with that edge, with no branch on the value. A
/// bucket crowded with more edges is flagged and searched (one table entry
/// of two words beat entries holding two edges, and the earlier two-level
/// table, by a quarter on uniform and on skewed edges). Answers equal
/// [`bin_of`].
pub struct BinLookup<'a, K> {
    edges: &'a [K],
    base: u64,
    shift: u32,
    /// Per bucket: the image of the one edge strictly inside it, less one
    /// (`u64::MAX`: none, so `image > threshold` is never true), and the
    /// bucket's starting bin (edges at or below its start) shifted left by
    /// one, its low bit set when more than one edge lies inside.
    table: Vec<[u64; 2]>,
}

/// Aim for this many buckets per edge (at most 2^16 buckets).
const BUCKETS_PER_EDGE: usize = 8;

impl<'a, K: Key> BinLookup<'a, K> {
    pub fn new(edges: &'a [K]) -> Self {
        let (Some(first), Some(last)) = (edges.first(), edges.last()) else {
            return Self {
                edges,
                base: 0,
                shift: 0,
                table: vec![[u64::MAX, 0]],
            };
        };
        let bits = (edges.len() * BUCKETS_PER_EDGE)
            .next_power_of_two()
            .trailing_zeros()
            .clamp(4, 16);
        let base = first.ordered();
        let span = last.ordered() - base;
        let width = 64 - span.leading_zeros();
        let shift = width.saturating_sub(bits);
        let buckets = ((span >> shift) + 1) as usize;
        let images: Vec<u64> = edges.iter().map(|e| e.ordered()).collect();
        let mut table = Vec::with_capacity(buckets);
        // at: edges at or below the bucket's start; inside: and below the next start.
        let (mut at, mut inside) = (0usize, 0usize);
        for b in 0..buckets {
            let start = base + ((b as u64) << shift);
            while at < images.len() && images[at] <= start {
                at += 1;
            }
            if b + 1 == buckets {
                inside = images.len();
            } else {
                let next = start + (1u64 << shift);
                inside = inside.max(at);
                while inside < images.len() && images[inside] < next {
                    inside += 1;
                }
            }
            let threshold = if inside == at + 1 {
                images[at] - 1
            } else {
                u64::MAX
            };
            table.push([threshold, (at as u64) << 1 | u64::from(inside > at + 1)]);
        }
        Self {
            edges,
            base,
            shift,
            table,
        }
    }

    /// The bin a (non-missing) value falls in.
    #[inline]
    pub fn bin(&self, value: K) -> usize {
        let image = value.ordered();
        let offset = image.wrapping_sub(self.base);
        let bucket = ((offset >> self.shift) as usize).min(self.table.len() - 1);
        let [first, start] = self.table[bucket];
        let at = (start >> 1) as usize;
        let bin = if start & 1 == 0 {
            at + usize::from(image > first)
        } else {
            let end = self
                .table
                .get(bucket + 1)
                .map_or(self.edges.len(), |next| (next[1] >> 1) as usize);
            at + self.edges[at..end].partition_point(|edge| *edge <= value)
        };
        // Below the first edge (the bucket offset wrapped around): bin 0.
        if image < self.base {
            0
        } else {
            bin
        }
    }
}

/// Equal-weight edges: cut points at the quantiles of `sample`, so each bin
/// holds about the same number of rows. Missing values are ignored; repeated
/// values collapse (a variable with few distinct values gets one bin per value).
///
/// # Examples
/// ```
/// use quarry_core::binning::equal_weight_edges;
/// let sample: Vec<f64> = (0..100).map(f64::from).collect();
/// assert_eq!(equal_weight_edges(&sample, 4), vec![25.0, 50.0, 75.0]);
/// ```
pub fn equal_weight_edges<K: Key>(sample: &[K], nbins: usize) -> Vec<K> {
    let mut sorted: Vec<K> = sample.iter().copied().filter(|v| !v.is_missing()).collect();
    if sorted.is_empty() || nbins < 2 {
        return Vec::new();
    }
    sorted.sort_unstable_by(K::cmp_total);
    let n = sorted.len();
    let mut edges: Vec<K> = Vec::with_capacity(nbins);
    for i in 1..nbins {
        let cut = sorted[(i * n) / nbins];
        // Strictly increasing and never equal to the sample minimum, which
        // would leave bin 0 empty.
        if edges.last().is_none_or(|last| cut > *last) && cut > sorted[0] {
            edges.push(cut);
        }
    }
    edges
}

/// Every decimal with `digits` significant digits in `[lo, hi]` (`FastBit`'s
/// precision bins), over at most `decades` decades below the larger
/// magnitude. Literals people type (`1.5`, `0.3`, `140`) are such decimals,
/// so a range on them lands exactly on edges and needs no candidate check.
///
/// # Examples
/// ```
/// use quarry_core::binning::decimal_edges;
/// let edges = decimal_edges(0.95, 1.25, 2, 9);
/// assert_eq!(edges, vec![0.95, 0.96, 0.97, 0.98, 0.99, 1.0, 1.1, 1.2]);
/// ```
pub fn decimal_edges(lo: f64, hi: f64, digits: u32, decades: u32) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || lo > hi || digits == 0 {
        return Vec::new();
    }
    let digits = digits.min(6) as i32;
    let top = lo.abs().max(hi.abs());
    if top == 0.0 {
        return vec![0.0];
    }
    let top_exp = top.log10().floor() as i32;
    let bottom_exp = top_exp - decades as i32;
    let first = 10i64.pow(digits as u32 - 1);
    let mut out = Vec::new();
    for exp in bottom_exp..=top_exp {
        // Values m * 10^(exp - digits + 1) for m in 10^(d-1)..10^d, built from
        // their decimal text so each is the f64 nearest that decimal, exactly
        // as a typed literal parses.
        for m in first..first * 10 {
            let v: f64 = format!("{m}e{}", exp - digits + 1)
                .parse()
                .expect("a decimal parses");
            for signed in [-v, v] {
                if lo <= signed && signed <= hi {
                    out.push(signed);
                }
            }
        }
    }
    if lo <= 0.0 && 0.0 <= hi {
        out.push(0.0);
    }
    out.sort_by(f64::total_cmp);
    out.dedup();
    out
}

/// Merge two sorted edge lists into one strictly increasing list.
pub fn merge_edges<K: Key>(a: &[K], b: &[K]) -> Vec<K> {
    let mut out: Vec<K> = a
        .iter()
        .chain(b)
        .copied()
        .filter(|v| !v.is_missing())
        .collect();
    out.sort_unstable_by(K::cmp_total);
    out.dedup_by(|x, y| x == y);
    out
}

/// Decades below the largest magnitude that get decimal edges.
pub const DECIMAL_DECADES: u32 = 9;

/// A variable's edges: `nbins` equal-weight cut points of `sample` (they
/// bound the rows a range on any literal must check) merged with the
/// `digits`-significant decimals in the sample's range (a range on a typed
/// literal then needs no check at all). `digits == 0` leaves decimals out.
///
/// # Examples
/// ```
/// use quarry_core::binning::variable_edges;
/// let sample: Vec<f64> = (0..1000).map(|i| f64::from(i) / 100.0).collect();
/// let edges = variable_edges(&sample, 4, 1);
/// assert!(edges.contains(&2.5) && edges.contains(&3.0) && edges.contains(&0.01));
/// ```
pub fn variable_edges<K: Key>(sample: &[K], nbins: usize, digits: u32) -> Vec<K> {
    let quantiles = equal_weight_edges(sample, nbins);
    let finite = sample.iter().map(|v| v.to_f64()).filter(|v| v.is_finite());
    let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if digits == 0 || lo > hi {
        return quantiles;
    }
    let decimals: Vec<K> = decimal_edges(lo, hi, digits, DECIMAL_DECADES)
        .into_iter()
        .filter_map(K::from_f64_exact)
        .collect();
    merge_edges(&quantiles, &decimals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_are_strictly_increasing_on_repeated_values() {
        let sample = [3_i64, 3, 3, 3, 5, 5, 9];
        let edges = equal_weight_edges(&sample, 8);
        assert!(edges.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(edges, vec![5, 9]);
    }

    #[test]
    fn missing_values_are_ignored() {
        let sample = [f64::NAN, 1.0, 2.0, f64::NAN, 3.0, 4.0];
        assert_eq!(equal_weight_edges(&sample, 2), vec![3.0]);
        assert!(equal_weight_edges(&[f64::NAN], 4).is_empty());
    }

    #[test]
    fn lookup_equals_binary_search() {
        let edges: Vec<f64> = vec![
            -1e300,
            -3.0,
            -0.0,
            1e-9,
            0.5,
            0.500_000_1,
            2.0,
            1e10,
            f64::INFINITY,
        ];
        let lookup = BinLookup::new(&edges);
        let probes = [
            f64::NEG_INFINITY,
            -1e301,
            -3.0,
            -2.9,
            -0.0,
            0.0,
            1e-10,
            1e-9,
            0.5,
            0.500_000_05,
            3.0,
            1e11,
            f64::INFINITY,
        ];
        for v in probes {
            assert_eq!(lookup.bin(v), bin_of(&edges, v), "{v}");
        }
        let ints: Vec<i64> = vec![i64::MIN + 1, -5, 0, 7, 1 << 40];
        let lookup = BinLookup::new(&ints);
        for v in [i64::MIN, -6, -5, 0, 6, 7, 8, 1 << 41, i64::MAX] {
            assert_eq!(lookup.bin(v), bin_of(&ints, v), "{v}");
        }
        let none: Vec<u64> = Vec::new();
        assert_eq!(BinLookup::new(&none).bin(5), 0);
    }

    #[test]
    fn lookup_in_crowded_and_extreme_buckets() {
        // Far edges make the buckets wide, so the close ones crowd a bucket.
        let mut edges: Vec<u64> = (0..40).map(|k| 1000 + k).collect();
        edges.extend([1 << 40, u64::MAX - 1, u64::MAX]);
        let lookup = BinLookup::new(&edges);
        let probes = [
            0,
            999,
            1000,
            1001,
            1039,
            1040,
            1 << 40,
            u64::MAX - 2,
            u64::MAX - 1,
            u64::MAX,
        ];
        for v in probes.into_iter().chain(990..1050) {
            assert_eq!(lookup.bin(v), bin_of(&edges, v), "{v}");
        }
        let single = [7.5f64];
        let lookup = BinLookup::new(&single);
        for v in [f64::NEG_INFINITY, 7.0, 7.5, 8.0, f64::INFINITY] {
            assert_eq!(lookup.bin(v), bin_of(&single, v), "{v}");
        }
    }

    #[test]
    fn decimal_edges_are_typed_literals() {
        let edges = decimal_edges(1e-8, 30.0, 2, 9);
        for literal in ["0.1", "0.3", "1.0", "1.5", "1.6", "2.0", "0.2", "29"] {
            let v: f64 = literal.parse().unwrap();
            assert!(edges.contains(&v), "{literal}");
        }
        assert!(edges.windows(2).all(|w| w[0] < w[1]));
        assert!(edges.len() <= 10 * 90);
        let signed = decimal_edges(-150.0, 140.0, 2, 2);
        assert!(signed.contains(&-150.0) && signed.contains(&140.0) && signed.contains(&0.0));
        assert!(decimal_edges(f64::NAN, 1.0, 2, 9).is_empty());
        assert_eq!(merge_edges(&[1.0, 3.0], &[2.0, 3.0]), vec![1.0, 2.0, 3.0]);
        let ints = variable_edges(&[0_i64, 5, 37, 140, 1000], 2, 2);
        assert!(ints.contains(&140) && ints.contains(&37) && ints.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(variable_edges(&[u64::MAX], 4, 2), Vec::<u64>::new());
    }

    #[test]
    fn bin_of_matches_edge_semantics() {
        let edges = [0_u64, 10, 20];
        assert_eq!(bin_of(&edges, 0), 1);
        assert_eq!(bin_of(&edges, 9), 1);
        assert_eq!(bin_of(&edges, 10), 2);
        assert_eq!(bin_of(&edges, u64::MAX), 3);
    }
}
