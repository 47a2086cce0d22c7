"""The ``quarry`` command line."""

# Importing _clash checks for the Minecraft library ``quarry`` in our package
# directory. Also here: when that library was installed after this package, its
# empty ``quarry/__init__.py`` replaced ours, and this is the first of our code
# that the ``quarry`` command runs.
from quarry import _clash  # noqa: F401
