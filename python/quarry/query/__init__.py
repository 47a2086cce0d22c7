"""Query execution: plans evaluated over blocks, and the selections they yield."""

from quarry.query.execute import Executor, Table
from quarry.query.selection import Selection

__all__ = ["Executor", "Selection", "Table"]
