//! Clustering rows by `MDBin` number (see `quarry_core::cluster`), and the
//! CRC-32 a reorganised copy records of its parts.

use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray1,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyOSError, PyTypeError};
use pyo3::prelude::*;
use quarry_core::{cluster, runs};

use crate::conversions::contiguous;
use crate::errors::Result;
use crate::pool::detach;

/// A float column's axis as Python gives it: `(origin, size, count,
/// stride, decimal)`, `decimal` the `count + 2` float64 edges its bins are
/// corrected to (`quarry.reorg.binning.Axis.decimal_table`) or None.
type AxisArg<'py> = (f64, f64, u64, u64, Option<PyReadonlyArray1<'py, f64>>);

/// Add to `keys` (uint64, one per row), in place, the sum over `columns`
/// (float32 or float64 arrays, as long) of each row's bin number times its
/// axis' stride; `axes` gives each column's `(origin, size, count, stride,
/// decimal)`: bins of `size` from `origin`, clipped to the first and the
/// last of `count`, NaN in bin `count`, corrected to `decimal`'s edges.
#[pyfunction]
pub fn add_bins<'py>(
    py: Python<'py>,
    columns: Vec<Bound<'py, PyUntypedArray>>,
    axes: Vec<AxisArg<'py>>,
    keys: &Bound<'py, PyArray1<u64>>,
) -> Result<()> {
    let wrong = |why: &str| PyTypeError::new_err(format!("add_bins: {why}"));
    if columns.len() != axes.len() {
        return Err(wrong("one axis per column").into());
    }
    if columns.iter().any(|c| c.len() != keys.len()) || axes.iter().any(wrong_axis) {
        return Err(wrong("one key per value and 1 to 2^31 bins per axis").into());
    }
    let held = hold_floats(&columns)?;
    let prepared = float_axes(&held, &axes)?;
    let mut keys = keys.try_readwrite().map_err(|e| wrong(&e.to_string()))?;
    let keys = keys.as_slice_mut()?;
    detach(py, || cluster::add_bins(&prepared, keys));
    Ok(())
}

enum Either<'py> {
    F32(PyReadonlyArray1<'py, f32>),
    F64(PyReadonlyArray1<'py, f64>),
}

/// Each float column held as the float32 or float64 array it is.
fn hold_floats<'py>(columns: &[Bound<'py, PyUntypedArray>]) -> PyResult<Vec<Either<'py>>> {
    columns
        .iter()
        .map(|c| {
            Ok(match contiguous::<f32>(c) {
                Ok(v) => Either::F32(v),
                Err(_) => Either::F64(contiguous::<f64>(c)?),
            })
        })
        .collect()
}

/// Whether an axis has no bin or more than 2^31, or decimal edges other
/// than `count + 2`.
fn wrong_axis(axis: &AxisArg<'_>) -> bool {
    let &(_, _, count, _, ref decimal) = axis;
    count == 0
        || count > 1 << 31
        || decimal
            .as_ref()
            .is_some_and(|t| t.len() as u64 != count + 2)
}

/// The held columns beside their axes, as the core bins them.
fn float_axes<'a>(
    held: &'a [Either<'_>],
    axes: &'a [AxisArg<'_>],
) -> PyResult<Vec<(cluster::Floats<'a>, cluster::FloatAxis<'a>)>> {
    held.iter()
        .zip(axes)
        .map(|(h, (origin, size, count, stride, decimal))| {
            let values = match h {
                Either::F32(v) => cluster::Floats::F32(v.as_slice()?),
                Either::F64(v) => cluster::Floats::F64(v.as_slice()?),
            };
            Ok((
                values,
                cluster::FloatAxis {
                    origin: *origin,
                    size: *size,
                    count: *count,
                    stride: *stride,
                    decimal: decimal
                        .as_ref()
                        .map(PyReadonlyArray1::as_slice)
                        .transpose()?,
                },
            ))
        })
        .collect()
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
    Ok(py.detach(|| cluster::crc32(data, start))) // one pass: on this thread, as IndexFile.crc32
}

