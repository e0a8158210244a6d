"""Two things every view of a run shows: a resumed run as one tree with a mark where it went live (issue 23),
and the input tokens read from the provider's prompt cache with the money they saved (issue 25).

Resumed runs are real: a run journals to a folder made by the test, its journal is cut as a kill would leave
it, and `RLM.resume` finishes it with scripted models in the local sandbox. Prompt caching is real HTTP to the
fake OpenAI-compatible server, which reports cached prefix tokens as OpenAI does, priced through litellm's map.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import code

from rlmnb import RLM
from rlmnb._notebook.widget import RunWidget
from rlmnb.testing import ScriptedLM
from rlmnb.views import RunTree, render_html, render_text
from rlmnb.views._text import summary_line
from rlmnb.views._trace import call_tags

WORDS = [f"w{i}" for i in range(20)]
LOOK = code("print(inputs['words'][:3])")
FAN_OUT = code("answers = llm_query_batched([f'item {i}: ' + inputs['words'][i] for i in range(20)])\n"
               "print(len(answers))")
SUBMIT = code("submit('|'.join(answers))")
ANSWER = "|".join(w.upper() for w in WORDS)
MARK = re.compile(r'<div class="rlmnb-resumed"[^>]*>⟳ ([^<]*)</div>')


def models(script: list[str]) -> tuple[ScriptedLM, ScriptedLM]:
    root = ScriptedLM(lambda ms: script[sum(1 for m in ms if m.get("role") == "assistant")], name="root")
    return root, ScriptedLM(lambda ms: str(ms[-1]["content"]).split(": ", 1)[1].upper(), name="sub")


def journaled(folder: Path, script: list[str], **settings: Any) -> Path:
    result = RLM(*models(script), sandbox="local", journal=str(folder), **settings).run("Shout", words=WORDS)
    assert result.journal is not None
    return result.journal


def kill_after(journal: Path, answers: int) -> None:
    """Cut the journal after its `answers`-th sub-call answer, as a kill of the run would leave it."""
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    finished = [i for i, line in enumerate(lines) if '"kind": "sub_call_finished"' in line]
    journal.write_text("".join(lines[:finished[answers - 1] + 1]), encoding="utf-8")


def resume(journal: Path, script: list[str], on_event: Any = None, **settings: Any) -> Any:
    result = RLM(*models(script), sandbox="local", journal=False, on_event=on_event, **settings).resume(
        journal, words=WORDS)
    assert result.status == "submitted" and result.answer == ANSWER, result.error
    return result


def turn_boxes(page: str) -> list[str]:
    """The HTML of each root turn's box, in order (a box runs to the next one, or to the answer)."""
    starts = [m.start() for m in re.finditer(r'<div style="border-left:3px solid rgba\(127,127,127,0.35\)', page)]
    return [page[a:b] for a, b in zip(starts, [*starts[1:], page.index("Answer</b>")], strict=True)]


@pytest.fixture
def killed(tmp_path: Path) -> Path:
    journal = journaled(tmp_path, [LOOK, FAN_OUT, SUBMIT])
    kill_after(journal, 12)
    return journal


def test_a_run_resumed_mid_batch_is_one_tree_marked_where_it_went_live(killed: Path) -> None:
    result = resume(killed, [LOOK, FAN_OUT, SUBMIT])
    tree = RunTree.from_trajectory(result.trajectory)
    mark = tree.resumed_view()
    assert mark is not None and (mark["turn"], mark["within"], mark["live"]) == (2, True, True)
    assert (mark["served_root"], mark["served_sub"], mark["source"]) == (2, 12, str(killed))
    assert tree.turn_numbers() == [1, 2, 3]  # the replayed turns and the live one, in one run

    page = render_html(result.trajectory)
    words = f"Resumed from {killed.name}: 2 root turns and 12 sub-calls served from the journal at no cost; " \
            f"live from here"
    assert MARK.findall(page) == [words]
    first, second, third = turn_boxes(page)
    assert "from the journal</span>" in first and "from the journal</span>" in second
    assert "from the journal</span>" not in third.split("</div>", 1)[0]  # the live turn's title has no such chip
    # inside turn 2: after its code and output, before its batch (whose calls 13-20 went live)
    assert second.index(">output</div>") < second.index("rlmnb-resumed") < second.index("<b>llm_query_batched</b>")
    batch = re.search(r"<b>llm_query_batched</b>[^<]*", second)
    assert batch is not None and "· 12 from the journal" in batch.group(0) and " cached" not in batch.group(0)
    calls = tree.call_views(next(k for kind, k in tree.turn_items(tree.root_id or "", 2) if kind == "group"))
    assert [c["journal"] for c in calls] == [True] * 12 + [False] * 8
    assert call_tags(calls[0], None) == ["from the journal"] and call_tags(calls[19], None) == []  # the trace list

    text = render_text(result.trajectory)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("⟳ Resumed from"))
    assert str(killed) in lines[at] and lines[at - 1].strip() == "20" and "sub-calls:" in lines[at + 1]
    assert "12 from the journal" in lines[at + 1]
    assert "── Turn 2/20 (from the journal) " in text and "── Turn 3/20 (submitted) " in text
    assert "resumed: 2 root turn(s) and 12 sub-call(s) from the journal" in summary_line(result.trajectory)


