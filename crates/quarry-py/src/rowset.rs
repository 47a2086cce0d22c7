//! `RowSet`: rows of a logical table, one Roaring bitmap per block.

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use quarry_core::rowset;

use crate::errors::Result;
use crate::pool::{detach, detach_pieces};

/// Rows of a logical table, one Roaring bitmap per block.
#[pyclass(frozen, module = "quarry._core")]
#[derive(Clone)]
pub struct RowSet(pub rowset::RowSet);

#[pymethods]
impl RowSet {
    #[staticmethod]
    fn full(n_rows: u64, block_len: u64) -> Result<Self> {
        Ok(Self(rowset::RowSet::full(n_rows, block_len)?))
    }

    #[staticmethod]
    fn empty(n_rows: u64, block_len: u64) -> Result<Self> {
        Ok(Self(rowset::RowSet::empty(n_rows, block_len)?))
    }

    #[staticmethod]
    fn from_ids(
        py: Python<'_>,
        ids: PyReadonlyArray1<'_, i64>,
        n_rows: u64,
        block_len: u64,
    ) -> Result<Self> {
        let ids = ids.as_slice()?;
        if ids.iter().any(|&i| i < 0) {
            return Err(PyValueError::new_err("row ids must not be negative").into());
        }
        let ids: Vec<u64> = ids.iter().map(|&i| i as u64).collect();
        let rows = detach(py, || {
            rowset::RowSet::from_sorted_ids(n_rows, block_len, &ids)
        })?;
        Ok(Self(rows))
    }

    /// Every row of the blocks flagged true.
    #[staticmethod]
    fn full_blocks(n_rows: u64, block_len: u64, keep: Vec<bool>) -> Result<Self> {
        Ok(Self(rowset::RowSet::full_blocks(n_rows, block_len, &keep)?))
    }

    /// The portable, checksummed serialisation (see `RowSet.from_bytes`).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.to_bytes())
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> Result<Self> {
        Ok(Self(rowset::RowSet::from_bytes(data)?))
    }

    #[getter]
    fn n_rows(&self) -> u64 {
        self.0.n_rows()
    }

    #[getter]
    fn block_len(&self) -> u64 {
        self.0.block_len()
    }

    fn __len__(&self) -> usize {
        self.0.len() as usize
    }

    fn __and__(&self, py: Python<'_>, other: &Self) -> Result<Self> {
        Ok(Self(detach_pieces(py, self.0.blocks().len(), || {
            self.0.and(&other.0)
        })?))
    }

    fn __or__(&self, py: Python<'_>, other: &Self) -> Result<Self> {
        Ok(Self(detach_pieces(py, self.0.blocks().len(), || {
            self.0.or(&other.0)
        })?))
    }

    fn __sub__(&self, py: Python<'_>, other: &Self) -> Result<Self> {
        Ok(Self(detach_pieces(py, self.0.blocks().len(), || {
            self.0.minus(&other.0)
        })?))
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.0 == other.0
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn block_counts(&self) -> Vec<u64> {
        self.0.block_counts()
    }

    /// The rows of blocks `[first, stop)`, renumbered from 0.
    fn slice_blocks(&self, first: usize, stop: usize) -> Result<Self> {
        Ok(Self(self.0.slice_blocks(first, stop)?))
    }

    /// These rows placed at block `first` of a table of `n_rows` rows.
    fn place_blocks(&self, first: usize, n_rows: u64) -> Result<Self> {
        Ok(Self(self.0.place_blocks(first, n_rows)?))
    }

    /// Ascending global row ids as int64, written straight into the array.
    fn to_ids<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyArray1<i64>>> {
        let n = self.0.len() as usize;
        // SAFETY: the array is created here and filled completely by
        // `fill_ids` (which checks the length) before Python can see it.
        let array = unsafe { PyArray1::<i64>::new(py, [n], false) };
        let out = unsafe { array.as_slice_mut()? };
        detach_pieces(py, self.0.blocks().len(), || self.0.fill_ids(out))?;
        Ok(array)
    }

    fn __repr__(&self) -> String {
        format!(
            "RowSet({} of {} rows, blocks of {})",
            self.0.len(),
            self.0.n_rows(),
            self.0.block_len()
        )
    }
}
