"""The JupyterLab extension on a big saved run, in a real JupyterLab and headless Chromium.

A run with N sub-calls (default 10,000) is saved in a notebook as rlmnb writes it. The same notebook is
opened in a JupyterLab with the extension (it renders the trajectory JSON) and in one with the extension
disabled (JupyterLab shows the static HTML of the same output: the baseline). Measured: page opened -> the
run's output visible (median of 3 fresh pages), and a click on the batch -> its first page of calls listed.

Goal: the extension's view visible within 1.5x the baseline's time; expanding a batch < 200 ms.

    .venv/bin/python bench/extension.py [--calls 10000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlmnb import RLM
from rlmnb.events import MIME_TYPE
from rlmnb.testing import ScriptedLM
from rlmnb.testing.lab import JupyterLab, browser_missing, chromium_page, write_run_notebook
from rlmnb.views import mime_bundle


def recorded_run(calls: int) -> Any:
    body = (f"prompts = [f'Chunk {{i}}: ' + 'lorem ipsum dolor sit amet ' * 40 for i in range({calls})]\n"
            "replies = llm_query_batched(prompts)\nprint(len(replies))")
    root = ScriptedLM([f"```python\n{body}\n```", "```python\nsubmit(len(replies))\n```"], name="root")
    sub = ScriptedLM(lambda m: "label: billing; sentiment: negative; " * 4, name="sub")
    result = RLM(root, sub, sandbox="local", max_llm_calls=calls + 10).run("How many?", text="x")
    assert result.answer == calls, result.reason
    return result


def time_to_visible(lab: JupyterLab, name: str, selector: str) -> float:
    with chromium_page() as page:
        started = time.perf_counter()
        page.goto(lab.url(f"lab/tree/{name}?reset"))
        page.locator(selector).first.wait_for(timeout=120_000)
        return time.perf_counter() - started


def time_to_expand(lab: JupyterLab, name: str) -> float:
    with chromium_page() as page:
        page.goto(lab.url(f"lab/tree/{name}?reset"))
        view = page.locator(".jp-Notebook .rlmnb-Trajectory").first
        view.wait_for(timeout=120_000)
        summary = view.locator("details.rlmnb-group > summary").first  # turns are open: their batches show
        summary.wait_for()
        # measured inside the page: the click, the rows built, the next frame painted
        return float(page.evaluate("""async (el) => {
            const t = performance.now();
            el.click();
            while (el.parentElement.querySelectorAll('details.rlmnb-call').length === 0) {
                await new Promise(r => setTimeout(r, 1));
            }
            await new Promise(r => requestAnimationFrame(() => r()));
            return (performance.now() - t) / 1000;
        }""", summary.element_handle()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    missing = browser_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    t = time.perf_counter()
    result = recorded_run(args.calls)
    bundle = mime_bundle(result.trajectory)
    print(f"recorded a run with {args.calls:,} sub-calls in {time.perf_counter() - t:.1f} s")
    root = Path(tempfile.mkdtemp(prefix="rlmnb-bench-"))
    write_run_notebook(root / "run.ipynb", bundle, cell="%%rlm -m root -s sub\nHow many?")
    print(f"notebook: {(root / 'run.ipynb').stat().st_size / 1e6:.1f} MB, of which the trajectory "
          f"{len(json.dumps(bundle[MIME_TYPE])) / 1e6:.1f} MB and the static HTML {len(bundle['text/html']) / 1e6:.1f} MB")
    with JupyterLab(root, disabled_extensions=("rlmnb-jupyterlab",)) as lab:
        time_to_visible(lab, "run.ipynb", ".jp-Notebook .jp-RenderedHTMLCommon")  # warm-up: lab's assets
        base = [time_to_visible(lab, "run.ipynb", ".jp-Notebook .jp-RenderedHTMLCommon")
                for _ in range(args.repeats)]
    with JupyterLab(root) as lab:
        time_to_visible(lab, "run.ipynb", ".jp-Notebook .rlmnb-view")  # rendered, not just created
        ext = [time_to_visible(lab, "run.ipynb", ".jp-Notebook .rlmnb-view") for _ in range(args.repeats)]
        expand = [time_to_expand(lab, "run.ipynb") for _ in range(args.repeats)]
    e, b, x = statistics.median(ext), statistics.median(base), statistics.median(expand)
    ratio = e / b
    print(f"page opened -> output visible: extension {e:.2f} s, HTML baseline {b:.2f} s: {ratio:.2f}x "
          f"(goal <= 1.5x: {'PASS' if ratio <= 1.5 else 'MISS'})")
    print(f"click on the {args.calls:,}-call batch -> first 50 calls listed: {x * 1000:.0f} ms "
          f"(goal < 200 ms: {'PASS' if x < 0.2 else 'MISS'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
