//! Index files and the indexed variables read from them: `IndexFile`,
//! `Column` and the `Tally` of what their calls decoded.

use std::fs::File;
use std::sync::Arc;

use memmap2::Mmap;
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use quarry_core::column::{self, Buffer, ColumnIndex};

use crate::conversions::{interval, kind_named, with_keyed, with_kind};
use crate::errors::{CorruptBlockError, Result};
use crate::pool::detach_pieces;
use crate::rowset::RowSet;

/// A memory-mapped index file; columns opened on it keep its bytes mapped.
#[pyclass(frozen, module = "quarry._core")]
pub struct IndexFile {
    map: Arc<Mmap>,
}

#[pymethods]
impl IndexFile {
    #[new]
    fn new(path: std::path::PathBuf) -> Result<Self> {
        let file = File::open(&path)?;
        // SAFETY: index files are replaced by rename, never rewritten in place,
        // so the mapped inode does not change under us.
        let map = unsafe { Mmap::map(&file)? };
        Ok(Self { map: Arc::new(map) })
    }

    fn __len__(&self) -> usize {
        self.map.len()
    }

    /// The bytes in `[offset, offset + length)`.
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        length: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, self.section(offset, length)?))
    }

    /// The CRC-32 (`zlib.crc32`'s) of the bytes in `[offset, offset + length)`,
    /// without copying them out: 0.7 ms for a 19 MB manifest where
    /// `zlib.crc32` of the bytes read takes 7.6.
    fn crc32(&self, py: Python<'_>, offset: usize, length: usize) -> PyResult<u32> {
        let section = self.section(offset, length)?;
        // On this thread, without the GIL: one pass, nothing to share out, and
        // handing it to a pool's worker cost 60 us on a small manifest.
        Ok(py.detach(|| quarry_core::cluster::crc32(section, 0)))
    }
}

impl IndexFile {
    fn section(&self, offset: usize, length: usize) -> PyResult<&[u8]> {
        let end = offset.checked_add(length).filter(|&e| e <= self.map.len());
        let end = end.ok_or_else(|| {
            CorruptBlockError::new_err("section runs past the end of the index file")
        })?;
        Ok(&self.map[offset..end])
    }
}

/// What a query's index calls did (bitmaps decoded), added up over every
/// call it is passed to.
#[pyclass(frozen, module = "quarry._core")]
#[derive(Default)]
pub struct Tally(column::Tally);

#[pymethods]
impl Tally {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    #[getter]
    fn bitmaps_decoded(&self) -> u64 {
        self.0.bitmaps_decoded()
    }
}

/// The caller's tally, or a throwaway one.
fn tally_or_own<'a>(tally: Option<&'a Tally>, own: &'a column::Tally) -> &'a column::Tally {
    tally.map_or(own, |t| &t.0)
}

enum Inner {
    F64(ColumnIndex<f64>),
    I64(ColumnIndex<i64>),
    U64(ColumnIndex<u64>),
}

/// `$body` with `$col` the column's index and `$k` its key type.
macro_rules! with_column {
    ($self:ident, $col:ident, $k:ident => $body:expr) => {
        match &$self.inner {
            Inner::F64($col) => with_keyed!(@ f64, $k, $body),
            Inner::I64($col) => with_keyed!(@ i64, $k, $body),
            Inner::U64($col) => with_keyed!(@ u64, $k, $body),
        }
    };
}

/// (count of valid values, sum, M2, min, max) of one block.
type BlockStats = (u64, f64, f64, Py<PyAny>, Py<PyAny>);

/// One indexed variable: all its blocks, in one index file or spread over
/// several (the shards ranks wrote). It holds the files' maps itself, so
/// nothing a caller passes later can point it at other bytes.
#[pyclass(frozen, module = "quarry._core")]
pub struct Column {
    inner: Inner,
}

#[pymethods]
impl Column {
    /// Open the column of key kind `kind` whose blocks lie at `spans`: (file
    /// number in `files`, byte offset, byte length), one per block.
    #[staticmethod]
    fn open(
        py: Python<'_>,
        files: Vec<Bound<'_, IndexFile>>,
        kind: &str,
        spans: Vec<(u32, u64, u64)>,
        n_rows: u64,
        block_len: u64,
    ) -> Result<Self> {
        let kind = kind_named(kind)?;
        let buffers: Vec<Buffer> = files
            .iter()
            .map(|f| Arc::clone(&f.get().map) as Buffer)
            .collect();
        let inner = detach_pieces(
            py,
            spans.len(),
            || with_kind!(kind, K => ColumnIndex::<K>::open(buffers, &spans, n_rows, block_len).map(Inner::from)),
        )?;
        Ok(Self { inner })
    }

    #[getter]
    fn n_rows(&self) -> u64 {
        with_column!(self, c, K => c.n_rows())
    }

    #[getter]
    fn block_len(&self) -> u64 {
        with_column!(self, c, K => c.block_len())
    }

