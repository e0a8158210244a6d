"""A Parquet file damaged in the middle (footer intact, 200 KB overwritten) binds, and then `sql()` fails with
one sentence naming the file, the row group and the column, in the observation the model sees (both
sandboxes); a damaged footer is refused at bind time with one sentence naming the file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from rlmnb import RLM
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import InputError
from rlmnb._sandbox.local import LazyInputs
from rlmnb.events import CodeExecuted
from rlmnb.inputs import bind_inputs
from rlmnb.inputs._tables.damage import DamagedTableFile, locate
from rlmnb.inputs._tables.duck import SQLEngine
from rlmnb.testing import ScriptedLM

ROWS, GROUP = 200_000, 20_000


def _write(path: Path, compression: str = "snappy") -> Path:
    con = duckdb.connect()
    con.execute(f"COPY (SELECT range AS id, md5(range::varchar) AS h, range * 0.5 AS amount FROM range({ROWS})) "
                f"TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE {GROUP}, COMPRESSION {compression})")
    con.close()
    return path


def _damage_middle(path: Path, size: int = 200_000) -> None:
    """Overwrite `size` bytes in the middle of the file with a fixed pattern; the footer stays intact."""
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid:mid + size] = bytes((i * 7 + 3) % 256 for i in range(size))
    path.write_bytes(bytes(data))


def _sql(values: dict[str, object]) -> SQLEngine:
    fields, _ = bind_inputs(values, RLMConfig())
    return SQLEngine({"inputs": LazyInputs(fields)})


@pytest.mark.parametrize("compression", ["snappy", "uncompressed"])
def test_sql_names_the_file_row_group_and_column(tmp_path: Path, compression: str) -> None:
    path = _write(tmp_path / "sales.parquet", compression)
    _damage_middle(path)
    sql = _sql({"sales": path})  # the footer reads: binding succeeds
    damage = locate([str(path)])
    assert damage is not None and 0 < damage.row_group < ROWS // GROUP - 1
    with pytest.raises(DamagedTableFile) as err:
        sql(f"SELECT sum({damage.column}) FROM sales")
    message = str(err.value)
    assert message.startswith(f"The Parquet file {path} is damaged: row group {damage.row_group + 1} of "
                              f"{ROWS // GROUP}, column '{damage.column}', cannot be decoded (")
    assert "query the other columns" in message and message.count("\n") == 0
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert sql("SELECT count(*) AS n FROM sales").iloc[0, 0] == ROWS  # what the footer answers still works


def test_a_damaged_file_in_a_folder_is_named_among_its_healthy_siblings(tmp_path: Path) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        _write(folder / f"part-{i}.parquet")
    _damage_middle(folder / "part-1.parquet")
    sql = _sql({"parts": folder})
    with pytest.raises(DamagedTableFile, match=r"part-1\.parquet is damaged: row group \d+ of 10, column '"):
        sql("SELECT sum(amount), max(h), sum(id) FROM parts")
    with pytest.raises(duckdb.CatalogException):  # an error in the SQL stays DuckDB's own
        sql("SELECT * FROM nowhere")


def test_a_damaged_footer_is_one_sentence_naming_the_file_at_bind_time(tmp_path: Path) -> None:
    path = _write(tmp_path / "broken.parquet")
    data = bytearray(path.read_bytes())
    length = int.from_bytes(data[-8:-4], "little")
    data[-8 - length:-8] = bytes((i * 13 + 5) % 256 for i in range(length))  # the footer, not its length
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as err:
        bind_inputs({"data": path}, RLMConfig())
    message = str(err.value)
    assert message.startswith("Input 'data': cannot read broken.parquet as Parquet (")
    assert message.endswith("); fix or remove the file.") and "\\n" not in message and "\n" not in message


@pytest.mark.parametrize("sandbox", ["local", "kernel"])
def test_the_model_sees_the_sentence_in_its_observation(tmp_path: Path, sandbox: str) -> None:
    path = _write(tmp_path / "sales.parquet")
    _damage_middle(path)
    damage = locate([str(path)])
    assert damage is not None
    root = ScriptedLM([f"```python\nprint(sql('SELECT sum({damage.column}) AS s FROM sales'))\n```",
                       "```python\nsubmit('gave up')\n```"])
    result = RLM(root, sandbox=sandbox, evidence_check=False).run("Total?", sales=path)  # 'gave up' is unprinted
    assert result.answer == "gave up"
    seen = root.requests[1][-1]["content"]
    assert "DamagedTableFile" in seen and f"The Parquet file {path} is damaged: row group " \
        f"{damage.row_group + 1} of 10, column '{damage.column}'" in seen
    turn = result.trajectory.of(CodeExecuted)[0]
    assert f"{path} is damaged" in str(turn.to_dict())
