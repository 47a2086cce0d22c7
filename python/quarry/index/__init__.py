"""Index layout on disk, build orchestration, loading and staleness."""

from quarry.index.build import BuildOptions, build_index, default_index_path
from quarry.index.store import IndexStore

__all__ = ["BuildOptions", "IndexStore", "build_index", "default_index_path"]
