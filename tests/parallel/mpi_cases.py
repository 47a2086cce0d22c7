"""Work for the MPI tests, run by ``mpiexec -n N python mpi_cases.py ...``
(see test_mpi.py): build indexes and answer queries with N ranks, rank 0
saving what it found for the test to compare with serial runs and NumPy."""

from __future__ import annotations

import json
import os
import sys

import h5py
import numpy as np

import quarry
from quarry.parallel.mpi import world
from quarry.parallel.runners import Local, Mpi

FILES = ["run_0.h5", "run_1.h5"]
STEPS = 3
ROWS = 5003  # not a multiple of the block length
BLOCK_LEN = 1000
VALUES = ["a", "d"]


def make(directory: str) -> dict[str, dict[str, np.ndarray]]:
    """Two files of three step groups, four dtypes with NaNs; returns the
    columns per member (file:step) and writes random queries to queries.json."""
    rng = np.random.default_rng(11)
    members = {}
    for file in FILES:
        with h5py.File(os.path.join(directory, file), "w") as f:
            for step in range(STEPS):
                a = rng.normal(0, 1, ROWS).astype("f4")
                a[rng.random(ROWS) < 0.05] = np.nan
                columns = {
                    "a": a,
                    "b": rng.integers(-300, 300, ROWS).astype("i2"),
                    "c": rng.integers(0, 2**64 - 1, ROWS, dtype="u8", endpoint=True),
                    "d": rng.gamma(2.0, 1.0, ROWS),
                }
                for name, values in columns.items():
                    f.create_dataset(f"Step#{step}/{name}", data=values, chunks=(700,))
                members[f"{file}:{step}"] = columns
    queries = _queries(rng)
    with open(os.path.join(directory, "queries.json"), "w") as out:
        json.dump(queries, out)
    return members


def _queries(rng: np.random.Generator) -> list[str]:
    def leaf() -> str:
        kind = rng.integers(0, 5)
        if kind == 0:
            return f"a {rng.choice(['<', '>=', '!='])} {rng.normal():.3f}"
        if kind == 1:
            return f"{int(rng.integers(-300, 300))} <= b < {int(rng.integers(-100, 300))}"
        if kind == 2:
            return f"c > {int(rng.integers(0, 2**63))}"
        if kind == 3:
            return f"d * a > {rng.normal():.2f}"
        return "d > mean(d) + std(d)"

    out = []
    for _ in range(12):
        parts = [leaf() for _ in range(rng.integers(1, 4))]
        text = f" {rng.choice(['&&', '||'])} ".join(f"({p})" for p in parts)
        out.append(f"!({text})" if rng.random() < 0.2 else text)
    return out


def build(directory: str) -> None:
    """Index every file with this launch's ranks: files shared over groups of
    ranks (the default), and all ranks on each file (--ranks-per-file N)."""
    comm = world()
    size = 1 if comm is None else comm.size
    for per_file in (None, size):
        index = os.path.join(directory, f"idx-{size}-g{per_file or 'auto'}")
        with quarry.open_series([os.path.join(directory, f) for f in FILES], index=index) as series:
            list(
                series.build_indexes(
                    block_len=BLOCK_LEN, bins=64, comm=comm, ranks_per_file=per_file
                )
            )
    # Every rank gets the manifest; ranks other than 0 without per-block lists.
    extra = os.path.join(directory, f"extra-{size}.qidx")
    with quarry.open(os.path.join(directory, FILES[0]), index=extra) as ds:
        manifest = ds.build_index(block_len=BLOCK_LEN, comm=comm)
        entries = manifest.variables
        assert sorted(entries) == sorted(v.path for v in ds.index_variables())
        assert all(
            (e.blocks is not None) == (comm is None or comm.rank == 0) for e in entries.values()
        )


def query(directory: str, index: str, out: str) -> None:
    """Answer every query over the series with this launch's ranks; rank 0
    saves per member its count (reduced), ids and values (gathered)."""
    comm = world()
    with open(os.path.join(directory, "queries.json")) as f:
        queries = json.load(f)
    found: dict[str, np.ndarray] = {}
    with quarry.open_series([os.path.join(directory, f) for f in FILES], index=index) as series:
        for q, text in enumerate(queries):
            counted = series.query(text)
            listed = series.query(text)
            if comm is not None:
                counted.answer(Mpi(comm))
                if not listed.answer(Mpi(comm), rows=True, names=VALUES):
                    continue  # rows and values are gathered on rank 0
            zipped = zip(counted.selections, listed.selections, strict=True)
            for m, (c, s) in enumerate(zipped):
                found[f"{q}/{m}/count"] = np.array(c.count())
                found[f"{q}/{m}/ids"] = s.ids()
                for name in VALUES:
                    found[f"{q}/{m}/{name}"] = s.values(name)
        # The whole batch at once: one collective call for every query's counts.
        runner = Mpi(comm) if comm is not None else Local(jobs=1)
        for q, answer in enumerate(series.query_many(queries, runner=runner)):
            for m, count in enumerate(answer.counts()):
                found[f"batch/{q}/{m}"] = np.array(count)
    if comm is None or comm.rank == 0:
        np.savez(out, **found)


def fail(directory: str, index: str) -> None:
    """Build with rank 1 failing half way through its blocks."""
    import quarry.parallel.build as parallel_build

    comm = world()
    assert comm is not None
    if comm.rank == 1:
        real = parallel_build.index_blocks

        def failing(driver, variables, runs, opts, writer, progress=None):  # type: ignore[no-untyped-def]
            first = dict(list(runs.items())[:1])
            real(driver, variables, first, opts, writer, progress)
            raise OSError(28, "No space left on device (injected)")

        parallel_build.index_blocks = failing
    with quarry.open(os.path.join(directory, FILES[0]), index=index) as ds:
        try:
            ds.build_index(block_len=BLOCK_LEN, comm=comm)
        except quarry.QuarryError as exc:
            print(f"rank {comm.rank}: {exc}", flush=True)
            sys.exit(3)


def read_fails(directory: str, how: str) -> None:
    """Answer with the Mpi runner while the last rank's reads fail (a
    damaged chunk: OSError), the last rank holding the file's one block (or
    member); ``how`` is ``count``, ``rows`` or ``batch``. Every rank must
    raise, none wait on that rank: each writes what it raised to a file."""
    comm = world()
    assert comm is not None
    path = os.path.join(directory, f"damaged-{how}.h5")
    if comm.rank == 0:
        with h5py.File(path, "w") as f:
            f["b"] = np.arange(40_000.0)
    comm.Barrier()

    def damaged(var: str, start: int, stop: int) -> None:
        raise OSError(5, "Can't synchronously read data (injected)")

    with quarry.open_series(path, index=os.path.join(directory, "none") + "/") as series:
        ds = series.dataset(series.files[0])
        if comm.rank == comm.size - 1:
            ds.driver.read = damaged  # type: ignore[method-assign,assignment]
        try:
            if how == "batch":
                series.query_many(["b > 5"], runner=Mpi(comm))
            elif how == "rows":
                Mpi(comm).answer([ds.query("b > 5")], rows=True)  # type: ignore[list-item]
            else:
                ds.query("b > 5", runner=Mpi(comm))
            said = "answered"
        except Exception as exc:
            said = f"{type(exc).__name__}: {exc}"
    # A file per rank: lines the ranks print at once may interleave.
    with open(os.path.join(directory, f"said-{how}-{comm.rank}.txt"), "w") as out:
        out.write(said)


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    {"build": build, "query": query, "fail": fail, "read_fails": read_fails}[command](*rest)
