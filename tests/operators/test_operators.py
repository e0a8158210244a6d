"""llm_map / llm_classify / llm_filter: order and index alignment, outputs, packing, re-asks, budget, tables.

Runs go through RLM(...).run with a scripted root model whose code calls the operators and a scripted
sub-model (`PackedResponder`) that answers the packed prompts, so every sub-call passes the real
budget, limiter, cache and events. One contract test runs in both sandboxes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from typing import Any

import pyarrow as pa
import pytest
from pydantic import BaseModel
from sandbox_support import code

from rlmnb import RLM
from rlmnb._operators.outputs import output_spec
from rlmnb._operators.packing import parse_reply, plan_packs, render_pack
from rlmnb.events import BatchStarted, CodeExecuted, MapFinished, MapStarted, SubCallStarted
from rlmnb.testing import ScriptedLM
from rlmnb.testing.packed import PackedResponder, packed_items

pytestmark = pytest.mark.usefixtures("stop_the_spare")


def upper(text: str) -> str:
    return text.upper()


def run_code(body: str, *, sub: Any, sandbox: str = "local", inputs: dict[str, Any] | None = None,
             **kw: Any) -> Any:
    """Run `body` as the root model's second step (the first only looks), submitting `out`."""
    root = ScriptedLM([code("print('looking')"), code(body + "\nsubmit(out)")], name="root")
    kw.setdefault("max_llm_calls", 1_000)
    rlm = RLM(root, ScriptedLM(sub, name="sub"), sandbox=sandbox, cache=False, **kw)
    result = rlm.run("Label them.", **(inputs or {"x": "unused"}))
    assert result.status == "submitted", result
    return result


def prompts_of(result: Any) -> list[str]:
    return [e.prompt for e in result.trajectory.of(SubCallStarted)]


# ---- order and index alignment ----------------------------------------------------------------------------
def test_list_results_come_back_in_order_across_packs() -> None:
    items = [f"item {i:03d}" for i in range(120)]
    result = run_code("r = llm_map(inputs['items'], 'Upper-case it.')\nout = {'r': list(r), 'attrs': r.attrs}",
                      sub=PackedResponder(upper), inputs={"items": items}, pack_items=25)
    assert result.answer["r"] == [t.upper() for t in items]
    assert result.answer["attrs"]["llm_map"]["packs"] == 5 and result.answer["attrs"]["llm_errors"] == []
    assert len(prompts_of(result)) == 5


def test_series_result_is_on_the_same_index_and_name() -> None:
    body = ("import pandas as pd\ns = pd.Series(['b', 'a', 'c'], index=[30, 10, 20], name='letter')\n"
            "r = llm_map(s, 'Upper-case it.')\nout = {'index': list(r.index), 'values': list(r), 'name': r.name}")
    result = run_code(body, sub=PackedResponder(upper))
    assert result.answer == {"index": [30, 10, 20], "values": ["B", "A", "C"], "name": "letter"}


def test_dataframe_rows_are_shown_as_records_and_the_result_is_on_its_index() -> None:
    def city(text: str) -> str:
        return str(json.loads(text)["city"]).upper()

    body = ("import pandas as pd\ndf = pd.DataFrame({'name': ['Ann', 'Bo'], 'city': ['Oslo', 'Rome']}, "
            "index=['a', 'b'])\nr = llm_map(df, 'Give the city in capitals.')\n"
            "out = {'index': list(r.index), 'values': list(r)}")
    result = run_code(body, sub=PackedResponder(city))
    assert result.answer == {"index": ["a", "b"], "values": ["OSLO", "ROME"]}
    texts = [t for _, t in packed_items(prompts_of(result)[0])]
    assert texts == ['{"name": "Ann", "city": "Oslo"}', '{"name": "Bo", "city": "Rome"}']


# ---- outputs ------------------------------------------------------------------------------------------------
class Person(BaseModel):
    name: str
    age: int


@dataclasses.dataclass
class Pair:
    left: str
    right: int = 0


