//! Clustering rows by `MDBin` number (see `quarry_core::cluster`), and the
//! CRC-32 a reorganised copy records of its parts.

use numpy::{
    IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use quarry_core::cluster;

use crate::conversions::contiguous;
use crate::errors::Result;
use crate::pool::detach;

/// Add to `keys` (uint64, one per row), in place, the sum over `columns`
/// (float32 or float64 arrays, as long) of each row's bin number times its
/// axis' stride; `axes` gives each column's `(origin, size, count, stride)`:
/// bins of `size` from `origin`, clipped to the first and the last of
/// `count`, NaN in bin `count`.
#[pyfunction]
pub fn add_bins<'py>(
    py: Python<'py>,
    columns: Vec<Bound<'py, PyUntypedArray>>,
    axes: Vec<(f64, f64, u64, u64)>,
    keys: &Bound<'py, PyArray1<u64>>,
) -> Result<()> {
    let wrong = |why: &str| PyTypeError::new_err(format!("add_bins: {why}"));
    if columns.len() != axes.len() {
        return Err(wrong("one axis per column").into());
    }
    if columns.iter().any(|c| c.len() != keys.len()) || axes.iter().any(|a| a.2 == 0) {
        return Err(wrong("one key per value and at least one bin per axis").into());
    }
    let held = columns
        .iter()
        .map(|c| {
            Ok(match contiguous::<f32>(c) {
                Ok(v) => Either::F32(v),
                Err(_) => Either::F64(contiguous::<f64>(c)?),
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let mut prepared = Vec::with_capacity(held.len());
    for (h, &(origin, size, count, stride)) in held.iter().zip(&axes) {
        let values = match h {
            Either::F32(v) => cluster::Floats::F32(v.as_slice()?),
            Either::F64(v) => cluster::Floats::F64(v.as_slice()?),
        };
        let binning = cluster::FloatAxis {
            origin,
            size,
            count,
            stride,
        };
        prepared.push((values, binning));
    }
    let mut keys = keys.try_readwrite().map_err(|e| wrong(&e.to_string()))?;
    let keys = keys.as_slice_mut()?;
    detach(py, || cluster::add_bins(&prepared, keys));
    Ok(())
}

enum Either<'py> {
    F32(PyReadonlyArray1<'py, f32>),
    F64(PyReadonlyArray1<'py, f64>),
}

/// The stable order of `keys` (uint64): the rows in ascending key order,
/// rows of one key ascending, as uint64 (row numbers, to view as int64); with
/// the keys present (uint64) and where each one's rows start (int64).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn stable_order<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyUntypedArray>,
) -> Result<(
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<i64>>,
)> {
    let keys = contiguous::<u64>(keys)?;
    let keys = keys.as_slice()?;
    // NumPy's allocations: large ones ask for huge pages, so the first
    // touch of these buffers costs a fraction of what a Vec's does.
    let order = PyArray1::<u64>::zeros(py, keys.len(), false);
    let spare = PyArray1::<u64>::zeros(py, keys.len(), false);
    let table = {
        let mut order_rw = order
            .try_readwrite()
            .map_err(|e| PyTypeError::new_err(e.to_string()))?;
        let mut spare_rw = spare
            .try_readwrite()
            .map_err(|e| PyTypeError::new_err(e.to_string()))?;
        let (o, s) = (order_rw.as_slice_mut()?, spare_rw.as_slice_mut()?);
        detach(py, || cluster::stable_order(keys, o, s))
    };
    Ok((
        order,
        table.keys.into_pyarray(py),
        table.starts.into_pyarray(py),
    ))
}

/// The CRC-32 of `data` (uint8) continuing from `start`: `zlib.crc32`'s.
#[pyfunction]
#[pyo3(signature = (data, start=0))]
pub fn crc32<'py>(py: Python<'py>, data: &Bound<'py, PyUntypedArray>, start: u32) -> Result<u32> {
    let data = contiguous::<u8>(data)?;
    let data = data.as_slice()?;
    Ok(detach(py, || cluster::crc32(data, start)))
}
