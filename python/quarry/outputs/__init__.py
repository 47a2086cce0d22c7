"""Outputs: what a query's answer is written as."""

from quarry.outputs.writers import OutputError, provenance, write_positions, write_values

__all__ = ["OutputError", "provenance", "write_positions", "write_values"]
