//! Multilinear interpolation's sum over each point's cell corners (see
//! `quarry_core::interp`).

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use quarry_core::interp;

use crate::conversions::Held;
use crate::errors::Result;
use crate::pool::detach;

/// Set `out[i]` (float64) to the sum over the `2^rank` corners of point
/// `i`'s cell (corner bits in order, the first axis' slowest) of the
/// corner's weight, the product over the axes of `1 - t[a][i]` or
/// `t[a][i]`, times its node `values[planes[p][i] + offset]`, corner `k`
/// being `corners[k] = (p, offset)`; in float64, as `NumPy` would.
#[pyfunction]
pub fn corner_sum<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyUntypedArray>,
    t: Vec<PyReadonlyArray1<'py, f64>>,
    planes: Vec<PyReadonlyArray1<'py, i64>>,
    corners: Vec<(usize, i64)>,
    out: &Bound<'py, PyArray1<f64>>,
) -> Result<()> {
    let wrong = |why: String| PyValueError::new_err(format!("corner_sum: {why}"));
    let held = Held::new(values)?;
    let values = held.values()?;
    let t: Vec<&[f64]> = t
        .iter()
        .map(PyReadonlyArray1::as_slice)
        .collect::<std::result::Result<_, _>>()?;
    let planes: Vec<&[i64]> = planes
        .iter()
        .map(PyReadonlyArray1::as_slice)
        .collect::<std::result::Result<_, _>>()?;
    let mut out = out.try_readwrite().map_err(|e| wrong(e.to_string()))?;
    let out = out.as_slice_mut()?;
    if !(1..=8).contains(&t.len()) || corners.len() != 1 << t.len() {
        return Err(wrong(format!("{} corners for {} axes", corners.len(), t.len())).into());
    }
    let n = out.len();
    if t.iter().any(|a| a.len() != n) || planes.iter().any(|p| p.len() != n) {
        return Err(wrong("one fraction and one plane index per point".into()).into());
    }
    // Each plane's least and greatest index, found once (corners share planes).
    let extents: Vec<(i64, i64)> = planes
        .iter()
        .map(|rows| {
            rows.iter()
                .fold((i64::MAX, i64::MIN), |(l, h), &r| (l.min(r), h.max(r)))
        })
        .collect();
    let inside = |node: Option<i64>| node.is_some_and(|at| (0..values.len() as i64).contains(&at));
    for &(plane, offset) in &corners {
        let Some(&(low, high)) = extents.get(plane) else {
            return Err(wrong(format!("corner of plane {plane}, of {}", planes.len())).into());
        };
        if n > 0 && !(inside(low.checked_add(offset)) && inside(high.checked_add(offset))) {
            return Err(wrong(format!("nodes outside the {} values", values.len())).into());
        }
    }
    detach(py, || {
        interp::corner_sum(values, &t, &planes, &corners, out);
    });
    Ok(())
}
