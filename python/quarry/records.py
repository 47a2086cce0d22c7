"""Record classes declared like dataclasses, without their start-up cost.

Why not :mod:`dataclasses`: it compiles every generated method with ``exec`` (six
for a frozen class) and imports :mod:`inspect`; the ~30 records a count touches
cost about 11 ms of the 50 ms that a whole ``quarry query FILE "e > 1" --count``
process may take (issue 15). Here the methods are shared closures over each
class's field names: nothing is compiled, nothing heavy is imported, and an
instance is built about as fast.

What is supported is what Quarry uses of dataclasses: ``frozen`` (the default),
field defaults and default factories, fields left out of comparison and repr,
``__post_init__``, inheritance between records, pattern matching
(``__match_args__``), :func:`replace` and :func:`as_dict`. Type checkers read a
record as a dataclass (PEP 681).

Examples
--------
>>> @record
... class Span:
...     start: int
...     stop: int = 0
...     note: str = field(default="", compare=False)
>>> Span(1, 4)
Span(start=1, stop=4, note='')
>>> Span(1, 4, note="a") == Span(1, 4, note="b"), hash(Span(1, 4)) == hash(Span(1, 4))
(True, True)
>>> replace(Span(1, 4), stop=9)
Span(start=1, stop=9, note='')
>>> as_dict(Span(2))
{'start': 2, 'stop': 0, 'note': ''}
>>> Span(1).start = 3
Traceback (most recent call last):
    ...
AttributeError: cannot assign to field 'start' of a frozen Span
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

_T = TypeVar("_T")
_MISSING: Any = object()


class Field:
    """How one field of a record is made and compared (see :func:`field`)."""

    __slots__ = ("compare", "default", "default_factory", "repr")

    def __init__(
        self,
        default: Any = _MISSING,
        default_factory: Callable[[], Any] | None = None,
        compare: bool = True,
        repr: bool = True,
    ) -> None:
        if default is not _MISSING and default_factory is not None:
            raise TypeError("a field takes a default or a default_factory, not both")
        self.default = default
        self.default_factory = default_factory
        self.compare = compare
        self.repr = repr


def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] | None = None,
    compare: bool = True,
    repr: bool = True,
) -> Any:
    """Describe a record's field: its default (a value, or a function making a
    fresh one per instance) and whether equality, hashing and repr see it.

    Examples
    --------
    >>> @record
    ... class Bag:
    ...     items: list[int] = field(default_factory=list)
    >>> Bag().items is not Bag().items
    True
    """
    return Field(default, default_factory, compare, repr)


def _fields_of(cls: type) -> dict[str, Field]:
    fields: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        fields.update(base.__dict__.get("__record_fields__", {}))
    # (not inspect.get_annotations: importing inspect is what this module avoids)
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _MISSING)
        spec = value if isinstance(value, Field) else Field(default=value)
        if spec.default is not _MISSING and type(spec.default).__hash__ is None:
            raise ValueError(
                f"{cls.__name__}.{name}: a mutable default ({type(spec.default).__name__}) "
                "would be shared by every instance; use field(default_factory=...)"
            )
        if isinstance(value, Field):
            if spec.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
        fields[name] = spec  # a redeclared field keeps its place, as in dataclasses
    seen_default = ""
    for name, spec in fields.items():
        if spec.default is not _MISSING or spec.default_factory is not None:
            seen_default = name
        elif seen_default:
            raise TypeError(
                f"{cls.__name__}: field {name!r} without a default follows {seen_default!r}"
            )
    return fields


#: Instances of a record class made through the shared ``__init__`` before it
#: compiles one of its own: a count's process makes a few of each and never
#: pays for compiling, a long query loop makes thousands and gets the faster one.
COMPILE_AFTER = 64


def _init(cls: type, fields: dict[str, Field]) -> Callable[..., None]:
    names = tuple(fields)
    count = len(names)
    known = frozenset(names)
    # Per field: its name, default (or _MISSING) and default factory (or None).
    fills = tuple((n, f.default, f.default_factory) for n, f in fields.items())
    post_init = getattr(cls, "__post_init__", None) is not None
    title = cls.__name__
    made = 0

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal made
        made += 1
        # Replaced only where it is still the class's own generic __init__.
        # Told by a mark, not by ``is init``: a function naming itself is a
        # reference cycle, and would be left to the cyclic collector when replaced.
        if made == COMPILE_AFTER and getattr(cls.__dict__.get("__init__"), _GENERIC, False):
            cls.__init__ = _compiled_init(cls.__qualname__, fields, post_init)  # type: ignore[misc]
        given = len(args)
        if given > count:
            raise TypeError(f"{title}() takes {count} arguments but {given} were given")
        values = self.__dict__
        if given:
            values.update(zip(names, args, strict=False))  # the rest come below
        for key, value in kwargs.items():
            if key not in known or key in values:
                problem = "got an unexpected" if key not in known else "got multiple values for"
                raise TypeError(f"{title}() {problem} argument {key!r}")
            values[key] = value
        if given + len(kwargs) < count:
            for name, default, factory in fills[given:]:
                if name in values:
                    continue
                if factory is not None:
                    values[name] = factory()
                elif default is not _MISSING:
                    values[name] = default
                else:
                    raise TypeError(f"{title}() missing required argument {name!r}")
        if post_init:
            self.__post_init__()

    setattr(init, _GENERIC, True)
    return init


_GENERIC = "__record_generic__"


def _compiled_init(title: str, fields: dict[str, Field], post_init: bool) -> Callable[..., None]:
    """The ``__init__`` dataclasses would write for ``fields`` (one compile)."""
    scope: dict[str, Any] = {"_MISSING": _MISSING}
    params, body = ["__record_self__"], ["__record_values__ = __record_self__.__dict__"]
    for k, (name, spec) in enumerate(fields.items()):
        value = name
        if spec.default_factory is not None:
            scope[f"_factory_{k}"] = spec.default_factory
            params.append(f"{name}=_MISSING")
            value = f"_factory_{k}() if {name} is _MISSING else {name}"
        elif spec.default is not _MISSING:
            scope[f"_default_{k}"] = spec.default
            params.append(f"{name}=_default_{k}")
        else:
            params.append(name)
        body.append(f"__record_values__[{name!r}] = {value}")
    if post_init:
        body.append("__record_self__.__post_init__()")
    lines = "\n    ".join(body)
    exec(f"def __init__({', '.join(params)}):\n    {lines}\n", scope)
    init: Callable[..., None] = scope["__init__"]
    init.__qualname__ = f"{title}.__init__"
    return init


def _key(names: tuple[str, ...]) -> Callable[[Any], Any]:
    if not names:
        return lambda obj: ()
    get = attrgetter(*names)
    return get if len(names) > 1 else lambda obj: (get(obj),)


def _build(cls: type[_T], frozen: bool) -> type[_T]:
    fields = _fields_of(cls)
    compared = _key(tuple(n for n, f in fields.items() if f.compare))
    shown = tuple(n for n, f in fields.items() if f.repr)
    title = cls.__qualname__

    def show(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in shown)
        return f"{type(self).__qualname__}({inner})"

    def equal(self: Any, other: object) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return bool(compared(self) == compared(other))

    methods: dict[str, Any] = {
        "__init__": _init(cls, fields),
        "__repr__": show,
        "__eq__": equal,
    }
    if frozen:

        def assign(self: Any, name: str, value: object) -> None:
            raise AttributeError(f"cannot assign to field {name!r} of a frozen {title}")

        def delete(self: Any, name: str) -> None:
            raise AttributeError(f"cannot delete field {name!r} of a frozen {title}")

        def hashed(self: Any) -> int:
            return hash(compared(self))

        methods.update(__setattr__=assign, __delattr__=delete, __hash__=hashed)
    elif "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
        methods["__hash__"] = None  # mutable and compared by value: unhashable, as in dataclasses
    for name, method in methods.items():
        if name not in cls.__dict__ or (name == "__hash__" and cls.__dict__[name] is None):
            if method is not None:
                method.__name__ = name
                method.__qualname__ = f"{title}.{name}"
            setattr(cls, name, method)
    cls.__record_fields__ = fields  # type: ignore[attr-defined]
    if "__match_args__" not in cls.__dict__:
        cls.__match_args__ = tuple(fields)  # type: ignore[attr-defined,misc]
    return cls


@overload
def record(cls: type[_T], /) -> type[_T]: ...


@overload
def record(*, frozen: bool = True) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def record(
    cls: type[_T] | None = None, /, *, frozen: bool = True
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """Make ``cls`` a record: ``__init__``, ``__repr__``, ``__eq__`` (and, when
    frozen, ``__hash__`` and no assignment) from its annotated fields.

    Examples
    --------
    >>> @record(frozen=False)
    ... class Tally:
    ...     hits: int = 0
    >>> t = Tally()
    >>> t.hits += 2
    >>> t
    Tally(hits=2)
    """
    if cls is None:
        return lambda c: _build(c, frozen)
    return _build(cls, frozen)


def replace(obj: _T, /, **changes: Any) -> _T:
    """A copy of the record ``obj`` with the given fields changed.

    Examples
    --------
    >>> @record
    ... class Point:
    ...     x: float
    ...     y: float
    >>> replace(Point(1.0, 2.0), y=5.0)
    Point(x=1.0, y=5.0)
    """
    values = {name: getattr(obj, name) for name in type(obj).__record_fields__}  # type: ignore[attr-defined]
    values.update(changes)
    return type(obj)(**values)


def as_dict(obj: object) -> dict[str, Any]:
    """The record ``obj`` as a dict of its fields, records inside it (and in its
    lists, tuples and dicts) turned to dicts too, as :func:`dataclasses.asdict` does.

    Examples
    --------
    >>> @record
    ... class Pair:
    ...     left: object
    ...     right: object
    >>> as_dict(Pair(Pair(1, 2), [Pair(3, 4)]))
    {'left': {'left': 1, 'right': 2}, 'right': [{'left': 3, 'right': 4}]}
    """
    fields = getattr(type(obj), "__record_fields__", None)
    if fields is None:
        raise TypeError(f"as_dict() takes a record, not {type(obj).__name__}")
    return {name: _plain(getattr(obj, name)) for name in fields}


def _plain(value: object) -> Any:
    if hasattr(type(value), "__record_fields__"):
        return as_dict(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(_plain(v) for v in value))
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    import copy

    return copy.deepcopy(value)  # as dataclasses.asdict: the dict shares nothing with obj
