"""The ``quarry`` command.

    quarry index FILE... [--vars a,b] [--bins N] [--precision P] [--block-size B] [--force]
    quarry query FILE QUERY [--count | --ids | --coords | --values a,b] [--out F] [--json]
                            [--path P]
    quarry query FILE... QUERY [--per-step] [--plot F.png] [--path GLOB]   (files, steps)
    quarry query FILE... --batch QUERIES.txt [--per-step] [--path P]
    quarry track FILE... QUERY --at-step S [--id-var id] [--values a,b] [--json] [--out F.h5]
    quarry info FILE [--json] [--resolve NAME [--path P]]
    quarry verify FILE... [--json]
    quarry reorg FILE... --vars a,b [--bin-size S,.. | --bins N] [--path P] [--json]
    quarry interp FILE --field NAME=FILE[:VAR][SUB]... --at x,y,z [--grid G] [--where Q] [--out F]
    quarry hist FILE... VAR[,VAR2[,VAR3]] [--where Q] [--bins N | --edges E] [--json] [--png F]
    quarry plot FILE X Y --where Q --png F
    quarry register FILE --dtype <f4 --shape NX,NY,NZ [--order C|F] [--offset B]
    quarry serve ROOT... [--host H] [--port P] [--catalog F] [--token-file F] [--auto-index]
    quarry demo [--dir DIR]

Errors print one line (a query error also prints the query with a caret) and
exit non-zero: 2 for a malformed query or bad arguments, 1 for anything else.
``--debug`` shows the traceback. Heavy modules are imported only by the
commands that need them, so a count starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol, cast

from quarry.errors import UsageError

#: The commands, in the order ``quarry --help`` lists them, with their line
#: there. Each is a module of :mod:`quarry.cli.commands` with
#: ``add_arguments(parser)`` and ``run(args) -> int``.
COMMANDS = {
    "index": "build the index of a file (or one per file of many)",
    "query": "evaluate a query",
    "hist": "histogram of 1-3 variables, optionally of a selection",
    "plot": "all rows as a grey density, a selection in colour",
    "track": "select particles at one step and follow their ids through every step",
    "info": "variables, shapes, dtypes, and what is indexed",
    "register": "describe a raw binary file (dtype, shape, ...) so it can be queried",
    "reorg": "write a copy of variables clustered by multi-dimensional bins (MDBin)",
    "interp": "interpolate mesh fields at the selected particles' positions",
    "verify": "check every indexed value against the CRCs its index recorded, and the "
    "reorganised copy whole (exit 1 if any changed)",
    "serve": "serve files to many clients: a catalog, an HTTP API and a web page",
    "demo": "generate a sample, index it, query it, draw a histogram",
}

#: The commands that share their work over the ranks of an mpiexec run.
ON_RANKS = ("index", "query", "reorg")


class _Version(argparse.Action):
    """``--version``: the version compiled into the Rust core (the Cargo
    workspace's), printed without parsing the rest of the command line."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        import quarry

        print(f"quarry {quarry.__version__}")
        parser.exit()


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, at the width :func:`shutil.get_terminal_size`
    gives, found without importing shutil: argparse imports it (and with it
    bz2, lzma and zlib, a few ms) for every option added, on every command."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_columns() - 2)

    def _format_args(self, action: argparse.Action, default_metavar: str) -> str:
        # Files then one query ("FILE... QUERY"), not argparse's repeat of the
        # metavar for nargs="+" ("FILE... QUERY [FILE... QUERY ...]"), which
        # reads as several file-and-query pairs.
        if action.nargs == "+" and action.metavar == "FILE... QUERY":
            return "FILE... QUERY"
        return super()._format_args(action, default_metavar)


def _terminal_columns() -> int:
    """The columns :func:`shutil.get_terminal_size` reports: ``$COLUMNS``
    where it is a positive integer, else the terminal's, else 80."""
    import os

    with contextlib.suppress(KeyError, ValueError):
        columns = int(os.environ["COLUMNS"])
        if columns > 0:
            return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # no stdout, or not a terminal
        return 80


class Command(Protocol):
    """What a module of :mod:`quarry.cli.commands` defines."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _command(name: str) -> Command:
    """The module of command ``name``, imported now (by ``__import__``, not
    ``importlib.import_module``, so that ``python -X importtime`` lists it)."""
    module = f"quarry.cli.commands.{name}"
    __import__(module)
    return cast(Command, sys.modules[module])


class _Parser(argparse.ArgumentParser):
    """argparse's parser, refusing a command line in one line (what the
    README promises), where argparse prints its usage block first, and under
    mpiexec from rank 0 alone; its commands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        from quarry.parallel.mpi import launched_rank

        said = f"{self.prog}: error: {message}; see '{self.prog} --help'\n"
        self.exit(2, said if launched_rank() == 0 else None)


