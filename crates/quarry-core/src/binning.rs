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
    fn bin_of_matches_edge_semantics() {
        let edges = [0_u64, 10, 20];
        assert_eq!(bin_of(&edges, 0), 1);
        assert_eq!(bin_of(&edges, 9), 1);
        assert_eq!(bin_of(&edges, 10), 2);
        assert_eq!(bin_of(&edges, u64::MAX), 3);
    }
}
