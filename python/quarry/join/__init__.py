"""The interpolation join (SCJoin, after SDS-MD): mesh fields in any format
Quarry reads, interpolated at the positions of selected particles.

:mod:`.grid` says where a field's values lie (``--grid`` text) and locates
particles in its cells; :mod:`.coords` finds a field's coordinate variables
in each format; :mod:`.field` names and opens a field and reads the box of
it that particles touch; :mod:`.groups` reads it by the MDBin groups of the
particles' reorganised copy instead; :mod:`.workers` shares a field's
particles among threads, in bands along its axis 0, each band reading its
own region; :mod:`.interpolate` weighs the nodes and makes the table. The
join takes a selection as the :class:`~quarry.join.interpolate.Selected`
protocol, so this stage sits below :mod:`quarry.query`, whose
``Selection.interpolate`` calls it.
"""

from quarry.join.field import Field, FieldSource
from quarry.join.grid import Axis, GridSpec, parse_grid
from quarry.join.interpolate import METHODS, OUTSIDE, Interpolated, Selected, interpolate

__all__ = [
    "METHODS",
    "OUTSIDE",
    "Axis",
    "Field",
    "FieldSource",
    "GridSpec",
    "Interpolated",
    "Selected",
    "interpolate",
    "parse_grid",
]
