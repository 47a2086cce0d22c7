"""Index layout on disk, build orchestration, loading and staleness.

The builder (:mod:`quarry.index.build`) is imported only when an index is
built, so answering a query never loads it.
"""

from quarry.index.options import BuildOptions, default_index_path
from quarry.index.store import IndexStore

__all__ = ["BuildOptions", "IndexStore", "default_index_path"]