def test_a_run_resumed_at_a_root_request_is_marked_before_that_turn(tmp_path: Path) -> None:
    script = [LOOK, FAN_OUT, "no code yet", SUBMIT]
    journal = journaled(tmp_path, script, max_iterations=3)  # its turns ran out: resumed with more
    result = resume(journal, script, max_iterations=5)
    mark = RunTree.from_trajectory(result.trajectory).resumed_view()
    assert mark is not None and (mark["turn"], mark["within"], mark["served_root"]) == (4, False, 3)
    page = render_html(result.trajectory)
    boxes = turn_boxes(page)
    assert len(boxes) == 4 and MARK.search(boxes[2]) is not None  # the end of turn 3's box: before turn 4
    assert "rlmnb-resumed" not in boxes[3] and "rlmnb-resumed" not in "".join(boxes[:2])
    assert "fallback" not in boxes[2].split("</div>", 1)[0]


def test_a_run_resumed_entirely_from_its_journal_says_nothing_went_live(tmp_path: Path) -> None:
    journal = journaled(tmp_path, [LOOK, FAN_OUT, SUBMIT])
    result = resume(journal, [LOOK, FAN_OUT, SUBMIT])
    page = render_html(result.trajectory)
    [words] = MARK.findall(page)
    assert words.endswith("3 root turns and 20 sub-calls served from the journal at no cost; nothing went live")
    assert page.index("rlmnb-resumed") > page.rindex("Turn 3/20") and page.count("from the journal</span>") == 3


def test_the_live_widget_places_the_mark_as_the_run_goes_on(killed: Path) -> None:
    """Fed the resumed run's events live (its pusher drawing as they come), the widget ends with the same
    tree as the static view: the mark inside turn 2, after its code, before its batch."""
    view = RunWidget(interval=0.05)
    view.resuming(killed)
    view.start()
    seen: list[str] = []

    def on_event(event: Any) -> None:
        view.on_event(event)
        if event.kind == "code_executed" and event.turn == 1:  # replaying: the hint heads the turns
            view.push()
            first = view.body.children[0]
            seen.append(first.value if first is view._hint else "")

    try:
        resume(killed, [LOOK, FAN_OUT, SUBMIT], on_event=on_event)
    finally:
        view.finish()
    assert len(seen) == 1 and f"Resuming from {killed.name}: what it answered is served from the journal" in seen[0]
    root = view._panel(view.tree.root_id or "")
    assert len(root.body.children) == 3  # three turn boxes, no mark between them, and the hint is gone
    turn2 = view._turns[(view.tree.root_id or "", 2)]
    children = list(turn2.box.children)
    assert children[0] is turn2.html and children[1] is view._mark and len(children) == 3  # then the batch
    assert "Resumed from" in view._mark.value and "live from here" in view._mark.value
    assert "from the journal" in turn2.html.value and "from the journal" in view._turns[(root_id(view), 1)].html.value
    assert "from the journal" not in view._turns[(root_id(view), 3)].html.value
    assert render_html(view.tree).count("rlmnb-resumed") == 1
    view.close()


def root_id(view: RunWidget) -> str:
    return view.tree.root_id or ""


def test_a_run_that_was_not_resumed_shows_no_mark(tmp_path: Path) -> None:
    result = RLM(*models([LOOK, FAN_OUT, SUBMIT]), sandbox="local", journal=False).run("Shout", words=WORDS)
    page, text = render_html(result.trajectory), render_text(result.trajectory)
    assert "rlmnb-resumed" not in page and "journal" not in page and "journal" not in text
    assert RunTree.from_trajectory(result.trajectory).resumed_view() is None


