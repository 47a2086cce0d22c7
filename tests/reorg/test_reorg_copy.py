"""The reorganised copy as a user meets it: where it goes, what it holds,
NaN rows, step groups, threads, and a source that changed or a copy that
was damaged."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shlex
import subprocess
import sys
import zlib

import h5py
import numpy as np
import pytest

import quarry
from quarry import _core
from quarry.errors import CorruptCopyError, ReorgError, ShapeMismatchError, StaleCopyError
from quarry.expr.plan import Interval
from quarry.reorg import find_copy, open_copy
from quarry.reorg.binning import DEFAULT_BINS
from quarry.reorg.build import DEFAULT_PART_ROWS
from quarry.reorg.layout import store_manifest
from quarry.reorg.read import check_copy


def f64(lo: float, hi: float) -> Interval:
    return Interval("f64", lo, True, hi, False)


def particles_file(path: str, rows: int) -> str:
    rng = np.random.default_rng(7)
    with h5py.File(path, "w") as f:
        for step in range(2):
            f[f"Step#{step}/energy"] = rng.exponential(0.4 * (step + 1), rows).astype("f4")
            f[f"Step#{step}/x"] = rng.uniform(0, 100 * (step + 1), rows)
    return path


@pytest.fixture
def particles(tmp_path):
    return particles_file(str(tmp_path / "p.h5"), 5000)


@pytest.fixture
def more_particles(tmp_path):
    """Steps large enough that a box on a file opened afresh costs a scan
    more than reading the copy's tables and its boundary rows: the planner
    takes the copy (the place damage in it must show)."""
    return particles_file(str(tmp_path / "p.h5"), 100_000)


def quarry_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``quarry ARGS`` in a process of its own, which must succeed."""
    return subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", *args], check=True, capture_output=True, text=True
    )


def digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_each_step_is_reorganised_on_its_own_beside_the_file(particles):
    """README: every step group is reorganised on its own; FILE.qmd beside the file;
    16 equal bins per variable by default; parts of 4,194,304 rows."""
    before = digest(particles)
    with quarry.open(particles) as ds:
        manifest = ds.reorganize(["energy", "x"])
    assert digest(particles) == before
    assert os.path.exists(particles + ".qmd")
    assert [m.group for m in manifest.members] == ["/Step#0", "/Step#1"]
    assert [m.step for m in manifest.members] == [0, 1]
    assert DEFAULT_BINS == 16 and DEFAULT_PART_ROWS == 4_194_304
    with h5py.File(particles) as f:
        for member in manifest.members:
            x = f[f"{member.group}/x"][()]
            energy_axis, x_axis = member.axes
            assert (x_axis.low, x_axis.high) == (x.min(), x.max())  # the step's own range
            assert energy_axis.count == x_axis.count == 16
            assert len(member.parts) == 1
    leftovers = [n for n in os.listdir(os.path.dirname(particles)) if n.endswith(".tmp")]
    assert leftovers == []


