"""The live widget's buttons (rlmnb.views._actions): where they appear, what they carry, and where they never go."""

from __future__ import annotations

import html
import re

from rlmnb import RLM
from rlmnb.testing import ScriptedLM
from rlmnb.views import render_html
from rlmnb.views._actions import FRAME_CODE, copy_button, insert_button
from rlmnb.views._fold import RunTree
from rlmnb.views._html import call_html, turn_html

HOSTILE = '"><img src=x onerror=alert(1)><script>alert(2)</script>'


def _tree() -> RunTree:
    root = ScriptedLM(["```python\nr = llm_query_batched(['" + HOSTILE.replace("'", "\\'") + "', 'q1'])\n```",
                       "```python\nsubmit(len(r))\n```"], name="root")
    result = RLM(root, ScriptedLM(lambda m: "re: " + m[-1]["content"], name="sub"), sandbox="local").run("q", text="t")
    assert result.status == "submitted"
    tree = RunTree()
    for event in result.trajectory.events:
        tree.add(event)
    return tree


def test_the_static_html_has_no_buttons_and_no_handlers() -> None:
    page = render_html(_tree(), full_page=True)
    assert "<button" not in page and "onclick" not in page and "data-rlmnb-action" not in page


def test_live_pieces_carry_the_buttons_and_escape_what_the_model_wrote() -> None:
    tree = _tree()
    run_id = tree.root_id
    assert run_id is not None
    turn = turn_html(tree.turn_view(run_id, 1), status="submitted", actions=True)
    assert turn.count('data-rlmnb-action="copy"') == 1 and turn.count('data-rlmnb-action="insert"') == 1
    key = next(iter(tree.groups))
    hostile, plain = tree.call_views(key)
    row = call_html(hostile, actions=True)
    assert row.count('data-rlmnb-action="copy"') == 2 and "copy prompt" in row and "copy reply" in row
    assert "<img" not in row and "<script>" not in row and html.escape(HOSTILE) in row
    assert f'data-rlmnb-key="{hostile["call_id"]}"' in row
    # what the buttons copy is the <pre> of their block, read when clicked: never text inside the handler
    handlers = re.findall(r'onclick="([^"]*)"', row + turn)
    assert len(handlers) == 3 and len(set(handlers)) == 1 and "q1" not in handlers[0] and "alert" not in handlers[0]


def test_insert_buttons_are_hidden_until_the_extension_shows_them() -> None:
    button = insert_button("open as DataFrame", "insert a cell", FRAME_CODE)
    assert "display:none" in button and 'class="rlmnb-live-insert"' in button
    assert 'data-rlmnb-code="{run}.to_frame()  # one row per sub-call"' in button
    assert "display:none" not in copy_button("copy")  # copying works without the extension
