//! Worker threads: each Python thread chooses how many its core calls use,
//! and long calls run there without the GIL.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

thread_local! {
    // Worker threads the calling Python thread asked for (0: rayon's global
    // pool, one thread per core). Per Python thread, so two threads of one
    // process (a service answering two clients) can each choose.
    static JOBS: Cell<usize> = const { Cell::new(0) };
}

thread_local! {
    // This Python thread as the only thread of its own pool, made the first
    // time it asks for one thread. Its core calls then run where they are
    // made: handing each to a pool's sleeping worker costs a wake-up (~70 us a
    // call on a virtual machine), more than a small query's whole answer.
    static OWN: Cell<Option<&'static rayon::ThreadPool>> = const { Cell::new(None) };
}

/// Threads of rayon's global pool (one per core unless `RAYON_NUM_THREADS`
/// says otherwise), noted before a thread joins a pool of its own: from then
/// on rayon answers for that pool.
static EVERY_CORE: AtomicUsize = AtomicUsize::new(0);

fn every_core() -> usize {
    match EVERY_CORE.load(Ordering::Relaxed) {
        0 => rayon::current_num_threads(),
        n => n,
    }
}

/// The calling thread's own one-thread pool (see `OWN`).
fn own_pool() -> PyResult<&'static rayon::ThreadPool> {
    if let Some(pool) = OWN.get() {
        return Ok(pool);
    }
    if EVERY_CORE.load(Ordering::Relaxed) == 0 {
        EVERY_CORE.store(rayon::current_num_threads(), Ordering::Relaxed);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .use_current_thread()
        .build()
        .map_err(|e| PyValueError::new_err(format!("cannot run on this thread alone: {e}")))?;
    // Kept for the thread's life and beyond: the thread is this pool's worker
    // from now on, and rayon does not let a pool built so be torn down.
    let pool: &'static rayon::ThreadPool = Box::leak(Box::new(pool));
    OWN.set(Some(pool));
    Ok(pool)
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
    match (JOBS.get(), OWN.get()) {
        // A thread with a pool of its own works in it even when it asks for
        // every core, so every core is a pool of that size.
        (0, Some(_)) => {
            let pool = pool(every_core()).expect("a pool of every core");
            py.detach(|| pool.install(f))
        }
        (0, None) => py.detach(f),
        (1, Some(own)) => py.detach(|| own.install(f)),
        (jobs, _) => {
            // A pool was built (and checked) when `set_jobs` chose it.
            let pool = pool(jobs).expect("pool built by set_jobs");
            py.detach(|| pool.install(f))
        }
    }
}

/// Run `f`, a call the core cuts into `pieces` (see `quarry_core::pieces`),
/// without the GIL: as [`detach`] does, except that one piece is done on the
/// calling thread, which the core then never leaves, instead of being handed
/// to a pool's worker and waited for.
pub fn detach_pieces<T: Send>(py: Python<'_>, pieces: usize, f: impl FnOnce() -> T + Send) -> T {
    if quarry_core::pieces::one(pieces) {
        py.detach(f)
    } else {
        detach(py, f)
    }
}

/// Use `jobs` worker threads for this Python thread's core calls from now
/// on (0: one per core); returns the previous setting.
#[pyfunction]
pub fn set_jobs(jobs: usize) -> PyResult<usize> {
    if jobs == 1 {
        own_pool()?;
    } else if jobs > 0 {
        pool(jobs)?;
    }
    Ok(JOBS.replace(jobs))
}

/// Worker threads this Python thread's core calls run on.
#[pyfunction]
pub fn jobs() -> usize {
    match JOBS.get() {
        0 => every_core(),
        jobs => jobs,
    }
}
