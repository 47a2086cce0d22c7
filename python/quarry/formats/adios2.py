"""ADIOS2 BP4/BP5 directories through the adios2 package.

Steps are a time series: step ``s`` of variable ``energy`` is the variable
``/Step#<s>/energy``, the H5Part layout, so a bare name resolves when a file
has one step and ``/Step#3/energy`` picks a step otherwise. Each step has its
own shape (a particle count that changes from step to step is read as such),
and a variable written at some steps only is in those steps' groups, under
their real step numbers. Global arrays are
read as hyperslabs; attributes named ``<var>/_FillValue`` and friends are
CF-decoded as for Zarr. Per-writer blocks without a global shape (local
arrays, as particle codes write them rank by rank) read as one 1-D array
per step, the blocks in writer order.

An openPMD series (root attribute ``openPMD``; see
:mod:`quarry.formats.openpmd`) written file-based or group-based names its
variables by iteration already (``/data/<iteration>/particles/...``): each
keeps that name, read at the one ADIOS2 step that holds it, so iterations are
the steps as in HDF5. Its constant record components (attributes ``value``
and ``shape`` with no variable) read as arrays. Variable-based encoding
(every iteration in one variable, one ADIOS2 step each) is refused for now.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import TYPE_CHECKING, Any

from quarry.errors import SourceError
from quarry.formats import cf, openpmd
from quarry.formats.base import (
    VariableInfo,
    gather_by_spans,
    plain_attrs,
    read_flat,
    require,
    variable_problem,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_TYPES = {
    "int8_t": "i1",
    "int16_t": "i2",
    "int32_t": "i4",
    "int64_t": "i8",
    "uint8_t": "u1",
    "uint16_t": "u2",
    "uint32_t": "u4",
    "uint64_t": "u8",
    "float": "f4",
    "double": "f8",
    "char": "i1",
    "signed char": "i1",
    "unsigned char": "u1",
    "short": "i2",
    "unsigned short": "u2",
    "int": "i4",
    "unsigned int": "u4",
    "long int": "i8",
    "unsigned long int": "u8",
    "long long int": "i8",
    "unsigned long long int": "u8",
}
_STEP_PATH = re.compile(r"^/Step#(\d+)/(.+)$")


def adios_dtype(type_name: str) -> np.dtype[Any]:
    """The NumPy dtype of an ADIOS2 type name (``"double"``: float64);
    :class:`~quarry.errors.SourceError` for a type Quarry does not read.

    Examples
    --------
    >>> adios_dtype("double"), adios_dtype("uint8_t")
    (dtype('float64'), dtype('uint8'))
    """
    import numpy as np

    code = _TYPES.get(type_name)
    if code is None:
        raise SourceError(f"ADIOS2 type {type_name!r} is not supported")
    return np.dtype(code)


#: BP5's ``md.idx`` begins with a 64-byte header: the byte at 37 is the
#: format's version (5) and the one at 39 the "writer active" flag, set
#: while a writer has the run open and cleared when it closes it.
_BP5_VERSION_AT, _BP5_ACTIVE_AT = 37, 39


def writer_active(path: str) -> bool | None:
    """Whether a writer has the BP5 run ``path`` open, as its header says
    (None where ``path`` is no BP5 directory, or its header is unreadable).

    Examples
    --------
    >>> import adios2, numpy as np, tempfile, os
    >>> run = os.path.join(tempfile.mkdtemp(), "run.bp")
    >>> stream = adios2.Stream(run, "w")
    >>> _ = stream.begin_step(); stream.write("x", np.ones(2), [2], [0], [2]); stream.end_step()
    >>> writer_active(run)
    True
    >>> stream.close()
    >>> writer_active(run), writer_active(os.path.dirname(run))
    (False, None)
    """
    try:
        with open(os.path.join(path, "md.idx"), "rb") as f:
            head = f.read(64)
    except OSError:
        return None
    if len(head) < 64 or not head.startswith(b"ADIOS-BP") or head[_BP5_VERSION_AT] != 5:
        return None
    return head[_BP5_ACTIVE_AT] != 0


class ADIOS2Driver:
    """An ADIOS2 BP directory opened read-only.

    Examples
    --------
    >>> import adios2, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "run.bp")
    >>> with adios2.Stream(path, "w") as s:
    ...     for i, _ in enumerate(s.steps(2)):
    ...         s.write("energy", np.arange(4.0) + i, [4], [0], [4])
    >>> drv = ADIOS2Driver(path)
    >>> [v.path for v in drv.variables()]
    ['/Step#0/energy', '/Step#1/energy']
    >>> drv.read("/Step#1/energy", 1, 3)
    array([2., 3.])
    >>> drv.close()
    """

    #: An ADIOS2 engine is not thread-safe: one engine's reads are made one at
    #: a time (its own BP5 reader threads needed a file handle each,
    #: ornladios/ADIOS2#3219).
    concurrent_reads = False

    def __init__(self, path: str) -> None:
        import adios2

        self.path = path
        try:
            self._reader = adios2.FileReader(path)
        except Exception as exc:  # the bindings raise RuntimeError/ValueError/...
            raise SourceError(f"cannot open {path} as ADIOS2 BP: {exc}") from None
        self._infos: list[VariableInfo] | None = None
        self._by_path: dict[str, VariableInfo] = {}
        self._names: dict[str, tuple[str, int]] = {}
        self._attrs: dict[str, dict[str, Any]] = {}
        self._local: dict[str, tuple[list[int], npt.NDArray[np.int64]]] = {}
        self._constants: dict[str, np.ndarray[Any, Any]] = {}
        # Each variable's steps, and its shape at each, where some variable skips steps.
        self._holding: dict[str, dict[int, tuple[int, ...]]] | None = None
        # Attribute names by the variable or group they belong to.
        self._owned: dict[str, dict[str, str]] = {}
        for key in self._reader.available_attributes():
            owner, _, attr = key.rpartition("/")
            self._owned.setdefault(owner.strip("/"), {})[attr] = key
        root = {a: self._reader.read_attribute(k) for a, k in self._owned.get("", {}).items()}
        self.step_context = openpmd.iterations_context(root)
        if self.step_context is not None and "variable" in str(root.get("iterationEncoding")):
            # Its particle counts change from step to step, which this driver
            # does not follow yet: refuse rather than answer wrongly.
            self._reader.close()
            raise SourceError(
                f"{path} is an openPMD series written with variable-based iteration "
                "encoding, which Quarry cannot read yet; write it file-based or group-based "
                "(openpmd-api: iteration_encoding)"
            )

    def _variable_attrs(self, name: str) -> dict[str, Any]:
        owned = self._owned.get(name.strip("/"), {})
        out = {attr: self._reader.read_attribute(key) for attr, key in owned.items()}
        if self.step_context is not None and "unitDimension" not in out:
            record = self._owned.get(name.strip("/").rpartition("/")[0], {})
            if "unitDimension" in record:
                out["unitDimension"] = self._reader.read_attribute(record["unitDimension"])
        return out

    def _constant_infos(self, variables: dict[str, Any]) -> list[VariableInfo]:
        """openPMD constant record components: groups of attributes with
        ``value`` and ``shape`` and no variable of their own."""
        if self.step_context is None:
            return []
        names = {n.strip("/") for n in variables}
        infos = []
        for owner, owned in sorted(self._owned.items()):
            if "value" not in owned or "shape" not in owned or owner in names:
                continue
            attrs = self._variable_attrs(owner)
            found = openpmd.constant(attrs)
            if found is None:
                continue
            shape, value = found
            path = "/" + owner
            self._constants[path] = value
            infos.append(
                VariableInfo(
                    path=path,
                    shape=shape,
                    dtype=value.dtype,
                    problem=variable_problem(shape, value.dtype),
                    decoding=f"openPMD constant: every value is {value.item()!r}",
                    attrs=plain_attrs(attrs),
                )
            )
        return infos

    def variables(self) -> list[VariableInfo]:
        import numpy as np

        if self._infos is not None:
            return self._infos
        infos: list[VariableInfo] = []
        variables = self._reader.available_variables()
        steps_in_file = self._reader.num_steps()
        for name, meta in sorted(variables.items()):
            code = _TYPES.get(meta.get("Type", ""))
            shape_text = meta.get("Shape", "").strip()
            shape = tuple(int(s) for s in shape_text.split(",")) if shape_text else ()
            storage = np.dtype(code) if code else np.dtype("O")
            problem = None if code else f"ADIOS2 type {meta.get('Type')!r} is not supported"
            if meta.get("SingleValue") == "true":
                problem = "a single value per step, not an array"
            attrs = self._variable_attrs(name)
            held = int(meta.get("AvailableStepsCount", "1"))
            local = not shape and problem is None
            # A step holding a local array lists a block at least; BP4 lists the
            # steps skipped too (empty), BP5 only those holding it: the
            # non-empty lists are the ``held`` steps' in order, for both.
            blocks: list[list[dict[str, str]]] = (
                [b for b in self._reader.all_blocks_info(name) if b]
                if local
                else [[] for _ in range(held)]
            )
            if len(blocks) < held:
                # The bindings list no blocks of some local arrays (uint8
                # ones holding a byte above 127): nothing to read them by.
                local, problem = False, "ADIOS2 lists no blocks of this local array"
                blocks = [[] for _ in range(held)]
            openpmd_named = self.step_context is not None and held == 1
            numbers = [0] if openpmd_named else self._step_numbers(name, held, steps_in_file)
            # ADIOS2 selects a variable's steps by their rank among the steps
            # holding it (``nth``), which is not the step number when it skips some.
            for nth, step in enumerate(numbers):
                path = f"/Step#{step}/{name.strip('/')}"
                if openpmd_named:
                    path = "/" + name.strip("/")  # openPMD: named by its iteration
                step_shape, step_problem = shape, problem
                if local:
                    step_shape, step_problem = self._local_blocks(path, blocks[nth])
                elif shape:
                    step_shape = self._global_shape(name, nth, held, steps_in_file)
                step_problem = step_problem or variable_problem(step_shape, storage)
                self._names[path] = (name, nth)
                self._attrs[path] = attrs
                infos.append(
                    VariableInfo(
                        path=path,
                        shape=step_shape,
                        dtype=cf.logical_dtype(storage, attrs) if step_problem is None else storage,
                        problem=step_problem,
                        decoding=cf.describe(attrs),
                        attrs=plain_attrs(attrs),
                    )
                )
        infos += self._constant_infos(variables)
        self._infos = infos
        self._by_path = {v.path: v for v in infos}
        return infos

    def _global_shape(self, name: str, nth: int, held: int, steps_in_file: int) -> tuple[int, ...]:
        """The shape of global array ``name`` at the ``nth`` of the ``held``
        steps holding it: its own, not the first step's (the file's metadata
        gives only that). Where it skips steps, as the file's steps give it:
        BP4's random-access reader takes a shape's step selection as a step
        number (and a read's as the rank ``nth``), so it gave another step's."""
        if held != steps_in_file:
            return list(self._steps_of(name, steps_in_file).values())[nth]
        variable = self._reader.inquire_variable(name)
        variable.set_step_selection([nth, 1])
        return tuple(int(n) for n in variable.shape())

    def _step_numbers(self, name: str, held: int, steps_in_file: int) -> list[int]:
        """The step numbers of the ``held`` steps holding ``name``: every step
        when it is in all of them, else those the file's steps list it in."""
        if held == steps_in_file:
            return list(range(held))
        numbers = list(self._steps_of(name, steps_in_file))
        if len(numbers) != held:
            raise SourceError(
                f"{self.path}: ADIOS2 lists {name} in {held} steps but its steps hold it in "
                f"{len(numbers)}; the run may be damaged: check it with 'bpls -l {self.path}'"
            )
        return numbers

    def _steps_of(self, name: str, steps_in_file: int) -> dict[int, tuple[int, ...]]:
        """The steps holding ``name``, each with its shape there (see
        :meth:`_steps_holding`, read once for every variable)."""
        if self._holding is None:
            self._holding = self._steps_holding(steps_in_file)
        return self._holding.get(name, {})

    def _steps_holding(self, steps_in_file: int) -> dict[str, dict[int, tuple[int, ...]]]:
        """Each variable's step numbers, each with its shape there (``()``
        for a local array's), from reading the file's first
        ``steps_in_file`` steps' metadata in turn (the random-access reader
        does not say which steps a variable skips). Read only when some
        variable skips steps: it costs about 0.2 ms a step."""
        import adios2

        holding: dict[str, dict[int, tuple[int, ...]]] = {}
        ok = adios2.bindings.StepStatus.OK
        try:
            stream = adios2.Stream(self.path, "r")
        except Exception as exc:  # the bindings raise RuntimeError/ValueError/...
            raise SourceError(f"cannot read the steps of {self.path}: {exc}") from None
        try:
            for _ in range(steps_in_file):
                # timeout 0: a run still being written has no step after those seen
                if stream.begin_step(timeout=0.0) != ok:
                    break
                step = stream.current_step()
                for name, meta in stream.available_variables().items():
                    text = meta.get("Shape", "").strip()
                    shape = tuple(int(n) for n in text.split(",")) if text else ()
                    holding.setdefault(name, {})[step] = shape
                stream.end_step()
        finally:
            stream.close()
        return holding

    def _info(self, var: str) -> VariableInfo:
        self.variables()
        return self._by_path[var]

    def _local_blocks(
        self, path: str, blocks: list[dict[str, str]]
    ) -> tuple[tuple[int, ...], str | None]:
        """A step of per-writer blocks (no global shape) read as one 1-D array:
        the blocks one after another in writer order, as particle codes write them."""
        import numpy as np

        counts = [tuple(int(c) for c in b["Count"].split(",")) for b in blocks]
        if any(len(c) != 1 for c in counts):
            return (), "per-writer blocks of more than one dimension cannot be queried yet"
        ids = [int(b["BlockID"]) for b in blocks]
        starts = np.concatenate([[0], np.cumsum([c[0] for c in counts])]).astype(np.int64)
        self._local[path] = (ids, starts)
        return (int(starts[-1]),), None

    def _raw(self, var: str, name: str, **selection: Any) -> Any:
        """ADIOS2's read of ``name`` (the variable ``var``); what the bindings
        raise (ValueError, RuntimeError...) as a SourceError naming both."""
        try:
            return self._reader.read(name, **selection)
        except Exception as exc:
            raise SourceError(f"cannot read {var} from {self.path}: {exc}") from None

    def _read_local(self, var: str, start: int, stop: int) -> npt.NDArray[Any]:
        import numpy as np

        name, step = self._names[var]
        ids, starts = self._local[var]
        parts = []
        for k, block in enumerate(ids):
            lo, hi = int(starts[k]), int(starts[k + 1])
            if hi <= start or lo >= stop or hi == lo:
                continue
            data = np.asarray(self._raw(var, name, block_id=block, step_selection=[step, 1]))
            parts.append(data[max(start, lo) - lo : min(stop, hi) - lo])
        info = self._info(var)
        return np.concatenate(parts) if parts else np.empty(0, dtype=info.dtype)

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        import numpy as np

        self.variables()
        if var in self._constants:
            return np.full(max(stop - start, 0), self._constants[var])
        name, step = self._names[var]
        info = self._info(var)
        if var in self._local:
            flat = self._read_local(var, start, stop)
            attrs = self._attrs[var]
            values = cf.decode(flat, attrs, var) if cf.is_decoded(attrs) else flat
            local: npt.NDArray[np.generic] = np.require(values, requirements=["C", "A"])
            return local

        def rows(r0: int, r1: int) -> npt.NDArray[Any]:
            if r1 <= r0:
                return np.empty(0, dtype=info.dtype)
            first = [r0] + [0] * (len(info.shape) - 1)
            count = [r1 - r0, *info.shape[1:]]
            raw = self._raw(var, name, start=first, count=count, step_selection=[step, 1])
            return np.asarray(raw)

        flat = read_flat(info.shape, start, stop, rows)
        attrs = self._attrs[var]
        values = cf.decode(flat, attrs, var) if cf.is_decoded(attrs) else flat
        out: npt.NDArray[np.generic] = np.require(values, requirements=["C", "A"])
        return out

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        import numpy as np

        info = self._info(var)
        if var in self._constants:
            return np.full(len(positions), self._constants[var])
        return gather_by_spans(self, var, info.size, positions)

    def close(self) -> None:
        self._reader.close()
        # ADIOS2's BP5 reader writes /tmp/<name>_<pid in hex>_profiling.json
        # when it closes, whatever its "Profile" parameter says (2.12): a read
        # must leave nothing behind, so remove it.
        name = os.path.basename(os.path.normpath(self.path))
        with contextlib.suppress(OSError):
            os.remove(os.path.join("/tmp", f"{name}_{os.getpid():x}_profiling.json"))


class ADIOS2Backend:
    """ADIOS2 BP4/BP5 directories, recognised by their metadata index."""

    name = "adios2"
    recognised_by = "ADIOS2 BP (a directory with md.idx)"
    directory = True

    def guess_can_open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> bool:
        return os.path.isfile(os.path.join(path, "md.idx"))

    def open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> ADIOS2Driver:
        require("adios2", "adios2", path)
        return ADIOS2Driver(path)


BACKEND = ADIOS2Backend()
