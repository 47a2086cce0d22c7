"""Planning: a query's text, against one open file and its index, becomes
what the executor evaluates.

Planning parses the text (:mod:`quarry.expr.parser`), resolves every name
under the context path (:mod:`quarry.expr.names`), computes the aggregates
the condition uses (:mod:`quarry.query.aggregate`), compiles the condition
into index ranges and scans (:mod:`quarry.expr.plan`), and lays the
variables it reads row by row out as one table
(:func:`quarry.query.execute.table_of`).

A :class:`Planner` belongs to one open file in one state (its variables,
its index, whether values are in SI units): everything it caches stays true
while that state lasts, so a batch of 400 queries resolves ``t`` once and a
repeated query is not planned again. The owner makes a new planner when the
state changes (an index built, opened or checked).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from quarry.errors import (
    QuarryError,
    QuerySyntaxError,
    SubarrayError,
    UnknownVariableError,
    UnsupportedVariableError,
)
from quarry.expr import parse
from quarry.expr.ast import (
    And,
    Arith,
    BinOp,
    Call,
    Compare,
    Cond,
    Literal,
    Neg,
    Not,
    Or,
    Var,
    is_aggregate,
    shape,
)
from quarry.expr.ast import variables as named_in
from quarry.expr.names import resolve
from quarry.expr.plan import (
    AndNode,
    Const,
    NotNode,
    Number,
    OrNode,
    PlanNode,
    RangeLeaf,
    compile_known,
    compile_plan,
    fold,
    resolved_arith,
)
from quarry.index.options import DEFAULT_BLOCK_LEN
from quarry.query.aggregate import AggregateValue, Aggregator
from quarry.query.execute import Table, table_of

if TYPE_CHECKING:
    from quarry.formats.base import Driver, VariableInfo
    from quarry.index.store import IndexStore

#: Plans kept per planner; past this the cache starts again.
MAX_PLANS = 1024
#: Batches kept per planner (each its queries' intervals), likewise.
MAX_BATCHES = 8

T = TypeVar("T")


class PlannedQuery(NamedTuple):
    """What planning a query gives: the plan, the table it runs over, the
    aggregates it used, the variables it compares row by row, and each name
    as written -> the full path it resolved to."""

    plan: PlanNode
    table: Table
    aggregates: list[AggregateValue]
    variables: list[VariableInfo]
    resolved: dict[str, str]


class Planner:
    """Plans queries against one open file (``source``, read through
    ``driver``) and its index ``store`` (None: every condition scans);
    ``factor`` gives what a variable's stored values are multiplied by (SI
    units), None for stored values.

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os
    >>> from quarry.formats import open_source
    >>> path = os.path.join(tempfile.mkdtemp(), "p.h5")
    >>> with h5py.File(path, "w") as f:
    ...     f["t"], f["g/u"] = np.arange(10.0), np.ones(10)
    >>> driver = open_source(path)
    >>> planner = Planner(path, driver, None)
    >>> planned = planner.plan("t > 4 && u == 1")
    >>> planned.resolved, planned.table.shape
    ({'t': '/t', 'u': '/g/u'}, (10,))
    >>> planner.plan("t > 4 && u == 1") is planned  # planned once
    True
    >>> driver.close()
    """

    def __init__(
        self,
        source: str,
        driver: Driver,
        store: IndexStore | None,
        factor: Callable[[VariableInfo], float | None] | None = None,
    ) -> None:
        self.source = source
        self.driver = driver
        self.store = store
        self.factor = factor
        self._plans: dict[tuple[str, str | None], PlannedQuery] = {}
        # Names as written (with subscripts and context) -> variables, and
        # aggregate statistics: shared by every plan.
        self._names: dict[tuple[str, Any, str | None], VariableInfo] = {}
        self._aggregate_stats: dict[str, Any] = {}
        self._batches: dict[tuple[tuple[str, ...], str | None], Any] = {}
        self._tables: dict[Hashable, Table] = {}

    @property
    def block_len(self) -> int:
        """Rows per block of the tables this planner lays out: the index's."""
        return self.store.block_len if self.store is not None else DEFAULT_BLOCK_LEN

    def variable(self, var: Var, path: str | None = None) -> VariableInfo:
        """The variable (or subarray of it) ``var`` names, bare names
        resolving under ``path``; refused if the file cannot query it.
        Resolved once per name as written."""
        written = (var.name, var.index, path)
        info = self._names.get(written)
        if info is None:
            info = self.resolved(var.name, path)
            if info.problem is not None:
                raise UnsupportedVariableError(f"cannot query {info.path}: {info.problem}")
            if var.index is not None:
                from quarry.formats.subarray import view_of

                info = view_of(info, var.index)
            self._names[written] = info
        return info

    def resolved(self, name: str, path: str | None = None) -> VariableInfo:
        """The variable the plain name ``name`` refers to (bare names under
        ``path``), queryable or not: resolved once per name and context."""
        written = (name, "resolved", path)
        info = self._names.get(written)
        if info is None:
            info = resolve(name, self.driver.variables(), self.source, path)
            self._names[written] = info
        return info

    def _check_division(self, query: str, var: Var, path: str | None) -> None:
        """Where the unknown ``var`` is divided by a name and the two with
        the ``/`` name a variable (``Step#0/x``: a path written without its
        leading ``/``), say how to write it, the caret under the ``/``."""
        import re

        after = re.compile(r"[^\s/()*+<>=!&|,-]*\s*(/)\s*([\w#.:]+)").match(query, var.pos)
        if after is None or var.index is not None:
            return
        path_written = f"{var.name}/{after.group(2)}"
        try:
            meant = resolve(path_written, self.driver.variables(), self.source, path)
            spellings = f"`{path_written}` (in backquotes) or {meant.path}"
        except QuarryError:
            if path is None:
                return
            # Under a context (each step of a series): a path from the root
            # written without its leading '/'.
            try:
                meant = resolve("/" + path_written, self.driver.variables(), self.source)
            except QuarryError:
                return
            spellings = f"{meant.path}: names without a leading '/' are looked up under {path}"
        raise QuerySyntaxError(
            f"'/' divides {var.name} by {after.group(2)} here, and there is no variable "
            f"{var.name!r}; for the variable {meant.path} write {spellings}",
            query,
            after.start(1),
        )

    def aggregator(self, by_key: dict[str, VariableInfo]) -> Aggregator:
        """An aggregator over the variables ``by_key`` (resolved names ->
        variables), sharing this planner's statistics with every plan."""
        return Aggregator(self.driver, self.store, by_key, self._aggregate_stats)

    def table(self, variables: list[VariableInfo]) -> Table:
        """The table ``variables`` form, cut into this planner's blocks: one
        per layout of shapes and dimensions (every step of a series has one)."""
        layout = tuple((info.shape, info.dims) for info in variables)
        table = self._tables.get(layout)
        if table is None:
            table = self._tables[layout] = table_of(variables, self.block_len)
        return table

    def plan(self, query: str, path: str | None = None) -> PlannedQuery:
        """The plan of ``query``, its bare names resolving under ``path``."""
        key = (query, path)
        planned = self._plans.get(key)
        if planned is None:
            planned = self._plan(query, path)
            if len(self._plans) >= MAX_PLANS:
                self._plans.clear()
            self._plans[key] = planned
        return planned

    def batch(self, queries: tuple[str, ...], path: str | None, plan: Callable[[], T]) -> T:
        """What ``plan()`` makes of the batch ``queries`` (names resolving
        under ``path``), made once: a batch asked again (every step of a
        series, once per call) is not planned again."""
        key = (queries, path)
        if key not in self._batches:
            if len(self._batches) >= MAX_BATCHES:
                self._batches.clear()
            self._batches[key] = plan()
        planned: T = self._batches[key]
        return planned

    def _plan(self, query: str, path: str | None) -> PlannedQuery:
        parsed = parse_cached(query)
        cond = parsed.cond
        # Resolved names and subarrays by their key (``/x[0:10]``): the plan's
        # names are keys once resolved, and resolve to the same views again.
        by_key: dict[str, VariableInfo] = {}
        resolved: dict[str, str] = {}

        def lookup(var: Var) -> VariableInfo:
            info = by_key.get(var.name) if var.index is None else None
            if info is None:
                try:
                    info = self.variable(var, path)
                except SubarrayError as exc:
                    raise QuerySyntaxError(str(exc), query, var.pos) from None
                except UnknownVariableError:
                    self._check_division(query, var, path)
                    raise
                by_key[info.key] = info
                resolved.setdefault(var.name, info.path)
            return info

        written = [lookup(var) for var in parsed.variables]
        template = _template_key(query, parsed, written, self.factor)
        found = _TEMPLATES.get(template) if template else None
        aggregates: list[AggregateValue] = []
        if found is None:
            aggregator = self.aggregator(by_key)
            plan = compile_plan(cond, lookup, query, aggregator, self.factor)
            aggregates = aggregator.used
            if template:
                _remember(template, plan, parsed, written, bool(aggregates), self.factor)
        elif found.sides is None:
            plan = _bind(found.plan, dict(zip(found.keys, written, strict=True)))
        else:
            plan, aggregates = self._rederived(found.sides, written, query)
        # Every variable the query reads row by row forms the table, even one
        # whose comparison folded away (``nan < x`` is unknown on every row of
        # x); variables seen only inside aggregates do not.
        used = list({info.key: info for info in (written[k] for k in parsed.rows)}.values())
        if not used:
            raise QuarryError(
                f"query {query!r} compares no variable row by row "
                "(aggregates such as mean(x) are single numbers)"
            )
        return PlannedQuery(plan, self.table(used), aggregates, used, resolved)

    def _rederived(
        self, sides: _Sides, written: list[VariableInfo], query: str
    ) -> tuple[PlanNode, list[AggregateValue]]:
        """The plan ``sides`` (made in another member) gives in this one: its
        names bound to ``written``, its aggregates computed here and the
        comparisons' sides folded from them as the full planner folds them,
        then ranges and merges made of these as :func:`compile_plan` makes
        them."""
        names = _MemberNames(written, sides.positions)
        aggregator = self.aggregator(names.by_key)
        values: dict[int, Number] = {}
        known = dict(sides.fixed)
        for side_id, (k, pos) in sides.variables.items():
            known[side_id] = Var(written[k].key, pos)
        for side, calls in sides.computed:
            for call in calls:
                (over,) = call.args
                if isinstance(over, Var):
                    over = Var(names(over).key, over.pos)
                else:
                    over = resolved_arith(over, names, query, aggregator)
                values[id(call)] = aggregator(call.func, over)
            known[id(side)] = fold(side, values)
        return compile_known(sides.cond, known, names), aggregator.used