@pytest.mark.parametrize(("output", "good", "expected", "bad"), [
    (str, "x", "x", {"a": 1}),
    (int, "42", 42, "forty"),
    (int, 3.0, 3, 3.5),
    (float, "2.5", 2.5, "nan"),
    (bool, "Yes", True, "maybe"),
    (["bug", "billing"], " Billing ", "billing", "refund"),
    (Person, {"name": "Ann", "age": "7"}, Person(name="Ann", age=7), {"name": "Ann"}),
    (Pair, {"left": "l", "right": 2, "extra": 1}, Pair("l", 2), {"right": 2}),
    (Pair, {"left": "l"}, Pair("l", 0), {"left": "l", "right": "two"}),
])
def test_each_output_type_validates(output: Any, good: Any, expected: Any, bad: Any) -> None:
    spec = output_spec(output)
    assert spec.validate(good) == expected
    with pytest.raises(ValueError):
        spec.validate(bad)
    assert spec.describe()


def test_a_valid_label_comes_back_as_the_label_given_not_a_copy() -> None:
    labels = ["bug", "billing"]
    spec = output_spec(labels)
    parsed = json.loads('[{"value": "billing"}]')[0]["value"]  # a fresh str, as parse_reply gives it
    assert parsed is not labels[1]
    assert spec.validate(parsed) is labels[1]  # a million results share the label objects
    assert spec.validate(" BUG ") is labels[0]


@pytest.mark.parametrize("output", [dict, [], ["a", "a"], ["a", 1], "labels"])
def test_bad_output_arguments_say_what_is_accepted(output: Any) -> None:
    with pytest.raises(TypeError, match="output"):
        output_spec(output)


def test_structured_output_through_a_run() -> None:
    def person(text: str) -> dict[str, Any]:
        name, age = text.split(":")
        return {"name": name, "age": int(age)}

    body = ("from pydantic import BaseModel\nclass P(BaseModel):\n    name: str\n    age: int\n"
            "r = llm_map(['Ann:7', 'Bo:30'], 'Extract the person.', output=P)\n"
            "out = [p.model_dump() for p in r]")
    result = run_code(body, sub=PackedResponder(person))
    assert result.answer == [{"name": "Ann", "age": 7}, {"name": "Bo", "age": 30}]
    assert '"age"' in prompts_of(result)[0]  # the JSON schema is in the prompt


def test_filter_and_classify() -> None:
    def answer(text: str) -> Any:
        return "refund" in text if "refund" in text or "thanks" in text else "other"

    body = ("f = llm_filter(['a refund please', 'thanks'], 'asks for a refund')\n"
            "c = llm_classify(['x', 'y'], ['other', 'spam'], 'Pick one.')\nout = [list(f), list(c)]")
    result = run_code(body, sub=PackedResponder(answer))
    assert result.answer == [[True, False], ["other", "other"]]
    assert "Pick one." in prompts_of(result)[1] and '"spam"' in prompts_of(result)[1]


def test_bad_arguments_fail_before_any_sub_call() -> None:
    body = ("msgs = []\nfor call in (lambda: llm_map('one string', 'x'), lambda: llm_map(['a'], ''),\n"
            "             lambda: llm_classify(['a'], 'bug'), lambda: llm_map(['a'], 'x', output=dict),\n"
            "             lambda: llm_map(['a'], 'x', pack_items=0)):\n"
            "    try:\n        call()\n    except (TypeError, ValueError) as exc:\n        msgs.append(str(exc))\n"
            "out = msgs")
    result = run_code(body, sub=PackedResponder(upper))
    assert len(result.answer) == 5 and "wrap it" in result.answer[0]
    assert result.trajectory.of(SubCallStarted) == []


# ---- packing ------------------------------------------------------------------------------------------------
def test_plan_packs_respects_target_and_cap() -> None:
    assert plan_packs([10, 10, 10, 10], target=25, cap=10) == [[0, 1], [2, 3]]
    assert plan_packs([10] * 5, target=1_000, cap=2) == [[0, 1], [2, 3], [4]]
    assert plan_packs([5, 100, 5], target=50, cap=10) == [[0], [1], [2]]  # the big one goes alone
    assert plan_packs([], target=50, cap=10) == []


