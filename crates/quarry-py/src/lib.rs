//! `quarry._core`: the `PyO3` layer over `quarry-core`. Bindings only: argument
//! conversion, GIL release around long calls, and error mapping.

// PyO3 hands arguments over as owned values (arrays, vectors); taking them by
// value is how its extraction works, not a missed borrow.
#![allow(clippy::needless_pass_by_value)]

use std::cell::Cell;
use std::fs::File;
use std::sync::{Arc, Mutex};

use memmap2::Mmap;
use numpy::{
    IntoPyArray, PyArray1, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray1, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use quarry_core::binning;
use quarry_core::column::{self, ColumnIndex};
use quarry_core::eval::Interval;
use quarry_core::key::Key;
use quarry_core::rowset;
use quarry_core::scan;
use quarry_core::CoreError;

create_exception!(
    _core,
    CorruptBlockError,
    pyo3::exceptions::PyException,
    "Index bytes that do not parse."
);

thread_local! {
    // Worker threads the calling Python thread asked for (0: rayon's global
    // pool, one thread per core). Per Python thread, so two threads of one
    // process (a service answering two clients) can each choose.
    static JOBS: Cell<usize> = const { Cell::new(0) };
}

/// One pool per size, built on first use and kept: building a pool spawns
/// threads, which a query should not pay each time.
static POOLS: Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>> = Mutex::new(Vec::new());

fn pool(jobs: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    let mut pools = POOLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, pool)) = pools.iter().find(|(n, _)| *n == jobs) {
        return Ok(Arc::clone(pool));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .thread_name(|i| format!("quarry-{i}"))
        .build()
        .map_err(|e| PyValueError::new_err(format!("cannot start {jobs} threads: {e}")))?;
    let pool = Arc::new(pool);
    pools.push((jobs, Arc::clone(&pool)));
    Ok(pool)
}

/// Run `f` without the GIL on the calling thread's pool (see `set_jobs`).
fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    match JOBS.get() {
        0 => py.detach(f),
        jobs => {
            // A pool was built (and checked) when `set_jobs` chose it.
            let pool = pool(jobs).expect("pool built by set_jobs");
            py.detach(|| pool.install(f))
        }
    }
}

/// Use `jobs` worker threads for this Python thread's core calls from now
/// on (0: one per core); returns the previous setting.
#[pyfunction]
fn set_jobs(jobs: usize) -> PyResult<usize> {
    if jobs > 0 {
        pool(jobs)?;
    }
    Ok(JOBS.replace(jobs))
}

/// Worker threads this Python thread's core calls run on.
#[pyfunction]
fn jobs() -> usize {
    match JOBS.get() {
        0 => rayon::current_num_threads(),
        jobs => jobs,
    }
}

fn to_py(err: CoreError) -> PyErr {
    match err {
        CoreError::Corrupt(msg) => CorruptBlockError::new_err(msg),
        CoreError::Invalid(msg) => PyValueError::new_err(msg),
    }
}

/// Rows of a logical table, one Roaring bitmap per block.
#[pyclass(frozen, module = "quarry._core")]
#[derive(Clone)]
struct RowSet(rowset::RowSet);

#[pymethods]
impl RowSet {
    #[staticmethod]
    fn full(n_rows: u64, block_len: u64) -> PyResult<Self> {
        rowset::RowSet::full(n_rows, block_len)
            .map(Self)
            .map_err(to_py)
    }

    #[staticmethod]
    fn empty(n_rows: u64, block_len: u64) -> PyResult<Self> {
        rowset::RowSet::empty(n_rows, block_len)
            .map(Self)
            .map_err(to_py)
    }

    #[staticmethod]
    fn from_ids(
        py: Python<'_>,
        ids: PyReadonlyArray1<'_, i64>,
        n_rows: u64,
        block_len: u64,
    ) -> PyResult<Self> {
        let ids = ids.as_slice()?;
        if ids.iter().any(|&i| i < 0) {
            return Err(PyValueError::new_err("row ids must not be negative"));
        }
        let ids: Vec<u64> = ids.iter().map(|&i| i as u64).collect();
        detach(py, || {
            rowset::RowSet::from_sorted_ids(n_rows, block_len, &ids)
        })
        .map(Self)
        .map_err(to_py)
    }

