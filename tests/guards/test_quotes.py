"""The quotes guard: extraction, lookup in text, files, folders and table cells, revisions, hostile answers."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sandbox_support import code

from rlmnb import RLM, ConfigError, QuotesFound
from rlmnb._ground.config import RLMConfig
from rlmnb._guards.quotes import extract_quotes, normalise, search_inputs
from rlmnb._guards.rules import describe_guard, guard_from_description
from rlmnb.events import AttemptVerified
from rlmnb.inputs import bind_inputs
from rlmnb.testing import ScriptedLM

REPORT = ("The quarterly review found that the storage cluster\nran   out of disk twice in March. "
          "Engineers then added two nodes and the alerts stopped.")


def fields(**values: Any) -> tuple[Any, ...]:
    return bind_inputs(values, RLMConfig())[0]


def check(answer: Any, **values: Any) -> tuple[float, str, dict[str, Any]]:
    context: dict[str, Any] = {"inputs": fields(**values)}
    confidence, reason = QuotesFound()(answer, context)
    return confidence, reason, context["details"]


# ---- extraction ----------------------------------------------------------------------------------------------
def test_extracts_long_quoted_passages_and_quote_fields() -> None:
    answer = {"summary": 'It says "the storage cluster ran out of disk twice" and "short".',
              "evidence": ["added two nodes", "added two nodes"], "nested": {"source_quote": "alerts stopped"},
              "other": "“curly quotes are found as well here”"}
    assert extract_quotes(answer) == ["the storage cluster ran out of disk twice", "added two nodes",
                                      "alerts stopped", "curly quotes are found as well here"]
    assert extract_quotes("no quotes at all") == []
    assert normalise(" a \n\t b  ") == "a b"


# ---- lookup --------------------------------------------------------------------------------------------------
def test_found_with_its_offset() -> None:
    confidence, reason, details = check('"Engineers then added two nodes"', report=REPORT)
    assert confidence == 1.0 and "all 1 quote found" in reason
    (finding,) = details["quotes"]
    assert finding["found"] and finding["input"] == "report" and finding["offset"] == REPORT.index("Engineers")


def test_not_found_sends_the_answer_back_with_the_missing_quote() -> None:
    confidence, reason, details = check('"Engineers then removed two nodes"', report=REPORT)
    assert confidence == 0.0 and '"Engineers then removed two nodes"' in reason and "word for word" in reason
    assert details["quotes"][0] == {**details["quotes"][0], "found": False, "checked": True}


def test_found_only_after_whitespace_normalisation() -> None:
    quote = '"the storage cluster ran out of disk twice"'  # the text has a line break and three spaces
    assert "storage cluster ran out" not in REPORT
    assert check(quote, report=REPORT)[0] == 1.0


def test_quotes_from_table_cells_with_row_and_column(tmp_path: Path) -> None:
    frame = pd.DataFrame({"id": range(5), "body": [f"ticket {i} says nothing much" for i in range(5)]})
    frame.loc[3, "body"] = "The invoice shows\n the wrong   amount for May"
    answer = {"answer": "billing", "quotes": ["The invoice shows the wrong amount", "ticket 4 says nothing"]}
    pq.write_table(pa.table({"note": ["alpha", "the parquet file holds this sentence"]}), tmp_path / "n.parquet")
    confidence, _, details = check(answer, tickets=frame)
    assert confidence == 1.0
    first, second = details["quotes"]
    assert (first["row"], first["column"], first["input"]) == (3, "body", "tickets")
    assert second["row"] == 4 and "row 4" in second["where"]
    arrow = pa.table({"k": [1, 2], "text": ["x", "an arrow table cell to be quoted"]})
    assert check({"evidence": "an arrow table cell to be quoted"}, t=arrow)[2]["quotes"][0]["row"] == 1
    found = check({"quote": "the parquet file holds this sentence"}, notes=tmp_path / "n.parquet")[2]
    assert found["quotes"][0]["found"] and found["quotes"][0]["row"] == 1


def test_duckdb_relation_and_folder_inputs(tmp_path: Path) -> None:
    import duckdb

    relation = duckdb.sql("select range as n, 'row number ' || range::varchar || ' of the relation' as s "
                          "from range(5000)")
    bound = SimpleNamespace(name="rel", source=relation)  # a Field as i10's DuckDB inputs bind it
    (finding,) = search_inputs(["row number 4321 of the relation"], [bound], time_limit=30).findings()
    assert finding.row == 4321 and finding.column == "s"
    (tmp_path / "docs" / "deep").mkdir(parents=True)
    (tmp_path / "docs" / "deep" / "b.md").write_text("intro\nthe folder holds\nthis line\n", encoding="utf-8")
    details = check({"quote": "the folder holds this line"}, docs=tmp_path / "docs")[2]
    assert details["quotes"][0]["found"] and "deep/b.md" in details["quotes"][0]["where"]


def test_a_large_file_is_searched_in_chunks_without_being_loaded_whole(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmnb._guards import quotes

    monkeypatch.setattr(quotes, "FILE_CHUNK", 64 * 1024)
    path = tmp_path / "big.log"
    line = "2025-01-01 INFO routine heartbeat of the service\n"
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(60_000):  # ~3 MB
            handle.write(line if i != 45_000 else "2025-01-01 ERROR the disk\nfilled   up at last\n")
    reads: list[int] = []
    real_open = open

    def spying_open(*args: Any, **kwargs: Any) -> Any:
        handle = real_open(*args, **kwargs)
        if str(args[0]) == str(path):
            original = handle.read

            def read(size: int = -1) -> str:
                reads.append(size)
                return original(size)

            handle.read = read  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr("builtins.open", spying_open)
    search = search_inputs(["ERROR the disk filled up at last"], fields(log=path), time_limit=30)
    (finding,) = search.findings()
    assert finding.found and finding.offset == path.read_text(encoding="utf-8").index("ERROR the disk")
    assert reads and all(0 < size <= 64 * 1024 for size in reads)  # never read(-1): never the whole file


def test_a_hostile_answer_is_checked_within_its_bounds() -> None:
    text = "word " * 2_000_000  # 10 MB
    hostile = " ".join(f'"this quote number {i} is certainly not in the text"' for i in range(5_000))
    guard = QuotesFound(max_quotes=100, time_limit=5)
    context: dict[str, Any] = {"inputs": fields(text=text)}
    confidence, reason = guard(hostile, context)
    assert confidence == 0.0 and "could not be checked" in reason
    details = context["details"]
    assert details["skipped"] == 4_900 and len(details["quotes"]) == 100
    tight = QuotesFound(time_limit=0.001)
    context = {"inputs": fields(text=text)}
    assert tight(hostile, context)[0] == 0.0 and context["details"]["timed_out"]
    assert any(not q["checked"] for q in context["details"]["quotes"])


def test_settings_are_checked_and_the_guard_is_rebuilt_for_replay() -> None:
    with pytest.raises(ConfigError, match="max_quotes"):
        QuotesFound(max_quotes=0)
    guard = QuotesFound(min_chars=30, max_quotes=7, time_limit=3)
    rebuilt = guard_from_description(describe_guard(guard))
    assert isinstance(rebuilt, QuotesFound) and repr(rebuilt) == repr(guard)


# ---- through a run -------------------------------------------------------------------------------------------
def test_a_run_revises_an_answer_whose_quote_is_not_in_the_data() -> None:
    bad = code('submit({"answer": "disk", "quote": "the cluster exploded in March"})')
    good = code('submit({"answer": "disk", "quote": "ran out of disk twice in March"})')
    root = ScriptedLM([code("print(len(inputs['report']))"), bad, good], name="root")
    rlm = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="local", verify=QuotesFound())
    result = rlm.run("What happened?", report=REPORT)
    assert result.answer["quote"] == "ran out of disk twice in March" and result.verified
    first, second = result.trajectory.of(AttemptVerified)
    assert not first.accepted and first.details["quotes"][0]["found"] is False
    assert second.accepted and second.details["quotes"][0]["where"].startswith("input 'report', offset")
    revision = root.requests[2][-1]["content"]
    assert "the cluster exploded in March" in revision
    json.dumps(result.trajectory.to_dict())  # the findings serialise with the trajectory


def test_views_mark_each_quote_found_or_not() -> None:
    from rlmnb.views import render_html, render_text

    root = ScriptedLM([code("print(1)"), code('submit("It \\"ran out of disk twice in March\\" and \\"then '
                                                'the moon fell on the cluster\\"")')], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox="local", verify=QuotesFound(),
                 max_revisions=0).run("What happened?", report=REPORT)
    text = render_text(result.trajectory)
    assert "quote found: \"ran out of disk twice in March\" (input 'report', offset 52)" in text
    assert 'quote NOT found: "then the moon fell on the cluster"' in text
    assert "quote NOT found" in render_html(result.trajectory)