def test_parse_reply_is_forgiving_about_form_and_strict_about_alignment() -> None:
    assert parse_reply('```json\n[{"id": "2", "value": "b"}, {"id": 1, "value": "a"}]\n```', 2) == (
        {2: "b", 1: "a"}, {})
    answers, problems = parse_reply('Here: [{"id": 1, "value": "a"}, {"id": 1, "value": "z"}, {"id": 7, '
                                    '"value": "q"}]', 2)
    assert answers == {} and set(problems) == {1, 2} and "twice" in problems[1]
    assert parse_reply("billing", 1) == ({1: "billing"}, {})  # a bare answer to a pack of one
    assert parse_reply("no json here", 2)[1][1].startswith("the reply was not JSON")
    assert parse_reply('{"results": [{"id": 1, "value": 5}]}', 1) == ({1: 5}, {})


def test_an_item_larger_than_the_pack_target_goes_alone() -> None:
    items = ["s1", "x" * 3_000, "s2", "s3"]
    result = run_code("r = llm_map(inputs['items'], 'Upper-case it.', pack_tokens=300)\nout = list(r)",
                      sub=PackedResponder(upper), inputs={"items": items})
    assert result.answer == [t.upper() for t in items]
    sizes = [len(packed_items(p)) for p in prompts_of(result)]
    assert sorted(sizes) == [1, 1, 2] and any("x" * 3_000 in p and len(packed_items(p)) == 1
                                               for p in prompts_of(result))


def test_an_item_too_large_for_the_sub_model_is_an_error_slot_not_a_crash() -> None:
    items = ["small", "y" * 20_000, "tiny"]
    result = run_code("r = llm_map(inputs['items'], 'Upper-case it.')\nout = {'r': list(r), 'e': r.attrs['llm_errors']}",
                      sub=PackedResponder(upper), inputs={"items": items}, max_sub_prompt_tokens=1_000)
    assert result.answer["r"][::2] == ["SMALL", "TINY"] and result.answer["r"][1].startswith("[error] PromptTooLarge")
    (error,) = result.answer["e"]
    assert error["index"] == 1 and "PromptTooLarge" in error["reason"] and error["attempts"] == 1
    assert not any("y" * 20_000 in p for p in prompts_of(result))  # refused before sending, never re-asked


# ---- re-asks ------------------------------------------------------------------------------------------------
def test_a_pack_whose_call_fails_whole_is_sent_again_as_a_pack() -> None:
    inner = PackedResponder(upper)
    failed: list[int] = []

    def flaky(messages: Any) -> str:
        prompt = messages[-1]["content"]
        if not failed and len(packed_items(prompt)) > 1:
            failed.append(1)
            raise RuntimeError("the provider is overloaded")
        return inner(messages)

    result = run_code("r = llm_map([f'i{n}' for n in range(30)], 'Upper-case it.', pack_items=10)\n"
                      "out = {'r': list(r), 'report': r.attrs['llm_map']}", sub=flaky)
    assert result.answer["r"] == [f"I{n}" for n in range(30)]
    sizes = [len(packed_items(p)) for p in prompts_of(result)]
    assert sizes == [10, 10, 10, 10] and result.answer["report"]["reasks"] == 10  # the same pack, not 10 singles
    assert "attempt 2" in prompts_of(result)[-1] and "overloaded" in prompts_of(result)[-1]


def test_a_pack_too_large_for_the_sub_model_is_split_into_single_items() -> None:
    items = ["\u4e2d\u6587" * 200 + str(n) for n in range(6)]  # ~1 token a character: the estimate is low
    result = run_code("r = llm_map(inputs['items'], 'Upper-case it.', pack_tokens=100_000)\n"
                      "out = {'r': list(r), 'report': r.attrs['llm_map']}", sub=PackedResponder(upper),
                      inputs={"items": items}, max_sub_prompt_tokens=1_000)
    assert result.answer["r"] == [t.upper() for t in items] and result.answer["report"]["failures"] == 0
    assert [len(packed_items(p)) for p in prompts_of(result)] == [1] * 6  # only single items were sent
    assert [b.size for b in result.trajectory.of(BatchStarted)] == [1, 6]  # the refused pack came back as six


