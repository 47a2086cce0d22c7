"""Sphinx configuration: ``make docs`` builds the HTML and runs the examples.

The topic pages include the README's sections (one text, no copies to drift),
the API reference comes from the docstrings (numpy style, through napoleon),
and ``sphinx-build -b doctest`` runs every ``{doctest}`` block as a test.
"""

import quarry

project = "Quarry"
author = "the Quarry developers"
copyright = "the Quarry developers, BSD-3-Clause"
release = version = quarry.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["substitution"]
myst_substitutions = {"version": release}
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = False
napoleon_numpy_docstring = True

# Only the pages' own {doctest} blocks run here; the docstrings' examples already
# run under pytest --doctest-modules, each in its own temporary directory.
doctest_test_doctest_blocks = ""

html_theme = "alabaster"
html_title = f"Quarry {release}"
