//! Building an index: bin edges from a sample, and block indexes from values.

use numpy::{IntoPyArray, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use quarry_core::{binning, column};

use crate::conversions::{contiguous, kind_of, with_keyed, with_kind, Held};
use crate::errors::Result;
use crate::pool::{detach, detach_pieces};

/// Index `values` (any supported dtype, 1-D, contiguous) in blocks of
/// `block_len` rows with `edges` (float64, int64 or uint64: the key type of
/// the values' dtype). Returns, per block, its index bytes and the CRC-32 of
/// the block's source bytes.
#[pyfunction]
pub fn build_blocks<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyUntypedArray>,
    edges: &Bound<'py, PyUntypedArray>,
    block_len: usize,
) -> Result<Vec<(Bound<'py, PyBytes>, u32)>> {
    let held = Held::new(values)?;
    let blocks = with_keyed!(held.values()?, s, K => {
        let edges = contiguous::<K>(edges)?;
        let edges = edges.as_slice()?;
        detach_pieces(py, s.len().div_ceil(block_len.max(1)), || {
            column::build_blocks::<K, _>(s, edges, block_len)
        })?
    });
    Ok(blocks
        .iter()
        .map(|b| (PyBytes::new(py, &b.bytes), b.source_crc32))
        .collect())
}

/// A variable's bin edges from a sample (float64, int64 or uint64; the
/// edges have the sample's dtype): equal-weight cut points merged with the
/// `digits`-significant decimals in the sample's range (0: none).
#[pyfunction]
pub fn variable_edges<'py>(
    py: Python<'py>,
    sample: &Bound<'py, PyUntypedArray>,
    nbins: usize,
    digits: u32,
) -> Result<Bound<'py, PyAny>> {
    with_kind!(kind_of(sample)?, K => {
        let sample = contiguous::<K>(sample)?;
        let sample = sample.as_slice()?;
        let edges = detach(py, || binning::variable_edges::<K>(sample, nbins, digits));
        Ok(edges.into_pyarray(py).into_any())
    })
}