# ---- the provider's prompt cache ------------------------------------------------------------------------
PRICES = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "cache_read_input_token_cost": 1e-7,
          "litellm_provider": "openai", "mode": "chat"}
STEPS = [code("x = len(inputs['text'])\nprint(x)"), code("y = llm_query('the magic number is 7654321')\nprint(y)"),
         code("print(x, y)"), code("submit(y)")]


@pytest.fixture
def cached_run(fake_server_factory: Any) -> tuple[Any, Any]:
    from rlmnb._models.litellm import load_litellm

    load_litellm().register_model({"openai/views-cache-root": PRICES, "openai/views-cache-sub": PRICES})
    server = fake_server_factory(script={"views-cache-root": STEPS}, prompt_cache=True)
    result = RLM(server.lm("views-cache-root"), server.lm("views-cache-sub"), sandbox="local",
                 journal=False, cache=False).run("What is the number?", text="some text")
    assert result.answer == "7654321", result.error
    return result, server


@pytest.mark.integration
def test_prompt_cached_tokens_and_savings_show_in_every_view(cached_run: tuple[Any, Any]) -> None:
    result, server = cached_run
    cached = server.stats()["cached_tokens"]
    usage = result.usage
    assert cached > 0 and usage.cached_input_tokens == cached
    assert usage.saved_usd == pytest.approx(cached * 9e-7)  # 0.9 µ$ a token below the full input rate
    assert f"cached_input_tokens={cached}, saved=${usage.saved_usd:.4f}, cost=" in repr(usage)
    meters = RunTree.from_trajectory(result.trajectory).meters_view()
    assert (meters["cached_input_tokens"], meters["saved"]) == (cached, pytest.approx(usage.saved_usd))

    page = render_html(result.trajectory)
    tokens = re.search(r'data-meter="tokens".*?rlmnb-meter-text"[^>]*>([^<]*)<', page)
    cost = re.search(r'data-meter="cost".*?rlmnb-meter-text"[^>]*>([^<]*)<', page)
    assert tokens is not None and f"in ({cached:,} cached) · " in tokens.group(1)
    assert cost is not None and cost.group(1).endswith(f" · saved ${usage.saved_usd:.4f}")
    replies = result.trajectory.root_calls()
    later = [r for r in replies if r["cached_input_tokens"]]
    assert len(later) == 3 and replies[0]["cached_input_tokens"] == 0  # the first turn had nothing cached yet
    for row in later:
        assert f"→ {row['output_tokens']:,} tokens ({row['cached_input_tokens']:,} cached, saved " \
               f"${row['saved_usd']:.4f})" in page
    text = render_text(result.trajectory)
    assert f"in ({cached:,} cached, saved ${usage.saved_usd:.4f}) / " in text

    view = RunWidget.from_trajectory(result.trajectory)
    assert f"({cached:,} cached)" in view.model_state["meters"]["tokens"]
    assert f"saved ${usage.saved_usd:.4f}" in view.model_state["meters"]["cost"]
    view.close()


@pytest.mark.integration
def test_to_frame_has_the_cached_tokens_of_every_call(cached_run: tuple[Any, Any]) -> None:
    result, server = cached_run
    subs, roots, both = result.to_frame(), result.to_frame(calls="root"), result.to_frame(calls="all")
    assert {"cached_input_tokens", "saved_usd", "journal"} <= set(subs.columns) and len(subs) == 1
    assert len(roots) == 4 and list(roots["purpose"]) == ["turn"] * 4
    assert int(both["cached_input_tokens"].sum()) == server.stats()["cached_tokens"]
    assert float(both["saved_usd"].sum()) == pytest.approx(result.usage.saved_usd)
    assert list(both["call"]) == ["root"] * 4 + ["sub"]
    with pytest.raises(ValueError, match="say 'sub'"):
        result.to_frame(calls="turns")


def test_a_run_without_prompt_caching_reads_as_before(tmp_path: Path) -> None:
    result = RLM(*models([LOOK, FAN_OUT, SUBMIT]), sandbox="local", journal=False).run("Shout", words=WORDS)
    page, text = render_html(result.trajectory), render_text(result.trajectory)
    assert " cached" not in page and "saved" not in page and " cached" not in text and "saved" not in text
    assert set(result.to_frame()["cached_input_tokens"]) == {0} and "cached" not in repr(result.usage)
