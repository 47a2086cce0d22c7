"""FastQuery's (name, path) resolution: context, globs, nesting, ambiguity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quarry.errors import AmbiguousNameError, UnknownPathError, UnknownVariableError
from quarry.expr.names import in_context, matching_groups, resolve
from quarry.formats.base import VariableInfo

PATHS = [
    "/x",
    "/g/x",
    "/Step#0/x",
    "/Step#0/energy",
    "/Step#1/x",
    "/Step#1/energy",
    "/Step#1/sub/energy",
    "/Step#10/x",
    "/Step#10/energy",
    "/run/Step#2/x",
    "/run/Step#2/deep/sub/y",
    "/group/subA/v",
    "/group/subB/v",
    "/group/other/w",
]
VARS = [VariableInfo(p, (4,), np.dtype("f4")) for p in PATHS]


def path_of(name, context=None):
    return resolve(name, VARS, "run.h5", context).path


@pytest.mark.parametrize(
    ("name", "context", "expected"),
    [
        ("x", None, "/x"),  # /x's group (the root) holds /g/x and every step's x
        ("g/x", None, "/g/x"),
        ("/Step#1/x", None, "/Step#1/x"),
        ("/Step#1/x", "Step#0", "/Step#1/x"),  # a full path ignores the context
        ("x", "Step#0", "/Step#0/x"),
        ("x", "/Step#0", "/Step#0/x"),
        ("x", "Step#1", "/Step#1/x"),  # Step#1 is not a prefix match of Step#10
        ("x", "Step#10", "/Step#10/x"),
        ("energy", "Step#1", "/Step#1/energy"),  # /Step#1 holds /Step#1/sub/energy
        ("sub/energy", "Step#1", "/Step#1/sub/energy"),
        ("x", "Step#2", "/run/Step#2/x"),  # the context may sit anywhere above
        ("x", "run/Step#2", "/run/Step#2/x"),
        ("y", "Step#2", "/run/Step#2/deep/sub/y"),  # and anything may sit between
        ("y", "deep", "/run/Step#2/deep/sub/y"),
        ("y", "Step#2/deep", "/run/Step#2/deep/sub/y"),
        ("y", "Step#*", "/run/Step#2/deep/sub/y"),  # a glob matching many groups, no tie
        ("x", "run/Step#*", "/run/Step#2/x"),
        ("w", "group/o*", "/group/other/w"),
        ("v", "group/subA", "/group/subA/v"),
        ("v", "*/subB", "/group/subB/v"),
        ("x", "", "/x"),  # an empty context is the whole file
        ("x", "/", "/x"),
    ],
)
def test_resolves(name, context, expected):
    assert path_of(name, context) == expected


@pytest.mark.parametrize(
    ("name", "context", "tied"),
    [
        ("energy", None, ["/Step#0/energy", "/Step#1/energy", "/Step#10/energy"]),
        ("x", "Step#*", ["/Step#0/x", "/Step#1/x", "/Step#10/x", "/run/Step#2/x"]),
        ("x", "Step#1*", ["/Step#1/x", "/Step#10/x"]),
        ("energy", "Step#1*", ["/Step#1/energy", "/Step#10/energy"]),
        ("v", "group", ["/group/subA/v", "/group/subB/v"]),
        ("v", "group/sub*", ["/group/subA/v", "/group/subB/v"]),
    ],
)
def test_matches_in_separate_groups_list_the_topmost_of_each(name, context, tied):
    with pytest.raises(AmbiguousNameError) as err:
        resolve(name, VARS, "run.h5", context)
    assert err.value.candidates == tied
    assert all(p in str(err.value) for p in tied)
    assert "/Step#1/sub/energy" not in str(err.value)


def test_an_anchored_context_starts_at_the_root():
    with pytest.raises(UnknownPathError, match="'/Step#2'"):
        resolve("x", VARS, "run.h5", "/Step#2")
    assert path_of("x", "/run/Step#2") == "/run/Step#2/x"


def test_unknown_names_suggest_their_neighbours():
    with pytest.raises(UnknownVariableError, match="did you mean energy"):
        resolve("enrgy", VARS, "run.h5", "Step#0")
    with pytest.raises(UnknownVariableError, match=r"run.h5 under path 'Step#0'"):
        resolve("y", VARS, "run.h5", "Step#0")
    with pytest.raises(UnknownVariableError, match="/Step#0/x"):
        resolve("/Step#0/xx", VARS, "run.h5")
    # A bare name shared by every step is still offered (it resolves with a path).
    with pytest.raises(UnknownVariableError, match="did you mean energy"):
        resolve("enrgy", VARS, "run.h5")
    # A short name one letter off scores below difflib's usual cutoff: offered too.
    short = [VariableInfo(p, (3,), np.dtype("f4")) for p in ("/px", "/py", "/energy")]
    with pytest.raises(UnknownVariableError, match=r"did you mean p[xy], p[xy]\?"):
        resolve("pz", short, "run.h5")


def test_a_context_naming_no_group_suggests_groups():
    with pytest.raises(UnknownPathError, match="did you mean Step#1") as err:
        resolve("x", VARS, "run.h5", "Step#11")
    assert isinstance(err.value, KeyError)
    with pytest.raises(UnknownPathError, match="no group matches path 'nowhere/\\*'"):
        resolve("x", VARS, "run.h5", "nowhere/*")


def test_matching_groups_and_in_context():
    assert matching_groups(VARS, "Step#*") == ["/Step#0", "/Step#1", "/Step#10", "/run/Step#2"]
    assert matching_groups(VARS, "/Step#1") == ["/Step#1"]
    assert matching_groups(VARS, "group/sub*") == ["/group/subA", "/group/subB"]
    assert in_context("/Step#1/sub/energy", "Step#1")
    assert not in_context("/Step#10/x", "Step#1")
    assert in_context("/x", None)


def test_a_new_list_of_variables_is_not_confused_with_a_cached_one():
    first = [VariableInfo("/a/x", (1,), np.dtype("f4"))]
    assert resolve("x", first, "f").path == "/a/x"
    second = [VariableInfo("/b/x", (1,), np.dtype("f4"))]
    assert resolve("x", second, "f").path == "/b/x"


def test_a_list_of_the_same_variables_plus_one_sees_the_new_one():
    base = [VariableInfo("/a/x", (1,), np.dtype("f4"))]
    assert resolve("x", base, "f").path == "/a/x"
    same = list(base)  # a new list of the same objects (derived variables appended: none)
    assert resolve("x", same, "f").path == "/a/x"
    more = [*base, VariableInfo("/y", (1,), np.dtype("f4"))]
    assert resolve("y", more, "f").path == "/y"
    base.append(VariableInfo("/z", (1,), np.dtype("f4")))  # a cached list that grew
    assert resolve("z", base, "f").path == "/z"


OPENPMD = [
    VariableInfo(p, (4,), np.dtype("f8"))
    for p in [
        "/data/100/fields/E/x",
        "/data/100/fields/E/y",
        "/data/100/particles/electrons/position/x",
        "/data/100/particles/electrons/momentum/x",
        "/data/100/particles/ions/position/x",
    ]
]


def test_a_bare_name_never_picks_one_of_unrelated_subtrees():
    """Warp's openPMD layout: x is a field component and two species' positions."""
    with pytest.raises(AmbiguousNameError) as err:
        resolve("x", OPENPMD, "data00000100.h5")
    assert err.value.candidates == [
        "/data/100/fields/E/x",
        "/data/100/particles/electrons/position/x",
        "/data/100/particles/electrons/momentum/x",
        "/data/100/particles/ions/position/x",
    ]
    assert err.value.spellings == ["E.x", "electrons.position.x", "momentum.x", "ions.position.x"]
    for path, spelling in zip(err.value.candidates, err.value.spellings, strict=True):
        assert resolve(spelling, OPENPMD, "f").path == path
        assert f"{path} (write {spelling})" in str(err.value)
    assert resolve("position.x", OPENPMD, "f", "electrons").path.endswith("electrons/position/x")
    assert resolve("position/x", OPENPMD, "f", "ions").path.endswith("ions/position/x")
    assert resolve("E.y", OPENPMD, "f").path == "/data/100/fields/E/y"


def test_names_match_after_nfc_normalisation():
    nfd = "e\u0301nergie"  # e + combining acute, as some file systems write it
    variables = [VariableInfo(f"/g/{nfd}", (3,), np.dtype("f4"))]
    assert resolve("\u00e9nergie", variables, "f").path == f"/g/{nfd}"
    assert resolve(f"/g/{nfd}", variables, "f").path == f"/g/{nfd}"
    assert resolve("/g/\u00e9nergie", variables, "f").path == f"/g/{nfd}"


def _documented_rule(paths, written):
    """The README's rule, written out independently of quarry.expr.names."""
    wanted = [p for p in written.replace(".", "/").split("/") if p]
    matches = [p for p in paths if p.split("/")[1:][-len(wanted) :] == wanted]
    for m in matches:
        group = m.split("/")[1:-1]
        others = [o.split("/")[1:] for o in matches if o != m]
        if all(len(o) > len(group) + 1 and o[: len(group)] == group for o in others):
            return m
    return "ambiguous" if matches else "unknown"


