"""A data file's variables as its index records them, so that opening a file
whose index is fresh costs a ``stat``, not a walk of the file.

Finding a file's variables means opening it and walking its tree (HDF5's
``visititems``, NetCDF's groups, a Zarr store's metadata): most of what
opening a member of a 720-step series costs. A build records the listing
(the format, the step context and every variable with its shape, dtype,
chunks, attributes...) in the index's manifest. While the index is fresh
(the file is as it was built from; see :mod:`quarry.index.fresh`) the
listing is the file's, and a :class:`ListedDriver` answers from it, opening
the file only when values are read: a count the index answers alone never
opens it.

Where a variable's values lie whole at one place of the file (an HDF5
dataset stored contiguous and uncompressed), the listing also records its
byte offset and stored dtype (``contiguous``): values are then read through
one memory map of the file, with no HDF5 library opened at all.

A file some of whose dtypes a listing cannot write down exactly (compound
or otherwise structured types, which only unsupported variables have) gets
no listing and is opened as before.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from quarry.formats.base import Driver, VariableInfo, gathers_in_place, native
from quarry.records import field, record

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@record
class Listing:
    """What a build saw of a file: its format (a backend's name), the step
    context its format names, and its variables.

    Examples
    --------
    >>> import numpy as np
    >>> x = VariableInfo("/g/x", (4, 2), np.dtype("<f4"), chunks=(2, 2), attrs={"units": "m"})
    >>> listing = Listing("hdf5", None, (x,))
    >>> again = Listing.from_json(listing.to_json())
    >>> again == listing, again.variables[0].attrs
    (True, {'units': 'm'})
    """

    backend: str
    step_context: str | None
    variables: tuple[VariableInfo, ...]
    contiguous: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    """Variables whose values lie whole at one place of the file: path ->
    (byte offset, stored dtype as NumPy writes it)."""

    @staticmethod
    def of(backend: str, driver: Driver) -> Listing | None:
        """The listing of an open file; None where a dtype would not be
        written down exactly (the file is then opened each time)."""
        import numpy as np

        variables = tuple(driver.variables())
        if any(not _DTYPE_TEXT.fullmatch(v.dtype.str) for v in variables):
            return None
        if any(np.dtype(v.dtype.str) != v.dtype for v in variables):
            return None
        where = getattr(driver, "contiguous", None)
        paths = [v.path for v in variables if v.problem is None]
        contiguous: dict[str, tuple[int, str]] = where(paths) if callable(where) else {}
        return Listing(backend, driver.step_context, variables, contiguous)

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "step_context": self.step_context,
            "variables": [variable_json(v) for v in self.variables],
            **self.after_variables_json(),
        }

    def after_variables_json(self) -> dict[str, Any]:
        """The keys :meth:`to_json` puts after the variables (an index's
        manifest encoder keeps each variable's text and adds these)."""
        if not self.contiguous:
            return {}
        return {"contiguous": {p: list(at) for p, at in self.contiguous.items()}}

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> Listing:
        """The listing ``to_json`` wrote; raises ``KeyError``, ``TypeError``
        or ``ValueError`` on anything else (the manifest reports it)."""
        context = doc["step_context"]
        if not isinstance(doc["backend"], str) or not isinstance(context, str | None):
            raise TypeError("backend and step_context are text")
        contiguous = {}
        for path, (offset, dtype) in doc.get("contiguous", {}).items():
            if not isinstance(offset, int) or offset < 0:
                raise TypeError(f"the offset of {path} is {offset!r}, not a byte offset")
            contiguous[path] = (offset, ListedDtype(dtype).str)
        dtypes: dict[str, ListedDtype] = {}  # one per dtype text, shared by its variables
        variables = tuple(_variable_from_json(v, dtypes) for v in doc["variables"])
        return Listing(doc["backend"], context, variables, contiguous)


def variable_json(v: VariableInfo) -> dict[str, Any]:
    """``v`` as a listing's JSON holds it."""
    return {
        "path": v.path,
        "shape": list(v.shape),
        "dtype": v.dtype.str,
        "chunks": None if v.chunks is None else list(v.chunks),
        "compression": v.compression,
        "problem": v.problem,
        "decoding": v.decoding,
        "attrs": v.attrs,
        "dims": None if v.dims is None else list(v.dims),
    }


def _variable_from_json(doc: Mapping[str, Any], dtypes: dict[str, ListedDtype]) -> VariableInfo:
    def ints(values: Sequence[Any]) -> tuple[int, ...]:
        if not all(isinstance(n, int) for n in values):
            raise TypeError(f"{values!r} are not whole numbers")
        return tuple(values)

    chunks, dims, attrs, text = doc["chunks"], doc["dims"], doc["attrs"], doc["dtype"]
    if not isinstance(doc["path"], str) or not isinstance(attrs, dict):
        raise TypeError("a listed variable has a path and attributes")
    dtype = dtypes.get(text) if isinstance(text, str) else None
    if dtype is None:
        dtype = dtypes[text] = ListedDtype(text)
    return VariableInfo(
        doc["path"],
        ints(doc["shape"]),
        # A stand-in NumPy takes as the dtype itself: see ListedDtype.
        cast("np.dtype[np.generic]", dtype),
        chunks=None if chunks is None else ints(chunks),
        compression=doc["compression"],
        problem=doc["problem"],
        decoding=doc["decoding"],
        attrs=attrs,
        dims=None if dims is None else tuple(str(d) for d in dims),
    )


#: NumPy's text of a dtype (``numpy.dtype.str``): byte order, kind, size,
#: and a unit for dates and times (``<M8[ns]``); or ``|O``, the objects
#: variable-length strings read as (an unsupported variable, listed as such).
_DTYPE_TEXT = re.compile(r"[<>|=][a-zA-Z]\d+(\[\w+\])?|\|O")


class ListedDtype:
    """A listed variable's dtype, known by NumPy's text of it (``<f8``),
    standing in for that :class:`numpy.dtype` so that a query the index
    answers alone needs no NumPy (see :mod:`quarry`): its ``str`` and ``kind``
    are read from the text, and everything else (``itemsize``, ``type``,
    comparisons, and NumPy taking it as a dtype, by its ``dtype``) is the
    NumPy dtype's, made when first asked for.

    Examples
    --------
    >>> listed = ListedDtype(">f4")
    >>> listed.kind, listed.str
    ('f', '>f4')
    >>> import numpy as np
    >>> listed == np.dtype(">f4"), listed.itemsize, np.zeros(2, listed).dtype
    (True, 4, dtype('>f4'))
    >>> ListedDtype("float")
    Traceback (most recent call last):
    ...
    ValueError: 'float' is not a dtype as NumPy writes one (e.g. '<f8')
    """

    __slots__ = ("_numpy", "kind", "str")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not _DTYPE_TEXT.fullmatch(text):
            raise ValueError(f"{text!r} is not a dtype as NumPy writes one (e.g. '<f8')")
        self.str = text
        self.kind = text[1]
        self._numpy: np.dtype[np.generic] | None = None

    @property
    def dtype(self) -> np.dtype[np.generic]:
        """The NumPy dtype itself (what NumPy reads of any dtype-like object)."""
        if self._numpy is None:
            import numpy as np

            self._numpy = np.dtype(self.str)
        return self._numpy

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in self.__slots__:  # not yet set (copying)
            raise AttributeError(name)
        return getattr(self.dtype, name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ListedDtype):
            return self.str == other.str
        return bool(self.dtype == other)

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __reduce__(self) -> tuple[type[ListedDtype], tuple[str]]:
        return ListedDtype, (self.str,)

    def __str__(self) -> str:
        return str(self.dtype)

    def __repr__(self) -> str:
        return repr(self.dtype)


class ListedDriver:
    """A driver answering what a file holds from its :class:`Listing`, and
    opening the file (with ``open_file``) only when values are read."""

    def __init__(self, path: str, listing: Listing, open_file: Callable[[], Driver]) -> None:
        self.path = path
        self.step_context = listing.step_context
        self._variables = list(listing.variables)
        self._open_file = open_file
        self._driver: Driver | None = None
        self._opening = threading.Lock()  # reader threads may ask at once
        self._contiguous = listing.contiguous
        self._bytes: npt.NDArray[np.uint8] | None = None  # the whole file, mapped
        self._views: dict[str, npt.NDArray[np.generic] | None] = {}
        self._sizes: dict[str, int] | None = None

    @property
    def opened(self) -> bool:
        """Whether the file itself has been opened (some values were read)."""
        return self._driver is not None

    def _file(self) -> Driver:
        with self._opening:
            if self._driver is None:
                driver = self._open_file()
                # An openPMD file's driver learns how to read its constant
                # components while listing them: list once, as a plain open
                # does. Other files are read by path alone, with no walk
                # (the walk of 720 step groups costs 0.8 s).
                if self.step_context is not None:
                    driver.variables()
                self._driver = driver
            return self._driver

    def variables(self) -> list[VariableInfo]:
        return self._variables

    def contiguous(self, paths: Iterable[str]) -> dict[str, tuple[int, str]]:
        """Where the variables ``paths`` lie in the file (see :class:`Listing`):
        as listed, or as the file's own driver finds them where the listing
        has none (an index from before they were recorded)."""
        if self._contiguous:
            return {p: self._contiguous[p] for p in paths if p in self._contiguous}
        where = getattr(self._file(), "contiguous", None)
        found: dict[str, tuple[int, str]] = where(paths) if callable(where) else {}
        return found

    def _mapped(self, var: str) -> npt.NDArray[np.generic] | None:
        """The values of a variable the listing places in the file, as a view
        of one memory map of it; None for others (read through the file's
        driver), or where the file is shorter than the listing says."""
        if var in self._views:
            return self._views[var]
        at = self._contiguous.get(var)
        view = None
        if at is not None:
            import numpy as np

            with self._opening:
                if self._bytes is None:
                    self._bytes = np.memmap(self.path, dtype=np.uint8, mode="r").view(np.ndarray)
                if self._sizes is None:
                    self._sizes = {v.path: v.size for v in self._variables}
            offset, dtype = at[0], np.dtype(at[1])
            end = offset + self._sizes[var] * dtype.itemsize
            if end <= len(self._bytes):
                view = self._bytes[offset:end].view(dtype)
        self._views[var] = view
        return view

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        mapped = self._mapped(var)
        if mapped is not None:
            return native(mapped[start:stop])
        return self._file().read(var, start, stop)

    def maps(self, var: str) -> bool:
        """Whether ``var`` is read from a memory map (the listing's, or the file driver's)."""
        return self._mapped(var) is not None or gathers_in_place(self._file(), var)

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        mapped = self._mapped(var)
        if mapped is not None:
            return native(mapped[positions])
        return self._file().gather(var, positions)

    def close(self) -> None:
        self._views.clear()
        self._bytes = None
        if self._driver is not None:
            self._driver.close()
            self._driver = None
