"""quarry.records behaves as the dataclasses it replaces: the same class declared
both ways gives the same constructions, equality, hashes, reprs, errors,
copies, pickles and pattern matches."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quarry.records import as_dict, field, record, replace


@dataclasses.dataclass(frozen=True)
class DPoint:
    x: int
    y: int = 0
    tag: str = dataclasses.field(default="", compare=False, repr=False)
    seen: list[int] = dataclasses.field(default_factory=list, compare=False)


@record
class RPoint:
    x: int
    y: int = 0
    tag: str = field(default="", compare=False, repr=False)
    seen: list[int] = field(default_factory=list, compare=False)


@record
class RPoint3(RPoint):
    z: int = 0


@record(frozen=False)
class Tally:
    hits: int
    names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.names = [*self.names, "made"]


values = st.integers(-5, 5)
texts = st.sampled_from(["", "a", "b"])


@given(values, values, texts, values, values, texts)
def test_equality_and_hashing_follow_the_compared_fields_as_dataclasses_do(x1, y1, t1, x2, y2, t2):
    d1, d2 = DPoint(x1, y1, t1), DPoint(x2, y2, t2)
    r1, r2 = RPoint(x1, y1, t1), RPoint(x2, y2, t2)
    assert (r1 == r2) == (d1 == d2)
    assert (r1 != r2) == (d1 != d2)
    if r1 == r2:
        assert hash(r1) == hash(r2)
    assert repr(r1) == repr(d1).replace("DPoint", "RPoint")


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((1,), {}),
        ((1, 2), {}),
        ((), {"x": 1, "y": 2}),
        ((1,), {"tag": "t"}),
        ((1, 2, "t", [3]), {}),
    ],
)
def test_constructions_match_dataclasses(args, kwargs):
    d, r = DPoint(*args, **kwargs), RPoint(*args, **kwargs)
    assert (r.x, r.y, r.tag, r.seen) == (d.x, d.y, d.tag, d.seen)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((), {}), ((1, 2, "t", [], 5), {}), ((1,), {"x": 2}), ((1,), {"nope": 2})],
)
def test_bad_constructions_raise_type_error_like_dataclasses(args, kwargs):
    with pytest.raises(TypeError):
        DPoint(*args, **kwargs)
    with pytest.raises(TypeError):
        RPoint(*args, **kwargs)


def test_default_factories_make_a_fresh_value_per_instance():
    a, b = RPoint(1), RPoint(1)
    assert a.seen == [] and a.seen is not b.seen


def test_frozen_records_refuse_assignment_and_deletion():
    p = RPoint(1)
    with pytest.raises(AttributeError, match="frozen RPoint"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen RPoint"):
        del p.x  # type: ignore[misc]
    assert p.x == 1


def test_mutable_records_assign_run_post_init_and_are_unhashable():
    t = Tally(1)
    t.hits += 1
    assert (t.hits, t.names) == (2, ["made"])
    assert t == Tally(2)
    with pytest.raises(TypeError):
        hash(t)


def test_inheritance_appends_fields_and_keeps_types_apart():
    p3 = RPoint3(1, 2, z=3)
    assert (p3.x, p3.y, p3.z) == (1, 2, 3)
    assert p3 != RPoint(1, 2)
    assert RPoint3.__match_args__ == ("x", "y", "tag", "seen", "z")


def test_a_field_without_default_after_one_with_is_refused():
    with pytest.raises(TypeError, match="'b' without a default follows 'a'"):

        @record
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]


def test_pattern_matching_reads_fields_in_order():
    match RPoint(4, 5):
        case RPoint(x, y):
            assert (x, y) == (4, 5)
        case _:
            pytest.fail("no match")


def test_replace_and_as_dict_match_dataclasses():
    d, r = DPoint(1, 2, "t", [7]), RPoint(1, 2, "t", [7])
    assert as_dict(replace(r, y=9)) == dataclasses.asdict(dataclasses.replace(d, y=9))
    with pytest.raises(TypeError):
        replace(r, nope=1)


def test_copies_and_pickles_are_equal_and_still_frozen():
    p = RPoint(1, 2, "t", [3])
    for other in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert other == p and other.tag == "t" and other.seen == [3]
        with pytest.raises(AttributeError):
            other.x = 5  # type: ignore[misc]


def test_a_class_made_often_compiles_an_init_that_behaves_the_same():
    """After records.COMPILE_AFTER instances a record compiles its own __init__: the
    constructions, defaults, fresh factory values, errors and __post_init__
    are those of the shared one."""

    @record(frozen=False)
    class Often:
        a: int
        b: str = "b"
        c: list[int] = field(default_factory=list)

        def __post_init__(self) -> None:
            self.c = [*self.c, self.a]

    def made() -> list[object]:
        out: list[object] = [Often(1), Often(2, "x"), Often(3, c=[9]), Often(a=4, b="y", c=[])]
        for args, kwargs in [((), {}), ((1, "b", [], 4), {}), ((1,), {"a": 2}), ((1,), {"d": 2})]:
            with pytest.raises(TypeError):
                Often(*args, **kwargs)
        return [(o.a, o.b, o.c) for o in out]  # type: ignore[attr-defined]

    shared = Often.__init__
    before = made()
    while Often.__init__ is shared:
        Often(0)
    assert Often.__init__.__qualname__.endswith("Often.__init__")
    assert made() == before
    assert Often(1).c is not Often(1).c


def test_the_review_s_differences_from_dataclasses_are_gone():
    """as_dict copies what it returns, a subclass shows its own name, and a
    mutable default is refused, as with dataclasses."""
    r = RPoint(1, seen=[1])
    as_dict(r)["seen"].append(2)
    assert r.seen == [1]

    class Sub(RPoint):
        pass

    assert repr(Sub(1)).startswith(f"{Sub.__qualname__}(")  # as dataclasses write it
    with pytest.raises(ValueError, match="default_factory"):

        @record
        class Shared:
            items: list[int] = []  # noqa: RUF012
