"""Whether the front end can keep the live widget over a refresh of its saved output: `keeps_live_view()`.

A refresh of a running run's saved output (`RunWidget.snapshot`) is an update of the output that holds the
widget. rlmnb's JupyterLab extension renders that output and keeps hosting the same live view across updates;
without it, ipywidgets' renderer builds a new view of the widget on every update of its output (its
`renderModel`), so the whole tree flickers, and opened rows close, at every refresh. The kernel cannot ask the
front end while a cell runs (its messages wait until the cell ends), so it looks where this Jupyter installation
keeps lab extensions and their switches: the extension must be installed (`labextensions/rlmnb-jupyterlab`
on the Jupyter data path) and not disabled (`labconfig/page_config.json` on the config path).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["EXTENSION", "RENDERER_PLUGIN", "keeps_live_view"]

EXTENSION = "rlmnb-jupyterlab"  # the lab extension's package name (extension/package.json)
RENDERER_PLUGIN = f"{EXTENSION}:trajectory"  # its MIME renderer's plugin id (extension/src/index.ts)


def keeps_live_view() -> bool:
    """True when rlmnb's lab extension is installed and enabled for this Jupyter (see module docs): refreshing
    the saved output mid-run then leaves the live view as it is. False elsewhere (no extension, disabled, or
    jupyter_core missing), where each refresh would re-create the view."""
    try:
        from jupyter_core.paths import jupyter_config_path, jupyter_path
    except ImportError:
        return False
    installed = any((Path(folder) / EXTENSION / "package.json").is_file() for folder in jupyter_path("labextensions"))
    return installed and not _disabled(jupyter_config_path())


def _disabled(config_dirs: list[str]) -> bool:
    """Whether a `labconfig/page_config.json` disables the extension or its renderer (JupyterLab merges them)."""
    for folder in config_dirs:
        try:
            data = json.loads((Path(folder) / "labconfig" / "page_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        switches = data.get("disabledExtensions") if isinstance(data, dict) else None
        names = switches if isinstance(switches, list) else [k for k, on in (switches or {}).items() if on]
        if EXTENSION in names or RENDERER_PLUGIN in names:
            return True
    return False
