"""Any text, from anyone: parsing, planning and evaluation raise only
QuarryError subclasses, and the CLI exits 1 or 2 with a message, never a
traceback. Arbitrary Unicode (surrogates too: argv holds them for undecodable
bytes), and valid queries mutated by a grammar-aware strategy."""

from __future__ import annotations

import contextlib
import gc
import os
import tempfile
import time

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quarry
from oracle import oracle_ids
from quarry.cli.main import main
from quarry.errors import QuarryError
from quarry.expr import parse
from quarry.expr.parser import MAX_DEPTH, parse_expression, parse_variable
from quarry.expr.plan import RangeLeaf

ANY_CHARACTER = st.characters(codec=None, exclude_categories=())
ANY_TEXT = st.text(ANY_CHARACTER, max_size=60)

VALID = [
    "energy > 1.3",
    "1.2 < energy <= 1.3 && x < 100",
    "!(x > 1) || énergie >= -2.5e-3",
    "sqrt(x**2 + y**2) > 4*std(x)",
    "max(energy, x) > 1 and not id == 3",
    "`g/x` + /g/y * 2 != inf",
    "g.x[0:25] > mean(g.x) || x[::2] < 0",
    "id >= 18446744073709551615 or id < -9223372036854775809",
]
PIECES = [
    "(",
    ")",
    "!",
    "-",
    "**",
    "&&",
    "||",
    ",",
    "[",
    "]",
    ":",
    "`",
    "/",
    ".",
    "é",
    "e\u0301",
    "中",
    "😀",
    "\u200b",
    "\x00",
    "\udcff",
    " ",
    "1e999999999",
    "9" * 30,
    "nan",
    "x",
    "mean(",
]


@st.composite
def mutated(draw):
    """A valid query with a few pieces inserted, deleted or replaced."""
    text = draw(st.sampled_from(VALID))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace", "repeat"]))
        piece = draw(st.one_of(st.sampled_from(PIECES), ANY_TEXT))
        if action == "insert":
            text = text[:at] + piece + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 5)) :]
        elif action == "replace":
            text = text[:at] + piece + text[at + len(piece) :]
        else:
            text = text[:at] + piece * draw(st.integers(2, 300)) + text[at:]
    return text


@pytest.fixture(scope="module")
def dataset():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.h5")
        rng = np.random.default_rng(7)
        with h5py.File(path, "w") as f:
            f["energy"] = rng.normal(1, 0.5, 50)
            f["x"] = rng.normal(0, 3, 50)
            f["y"] = rng.normal(0, 3, 50)
            f["id"] = np.arange(50, dtype=np.uint64)
            f["énergie"] = rng.normal(0, 1, 50)
            f["g/x"] = rng.normal(0, 1, 50)
            f["g/y"] = rng.normal(0, 1, 50)
        with quarry.open(path) as ds:
            ds.build_index(["energy", "x", "id"], block_len=16)
        with quarry.open(path) as ds:
            yield path, ds


@pytest.fixture(autouse=True, scope="module")
def frozen_heap():
    """Earlier tests' objects set aside from the collector (``gc.freeze``):
    each span's collection then walks this module's objects alone. Over the
    whole suite it walked a quarter of a million, 0.17 s a collection: four
    minutes of the any-text test's examples."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def work_started() -> float:
    """This thread's CPU seconds now, the start of a span measured with
    ``time.thread_time()``: its work alone, whatever else the machine or the
    process runs (the process's time counted other threads', and a collection
    of what earlier tests left took one parse past 1 s). Collected first, so
    the span pays for no one else's garbage."""
    gc.collect()
    return time.thread_time()


def _contract(ds, text: str, path: str | None = None) -> None:
    with contextlib.suppress(QuarryError):
        ds.query(text, path).count()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(ANY_TEXT, mutated()))
def test_any_text_raises_only_quarry_errors(dataset, text):
    _, ds = dataset
    start = work_started()
    _contract(ds, text)
    for other in (parse_expression, parse_variable):
        with contextlib.suppress(QuarryError):
            other(text)
    _contract(ds, "x > 0", path=text)  # a context path is text from the user too
    assert time.thread_time() - start < 1.0, text


def test_every_valid_seed_query_answers(dataset):
    _, ds = dataset
    for text in VALID:
        assert ds.query(text).count() >= 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("(" * 5000 + "x > 1" + ")" * 5000, f"nests deeper than {MAX_DEPTH} levels"),
        ("!" * 20000 + "x > 1", f"nests deeper than {MAX_DEPTH} levels"),
        ("x" + " + 1" * 20000 + " > 1", f"nests deeper than {MAX_DEPTH} levels"),
        ("x > " + "9" * 5000, "more than 4,300 digits"),
        ("x > 1" + " " * 1_000_000, "longer than 1,000,000 characters"),
        ("x > 1" + " || x > 1" * 6000, "more than 10,000 names and numbers"),
    ],
)
def test_limits_are_stated_errors_with_a_caret(text, message):
    start = work_started()
    with pytest.raises(quarry.QuerySyntaxError, match=message) as err:
        parse(text)
    assert time.thread_time() - start < 1.0
    shown, caret = str(err.value).splitlines()[1:3]
    assert len(shown) < 120 and caret.endswith("^")