@pytest.mark.parametrize("kind", ["drop", "broken", "wrong"])
def test_items_dropped_garbled_or_mislabelled_are_re_asked_in_smaller_packs(kind: str) -> None:
    items = [f"t{i}" for i in range(200)]
    sub = PackedResponder(lambda t: "even" if int(t[1:]) % 2 == 0 else "odd", garble=0.2, seed=3, kinds=(kind,))
    body = ("r = llm_classify(inputs['items'], ['even', 'odd'], pack_items=20)\n"
            "out = {'r': list(r), 'report': r.attrs['llm_map']}")
    result = run_code(body, sub=sub, inputs={"items": items})
    assert result.answer["r"] == ["even" if i % 2 == 0 else "odd" for i in range(200)]
    report = result.answer["report"]
    assert report["failures"] == 0 and report["reasks"] >= sub.garbled - 5 and report["reasks"] > 10
    reasks = [p for p in prompts_of(result) if "attempt" in p]
    assert sum(len(packed_items(p)) for p in reasks) == report["reasks"]
    assert max(len(packed_items(p)) for p in reasks) <= 10  # at most half the pack each item failed in
    assert len(reasks) < report["reasks"]  # packed again, not one call per item
    started = result.trajectory.of(MapStarted)
    finished = result.trajectory.of(MapFinished)
    assert len(started) == 1 and started[0].operator == "llm_classify" and started[0].items == 200
    assert (finished[0].items, finished[0].reasks, finished[0].failures) == (200, report["reasks"], 0)
    assert all(b.group == started[0].map_id for b in result.trajectory.of(BatchStarted))


def test_an_item_that_keeps_failing_is_marked_with_its_reason_and_printed() -> None:
    def answer(text: str) -> str:
        return "???" if text == "cursed" else "fine"

    body = ("r = llm_classify(['ok', 'cursed', 'ok2'], ['fine'], retries=2)\n"
            "out = {'r': list(r), 'e': r.attrs['llm_errors']}")
    result = run_code(body, sub=PackedResponder(answer))
    assert result.answer["r"][::2] == ["fine", "fine"] and result.answer["r"][1].startswith("[error] ")
    (error,) = result.answer["e"]
    assert error["index"] == 1 and error["attempts"] == 3 and "not one of the labels" in error["reason"]
    singles = [p for p in prompts_of(result) if len(packed_items(p)) == 1]
    assert len(singles) == 2 and singles[0] != singles[1]  # each re-ask differs, so no cache can replay it
    observation = result.trajectory.events[-1]
    shown = [e for e in result.trajectory.events if getattr(e, "stdout", "")]
    assert any("1 failed" in e.stdout and "'cursed'" in e.stdout for e in shown), observation  # type: ignore[attr-defined]


def test_budget_exhaustion_mid_map_keeps_what_was_paid_for() -> None:
    items = [f"t{i}" for i in range(40)]
    sub = PackedResponder(lambda t: "ok", garble=0.3, seed=1, kinds=("drop",))
    body = ("r = llm_classify(inputs['items'], ['ok'], pack_items=10)\n"
            "out = {'r': list(r), 'report': r.attrs['llm_map'], 'e': r.attrs['llm_errors']}")
    result = run_code(body, sub=sub, inputs={"items": items}, max_llm_calls=5)  # 4 packs fit, re-asks do not
    report = result.answer["report"]
    assert report["calls"] == 4 and report["stopped"].startswith("Sub-call budget exhausted")
    answered = [v for v in result.answer["r"] if v == "ok"]
    assert len(answered) == 40 - sub.garbled and report["failures"] == sub.garbled > 1
    assert all(e["reason"].startswith("not sent: Sub-call budget exhausted") for e in result.answer["e"])
    assert len(result.trajectory.of(SubCallStarted)) == 4  # the re-ask batch was refused whole
    assert result.trajectory.of(MapFinished)[0].stopped


