//! `quarry._core`: the `PyO3` layer over `quarry-core`. Bindings only:
//! argument conversion, GIL release around long calls, and error mapping.
//!
//! - [`errors`] — core errors to Python exceptions (`?` works on both).
//! - [`conversions`] — `NumPy` dtypes and Python numbers to the core's types.
//! - [`pool`] — worker threads per Python thread; calls run there without the GIL.
//! - [`rowset`] — `RowSet`.
//! - [`column`] — `IndexFile`, `Column` and `Tally`: reading an index.
//! - [`cluster`] — clustering rows by `MDBin` number (`add_bins`, `stable_order`, `crc32`), and a box's runs (`box_runs`).
//! - [`build`] — building an index (`build_blocks`, `variable_edges`).
//! - [`scan`] — evaluating on values (`scan_range`, `scan_box`, `scan_compare`, `count_ranges`, `evaluate`).

// PyO3 hands arguments over as owned values (arrays, vectors); taking them by
// value is how its extraction works, not a missed borrow.
#![allow(clippy::needless_pass_by_value)]

mod build;
mod cluster;
mod column;
mod conversions;
mod errors;
mod interp;
mod pool;
mod rowset;
mod scan;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use quarry_core::key::KeyKind;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<rowset::RowSet>()?;
    m.add_class::<column::IndexFile>()?;
    m.add_class::<column::Column>()?;
    m.add_class::<column::Tally>()?;
    m.add_function(wrap_pyfunction!(build::build_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(build::variable_edges, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::add_bins, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::stable_order, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::crc32, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::box_runs, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_part, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::reserve_space, m)?)?;
    m.add_function(wrap_pyfunction!(interp::corner_sum, m)?)?;
    m.add_function(wrap_pyfunction!(scan::count_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(scan::evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(scan::scan_compare, m)?)?;
    m.add_function(wrap_pyfunction!(scan::scan_box, m)?)?;
    m.add_function(wrap_pyfunction!(scan::count_boxes, m)?)?;
    m.add_function(wrap_pyfunction!(scan::scan_range, m)?)?;
    m.add_function(wrap_pyfunction!(pool::set_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(pool::jobs, m)?)?;
    m.add(
        "CorruptBlockError",
        m.py().get_type::<errors::CorruptBlockError>(),
    )?;
    // The key domains, in the tag order blocks store: Python's key-kind
    // table (quarry.expr.keys) is checked against this, so the two cannot drift.
    let kinds = KeyKind::ALL.map(KeyKind::name);
    m.add("KEY_KINDS", PyTuple::new(m.py(), kinds)?)?;
    // The rows of a copy's column checked together: the reader's blocks are
    // the writer's.
    m.add("CHECK_ROWS", quarry_core::cluster::CHECK_ROWS)?;
    // The one version number: the Cargo workspace's, which maturin also writes
    // into the wheel's metadata (pyproject.toml declares it dynamic).
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