def test_long_flat_chains_and_names_answer_fast(dataset):
    _, ds = dataset
    x = ds.query("x > 0").values("x")  # only to be sure the file answers
    assert x.size
    cases = [
        " || ".join(f"x > {i / 1000}" for i in range(3000)),
        " && ".join(f"id != {i}" for i in range(3000)),
        "a" * 100_000 + " > 1",
    ]
    for text in cases:
        start = work_started()
        try:
            sel = ds.query(text)
        except quarry.UnknownVariableError as exc:
            assert "a" * 100_000 in str(exc)
        else:
            # 3,000 comparisons of one variable under one operator are one range:
            # one index lookup, not 3,000 (what made such chains take 12 s).
            assert isinstance(sel.plan, RangeLeaf), type(sel.plan)
            sel.count()
        assert time.thread_time() - start < 2.0


def test_huge_literals_keep_their_exact_meaning(dataset):
    path, ds = dataset
    with h5py.File(path) as f:
        energy, ids = f["energy"][:], f["id"][:]
    big = "9" * 400  # beyond every float64 and uint64, yet finite
    assert ds.query(f"energy < {big}").count() == np.count_nonzero(energy < np.inf)
    assert ds.query(f"id < {big}").count() == ids.size
    assert ds.query(f"id > {big}").count() == 0
    assert ds.query("energy < 1e999999999999").count() == np.count_nonzero(energy < np.inf)
    assert ds.query("id > 1e-999999999").count() == np.count_nonzero(ids >= 1)
    assert ds.query("id >= -1e-999999999").count() == ids.size
    # An exponent past what Python's Decimal holds (10**18) is read as well:
    tiny = "1e-99999999999999999999999"
    assert ds.query(f"id > {tiny}").count() == np.count_nonzero(ids >= 1)
    assert ds.query(f"id >= -{tiny}").count() == ids.size
    # A float literal means the float64 nearest it, as in NumPy: 0.0 here.
    assert ds.query(f"energy > {tiny}").count() == np.count_nonzero(energy > float(tiny))
    assert ds.query("energy <= 1e-400").count() == np.count_nonzero(energy <= 0.0)


@pytest.mark.parametrize(
    "query", ["1e999 < energy", "energy >= 1e999", "-1e999 < energy", "id < 1e999", "1e999 > id"]
)
def test_overflowing_literals_equal_the_oracle_on_either_side(dataset, query):
    path, ds = dataset
    with h5py.File(path) as f:
        columns = {"energy": f["energy"][:], "id": f["id"][:]}
    assert ds.query(query).ids().tolist() == oracle_ids(query, columns).tolist()


def test_unicode_names_resolve_normalised(dataset):
    path, ds = dataset
    with h5py.File(path) as f:
        expect = np.count_nonzero(f["énergie"][:] > 0.5)
    assert ds.query("énergie > 0.5").count() == expect
    assert ds.query("e\u0301nergie > 0.5").count() == expect  # typed with a combining accent
    with pytest.raises(quarry.QuerySyntaxError, match="unexpected character '😀'") as err:
        ds.query("énergie > 😀")
    assert str(err.value).splitlines()[2] == "  " + " " * 10 + "^"


# -- the CLI: every text option ---------------------------------------------


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    err = capsys.readouterr().err
    return code, err


def _assert_clean(code: int, err: str, argv: list[str]) -> None:
    assert code in (0, 1, 2), argv
    assert "Traceback" not in err, argv
    if code:
        assert err.startswith(("quarry: ", "usage: ")), (argv, err)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=st.one_of(ANY_TEXT, mutated()))
def test_every_cli_text_option_ends_cleanly(dataset, capsys, tmp_path_factory, text):
    path, _ = dataset
    if text.startswith("-"):
        text = " " + text  # argparse would read it as an option, which is not this test's subject
    batch = tmp_path_factory.mktemp("batch") / "q.txt"
    batch.write_text(f"x > 0\n{text}\n", encoding="utf-8", errors="surrogatepass")
    argvs = [
        ["query", path, text, "--count"],
        ["query", path, "x > 0", "--path", text],
        ["query", path, "x > 0", "--values", text],
        ["query", path, "x > 0", "--coords-of", text],
        ["query", path, "--batch", str(batch)],
        ["hist", path, text, "--bins", "4", "--json"],
        ["hist", path, "x", "--where", text, "--bins", "4", "--json"],
        ["info", path, "--resolve", text],
        ["track", path, text, "--at-step", "0", "--id-var", "id", "--json"],
        ["track", path, "x > 0", "--at-step", "0", "--id-var", text, "--json"],
    ]
    for argv in argvs:
        code, err = _cli(argv, capsys)
        _assert_clean(code, err, argv)


def test_a_derived_definition_is_text_too(tmp_path, capsys):
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(10.0)
    for definition in ["r=sqrt(x", "r=" + "(" * 300 + "x" + ")" * 300, "é=x*2", "=x", "r=😀"]:
        code, err = _cli(["index", str(path), "--derive", definition], capsys)
        _assert_clean(code, err, ["--derive", definition])


@pytest.mark.parametrize(
    ("text", "bad"),
    [("x[?]", "?"), ("Step#0/x[:, 3, ?]", "?"), ("x[..., 3]", "."), ("x[1] !", "!")],
)
def test_a_variable_names_bad_spot_is_under_the_caret(text, bad):
    """The caret of a subscript's error points at the character, whether
    the tokenizer or the parser refuses it."""
    with pytest.raises(QuarryError) as info:
        parse_variable(text)
    assert text[info.value.position] == bad