def _parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the command line ``argv``. Where it names a command,
    only that command is made, with its options, so that only its module is
    imported (and no time goes to the others' parsers: a parser costs a
    few lookups of argparse's translations); otherwise every command is
    made with its options, for ``quarry --help`` and the message naming the
    commands."""
    named = next((a for a in argv if not a.startswith("-")), None)
    p = _Parser(
        prog="quarry",
        description="Exact, fast range queries over scientific array files.",
        formatter_class=_Formatter,
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, line in COMMANDS.items():
        if named == name or named not in COMMANDS:
            command = sub.add_parser(name, help=line, formatter_class=_Formatter)
            _command(name).add_arguments(command)
    return p


#: Options taking a number, or numbers separated by commas, which may start
#: negative.
NUMBER_LISTS = ("--range", "--edges", "--bin-size", "--fill-value")


def _negative_lists_joined(argv: list[str]) -> list[str]:
    """``--range -1,1`` as ``--range=-1,1``: argparse reads a value starting
    with ``-`` that is not one plain number (``-1,1``, ``-1e30``, ``-inf``) as
    another option, and refuses ``--range`` for want of its argument.

    Examples
    --------
    >>> _negative_lists_joined(["hist", "f.h5", "x", "--range", "-1,1", "--bins", "4"])
    ['hist', 'f.h5', 'x', '--range=-1,1', '--bins', '4']
    >>> _negative_lists_joined(["hist", "f.h5", "x", "--range", "--json"])
    ['hist', 'f.h5', 'x', '--range', '--json']
    >>> _negative_lists_joined(["register", "f.bin", "--fill-value", "-1e30"])
    ['register', 'f.bin', '--fill-value=-1e30']
    """
    import re

    out: list[str] = []
    for word in argv:
        if out and out[-1] in NUMBER_LISTS and re.match(r"-(\d|\.\d|inf)", word):
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    # Quarry makes no BLAS calls, and NumPy's OpenBLAS starts a thread per
    # core at import that busy-waits for work: ~0.1 s of CPU a process on 2
    # cores, taken from the command's own workers. Set before NumPy loads;
    # a user's own setting stands.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    argv = _negative_lists_joined(sys.argv[1:] if argv is None else list(argv))
    args = _parser(argv).parse_args(argv)
    from quarry.errors import QuarryError, QuerySyntaxError

    previous_sigterm = _handle_sigterm()

    # Under mpiexec, what every rank shares (quarry.cli.parallel): the
    # communicator, and whether the ranks agreed to start the work.
    args.comm = None
    args.work_started = False
    try:
        from quarry.parallel.mpi import launched_ranks, world

        if launched_ranks() > 1:
            args.comm = world()
            if args.command not in ON_RANKS:
                raise QuarryError(
                    f"quarry {args.command} runs in one process; start it without mpiexec "
                    "(index, query and reorg share work over ranks)"
                )
        if args.command == "demo":
            return _command("demo").run(args)
        from quarry.cli.options import refuse_writing_over_inputs
        from quarry.parallel import threads

        refuse_writing_over_inputs(args)
        with threads(getattr(args, "jobs", None)):
            code = _command(args.command).run(args)
            # A command with no collective work (a batch) still meets the
            # others, so a rank that failed alone is not left waiting.
            from quarry.cli.parallel import start_work

            start_work(args)
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return code
    except BrokenPipeError:
        return _reader_went_away()
    except UsageError as exc:  # no traceback with --debug: the command line was wrong
        return _fail(args, exc, 2, f"error: {exc}")
    except QuerySyntaxError as exc:
        if args.debug:
            raise
        return _fail(args, exc, 2, f"error in query: {exc}")
    except (QuarryError, OSError) as exc:
        if args.debug:
            raise
        return _fail(args, exc, 1, f"error: {exc}")
    except KeyboardInterrupt:
        # As on SIGTERM: a Ctrl-C landing between a temporary's creation and
        # the block that aborts it on error would leave the file behind.
        layout = sys.modules.get("quarry.index.layout")  # loaded by whatever wrote one
        if layout is not None:
            layout.remove_own_temporaries()
        print("quarry: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from quarry.cli.parallel import StoppedBeforeWorkError, report_stop

        if isinstance(exc, StoppedBeforeWorkError):  # another rank failed before the work
            return report_stop(args.comm, exc.code, exc.message)
        _abort_other_ranks(args, exc)
        raise
    finally:
        _restore_sigterm(previous_sigterm)


def _handle_sigterm() -> Any:
    """On SIGTERM (what batch schedulers send before killing a job), remove
    the temporary files this process's builds are writing, say so, and exit
    with 128 + 15; the old index stays. Returns the handler it replaced
    (None where handlers cannot be set: outside the main thread).

    The handler ends the process itself rather than raising, as Ctrl-C's
    KeyboardInterrupt does: an exception raised wherever the signal lands
    (inside a weakref callback, under a call from the Rust core back into
    Python) can be swallowed or abort the process, leaving the files behind."""
    import signal
    import threading

    ending = threading.Lock()

    def terminate(signum: int, frame: object) -> None:
        import os

        from quarry.index.layout import remove_own_temporaries

        # Both the main thread and the watcher (see _watch_for) may get here:
        # the first ends the process, the other waits for it to.
        ending.acquire()
        remove_own_temporaries()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        print("quarry: terminated", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread (the CLI run from a test's thread)
        return None
    _watch_for(signal.SIGTERM, terminate)
    return previous


#: The pipe's ends a watcher thread reads signal numbers from (see
#: :func:`_watch_for`), while one is set.
_WAKEUP: list[int] = []


def _watch_for(signum: int, handler: Any) -> None:
    """Run ``handler`` on a thread of its own as soon as ``signum`` comes,
    while it is still the signal's handler. Python runs a handler on the
    main thread between two bytecodes: a build's one long call into the
    Rust core (a fine --precision makes it minutes) held SIGTERM that long.
    The C-level handler writes the signal's number to the wakeup file at
    once, and the core releases the GIL while it works, so a thread reading
    that file can end the process."""
    import signal
    import threading

    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:
        os.close(read_end)
        os.close(write_end)
        return
    _WAKEUP[:] = [read_end, write_end]

    set_handler: object = handler  # compared with what is set; handler is called

    def watch() -> None:
        with contextlib.closing(os.fdopen(read_end, "rb", buffering=0)) as wakeups:
            while got := wakeups.read(64):  # empty once the write end is closed
                if signum in got and signal.getsignal(signum) is set_handler:
                    handler(signum, None)  # it ends the process

    threading.Thread(target=watch, name="quarry-signals", daemon=True).start()


def _restore_sigterm(previous: Any) -> None:
    import signal

    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
    if _WAKEUP:
        signal.set_wakeup_fd(-1)
        os.close(_WAKEUP[1])  # the watcher reads the end of the file, closes it, and stops
        _WAKEUP.clear()


def _reader_went_away() -> int:
    """The reader of our output left (``quarry query ... | head``): end
    quietly, as Python's documentation advises for SIGPIPE. Output still
    buffered goes to /dev/null so the exit does not fail again on flushing,
    and the status is 1, the one Python itself exits with on EPIPE."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


def _fail(args: argparse.Namespace, exc: BaseException, code: int, message: str) -> int:
    """Report a user's error (``message``, what follows ``quarry: ``) and
    return the exit ``code``. Under MPI, one found before the work began is
    agreed on by every rank and reported once by rank 0 (see
    :mod:`quarry.cli.parallel`); one during the work stops every rank."""
    from quarry.cli.parallel import stop_before_work
    from quarry.errors import ParallelError

    agreed = stop_before_work(args, code, message)
    if agreed is not None:
        return agreed
    comm = getattr(args, "comm", None)
    if not isinstance(exc, ParallelError) or comm is None or comm.rank == 0:
        print(f"quarry: {message}", file=sys.stderr, flush=True)  # every rank raised it: once
    _abort_other_ranks(args, exc)
    return code


def _abort_other_ranks(args: argparse.Namespace, exc: BaseException) -> None:
    """Under MPI, an error that reached here may have struck this rank alone
    (a read of its blocks failed) while the others wait for it in a gather:
    end them all rather than hang. Errors every rank raises together (a build
    that failed somewhere is reported by all) return normally."""
    from quarry.errors import ParallelError

    comm = getattr(args, "comm", None)
    if comm is None or isinstance(exc, ParallelError):
        return
    print(f"quarry: rank {comm.rank} failed; stopping every rank", file=sys.stderr, flush=True)
    comm.Abort(1)


if __name__ == "__main__":
    sys.exit(main())
