"""Outputs: what a query's answer is written as."""

from quarry.outputs.writers import OutputError, write_positions, write_values

__all__ = ["OutputError", "write_positions", "write_values"]
