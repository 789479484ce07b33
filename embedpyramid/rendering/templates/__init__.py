"""The Jinja2 templates of the HTML report, shipped beside this module as package data.

``report.html.j2`` is the page (its style sheet is ``report.css``), ``table.html.j2`` the macro
of one table (:func:`embedpyramid.rendering.tables.html_table`). Autoescaping is on in every
template: text from the data reaches the page escaped, unless the caller hands it over as
:class:`markupsafe.Markup` (the SVG figures, which :mod:`embedpyramid.rendering.svg` writes
escaped). A misspelt variable is an error, not an empty string. The files of this folder are
part of this package's code version (:mod:`embedpyramid.code_version`), so a template edit makes
the report stale like a code edit. Jinja2 is imported by the first render, not by this module:
the Dagster definitions import the rendering package and need no template.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2


@cache
def environment() -> jinja2.Environment:
    """The templates of this folder, autoescaped; block tags leave no blank lines behind."""
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader(__name__, "."), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=True)


def render(name: str, **context: Any) -> str:
    """Template ``name`` of this folder rendered with ``context``."""
    return environment().get_template(name).render(**context)


def macro(name: str, macro_name: str) -> Any:
    """Macro ``macro_name`` of template ``name``: a callable that returns markup."""
    return getattr(environment().get_template(name).module, macro_name)