# ---- tables, streamed ---------------------------------------------------------------------------------------
def test_arrow_reader_is_streamed_chunk_by_chunk() -> None:
    body = """
import pyarrow as pa
pulled = []
calls_seen = []
def batches():
    for k in range(3):
        calls_seen.append(len(pulled))
        pulled.append(k)
        yield pa.record_batch({'text': [f'r{k}-{i}' for i in range(2500)]})
reader = pa.RecordBatchReader.from_batches(pa.schema([('text', pa.string())]), batches())
r = llm_map(reader, 'Upper-case it.', pack_items=500)
out = {'n': len(r), 'first': r.iloc[0], 'last': r.iloc[-1], 'index': [int(r.index[0]), int(r.index[-1])]}
"""
    result = run_code(body, sub=PackedResponder(upper))
    assert result.answer == {"n": 7500, "first": "R0-0", "last": "R2-2499", "index": [0, 7499]}
    batches = result.trajectory.of(BatchStarted)
    assert len(batches) == 3  # one round per record batch: the map never held the whole table


def test_a_large_frame_is_read_a_slice_at_a_time() -> None:
    body = ("import pandas as pd\nfrom rlmnb._operators import sources\nsources.CHUNK_ROWS = 1000\n"
            "df = pd.DataFrame({'t': [f'n{i}' for i in range(2500)]})\n"
            "r = llm_map(df['t'], 'Upper-case it.', pack_items=500, pack_tokens=50_000)\nout = [len(r), r.iloc[-1]]")
    result = run_code(body, sub=PackedResponder(upper))
    assert result.answer == [2500, "N2499"]
    # one round per slice of 1,000 (the slices' rounds overlap, so they may reach the host in any order)
    assert sorted(b.size for b in result.trajectory.of(BatchStarted)) == [1, 2, 2]


class GatedLM(ScriptedLM):
    """Answers packed prompts, but holds every call without `later` in its prompt until one with it
    arrives (at most `hold_s`): chunk after chunk, the first chunk's calls would wait it out."""

    def __init__(self, later: str, hold_s: float = 10.0) -> None:
        super().__init__(PackedResponder(upper), name="sub")
        self.later = later
        self.hold_s = hold_s
        self.waited_out = 0
        self._arrived: asyncio.Event | None = None

    async def acomplete(self, messages: list[Any], **params: Any) -> Any:
        arrived = self._arrived = self._arrived or asyncio.Event()
        if self.later in str(messages[-1]["content"]):
            arrived.set()
        else:
            try:
                await asyncio.wait_for(arrived.wait(), self.hold_s)
            except TimeoutError:
                self.waited_out += 1
        return self.complete(messages, **params)


def test_the_next_chunk_is_sent_while_the_previous_one_is_in_flight() -> None:
    body = ("import pandas as pd\nfrom rlmnb._operators import sources\n"
            "items = pd.Series([f'a{i}' for i in range(1000)] + [f'b{i}' for i in range(1000)])\n"
            "kept, sources.CHUNK_ROWS = sources.CHUNK_ROWS, 1000\n"
            "try:\n    r = llm_map(items, 'Upper-case it.', pack_items=100)\nfinally:\n"
            "    sources.CHUNK_ROWS = kept\nout = [len(r), r.iloc[0], r.iloc[-1]]")
    sub = GatedLM(later="<item id=1>\nb0\n")
    root = ScriptedLM([code("print('looking')"), code(body + "\nsubmit(out)")], name="root")
    result = RLM(root, sub, sandbox="local", cache=False, max_llm_calls=100).run("Map them.", x="unused")
    assert result.answer == [2000, "A0", "B999"]
    assert sub.waited_out == 0  # every call of the first chunk was answered once the second chunk's came
    (finished,) = result.trajectory.of(MapFinished)
    assert finished.calls == 20 and finished.failures == 0


