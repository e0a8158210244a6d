"""What the live widget costs a run: a scripted run of 5,000 sub-calls with and without the widget.

Goal (issues 4, 13): the live view costs at most 10% of the run. On a shared 2-core VM the run-to-run
noise of the whole run's wall time is larger than that (paired ratios are printed with their quartiles),
so the goal is checked on the widget's own CPU: folding the run's events (timed apart, on the same
events) plus drawing (timed in the pusher), against the plain run's CPU. "Attached" is what %%rlm does: display
the widget, feed it every event, finish it and refresh the display with the final bundle (static
HTML and trajectory JSON), JSON-encoded as the kernel would send it. Also prints how many messages
the widget sent to the front end (counted at the comm layer: widget creation and trait updates) and
how many events the run produced, to show the throttling. Zero-latency scripted models in the local
sandbox make this the worst case: with real models the widget's share of the run is far smaller.

    .venv/bin/python bench/widget.py [--calls 5000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

import comm

from rlmnb import RLM
from rlmnb._notebook.widget import RunWidget
from rlmnb.testing import ScriptedLM
from rlmnb.views._fold import RunTree


class CountingComm(comm.DummyComm):  # type: ignore[misc]
    """A comm with no front end that counts what it would send."""

    sent = 0

    def publish_msg(self, msg_type: str, *args: Any, **kwargs: Any) -> None:
        CountingComm.sent += 1


comm.create_comm = lambda *a, **k: CountingComm(*a, **k)


class WirePublisher:
    """Stands in for the kernel's display publisher: JSON-encodes each bundle as the kernel would."""

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0

    def publish(self, data: dict[str, Any], metadata: Any = None, *args: Any, **kwargs: Any) -> None:
        self.messages += 1
        self.bytes += len(json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogateescape"))


def shell_with_wire() -> WirePublisher:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    wire = WirePublisher()
    shell.display_pub.publish = wire.publish  # type: ignore[method-assign]
    return wire


def script(calls: int) -> list[str]:
    batched = calls * 4 // 5
    single = calls - batched
    return [
        "```python\nprint(len(inputs['text']))\n```",
        f"```python\nr = llm_query_batched([f'item {{i}}: classify' for i in range({batched})])\nprint(len(r))\n```",
        f"```python\ns = [llm_query(f'one {{i}}') for i in range({single})]\nprint(len(s))\n```",
        "```python\nsubmit(len(r) + len(s))\n```",
    ]


WIRE: WirePublisher | None = None


@dataclass
class Sample:
    run_wall: float  # the run with the live widget attached (subscriber and throttled pusher)
    run_cpu: float  # CPU seconds of the whole process (every thread) during the run
    refresh_wall: float = 0.0  # finish(): final push and the display refresh with the full bundle
    messages: int = 0
    events: int = 0
    pushes: int = 0
    refresh_bytes: int = 0
    push_seconds: float = 0.0  # CPU time the pusher spent drawing during the run
    fold_seconds: float = 0.0  # CPU time the run's thread spent in the widget's on_event (folding events)


def one_run(calls: int, with_widget: bool) -> Sample:
    root = ScriptedLM(script(calls), name="root")
    sub = ScriptedLM(lambda m: "billing", name="sub")
    view = RunWidget() if with_widget else None
    CountingComm.sent = 0
    assert WIRE is not None
    wire_bytes = WIRE.bytes
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    if view is not None:
        view.display()
        view.start()
    rlm = RLM(root, sub, max_llm_calls=calls, sandbox="local",
              on_event=view.on_event if view is not None else None)
    result = rlm.run("How many items are there?", text="alpha beta " * 1000)
    sample = Sample(time.perf_counter() - started, time.process_time() - cpu, events=len(result.trajectory))
    if view is not None:  # what on_event did during the run, timed apart: the same events into a fresh tree
        tree, fold_cpu = RunTree(), time.thread_time()
        for event in result.trajectory.events:
            tree.add(event)
        sample.fold_seconds = time.thread_time() - fold_cpu
    assert result.answer == calls, result.reason
    if view is not None:
        view.stop()
        sample.push_seconds = view.push_seconds
        refresh = time.perf_counter()
        view.finish()
        sample.refresh_wall = time.perf_counter() - refresh
        sample.pushes = view.pushes
        sample.messages = CountingComm.sent + 2  # + the display and its final update
        sample.refresh_bytes = WIRE.bytes - wire_bytes
        view.close()
    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    global WIRE
    WIRE = shell_with_wire()
    print(f"python {platform.python_version()} on {platform.machine()}, {args.calls:,} sub-calls, "
          f"{args.repeats} repeats (interleaved), zero-latency scripted models")
    one_run(200, False)  # warm up imports and caches
    one_run(200, True)
    plain: list[Sample] = []
    widget: list[Sample] = []
    for _ in range(args.repeats):
        plain.append(one_run(args.calls, False))
        widget.append(one_run(args.calls, True))

    def med(samples: list[Sample], attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in samples)

    base_wall, base_cpu = med(plain, "run_wall"), med(plain, "run_cpu")
    live_wall, live_cpu = med(widget, "run_wall"), med(widget, "run_cpu")
    refresh = med(widget, "refresh_wall")
    print(f"without widget:         wall {base_wall:.3f} s, cpu {base_cpu:.3f} s   "
          f"(wall runs: {', '.join(f'{s.run_wall:.3f}' for s in plain)})")
    print(f"with the live widget:   wall {live_wall:.3f} s, cpu {live_cpu:.3f} s   "
          f"(wall runs: {', '.join(f'{s.run_wall:.3f}' for s in widget)})")
    # this machine's run-to-run noise is larger than the widget's cost: pair each run with the plain run
    # beside it and take the median of the pairs' ratios (drift over the bench cancels within a pair)
    pairs = sorted(w.run_wall / p.run_wall for p, w in zip(plain, widget, strict=True))
    quartiles = statistics.quantiles(pairs, n=4) if len(pairs) > 1 else [pairs[0]] * 3
    slowdown = (statistics.median(pairs) - 1) * 100
    print(f"slowdown during the run: {slowdown:+.1f}% wall (median of {len(pairs)} paired ratios, quartiles "
          f"{(quartiles[0] - 1) * 100:+.1f}% to {(quartiles[2] - 1) * 100:+.1f}%; ratio of medians "
          f"{(live_wall / base_wall - 1) * 100:+.1f}% wall, {(live_cpu / base_cpu - 1) * 100:+.1f}% cpu)")
    own = med(widget, "fold_seconds") + med(widget, "push_seconds")
    print(f"the widget's own CPU per run: folding events {med(widget, 'fold_seconds') * 1000:.1f} ms + drawing "
          f"{med(widget, 'push_seconds') * 1000:.1f} ms = {own / base_cpu * 100:.1f}% of the plain run's CPU (goal: at most 10%)")
    total = (live_wall + refresh) / base_wall - 1
    print(f"end-of-run refresh (final push + display update with static HTML and trajectory JSON): "
          f"{refresh * 1000:.0f} ms, {med(widget, 'refresh_bytes') / 1e6:.1f} MB JSON-encoded; "
          f"with it the cell takes {total * 100:+.1f}% longer")
    last = widget[-1]
    print(f"messages to the front end per run: median {med(widget, 'messages'):.0f} "
          f"(for {last.events:,} events and {last.pushes} pushes in the last run; drawing took "
          f"{med(widget, 'push_seconds') * 1000:.1f} ms of CPU per run)")
    sys.exit(0 if own / base_cpu <= 0.10 else 1)


if __name__ == "__main__":
    main()
