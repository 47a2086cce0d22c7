"""The README's promise "your HDF5 file is never modified", for every format
and every command: the source's bytes (a hash of each file, for a directory
store every file in it), its listing, size, mtime, ctime and inode are the
same after the command as before it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import h5py
import numpy as np
import pytest

from quarry.cli.main import main

ROWS = 203  # divides no block length or chunking used here


def _columns() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    temp = rng.normal(280, 15, ROWS).astype("f4")
    temp[rng.random(ROWS) < 0.1] = np.nan
    return {"id": np.arange(ROWS, dtype="i8"), "temp": temp}


def _hdf5(folder: Path, columns: dict[str, np.ndarray]) -> Path:
    path = folder / "data.h5"
    with h5py.File(path, "w") as f:
        f["id"] = columns["id"]  # contiguous: read through a memory map
        f.create_dataset("temp", data=columns["temp"], chunks=(64,), compression="gzip")
    return path


def _netcdf(folder: Path, columns: dict[str, np.ndarray]) -> Path:
    netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")
    path = folder / "data.nc"
    with netcdf4.Dataset(path, "w") as ds:
        ds.createDimension("row", ROWS)
        for name, data in columns.items():
            ds.createVariable(name, data.dtype, ("row",))[:] = data
    return path


def _zarr(folder: Path, columns: dict[str, np.ndarray]) -> Path:
    zarr = pytest.importorskip("zarr", reason="zarr is not installed")
    path = folder / "data.zarr"
    root = zarr.open_group(path, mode="w")
    for name, data in columns.items():
        root.create_array(name, shape=data.shape, dtype=data.dtype, chunks=(50,))[:] = data
    return path


def _adios2(folder: Path, columns: dict[str, np.ndarray]) -> Path:
    adios2 = pytest.importorskip("adios2", reason="adios2 is not installed")
    path = folder / "data.bp"
    io = adios2.Adios().declare_io("untouched")
    with adios2.Stream(io, str(path), "w") as stream:
        for _ in stream.steps(1):
            for name, data in columns.items():
                stream.write(name, data, [ROWS], [0], [ROWS])
    return path


def _raw(folder: Path, columns: dict[str, np.ndarray]) -> Path:
    from quarry.formats.raw import RawLayout, register

    path = folder / "id.bin"
    path.write_bytes(columns["id"].astype("<i8").tobytes())
    register(str(path), RawLayout("id", "<i8", (ROWS,), "C", 0))
    return path


WRITERS = {"hdf5": _hdf5, "netcdf": _netcdf, "zarr": _zarr, "adios2": _adios2, "raw": _raw}

QUERY = "id >= 40 && id != 77"
#: Each command as its argv lists, run in order; {src} is the source, {out}
#: a folder for what the commands write. The source is indexed first,
#: except for "index", which is what that case tests.
COMMANDS: dict[str, list[list[str]]] = {
    "index": [["index", "{src}", "--quiet"]],
    "index-derived": [["index", "{src}", "--quiet", "--derive", "twice=id*2"]],
    "count": [["query", "{src}", QUERY, "--count", "--json"]],
    "ids": [["query", "{src}", QUERY, "--ids"]],
    "values": [["query", "{src}", QUERY, "--values", "{values}"]],
    "scan": [["query", "{src}", "id * 2 > 100", "--count"]],
    "out-npy": [["query", "{src}", QUERY, "--ids", "--out", "{out}/ids.npy"]],
    "out-h5": [["query", "{src}", QUERY, "--values", "{values}", "--out", "{out}/sel.h5"]],
    "out-nc": [["query", "{src}", QUERY, "--values", "{values}", "--out", "{out}/sel.nc"]],
    "out-parquet": [
        ["query", "{src}", QUERY, "--values", "{values}", "--out", "{out}/sel.parquet"]
    ],
    "out-csv": [["query", "{src}", QUERY, "--values", "{values}", "--out", "{out}/sel.csv"]],
    "hist": [
        ["hist", "{src}", "id", "--where", QUERY, "--json"],
        ["hist", "{src}", "id", "--bins", "5", "--png", "{out}/hist.png"],
    ],
    "plot": [["plot", "{src}", "id", "id", "--where", QUERY, "--png", "{out}/plot.png"]],
    "track": [
        ["track", "{src}", QUERY, "--at-step", "0", "--values", "{values}", "--json"],
        ["track", "{src}", QUERY, "--at-step", "0", "--out", "{out}/track.h5"],
    ],
    "verify": [["verify", "{src}"]],
    "save-load": [
        ["query", "{src}", QUERY, "--ids", "--save", "{out}/hot.qsel"],
        ["query", "{src}", "--load", "{out}/hot.qsel", "--values", "{values}"],
    ],
    "info": [["info", "{src}", "--json"]],
}


def snapshot(source: Path) -> dict[str, tuple[str, int, int, int, int]]:
    """Every file of the source (one, or a directory store's tree): its
    SHA-256, size, mtime, ctime and inode. A directory's own stat is taken
    too, so a file added or removed inside it shows."""
    files = [source] if source.is_file() else [source, *sorted(source.rglob("*"))]
    state = {}
    for path in files:
        st = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        state[str(path)] = (digest, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    return state


def run(argv: list[str]) -> None:
    assert main(argv) == 0, argv


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("kind", list(WRITERS))
def test_no_command_modifies_the_source(tmp_path, kind, command, capsys):
    if command in ("hist", "plot"):
        pytest.importorskip("matplotlib", reason="matplotlib draws the pictures")
    if command == "out-parquet":
        pytest.importorskip("pyarrow", reason="pyarrow writes Parquet")
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    source = WRITERS[kind](data, _columns())
    fields = {"src": str(source), "out": str(out), "values": "id" if kind == "raw" else "id,temp"}
    if not command.startswith("index"):
        run(["index", str(source), "--quiet"])
    before = snapshot(source)
    for argv in COMMANDS[command]:
        run([a.format(**fields) for a in argv])
    capsys.readouterr()
    assert snapshot(source) == before