/// A worker's buffers, kept between the parts it clusters.
struct Worker {
    keys: Vec<u64>,
    keys32: Vec<u32>,
    scratch: cluster::Scratch,
    // A part of one column regrouped by span (cluster::stage), by itemsize
    // (and the wide rows), and one span of it in its final order.
    staged8: Vec<u8>,
    staged16: Vec<u16>,
    staged32: Vec<u32>,
    staged64: Vec<u64>,
    rows64: Vec<i64>,
    span8: Vec<u8>,
    span16: Vec<u16>,
    span32: Vec<u32>,
    span64: Vec<u64>,
    span_rows64: Vec<i64>,
}

impl Default for Worker {
    fn default() -> Self {
        Worker {
            keys: Vec::new(),
            keys32: Vec::new(),
            scratch: cluster::Scratch::reserving(reserve_huge, reserve_huge),
            staged8: Vec::new(),
            staged16: Vec::new(),
            staged32: Vec::new(),
            staged64: Vec::new(),
            rows64: Vec::new(),
            span8: Vec::new(),
            span16: Vec::new(),
            span32: Vec::new(),
            span64: Vec::new(),
            span_rows64: Vec::new(),
        }
    }
}

thread_local! {
    static WORKER: std::cell::RefCell<Worker> = std::cell::RefCell::default();
}

