//! Worker threads: each Python thread chooses how many its core calls use,
//! and long calls run there without the GIL.

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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
pub fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
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
pub fn set_jobs(jobs: usize) -> PyResult<usize> {
    if jobs > 0 {
        pool(jobs)?;
    }
    Ok(JOBS.replace(jobs))
}

/// Worker threads this Python thread's core calls run on.
#[pyfunction]
pub fn jobs() -> usize {
    match JOBS.get() {
        0 => rayon::current_num_threads(),
        jobs => jobs,
    }
}