class _Parsed(NamedTuple):
    """A query's text parsed, the variables it names (all of them in the
    order written, and those it reads row by row, not only inside
    aggregates, with their positions among all) and its shape
    (:func:`quarry.expr.ast.shape`)."""

    cond: Cond
    variables: tuple[Var, ...]
    row_variables: tuple[Var, ...]
    shape: tuple[Hashable, tuple[Literal, ...]]
    rows: tuple[int, ...]


@functools.lru_cache(maxsize=MAX_PLANS)
def parse_cached(query: str) -> _Parsed:
    """Parsed once per text, whatever file or step group it is planned in
    (the tree is immutable)."""
    cond = parse(query)
    variables, row_variables = tuple(named_in(cond)), tuple(named_in(cond, in_aggregates=False))
    row_ids = {id(var) for var in row_variables}
    rows = tuple(k for k, var in enumerate(variables) if id(var) in row_ids)
    return _Parsed(cond, variables, row_variables, shape(cond), rows)


class _Template(NamedTuple):
    """A plan made in one member, and the keys of the variables the query
    named there (in the order written), to be bound to another member's;
    for a query with aggregates, how the plan is re-derived from another
    member's aggregate values (``sides``)."""

    plan: PlanNode
    keys: tuple[str, ...]
    sides: _Sides | None = None