/// One column of a part, as the raw unsigned integers of its itemsize.
enum Raw<'py> {
    U8(PyReadonlyArray1<'py, u8>),
    U16(PyReadonlyArray1<'py, u16>),
    U32(PyReadonlyArray1<'py, u32>),
    U64(PyReadonlyArray1<'py, u64>),
}

enum RawSlice<'a> {
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
}

/// Cluster one part of a reorganised copy and write it, without the GIL:
/// each row's key is `keys` (uint64, or None for zeros) plus the bins of
/// `floats` (float32/float64 arrays with their `(origin, size, count,
/// stride)`, as [`add_bins`]); the rows are put in stable key order; each
/// of `columns` (the part's values, viewed as uint8/16/32/64) is written
/// in that order to the open file `fd` from its byte offset in `offsets`,
/// and then the rows `first + order` (uint32, or int64 when `wide_rows`)
/// from the last offset: one sequential run per column, a span of
/// `cluster::SPAN_ROWS` values at a time assembled in cache
/// (`cluster::stage`, `cluster::write_spans`).
///
/// Returns the CRC-32 of each column as given, of each column as written
/// and of the rows as written, the CRC-32 of each block of
/// `cluster::CHECK_ROWS` rows of each column as written and of the rows
/// (uint32, column after column, the same number of blocks each), the keys
/// present (uint64) and where each one's rows start (int64).
#[pyfunction]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub fn cluster_part<'py>(
    py: Python<'py>,
    columns: Vec<Bound<'py, PyUntypedArray>>,
    floats: Vec<Bound<'py, PyUntypedArray>>,
    axes: Vec<AxisArg<'py>>,
    keys: Option<Bound<'py, PyUntypedArray>>,
    first: u64,
    wide_rows: bool,
    fd: i32,
    offsets: Vec<u64>,
) -> Result<(
    Vec<u32>,
    Vec<u32>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<i64>>,
)> {
    let wrong = |why: &str| PyTypeError::new_err(format!("cluster_part: {why}"));
    let rows = columns.first().map_or(0, PyUntypedArrayMethods::len);
    if floats.len() != axes.len() || offsets.len() != columns.len() + 1 {
        return Err(
            wrong("one axis per float column and one offset per column and the rows").into(),
        );
    }
    if columns.iter().chain(&floats).any(|c| c.len() != rows) || axes.iter().any(wrong_axis) {
        return Err(wrong("columns of one length and 1 to 2^31 bins per axis").into());
    }
    if u32::try_from(rows).is_err() || (!wide_rows && first + rows as u64 > 1 << 32) {
        return Err(wrong("at most u32::MAX rows a part, and rows that fit their dtype").into());
    }
    let raw = columns
        .iter()
        .map(|c| {
            Ok(match c.dtype().itemsize() {
                1 => Raw::U8(contiguous::<u8>(c)?),
                2 => Raw::U16(contiguous::<u16>(c)?),
                4 => Raw::U32(contiguous::<u32>(c)?),
                _ => Raw::U64(contiguous::<u64>(c)?),
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let slices = raw
        .iter()
        .map(|r| {
            Ok(match r {
                Raw::U8(v) => RawSlice::U8(v.as_slice()?),
                Raw::U16(v) => RawSlice::U16(v.as_slice()?),
                Raw::U32(v) => RawSlice::U32(v.as_slice()?),
                Raw::U64(v) => RawSlice::U64(v.as_slice()?),
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let held = hold_floats(&floats)?;
    let binned = float_axes(&held, &axes)?;
    let base = keys.as_ref().map(contiguous::<u64>).transpose()?;
    let base = base.as_ref().map(|k| k.as_slice()).transpose()?;
    if base.is_some_and(|k| k.len() != rows) {
        return Err(wrong("one key per row").into());
    }
    // The caller's file, borrowed: it stays open after this call.
    let file = std::mem::ManuallyDrop::new(unsafe_file(fd));
    let Written {
        sources,
        copies,
        blocks,
        table,
    } = detach(py, || {
        WORKER.with_borrow_mut(|w| {
            write_part(w, &slices, &binned, base, first, wide_rows, &file, &offsets)
        })
    })
    .map_err(PyErr::from)?;
    Ok((
        sources,
        copies,
        blocks.into_pyarray(py),
        table.keys.into_pyarray(py),
        table.starts.into_pyarray(py),
    ))
}

/// Reserve the disk blocks of bytes `[0, length)` of the open file `fd`
/// (`fallocate(2)`, keeping its size and contents: a hole reads as zeros
/// still); returns whether they were reserved. A copy's columns are
/// allocated this way before its parts are written: writing back what a
/// part wrote then places no blocks, which would otherwise contend with the
/// part's next writes for the file's locks, and a full disk is found now
/// instead of at the closing fsync. Where the file system cannot (or on
/// another system) nothing is done: unlike `posix_fallocate`, no zeros are
/// written in its stead.
#[pyfunction]
pub fn reserve_space(py: Python<'_>, fd: i32, length: u64) -> Result<bool> {
    #[cfg(target_os = "linux")]
    {
        let Ok(length) = libc::off64_t::try_from(length) else {
            return Ok(false);
        };
        // SAFETY: a plain system call on a descriptor; no memory is shared.
        let done =
            py.detach(|| unsafe { libc::fallocate64(fd, libc::FALLOC_FL_KEEP_SIZE, 0, length) });
        if done == 0 {
            return Ok(true);
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL) => Ok(false),
            // OSError(errno, strerror), as Python's own calls raise it.
            Some(code) => {
                let text = error.to_string();
                let reason = text.split(" (os error").next().unwrap_or(&text).to_owned();
                Err(PyOSError::new_err((code, reason)).into())
            }
            None => Err(error.into()),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (py, fd, length);
        Ok(false)
    }
}

fn unsafe_file(fd: i32) -> std::fs::File {
    use std::os::fd::FromRawFd;
    // SAFETY: the caller (quarry.reorg.layout.CopyWriter) holds `fd` open
    // for the whole call, and the File is never dropped (ManuallyDrop), so
    // the descriptor is neither closed here nor used after it is closed.
    unsafe { std::fs::File::from_raw_fd(fd) }
}

#[allow(clippy::too_many_arguments)]
fn write_part(
    w: &mut Worker,
    columns: &[RawSlice<'_>],
    floats: &[(cluster::Floats<'_>, cluster::FloatAxis<'_>)],
    base: Option<&[u64]>,
    first: u64,
    wide_rows: bool,
    file: &std::fs::File,
    offsets: &[u64],
) -> std::io::Result<Written> {
    let rows = columns.first().map_or(0, |c| match c {
        RawSlice::U8(v) => v.len(),
        RawSlice::U16(v) => v.len(),
        RawSlice::U32(v) => v.len(),
        RawSlice::U64(v) => v.len(),
    });
    let narrow = base.is_none()
        && !floats.is_empty()
        && cluster::greatest_key(floats).is_some_and(|top| u32::try_from(top).is_ok());
    let table = if narrow {
        // Every MDBin number fits 32 bits (nearly every copy's do).
        reserve_huge(&mut w.keys32, rows);
        w.keys32.resize(rows, 0); // zeros only where it grows: set_bins writes them all
        let bounds = cluster::set_bins(floats, &mut w.keys32);
        cluster::group_rows_within(&w.keys32, bounds, &mut w.scratch)
    } else {
        reserve_huge(&mut w.keys, rows);
        w.keys.clear();
        match base {
            Some(k) => w.keys.extend_from_slice(k),
            None => w.keys.resize(rows, 0),
        }
        let bounds = cluster::add_bins(floats, &mut w.keys);
        cluster::group_rows_within(&w.keys, bounds, &mut w.scratch)
    };
    let scratch = &w.scratch;
    // The keys are spent once the rows are grouped: their buffer, as long
    // as a part and already touched, stages the 4-byte columns (fresh
    // memory costs a page fault per page on its first touch).
    let staged32 = if narrow {
        &mut w.keys32
    } else {
        &mut w.staged32
    };
    let sink = Sink {
        file,
        writeback: Writeback::new(file),
    };
    let mut sources = Vec::with_capacity(columns.len());
    let mut written = Vec::with_capacity(columns.len() + 1);
    let mut blocks = Vec::new();
    for (column, &offset) in columns.iter().zip(offsets) {
        let (source, (copy, copy_blocks)) = match column {
            RawSlice::U8(v) => put(v, scratch, &mut w.staged8, &mut w.span8, &sink, offset)?,
            RawSlice::U16(v) => put(v, scratch, &mut w.staged16, &mut w.span16, &sink, offset)?,
            RawSlice::U32(v) => put(v, scratch, staged32, &mut w.span32, &sink, offset)?,
            RawSlice::U64(v) => put(v, scratch, &mut w.staged64, &mut w.span64, &sink, offset)?,
        };
        sources.push(source);
        written.push(copy);
        blocks.extend(copy_blocks);
    }
    let at = offsets[columns.len()];
    let (copy, copy_blocks) = if wide_rows {
        put_rows(
            first,
            rows,
            scratch,
            &mut w.rows64,
            &mut w.span_rows64,
            &sink,
            at,
        )?
    } else {
        put_rows(first, rows, scratch, staged32, &mut w.span32, &sink, at)?
    };
    written.push(copy);
    blocks.extend(copy_blocks);
    Ok(Written {
        sources,
        copies: written,
        blocks,
        table,
    })
}

/// What writing a part hands back: the CRC-32 of each column as given, of
/// each column and of the rows as written, of each block of them as written
/// (column after column), and the part's offset table.
struct Written {
    sources: Vec<u32>,
    copies: Vec<u32>,
    blocks: Vec<u32>,
    table: cluster::Table,
}

/// Make room for `len` values in `out`, a fresh allocation asking for huge
/// pages: placing a part's column writes to one spot per `MDBin` present,
/// thousands of them across megabytes, and with 4 KiB pages nearly every
/// write would miss the TLB; and a first touch of fresh memory costs a page
/// fault per page (several microseconds each on a virtual machine).
fn reserve_huge<T>(out: &mut Vec<T>, len: usize) {
    if out.capacity() >= len {
        return;
    }
    *out = Vec::with_capacity(len);
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = out.as_ptr() as usize;
        let end = start + len * std::mem::size_of::<T>();
        let (first, last) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if last > first {
            // SAFETY: advice on whole pages of memory this Vec owns and has
            // not touched yet; a refusal (huge pages off) changes nothing.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_HUGEPAGE,
                )
            };
        }
    }
}

/// Write `values` at `at` in `file` in the grouped order, a span at a time
/// (staged in `staged`, each span assembled in `span`); returns the CRC-32
/// of `values` and of what was written.
fn put<T: cluster::Plain>(
    values: &[T],
    scratch: &cluster::Scratch,
    staged: &mut Vec<T>,
    span: &mut Vec<T>,
    sink: &Sink<'_>,
    at: u64,
) -> std::io::Result<(u32, (u32, Vec<u32>))> {
    reserve_huge(staged, values.len());
    staged.resize(values.len(), T::default());
    let mut source = 0;
    cluster::stage(values, scratch, staged, |seen| {
        source = cluster::crc32(cluster::as_bytes(seen), source);
    });
    Ok((source, write_staged(staged, scratch, span, sink, at)?))
}

/// The rows `first + row` in the grouped order, written at `at` as [`put`].
fn put_rows<T: cluster::Plain + TryFrom<u64>>(
    first: u64,
    rows: usize,
    scratch: &cluster::Scratch,
    staged: &mut Vec<T>,
    span: &mut Vec<T>,
    sink: &Sink<'_>,
    at: u64,
) -> std::io::Result<(u32, Vec<u32>)> {
    reserve_huge(staged, rows);
    staged.resize(rows, T::default());
    cluster::stage_rows(first, scratch, staged);
    write_staged(staged, scratch, span, sink, at)
}

/// Write a staged column at `at` in the sink's file, a span at a time in one
/// sequential run, checksumming each span while it is in cache and handing
/// each [`WRITEBACK_BYTES`] written to its write-back; returns the CRC-32 of
/// what was written and of each block of it (`cluster::BlockCrcs`).
fn write_staged<T: cluster::Plain>(
    staged: &[T],
    scratch: &cluster::Scratch,
    span: &mut Vec<T>,
    sink: &Sink<'_>,
    mut at: u64,
) -> std::io::Result<(u32, Vec<u32>)> {
    use std::os::unix::fs::FileExt;
    let mut crcs = cluster::BlockCrcs::default();
    let mut pending = at; // written since the last range handed to writeback
    cluster::write_spans(staged, scratch, span, |values| {
        let bytes = cluster::as_bytes(values);
        sink.file.write_all_at(bytes, at)?;
        crcs.update(values);
        at += bytes.len() as u64;
        if at - pending >= WRITEBACK_BYTES {
            sink.writeback.start(pending, at - pending);
            pending = at;
        }
        Ok::<(), std::io::Error>(())
    })?;
    if at > pending {
        sink.writeback.start(pending, at - pending);
    }
    Ok(crcs.finish())
}

/// Where a part's columns are written: the copy's file, and the thread
/// starting their write-back.
struct Sink<'a> {
    file: &'a std::fs::File,
    writeback: Writeback,
}

/// Bytes of a column written before their write-back to disk is started:
/// small enough that the disk is kept busy from a part's first column on
/// and the closing fsync finds little left to write, large enough that the
/// file system places them in long runs.
const WRITEBACK_BYTES: u64 = 4 << 20;

/// Starts writing byte ranges of the copy to the disk as a part writes them,
/// on a thread of its own: the copy's closing fsync (which stays, and is what
/// makes it durable) then finds nearly all of it written while the parts
/// were being clustered, instead of all of it at the end. Starting
/// write-back costs CPU (the file system places the blocks, the requests
/// are built) and may wait for room in the disk's queue: a worker
/// clustering alone leaves that to the other core. Dropped, it lets its
/// thread finish the ranges it was given.
struct Writeback {
    ranges: Option<std::sync::mpsc::Sender<(u64, u64)>>,
}

impl Writeback {
    fn new(file: &std::fs::File) -> Self {
        // Its own descriptor of the file, closed when it is done, so the
        // caller may close its own at any time.
        let Some(file) = reopen(file) else {
            return Writeback { ranges: None }; // the closing fsync does it all
        };
        let (ranges, given) = std::sync::mpsc::channel::<(u64, u64)>();
        let started = std::thread::Builder::new()
            .name("quarry-writeback".into())
            .spawn(move || {
                for (offset, len) in given {
                    sync_range(&file, offset, len);
                }
            });
        // A thread that cannot start leaves the work to the fsync.
        Writeback {
            ranges: started.is_ok().then_some(ranges),
        }
    }

    /// Have `len` bytes from `offset` written to the disk soon.
    fn start(&self, offset: u64, len: u64) {
        if let Some(ranges) = &self.ranges {
            let _ = ranges.send((offset, len)); // a thread gone: left to the fsync
        }
    }
}

/// The file opened afresh, not duplicated: a duplicate shares the caller's
/// open file description, and with it the `flock` the copy's writer holds
/// (so that a concurrent build's clean-up leaves the temporary alone). A
/// write-back thread still running after the copy was published would keep
/// the published copy locked, and a reader that locks (h5py by default)
/// would be refused it.
fn reopen(file: &std::fs::File) -> Option<std::fs::File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None // sync_file_range is Linux's: nothing to start elsewhere
    }
}

fn sync_range(file: &std::fs::File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    #[cfg(target_os = "linux")]
    // SAFETY: a plain system call on an open descriptor; no memory is shared.
    unsafe {
        // A hint: a failure here (an old kernel, a file system without it)
        // leaves the work to the closing fsync, which reports real errors.
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file.as_raw_fd(), offset, len);
}

/// A copy's box as runs: `keys` (uint64), `starts` and `ends` (int64) its
/// offset table, every part's laid end to end, `parts` each part's `(first,
/// count)` entries, `strides` each axis' and `states` (uint8, per axis) each
/// 1-D bin's state (0 outside, 1 boundary, 2 inside). The `(part, offset,
/// length)` runs of whole rows and of boundary rows, each an `(n, 3)` int64
/// array.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn box_runs<'py>(
    py: Python<'py>,
    keys: PyReadonlyArray1<'py, u64>,
    starts: PyReadonlyArray1<'py, i64>,
    ends: PyReadonlyArray1<'py, i64>,
    parts: Vec<(usize, usize)>,
    strides: Vec<u64>,
    states: Vec<PyReadonlyArray1<'py, u8>>,
) -> Result<(Bound<'py, PyArray2<i64>>, Bound<'py, PyArray2<i64>>)> {
    let wrong = |why: &str| PyTypeError::new_err(format!("box_runs: {why}"));
    let (keys, starts, ends) = (keys.as_slice()?, starts.as_slice()?, ends.as_slice()?);
    if starts.len() != keys.len() || ends.len() != keys.len() {
        return Err(wrong("one start and one end per key").into());
    }
    if parts
        .iter()
        .any(|&(first, count)| first + count > keys.len())
    {
        return Err(wrong("parts within the table").into());
    }
    if strides.len() != states.len() {
        return Err(wrong("one stride per axis").into());
    }
    let states = states
        .iter()
        .map(PyReadonlyArray1::as_slice)
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let table = runs::Table {
        keys,
        starts,
        ends,
        parts: &parts,
    };
    let found = runs::box_runs(&table, &strides, &states);
    let as_array = |rows: Vec<[i64; 3]>| -> PyResult<Bound<'py, PyArray2<i64>>> {
        let n = rows.len();
        let flat: Vec<i64> = rows.into_iter().flatten().collect();
        PyArray1::from_vec(py, flat).reshape([n, 3])
    };
    Ok((as_array(found.whole)?, as_array(found.boundary)?))
}
