"""Sphinx configuration of the manual: Markdown pages (MyST), the furo theme, and an API
reference from the docstrings (autodoc).

    sphinx-build -W --keep-going -n -b html docs build/docs
"""
from sphinx.ext import napoleon

from slim_deploy.image_classifier import verbosity

# autodoc imports the modules, and with them TensorFlow: its start-up noise stays out of the
# build's output, as it does for the entry scripts.
verbosity.start()

project = 'slim-deploy'
extensions = ['myst_parser', 'sphinx.ext.autodoc']
source_suffix = {'.md': 'markdown'}
html_theme = 'furo'
html_title = 'slim-deploy'
html_show_copyright = False
html_static_path = ['_static']
html_css_files = ['tables.css']

# Anchors for headings down to ####, named as GitHub names them, so that links such as
# `clusters.md#sync-or-async` work on GitHub and in the built site alike.
myst_heading_anchors = 4
# `--flag` stays two hyphens in running text.
smartquotes = False
# A code block without a language is a command or program output: left unhighlighted.
highlight_language = 'text'

# `x` in a docstring is code, as the docstrings mean it.
default_role = 'code'
_NAPOLEON = napoleon.Config(napoleon_numpy_docstring=False)
autodoc_member_order = 'bysource'


def _google_sections(app, what, name, obj, options, lines):
    """Reads the Google-style sections (Args:, Returns:) of the docstrings of functions,
    methods and classes as napoleon does. A property's or attribute's docstring is left
    as it is: napoleon would take the text before a colon in its first line for a type."""
    if what in ('function', 'method', 'class', 'exception'):
        lines[:] = napoleon.GoogleDocstring(lines, _NAPOLEON, app, what, name, obj,
                                            options).lines()


def setup(app):
    app.connect('autodoc-process-docstring', _google_sections)
