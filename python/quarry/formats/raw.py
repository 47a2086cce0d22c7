"""Raw binary: a simulation's own dump, described once and then queried like
any variable (the SDS-MD two-level model: an array view over a byte layout).

``quarry register FILE --dtype <f4 --shape 128,128,128`` writes a small JSON
sidecar, ``FILE.qraw.json``, beside the data or in the index directory; the
file's format detection finds it there.
"""

from __future__ import annotations

import json
import math
import os
from typing import TYPE_CHECKING, Any

from quarry.errors import SourceError, UnsupportedVariableError
from quarry.formats import cf
from quarry.formats.base import VariableInfo, read_flat, variable_problem
from quarry.records import as_dict, record

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np
    import numpy.typing as npt

SIDECAR_SUFFIX = ".qraw.json"


@record
class RawLayout:
    """How an array lies in a file: dtype (with byte order), shape, C or
    Fortran order, the byte offset of its first element, and an optional
    value that marks missing data."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    order: str = "C"
    offset: int = 0
    fill_value: float | int | None = None

    def check(self, path: str) -> None:
        """Raise if the file cannot hold this layout."""
        import numpy as np

        dt = np.dtype(self.dtype)
        problem = variable_problem(self.shape, dt)
        if problem is not None:
            raise UnsupportedVariableError(f"cannot register {path}: {problem}")
        if self.order not in ("C", "F"):
            raise UnsupportedVariableError(f"order must be C or F, got {self.order!r}")
        if self.offset < 0 or any(n < 0 for n in self.shape):
            raise SourceError(
                f"cannot register {path}: --offset and --shape count bytes and values from "
                f"the file's start, so they are not negative (got offset {self.offset}, "
                f"shape {self.shape})"
            )
        # Python's integers: a product past 2**63 is a size no file has, not an overflow.
        need = self.offset + math.prod(self.shape) * dt.itemsize
        have = os.path.getsize(path)
        if need > have:
            raise SourceError(
                f"{path} holds {have} bytes but {self.dtype} {self.shape} at offset "
                f"{self.offset} needs {need}; check --dtype, --shape and --offset"
            )


def sidecar_path(data_path: str, directory: str | None = None) -> str:
    """Where the description of ``data_path`` lives.

    Examples
    --------
    >>> sidecar_path("/data/bx.bin")
    '/data/bx.bin.qraw.json'
    >>> sidecar_path("/data/bx.bin", "/scratch/idx")
    '/scratch/idx/bx.bin.qraw.json'
    """
    folder = directory if directory is not None else os.path.dirname(os.path.abspath(data_path))
    return os.path.join(folder, os.path.basename(data_path) + SIDECAR_SUFFIX)


def register(data_path: str, layout: RawLayout, directory: str | None = None) -> str:
    """Describe a raw binary file so it can be indexed and queried; returns the sidecar path."""
    if not os.path.isfile(data_path):
        raise SourceError(f"no such file: {data_path}")
    layout.check(data_path)
    target = sidecar_path(data_path, directory)
    tmp = target + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"format": "quarry-raw", "version": 1, **as_dict(layout)}, f, indent=1)
    os.replace(tmp, target)
    return target


def read_sidecar(path: str) -> RawLayout:
    try:
        with open(path) as f:
            doc = json.load(f)
        return RawLayout(
            name=str(doc["name"]),
            dtype=str(doc["dtype"]),
            shape=tuple(int(s) for s in doc["shape"]),
            order=str(doc.get("order", "C")),
            offset=int(doc.get("offset", 0)),
            fill_value=doc.get("fill_value"),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SourceError(f"cannot read the raw-binary description {path}: {exc}") from None


class RawDriver:
    """One array in a raw binary file, read through a memory map.

    Examples
    --------
    >>> import numpy as np
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "bx.bin")
    >>> np.arange(6, dtype=">f4").tofile(path)
    >>> drv = RawDriver(path, RawLayout("bx", ">f4", (2, 3), order="F"))
    >>> drv.read("/bx", 0, 6)  # row-major over the logical (2, 3) array
    array([0., 2., 4., 1., 3., 5.], dtype=float32)
    """

    #: A read is a copy out of a read-only memory map: no library, no state.
    concurrent_reads = True

    def __init__(self, path: str, layout: RawLayout) -> None:
        import numpy as np

        layout.check(path)
        self.path = path
        self.step_context: str | None = None
        self.layout = layout
        dtype = np.dtype(layout.dtype)
        self._array = np.memmap(
            path,
            dtype=dtype,
            mode="r",
            offset=layout.offset,
            shape=layout.shape,
            order="F" if layout.order == "F" else "C",
        ).view(np.ndarray)
        self._attrs: dict[str, Any] = (
            {} if layout.fill_value is None else {"_FillValue": layout.fill_value}
        )
        self._info = VariableInfo(
            path="/" + layout.name,
            shape=layout.shape,
            dtype=cf.logical_dtype(dtype.newbyteorder("="), self._attrs),
            decoding=cf.describe(self._attrs),
        )

    def variables(self) -> list[VariableInfo]:
        return [self._info]

    def _check(self, var: str) -> None:
        if var != self._info.path:
            raise KeyError(var)

    def _finish(self, values: npt.NDArray[Any]) -> npt.NDArray[np.generic]:
        import numpy as np

        values = values.astype(values.dtype.newbyteorder("="), copy=False)
        if self._attrs:
            values = cf.decode(values, self._attrs, self._info.path)
        out: npt.NDArray[np.generic] = np.require(values, requirements=["C", "A"])
        return out

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        import numpy as np

        self._check(var)
        if self.layout.order == "C" or len(self.layout.shape) == 1:
            return self._finish(self._array.reshape(-1)[start:stop])
        rows = self._array
        return self._finish(
            read_flat(
                self.layout.shape, start, stop, lambda r0, r1: np.ascontiguousarray(rows[r0:r1])
            )
        )

    def maps(self, var: str) -> bool:
        """Always: a raw file is read from a memory map."""
        return True

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        import numpy as np

        self._check(var)
        if self.layout.order == "C" or len(self.layout.shape) == 1:
            return self._finish(self._array.reshape(-1)[positions])
        # Row-major ids -> offsets in Fortran memory order.
        index = np.unravel_index(positions, self.layout.shape)
        offsets = np.ravel_multi_index(index, self.layout.shape, order="F")
        return self._finish(self._array.ravel(order="K")[offsets])

    def close(self) -> None:
        pass


def _description_of(path: str, sidecar_dirs: tuple[str, ...]) -> str | None:
    """The description of ``path`` that applies: the first found in
    ``sidecar_dirs``, else the one beside it."""
    for folder in (*sidecar_dirs, None):
        description = sidecar_path(path, folder)
        if os.path.exists(description):
            return description
    return None


def described_otherwise(path: str, beside: str, stamp: Mapping[str, Any]) -> bool:
    """Whether ``path``'s raw-binary description (found as beside the
    index or copy ``beside``) is not the one ``stamp`` recorded with
    :func:`description_stamp`: its values now read otherwise.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "d.bin")
    >>> np.zeros(4, "<f4").tofile(path)
    >>> _ = register(path, RawLayout("d", "<f4", (4,)))
    >>> stamp = description_stamp(path, path + ".qidx")
    >>> _ = register(path, RawLayout("d", ">f4", (4,)))
    >>> described_otherwise(path, path + ".qidx", stamp), described_otherwise(path, path, {})
    (True, True)
    """
    return description_stamp(path, beside).get("description_crc32") != stamp.get(
        "description_crc32"
    )


def description_stamp(path: str, index_path: str) -> dict[str, int]:
    """What an index of ``path`` records of the raw-binary description its
    values are read by (found as :class:`RawBackend` finds it, beside the
    index or else beside the file): ``{"description_crc32": CRC}``, the
    CRC-32 of its bytes, so that describing the file again otherwise
    (``quarry register`` with another dtype or fill value, which moves
    nothing in the file's own stat) makes the index stale; ``{}`` for a
    file without one.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "e.bin")
    >>> np.zeros(4, "<f4").tofile(path)
    >>> description_stamp(path, path + ".qidx")
    {}
    >>> _ = register(path, RawLayout("e", "<f4", (4,)))
    >>> first = description_stamp(path, path + ".qidx")
    >>> _ = register(path, RawLayout("e", "<f4", (4,), fill_value=-1.0))
    >>> sorted(first), first == description_stamp(path, path + ".qidx")
    (['description_crc32'], False)
    """
    import zlib

    description = _description_of(path, (os.path.dirname(os.path.abspath(index_path)),))
    if description is None:
        return {}
    try:
        with open(description, "rb") as f:
            return {"description_crc32": zlib.crc32(f.read())}
    except OSError:
        return {}


class RawBackend:
    """Raw binary files that ``quarry register`` described. Asked first: a
    description says what a file is whatever its bytes look like."""

    name = "raw"
    recognised_by = "raw binary (a description written by quarry register)"
    directory = False

    def guess_can_open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> bool:
        return not os.path.isdir(path) and _description_of(path, sidecar_dirs) is not None

    def open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> RawDriver:
        description = _description_of(path, sidecar_dirs)
        if description is None:
            raise SourceError(
                f"{path} has no raw-binary description; describe it first: "
                f"quarry register {path} --dtype <f4 --shape NX,NY,NZ"
            )
        return RawDriver(path, read_sidecar(description))


BACKEND = RawBackend()