    /// Count of rows surely inside, and the candidate rows to check; only
    /// in blocks `[first, stop)` when `blocks` is given.
    #[pyo3(signature = (lo, lo_incl, hi, hi_incl, blocks=None, tally=None))]
    #[allow(clippy::too_many_arguments)]
    fn count<'py>(
        &self,
        py: Python<'py>,
        lo: &Bound<'py, PyAny>,
        lo_incl: bool,
        hi: &Bound<'py, PyAny>,
        hi_incl: bool,
        blocks: Option<(usize, usize)>,
        tally: Option<&Tally>,
    ) -> Result<(u64, RowSet)> {
        let own = column::Tally::default();
        let tally = tally_or_own(tally, &own);
        let (sure, cand) = with_column!(self, c, K => {
            let iv = interval::<K>(lo, lo_incl, hi, hi_incl)?;
            let blocks = blocks.map_or(0..c.n_blocks(), |(first, stop)| first..stop);
            detach_pieces(py, c.n_blocks(), || c.count_blocks(&iv, blocks, tally))?
        });
        Ok((sure, RowSet(cand)))
    }

    /// Rows surely inside and candidate rows, restricted to `domain` if given.
    #[pyo3(signature = (lo, lo_incl, hi, hi_incl, domain=None, tally=None))]
    #[allow(clippy::too_many_arguments)]
    fn leaf<'py>(
        &self,
        py: Python<'py>,
        lo: &Bound<'py, PyAny>,
        lo_incl: bool,
        hi: &Bound<'py, PyAny>,
        hi_incl: bool,
        domain: Option<&RowSet>,
        tally: Option<&Tally>,
    ) -> Result<(RowSet, RowSet)> {
        let domain = domain.map(|d| &d.0);
        let own = column::Tally::default();
        let tally = tally_or_own(tally, &own);
        let (sure, cand) = with_column!(self, c, K => {
            let iv = interval::<K>(lo, lo_incl, hi, hi_incl)?;
            detach_pieces(py, c.n_blocks(), || c.leaf(&iv, domain, tally))?
        });
        Ok((RowSet(sure), RowSet(cand)))
    }

    /// Per block, the most rows where the interval can be true or unknown (0: false on all).
    fn block_bounds<'py>(
        &self,
        lo: &Bound<'py, PyAny>,
        lo_incl: bool,
        hi: &Bound<'py, PyAny>,
        hi_incl: bool,
    ) -> Result<Vec<u64>> {
        with_column!(self, c, K => {
            let iv = interval::<K>(lo, lo_incl, hi, hi_incl)?;
            Ok(c.block_bounds(&iv))
        })
    }

    /// Rows of the bins wholly inside the interval, and of those straddling
    /// its ends (the candidates the index would check), from the headers alone.
    fn range_rows<'py>(
        &self,
        lo: &Bound<'py, PyAny>,
        lo_incl: bool,
        hi: &Bound<'py, PyAny>,
        hi_incl: bool,
    ) -> Result<(u64, u64)> {
        with_column!(self, c, K => {
            let iv = interval::<K>(lo, lo_incl, hi, hi_incl)?;
            Ok(c.range_rows(&iv))
        })
    }

    /// Counts of `domain`'s rows per histogram bin (last bin closed) from the
    /// index, and the candidate rows whose values the caller must count.
    #[pyo3(signature = (edges, domain=None, tally=None))]
    fn histogram(
        &self,
        py: Python<'_>,
        edges: PyReadonlyArray1<'_, f64>,
        domain: Option<&RowSet>,
        tally: Option<&Tally>,
    ) -> Result<(Vec<u64>, RowSet)> {
        let edges = edges.as_slice()?;
        let domain = domain.map(|d| &d.0);
        let own = column::Tally::default();
        let tally = tally_or_own(tally, &own);
        let (counts, cand) = with_column!(self, c, K => detach_pieces(py, c.n_blocks(), || c.histogram(edges, domain, tally))?);
        Ok((counts, RowSet(cand)))
    }

    /// Rows whose value is missing.
    #[pyo3(signature = (tally=None))]
    fn missing(&self, py: Python<'_>, tally: Option<&Tally>) -> Result<RowSet> {
        let own = column::Tally::default();
        let tally = tally_or_own(tally, &own);
        Ok(RowSet(
            with_column!(self, c, K => detach_pieces(py, c.n_blocks(), || c.missing(tally))?),
        ))
    }

    /// Every bitmap of every block decoded and checked: None when all are
    /// whole, else the first damaged block and why.
    fn check_bitmaps(&self, py: Python<'_>) -> Option<(usize, String)> {
        with_column!(self, c, K => detach_pieces(py, c.n_blocks(), || c.check_bitmaps()))
    }

    /// Per block: (count of valid values, sum, M2 = sum of squared deviations from the mean, min, max).
    fn stats(&self, py: Python<'_>) -> PyResult<Vec<BlockStats>> {
        with_column!(self, c, K => c
            .stats()
            .into_iter()
            .map(|s| {
                Ok((s.count, s.sum, s.m2, s.min.into_pyobject(py)?.into_any().unbind(), s.max.into_pyobject(py)?.into_any().unbind()))
            })
            .collect())
    }
}

macro_rules! inner_from {
    ($($k:ty => $v:ident),*) => {$(
        impl From<ColumnIndex<$k>> for Inner {
            fn from(c: ColumnIndex<$k>) -> Self {
                Inner::$v(c)
            }
        }
    )*};
}
inner_from!(f64 => F64, i64 => I64, u64 => U64);
