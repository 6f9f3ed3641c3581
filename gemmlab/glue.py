"""glue(): hand a computed value to the book's prose, the way myst-nb's glue does.

Same output format as `myst_nb.glue` (a display with "scrapbook" metadata), written here so that
chapters run on Colab and on GPU machines where myst-nb (and Sphinx) are not installed. The site
build reads these outputs and `{glue:text}`name`` in markdown shows the value.
"""
from __future__ import annotations

from typing import Any

GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, value: Any, display: bool = False) -> None:
    """Record `value` under `name` for the prose; shown in the notebook only if `display`."""
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    if isinstance(value, str):  # show the text itself, not its repr with quotes
        bundle, metadata = {"text/plain": value}, {}
    else:
        bundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
