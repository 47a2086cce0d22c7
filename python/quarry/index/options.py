"""Index build options and defaults (kept apart from the builder, which is
heavier to import, so queries never load it)."""

from __future__ import annotations

from quarry.errors import UsageError
from quarry.records import record

DEFAULT_BLOCK_LEN = 1 << 20
DEFAULT_BINS = 1024
DEFAULT_PRECISION = 2
#: The most equal-weight bins a variable may ask for: each block holds an
#: entry per non-empty bin, and the edges are computed in memory (2^40
#: bins asked of the service tried to allocate 8 TiB).
MAX_BINS = 1 << 20


@record
class BuildOptions:
    """How to bin and cut variables.

    ``bins``: equal-weight bins per variable, cut at quantiles of a sample;
    they bound how many rows a range on any literal must check.
    ``precision``: every decimal with this many significant digits inside the
    sample's range is an edge too (FastBit's precision bins), so ranges on
    typed literals (``1.5 < energy < 1.6``, ``x > 140``) need no check at all;
    0 turns decimal edges off.
    ``block_len``: rows per block, the unit of parallel work.
    """

    bins: int = DEFAULT_BINS
    precision: int = DEFAULT_PRECISION
    block_len: int = DEFAULT_BLOCK_LEN

    def __post_init__(self) -> None:
        # UsageError (a ValueError): a wrong option, exit 2 at the command line.
        if not 1 <= self.bins <= MAX_BINS:
            raise UsageError(f"bins must be 1 to {MAX_BINS:,}, got {self.bins}")
        if not 1 <= self.block_len < 2**32:
            raise UsageError(f"block length must be in 1..2^32-1, got {self.block_len}")
        if not 0 <= self.precision <= 6:
            raise UsageError(f"precision must be 0..6 significant digits, got {self.precision}")


def default_index_path(source: str) -> str:
    """Where the index of ``source`` lives unless told otherwise: beside it.

    Examples
    --------
    >>> default_index_path("/data/run.h5")
    '/data/run.h5.qidx'
    """
    return source + ".qidx"