_COMPONENT = st.sampled_from(["a", "b", "x", "y", "Step#0", "Step#1", "e1"])


@settings(max_examples=300, deadline=None)
@given(
    st.sets(st.lists(_COMPONENT, min_size=1, max_size=4).map(tuple), min_size=1, max_size=12),
    st.lists(_COMPONENT, min_size=1, max_size=2),
    st.sampled_from("./"),
)
def test_resolution_follows_the_documented_rule(trees, name_parts, sep):
    # A variable cannot also be a group: keep only paths no other path passes through.
    paths = sorted(
        "/" + "/".join(t) for t in trees if not any(u[: len(t)] == t and u != t for u in trees)
    )
    variables = [VariableInfo(p, (2,), np.dtype("f4")) for p in paths]
    written = sep.join(name_parts)
    expected = _documented_rule(paths, written)
    try:
        got = resolve(written, variables, "f").path
    except AmbiguousNameError as err:
        assert expected == "ambiguous"
        for path, spelling in zip(err.candidates, err.spellings, strict=True):
            assert resolve(spelling, variables, "f").path == path
        return
    except UnknownVariableError:
        got = "unknown"
    assert got == expected


def test_a_spelling_is_read_back_as_the_variable_it_names():
    """A dot in a group's name also reads as a separator: `p.q/x` means
    /p.q/x and /p/q/x alike, so it is not offered as /p.q/x's spelling."""
    variables = [VariableInfo(p, (2,), np.dtype("f4")) for p in ["/p.q/x", "/p/q/x"]]
    with pytest.raises(AmbiguousNameError) as err:
        resolve("x", variables, "f")
    assert err.value.spellings == ["/p.q/x", "q.x"]


