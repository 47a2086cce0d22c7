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
/// images narrows the search to the edges in a value's bucket. Buckets are
/// fine enough that nearly all hold at most two edges, which two branchless
/// comparisons settle; wider buckets fall back to a binary search. Answers
/// equal [`bin_of`].
pub struct BinLookup<'a, K> {
    edges: &'a [K],
    /// `edges` plus two copies of the last edge, so the branchless path can
    /// always read two edges (the extra ones are masked off by the width).
    padded: Vec<K>,
    base: u64,
    shift: u32,
    bounds: Vec<u32>,
}

/// Aim for this many buckets per edge (at most 2^16 buckets).
const BUCKETS_PER_EDGE: usize = 16;

impl<'a, K: Key> BinLookup<'a, K> {
    pub fn new(edges: &'a [K]) -> Self {
        let (Some(first), Some(last)) = (edges.first(), edges.last()) else {
            return Self {
                edges,
                padded: vec![K::LOWEST; 2],
                base: 0,
                shift: 64,
                bounds: vec![0, 0],
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
        // bounds[b] = number of edges whose image lies below bucket b's start.
        let mut bounds = Vec::with_capacity(buckets + 1);
        bounds.push(0u32);
        let mut i = 0usize;
        for b in 1..buckets {
            let start = base + ((b as u64) << shift);
            while i < edges.len() && edges[i].ordered() < start {
                i += 1;
            }
            bounds.push(i as u32);
        }
        bounds.push(edges.len() as u32);
        let mut padded = edges.to_vec();
        padded.extend([*last, *last]);
        Self {
            edges,
            padded,
            base,
            shift,
            bounds,
        }
    }

    /// The bin a (non-missing) value falls in.
    #[inline]
    // `&` on booleans on purpose: both sides are cheap, and no branch means no
    // misprediction on the hot path of every build.
    #[allow(clippy::needless_bitwise_bool)]
    pub fn bin(&self, value: K) -> usize {
        let offset = value.ordered().saturating_sub(self.base);
        let bucket = if self.shift >= 64 {
            0
        } else {
            (offset >> self.shift) as usize
        };
        let bucket = bucket.min(self.bounds.len() - 2);
        let lo = self.bounds[bucket] as usize;
        let hi = self.bounds[bucket + 1] as usize;
        let width = hi - lo;
        if width <= 2 {
            let pair = &self.padded[lo..lo + 2];
            lo + usize::from((width > 0) & (pair[0] <= value))
                + usize::from((width > 1) & (pair[1] <= value))
        } else {
            lo + self.edges[lo..hi].partition_point(|edge| *edge <= value)
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

/// Round edges to `digits` significant decimal digits (`FastBit`'s precision
/// bins), so that literals people type (`1.5`, `0.3`) tend to fall exactly on
/// an edge and need no candidate check. Duplicates after rounding collapse.
///
/// # Examples
/// ```
/// use quarry_core::binning::round_edges;
/// assert_eq!(round_edges(&[1.234, 1.238, 5.06], 2), vec![1.2, 5.1]);
/// ```
pub fn round_edges(edges: &[f64], digits: u32) -> Vec<f64> {
    let digits = digits.clamp(1, 17) as usize;
    let mut out: Vec<f64> = Vec::with_capacity(edges.len());
    for &edge in edges {
        if !edge.is_finite() {
            continue;
        }
        // Decimal rounding through the shortest-exact formatter: exact, no
        // accumulated float error from pow/multiply.
        let rounded: f64 = format!("{:.*e}", digits - 1, edge).parse().unwrap_or(edge);
        if out.last().is_none_or(|last| rounded > *last) {
            out.push(rounded);
        }
    }
    out
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
    fn bin_of_matches_edge_semantics() {
        let edges = [0_u64, 10, 20];
        assert_eq!(bin_of(&edges, 0), 1);
        assert_eq!(bin_of(&edges, 9), 1);
        assert_eq!(bin_of(&edges, 10), 2);
        assert_eq!(bin_of(&edges, u64::MAX), 3);
    }
}
