"""The live header's progress: the running batch as tqdm shows it (n/N [elapsed<remaining, rate]) against
the batch's own size, and the sub-call budget apart, in its own meter."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest

from rlmnb.events import (
    BatchStarted,
    RunFinished,
    RunStarted,
    SubCallFinished,
    SubCallSent,
    SubCallStarted,
    TurnStarted,
)
from rlmnb.views import RunTree
from rlmnb.views._format import fmt_clock, progress_text
from rlmnb.views._html import meters_html, running_batch

T0 = 1_000.0
BASE: dict[str, Any] = {"run_id": "r", "root_run_id": "r"}


def _tree(replies: int, size: int = 60) -> RunTree:
    """A run with a 100-call budget, in the middle of a batch of `size` calls: all started at T0 + 1,
    4 holding a slot, `replies` answered one every 0.5 s."""
    seq = iter(range(1, 10_000))
    events: list[Any] = [
        RunStarted(seq=next(seq), ts=T0, question="q", model="root", sub_model="sub", sandbox="local",
                   config={"max_llm_calls": 100}, **BASE),
        TurnStarted(seq=next(seq), ts=T0, turn=1, max_turns=20, **BASE),
        BatchStarted(seq=next(seq), ts=T0 + 1, batch_id="b", turn=1, size=size, **BASE),
    ]
    events += [SubCallStarted(seq=next(seq), ts=T0 + 1, call_id=f"c{i}", batch_id="b", turn=1, prompt=f"p{i}", **BASE)
               for i in range(size)]
    events += [SubCallSent(seq=next(seq), ts=T0 + 1, call_id=f"c{i}", **BASE) for i in range(replies + 4)]
    events += [SubCallFinished(seq=next(seq), ts=T0 + 1 + 0.5 * (i + 1), call_id=f"c{i}", batch_id="b", turn=1,
                               reply="x", latency_s=0.5, queued_s=0.0, **BASE) for i in range(replies)]
    return RunTree(events)


def _meters(page: str) -> dict[str, str]:
    return {k: html.unescape(v) for k, v in re.findall(r'data-meter="([^"]+)".*?class="rlmnb-meter-text"[^>]*>([^<]*)<', page)}


def _bar(html: str, meter: str) -> str:
    block = html.split(f'data-meter="{meter}"', 1)[1].split('class="rlmnb-meter"', 1)[0]
    return re.search(r'rlmnb-meter-bar.*?width:([\d.]+)%', block).group(1)  # type: ignore[union-attr]


def test_the_running_batch_reads_as_tqdm_against_its_own_size_and_the_budget_stays_apart() -> None:
    tree = _tree(replies=20)
    now = T0 + 1 + 10.0  # 20 replies in 10 s: 2.0/s, 40 left: 20 s
    batch = running_batch(tree, now)
    assert batch is not None and batch["name"] == "llm_query_batched · turn 1"
    html = meters_html(tree.meters_view(now=now), batch)
    meters = _meters(html)
    assert meters["batch"] == "20/60 [00:10<00:20, 2.0/s]", meters
    assert meters["sub-calls"] == "20 (+4 in flight, +36 queued) / 100", meters  # the budget, apart
    assert _bar(html, "batch") == "33.3" and _bar(html, "sub-calls") == "20.0"  # 20 of 60, 20 of 100
    assert html.index('data-meter="batch"') < html.index('data-meter="sub-calls"')
    assert "llm_query_batched · turn 1" in html


def test_before_the_first_reply_the_time_left_is_unknown_and_after_the_batch_there_is_no_batch_meter() -> None:
    tree = _tree(replies=0, size=8)
    batch = running_batch(tree, T0 + 4.0)
    assert batch is not None
    assert _meters(meters_html(tree.meters_view(now=T0 + 4.0), batch))["batch"] == "0/8 [00:03<?, ?/s]"

    done = _tree(replies=8, size=8)  # every call answered: nothing runs
    assert running_batch(done, T0 + 20) is None
    ended = _tree(replies=3, size=8)  # the run ended with calls out: they are cancelled, not running
    ended.add(RunFinished(seq=10_000, ts=T0 + 5, status="interrupted", answer=None, **BASE))
    assert running_batch(ended, T0 + 20) is None
    assert "batch" not in _meters(meters_html(ended.meters_view(), running_batch(ended)))


def test_tqdm_clock_and_rate() -> None:
    assert [fmt_clock(s) for s in (0, 7.9, 754, 3723, None)] == ["00:00", "00:07", "12:34", "1:02:03", "?"]
    assert progress_text(1, 4, 8.0, 0.125) == "1/4 [00:08<00:24, 8.0 s/call]"
    assert progress_text(1_500, 10_000, 60, 25.0) == "1,500/10,000 [01:00<05:40, 25.0/s]"


def _painted(png: bytes, track: tuple[int, int, int]) -> float:
    """The share of a bar's pixels painted over its empty track (any channel more than 40 away from it)."""
    import io

    from PIL import Image

    data = Image.open(io.BytesIO(png)).convert("RGB").tobytes()
    pixels = [data[i:i + 3] for i in range(0, len(data), 3)]
    return sum(1 for p in pixels if max(abs(a - b) for a, b in zip(p, track, strict=True)) > 40) / len(pixels)


@pytest.mark.integration
@pytest.mark.parametrize("background", [(255, 255, 255), (17, 17, 17)])
def test_a_batch_with_every_call_out_and_no_reply_does_not_look_full(
        tmp_path: Path, browser_ready: None, background: tuple[int, int, int]) -> None:
    from rlmnb.testing.lab import chromium_page

    # the track: rgba(127,127,127,0.2) over the page
    track = tuple(round(0.8 * c + 0.2 * 127) for c in background)
    pages = {}
    for name, replies in (("out", 0), ("done", 4)):
        tree = _tree(replies, size=4)  # 0/4 with all 4 in flight; 4/4 answered
        now = T0 + 10
        path = tmp_path / f"{name}.html"
        path.write_text(f'<html><body style="background:rgb{background};margin:20px">'
                        f'{meters_html(tree.meters_view(now=now), running_batch(tree, now=now) or _batch(tree))}'
                        f'</body></html>', encoding="utf-8")
        pages[name] = path
    with chromium_page() as page:
        shares = {}
        for name, path in pages.items():
            page.goto(path.as_uri())
            shares[name] = _painted(page.locator('[data-meter="batch"] .rlmnb-meter-bar').screenshot(), track)
    assert shares["out"] < 0.6 < 0.9 < shares["done"], shares  # calls out read as under way; replies as done


def _batch(tree: RunTree) -> dict[str, Any]:
    """The finished batch as the running meter would draw it (running_batch shows only unfinished ones)."""
    view = tree.group_view("b")
    return {"name": "llm_query_batched · turn 1", "done": view["finished"], "total": view["size"], "elapsed": 2.0,
            "rate": None, "in_flight": 0}