@settings(max_examples=300, deadline=None)
@given(
    st.sets(
        st.lists(
            st.sampled_from(["a", "p", "q", "p.q", "x", "x.y", "y"]), min_size=1, max_size=4
        ).map(tuple),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(["x", "y", "q.x", "p.q.x"]),
)
def test_every_spelling_offered_resolves_to_its_variable(trees, name):
    """Whatever dots the groups' names hold, each spelling an ambiguity
    offers, read back as the parser reads it (backticks off), is its variable."""
    paths = sorted(
        "/" + "/".join(t) for t in trees if not any(u[: len(t)] == t and u != t for u in trees)
    )
    variables = [VariableInfo(p, (2,), np.dtype("f4")) for p in paths]
    try:
        resolve(name, variables, "f")
    except AmbiguousNameError as err:
        for path, spelling in zip(err.candidates, err.spellings, strict=True):
            assert resolve(spelling.strip("`"), variables, "f").path == path
    except UnknownVariableError:
        pass


def _documented_rule_under(paths, written, context):
    """:func:`_documented_rule` under a context anchored at the root: only
    the matches whose groups above the name begin with the context's."""
    wanted = [p for p in written.replace(".", "/").split("/") if p]
    under = [
        p
        for p in paths
        if p.split("/")[1:][-len(wanted) :] == wanted
        and p.split("/")[1:][: -len(wanted)][: len(context)] == context
    ]
    return _documented_rule(under, written)


@settings(max_examples=300, deadline=None)
@given(
    st.sets(st.lists(_COMPONENT, min_size=1, max_size=4).map(tuple), min_size=1, max_size=12),
    st.lists(_COMPONENT, min_size=1, max_size=2),
    st.sampled_from("./"),
    st.lists(_COMPONENT, min_size=1, max_size=2),
)
def test_a_step_named_exactly_resolves_by_the_documented_rule(trees, name_parts, sep, context):
    # A series resolves each step's names under ``/Step#3``: a plain name right
    # inside it is found directly, any other by the search; both by the rule.
    paths = sorted(
        "/" + "/".join(t) for t in trees if not any(u[: len(t)] == t and u != t for u in trees)
    )
    variables = [VariableInfo(p, (2,), np.dtype("f4")) for p in paths]
    written = sep.join(name_parts)
    expected = _documented_rule_under(paths, written, context)
    try:
        got = resolve(written, variables, "f", "/" + "/".join(context)).path
    except AmbiguousNameError:
        got = "ambiguous"
    except (UnknownVariableError, UnknownPathError):
        got = "unknown"
    assert got == expected


def test_a_path_right_inside_a_step_still_ties_with_one_deeper():
    # ``b/x`` right inside /Step#1 is not the answer when /Step#1/c/b/x
    # matches too: its group /Step#1/b does not hold the other.
    paths = ["/Step#1/b/x", "/Step#1/c/b/x"]
    variables = [VariableInfo(p, (2,), np.dtype("f4")) for p in paths]
    with pytest.raises(AmbiguousNameError):
        resolve("b/x", variables, "f", "/Step#1")
    nearer = [*variables, VariableInfo("/Step#1/x", (2,), np.dtype("f4"))]
    assert resolve("x", nearer, "f", "/Step#1").path == "/Step#1/x"
    # Likewise right inside the root, with no context.
    at_root = [VariableInfo(p, (2,), np.dtype("f4")) for p in ("/b/x", "/c/b/x")]
    with pytest.raises(AmbiguousNameError):
        resolve("b/x", at_root, "f")


@given(
    st.lists(
        st.lists(st.sampled_from(["a", "b", "Step#0", "x"]), min_size=1, max_size=4),
        min_size=1,
        max_size=12,
        unique_by=tuple,
    )
)
def test_the_topmost_matches_are_those_no_others_group_holds(paths):
    """The topmost matches, found by prefix lookups (so 720 steps' matches
    cost 720 lookups), equal the definition taken pair by pair: a match is
    dropped when another's group holds it, deeper by a level at least."""
    from quarry.expr.names import _topmost

    matches = [(tuple(p), VariableInfo("/" + "/".join(p), (1,), np.dtype("f4"))) for p in paths]

    def holds(outer, inner):
        group = outer[:-1]
        return len(inner) > len(outer) and inner[: len(group)] == group

    want = [m for m in matches if not any(holds(o[0], m[0]) for o in matches if o is not m)]
    assert _topmost(matches) == want


def test_an_ambiguous_name_over_many_steps_is_spelled_only_when_shown():
    """A series catches the ambiguity of a bare name over its steps and asks
    each step; the spellings (a search per candidate) are made only when the
    message is read, and the error crosses a process boundary spelled."""
    import pickle

    many = [VariableInfo(f"/Step#{s}/x", (4,), np.dtype("f4")) for s in range(3)]
    with pytest.raises(AmbiguousNameError) as err:
        resolve("x", many, "run.h5")
    assert "spellings" not in vars(err.value)  # not worked out yet
    again = pickle.loads(pickle.dumps(err.value))
    assert str(again) == str(err.value)
    assert again.spellings == ["Step#0.x", "Step#1.x", "Step#2.x"]
