//! Conditions and arithmetic evaluated on values instead of an index.

use numpy::{IntoPyArray, PyArray1, PyUntypedArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use quarry_core::eval::Interval;
use quarry_core::rowset::block_count;
use quarry_core::scan;

use crate::conversions::{contiguous, interval, with_keyed, with_values, Held};
use crate::errors::Result;
use crate::pool::detach_pieces;
use crate::rowset::RowSet;

/// The core's program from its wire form: (operation, argument) pairs in
/// postfix order, as `quarry.expr.postfix` writes them.
fn program(ops: Vec<(String, f64)>, n_columns: usize) -> Result<scan::Program> {
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
    Ok(scan::Program::new(ops, n_columns)?)
}

/// Rows where `left cmp right` is true and where it is unknown (NaN), the
/// sides being postfix programs over `columns` evaluated in float64.
#[pyfunction]
#[pyo3(signature = (columns, left, cmp, right, n_rows, block_len, domain=None))]
#[allow(clippy::too_many_arguments)]
pub fn scan_compare<'py>(
    py: Python<'py>,
    columns: Vec<Bound<'py, PyUntypedArray>>,
    left: Vec<(String, f64)>,
    cmp: &str,
    right: Vec<(String, f64)>,
    n_rows: u64,
    block_len: u64,
    domain: Option<&RowSet>,
) -> Result<(RowSet, RowSet)> {
    let cmp = match cmp {
        "<" => scan::Cmp::Lt,
        "<=" => scan::Cmp::Le,
        ">" => scan::Cmp::Gt,
        ">=" => scan::Cmp::Ge,
        "==" => scan::Cmp::Eq,
        "!=" => scan::Cmp::Ne,
        other => return Err(PyValueError::new_err(format!("unknown comparison {other:?}")).into()),
    };
    let domain = domain.map(|d| &d.0);
    with_values(&columns, |values| {
        let comparison = scan::Comparison {
            left: program(left, values.len())?,
            cmp,
            right: program(right, values.len())?,
        };
        let (sure, unknown) = detach_pieces(py, block_count(n_rows, block_len.max(1)), || {
            scan::scan_compare(values, &comparison, n_rows, block_len, domain)
        })?;
        Ok((RowSet(sure), RowSet(unknown)))
    })
}

/// The postfix `program` over `columns` on every row, as float64 values.
#[pyfunction]
pub fn evaluate<'py>(
    py: Python<'py>,
    columns: Vec<Bound<'py, PyUntypedArray>>,
    program: Vec<(String, f64)>,
    n_rows: u64,
) -> Result<Bound<'py, PyArray1<f64>>> {
    let out = with_values(&columns, |values| {
        let program = self::program(program, values.len())?;
        Ok(detach_pieces(py, scan::evaluate_pieces(n_rows), || {
            scan::evaluate(values, &program, n_rows)
        })?)
    })?;
    Ok(out.into_pyarray(py))
}

/// Rows whose stored value lies in the interval (compared exactly in the
/// key domain of the values' dtype) and rows whose value is missing.
#[pyfunction]
#[pyo3(signature = (values, lo, lo_incl, hi, hi_incl, block_len, domain=None))]
#[allow(clippy::too_many_arguments)]
pub fn scan_range<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyUntypedArray>,
    lo: &Bound<'py, PyAny>,
    lo_incl: bool,
    hi: &Bound<'py, PyAny>,
    hi_incl: bool,
    block_len: u64,
    domain: Option<&RowSet>,
) -> Result<(RowSet, RowSet)> {
    let held = Held::new(values)?;
    let domain = domain.map(|d| &d.0);
    let (inside, missing) = with_keyed!(held.values()?, s, K => {
        let iv = interval::<K>(lo, lo_incl, hi, hi_incl)?;
        detach_pieces(py, block_count(s.len() as u64, block_len.max(1)), || {
            scan::scan_range(s, &iv, block_len, domain)
        })?
    });
    Ok((RowSet(inside), RowSet(missing)))
}

/// Rows where every column's stored value lies in its interval
/// ``(lo[i], hi[i])`` (ends included where ``lo_incl[i]`` / ``hi_incl[i]``),
/// each compared exactly in the key domain of its dtype: an AND of ranges
/// in one pass over the columns.
#[pyfunction]
pub fn scan_box<'py>(
    py: Python<'py>,
    columns: Vec<Bound<'py, PyUntypedArray>>,
    lo: Vec<Bound<'py, PyAny>>,
    lo_incl: Vec<bool>,
    hi: Vec<Bound<'py, PyAny>>,
    hi_incl: Vec<bool>,
    block_len: u64,
) -> Result<RowSet> {
    let spec = (columns, lo, lo_incl, hi, hi_incl);
    let held = held_columns(&spec)?;
    let conditions = box_conditions(&spec, &held)?;
    let conditions: Vec<&dyn scan::InRange> = conditions.iter().map(AsRef::as_ref).collect();
    let rows = conditions.first().map_or(0, |c| c.rows());
    let inside = detach_pieces(py, block_count(rows as u64, block_len.max(1)), || {
        scan::scan_box(&conditions, block_len)
    })?;
    Ok(RowSet(inside))
}

