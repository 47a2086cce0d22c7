"""The one version number: the Cargo workspace's, compiled into the Rust core
(and written by maturin into the distribution's metadata). A core built from a
source older than that export says "unknown", as an uninstalled tree used to.

>>> from quarry.version import VERSION
>>> VERSION.count(".") >= 2
True
"""

from quarry import _core

VERSION: str = getattr(_core, "__version__", "0.0.0+unknown")
