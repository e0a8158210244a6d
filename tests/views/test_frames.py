"""DataFrames the model's code prints (sql() results among them) show as tables in the tree, and the model
still reads text: the sandbox notes each one beside the text it wrote (CodeExecuted.tables), the views cut
the output there and draw a styled, scrollable table with its shape, and the text one click away."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd
import pytest
from sandbox_support import code, observations

from rlmnb import RLM
from rlmnb.events import CodeExecuted, Trajectory
from rlmnb.testing import ScriptedLM
from rlmnb.views import RunTree, render_html
from rlmnb.views._frames import output_parts, shape_text

pytestmark = pytest.mark.usefixtures("stop_the_spare")

TURN = """n = sql('SELECT region, sum(v) AS total FROM sales GROUP BY region ORDER BY region')
print("totals:")
print(n)
s = n.set_index('region')['total']
print(s, "<- as a Series")
print(len(n), "regions")
n.head(1)"""


def _run(kind: str, folder: Path) -> tuple[ScriptedLM, Trajectory]:
    pd.DataFrame({"region": ["north", "south", "north", "<b>east</b>"], "v": [1, 2, 3, 4]}).to_parquet(
        folder / "sales.parquet")
    root = ScriptedLM([code(TURN), code("submit('done')")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox=kind, evidence_check=False).run(
        "q", sales=folder / "sales.parquet")
    return root, result.trajectory


def test_printed_frames_are_noted_beside_the_text_the_model_reads(kind: str, tmp_path: Path) -> None:
    root, trajectory = _run(kind, tmp_path)
    executed = trajectory.of(CodeExecuted)[0]
    assert [t["shape"] for t in executed.tables] == [[3, 2], [3, 1], [1, 2]]  # print(n), the Series, the echo
    frame, series, echoed = executed.tables
    assert frame["columns"] == ["region", "total"] and frame["index"] == ["0", "1", "2"]
    assert frame["rows"] == [["<b>east</b>", "4"], ["north", "4"], ["south", "2"]]
    assert series["series"] and series["columns"] == ["total"] and series["index"] == ["<b>east</b>", "north", "south"]
    for table in executed.tables:
        assert table["text"] in executed.stdout  # the exact text written, in order
    # the model reads the printed text, as it always did
    seen = observations(root)[-1]
    assert frame["text"] in seen and "regions" in seen and "<table" not in seen

    parts = output_parts(executed.stdout, executed.tables)
    assert [k for k, _ in parts] == ["text", "table", "table", "text", "table"]
    assert parts[0][1] == "totals:\n" and parts[3][1].strip().startswith("<- as a Series")


def test_the_tree_draws_them_as_tables_with_their_shape_and_the_text_one_click_away(tmp_path: Path) -> None:
    _root, trajectory = _run("local", tmp_path)
    page = render_html(RunTree(trajectory.events))
    frames = re.findall(r'<div class="rlmnb-frame" data-shape="([\dx]+)">', page)
    assert frames == ["3x2", "3x1", "1x2"]
    first = page.split('class="rlmnb-frame"', 2)[1]
    assert "<th" in first and ">total</th>" in first and ">&lt;b&gt;east&lt;/b&gt;</td>" in first  # escaped
    assert "overflow:auto;max-height:28em" in first  # scrolls when large
    assert "3 rows × 2 columns · as text (what the model read)" in html.unescape(first)
    assert "<b>east</b>" not in page  # recorded text never becomes markup


def test_text_not_found_stays_text_and_shapes_say_what_is_left_out() -> None:
    record = {"text": "   a\n0  1", "shape": [1_000, 40], "columns": ["a"] * 30, "index": ["0"] * 50,
              "rows": [["1"] * 30] * 50, "series": False}
    assert output_parts("clipped … away", [record]) == [("text", "clipped … away")]
    assert output_parts("", []) == [("text", "")]
    assert shape_text(record) == "1,000 rows × 40 columns (the first 50 rows and the first 30 columns shown)"
    assert shape_text({**record, "shape": [1, 1], "rows": [["1"]], "columns": ["a"]}) == "1 row × 1 column"