def test_a_map_without_a_concurrency_limit_sends_chunk_after_chunk() -> None:
    from rlmnb._operators.driver import MapDriver

    order: list[str] = []

    def send(prompts: list[str], positions: list[list[int]]) -> list[str]:
        order.append(f"send {positions[0][0]}")
        return [PackedResponder(upper)([{"role": "user", "content": p}]) for p in prompts]

    def chunks() -> Any:
        for k in range(3):
            order.append(f"read {k}")
            yield [f"t{k}-{i}" for i in range(10)]

    from rlmnb._operators.sources import Source

    driver = MapDriver(instruction="Upper-case it.", spec=output_spec(str), send=send, pack_tokens=4_000,
                       pack_items=10, retries=0, key=lambda pos: pos, window=0)
    state = driver.run(Source("list", 30, chunks()))
    assert order == ["read 0", "send 0", "read 1", "send 10", "read 2", "send 20"]
    assert state.values == [f"T{k}-{i}" for k in range(3) for i in range(10)]


@pytest.mark.parametrize("make", [
    "duckdb.sql(\"select 'n' || range::varchar as t from range(1200)\")",
    "pl.LazyFrame({'t': [f'n{i}' for i in range(1200)]})",
    "pl.DataFrame({'t': [f'n{i}' for i in range(1200)], 'k': list(range(1200))})",
    "pa.table({'t': [f'n{i}' for i in range(1200)]})",
])
def test_table_inputs_of_every_family(make: str) -> None:
    body = (f"import duckdb, polars as pl, pyarrow as pa\ntable = {make}\n"
            "r = llm_map(table, 'Upper-case it.', pack_items=100)\nout = list(r)")

    def answer(text: str) -> str:
        return (json.loads(text)["t"] if text.startswith("{") else text).upper()

    result = run_code(body, sub=PackedResponder(answer))
    assert result.answer == [f"N{i}" for i in range(1200)]


def test_table_bound_as_an_input_is_mapped() -> None:
    table = pa.table({"t": ["a", "b", "c"]})
    result = run_code("out = list(llm_map(inputs['table'], 'Upper-case it.'))", sub=PackedResponder(upper),
                      inputs={"table": table})
    assert result.answer == ["A", "B", "C"]


# ---- both sandboxes -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sandbox", ["local", pytest.param("kernel", marks=pytest.mark.integration)])
def test_same_behaviour_in_both_sandboxes(sandbox: str) -> None:
    items = [f"t{i}" for i in range(60)]
    sub = PackedResponder(lambda t: "even" if int(t[1:]) % 2 == 0 else "odd", garble=0.1, seed=5)
    body = ("import pandas as pd\ns = pd.Series(inputs['items'], index=[f'k{i}' for i in range(60)])\n"
            "r = llm_classify(s, ['even', 'odd'], pack_items=20)\n"
            "out = {'r': r.to_dict(), 'report': r.attrs['llm_map']}")
    result = run_code(body, sub=sub, sandbox=sandbox, inputs={"items": items})
    assert result.answer["r"] == {f"k{i}": "even" if i % 2 == 0 else "odd" for i in range(60)}
    assert result.answer["report"]["packs"] == 3 and result.answer["report"]["failures"] == 0
    (finished,) = result.trajectory.of(MapFinished)
    assert finished.packs == 3 and finished.calls == result.answer["report"]["calls"]
    assert result.usage.sub_calls == finished.calls


def test_render_pack_puts_the_instruction_once() -> None:
    prompt = render_pack("Say $it.", "a JSON string", ["a", "b"])
    assert prompt.count("Say $it.") == 1 and packed_items(prompt) == [(1, "a"), (2, "b")]


