"""Semantic operators: llm_classify against one llm_query_batched prompt per ticket.

10,000 generated support tickets with known labels (`rlmnb.testing.generators.labelled_table`), labelled
three ways through real runs (scripted root model, local sandbox by default, response cache off):

  baseline     one llm_query_batched call with one prompt per ticket (the instruction in every prompt)
  classify     llm_classify(tickets, LABELS, INSTRUCTION): packed prompts, the instruction once per pack
  garbled 5 %  llm_classify against a sub-model that drops, breaks or mislabels 5 % of packed items

Both ways use the same instruction text and a scripted sub-model that answers correctly (PackedResponder).
Printed: sub-calls, sub-model input tokens (counted with tiktoken), wall time, accuracy against the known
labels, and the ratios to the baseline. Goals: >= 10x fewer calls and >= 3x fewer input tokens at equal
accuracy; with 5 % garbled, accuracy still equal after re-asks.
Run: `.venv/bin/python bench/operators.py [--tickets 10000] [--sandbox local|kernel]` (about a minute).

The headline (`--rows N`, issue 25): llm_classify over N rows of a Parquet table input (the same generated
tickets, columns user, date, text; written once under ~/.cache/rlmnb-bench/, RLMNB_BENCH_CACHE moves it),
streamed in the kernel sandbox, against the fake server in its own process answering every packed prompt
correctly after `--latency` seconds (default 1), `--concurrency` calls in flight (default 512); run once
through the direct lane and once through litellm, in the same run, each with the live widget attached
(fed every event, its pusher drawing every 0.25 s) and psutil sampling the RSS of this process and of the
sandbox kernel every 0.25 s. Printed per transport: the map's wall time (MapStarted to MapFinished) and its
ratio to the ideal ceil(calls / concurrency) x latency, sub-calls per second, the results checked against the
generated labels (a digest of all N answers), peak RSS of host and kernel with the RSS at 10 % and 50 % of the
calls (flat memory: the kernel holds a chunk of rows, never the table), and the widget's liveness: events
folded, pushes, and the longest stretch during the map in which the widget's sub-call count did not move.
Goal: <= 90 s for 1,000,000 rows at 1 s and 512 in flight on the direct lane.
Run: `.venv/bin/python bench/operators.py --rows 1000000` (a few minutes: two runs, litellm's at its CPU ceiling).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import platform
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSTRUCTION = ("You triage customer support tickets. Put each ticket in exactly one category: billing (charges, "
               "invoices, refunds, payments), shipping (parcels, deliveries, couriers, tracking), technical "
               "(crashes, errors, sync or export failures), account (passwords, profiles, e-mail changes, "
               "two-factor codes) or praise (thanks and compliments).")


@dataclass
class Row:
    name: str
    calls: int
    input_tokens: int
    wall_s: float
    accuracy: float
    reasks: int
    failures: int


def code(body: str) -> str:
    return f"```python\n{body}\n```"


def run(name: str, body: str, sub: Any, tickets: list[str], labels: list[str], sandbox: str) -> Row:
    from rlmnb import RLM
    from rlmnb.events import MapFinished
    from rlmnb.testing import ScriptedLM

    root = ScriptedLM([code("print(len(inputs['tickets']))"), code(body + "\nsubmit(out)")], name="root")
    rlm = RLM(root, ScriptedLM(sub, name="sub"), sandbox=sandbox, cache=False, max_llm_calls=len(tickets) * 2,
              timeout=600)
    started = time.perf_counter()
    result = rlm.run("Label every ticket.", tickets=tickets)
    wall = time.perf_counter() - started
    assert result.status == "submitted", result
    rows = result.trajectory.sub_calls()
    answer = list(result.answer)
    correct = sum(1 for got, want in zip(answer, labels, strict=True) if got == want)
    maps = result.trajectory.of(MapFinished)
    return Row(name, len(rows), sum(r["input_tokens"] or 0 for r in rows), wall, correct / len(labels),
               sum(m.reasks for m in maps), sum(m.failures for m in maps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=10_000)
    parser.add_argument("--sandbox", default=None, choices=["local", "kernel"],
                        help="local (default), kernel with --rows (default there)")
    parser.add_argument("--rows", type=int, default=None, help="the headline: llm_classify over a Parquet table "
                        "of this many rows against a slow fake server, direct lane vs litellm")
    parser.add_argument("--latency", type=float, default=1.0, help="--rows: the fake server's seconds per call")
    parser.add_argument("--concurrency", type=int, default=512, help="--rows: sub-calls in flight")
    parser.add_argument("--transports", default="direct,litellm", help="--rows: which transports, in order")
    args = parser.parse_args()
    if args.rows is not None:
        headline(args.rows, args.latency, args.concurrency, args.transports.split(","), args.sandbox or "kernel")
        return
    args.sandbox = args.sandbox or "local"

    from rlmnb.testing.generators import LABELS, label_of, labelled_table
    from rlmnb.testing.packed import PackedResponder

    frame, truth = labelled_table(args.tickets, seed=7)
    tickets, labels = [str(t) for t in frame["text"]], [str(x) for x in truth]
    baseline = (f"INSTRUCTION = {INSTRUCTION!r}\nLABELS = {list(LABELS)!r}\n"
                "prompts = [f'{INSTRUCTION}\\nReply with the category name only, one of: {\", \".join(LABELS)}.'"
                "f'\\n\\n{t}' for t in inputs['tickets']]\n"
                "out = [r.strip() for r in llm_query_batched(prompts)]")
    packed = (f"out = list(llm_classify(list(inputs['tickets']), {list(LABELS)!r}, {INSTRUCTION!r}))")
    rows = [
        run("baseline (1 prompt per ticket)", baseline, PackedResponder(label_of), tickets, labels, args.sandbox),
        run("llm_classify", packed, PackedResponder(label_of), tickets, labels, args.sandbox),
        run("llm_classify, 5% garbled", packed, PackedResponder(label_of, garble=0.05, seed=11), tickets, labels,
            args.sandbox),
    ]
    base = rows[0]
    print(f"rlmnb bench/operators.py: {args.tickets:,} tickets, {args.sandbox} sandbox, Python "
          f"{platform.python_version()}")
    print(f"{'way':34} {'sub-calls':>9} {'input tok':>10} {'wall s':>7} {'accuracy':>8} {'re-asks':>7} "
          f"{'failed':>6} {'calls x':>8} {'tokens x':>8}")
    for r in rows:
        print(f"{r.name:34} {r.calls:>9,} {r.input_tokens:>10,} {r.wall_s:>7.2f} {r.accuracy:>8.2%} {r.reasks:>7,} "
              f"{r.failures:>6,} {base.calls / r.calls:>7.1f}x {base.input_tokens / r.input_tokens:>7.1f}x")
    packed_row, garbled = rows[1], rows[2]
    print(f"goal >= 10x fewer calls: {'met' if base.calls >= 10 * packed_row.calls else 'NOT met'}; "
          f">= 3x fewer input tokens: {'met' if base.input_tokens >= 3 * packed_row.input_tokens else 'NOT met'}; "
          f"equal accuracy: {'met' if packed_row.accuracy >= base.accuracy else 'NOT met'}; "
          f"5% garbled still equal after re-asks: {'met' if garbled.accuracy >= base.accuracy else 'NOT met'}")


# ---- the headline: a Parquet table of --rows rows, streamed, against a slow server ------------------------
CACHE = Path(os.environ.get("RLMNB_BENCH_CACHE", Path.home() / ".cache" / "rlmnb-bench"))
LABEL_DIGEST = "import hashlib\ndigest = hashlib.sha256('\\n'.join(str(v) for v in r).encode()).hexdigest()"


def parquet_tickets(rows: int) -> tuple[Path, str]:
    """The generated tickets as one Parquet file (made once), and the digest of their true labels."""
    from rlmnb.testing.generators import labelled_table

    path = CACHE / f"tickets-{rows}.parquet"
    digest_path = path.with_suffix(".labels.sha256")
    if not path.exists() or not digest_path.exists():
        import pyarrow as pa
        import pyarrow.parquet as pq

        CACHE.mkdir(parents=True, exist_ok=True)
        frame, truth = labelled_table(rows, seed=7)
        tmp = path.with_suffix(".tmp")
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp, row_group_size=100_000)
        os.replace(tmp, path)
        digest_path.write_text(hashlib.sha256("\n".join(truth.astype(str)).encode()).hexdigest())
    return path, digest_path.read_text().strip()


@dataclass
class Watch:
    """What the subscriber and the sampler saw during one run."""

    widget: Any
    kernel_pid: int | None = None
    events: int = 0
    map_started: float | None = None
    map_finished: float | None = None
    done: int = 0
    calls_planned: int | None = None
    pushes: list[tuple[float, int]] = field(default_factory=list)  # (time, sub-calls finished shown)
    rss: list[tuple[float, int, int, int]] = field(default_factory=list)  # (time, calls done, host, kernel)
    stop: threading.Event = field(default_factory=threading.Event)
    server_pid: int | None = None
    cpu: dict[str, list[float]] = field(default_factory=dict)  # "host" / "kernel" / "server" -> CPU s at map start, end

    def cpu_mark(self) -> None:
        import psutil

        for name, pid in (("host", os.getpid()), ("kernel", self.kernel_pid), ("server", self.server_pid)):
            if pid is not None:
                times = psutil.Process(pid).cpu_times()
                self.cpu.setdefault(name, []).append(times.user + times.system)

    def on_event(self, event: Any) -> None:
        self.widget.on_event(event)
        self.events += 1
        kind = event.kind
        if kind == "sub_call_finished":
            self.done += 1
        elif kind == "map_started":
            self.map_started = time.perf_counter()
            self.cpu_mark()
        elif kind == "map_finished":
            self.map_finished = time.perf_counter()
            self.cpu_mark()
        elif kind == "code_executed" and self.kernel_pid is None:
            text = str(getattr(event, "stdout", "") or "")
            if text.startswith("pid "):
                self.kernel_pid = int(text.split()[1])

    def sample(self, interval: float = 0.25) -> None:
        import psutil

        me = psutil.Process()
        kernel: Any = None
        while not self.stop.wait(interval):
            if kernel is None and self.kernel_pid is not None:
                kernel = psutil.Process(self.kernel_pid)
            try:
                kernel_rss = kernel.memory_info().rss if kernel is not None else 0
            except psutil.Error:
                kernel_rss = 0
            self.rss.append((time.perf_counter(), self.done, me.memory_info().rss, kernel_rss))


@dataclass
class Headline:
    transport: str
    rows: int
    calls: int
    map_s: float
    run_s: float
    correct: bool
    failures: int
    host_peak: int
    kernel_peak: int
    host_at: tuple[int, int]  # RSS at 10 % and 50 % of the calls
    kernel_at: tuple[int, int]
    events: int
    pushes: int
    stalled_s: float  # the longest stretch in the map with no change in the widget's sub-call count
    load: tuple[float, float]
    cpu_ms: dict[str, float]  # CPU per sub-call during the map: host (this process), kernel, fake server


def one_headline(transport: str, path: Path, digest: str, rows: int, latency: float, concurrency: int,
                 server: Any, sandbox: str) -> Headline:
    import psutil  # noqa: F401  (the sampler needs it: fail before the run, not inside its thread)

    from rlmnb import RLM, LiteLLM
    from rlmnb._notebook.widget import RunWidget
    from rlmnb.testing import ScriptedLM
    from rlmnb.testing.generators import LABELS

    view = RunWidget(embed_trajectory=False)
    watch = Watch(view, server_pid=server.proc.pid)
    drawn = view.push

    def push() -> None:  # what the widget showed, when
        drawn()
        watch.pushes.append((time.perf_counter(), int(view.tree.meters_view()["sub_calls_done"])))

    view.push = push  # type: ignore[method-assign]
    body = (f"r = llm_classify(inputs['tickets'], {list(LABELS)!r}, {INSTRUCTION!r})\n{LABEL_DIGEST}\n"
            "submit({'n': len(r), 'none': int(r.isna().sum()), 'digest': digest, 'calls': r.attrs['llm_map']['calls']})")
    root = ScriptedLM([code("import os\nprint('pid', os.getpid())"), code(body)], name="root")
    sub = LiteLLM("openai/fake-sub", api_base=server.url, api_key="fake-key", transport=transport,
                  input_cost_per_token=1e-7, output_cost_per_token=4e-7)
    rlm = RLM(root, sub, sandbox=sandbox, cache=False, max_llm_calls=rows // 10 + 1_000,
              max_concurrency=concurrency, timeout=3_600, on_event=watch.on_event)
    sampler = threading.Thread(target=watch.sample, daemon=True)
    load0 = os.getloadavg()[0]
    view.start()
    sampler.start()
    started = time.perf_counter()
    try:
        result = rlm.run("Label every ticket.", tickets=path)
    finally:
        ended = time.perf_counter()
        view.stop()
        watch.stop.set()
        sampler.join()
    if result.status != "submitted":
        raise SystemExit(f"{transport}: the run ended {result.status}: {result.error}")
    answer = result.answer
    assert watch.map_started is not None and watch.map_finished is not None
    calls = int(answer["calls"])

    def at(share: float, column: int) -> int:
        return next((s[column] for s in watch.rss if s[1] >= share * calls), 0)

    in_map = [p for p in watch.pushes if watch.map_started <= p[0] <= watch.map_finished]
    stalled, last_change, shown = 0.0, watch.map_started, -1
    for when, done in in_map:
        if done != shown:
            stalled, last_change, shown = max(stalled, when - last_change), when, done
    stalled = max(stalled, watch.map_finished - last_change)
    view.close()
    return Headline(transport, rows, calls, watch.map_finished - watch.map_started, ended - started,
                    answer["digest"] == digest and answer["n"] == rows, int(answer["none"]),
                    max(s[2] for s in watch.rss), max(s[3] for s in watch.rss), (at(0.1, 2), at(0.5, 2)),
                    (at(0.1, 3), at(0.5, 3)), watch.events, len(watch.pushes), stalled, (load0, os.getloadavg()[0]),
                    {name: 1000 * (marks[-1] - marks[0]) / calls for name, marks in watch.cpu.items()})


def headline(rows: int, latency: float, concurrency: int, transports: list[str], sandbox: str) -> None:
    import tempfile

    os.environ["RLMNB_CACHE_DIR"] = tempfile.mkdtemp(prefix="rlmnb-bench-cache-")  # never the user's cache
    os.environ.setdefault("RLMNB_JOURNAL_DIR", tempfile.mkdtemp(prefix="rlmnb-bench-journal-"))
    from rlmnb.testing.fake_process import FakeServerProcess

    made = time.perf_counter()
    path, digest = parquet_tickets(rows)
    print(f"rlmnb bench/operators.py --rows {rows:,}: llm_classify over a Parquet table input ({path}, "
          f"{path.stat().st_size / 1e6:.1f} MB, ready in {time.perf_counter() - made:.1f} s), {sandbox} sandbox, fake "
          f"server in its own process at {latency:g} s per call, {concurrency} in flight; {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    server = FakeServerProcess(latency=latency, responder="packed_labels").start()
    results: list[Headline] = []
    try:
        for transport in transports:
            results.append(one_headline(transport, path, digest, rows, latency, concurrency, server, sandbox))
    finally:
        server.stop()

    def mb(n: int) -> str:
        return f"{n / 2**20:,.0f}"

    print(f"{'transport':<10}{'load avg':>12}{'calls':>8}{'map s':>8}{'x ideal':>8}{'calls/s':>8}{'run s':>7}"
          f"{'right':>6}{'failed':>7}{'host MB 10%/50%/peak':>22}{'kernel MB 10%/50%/peak':>24}{'events':>9}"
          f"{'pushes':>7}{'stalled s':>10}")
    for h in results:
        ideal = math.ceil(h.calls / concurrency) * latency
        print(f"{h.transport:<10}{h.load[0]:>6.2f}-{h.load[1]:<5.2f}{h.calls:>8,}{h.map_s:>8.1f}{h.map_s / ideal:>7.2f}x"
              f"{h.calls / h.map_s:>8.0f}{h.run_s:>7.1f}{'yes' if h.correct else 'NO':>6}{h.failures:>7,}"
              f"{mb(h.host_at[0]) + '/' + mb(h.host_at[1]) + '/' + mb(h.host_peak):>22}"
              f"{mb(h.kernel_at[0]) + '/' + mb(h.kernel_at[1]) + '/' + mb(h.kernel_peak):>24}{h.events:>9,}"
              f"{h.pushes:>7}{h.stalled_s:>10.2f}")
    for h in results:
        print(f"{h.transport}: CPU per sub-call during the map: " + ", ".join(
            f"{name} {ms:.2f} ms" for name, ms in h.cpu_ms.items())
              + f"; memory from 10 % of the calls to the peak: kernel {(h.kernel_peak - h.kernel_at[0]) / 2**20:+,.0f} MB, "
              f"host {(h.host_peak - h.host_at[0]) / 2**20:+,.0f} MB (the trajectory keeps every call's prompt and "
              f"reply); the widget's count never stood still longer than {h.stalled_s:.2f} s "
              f"({'live throughout' if h.stalled_s <= 2 * latency else 'NOT live throughout'}: at most twice the "
              f"server's latency)")
    first = results[0]
    ideal = math.ceil(first.calls / concurrency) * latency
    print(f"ideal: ceil({first.calls:,} calls / {concurrency}) x {latency:g} s = {ideal:.0f} s")
    for other in results[1:]:
        print(f"{first.transport} / {other.transport} map wall: {first.map_s / other.map_s:.2f}x "
              f"({other.map_s / first.map_s:.2f}x faster)")
    if rows == 1_000_000 and latency == 1.0 and concurrency == 512:
        direct = next((h for h in results if h.transport == "direct"), None)
        if direct is not None:
            ok = direct.map_s <= 90 and direct.correct
            print(f"goal: 1,000,000 rows in <= 90 s on the direct lane, all answers right: "
                  f"{direct.map_s:.1f} s  {'PASS' if ok else 'MISS'}")
    else:
        budget = 90 * rows / 1_000_000 * latency * 512 / concurrency
        print(f"(the goal, <= 90 s, is for --rows 1000000 --latency 1 --concurrency 512; scaled to this size: "
              f"{budget:.1f} s)")


if __name__ == "__main__":
    main()