class _Sides(NamedTuple):
    """The sides of every comparison of a query with aggregates, as planning
    it in another member needs them: ``cond`` is the template member's parse
    (the ids below are its nodes'), ``positions`` each name's position
    among the names written, ``variables`` each side that is a bare name
    (its position, and where it is written), ``fixed`` each side made of
    numbers alone (folded once), and ``computed`` the sides holding
    aggregates with the aggregates they hold (outside any other), in the
    order the planner computes them."""

    cond: Cond
    positions: dict[int, int]
    variables: dict[int, tuple[int, int]]
    fixed: dict[int, Arith]
    computed: tuple[tuple[Arith, tuple[Call, ...]], ...]


class _MemberNames:
    """Resolves the names of a template's condition to one member's
    variables: a name as written by its position, a resolved name (a
    variable's key) by that key."""

    def __init__(self, written: list[VariableInfo], positions: dict[int, int]) -> None:
        self.written = written
        self.positions = positions
        self.by_key = {info.key: info for info in written}

    def __call__(self, var: Var) -> VariableInfo:
        k = self.positions.get(id(var))
        return self.written[k] if k is not None else self.by_key[var.name]


#: Plans by query text and what its names resolved to, up to the variables'
#: paths: the members of a series (step groups, files of one run) plan a
#: query once and bind it to their own variables (issue 15's 400 slices of 720
#: steps are 400 plans, not 288,000).
_TEMPLATES: dict[tuple[Any, ...], _Template] = {}


