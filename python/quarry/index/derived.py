"""Derived variables: quantities computed from a file's variables, such as
``r = sqrt(x**2 + y**2)``, indexed at build time and queried by name.

A definition uses bare names of variables in one group; the derived variable
is made in every group that holds all of them (``/Step#3/r`` from
``/Step#3/x`` and ``/Step#3/y``), so one definition covers every time step.
Values are float64, computed by the core's program evaluator (the one scans
use) span by span while indexing and at just the needed rows when a query
checks candidates: the same numbers both times, never the whole array.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from quarry import _core
from quarry.errors import DerivationError, QuarryError, QuerySyntaxError
from quarry.expr.ast import Arith, has_aggregate, variables
from quarry.expr.parser import parse_expression
from quarry.expr.postfix import postfix
from quarry.formats.base import Driver, VariableInfo
from quarry.records import record

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@record
class Derivation:
    """``name = expr``, as written by the user and recorded in the index.

    Examples
    --------
    >>> Derivation.parse(" r = sqrt(x**2 + y**2) ")
    Derivation(name='r', expr='sqrt(x**2 + y**2)')
    """

    name: str
    expr: str

    @staticmethod
    def parse(text: str) -> Derivation:
        name, eq, expr = text.partition("=")
        name, expr = name.strip(), expr.strip()
        if not eq or not _NAME.match(name):
            raise DerivationError(
                f"a derived variable is written NAME=EXPRESSION, e.g. r=sqrt(x**2 + y**2); "
                f"got {text!r}"
            )
        # A syntax error shows its caret now, not at build.
        if has_aggregate(parse_expression(expr)):
            raise DerivationError(
                f"a derived variable is computed row by row, so it takes no aggregate "
                f"(mean, std, ...): {text!r}; compare with one in the query instead "
                f"(e.g. x - mean(x) > 1)"
            )
        return Derivation(name, expr)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "expr": self.expr}


@record
class DerivedVariable:
    """One derived variable in one group: what it reads and how it computes."""

    info: VariableInfo
    inputs: tuple[str, ...]
    program: tuple[tuple[str, float], ...]


def expand(
    definitions: list[Derivation], file_variables: list[VariableInfo]
) -> list[DerivedVariable]:
    """Every derived variable the definitions make in a file, group by group.

    Examples
    --------
    >>> import numpy as np
    >>> vs = [VariableInfo(f"/Step#{s}/{n}", (5,), np.dtype("f4")) for s in (0, 1) for n in "xy"]
    >>> [d.info.path for d in expand([Derivation("r", "sqrt(x**2 + y**2)")], vs)]
    ['/Step#0/r', '/Step#1/r']
    """
    import numpy as np

    by_group: dict[str, dict[str, VariableInfo]] = {}
    for info in file_variables:
        group, _, name = info.path.rpartition("/")
        by_group.setdefault(group, {})[name] = info
    out: list[DerivedVariable] = []
    for d in definitions:
        names, program = _compiled(d)
        decoding = f"derived at indexing: {d.name} = {d.expr}"
        made = 0
        for group, members in by_group.items():
            if not all(n in members for n in names):
                continue
            inputs = [members[n] for n in names]
            _check_inputs(d, group, inputs, members)
            path = f"{group}/{d.name}"
            info = VariableInfo(
                path, inputs[0].shape, np.dtype("f8"), decoding=decoding, dims=inputs[0].dims
            )
            out.append(DerivedVariable(info, tuple(i.path for i in inputs), program))
            made += 1
        if not made:
            raise DerivationError(
                f"no group of the file holds all of {', '.join(names)} for {d.name} = {d.expr}"
            )
    return out


@functools.lru_cache(maxsize=256)
def _compiled(d: Derivation) -> tuple[tuple[str, ...], tuple[tuple[str, float], ...]]:
    """The names a definition reads, in order, and its postfix program over
    them, made once per definition: every open of an index (each file of a
    720-file series) expands its definitions again, and the inputs come in
    that order in every group, so one program serves them all."""
    tree = parse_expression(d.expr)
    names = tuple(dict.fromkeys(v.name for v in variables(tree)))
    _check_names(d, tree, names)
    return names, tuple(postfix(tree, {n: i for i, n in enumerate(names)}))


def _check_names(d: Derivation, tree: Arith, names: tuple[str, ...]) -> None:
    if not names:
        raise DerivationError(f"{d.name} = {d.expr} uses no variable")
    for var in variables(tree):
        if "/" in var.name or var.index is not None:
            raise QuerySyntaxError(
                "a derived variable uses bare names of variables in one group "
                "(it is made in every group holding them)",
                d.expr,
                var.pos,
            )


def _check_inputs(
    d: Derivation, group: str, inputs: list[VariableInfo], members: dict[str, VariableInfo]
) -> None:
    if d.name in members:
        raise DerivationError(
            f"{group}/{d.name} already exists; name the derived variable otherwise"
        )
    for info in inputs:
        if info.problem is not None:
            raise DerivationError(f"{d.name} = {d.expr} reads {info.path}: {info.problem}")
    shapes = {info.shape for info in inputs}
    if len(shapes) > 1:
        listing = ", ".join(f"{i.path} {i.shape}" for i in inputs)
        raise DerivationError(f"{d.name} = {d.expr} mixes shapes: {listing}")


class DerivedDriver:
    """A file's driver plus its derived variables, read like stored ones."""

    def __init__(self, base: Driver, derived: list[DerivedVariable]) -> None:
        self.base = base
        self.path = base.path
        self.step_context = base.step_context
        self.derived = {d.info.path: d for d in derived}
        self._listed: tuple[list[VariableInfo], list[VariableInfo]] | None = None

    def variables(self) -> list[VariableInfo]:
        # One list while the base's lasts: name lookups keep a table per list.
        base = self.base.variables()
        if self._listed is None or self._listed[0] is not base:
            self._listed = base, [*base, *(d.info for d in self.derived.values())]
        return self._listed[1]

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        d = self.derived.get(var)
        if d is None:
            return self.base.read(var, start, stop)
        columns = [self.base.read(p, start, stop) for p in d.inputs]
        return _core.evaluate(columns, list(d.program), max(stop - start, 0))

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        d = self.derived.get(var)
        if d is None:
            return self.base.gather(var, positions)
        columns = [self.base.gather(p, positions) for p in d.inputs]
        return _core.evaluate(columns, list(d.program), len(positions))

    def close(self) -> None:
        self.base.close()


def previous_derivations(index_path: str) -> list[Derivation]:
    """The derived variables an existing index defines (none if there is no
    readable index): what a rebuild keeps."""
    from quarry.index import layout

    try:
        _, manifest = layout.read_manifest(index_path)
    except (OSError, QuarryError):
        return []
    return list(manifest.derived)
