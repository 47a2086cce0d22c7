"""Query grammar -> syntax tree -> plan."""

from quarry.expr.parser import parse

__all__ = ["parse"]
