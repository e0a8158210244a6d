"""Polars inputs: a DataFrame crosses as Arrow IPC, a LazyFrame stays lazy and crosses as its plan.

Summaries come from the schema and a bounded head; both sandboxes see the same values; the user's
frame is never changed; a lazy plan over Parquet ships zero data bytes to the kernel; a plan that
cannot be serialised fails before any model call and says to collect it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sandbox_support import KINDS, code, run_bound

from rlmnb import RLM, InputError
from rlmnb._ground.config import RLMConfig
from rlmnb.inputs import bind_inputs
from rlmnb.testing import ScriptedLM

pytestmark = pytest.mark.usefixtures("stop_the_spare")


@pytest.fixture(scope="module")
def parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pl") / "sales.parquet"
    n = 50_000
    pl.DataFrame({"id": range(n), "area": [["north", "south", "east"][i % 3] for i in range(n)],
                  "amount": [float(i % 97) for i in range(n)]}).write_parquet(path, row_group_size=10_000)
    return path


def frame() -> pl.DataFrame:
    return pl.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})


def summary_of(**values: Any) -> str:
    return bind_inputs(values, RLMConfig())[1].text


# ---- summaries ----------------------------------------------------------------------------------------------
def test_a_polars_dataframe_is_summarised_like_a_table() -> None:
    text = summary_of(df=frame())
    assert 'inputs["df"]: polars_frame (polars.DataFrame), 3 rows x 2 columns' in text
    assert "columns: a Int64, b String" in text
    assert "a | b\n    1 | x" in text


def test_a_lazy_scan_is_summarised_from_file_metadata_and_a_small_head(parquet: Path) -> None:
    text = summary_of(sales=pl.scan_parquet(parquet))
    assert 'inputs["sales"]: polars_lazy (polars.LazyFrame), 50,000 rows x 3 columns' in text
    assert "lazy Polars query, not collected" in text
    assert "id | area | amount\n    0 | north | 0.0" in text


def test_a_filtered_plan_has_an_unknown_row_count_and_a_sorted_one_no_preview(parquet: Path) -> None:
    lf = pl.scan_parquet(parquet)
    text = summary_of(north=lf.filter(pl.col("area") == "north"), ranked=lf.sort("amount"))
    north, ranked = text.split('inputs["ranked"]')
    assert "rows unknown x 3 columns" in north and "row count unknown (counting would scan the data)" in north
    assert "0 | north | 0.0" in north
    assert "no preview: its first rows need the whole input (it sorts)" in ranked and "first 3 rows" not in ranked


def test_a_plan_whose_files_are_missing_fails_at_binding(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"Input 'gone': its Polars query fails .*fix the query"):
        bind_inputs({"gone": pl.scan_parquet(tmp_path / "missing.parquet")}, RLMConfig())


def test_a_plan_names_what_it_reads_and_nothing_around_it(parquet: Path) -> None:
    fields, _ = bind_inputs({"sales": pl.scan_parquet(parquet)}, RLMConfig())
    assert fields[0].read_paths == (str(parquet),)  # one file: that file, not its folder
    glob, _ = bind_inputs({"g": pl.scan_parquet(f"{parquet.parent}/**/*.parquet")}, RLMConfig())
    assert glob[0].read_paths == (str(parquet.parent),)  # a glob: the folder it lists, not its parent


# ---- what each sandbox sees -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
async def test_a_dataframe_is_a_polars_frame_in_both_sandboxes_and_the_users_stays_unchanged(kind: str) -> None:
    df = frame()
    body = ("x = inputs['df']\nx[0, 'a'] = 100\nx.columns = ['A', 'B']\n"
            "print(type(x).__module__.split('.')[0], type(x).__name__, x.shape, x['A'].to_list())")
    out, shipped = await run_bound(kind, {"df": df}, body)
    assert out == "polars DataFrame (3, 2) [100, 2, 3]\n"  # the sandbox's own copy changes...
    assert df.columns == ["a", "b"] and df["a"].to_list() == [1, 2, 3]  # ...the user's frame never does
    if kind == "kernel":
        assert shipped > 0  # in-memory data is shipped once, as an Arrow IPC file


@pytest.mark.parametrize("kind", KINDS)
async def test_a_lazy_frame_stays_lazy_and_crosses_with_zero_data_bytes(kind: str, parquet: Path) -> None:
    lf = pl.scan_parquet(parquet).filter(pl.col("area") == "south")
    body = ("q = inputs['q']\n"
            "print(type(q).__name__, q.select(pl.len()).collect().item(), q.collect()['amount'].sum())")
    out, shipped = await run_bound(kind, {"q": lf}, "import polars as pl\n" + body)
    expected = pl.read_parquet(parquet).filter(pl.col("area") == "south")
    assert out == f"LazyFrame {expected.height} {expected['amount'].sum()}\n"
    assert shipped == 0


def test_a_plan_that_cannot_be_serialised_fails_before_any_model_call_and_offers_collect(parquet: Path) -> None:
    lock = threading.Lock()

    def locked(x: int) -> int:
        with lock:
            return x

    lf = pl.scan_parquet(parquet).with_columns(b=pl.col("id").map_elements(locked, return_dtype=pl.Int64))
    root = ScriptedLM([code("print(1)")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="kernel").run("?", q=lf)
    assert result.status == "error" and root.requests == []
    assert result.error is not None
    assert "Input 'q': its Polars query cannot be sent to the kernel sandbox" in result.error
    assert "cannot pickle '_thread.lock' object" in result.error and "pass q.collect() instead" in result.error


def test_a_plan_that_cannot_be_serialised_still_runs_in_the_local_sandbox(parquet: Path) -> None:
    lf = pl.scan_parquet(parquet).head(3).with_columns(b=pl.col("id").map_elements(lambda x: len(str(x * 10)),
                                                                                    return_dtype=pl.Int64))
    root = ScriptedLM([code("print(inputs['q'].collect()['b'].to_list())"), code("submit('done')")], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="local", evidence_check=False).run("?", q=lf)
    assert result.answer == "done"
    assert "[1, 2, 2]" in root.requests[1][-1]["content"]


def test_polars_and_dask_are_imported_only_for_their_own_values() -> None:
    script = ("import sys, pandas as pd\nimport rlmnb\nfrom rlmnb._ground.config import RLMConfig\n"
              "from rlmnb.inputs import bind_inputs\n"
              "bind_inputs({'df': pd.DataFrame({'a': [1]}), 't': 'text', 'n': [1, 2]}, RLMConfig())\n"
              "print(sorted(m for m in ('polars', 'dask', 'distributed') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


# ---- sql() ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
async def test_sql_sees_polars_frames_and_plans_under_their_input_names(kind: str, parquet: Path) -> None:
    areas = pl.DataFrame({"area": ["north", "south", "east"], "manager": ["Ann", "Bo", "Cy"]})
    body = ("print(sql('SELECT manager, sum(amount) AS total FROM sales JOIN areas USING (area) "
            "GROUP BY 1 ORDER BY 1').to_dict('records'))\nprint(sql('SELECT count(*) AS n FROM sales').n[0])")
    out, shipped = await run_bound(kind, {"sales": pl.scan_parquet(parquet), "areas": areas}, body)
    frame = pl.read_parquet(parquet).join(areas, on="area").group_by("manager").agg(pl.col("amount").sum())
    expected = [{"manager": m, "total": t} for m, t in sorted(frame.iter_rows())]
    assert out == f"{expected}\n50000\n"
    if kind == "kernel":
        assert 0 < shipped < 10_000  # only the small in-memory frame is shipped, never the Parquet data


def test_the_summary_tells_the_model_sql_sees_polars_inputs(parquet: Path) -> None:
    text = summary_of(sales=pl.scan_parquet(parquet), areas=frame())
    assert "`sql(query)` runs DuckDB SQL over the tables `sales`, `areas`" in text


@pytest.mark.integration
async def test_a_plan_over_a_relative_path_still_reads_its_files_in_the_kernel(
        parquet: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(parquet.parent.parent)  # the kernel runs in a directory of its own
    lf = pl.scan_parquet(f"{parquet.parent.name}/{parquet.name}").filter(pl.col("area") == "east")
    out, shipped = await run_bound("kernel", {"q": lf}, "print(inputs['q'].collect().height)")
    assert out == f"{pl.read_parquet(parquet).filter(pl.col('area') == 'east').height}\n" and shipped == 0