def _template_key(
    query: str,
    parsed: _Parsed,
    written: list[VariableInfo],
    factor: Callable[[VariableInfo], float | None] | None,
) -> tuple[Any, ...] | None:
    """What a plan of ``query`` depends on beyond the variables' paths: each
    written name's dtype, shape, SI factor and which earlier name it shares a
    variable with. None where plans are not shared (subscripts)."""
    if any(var.index is not None for var in parsed.variables):
        return None
    first: dict[str, int] = {}
    described = []
    for k, info in enumerate(written):
        same = first.setdefault(info.key, k)
        by = factor(info) if factor is not None else None
        described.append((info.dtype.str, info.shape, by, same))
    return (query, *described)


def _remember(
    template: tuple[Any, ...],
    plan: PlanNode,
    parsed: _Parsed,
    written: list[VariableInfo],
    with_aggregates: bool,
    factor: Callable[[VariableInfo], float | None] | None,
) -> None:
    """Keep ``plan`` (made in one member) for the other members planning the
    same ``template``, where it can be bound to their variables (and, with
    aggregates, re-derived from their values: unscaled values only)."""
    if not _bindable(plan):
        return
    sides = None
    if with_aggregates:
        sides = _sides_of(parsed) if factor is None else None
        if sides is None:
            return
    if len(_TEMPLATES) >= MAX_PLANS:
        _TEMPLATES.clear()
    _TEMPLATES[template] = _Template(plan, tuple(info.key for info in written), sides)


def _sides_of(parsed: _Parsed) -> _Sides | None:
    """The comparisons' sides of ``parsed`` sorted as :class:`_Sides` holds
    them; None where a side computes with a variable row by row (a scan,
    planned in each member)."""
    positions = {id(var): k for k, var in enumerate(parsed.variables)}
    sides = _Sides(parsed.cond, positions, {}, {}, ())
    computed: list[tuple[Arith, tuple[Call, ...]]] = []
    compares = _compares(parsed.cond, [])
    for side in (side for compare in compares for side in (compare.left, compare.right)):
        if isinstance(side, Var):
            sides.variables[id(side)] = (positions[id(side)], side.pos)
        elif named_in(side, in_aggregates=False):
            return None
        elif named_in(side):
            computed.append((side, tuple(_aggregates(side, []))))
        else:
            sides.fixed[id(side)] = fold(side)
    return sides._replace(computed=tuple(computed))


def _aggregates(node: Arith, into: list[Call]) -> list[Call]:
    """The aggregate calls of ``node`` outside any other, in the order written."""
    match node:
        case Call() if is_aggregate(node):
            into.append(node)
        case Call(args=items):
            for item in items:
                _aggregates(item, into)
        case BinOp(left=left, right=right):
            _aggregates(left, into)
            _aggregates(right, into)
        case Neg(operand=x):
            _aggregates(x, into)
    return into


def _compares(cond: Cond, into: list[Compare]) -> list[Compare]:
    """The comparisons of ``cond``, in the order the planner compiles them."""
    match cond:
        case Compare():
            into.append(cond)
        case Not(operand=x):
            _compares(x, into)
        case And(items=items) | Or(items=items):
            for item in items:
                _compares(item, into)
    return into


def _bindable(plan: PlanNode) -> bool:
    """Whether ``plan`` can be bound to another member's variables: index
    ranges and constants under ``&&``, ``||`` and ``!`` (a scan's arithmetic
    names its variables by path, and is planned in each member)."""
    match plan:
        case RangeLeaf() | Const():
            return True
        case AndNode(items=items) | OrNode(items=items):
            return all(map(_bindable, items))
        case NotNode(operand=operand):
            return _bindable(operand)
    return False


def _bind(node: PlanNode, to_member: dict[str, VariableInfo]) -> PlanNode:
    """``node`` with each range's variable replaced by ``to_member[its key]``."""
    match node:
        case RangeLeaf(var=var, interval=interval):
            return RangeLeaf(to_member[var.key], interval)
        case AndNode(items=items):
            return AndNode(tuple(_bind(x, to_member) for x in items))
        case OrNode(items=items):
            return OrNode(tuple(_bind(x, to_member) for x in items))
        case NotNode(operand=operand):
            return NotNode(_bind(operand, to_member))
    return node
