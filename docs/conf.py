"""Sphinx configuration of the rankopt documentation.

Build (warnings are errors, nothing is fetched from the network)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import rankopt  # noqa: E402

project = "rankopt"
author = "the rankopt developers"
copyright = "the rankopt developers"
version = release = rankopt.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "rankopt_cli",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "examples"]
templates_path: list[str] = []

# Markdown pages: headings get anchors for links such as page.md#section
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]

# API reference: pages are written by hand (no generated stub files); each
# object is documented once, under its public name.
autosummary_generate = False
autodoc_default_options = {"members": False}
autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# no intersphinx: the build must not need the network
html_theme = "pydata_sphinx_theme"
html_title = f"rankopt {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"index": []}
html_show_sourcelink = False
pygments_style = "sphinx"
