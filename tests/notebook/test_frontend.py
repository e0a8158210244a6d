"""The live view is not re-created by refreshes of its saved output (issue 45): where rlmnb's lab extension does
not host the widget, ipywidgets builds a new view of it on every update of its output, so a running run's saved
output is refreshed mid-run only where the extension is installed and enabled (`frontend.keeps_live_view`); the
output holding the widget is then updated twice in all: when the widget takes the placeholder's place, and when
the run ends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from test_magic import magics, shell  # noqa: F401  (shell is a fixture)

from rlmnb._notebook import frontend
from rlmnb.testing import ScriptedLM

pytest.importorskip("ipywidgets")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def jupyter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A Jupyter data folder and config folder of their own (the extension's install place and its switches)."""
    data, config = tmp_path / "data", tmp_path / "config"
    (config / "labconfig").mkdir(parents=True)
    import jupyter_core.paths as paths

    monkeypatch.setattr(paths, "jupyter_path", lambda *parts: [str(data.joinpath(*parts))])
    monkeypatch.setattr(paths, "jupyter_config_path", lambda: [str(config)])
    return data, config


def test_the_extension_keeps_the_view_only_where_installed_and_enabled(jupyter: tuple[Path, Path]) -> None:
    data, config = jupyter
    assert frontend.keeps_live_view() is False  # not installed
    (data / "labextensions" / frontend.EXTENSION).mkdir(parents=True)
    (data / "labextensions" / frontend.EXTENSION / "package.json").write_text("{}")
    assert frontend.keeps_live_view() is True
    page = config / "labconfig" / "page_config.json"
    for switches, kept in [({frontend.EXTENSION: True}, False), ({frontend.EXTENSION: False}, True),
                           ([frontend.RENDERER_PLUGIN], False), ({"other-extension": True}, True), ("{not json", True)]:
        page.write_text(switches if isinstance(switches, str) else json.dumps({"disabledExtensions": switches}))
        assert frontend.keeps_live_view() is kept, switches


class _Paced(ScriptedLM):
    """A root model whose second turn waits for the view's pusher to draw three times after it began (the
    moment a refresh of the saved output is due), so whether one happened does not depend on timing."""

    views: list[Any]

    async def acomplete(self, messages: Any, **params: Any) -> Any:
        if len(self.requests) == 1 and self.views:
            view = self.views[0]
            goal = view.pushes + 3
            while view.pushes < goal:  # the pusher runs every widget_interval (0.01 s here)
                await asyncio.sleep(0.005)
        return self.complete(messages, **params)


@pytest.mark.parametrize("kept", [False, True])
def test_a_running_run_updates_its_output_mid_run_only_where_the_view_is_kept(
        kept: bool, shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setattr(frontend, "keeps_live_view", lambda: kept)
    root = _Paced(["```python\nprint(inputs['text'][:5])\n```", "```python\nprint('two')\n```",
                   "```python\nsubmit('alpha')\n```"], name="root")
    root.views = []
    shell.user_ns.update(root=root, text="alpha beta")
    host = magics(shell)
    host.widget_interval = 0.01
    new_view = host._new_view

    def spy(*args: Any) -> Any:
        view = new_view(*args)
        root.views.append(view)
        return view

    host._new_view = spy  # type: ignore[method-assign]
    assert shell.run_cell_magic("rlm", "-m root -i text", "Which word?") == "alpha"
    (view,) = root.views
    holding = [m for m in shell.published if m.get("update") and WIDGET_VIEW in m["data"]]
    if kept:  # the extension hosts the same view over each refresh
        assert view.snapshots >= 1 and len(holding) == 2 + view.snapshots
    else:  # no refresh: ipywidgets would have built a new view at each
        assert view.snapshots == 0 and len(holding) == 2
    assert "alpha" in holding[-1]["data"]["text/html"]  # the final state is saved either way
