"""Reorganised copies (MDBin) and interpolation joins (SCJoin): issue 12's benchmark.

Data: ``make_data.py particles --n N`` (16,777,216 by default) and ``make_data.py field
--mesh M`` (256), the shared generator when present, else the bundled ones of the same
layout, in a scratch directory under the system's temporary directory, never in the
repository. The particles are indexed (energy, x, y, z) and reorganised with
``--bin-size 0.1,10,10,10`` over the same variables; the bitmap-index path is measured
through an index directory holding the same index but no copy.

- Q1, a four-variable box, and the values of energy, x, y, z, ux, uy, uz at its hits:
  through the copy, through the bitmap index alone, and a NumPy scan (columns in
  memory; and h5py read + filter).
- Q2-Q4, under Q1's condition: ``bx`` along x (linear, a 1-D subarray of the field),
  ``bx, by`` over x, y (bilinear, a 2-D subarray), ``bx, by, bz`` over x, y, z
  (trilinear), with ux / ux, uy / ux, uy, uz, against a NumPy reference that reads it
  all, filters and interpolates by hand.
- Reorganisation time over the plain read of the variables; the copy's bytes over the
  variables' raw bytes.

Every answer is checked against NumPy's. Results go to ``benches/REPORT-reorg.json``;
``benches/REPORT-reorg.md`` is rendered from it (``--render`` re-renders only).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from timing import (
    break_even,
    close_meta,
    header,
    log,
    machine,
    make_data_script,
    measure,
    ms,
    write_report,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(REPO, "benches", "REPORT-reorg.md")
RESULTS = os.path.join(REPO, "benches", "REPORT-reorg.json")
N = 1 << 24
MESH = 256
BOX = (330.0, 330.0, 132.0)  # the generators' particle domain and field extent
GROUP = "Step#0"
VARS = ("energy", "x", "y", "z")
BIN_SIZE = (0.1, 10.0, 10.0, 10.0)
VALUES = ("energy", "x", "y", "z", "ux", "uy", "uz")
#: Issue 12's Q1. On the generator's data its energy window holds no particle inside the
#: box (the energetic tail lies near the current sheet, z ~ 66), so the benchmark moves
#: that window, keeping its width (one bin), to where the thermal particles are.
ISSUE_Q1 = ((1.2, 1.3), (140.0, 150.0), (65.0, 75.0), (4.0, 14.0))
Q1 = ((0.1, 0.2), (140.0, 150.0), (65.0, 75.0), (4.0, 14.0))
GOALS = {"index": 2.0, "scan": 50.0, "join": 20.0}
REORG_JOBS = (("1 thread", 1), ("all cores", len(os.sched_getaffinity(0))))
#: The NumPy reorganisation's file, and its timed runs (each takes seconds).
NUMPY_COPY = "numpy-copy.bin"
NUMPY_REORG_RUNS = 3
#: Untimed calls before Q1's timed ones, for every path alike. Python specialises a
#: function's bytecode over its first calls: after one call, a Q1 of 0.9 ms warm took
#: 1.4-2.5 ms (7 runs' median, three processes), as a loop of queries never runs it.
Q1_WARMUP = 20
#: Smaller tables whose reorganisation is timed against the NumPy program's as well.
SMALL = (1_000, 100_000, 1_000_000)
#: A read after dropping the file's pages counts as cold only if it takes this much longer
#: than a warm one (a virtual disk the host caches may not get slower at all).
COLD_OVER_WARM = 1.2
#: The joins: name -> (method, coordinates, particle values, fields). A field of fewer
#: dimensions than the mesh is its subarray through the mesh's middle (``bx.bin[:, m, m]``).
JOINS = {
    "Q2": ("linear", ("x",), ("ux",), ("bx",)),
    "Q3": ("bilinear", ("x", "y"), ("ux", "uy"), ("bx", "by")),
    "Q4": ("trilinear", ("x", "y", "z"), ("ux", "uy", "uz"), ("bx", "by", "bz")),
}
#: Q4 again under a wide condition, with enough hits (about 1.35 million) for the join to
#: share among threads; Q1's few hundred are joined on the calling thread alone.
WIDE = ((0.1, 0.2), (100.0, 200.0), (-1.0, 331.0), (-1.0, 133.0))


def subarray(ndim: int, mesh: int) -> tuple[str, tuple[Any, ...]]:
    """The subscript of a ``ndim``-D field through the middle of the 3-D mesh, as text
    (Quarry's field syntax) and as a NumPy index."""
    index = (slice(None),) * ndim + (mesh // 2,) * (3 - ndim)
    text = ", ".join(":" if isinstance(i, slice) else str(i) for i in index)
    return (f"[{text}]" if ndim < 3 else ""), index


def query_text(box: Sequence[tuple[float, float]]) -> str:
    return " && ".join(f"{lo:g} < {v} < {hi:g}" for v, (lo, hi) in zip(VARS, box, strict=True))


def mask_of(cols: dict[str, np.ndarray], box: Sequence[tuple[float, float]]) -> np.ndarray:
    m = np.ones(len(cols[VARS[0]]), dtype=bool)
    for v, (lo, hi) in zip(VARS, box, strict=True):
        m &= (cols[v] > lo) & (cols[v] < hi)
    return m


# -- data ---------------------------------------------------------------------------------


def ensure_data(n: int, mesh: int, make_data: str | None, data_dir: str) -> dict[str, str]:
    """The particle file and the field directory (reused when they have the right size)."""
    import h5py

    os.makedirs(data_dir, exist_ok=True)
    particles = os.path.join(data_dir, f"particles_{n}.h5")
    field = os.path.join(data_dir, f"field_{mesh}")
    source = "shared/bench/make_data.py" if make_data else "quarry.sample + built-in field"
    have = 0
    if os.path.exists(particles):
        with h5py.File(particles, "r") as f:
            have = f[f"{GROUP}/x"].shape[0]
    if have != n:
        log(f"generating {n:,} particles with {source}")
        if make_data:
            cmd = [sys.executable, make_data, "particles", particles, "--n", str(n)]
            subprocess.run(cmd, check=True)
        else:
            from quarry.sample import write_particles

            write_particles(particles, n)
    files = field_files(field)
    if not files or any(os.path.getsize(p) != 4 * mesh**3 for p in files):
        log(f"generating a {mesh}^3 field with {source}")
        if make_data:
            cmd = [sys.executable, make_data, "field", field, "--mesh", str(mesh)]
            subprocess.run(cmd, check=True)
        else:
            write_field(field, mesh)
    for path in field_files(field):
        register = ["register", path, "--dtype", "<f4", "--shape", f"{mesh},{mesh},{mesh}"]
        cmd = [sys.executable, "-m", "quarry.cli.main", *register]
        subprocess.run(cmd, check=True, capture_output=True)
    return {"particles": particles, "field": field, "source": source}


def field_files(directory: str) -> list[str]:
    found = sorted(glob.glob(os.path.join(directory, "b?.bin")))
    return found if len(found) == 3 else []


def write_field(directory: str, mesh: int) -> None:
    """The shared generator's smooth field: raw little-endian float32, C order, on a
    ``mesh``^3 grid spanning BOX with points on both faces."""
    os.makedirs(directory, exist_ok=True)
    ax = [np.linspace(0, length, mesh, dtype=np.float32) for length in BOX]
    x, y, z = np.meshgrid(*ax, indexing="ij")
    comps = {
        "bx": np.tanh((z - BOX[2] / 2) / 5.0) + 0.05 * np.sin(2 * np.pi * x / BOX[0]),
        "by": 0.1 * np.cos(2 * np.pi * y / BOX[1]),
        "bz": 0.2 * np.sin(2 * np.pi * (x - BOX[0] / 2) / BOX[0]),
    }
    for name, arr in comps.items():
        arr.astype("<f4").tofile(os.path.join(directory, name + ".bin"))


def grid_text(mesh: int) -> str:
    """Origin 0 and spacing BOX / (mesh - 1): the generators put points on both faces."""
    spacing = ",".join(repr(length / (mesh - 1)) for length in BOX)
    return f"origin=0,0,0 spacing={spacing}"


# -- NumPy programs -----------------------------------------------------------------------


def read_columns(path: str, names: Sequence[str]) -> dict[str, np.ndarray]:
    import h5py

    with h5py.File(path, "r") as f:
        return {v: f[f"{GROUP}/{v}"][()] for v in names}


def interpolate_by_hand(field: np.ndarray, points: Sequence[np.ndarray], mesh: int) -> np.ndarray:
    """Multilinear interpolation of ``field`` (axis k along coordinate k) at ``points``
    in float64; the last point of an axis belongs to its last cell; outside: NaN."""
    n = len(points[0])
    corner_index = []
    weights = []
    inside = np.ones(n, dtype=bool)
    for axis, p in enumerate(points):
        spacing = BOX[axis] / (mesh - 1)
        t = np.asarray(p, dtype=np.float64) / spacing
        inside &= (t >= 0) & (t <= mesh - 1)
        i = np.clip(np.floor(t), 0, mesh - 2).astype(np.int64)
        corner_index.append(i)
        weights.append(t - i)
    out = np.zeros(n)
    for corner in np.ndindex(*(2,) * len(points)):
        w = np.ones(n)
        at = []
        for axis, c in enumerate(corner):
            w *= weights[axis] if c else 1.0 - weights[axis]
            at.append(np.clip(corner_index[axis] + c, 0, mesh - 1))
        out += w * field[tuple(at)].astype(np.float64)
    out[~inside] = np.nan
    return out


def numpy_join(
    data: dict[str, str], mesh: int, name: str, box: Sequence[tuple[float, float]]
) -> dict[str, np.ndarray]:
    """Read it all, filter, interpolate by hand: the join's reference."""
    _, at, values, fields = JOINS[name]
    cols = read_columns(data["particles"], sorted({*VARS, *at, *values}))
    hits = mask_of(cols, box)
    out = {"quarry_row": np.flatnonzero(hits)}
    out.update({v: cols[v][hits] for v in values})
    points = [cols[c][hits] for c in at]
    index = subarray(len(at), mesh)[1]
    for f in fields:
        whole = np.fromfile(os.path.join(data["field"], f + ".bin"), dtype="<f4")
        out[f] = interpolate_by_hand(whole.reshape(mesh, mesh, mesh)[index], points, mesh)
    return out


def numpy_reorganise(path: str, directory: str) -> None:
    """The plain NumPy program for the copy a reorganisation writes: read the variables,
    number each row's MDBin (row-major over bins of BIN_SIZE counted from each variable's
    least value), order the rows stably by it, and write each variable in that order and
    then the rows' positions (uint32) into a new file, durably (fsync, atomic rename over
    the previous one, the directory's fsync)."""
    cols = read_columns(path, VARS)
    mdbin = np.zeros(len(cols[VARS[0]]), np.int64)
    for name, size in zip(VARS, BIN_SIZE, strict=True):
        bins = ((cols[name] - cols[name].min()) / size).astype(np.int64)
        mdbin = mdbin * (int(bins.max()) + 1) + bins
    order = np.argsort(mdbin, kind="stable")
    final = os.path.join(directory, NUMPY_COPY)
    with open(final + ".tmp", "wb") as out:
        for name in VARS:
            cols[name][order].tofile(out)
        order.astype(np.uint32).tofile(out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(final + ".tmp", final)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# -- measurements -------------------------------------------------------------------------


def same_values(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) >= set(want), (sorted(got), sorted(want))
    for k, w in want.items():
        g = np.asarray(got[k])
        assert g.shape == w.shape, (k, g.shape, w.shape)
        if k in ("bx", "by", "bz"):
            assert np.allclose(g, w, rtol=1e-12, atol=1e-12, equal_nan=True), k
        else:
            assert np.array_equal(g, w), k


def prepare(data: dict[str, str], work: str, runs: int) -> dict[str, Any]:
    """Index the particles (in ``work/index``), copy the index to ``work/copy`` and
    reorganise there, timing it; the plain read and the sizes."""
    import quarry

    only, with_copy = os.path.join(work, "index"), os.path.join(work, "copy")
    for d in (only, with_copy):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    path = data["particles"]
    with quarry.open(path, index=only) as ds:
        ds.build_index(list(VARS))
    for entry in os.listdir(only):
        src = os.path.join(only, entry)
        copy = shutil.copytree if os.path.isdir(src) else shutil.copy2
        copy(src, os.path.join(with_copy, entry))
    out: dict[str, Any] = {"index_dirs": {"index": only, "mdbin": with_copy}}
    read = partial(read_columns, path, VARS)
    log("plain read of the four variables")
    out["read"] = measure(read, runs, setup=settle)
    for label, jobs in REORG_JOBS:
        log(f"reorganising on {label}")
        fn = partial(reorganise, path, with_copy, jobs)
        out[f"reorg {label}"] = measure(fn, runs, setup=settle)
    # The disk's share: the copy's bytes written durably with no compute, beside the copy.
    log("writing the copy's bytes durably, no compute")
    size = tree_bytes(only_copy(with_copy))
    out["write floor"] = measure(partial(write_durably, work, size), runs, setup=settle)
    os.unlink(os.path.join(work, "floor.bin"))
    # The plain program's old file is removed before each run (untimed): freeing it would
    # be counted, where Quarry frees its old copy on a thread of its own.
    log("the NumPy program: read, bin, stable argsort, gather, write durably")
    out["numpy reorg"] = measure(
        partial(numpy_reorganise, path, work),
        min(runs, NUMPY_REORG_RUNS),
        setup=partial(remove_and_settle, os.path.join(work, NUMPY_COPY)),
    )
    os.unlink(os.path.join(work, NUMPY_COPY))
    # Cold against cold: the source's pages dropped before each run of both.
    drop = partial(settle_and_drop, path)
    log("plain read of the four variables, cold")
    out["read cold"] = measure(read, runs, setup=drop)
    out["cold works"] = bool(out["read cold"]["median"] > COLD_OVER_WARM * out["read"]["median"])
    if out["cold works"]:
        for label, jobs in REORG_JOBS:
            log(f"reorganising on {label}, cold")
            fn = partial(reorganise, path, with_copy, jobs)
            out[f"reorg {label} cold"] = measure(fn, runs, setup=drop)
    out["settled"] = True  # every run of the above after settle()
    out["copy_bytes"] = tree_bytes(only_copy(with_copy))
    cols = read()
    out["raw_bytes"] = int(sum(c.nbytes for c in cols.values()))
    return out


def measure_small(data_dir: str, runs: int) -> dict[str, dict[str, Any]]:
    """The reorganisation on 1 thread against the NumPy program at the sizes of SMALL,
    each on particles of the bundled generator, indexed as the big ones are."""
    from quarry.sample import write_particles

    out = {}
    for n in SMALL:
        directory = os.path.join(data_dir, f"small_{n}")
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        path = os.path.join(directory, "particles.h5")
        write_particles(path, n)
        index = os.path.join(directory, "index")
        os.makedirs(index)
        with quarry_open(path, index) as ds:
            ds.build_index(list(VARS))
        log(f"reorganising {n:,} particles, and the NumPy program")
        out[str(n)] = {
            "quarry": measure(partial(reorganise, path, index, 1), runs, setup=settle),
            "numpy": measure(
                partial(numpy_reorganise, path, directory),
                runs,
                setup=partial(remove_and_settle, os.path.join(directory, NUMPY_COPY)),
            ),
        }
        shutil.rmtree(directory)
    return out


def quarry_open(path: str, index: str, jobs: int | None = None) -> Any:
    import quarry

    return quarry.open(path, index=index, jobs=jobs)


def reorganise(path: str, index: str, jobs: int) -> None:
    import quarry

    with quarry.open(path, index=index, jobs=jobs) as ds:
        ds.reorganize(list(VARS), bin_size=list(BIN_SIZE))


#: The threads that free a replaced file's blocks: the old copy's
#: (quarry.reorg.layout.close_in_background) and the floor's old file's.
FREEING = ("quarry-free-old-copy", "floor-free-old-file")


def settle() -> None:
    """Let the disk finish what the run before left it, untimed: wait for the threads
    freeing a replaced file, then sync the file systems, which on one mounted with
    ``discard`` also sends the freed blocks' discards. Each run then starts with the disk
    idle, as a single ``quarry reorg`` does; back to back, the previous run's freeing
    shares the disk with the next run (the floor's durable write of the same bytes took
    209-824 ms so against 151-157 ms settled, on the benchmark machine)."""
    import threading

    for thread in threading.enumerate():
        if thread.name in FREEING:
            thread.join()
    os.sync()


def remove_and_settle(path: str) -> None:
    """Remove ``path`` if it is there, then :func:`settle`."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    settle()


def settle_and_drop(path: str) -> None:
    """:func:`settle`, then :func:`drop_pages` of ``path``: a cold run's setup."""
    settle()
    drop_pages(path)


def only_copy(directory: str) -> str:
    """The path of the one reorganised copy in ``directory``."""
    copies = [e for e in os.listdir(directory) if e.endswith(".qmd")]
    assert len(copies) == 1, copies
    return os.path.join(directory, copies[0])


#: Pieces the floor writes at a time, each one's write-back started as it is written: as
#: the reorganisation's parts do (quarry-py's cluster.rs, WRITEBACK_BYTES).
FLOOR_PIECE = 4 << 20
_FLOOR_BYTES = np.random.default_rng(12).integers(0, 256, FLOOR_PIECE, np.uint8).tobytes()


def write_durably(directory: str, size: int) -> None:
    """Write ``size`` bytes durably with no compute, as a reorganisation ends with its copy:
    into a new file in ``directory``, a piece of FLOOR_PIECE at a time with each piece's
    write-back started at once (``sync_file_range``), then the fsync, the atomic rename over
    the previous such file (whose blocks are freed on a thread of its own, as the old copy's
    are) and the directory's fsync. What is left of a reorganisation's time over this is
    its reading, its compute and what of them the writing does not hide."""
    import ctypes
    import threading

    libc = ctypes.CDLL(None, use_errno=True)
    start_writeback = getattr(libc, "sync_file_range", None)
    if start_writeback is not None:
        start_writeback.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    final = os.path.join(directory, "floor.bin")
    temporary = final + ".tmp"
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for at in range(0, size, FLOOR_PIECE):
            piece = _FLOOR_BYTES[: min(FLOOR_PIECE, size - at)]
            os.pwrite(fd, piece, at)
            if start_writeback is not None:
                start_writeback(fd, at, len(piece), 2)  # SYNC_FILE_RANGE_WRITE
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        old = os.open(final, os.O_RDONLY)
    except OSError:
        old = None
    os.replace(temporary, final)
    if old is not None:
        threading.Thread(target=os.close, args=(old,), name=FREEING[1]).start()
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def drop_pages(path: str) -> None:
    """Drop ``path``'s clean pages from the page cache: the next read comes from the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def tree_bytes(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def quarry_values(ds: Any, query: str) -> Callable[[], dict[str, np.ndarray]]:
    def run() -> dict[str, np.ndarray]:
        sel = ds.query(query)
        out = {"quarry_row": sel.ids()}
        out.update({v: sel.values(v) for v in VALUES})
        return out

    return run


def access_paths(ds: Any, query: str) -> list[str]:
    sel = ds.query(query)
    sel.ids()
    return sorted({a.path for a in sel.access()})


def measure_q1(
    data: dict[str, str], dirs: dict[str, str], runs: int, query: str, box: Any
) -> dict[str, Any]:
    import quarry

    path = data["particles"]
    cols = read_columns(path, VALUES)
    hits = mask_of(cols, box)
    want = {"quarry_row": np.flatnonzero(hits), **{v: cols[v][hits] for v in VALUES}}
    out: dict[str, Any] = {"query": query, "hits": int(hits.sum())}

    def warm() -> dict[str, np.ndarray]:
        m = mask_of(cols, box)
        return {"quarry_row": np.flatnonzero(m), **{v: cols[v][m] for v in VALUES}}

    def cold() -> dict[str, np.ndarray]:
        fresh = read_columns(path, VALUES)
        m = mask_of(fresh, box)
        return {"quarry_row": np.flatnonzero(m), **{v: fresh[v][m] for v in VALUES}}

    for label, fn in (("numpy warm", warm), ("numpy cold", cold)):
        same_values(fn(), want)
        log(f"Q1 {label}")
        out[label] = measure(fn, runs, warmup=Q1_WARMUP)
    for label in ("mdbin", "index"):
        with quarry.open(path, index=dirs[label]) as ds:
            fn = quarry_values(ds, query)
            same_values(fn(), want)
            out[f"{label} paths"] = access_paths(ds, query)
            log(f"Q1 through {label}: {out[f'{label} paths']}")
            out[label] = measure(fn, runs, warmup=Q1_WARMUP)
    return out


def interpolated(
    ds: Any,
    query: str,
    sources: dict[str, str],
    at: Sequence[str],
    grid: str,
    method: str,
    values: Sequence[str],
) -> Any:
    """Quarry's join: the query, then the fields at its hits."""
    sel = ds.query(query)
    return sel.interpolate(sources, at=at, grid=grid, method=method, values=values)


def measure_join(
    data: dict[str, str], dirs: dict[str, str], mesh: int, runs: int, query: str, box: Any
) -> dict[str, Any]:
    """Q2-Q4 under Q1's condition, and Q4 under WIDE's; Quarry's join on all cores (the
    default) and on 1 thread, each answer checked against the NumPy reference's."""
    res: dict[str, Any] = {}
    for name in JOINS:
        res[name] = measure_one_join(data, dirs, mesh, runs, name, query, box)
    res["Q4 wide"] = measure_one_join(data, dirs, mesh, runs, "Q4", query_text(WIDE), WIDE)
    return res


def measure_one_join(
    data: dict[str, str],
    dirs: dict[str, str],
    mesh: int,
    runs: int,
    name: str,
    query: str,
    box: Any,
) -> dict[str, Any]:
    import quarry

    method, at, values, fields = JOINS[name]
    grid = grid_text(mesh)
    text = subarray(len(at), mesh)[0]
    sources = {f: os.path.join(data["field"], f + ".bin") + text for f in fields}
    reference = partial(numpy_join, data, mesh, name, box)
    want = reference()
    out: dict[str, Any] = {}
    for label, jobs in (("quarry", None), ("quarry 1 thread", 1)):
        with quarry.open(data["particles"], index=dirs["mdbin"], jobs=jobs) as ds:
            join = partial(interpolated, ds, query, sources, at, grid, method, values)
            table = join()
            same_values(dict(table.columns), want)
            log(f"{name} ({method}) on {jobs or 'all'} thread(s): {len(table):,} rows")
            out[label] = measure(join, runs)
            if jobs is None:
                out["bytes_read"] = dict(table.bytes_read)
    return {
        "method": method,
        "at": list(at),
        "values": list(values),
        "fields": {f: os.path.basename(s) for f, s in sources.items()},
        "query": query,
        "rows": len(table),
        "nan": int(sum(np.isnan(table[f]).sum() for f in fields)),
        "numpy": measure(reference, runs),
        **out,
    }


def measure_all(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    meta = machine()
    data_dir = args.data_dir or os.path.join(tempfile.gettempdir(), "quarry-bench-reorg")
    data = ensure_data(args.n, args.mesh, make_data_script(args.make_data), data_dir)
    work = tempfile.mkdtemp(prefix="quarry-reorg-", dir=data_dir)
    try:
        prep = prepare(data, work, args.reorg_runs)
        prep["small"] = measure_small(work, args.reorg_runs)
        query = query_text(Q1)
        cols = read_columns(data["particles"], VARS)
        res: dict[str, Any] = {
            "n": args.n,
            "mesh": args.mesh,
            "data": data["source"],
            "bin_size": list(BIN_SIZE),
            "grid": grid_text(args.mesh),
            "issue_q1": query_text(ISSUE_Q1),
            "issue_q1_hits": int(mask_of(cols, ISSUE_Q1).sum()),
            "goals": GOALS,
            "prepare": {k: v for k, v in prep.items() if k != "index_dirs"},
        }
        del cols
        res["q1"] = measure_q1(data, prep["index_dirs"], args.runs, query, Q1)
        res["joins"] = measure_join(data, prep["index_dirs"], args.mesh, args.runs, query, Q1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    close_meta(meta, res, started)
    return res


# -- report -------------------------------------------------------------------------------


def times(base: dict[str, float], tool: dict[str, float]) -> float:
    return float(base["median"] / tool["median"])


def goal_rows(res: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any], float]]:
    """Issue 12's goals as ``(what, a, b, wanted)``, the ratio being the median time of
    ``a`` over ``b``'s: at least ``wanted``, or with a negative ``wanted`` at most
    ``-wanted``. One list for the report and the README. The joins' goal is the issue's
    Q2-Q4 under Q1's condition, not the wide Q4."""
    goals, q1, prep = res["goals"], res["q1"], res["prepare"]
    mdbin = q1["mdbin"]
    rows = [
        ("Q1 values: MDBin vs the bitmap index", q1["index"], mdbin, goals["index"]),
        ("Q1 values: MDBin vs NumPy, h5py read + filter", q1["numpy cold"], mdbin, 50.0),
        ("Q1 values: MDBin vs NumPy, columns in memory", q1["numpy warm"], mdbin, 50.0),
    ]
    rows += [
        (f"{name} ({j['method']}) vs the NumPy reference", j["numpy"], j["quarry"], goals["join"])
        for name, j in res["joins"].items()
        if name in JOINS
    ]
    kinds = [("warm", "", "read")]
    if prep.get("cold works"):
        kinds.append(("both cold", " cold", "read cold"))
    rows += [
        (
            f"reorganisation on {label}, over the plain read ({kind})",
            prep[f"reorg {label}{suffix}"],
            prep[read],
            -3.0,
        )
        for kind, suffix, read in kinds
        for label, _ in REORG_JOBS
    ]
    return rows


def goal_met(r: float, goal: float) -> bool:
    """Whether ratio ``r`` meets ``goal`` (at least it, or at most ``-goal``)."""
    return r >= goal if goal > 0 else r <= -goal


def goal_wanted(goal: float) -> str:
    """What ``goal`` asks, in words: at least it, or with a negative ``goal`` at most ``-goal``."""
    return f"at least {goal:g}x" if goal > 0 else f"at most {-goal:g}x"


def goal_line(label: str, r: float, goal: float) -> str:
    """A goal's row of the report."""
    verdict = "met" if goal_met(r, goal) else "**missed**"
    return f"| {label} | {r:.1f}x | {goal_wanted(goal)} | {verdict} |"


def render(res: dict[str, Any]) -> str:
    meta, limit = res["meta"], res["meta"]["others_limit"]
    q1, prep = res["q1"], res["prepare"]
    mdbin = q1["mdbin"]
    q1_rows = [
        f"| through the MDBin copy ({', '.join(q1['mdbin paths'])}) | {ms(mdbin, limit)} | 1.0x |",
        f"| bitmap index alone ({', '.join(q1['index paths'])}) | {ms(q1['index'], limit)} | "
        f"{times(q1['index'], mdbin):.1f}x |",
        f"| NumPy, columns in memory | {ms(q1['numpy warm'], limit)} | "
        f"{times(q1['numpy warm'], mdbin):.1f}x |",
        f"| NumPy, h5py read + filter | {ms(q1['numpy cold'], limit)} | "
        f"{times(q1['numpy cold'], mdbin):.1f}x |",
    ]
    join_rows = []
    for name, j in res["joins"].items():
        r = times(j["numpy"], j["quarry"])
        fields = ", ".join(f"`{s}`" for s in j["fields"].values())
        read = sum(j["bytes_read"].values())
        one = j.get("quarry 1 thread")
        one_text = "" if one is None else f" | {ms(one, limit)} | {times(one, j['quarry']):.2f}x"
        join_rows.append(
            f"| {name} | {j['method']} on {', '.join(j['at'])} | {fields} | {j['rows']:,} | "
            f"{read:,}{one_text} | {ms(j['quarry'], limit)} | {ms(j['numpy'], limit)} | "
            f"{r:.1f}x |"
        )
    goals_met = [(label, times(a, b), goal) for label, a, b, goal in goal_rows(res)]
    threads_text, threads_head, threads_rule = "", "", ""
    if all("quarry 1 thread" in j for j in res["joins"].values()):
        threads_head = " Quarry 1 thread (ms) | all cores over 1 thread |"
        threads_rule = "---:|---:|"
        wide = res["joins"].get("Q4 wide", {}).get("query", "")
        threads_text = (
            " Quarry runs on all cores (the default) and on 1 thread; the NumPy reference on "
            "one (NumPy's own operations are single-threaded). The join shares its particles "
            "among threads only when there are enough of them: Q1's few hundred are joined on "
            f"the calling thread alone, whence the wide Q4 (`{wide}`)."
        )
    read = prep["read"]["median"]
    cold = prep.get("cold works", False)
    reorg_rows = [
        f"| {label}, page cache warm | {ms(prep[f'reorg {label}'], limit)} | "
        f"{prep[f'reorg {label}']['median'] / read:.1f}x |"
        for label, _ in REORG_JOBS
    ]
    if cold:
        cold_read = prep["read cold"]["median"]
        reorg_rows += [
            f"| {label}, source cold | {ms(prep[f'reorg {label} cold'], limit)} | "
            f"{prep[f'reorg {label} cold']['median'] / cold_read:.1f}x (of the cold read) |"
            for label, _ in REORG_JOBS
        ]
    if prep.get("settled"):
        settle_text = (
            "Before every run (untimed), the threads freeing a replaced file are waited for "
            "and the file systems synced, which also sends the freed blocks' discards (this "
            "one is mounted with `discard`): each run starts with the disk idle, as a single "
            "`quarry reorg` does (its process waits for that freeing before it exits), "
            "where back to back the previous run's freeing and discards would share the "
            "disk with the next. "
        )
    else:
        settle_text = (
            "That freeing overlaps the start of the next run (a `quarry reorg` process waits "
            "for it before it exits). "
        )
    floor_text = ""
    if "write floor" in prep:
        floor = prep["write floor"]
        of_cold = f"; {floor['median'] / prep['read cold']['median']:.1f}x (of the cold read)"
        reorg_rows.append(
            f"| floor: the copy's bytes written durably, no compute | {ms(floor, limit)} | "
            f"{floor['median'] / read:.1f}x{of_cold if cold else ''} |"
        )
        floor_text = (
            f" The floor row writes the copy's {prep['copy_bytes']:,} bytes into a new file "
            "on its file system as a reorganisation does, with nothing computed and nothing read: "
            "4 MiB at a time, each piece's write-back started as it is written, then the "
            "fsync, the atomic rename over the previous one and the directory's fsync. It is "
            "what the disk alone takes of the ratio."
        )
        if cold:
            both = (prep["read cold"]["median"] + floor["median"]) / prep["read cold"]["median"]
            floor_text += (
                " The particles have a fresh index, which gives the reorganisation each "
                "variable's range, so it reads each variable once, as it writes; with the "
                "source cold one disk carries that read and this write: together "
                f"{both:.1f}x the cold read (the sum of the two medians, not a measurement "
                "of its own; a disk that reads and writes at once may do better)."
            )
    if "numpy reorg" in prep:
        plain, one = prep["numpy reorg"], prep["reorg 1 thread"]
        reorg_rows.append(
            "| NumPy program, 1 thread: read, bin, stable argsort, gather, write durably | "
            f"{ms(plain, limit)} | {plain['median'] / read:.1f}x |"
        )
        floor_text += (
            " The NumPy row is the plain program a scientist would write for the same copy: "
            "h5py reads the variables whole, each row's MDBin number is made from its bins "
            '(counted from each variable\'s least value), `np.argsort(kind="stable")` '
            "orders the rows, and each variable gathered in that order and the rows' "
            "positions (uint32) are written into a new file, fsynced and renamed into place. "
            f"Quarry on 1 thread takes {one['median'] / plain['median']:.2f} of its time "
            f"({plain['median'] / one['median']:.1f}x faster)."
        )
    small_rows, small_lost = [], []
    for n, t in prep.get("small", {}).items():
        r = times(t["numpy"], t["quarry"])
        small_rows.append(
            f"| {int(n):,} | {ms(t['quarry'], limit)} | {ms(t['numpy'], limit)} | {r:.2f}x |"
        )
        if round(r, 2) < 1.0:  # a loss as the table shows it
            small_lost.append(
                f"reorganising {int(n):,} rows takes {1 / r:.1f}x the NumPy program's time "
                f"({t['quarry']['median'] * 1e3:.1f} ms against {t['numpy']['median'] * 1e3:.1f} "
                "ms: at that size the copy's fixed cost, an HDF5 file made with its datasets, "
                "its manifest written, fsynced and renamed into place, outweighs the work)"
            )
    if "read cold" not in prep:
        cold_text = "The cold measurements were not taken in this run."
    elif cold:
        cold_text = (
            f"Cold: the source's pages dropped (`posix_fadvise(DONTNEED)`) before every run of "
            f"both, the plain read takes {ms(prep['read cold'], limit)} ms."
        )
    else:
        cold_text = (
            "Dropping the source's pages (`posix_fadvise(DONTNEED)`) did not make the plain "
            f"read slower ({ms(prep['read cold'], limit)} ms against "
            f"{ms(prep['read'], limit)} ms warm) on this machine, so there is no cold line."
        )
    one_off = prep["reorg all cores"]
    lost = [
        *(f"{label} ({r:.2g}x)" for label, r, goal in goals_met if goal > 0 and r < 1.0),
        *small_lost,
        f"the copy itself: reorganising takes {one_off['median']:.2f} s on all cores, "
        f"{one_off['median'] / read:.1f}x a plain read of the four variables from the page "
        "cache, and is repaid after "
        f"{break_even(one_off['median'], q1['index'], mdbin)} Q1 queries against the bitmap "
        f"index path ({break_even(one_off['median'], q1['numpy warm'], mdbin)} against the "
        "NumPy scan of columns in memory)",
    ]
    lines = [
        "# Reorganised copies (MDBin) and interpolation joins (SCJoin)",
        "",
        *header(meta),
        f"- Data: `make_data.py particles --n {res['n']:,}` and `make_data.py field --mesh "
        f"{res['mesh']}` ({res['data']}), page cache warm unless a line says cold; the "
        f"particles indexed over {', '.join(VARS)} and reorganised with `--bin-size "
        f"{','.join(f'{b:g}' for b in res['bin_size'])}` over the same variables; the field "
        f'files registered as raw `<f4` {res["mesh"]}^3, `--grid "{res["grid"]}"`.',
        "- Reproduce: `make bench`, or `python benches/reorg.py [--n N] [--mesh M] [--runs R]`; "
        "`--render` rewrites this file from `benches/REPORT-reorg.json`.",
        f"- Q1 as the issue writes it, `{res['issue_q1']}`, has {res['issue_q1_hits']:,} "
        "hits on this data: the generator's energetic tail lies near the current sheet "
        "(z ~ 66), not at 4 < z < 14. The benchmark moves the energy window, keeping its "
        f"width (one bin), to the thermal particles: `{q1['query']}`, "
        f"{q1['hits']:,} hits.",
        "",
        "## Q1: the values of energy, x, y, z, ux, uy, uz at the hits",
        "",
        "Quarry's time is a query on a Dataset already open and the seven variables' "
        "values at its hits (`sel.values`); in brackets the access path its conditions "
        "took, as `--explain` names it. The copy (or the index) finds the rows. Through "
        f"the copy, the values of the variables it holds ({', '.join(VARS)}) are read "
        "from its runs, and the others' gathered from the file at those rows; through "
        "the index, all are gathered from the file. Every answer (ids and values) equals "
        f"NumPy's. Each path is called {Q1_WARMUP} times untimed before it is timed, as in "
        "a loop of queries (Python specialises a function's bytecode over its first calls).",
        "",
        "| path | time (ms) | over MDBin |",
        "|---|---:|---:|",
        *q1_rows,
        "",
        "## Q2-Q4: interpolation joins under Q1's condition",
        "",
        "Quarry: `sel.interpolate(fields, at=..., grid=..., values=...)` on the Dataset with "
        "the copy, the query included. NumPy reference: h5py reads the particle variables, "
        "`np.fromfile` the whole field files, filter, interpolate by hand in float64. Rows, "
        "ids and values are equal; the fields agree to 1e-12." + threads_text,
        "",
        f"| join | method | fields | rows | field bytes read |{threads_head} Quarry (ms) | "
        "NumPy (ms) | speed-up |",
        f"|---|---|---|---:|---:|{threads_rule}---:|---:|---:|",
        *join_rows,
        "",
        "## Reorganisation",
        "",
        f"Plain read of {', '.join(VARS)} (h5py, whole variables): "
        f"{ms(prep['read'], limit)} ms. The copy holds "
        f"{prep['copy_bytes']:,} bytes against {prep['raw_bytes']:,} raw bytes of the "
        f"variables: {prep['copy_bytes'] / prep['raw_bytes']:.2f}x (it adds each row's "
        "position in the file and the offset tables). Each reorganisation replaces the "
        "copy of the run before and ends with the fsync that makes the copy durable before "
        "its atomic rename; the old copy's blocks are freed after the rename on a thread "
        f"of its own (a time is until the call returns). {settle_text}"
        f"{cold_text}{floor_text}",
        "",
        "| reorganisation | time (ms) | over the plain read |",
        "|---|---:|---:|",
        *reorg_rows,
        *(
            [
                "",
                "Smaller tables: the same reorganisation on 1 thread (the particles of the "
                "bundled generator, indexed as above) against the NumPy program, both warm.",
                "",
                "| rows | Quarry 1 thread (ms) | NumPy program (ms) | NumPy over Quarry |",
                "|---:|---:|---:|---:|",
                *small_rows,
            ]
            if small_rows
            else []
        ),
        "",
        "## Goals (issue 12)",
        "",
        "| goal | ratio | wanted | verdict |",
        "|---|---:|---:|---|",
        *[goal_line(label, r, goal) for label, r, goal in goals_met],
        "",
        "Where Quarry loses: " + "; ".join(lost) + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--n", type=int, default=N, help="particles (default 16,777,216)")
    p.add_argument("--mesh", type=int, default=MESH, help="field points per axis")
    p.add_argument("--runs", type=int, default=7, help="timed runs per query measurement")
    p.add_argument("--reorg-runs", type=int, default=7, help="timed runs of the reorganisation")
    p.add_argument("--make-data", help="path of make_data.py (default: ../shared/bench)")
    p.add_argument("--data-dir", help="scratch directory (default: under the system's temp)")
    p.add_argument("--render", action="store_true", help="only re-render the report")
    args = p.parse_args(argv)
    return write_report(args.render, partial(measure_all, args), render, RESULTS, REPORT)


if __name__ == "__main__":
    sys.exit(main())
