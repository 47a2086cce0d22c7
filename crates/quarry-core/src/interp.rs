//! Multilinear interpolation: each point's weighted sum over the corners of
//! its cell, in one pass over the points.
//!
//! A point in a cell of a rank-`r` grid has `2^r` corners, in the order of
//! their bits (the first axis' slowest: `(0, 0, 0)`, `(0, 0, 1)`, `(0, 1,
//! 0)`, ...). A corner's weight is the product, axis by axis in order, of
//! `1 - t` (bit 0) or `t` (bit 1), `t` being the point's fraction of the way
//! across the cell along that axis; its value is a node of the field, found
//! as a *plane* index (one per point) plus a constant offset. The sum is
//! taken in float64, corner by corner from zero: the same operations in the
//! same order as `out = 0; out += w * v` over whole arrays, so the answer is
//! bit for bit that of `NumPy` evaluating the formula.

use crate::scan::Values;

/// Add up, for each point `i`, each corner's weight times its value
/// `values[planes[p][i] + offset]`, corner `k` being `corners[k] = (p,
/// offset)`, into `out[i]`; `t[a]` are the points' fractions along axis `a`
/// (`t.len()` is the rank, `corners.len()` is `2^rank`).
///
/// # Panics
/// If the lengths disagree, or a node lies outside `values`.
///
/// # Examples
/// ```
/// use quarry_core::interp::corner_sum;
/// use quarry_core::scan::Values;
/// // f(x) = 10 x on nodes 0, 1, 2; points at 0.25 (cell 0) and 1.5 (cell 1).
/// let field = [0.0f32, 10.0, 20.0];
/// let mut out = [0.0; 2];
/// let t = [0.25, 0.5];
/// corner_sum(Values::F32(&field), &[&t], &[&[0, 1]], &[(0, 0), (0, 1)], &mut out);
/// assert_eq!(out, [2.5, 15.0]);
/// ```
pub fn corner_sum(
    values: Values<'_>,
    t: &[&[f64]],
    planes: &[&[i64]],
    corners: &[(usize, i64)],
    out: &mut [f64],
) {
    let rank = t.len();
    assert!(
        (1..=8).contains(&rank) && corners.len() == 1 << rank,
        "2^rank corners, rank 1 to 8"
    );
    assert!(
        t.iter().all(|a| a.len() == out.len())
            && planes.iter().all(|p| p.len() == out.len())
            && corners.iter().all(|&(p, _)| p < planes.len()),
        "one fraction, one plane index and one answer per point"
    );
    match values {
        Values::F32(v) => sum(v, t, planes, corners, out),
        Values::F64(v) => sum(v, t, planes, corners, out),
        Values::I8(v) => sum(v, t, planes, corners, out),
        Values::I16(v) => sum(v, t, planes, corners, out),
        Values::I32(v) => sum(v, t, planes, corners, out),
        Values::I64(v) => sum(v, t, planes, corners, out),
        Values::U8(v) => sum(v, t, planes, corners, out),
        Values::U16(v) => sum(v, t, planes, corners, out),
        Values::U32(v) => sum(v, t, planes, corners, out),
        Values::U64(v) => sum(v, t, planes, corners, out),
    }
}

/// A stored value as float64: exact but for 64-bit integers above 2^53,
/// which round as `NumPy`'s conversion does.
trait AsF64: Copy {
    fn as_f64(self) -> f64;
}

macro_rules! as_f64 {
    ($($t:ty),*) => {$(
        impl AsF64 for $t {
            #[inline]
            #[allow(clippy::cast_lossless, clippy::cast_precision_loss)]
            fn as_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}

as_f64!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64);

fn sum<V: AsF64>(
    values: &[V],
    t: &[&[f64]],
    planes: &[&[i64]],
    corners: &[(usize, i64)],
    out: &mut [f64],
) {
    let rank = t.len();
    let mut sides = [[0.0f64; 2]; 8];
    for (i, out) in out.iter_mut().enumerate() {
        for (side, fraction) in sides.iter_mut().zip(t) {
            *side = [1.0 - fraction[i], fraction[i]];
        }
        let mut total = 0.0f64;
        for (k, &(plane, offset)) in corners.iter().enumerate() {
            let mut weight = sides[0][(k >> (rank - 1)) & 1];
            for (axis, side) in sides.iter().enumerate().take(rank).skip(1) {
                weight *= side[(k >> (rank - 1 - axis)) & 1];
            }
            let node = usize::try_from(planes[plane][i] + offset).expect("a node of the field");
            total += weight * values[node].as_f64();
        }
        *out = total;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn sums_as_numpy_would(nodes in prop::collection::vec(-1e6f64..1e6, 8..64),
                               points in prop::collection::vec((0.0f64..1.0, 0.0f64..1.0, 0usize..4), 0..50)) {
            // A 2-D field of rows of 4 nodes; each point's cell at (row r, column c).
            let rows = nodes.len() / 4;
            prop_assume!(rows >= 2);
            let (t0, t1): (Vec<f64>, Vec<f64>) = points.iter().map(|p| (p.0, p.1)).unzip();
            let lower: Vec<i64> = points.iter().map(|p| ((p.2 % (rows - 1)) * 4 + p.2 % 3) as i64).collect();
            let corners = [(0, 0), (0, 1), (0, 4), (0, 5)];
            let mut out = vec![f64::NAN; points.len()];
            corner_sum(Values::F64(&nodes), &[&t0, &t1], &[&lower], &corners, &mut out);
            for (i, got) in out.iter().enumerate() {
                // The weights array by array, then out = 0; out += w * v, corner by corner.
                let weights = [(1.0 - t0[i]) * (1.0 - t1[i]), (1.0 - t0[i]) * t1[i],
                               t0[i] * (1.0 - t1[i]), t0[i] * t1[i]];
                let mut want = 0.0;
                for (w, (_, offset)) in weights.iter().zip(corners) {
                    want += w * nodes[(lower[i] + offset) as usize];
                }
                prop_assert_eq!(got.to_bits(), want.to_bits());
            }
        }
    }

    #[test]
    fn integers_and_nan_nodes() {
        let field = [0i16, 100, -300];
        let mut out = [0.0; 2];
        corner_sum(
            Values::I16(&field),
            &[&[0.5, 1.0]],
            &[&[0, 1]],
            &[(0, 0), (0, 1)],
            &mut out,
        );
        assert_eq!(out, [50.0, -300.0]);
        let nan = [f32::NAN, 1.0];
        corner_sum(
            Values::F32(&nan),
            &[&[1.0]],
            &[&[0]],
            &[(0, 0), (0, 1)],
            &mut out[..1],
        );
        assert!(out[0].is_nan()); // a NaN node reaches the cell, weight 0 or not
    }
}