# ---- views --------------------------------------------------------------------------------------------------
def test_views_show_a_map_as_one_group_with_its_packing_figures() -> None:
    from rlmnb.views import RunTree, render_html, render_text

    items = [f"t{i}" for i in range(100)]
    sub = PackedResponder(lambda t: "even" if int(t[1:]) % 2 == 0 else "odd", garble=0.1, seed=2)
    result = run_code("out = list(llm_classify(inputs['items'], ['even', 'odd'], pack_items=25))",
                      sub=sub, inputs={"items": items})
    (finished,) = result.trajectory.of(MapFinished)
    tree = RunTree.from_trajectory(result.trajectory)
    maps = [g for g in tree.groups.values() if g.kind == "map"]
    assert len({id(g) for g in maps}) == 1  # every round of the map folded into one group
    view = tree.group_view(finished.map_id)
    assert view["started"] == finished.calls == len(result.trajectory.of(SubCallStarted))
    assert view["map"]["packs"] == 4 and view["map"]["reasks"] == finished.reasks > 0
    text = render_text(result.trajectory)
    assert f"llm_classify: 100 items · 4 packs · {finished.reasks} re-asked · 0 failed" in text
    assert "llm_query_batched" not in text
    assert "<b>llm_classify</b> 100 items · 4 packs" in render_html(result.trajectory)


def test_a_map_stopped_by_the_budget_says_so_once_and_how_to_go_on() -> None:
    # recorded (bench/realmodel.py, billing, Qwen2.5-Coder 1.5B): llm_classify over 2,000 rows with 12 sub-calls;
    # the report listed three identical "not sent" lines, and the model ran the same call four turns running
    from rlmnb._operators.report import ItemError, MapReport

    stop = "A batch of 40 sub-calls is larger than the whole sub-call budget (12 calls, none spent yet)"
    unsent = tuple(ItemError(i, f"row {i}", f"not sent: {stop}", 0) for i in range(2_000))
    text = MapReport("llm_classify", 2_000, 0, 0, 2_000, 0, stopped=stop, errors=unsent).text()
    assert text.splitlines()[1:] == [
        f"  stopped early: {stop}", "  2,000 items were not sent.",
        "  Cut the items down with code first (filter the rows with pandas or sql(); a column may already hold what "
        "you need), or submit what you have."]
    other = ItemError(7, "row 7", "not one of the labels: 'cursed'", 3)
    text = MapReport("llm_map", 10, 2, 1, 1, 3, errors=(other,)).text()
    assert "[7] not one of the labels" in text and "not sent" not in text and "Cut the items" not in text


def test_a_small_sub_model_gets_one_item_per_call_unless_told_otherwise() -> None:
    # bench/packing.py on Qwen2.5-Coder 1.5B (16K window): 97% right at one item a call, 57% at five (more calls)
    items = [f"item {n}" for n in range(6)]
    body = "r = llm_map(inputs['items'], 'Upper-case it.')\nout = list(r)"

    def calls(window: int | None, **kw: Any) -> list[int]:
        root = ScriptedLM([code("print('looking')"), code(body + "\nsubmit(out)")], name="root")
        sub = ScriptedLM(PackedResponder(upper), name="sub", context_window=window, max_output_tokens=400)
        result = RLM(root, sub, sandbox="local", cache=False, first_read="off", **kw).run("Label them.", items=items)
        assert result.answer == [t.upper() for t in items]
        return [len(packed_items(p)) for p in prompts_of(result)]

    assert calls(16_384) == [1] * 6
    assert calls(200_000) == [6] and calls(None) == [6]
    assert calls(16_384, pack_items=3) == [3, 3]