    /// Every row of the blocks flagged true.
    #[staticmethod]
    fn full_blocks(n_rows: u64, block_len: u64, keep: Vec<bool>) -> PyResult<Self> {
        rowset::RowSet::full_blocks(n_rows, block_len, &keep)
            .map(Self)
            .map_err(to_py)
    }

    /// The portable, checksummed serialisation (see `RowSet.from_bytes`).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.to_bytes())
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        rowset::RowSet::from_bytes(data).map(Self).map_err(to_py)
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

    fn __and__(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        detach(py, || self.0.and(&other.0)).map(Self).map_err(to_py)
    }

    fn __or__(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        detach(py, || self.0.or(&other.0)).map(Self).map_err(to_py)
    }

    fn __sub__(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        detach(py, || self.0.minus(&other.0))
            .map(Self)
            .map_err(to_py)
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
    fn slice_blocks(&self, first: usize, stop: usize) -> PyResult<Self> {
        self.0.slice_blocks(first, stop).map(Self).map_err(to_py)
    }

    /// These rows placed at block `first` of a table of `n_rows` rows.
    fn place_blocks(&self, first: usize, n_rows: u64) -> PyResult<Self> {
        self.0.place_blocks(first, n_rows).map(Self).map_err(to_py)
    }

    /// Ascending global row ids as int64, written straight into the array.
    fn to_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let n = self.0.len() as usize;
        // SAFETY: the array is created here and filled completely by
        // `fill_ids` (which checks the length) before Python can see it.
        let array = unsafe { PyArray1::<i64>::new(py, [n], false) };
        let out = unsafe { array.as_slice_mut()? };
        detach(py, || self.0.fill_ids(out)).map_err(to_py)?;
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

/// A memory-mapped index file; columns borrow its bytes.
#[pyclass(frozen, module = "quarry._core")]
struct IndexFile {
    map: Arc<Mmap>,
}

#[pymethods]
impl IndexFile {
    #[new]
    fn new(path: std::path::PathBuf) -> PyResult<Self> {
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
        let end = offset.checked_add(length).filter(|&e| e <= self.map.len());
        let end = end.ok_or_else(|| {
            CorruptBlockError::new_err("section runs past the end of the index file")
        })?;
        Ok(PyBytes::new(py, &self.map[offset..end]))
    }
}

enum Inner {
    F64(ColumnIndex<f64>),
    I64(ColumnIndex<i64>),
    U64(ColumnIndex<u64>),
}

/// (count of valid values, sum, M2, min, max) of one block.
type BlockStats = (u64, f64, f64, Py<PyAny>, Py<PyAny>);

/// What a query's index calls did (bitmaps decoded), added up over every
/// call it is passed to.
#[pyclass(frozen, module = "quarry._core")]
#[derive(Default)]
struct Tally(column::Tally);

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

/// One indexed variable: all its blocks, in one index file or spread over
/// several (the shards ranks wrote).
#[pyclass(frozen, module = "quarry._core")]
struct Column {
    maps: Vec<Arc<Mmap>>,
    inner: Inner,
}

impl Column {
    fn buffers(&self) -> Vec<&[u8]> {
        self.maps.iter().map(|m| &m[..]).collect()
    }
}

/// Python numbers to keys; an integer bound outside the domain is an error
/// (the planner clamps before it gets here).
trait ExtractKey: Key {
    fn extract_key(ob: &Bound<'_, PyAny>) -> PyResult<Self>;
}

macro_rules! extract_key {
    ($t:ty) => {
        impl ExtractKey for $t {
            fn extract_key(ob: &Bound<'_, PyAny>) -> PyResult<Self> {
                ob.extract::<$t>()
            }
        }
    };
}
extract_key!(f64);
extract_key!(i64);
extract_key!(u64);

fn interval<K: ExtractKey>(
    lo: &Bound<'_, PyAny>,
    lo_incl: bool,
    hi: &Bound<'_, PyAny>,
    hi_incl: bool,
) -> PyResult<Interval<K>> {
    Ok(Interval {
        lo: K::extract_key(lo)?,
        lo_incl,
        hi: K::extract_key(hi)?,
        hi_incl,
    })
}

macro_rules! with_column {
    ($self:ident, $col:ident, $k:ident => $body:expr) => {
        match &$self.inner {
            Inner::F64($col) => {
                #[allow(dead_code)]
                type $k = f64;
                $body
            }
            Inner::I64($col) => {
                #[allow(dead_code)]
                type $k = i64;
                $body
            }
            Inner::U64($col) => {
                #[allow(dead_code)]
                type $k = u64;
                $body
            }
        }
    };
}

#[pymethods]
impl Column {
    /// Open the column whose blocks lie at `spans`: (file number in `files`,
    /// byte offset, byte length), one per block.
    #[staticmethod]
    fn open(
        py: Python<'_>,
        files: Vec<Bound<'_, IndexFile>>,
        kind: &str,
        spans: Vec<(u32, u64, u64)>,
        n_rows: u64,
        block_len: u64,
    ) -> PyResult<Self> {
        let maps: Vec<Arc<Mmap>> = files.iter().map(|f| Arc::clone(&f.get().map)).collect();
        let data: Vec<&[u8]> = maps.iter().map(|m| &m[..]).collect();
        let inner = detach(py, || -> Result<Inner, CoreError> {
            Ok(match kind {
                "f64" => Inner::F64(ColumnIndex::open(&data, &spans, n_rows, block_len)?),
                "i64" => Inner::I64(ColumnIndex::open(&data, &spans, n_rows, block_len)?),
                "u64" => Inner::U64(ColumnIndex::open(&data, &spans, n_rows, block_len)?),
                other => return Err(CoreError::Invalid(format!("unknown key kind {other:?}"))),
            })
        })
        .map_err(to_py)?;
        drop(data);
        Ok(Self { maps, inner })
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
    ) -> PyResult<(u64, RowSet)> {
        let data = &self.buffers()[..];
        let own = column::Tally::default();
        let tally = tally_or_own(tally, &own);
        with_column!(self, c, K => {
            let iv = interval::<K>(lo, lo_incl, hi, hi_incl)?;
            let blocks = blocks.map_or(0..usize::MAX, |(first, stop)| first..stop);
            detach(py, || c.count_blocks(data, &iv, blocks, tally)).map(|(n, cand)| (n, RowSet(cand))).map_err(to_py)
        })
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
    ) -> PyResult<(RowSet, RowSet)> {
        let data = &self.buffers()[..];
        let domain = domain.map(|d| &d.0);
        let own = column::Tally::default();
        let tally = tally_or_own(tally, &own);
        with_column!(self, c, K => {
            let iv = interval::<K>(lo, lo_incl, hi, hi_incl)?;
            detach(py, || c.leaf(data, &iv, domain, tally)).map(|(s, cand)| (RowSet(s), RowSet(cand))).map_err(to_py)
        })
    }

    /// Per block, the most rows where the interval can be true or unknown (0: false on all).
    fn block_bounds<'py>(
        &self,
        lo: &Bound<'py, PyAny>,
        lo_incl: bool,
        hi: &Bound<'py, PyAny>,
        hi_incl: bool,
    ) -> PyResult<Vec<u64>> {
        with_column!(self, c, K => {
            let iv = interval::<K>(lo, lo_incl, hi, hi_incl)?;
            Ok(c.block_bounds(&iv))
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
    ) -> PyResult<(Vec<u64>, RowSet)> {
        let data = &self.buffers()[..];
        let edges = edges.as_slice()?;
        let domain = domain.map(|d| &d.0);
        let own = column::Tally::default();
        let tally = tally_or_own(tally, &own);
        with_column!(self, c, K => detach(py, || c.histogram(data, edges, domain, tally)).map(|(n, cand)| (n, RowSet(cand))).map_err(to_py))
    }

    /// Rows whose value is missing.
    #[pyo3(signature = (tally=None))]
    fn missing(&self, py: Python<'_>, tally: Option<&Tally>) -> PyResult<RowSet> {
        let data = &self.buffers()[..];
        let own = column::Tally::default();
        let tally = tally_or_own(tally, &own);
        with_column!(self, c, K => detach(py, || c.missing(data, tally)).map(RowSet).map_err(to_py))
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

fn kind_of(array: &Bound<'_, PyUntypedArray>) -> PyResult<&'static str> {
    let dtype = array.dtype();
    let py = array.py();
    if dtype.is_equiv_to(&numpy::dtype::<f64>(py)) {
        Ok("f64")
    } else if dtype.is_equiv_to(&numpy::dtype::<i64>(py)) {
        Ok("i64")
    } else if dtype.is_equiv_to(&numpy::dtype::<u64>(py)) {
        Ok("u64")
    } else {
        Err(PyTypeError::new_err(format!(
            "expected a float64, int64 or uint64 array, got {dtype}"
        )))
    }
}

fn contiguous<'py, K: numpy::Element>(
    array: &Bound<'py, PyUntypedArray>,
) -> PyResult<PyReadonlyArray1<'py, K>> {
    let typed = array.cast::<PyArray1<K>>()?;
    Ok(typed.readonly())
}

/// Index `values` (any supported dtype, 1-D, contiguous) in blocks of
/// `block_len` rows with `edges` (float64, int64 or uint64: the key type of
/// the values' dtype). Returns, per block, its index bytes and the CRC-32 of
/// the block's source bytes.
#[pyfunction]
fn build_blocks<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyUntypedArray>,
    edges: &Bound<'py, PyUntypedArray>,
    block_len: usize,
) -> PyResult<Vec<(Bound<'py, PyBytes>, u32)>> {
    let held = Held::new(values)?;
    macro_rules! go {
        ($s:expr => $k:ty) => {{
            let e = contiguous::<$k>(edges)?;
            let (v, e) = ($s, e.as_slice()?);
            detach(py, || column::build_blocks::<$k, _>(v, e, block_len))
        }};
    }
    let blocks = match held.values()? {
        scan::Values::F32(s) => go!(s => f64),
        scan::Values::F64(s) => go!(s => f64),
        scan::Values::I8(s) => go!(s => i64),
        scan::Values::I16(s) => go!(s => i64),
        scan::Values::I32(s) => go!(s => i64),
        scan::Values::I64(s) => go!(s => i64),
        scan::Values::U8(s) => go!(s => u64),
        scan::Values::U16(s) => go!(s => u64),
        scan::Values::U32(s) => go!(s => u64),
        scan::Values::U64(s) => go!(s => u64),
    }
    .map_err(to_py)?;
    Ok(blocks
        .iter()
        .map(|b| (PyBytes::new(py, &b.bytes), b.source_crc32))
        .collect())
}

/// A `NumPy` array borrowed read-only for the length of a call.
enum Held<'py> {
    F32(PyReadonlyArray1<'py, f32>),
    F64(PyReadonlyArray1<'py, f64>),
    I8(PyReadonlyArray1<'py, i8>),
    I16(PyReadonlyArray1<'py, i16>),
    I32(PyReadonlyArray1<'py, i32>),
    I64(PyReadonlyArray1<'py, i64>),
    U8(PyReadonlyArray1<'py, u8>),
    U16(PyReadonlyArray1<'py, u16>),
    U32(PyReadonlyArray1<'py, u32>),
    U64(PyReadonlyArray1<'py, u64>),
}

impl<'py> Held<'py> {
    fn new(array: &Bound<'py, PyUntypedArray>) -> PyResult<Self> {
        let py = array.py();
        let dtype = array.dtype();
        macro_rules! try_dtype {
            ($($t:ty => $v:ident),*) => {
                $(if dtype.is_equiv_to(&numpy::dtype::<$t>(py)) {
                    return Ok(Held::$v(contiguous::<$t>(array)?));
                })*
            };
        }
        try_dtype!(f32 => F32, f64 => F64, i8 => I8, i16 => I16, i32 => I32, i64 => I64,
                   u8 => U8, u16 => U16, u32 => U32, u64 => U64);
        Err(PyTypeError::new_err(format!("cannot scan dtype {dtype}")))
    }

    fn values(&self) -> PyResult<scan::Values<'_>> {
        Ok(match self {
            Held::F32(a) => scan::Values::F32(a.as_slice()?),
            Held::F64(a) => scan::Values::F64(a.as_slice()?),
            Held::I8(a) => scan::Values::I8(a.as_slice()?),
            Held::I16(a) => scan::Values::I16(a.as_slice()?),
            Held::I32(a) => scan::Values::I32(a.as_slice()?),
            Held::I64(a) => scan::Values::I64(a.as_slice()?),
            Held::U8(a) => scan::Values::U8(a.as_slice()?),
            Held::U16(a) => scan::Values::U16(a.as_slice()?),
            Held::U32(a) => scan::Values::U32(a.as_slice()?),
            Held::U64(a) => scan::Values::U64(a.as_slice()?),
        })
    }
}

fn program(ops: Vec<(String, f64)>, n_columns: usize) -> PyResult<scan::Program> {
    let ops = ops
        .into_iter()
        .map(|(name, arg)| {
            Ok(match name.as_str() {
                "load" => scan::Op::Load(arg as usize),
                "const" => scan::Op::Const(arg),
                "neg" => scan::Op::Neg,
                "+" => scan::Op::Add,
                "-" => scan::Op::Sub,
                "*" => scan::Op::Mul,
                "/" => scan::Op::Div,
                "**" => scan::Op::Pow,
                "sqrt" => scan::Op::Sqrt,
                "abs" => scan::Op::Abs,
                "exp" => scan::Op::Exp,
                "log" => scan::Op::Ln,
                "log10" => scan::Op::Log10,
                "min" => scan::Op::Min,
                "max" => scan::Op::Max,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "unknown operation {other:?}"
                    )))
                }
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    scan::Program::new(ops, n_columns).map_err(to_py)
}

/// Rows where `left cmp right` is true and where it is unknown (NaN), the
/// sides being postfix programs over `columns` evaluated in float64.
#[pyfunction]
#[pyo3(signature = (columns, left, cmp, right, n_rows, block_len, domain=None))]
#[allow(clippy::too_many_arguments)]
fn scan_compare<'py>(
    py: Python<'py>,
    columns: Vec<Bound<'py, PyUntypedArray>>,
    left: Vec<(String, f64)>,
    cmp: &str,
    right: Vec<(String, f64)>,
    n_rows: u64,
    block_len: u64,
    domain: Option<&RowSet>,
) -> PyResult<(RowSet, RowSet)> {
    let cmp = match cmp {
        "<" => scan::Cmp::Lt,
        "<=" => scan::Cmp::Le,
        ">" => scan::Cmp::Gt,
        ">=" => scan::Cmp::Ge,
        "==" => scan::Cmp::Eq,
        "!=" => scan::Cmp::Ne,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown comparison {other:?}"
            )))
        }
    };
    let domain = domain.map(|d| &d.0);
    with_values(&columns, |values| {
        let comparison = scan::Comparison {
            left: program(left, values.len())?,
            cmp,
            right: program(right, values.len())?,
        };
        detach(py, || {
            scan::scan_compare(values, &comparison, n_rows, block_len, domain)
        })
        .map(|(t, u)| (RowSet(t), RowSet(u)))
        .map_err(to_py)
    })
}

/// `f` over the columns' values (each dtype checked and made contiguous).
fn with_values<R>(
    columns: &[Bound<'_, PyUntypedArray>],
    f: impl FnOnce(&[scan::Values<'_>]) -> PyResult<R>,
) -> PyResult<R> {
    let held = columns
        .iter()
        .map(Held::new)
        .collect::<PyResult<Vec<_>>>()?;
    let values = held
        .iter()
        .map(Held::values)
        .collect::<PyResult<Vec<_>>>()?;
    f(&values)
}

/// The postfix `program` over `columns` on every row, as float64 values.
#[pyfunction]
fn evaluate<'py>(
    py: Python<'py>,
    columns: Vec<Bound<'py, PyUntypedArray>>,
    program: Vec<(String, f64)>,
    n_rows: u64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let out = with_values(&columns, |values| {
        let program = self::program(program, values.len())?;
        detach(py, || scan::evaluate(values, &program, n_rows)).map_err(to_py)
    })?;
    Ok(out.into_pyarray(py))
}

/// Rows whose stored value lies in the interval (compared exactly in the
/// key domain of the values' dtype) and rows whose value is missing.
#[pyfunction]
#[pyo3(signature = (values, lo, lo_incl, hi, hi_incl, block_len, domain=None))]
#[allow(clippy::too_many_arguments)]
fn scan_range<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyUntypedArray>,
    lo: &Bound<'py, PyAny>,
    lo_incl: bool,
    hi: &Bound<'py, PyAny>,
    hi_incl: bool,
    block_len: u64,
    domain: Option<&RowSet>,
) -> PyResult<(RowSet, RowSet)> {
    let held = Held::new(values)?;
    let domain = domain.map(|d| &d.0);
    macro_rules! go {
        ($k:ty, $s:expr) => {{
            let iv = interval::<$k>(lo, lo_incl, hi, hi_incl)?;
            let s = $s;
            detach(py, || scan::scan_range(s, &iv, block_len, domain))
        }};
    }
    let result = match held.values()? {
        scan::Values::F32(s) => go!(f64, s),
        scan::Values::F64(s) => go!(f64, s),
        scan::Values::I8(s) => go!(i64, s),
        scan::Values::I16(s) => go!(i64, s),
        scan::Values::I32(s) => go!(i64, s),
        scan::Values::I64(s) => go!(i64, s),
        scan::Values::U8(s) => go!(u64, s),
        scan::Values::U16(s) => go!(u64, s),
        scan::Values::U32(s) => go!(u64, s),
        scan::Values::U64(s) => go!(u64, s),
    };
    result.map(|(t, u)| (RowSet(t), RowSet(u))).map_err(to_py)
}

/// A variable's bin edges from a sample (float64, int64 or uint64; the
/// edges have the sample's dtype): equal-weight cut points merged with the
/// `digits`-significant decimals in the sample's range (0: none).
#[pyfunction]
fn variable_edges<'py>(
    py: Python<'py>,
    sample: &Bound<'py, PyUntypedArray>,
    nbins: usize,
    digits: u32,
) -> PyResult<Bound<'py, PyAny>> {
    macro_rules! go {
        ($k:ty) => {{
            let s = contiguous::<$k>(sample)?;
            let s = s.as_slice()?;
            let edges = detach(py, || binning::variable_edges::<$k>(s, nbins, digits));
            Ok(edges.into_pyarray(py).into_any())
        }};
    }
    match kind_of(sample)? {
        "f64" => go!(f64),
        "i64" => go!(i64),
        _ => go!(u64),
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RowSet>()?;
    m.add_class::<IndexFile>()?;
    m.add_class::<Column>()?;
    m.add_class::<Tally>()?;
    m.add_function(wrap_pyfunction!(build_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(variable_edges, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(scan_compare, m)?)?;
    m.add_function(wrap_pyfunction!(scan_range, m)?)?;
    m.add_function(wrap_pyfunction!(set_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(jobs, m)?)?;
    m.add("CorruptBlockError", m.py().get_type::<CorruptBlockError>())?;
    // The one version number: the Cargo workspace's, which maturin also writes
    // into the wheel's metadata (pyproject.toml declares it dynamic).
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