/// How many rows lie in each box, a box being ``(columns, lo, lo_incl, hi,
/// hi_incl)`` as :func:`scan_box` takes them: many small tables (a series'
/// steps) counted in one call.
#[pyfunction]
pub fn count_boxes<'py>(py: Python<'py>, boxes: Vec<BoxSpec<'py>>) -> Result<Vec<u64>> {
    let mut counts = Vec::with_capacity(boxes.len());
    // A group at a time: NumPy's borrow tracking checks each borrow against
    // every other of the same base array, and a file's memory map is the base
    // of all its steps' columns: 1,440 of them held at once cost twice the count.
    for group in boxes.chunks(BOXES_BORROWED) {
        let held = group
            .iter()
            .map(held_columns)
            .collect::<PyResult<Vec<_>>>()?;
        let conditions = group
            .iter()
            .zip(&held)
            .map(|(spec, held)| box_conditions(spec, held))
            .collect::<PyResult<Vec<_>>>()?;
        let conditions: Vec<Vec<&dyn scan::InRange>> = conditions
            .iter()
            .map(|c| c.iter().map(AsRef::as_ref).collect())
            .collect();
        let values: usize = conditions
            .iter()
            .map(|c| c.iter().map(|r| r.rows()).sum::<usize>())
            .sum();
        counts.extend(if values < HELD_GIL_VALUES {
            scan::count_boxes(&conditions)
        } else {
            detach_pieces(py, scan::count_pieces(values), || {
                scan::count_boxes(&conditions)
            })
        }?);
    }
    Ok(counts)
}

/// Up to this many values, [`count_boxes`] keeps the GIL: letting it go and
/// taking it back costs more than their count (a few microseconds at most),
/// as `NumPy` keeps it for short loops.
const HELD_GIL_VALUES: usize = 1 << 14;

/// Boxes whose columns [`count_boxes`] holds borrowed at once.
const BOXES_BORROWED: usize = 32;

/// A box's columns and each one's interval: ``(columns, lo, lo_incl, hi, hi_incl)``.
type BoxSpec<'py> = (
    Vec<Bound<'py, PyUntypedArray>>,
    Vec<Bound<'py, PyAny>>,
    Vec<bool>,
    Vec<Bound<'py, PyAny>>,
    Vec<bool>,
);

/// A box's columns, held for reading (and checked to match its bounds).
fn held_columns<'py>(spec: &BoxSpec<'py>) -> PyResult<Vec<Held<'py>>> {
    let (columns, lo, lo_incl, hi, hi_incl) = spec;
    let n = columns.len();
    if lo.len() != n || lo_incl.len() != n || hi.len() != n || hi_incl.len() != n {
        return Err(PyValueError::new_err(format!(
            "{n} columns but {}, {}, {}, {} bounds",
            lo.len(),
            lo_incl.len(),
            hi.len(),
            hi_incl.len()
        )));
    }
    columns.iter().map(Held::new).collect()
}

/// Each of a box's columns with its interval, in the key domain of its dtype.
fn box_conditions<'a>(
    spec: &BoxSpec<'_>,
    held: &'a [Held<'_>],
) -> PyResult<Vec<Box<dyn scan::InRange + 'a>>> {
    let (_, lo, lo_incl, hi, hi_incl) = spec;
    held.iter()
        .enumerate()
        .map(|(i, held)| {
            let condition: Box<dyn scan::InRange + 'a> = with_keyed!(held.values()?, s, K => {
                let interval = interval::<K>(&lo[i], lo_incl[i], &hi[i], hi_incl[i])?;
                Box::new(scan::RangeOf { values: s, interval })
            });
            Ok(condition)
        })
        .collect()
}

/// How many stored values lie in each interval ``(lo[i], hi[i])`` (ends
/// included where ``lo_incl[i]`` / ``hi_incl[i]``), compared exactly in the
/// key domain of the values' dtype, in one pass over the values. The bounds
/// are arrays of that domain's dtype (float64, int64 or uint64).
#[pyfunction]
pub fn count_ranges<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyUntypedArray>,
    lo: &Bound<'py, PyUntypedArray>,
    lo_incl: &Bound<'py, PyUntypedArray>,
    hi: &Bound<'py, PyUntypedArray>,
    hi_incl: &Bound<'py, PyUntypedArray>,
) -> Result<Bound<'py, PyArray1<u64>>> {
    let held = Held::new(values)?;
    let counts = with_keyed!(held.values()?, s, K => {
        let (lo, hi) = (contiguous::<K>(lo)?, contiguous::<K>(hi)?);
        let (lo_incl, hi_incl) = (contiguous::<bool>(lo_incl)?, contiguous::<bool>(hi_incl)?);
        let (lo, hi) = (lo.as_slice()?, hi.as_slice()?);
        let (lo_incl, hi_incl) = (lo_incl.as_slice()?, hi_incl.as_slice()?);
        let n = lo.len();
        if hi.len() != n || lo_incl.len() != n || hi_incl.len() != n {
            return Err(PyValueError::new_err(format!(
                "interval arrays differ in length: {n}, {}, {}, {}",
                lo_incl.len(), hi.len(), hi_incl.len()
            )).into());
        }
        let intervals: Vec<Interval<K>> = (0..n)
            .map(|i| Interval { lo: lo[i], lo_incl: lo_incl[i], hi: hi[i], hi_incl: hi_incl[i] })
            .collect();
        detach_pieces(py, scan::count_pieces(s.len()), || scan::count_ranges(s, &intervals))
    });
    Ok(counts.into_pyarray(py))
}