def test_an_operator_asked_for_what_a_column_already_holds_says_to_use_the_column() -> None:
    # recorded (bench/realmodel.py, billing, Qwen2.5-Coder 1.5B): llm_classify(tickets, labels=['billing']), then
    # llm_filter(tickets, "category != 'billing'"), over 2,000 rows, turn after turn, while `category` held 'billing'
    import pandas as pd

    tickets = pd.DataFrame({"id": [1, 2, 3], "category": ["billing", "shipping", "billing"],
                            "text": ["charged twice", "late parcel", "wrong invoice"]})
    body = ("a = llm_classify(inputs['tickets'], labels=['Billing', 'other'])\n"
            "b = llm_filter(inputs['tickets'], \"category != 'billing'\")\n"
            "c = llm_map(inputs['tickets'], 'Give the customer mood.')\nout = [list(a), list(b), list(c)]")

    def sub(messages: Any) -> str:
        prompt = str(messages[-1]["content"])
        value = True if "Decide for each item" in prompt else "calm" if "mood" in prompt else "Billing"
        return PackedResponder(lambda _text: value)(messages)

    result = run_code(body, sub=sub, inputs={"tickets": tickets})
    printed = [e.stdout for e in result.trajectory.of(CodeExecuted)][1]
    note = ("  note: the column 'category' already holds 'billing'; to select or count by it, use code "
            "(e.g. frame[frame['category'] == 'billing']) rather than a sub-call per row.")
    assert printed.splitlines().count(note) == 2  # after llm_classify's and llm_filter's reports, not llm_map's
    assert printed.splitlines()[1] == note and printed.splitlines()[3] == note
    assert result.answer[0] == ["Billing"] * 3  # the maps still ran: the note only informs

    from rlmnb._operators import column_note

    assert column_note(tickets, "urgent\nother") is None
    assert column_note(tickets, "the billings") is None  # a whole word or phrase only
    assert column_note(tickets[["id"]], "billing") is None  # no text column
    assert column_note(list(tickets["category"]), "billing") is None  # not a table
    many = pd.DataFrame({"word": [f"w{i:03d}" for i in range(51)]})
    assert column_note(many, "w001") is None  # more than 50 distinct values: no label column


# ---- nothing lost: a sub-model that drops items from its replies -------------------------------------------
class Dropper:
    """A sub-model that labels every item by its number's parity and drops 7 % of the items of every reply
    (single items too). The drops are drawn from random.Random seeded with 0 and the prompt, so they repeat
    whatever order concurrent calls arrive in."""

    def __init__(self, rate: float = 0.07) -> None:
        self.rate = rate
        self.dropped = 0

    def __call__(self, messages: Any) -> str:
        prompt = messages[-1]["content"]
        rng = random.Random(f"0\x00{prompt}")
        out = []
        for number, text in packed_items(prompt):
            if rng.random() < self.rate:
                self.dropped += 1
                continue
            out.append({"id": number, "value": "even" if int(text[1:]) % 2 == 0 else "odd"})
        return json.dumps(out)


CLASSIFY_3000 = ("r = llm_classify(inputs['items'], ['even', 'odd'], pack_items=50)\n"
                 "out = {'r': list(r), 'report': r.attrs['llm_map'], 'e': r.attrs['llm_errors']}")
ITEMS_3000 = [f"t{i}" for i in range(3_000)]
TRUTH_3000 = ["even" if i % 2 == 0 else "odd" for i in range(3_000)]


def test_3000_rows_with_7_percent_dropped_end_with_3000_labelled() -> None:
    sub = Dropper()
    result = run_code(CLASSIFY_3000, sub=sub, inputs={"items": ITEMS_3000})
    assert result.answer["r"] == TRUTH_3000
    report = result.answer["report"]
    assert report["failures"] == 0 and report["reasks"] >= 150 and sub.dropped >= 150  # ~7 % of 3,000 re-asked
    assert report["calls"] < 60 + 150  # re-asked in packs, not one call per item
    assert result.trajectory.of(MapFinished)[0].failures == 0


def test_when_the_budget_ends_every_missing_row_is_marked_and_counted() -> None:
    sub = Dropper()
    result = run_code(CLASSIFY_3000, sub=sub, inputs={"items": ITEMS_3000}, max_llm_calls=60)  # the first round
    labels, report, errors = result.answer["r"], result.answer["report"], result.answer["e"]
    missing = [i for i, label in enumerate(labels) if label != TRUTH_3000[i]]
    assert len(labels) == 3_000 and len(missing) == sub.dropped > 100
    assert all(labels[i].startswith("[error] not sent: Sub-call budget exhausted") for i in missing)
    assert report["failures"] == len(missing) == len(errors) and [e["index"] for e in errors] == missing
    assert result.trajectory.of(MapFinished)[0].failures == len(missing)


def test_a_typed_output_keeps_none_for_a_failed_item() -> None:
    def answer(text: str) -> Any:
        return "not a number" if text == "b" else 1

    result = run_code("r = llm_map(['a', 'b', 'c'], 'Count it.', int)\nout = list(r)", sub=PackedResponder(answer))
    assert result.answer == [1, None, 1]
