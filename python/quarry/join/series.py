"""The join over a series (:meth:`quarry.query.series.SeriesSelection.interpolate`):
each member's particles joined with its own field, or with one field for
all, and the members' tables laid end to end with a step column.

A field is one for every member, or one per member written as a template:
``{step}`` in it is each member's step number (its position in the series
where it has none: a file per step), e.g. ``field/bx_{step}.bin`` or
``fields.h5:Step#{step}/bx``; or a ``*`` pattern in its file name, like the
series' own (``field/bx_*.bin``), whose files, in natural order (``bx_2``
before ``bx_10``), go to the members in order, one each.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from quarry.errors import JoinArgumentError
from quarry.formats.sources import natural_key
from quarry.join.interpolate import Interpolated
from quarry.outputs.columns import FILE, STEP, OutputTable, own_name

if TYPE_CHECKING:
    import numpy.typing as npt

#: A ``*`` pattern's file part: up to the ``:VAR`` or subscripts after it.
_PATTERN = re.compile(r"^([^:\[]*\*[^:\[]*)(.*)$")


def member_steps(steps: Sequence[int | None]) -> list[int]:
    """Each member's step: its own, or where it has none its position.

    Examples
    --------
    >>> member_steps([None, None]), member_steps([0, 5])
    ([0, 1], [0, 5])
    """
    return [k if step is None else step for k, step in enumerate(steps)]


def field_texts(fields: object) -> dict[str, str]:
    """``fields`` as a mapping of column names to field texts, a path (a
    ``pathlib.Path``) taken as its text; anything else refused, saying what
    to give.

    Examples
    --------
    >>> import pathlib
    >>> field_texts({"bx": pathlib.Path("f/bx.bin")})
    {'bx': 'f/bx.bin'}
    >>> field_texts(["f/bx.bin"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.JoinArgumentError: fields maps each column's name to its field, ...; got a list
    """
    if not isinstance(fields, Mapping):
        raise JoinArgumentError(
            "fields maps each column's name to its field, as {'bx': 'field/bx.bin'} or "
            f"{{'bx': 'fields.nc:bx'}}; got a {type(fields).__name__}"
        )
    texts = {}
    for name, text in fields.items():
        if not isinstance(name, str) or not isinstance(text, str | os.PathLike):
            raise JoinArgumentError(
                f"field {name!r}: give its name as text and its field as a path or "
                f"'FILE[:VAR][SUBSCRIPTS]' text, not a {type(text).__name__}"
            )
        texts[name] = os.fspath(text)
    return texts


def member_fields(
    fields: Mapping[str, str | os.PathLike[str]], steps: Sequence[int]
) -> list[dict[str, str]]:
    """Per member (of steps ``steps``), each field's text, templates filled
    in (see the module notes).

    Examples
    --------
    >>> member_fields({"bx": "b_{step}.bin", "e": "e.nc"}, [3, 4])
    [{'bx': 'b_3.bin', 'e': 'e.nc'}, {'bx': 'b_4.bin', 'e': 'e.nc'}]
    """
    per_member: list[dict[str, str]] = [{} for _ in steps]
    for name, text in field_texts(fields).items():
        match = _PATTERN.match(text)
        if "{step}" in text:
            texts = [text.replace("{step}", str(step)) for step in steps]
        elif match:
            pattern, rest = match.groups()
            files = sorted(glob.glob(pattern), key=natural_key)
            if len(files) != len(steps):
                raise JoinArgumentError(
                    f"field {name}: {pattern} matches {len(files)} file(s) for {len(steps)} "
                    "step(s) to join; give one field file per step, or {step} in the name for "
                    "the step number"
                )
            texts = [file + rest for file in files]
        else:
            texts = [text] * len(steps)
        for member, one in zip(per_member, texts, strict=True):
            member[name] = one
    return per_member


def concatenate(
    tables: Sequence[Interpolated],
    steps: Sequence[int],
    files: Sequence[str],
    given: Mapping[str, str] | None = None,
) -> Interpolated:
    """The members' tables end to end, each row led by its member's file in
    ``quarry_file`` where the members span several files, then by its step
    in ``quarry_step`` (named as every series output names them: with ``_``
    added beside a variable of that name); bytes read summed per field, and
    a field's ``read_by`` the members' (``box,mdbin`` where they differ). A
    field whose members were interpolated from different files records, as
    ``interpolated_from``, its text as ``given`` (``f_{step}.h5:b``), not the
    first member's file.

    Examples
    --------
    >>> one = Interpolated(OutputTable({"quarry_row": np.array([3]), "bx": np.array([0.5])},
    ...                                own=("quarry_row",)), ("bx",), {"bx": 8}, {"bx": "box"})
    >>> both = concatenate([one, one], [0, 7], ["a.h5", "a.h5"])
    >>> {k: v.tolist() for k, v in both.columns.items()}, both.bytes_read
    ({'quarry_step': [0, 7], 'quarry_row': [3, 3], 'bx': [0.5, 0.5]}, {'bx': 16})
    >>> concatenate([one, one], [0, 0], ["a.h5", "b.h5"]).columns["quarry_file"].tolist()
    ['a.h5', 'b.h5']
    """
    first = tables[0].output
    taken = list(first.columns)
    counts = [len(t) for t in tables]
    columns: dict[str, npt.NDArray[np.generic]] = {}
    if len(set(files)) > 1:
        # Steps repeat across files (each has its Step#0): the file tells them apart.
        columns[own_name(FILE, taken)] = np.repeat(np.asarray(files, np.str_), counts)
    step = own_name(STEP, taken)
    columns[step] = np.repeat(np.asarray(steps, np.int64), counts)
    for name in first.columns:
        columns[name] = np.concatenate([t.columns[name] for t in tables])
    fields = tables[0].fields
    read = {f: sum(t.bytes_read[f] for t in tables) for f in fields}
    by = {f: ",".join(sorted({t.read_by.get(f, "box") for t in tables})) for f in fields}
    leading = tuple(name for name in columns if name not in first.columns)
    attrs = dict(first.attrs)
    for f, text in (given or {}).items():
        sources = {t.output.attrs.get(f, {}).get("interpolated_from") for t in tables}
        if f in attrs and len(sources) > 1:
            attrs[f] = {**attrs[f], "interpolated_from": text}
    output = OutputTable(columns, attrs, first.dim, first.row, (*leading, *first.own))
    return Interpolated(output, fields, read, by)
