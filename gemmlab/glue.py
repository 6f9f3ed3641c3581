"""glue(): hand a computed value to the book's prose, the way myst-nb's glue does.

Same output format as `myst_nb.glue` (a display with "scrapbook" metadata), written here so that
chapters run on Colab and on GPU machines where myst-nb (and Sphinx) are not installed. The site
build reads these outputs and `{glue:text}`name`` in markdown shows the value.
"""
from __future__ import annotations

import ast
from typing import Any

GLUE_PREFIX = "application/papermill.record/"


def plain_text(value: str) -> str:
    """The text/plain to store for the string `value` so that the site shows `value` itself. The
    `{glue:text}` role passes stored text through ast.literal_eval first, which would show '+0.7' as
    0.7, '0.50' as 0.5 and '3.8e-04' as 0.00038; such text is stored quoted (its repr), the rest as is."""
    try:
        shown = ast.literal_eval(value)
    except Exception:  # not a Python literal: shown as it is
        return value
    return value if str(shown) == value else repr(value)


def glue(name: str, value: Any, display: bool = False) -> None:
    """Record `value` under `name` for the prose; shown in the notebook only if `display`."""
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    if isinstance(value, str):  # the text itself, quoted only where the site would change it
        bundle, metadata = {"text/plain": plain_text(value)}, {}
    else:
        bundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
