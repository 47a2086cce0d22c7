"""Query execution: plans evaluated over blocks, and the selections they yield."""

from quarry.query.execute import Executor, Table
from quarry.query.selection import Selection
from quarry.query.stats import QueryStats

__all__ = ["Executor", "QueryStats", "Selection", "Table"]