def test_a_path_picks_one_step_and_bin_sizes_set_the_bins(particles):
    with quarry.open(particles) as ds:
        manifest = ds.reorganize(["energy", "x"], bin_size=[0.5, 10], path="Step#1")
    (member,) = manifest.members
    assert member.variables == ["/Step#1/energy", "/Step#1/x"]
    x_axis = member.axes[1]
    assert x_axis.size == 10.0 and x_axis.count == int((x_axis.high - x_axis.low) // 10) + 1


def test_nan_rows_have_a_bin_of_their_own(tmp_path):
    """README: NaN values go to a bin of their own after the variable's last;
    a range on the variable never selects them; a box that leaves the
    variable free keeps them."""
    path = str(tmp_path / "n.h5")
    e = np.array([0.5, np.nan, 1.5, np.nan, 2.5, 0.1], "f4")
    x = np.array([1.0, 2.0, 3.0, 4.0, np.nan, 6.0])
    with h5py.File(path, "w") as f:
        f["e"], f["x"] = e, x
    with quarry.open(path) as ds:
        manifest = ds.reorganize(["e", "x"], bins=2)
    e_axis, x_axis = manifest.members[0].axes
    assert e_axis.nan_bin and x_axis.nan_bin and e_axis.slots == 3
    member = open_copy(path).members[0]
    rows = np.asarray(member.column("rows"))
    # MDBin order: e's NaN bin (2) comes after its bins 0 and 1.
    assert rows.tolist() == [0, 5, 2, 4, 1, 3]
    assert member.select({"/e": f64(-np.inf, np.inf)}).ids.tolist() == [0, 2, 4, 5]
    assert member.select({"/x": f64(0.0, 5.0)}).ids.tolist() == [0, 1, 2, 3]
    both = member.select({"/e": f64(0.0, 2.0), "/x": f64(0.0, 10.0)}, ["/e", "/x"])
    assert both.ids.tolist() == [0, 2, 5]
    assert both.values["/x"].tolist() == [1.0, 3.0, 6.0]
    assert member.select({}).ids.tolist() == list(range(6))


def test_threads_and_parts_change_nothing_but_the_parts(tmp_path):
    path = str(tmp_path / "t.h5")
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        f["a"] = rng.normal(size=10_007)
        f["b"] = rng.integers(-50, 50, 10_007).astype("i2")
    answers = []
    for jobs, part_rows in ((1, 10_007), (4, 1000), (2, 333)):
        with quarry.open(path, jobs=jobs) as ds:
            manifest = ds.reorganize(["a", "b"], bins=[8, 5], part_rows=part_rows)
        assert [p.rows for p in manifest.members[0].parts][:-1] == [part_rows] * (
            len(manifest.members[0].parts) - 1
        )
        member = open_copy(path).members[0]
        box = {"/a": f64(-0.5, 1.2), "/b": Interval("i64", -10, True, 20, True)}
        answers.append(member.select(box, ["/a", "/b"]))
        runs = member.runs(box)
        assert set(runs.whole[:, 0]) <= set(range(len(manifest.members[0].parts)))
    with h5py.File(path) as f:
        a, b = f["a"][()], f["b"][()]
    expected = np.flatnonzero((a >= -0.5) & (a < 1.2) & (b >= -10) & (b <= 20))
    for answer in answers:
        np.testing.assert_array_equal(answer.ids, expected)
        np.testing.assert_array_equal(answer.values["/b"], b[expected])


def test_whole_bins_are_runs_and_only_boundary_bins_are_filtered(tmp_path):
    path = str(tmp_path / "r.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(1000.0)
        f["y"] = np.arange(1000.0)[::-1].copy()
    with quarry.open(path) as ds:
        ds.reorganize(["x", "y"], bin_size=[100, 100])
    member = open_copy(path).members[0]
    runs = member.runs({"/x": f64(200.0, 450.0)})
    assert runs.whole_rows == 200 and runs.boundary_rows == 100
    assert member.runs({"/x": f64(200.0, 400.0)}).boundary_rows == 0
    assert member.runs({"/x": Interval("f64", 5.0, True, 1.0, True, empty=True)}).whole.size == 0


def test_bad_requests_are_clear(particles, tmp_path):
    with quarry.open(particles) as ds:
        with pytest.raises(ReorgError, match="bin sizes or a number of bins, not both"):
            ds.reorganize(["energy"], bin_size=1.0, bins=4, path="Step#0")
        with pytest.raises(ReorgError, match="more than 16777216 bins"):
            ds.reorganize(["x"], bin_size=1e-9, path="Step#0")
    other = str(tmp_path / "s.h5")
    with h5py.File(other, "w") as f:
        f["a"], f["b"] = np.zeros(3), np.zeros(4)
        f["inf"] = np.array([-np.inf, -3.5, 2.0, np.inf])
    # The range the bins cut is the finite values', not [-inf, inf].
    said = (
        r"/inf would have more than 16777216 bins of size 1e-08 over its finite values "
        r"\[-3.5, 2.0\] \(infinities go to the end bins\)"
    )
    with quarry.open(other) as ds, pytest.raises(ReorgError, match=said):
        ds.reorganize(["inf"], bin_size=1e-8)
    with quarry.open(other) as ds, pytest.raises(ShapeMismatchError, match="one shape"):
        ds.reorganize(["a", "b"])
    with pytest.raises(ReorgError, match="no reorganised copy"):
        open_copy(other)


@pytest.mark.parametrize(
    ("variables", "options", "message"),
    [
        ("energy,x", {}, "a list of names, e.g. ['energy', 'x'], not the string 'energy,x'"),
        (None, {}, "name the variables to reorganise"),
        (["energy", 3], {}, "variable names are strings, not 3"),
        (["energy"], {"bin_size": "0.1"}, "bin size: expected a number, got '0.1'"),
        (["energy"], {"bins": True}, "number of bins: expected a number, got True"),
        (["energy"], {"part_rows": 0}, "parts must hold at least one row, got 0"),
    ],
)
def test_the_python_api_refuses_arguments_of_the_wrong_kind(particles, variables, options, message):
    """A string for the list of names is not split into letters, and numbers
    must be numbers: each a Quarry error saying what to give, not a TypeError."""
    with quarry.open(particles) as ds, pytest.raises(quarry.QuarryError) as err:
        ds.reorganize(variables, path="Step#0", **options)
    assert message in str(err.value)
    with quarry.open(particles) as ds, pytest.raises(quarry.QuarryError, match="not the string"):
        ds.build_index("energy")


def test_bin_sizes_may_be_an_array(particles):
    with quarry.open(particles) as ds:
        manifest = ds.reorganize(("energy", "x"), bin_size=np.array([0.5, 10.0]), path="Step#0")
    assert manifest.binning is not None and manifest.binning.sizes == (0.5, 10.0)
    assert [a.size for a in manifest.members[0].axes] == [0.5, 10.0]


def test_a_copy_goes_where_the_index_would(particles, tmp_path, monkeypatch):
    """README: --index DIR and QUARRY_INDEX_PATH place the copy as they place the index."""
    elsewhere = tmp_path / "copies"
    elsewhere.mkdir()
    with quarry.open(particles, index=str(elsewhere)) as ds:
        ds.reorganize(["x"], path="Step#0")
    assert os.path.exists(elsewhere / "p.h5.qmd")
    assert not os.path.exists(particles + ".qmd")
    assert open_copy(particles, str(elsewhere)).members[0].variables == ["/Step#0/x"]
    monkeypatch.setenv("QUARRY_INDEX_PATH", str(elsewhere))
    assert find_copy(particles) == str(elsewhere / "p.h5.qmd")


def test_a_changed_source_is_refused(particles):
    with quarry.open(particles) as ds:
        ds.reorganize(["x"], path="Step#0")
    with h5py.File(particles, "r+") as f:
        f["Step#0/x"][3] = -1.0
    with pytest.raises(StaleCopyError, match=r"quarry reorg .* --vars x --bins 16 --path Step#0$"):
        open_copy(particles)


def test_a_copy_of_one_step_is_that_steps_member(particles):
    """`--path Step#1` reorganises that step alone, and the copy knows it as
    that step's member (it was recorded as a file without steps)."""
    with quarry.open(particles) as ds:
        manifest = ds.reorganize(["energy", "x"], path="Step#1")
    assert [(m.step, m.group) for m in manifest.members] == [(1, "/Step#1")]
    copy = open_copy(particles)
    assert copy.member("/Step#1").variables == ["/Step#1/energy", "/Step#1/x"]
    assert copy.member("Step#1").variables == ["/Step#1/energy", "/Step#1/x"]
    with pytest.raises(ReorgError, match=r"has no member /Step#0 \(it has /Step#1\)"):
        copy.member("/Step#0")
    with pytest.raises(ReorgError, match=r"has no member / \(it has /Step#1\)"):
        copy.member("/")


def test_a_file_without_steps_is_the_member_of_the_root(tmp_path):
    path = str(tmp_path / "flat.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(10.0)
    with quarry.open(path) as ds:
        ds.reorganize(["x"], bins=2)
    copy = open_copy(path)
    assert copy.member().variables == copy.member("/").variables == ["/x"]
    with pytest.raises(ReorgError, match=r"has no member Step#0 \(it has / \(the whole file\)\)"):
        copy.member("Step#0")


@pytest.mark.parametrize(
    "how",
    [
        ["--bin-size", "0.25,10"],
        ["--bins", "4,8", "--path", "Step#1"],
        ["--bins", "5", "--index", "OUT"],
        ["--bin-size", "0.5", "--path", "Step#0", "--index", "OUT/p.qidx"],
    ],
)
def test_a_stale_copy_is_built_again_as_it_was_by_the_command_it_names(particles, tmp_path, how):
    """README: the stale copy's message names the command that builds it again with
    the same bins, the same step (`--path`) and in the same place (`--index`),
    and that command makes a fresh copy with the same members and axes' bins."""
    out = tmp_path / "out"
    out.mkdir()
    how = [str(out) + a[3:] if a.startswith("OUT") else a for a in how]
    quarry_cli("reorg", particles, "--vars", "energy,x", *how)
    index = how[how.index("--index") + 1] if "--index" in how else None
    before = open_copy(particles, index).manifest
    with h5py.File(particles, "r+") as f:
        f["Step#0/x"][3] = -1.0
        f["Step#1/x"][3] = -1.0
    with pytest.raises(StaleCopyError) as err:
        open_copy(particles, index)
    command = str(err.value).rsplit("build the copy again with: ", 1)[1]
    assert command.split()[:2] == ["quarry", "reorg"]
    assert sorted(command.split()[2:]) == sorted([particles, "--vars", "energy,x", *how])
    quarry_cli(*command.split()[1:])
    after = open_copy(particles, index).manifest
    kept = (
        "size" if "--bin-size" in how else "count"
    )  # what was asked stays; the other follows the data
    assert [(m.group, [getattr(a, kept) for a in m.axes]) for m in after.members] == [
        (m.group, [getattr(a, kept) for a in m.axes]) for m in before.members
    ]
    assert after.binning == before.binning and after.context == before.context


def test_the_commands_a_stale_copy_and_index_name_survive_the_shell(tmp_path):
    """Paths with spaces and a glob --path are quoted in the printed command,
    which the shell then splits back into the same words."""
    folder = tmp_path / "my dir"
    folder.mkdir()
    particles = particles_file(str(tmp_path / "my run.h5"), 3000)
    quarry_cli("index", particles, "--index", str(folder))
    quarry_cli("reorg", particles, "--vars", "x", "--path", "Step#*", "--index", str(folder))
    with h5py.File(particles, "r+") as f:
        f["Step#0/x"][3] = -1.0
    with pytest.raises(StaleCopyError) as err:
        open_copy(particles, str(folder))
    command = str(err.value).rsplit("build the copy again with: ", 1)[1]
    assert "'Step#*'" in command and f"'{particles}'" in command
    assert shlex.split(command) == [
        "quarry", "reorg", particles, "--vars", "x", "--bins", "16", "--path", "Step#*",
        "--index", str(folder),
    ]  # fmt: skip
    quarry_cli(*shlex.split(command)[1:])
    assert [m.group for m in open_copy(particles, str(folder)).manifest.members] == [
        "/Step#0",
        "/Step#1",
    ]
    with quarry.open(particles, index=str(folder)) as ds, pytest.raises(quarry.QuarryError) as err:
        ds.query("x > 1", path="Step#0").count()
    command = str(err.value).rsplit("rebuild the index with: ", 1)[1]
    assert shlex.split(command)[1:] == ["index", particles, "--index", ds.index_path]


def test_a_change_hidden_from_the_stat_is_found_by_the_crcs(particles):
    with quarry.open(particles) as ds:
        ds.reorganize(["x"], path="Step#0")
    st = os.stat(particles)
    with h5py.File(particles, "r+") as f:
        f["Step#0/x"][3] = -1.0
    os.utime(particles, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back; ctime moved
    with pytest.raises(StaleCopyError, match="part"):
        open_copy(particles)


def test_a_touched_source_is_checked_and_kept(particles):
    with quarry.open(particles) as ds:
        ds.reorganize(["x"], path="Step#0")
    st = os.stat(particles)
    os.utime(particles, ns=(st.st_atime_ns, st.st_mtime_ns))  # only ctime moves
    assert open_copy(particles).members[0].variables == ["/Step#0/x"]


def test_a_damaged_copy_is_refused(particles):
    with quarry.open(particles) as ds:
        ds.reorganize(["energy", "x"], path="Step#0")
    copy = particles + ".qmd"
    with h5py.File(copy, "r+") as f:
        starts = f["m0/table_starts"]
        starts[1] = starts[1] + 1
    opened = open_copy(particles)  # the manifest alone: tables are read when first used
    with pytest.raises(CorruptCopyError) as err:
        _ = opened.members
    # Named by the step it holds (not the copy's inner group m0), with the
    # command that builds it again.
    assert str(err.value) == (
        f"the reorganised copy {copy} is damaged: the offset table of /Step#0 is damaged "
        f"(its CRC-32 differs); build it again with: quarry reorg {particles} --vars energy,x "
        "--bins 16 --path Step#0"
    )
    with open(copy, "r+b") as f:  # the manifest's bytes
        head = f.read(512)
        offset = int(head.split()[1])
        f.seek(offset + 5)
        byte = f.read(1)
        f.seek(offset + 5)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(CorruptCopyError, match=r"manifest of .* is damaged") as err:
        open_copy(particles)
    # Its variables cannot be read: the command names the rest.
    assert str(err.value).endswith(
        f"build it again with: quarry reorg {particles} --vars VARIABLES "
        "(the variables it held cannot be read from it)"
    )
    with open(copy, "r+b") as f:  # where it lies
        f.write(b"quarry-mdbin where?\n")
    with pytest.raises(CorruptCopyError, match="no manifest"):
        open_copy(particles)
    with open(copy, "wb") as f:
        f.write(b"not a copy")
    with pytest.raises(CorruptCopyError, match="cannot be read"):
        open_copy(particles)


def test_a_copy_whose_manifest_misplaces_its_arrays_is_refused(particles):
    """Opening reads the offset tables where the manifest says they lie
    (``at``), not through HDF5: a manifest without them (a copy of the
    previous version), or pointing past the file's end, is refused."""
    with quarry.open(particles) as ds:
        ds.reorganize(["energy", "x"], path="Step#0")
    copy = particles + ".qmd"
    with h5py.File(copy, "r") as f:  # an HDF5 file, its manifest a dataset
        doc = json.loads(f["quarry_reorg"][()].tobytes())
    at = doc["members"][0]["at"]
    with h5py.File(copy, "r") as f:  # the manifest says where HDF5 put them
        group = f["m0"]
        assert at["table_bins"] == group["table_bins"].id.get_offset()
        assert at["columns"][-1] == group["rows"].id.get_offset()
        # README: the CRC-32 of every 4,096 rows of each column (counted from
        # each part's first), then of the rows.
        parts = doc["members"][0]["parts"]
        assert doc["check_rows"] == 4096
        assert group["block_crc32"].shape == (3, sum(-(-p["rows"] // 4096) for p in parts))
        first = group["columns/1"][: min(4096, parts[0]["rows"])]
        assert group["block_crc32"][1, 0] == zlib.crc32(first.tobytes())
    past = 4 * os.path.getsize(copy)  # past the end, however the manifest's rewrite grows it
    for change, message in [
        ({"version": 1}, "version 1; this Quarry reads version 2"),
        ({"at": None}, "does not say where the columns of /Step#0 lie; build it again"),
        ({"at": {**at, "table_starts": past}}, "offset table of /Step#0 is cut short; build it"),
        ({"at": {**at, "columns": [past, *at["columns"][1:]]}}, "columns of /Step#0 are cut short"),
    ]:
        changed = json.loads(json.dumps(doc))
        if "version" in change:
            changed.update(change)
        else:
            changed["members"][0].update(change)
        store_manifest(copy, json.dumps(changed))
        with pytest.raises(CorruptCopyError, match=message):
            _ = open_copy(particles).members


def test_verify_finds_damaged_values(particles):
    with quarry.open(particles) as ds:
        ds.reorganize(["energy", "x"], path="Step#0")
    assert check_copy(particles, particles + ".qmd").ok
    with h5py.File(particles + ".qmd", "r+") as f:
        f["m0/columns/1"][10] = 12345.0
    found = check_copy(particles, particles + ".qmd")
    assert found.damaged == ["/Step#0/x, part 0 (rows 0 to 4999)"]
    assert found.changed == []


def test_the_published_copy_is_not_left_locked(particles):
    """The copy's writer locks its temporary until it is published; a part's
    write-back thread, still running after that, once shared the lock through
    a duplicated descriptor, and h5py (which locks by default) was refused the
    copy. Busy processes on every core make a late write-back thread likely
    (about 2 builds in 100 before the fix); the lock must never be held."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        for _ in range(60):
            with quarry.open(particles) as ds:
                ds.reorganize(["energy", "x"], path="Step#0")
            fd = os.open(particles + ".qmd", os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if still held
            finally:
                os.close(fd)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_a_failed_build_leaves_the_old_copy(particles, monkeypatch):
    with quarry.open(particles) as ds:
        ds.reorganize(["x"], path="Step#0")
    before = digest(particles + ".qmd")

    # The core writes the parts to the descriptor it is given: a full disk's.
    full = os.open("/dev/full", os.O_WRONLY)
    monkeypatch.setattr("quarry.reorg.layout.CopyWriter.fileno", lambda self: full)
    try:
        with quarry.open(particles) as ds, pytest.raises(OSError, match="No space"):
            ds.reorganize(["energy", "x"], path="Step#0")
    finally:
        os.close(full)
    assert digest(particles + ".qmd") == before
    assert [n for n in os.listdir(os.path.dirname(particles)) if n.endswith(".tmp")] == []


def test_integer_variables_get_whole_widths(tmp_path):
    """README: integer variables get whole widths (edges on multiples of them)."""
    path = str(tmp_path / "i.h5")
    with h5py.File(path, "w") as f:
        f["n"] = np.arange(-7, 20, dtype="i2")
    with quarry.open(path) as ds:
        manifest = ds.reorganize(["n"], bin_size=2.5)
    (axis,) = manifest.members[0].axes
    assert (axis.size, axis.origin, axis.count) == (3, -9, 10)
    member = open_copy(path).members[0]
    box = {"/n": Interval("i64", -3, True, 5, True)}
    assert member.runs(box).boundary_rows == 0
    assert member.select(box).ids.tolist() == list(range(4, 13))


def test_info_states_of_a_copy(particles):
    """README: quarry info's state of a copy: fresh, stale, damaged, with an
    error saying why; where only the file's times moved, the CRCs tell."""
    from quarry.reorg.read import describe_copy

    with quarry.open(particles) as ds:
        ds.reorganize(["x"], path="Step#0")
    st = os.stat(particles)
    os.utime(particles, ns=(st.st_atime_ns, st.st_mtime_ns))  # ctime moves: CRCs to check
    assert describe_copy(particles)["state"] == "fresh"
    with h5py.File(particles, "r+") as f:
        f["Step#0/x"][3] += 1.0
    os.utime(particles, ns=(st.st_atime_ns, st.st_mtime_ns))  # size and mtime as they were
    stale = describe_copy(particles)
    assert stale["state"] == "stale"
    assert "/Step#0/x part(s) 0 changed" in stale["error"]
    assert "quarry reorg" in stale["error"]
    with pytest.raises(StaleCopyError):
        open_copy(particles)  # as a query finds it
    os.unlink(particles + ".qmd")
    with quarry.open(particles) as ds:
        ds.reorganize(["x"], path="Step#0")
    with open(particles + ".qmd", "r+b") as f:
        f.write(b"garbage!")
    damaged = describe_copy(particles)
    assert damaged["state"] == "damaged"
    assert f"build it again with: quarry reorg {particles} --vars VARIABLES" in damaged["error"]
    os.unlink(particles + ".qmd")
    with quarry.open(particles) as ds:
        ds.reorganize(["x"], path="Step#0")
    with h5py.File(particles + ".qmd", "r+") as f:  # a member's table: its variables are known
        f["m0/table_starts"][1] += 1
    assert describe_copy(particles)["error"].endswith(
        f"build it again with: quarry reorg {particles} --vars x --bins 16 --path Step#0"
    )
    with h5py.File(particles, "r+") as f:
        f["Step#1/x"][0] = 1.0
    os.unlink(particles + ".qmd")
    with quarry.open(particles) as ds:
        ds.reorganize(["x"], path="Step#0")
    with h5py.File(particles, "r+") as f:
        f.attrs["note"] = "a new attribute"
    assert describe_copy(particles)["state"] == "stale"


@pytest.mark.parametrize(("bins", "key"), [([300, 300], "uint32"), ([3000, 3000, 600], "int64")])
def test_wide_mdbin_numbers_sort_the_same(tmp_path, bins, key):
    """MDBin numbers past 16 bits (two radix passes) and past 32 (a plain
    stable sort) cluster rows as NumPy's stable argsort does."""
    path = str(tmp_path / "w.h5")
    rng = np.random.default_rng(4)
    names = "abc"[: len(bins)]
    with h5py.File(path, "w") as f:
        for n in names:
            f[n] = rng.normal(size=5003)
    with quarry.open(path) as ds:
        manifest = ds.reorganize(list(names), bins=bins, part_rows=2000)
    (member,) = manifest.members
    total = np.prod([a.slots for a in member.axes])
    assert (total > 2**32) == (key == "int64") and total > 2**16
    copy = open_copy(path).members[0]
    with h5py.File(path) as f:
        columns = [f[n][()] for n in names]
    for part in member.parts:
        rows = slice(part.first, part.first + part.rows)
        number = np.zeros(part.rows, np.int64)
        for axis, values in zip(member.axes, columns, strict=True):
            number = number * axis.slots + axis.assign(values[rows])
        expected = np.argsort(number, kind="stable") + part.first
        np.testing.assert_array_equal(np.asarray(copy.column("rows"))[rows], expected)
    box = {"/a": f64(-0.5, 0.7), "/b": f64(0.0, np.inf)}
    a, b = columns[0], columns[1]
    hits = np.flatnonzero((a >= -0.5) & (a < 0.7) & (b >= 0))
    np.testing.assert_array_equal(copy.select(box).ids, hits)


def _runs_by_decoding(member, box):
    """A box's runs found the plain way: every table entry's state from its
    MDBin number decoded axis by axis, consecutive entries of one part and
    state merged."""
    states = member._states(box)
    bins = member._layout.bins.astype(np.int64)
    state = np.full(len(bins), 2, np.uint8)
    for axis, stride, axis_state in zip(member.entry.axes, member._strides, states, strict=True):
        np.minimum(state, axis_state[(bins // stride) % axis.slots], out=state)
    found = {1: [], 2: []}
    for p, part in enumerate(member.entry.parts):
        first, count = part.table
        ends = [*member._layout.starts[first + 1 : first + count].tolist(), part.rows]
        for e in range(first, first + count):
            s = int(state[e])
            if not s:
                continue
            start, end = int(member._layout.starts[e]), ends[e - first]
            runs = found[s]
            if runs and runs[-1][3] == e and runs[-1][0] == p:
                runs[-1][2] = end - runs[-1][1]
                runs[-1][3] = e + 1
            else:
                runs.append([p, start, end - start, e + 1])
    return [np.array([r[:3] for r in found[s]], np.int64).reshape(-1, 3) for s in (2, 1)]


def test_boxes_narrow_and_wide_find_their_runs(tmp_path):
    """Boxes of every width, over several parts: the runs the core's descent
    through each part's table finds are those of every entry decoded, and the
    answer is NumPy's."""
    path = str(tmp_path / "n.h5")
    rng = np.random.default_rng(9)
    columns = {"a": rng.normal(size=30_011), "b": rng.uniform(-5, 5, 30_011)}
    columns["c"] = rng.integers(-40, 40, 30_011).astype("i8")
    columns["a"][rng.choice(30_011, 300)] = np.nan
    with h5py.File(path, "w") as f:
        for name, values in columns.items():
            f[name] = values
    with quarry.open(path) as ds:
        ds.reorganize(list(columns), bins=[20, 20, 16], part_rows=7000)
    member = open_copy(path).members[0]
    assert len(member.entry.parts) == 5
    for _ in range(60):
        lo_a, lo_b = rng.uniform(-3, 3), rng.uniform(-6, 6)
        lo_c = int(rng.integers(-45, 45))
        box = {
            "/a": f64(lo_a, lo_a + rng.choice([0.05, 0.5, 5.0])),
            "/b": f64(lo_b, lo_b + rng.choice([0.1, 1.0, 20.0])),
            "/c": Interval("i64", lo_c, True, lo_c + int(rng.integers(0, 90)), True),
        }
        for name in rng.choice(list(box), int(rng.integers(0, 3)), replace=False):
            del box[name]
        runs = member.runs(box)
        whole, boundary = _runs_by_decoding(member, box)
        np.testing.assert_array_equal(runs.whole, whole)
        np.testing.assert_array_equal(runs.boundary, boundary)
        a, b, c = columns["a"], columns["b"], columns["c"]
        expected = np.ones(len(a), bool)
        for name, values in (("/a", a), ("/b", b), ("/c", c)):
            if name in box:
                expected &= box[name].mask(values)
        np.testing.assert_array_equal(member.select(box).ids, np.flatnonzero(expected))


def test_a_later_build_removes_what_a_killed_one_left(particles):
    """A killed build leaves its temporary; the next build of the copy removes
    it (its lock is free), as a later index build does."""
    left = os.path.join(os.path.dirname(particles), ".p.h5.qmd.k3x9a0qz.tmp")
    with open(left, "wb") as f:
        f.write(b"\x89HDF\r\n\x1a\n")
    with quarry.open(particles) as ds:
        ds.reorganize(["x"], path="Step#0")
    assert not os.path.exists(left)


@pytest.mark.parametrize("again", ["<i4", "<f4"])
def test_a_raw_file_described_again_makes_its_copy_stale(tmp_path, again):
    """README: a raw file described again (another dtype, byte order or fill
    value) reads other values, and the issue: a stale copy is detected like a
    stale index. The file's stat moves not at all, so only the description
    tells; the copy must be refused, never answer for the old values."""
    from quarry.formats.raw import RawLayout, register
    from quarry.reorg.read import describe_copy

    path = str(tmp_path / "y.bin")
    values = np.random.default_rng(3).integers(0, 300, 3001).astype(">i4")
    values.tofile(path)
    register(path, RawLayout("y", ">i4", (3001,)))
    with quarry.open(path) as ds:
        ds.reorganize(["y"], bins=5)
        assert ds.query("40 < y < 100").count() == np.count_nonzero((values > 40) & (values < 100))
    assert describe_copy(path)["state"] == "fresh"  # just written: the CRCs tell
    register(path, RawLayout("y", again, (3001,)))
    assert describe_copy(path)["state"] == "stale"
    with pytest.raises(StaleCopyError, match=r"description of .* has changed"):
        open_copy(path)
    with quarry.open(path) as ds, pytest.raises(StaleCopyError):
        ds.query("40 < y < 100").count()


def _damage_boundary_rows(copy: str, member: str, column: str, lo: float, hi: float, change):
    """Overwrite, in place, the copy's ``column`` where its values lie in
    ``(lo, hi)`` (so the rows a query of that range reads) with ``change(values)``."""
    with h5py.File(copy, "r+") as f:
        x = f[f"{member}/columns/1"][()]
        inside = np.flatnonzero((x > lo) & (x < hi))
        target = f[f"{member}/{column}"]
        values = target[()]
        values[inside[:5]] = change(values[inside[:5]])
        target[...] = values


def test_damaged_row_numbers_in_a_copy_are_an_error_not_a_traceback(more_particles):
    """The issue: a damaged copy is detected like a damaged index. Row numbers
    damaged in the copy (two hits claiming one row, or a row past the table)
    ran into the core's `ValueError: row ids must be strictly ascending`
    and a traceback; they are a CorruptCopyError naming the copy."""
    with quarry.open(more_particles) as ds:
        ds.reorganize(["energy", "x"], bin_size=[0.1, 10.0], path="Step#0")
    copy = more_particles + ".qmd"
    for change in (lambda r: np.full_like(r, r[0]), lambda r: r + 10**6):
        _damage_boundary_rows(copy, "m0", "rows", 40.0, 50.0, change)
        with quarry.open(more_particles) as ds, pytest.raises(CorruptCopyError, match="damaged"):
            ds.query("40 < x < 50", path="Step#0").ids()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "quarry.cli.main",
                "query",
                more_particles,
                "40 < x < 50",
                "--ids",
            ],
            capture_output=True,
            text=True,
        )
        assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
        assert "damaged" in run.stderr.splitlines()[-1]


def test_damaged_values_in_a_copy_never_give_a_wrong_answer(more_particles):
    """The issue: a damaged copy is detected like a damaged index (whose
    bitmaps' checksums mean it is never parsed into a wrong answer)."""
    with quarry.open(more_particles) as ds:
        ds.reorganize(["energy", "x"], bin_size=[0.1, 10.0], path="Step#0")
        expected = ds.query("40 < x < 50", path="Step#0").count()
    _damage_boundary_rows(more_particles + ".qmd", "m0", "columns/1", 40.0, 50.0, lambda v: v + 500)
    with quarry.open(more_particles) as ds:
        sel = ds.query("40 < x < 50", path="Step#0")
        try:
            count = sel.count()
        except CorruptCopyError:
            return
    assert count == expected
    assert [a.path for a in sel.access()] == ["mdbin"]  # the copy was read, not passed by


@pytest.mark.parametrize("read_before", [True, False])
def test_a_copy_rebuilt_by_another_process_leaves_an_open_dataset_answering(
    particles, monkeypatch, read_before
):
    """A long-lived process (the service) keeps a file open while another
    process rebuilds its copy with other variables and bins: the open
    Dataset goes on answering from the copy it opened (held open: its
    tables and columns as its manifest says), whether it had read the
    member's tables before the rebuild or not; a fresh open takes the new one."""
    from quarry.query.stats import Estimate

    monkeypatch.setattr(Estimate, "choice", property(lambda e: "mdbin" if e.mdbin else "index"))
    query = "0.3 < energy < 0.9 && 20 < x < 70"
    with h5py.File(particles) as f:
        e, x = f["Step#0/energy"][()], f["Step#0/x"][()]
    want = np.flatnonzero((e > 0.3) & (e < 0.9) & (x > 20) & (x < 70))
    with quarry.open(particles) as ds:
        ds.reorganize(["energy", "x"], bins=8, path="Step#0")
    with quarry.open(particles) as ds:
        # Not a box (an OR): the copy is opened, its tables left unread.
        first = ds.query(query if read_before else "energy > 0.3 || x < 5", path="Step#0")
        assert first.count() > 0
        rebuild = ["reorg", particles, "--vars", "x,energy", "--bins", "3", "--path", "Step#0"]
        subprocess.run(
            [sys.executable, "-m", "quarry.cli.main", *rebuild], check=True, capture_output=True
        )
        sel = ds.query(query, path="Step#0")
        np.testing.assert_array_equal(sel.ids(), want)
        np.testing.assert_array_equal(sel.values("/Step#0/x"), x[want])
        assert [a.path for a in sel.access()] == ["mdbin"]
    with quarry.open(particles) as ds:
        assert ds.query(query, path="Step#0").count() == len(want)
        assert open_copy(particles).members[0].variables == ["/Step#0/x", "/Step#0/energy"]


def test_the_copys_columns_are_reserved_on_disk_before_its_parts_are_written(tmp_path):
    """The core reserves a file's blocks without changing its size or
    contents (a hole still reads as zeros)."""
    path = tmp_path / "sparse.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, 1 << 20)
        os.pwrite(fd, b"abc", 1000)
        if not _core.reserve_space(fd, 1 << 20):
            pytest.skip("this file system reserves no blocks")
        assert os.fstat(fd).st_blocks * 512 >= 1 << 20
        assert os.fstat(fd).st_size == 1 << 20
        data = os.pread(fd, 1 << 20, 0)
        assert data[1000:1003] == b"abc" and data.count(0) == (1 << 20) - 3
    finally:
        os.close(fd)


def test_a_disk_too_full_for_the_copy_is_refused_before_any_part_is_written(particles, monkeypatch):
    """Reserving the copy's blocks fails at once on a full disk: a clear
    error naming the copy and its size, and no temporary left behind."""

    def full(fd: int, length: int) -> bool:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_core, "reserve_space", full)
    with quarry.open(particles) as ds, pytest.raises(ReorgError) as err:
        ds.reorganize(["energy", "x"])
    assert str(err.value).startswith(
        f"cannot write the reorganised copy {particles}.qmd: no space left on device (its "
        "columns take "
    )
    assert str(err.value).endswith("put the copy elsewhere with --index DIR")
    assert sorted(os.listdir(os.path.dirname(particles))) == ["p.h5"]


def test_an_open_copy_is_freed_and_its_file_closed_without_the_cycle_collector(particles):
    """Dropping the last reference closes the copy's file at once: nothing
    the copy holds (its rebuild advice included) refers back to it."""
    import gc
    import weakref

    with quarry.open(particles) as ds:
        ds.reorganize(["energy", "x"])
    collecting = gc.isenabled()
    gc.disable()
    try:
        copy = open_copy(particles)
        dropped = weakref.ref(copy)
        del copy
        assert dropped() is None
    finally:
        if collecting:
            gc.enable()
