"""What prompt caching saves on the root conversation: one 20-turn run, billed with and without a prefix cache.

A scripted 20-turn root dialogue (19 snippets that each print ~1,500 characters, then a submit) runs
through `RLM` against the fake OpenAI-compatible server twice: once with `prompt_cache=True` (the
server reports `prompt_tokens_details.cached_tokens` for the longest run of leading messages it has
seen, as OpenAI and DeepSeek do) and once without. The root model is priced at $1 per million input
tokens and cached input at 10 % of that ($0.10), so the bill is the provider's figures times its
rates. Prints the root input money per run both ways and the ratio (goal >= 3x cheaper).
Run: `.venv/bin/python bench/root_cost.py [--turns 20]` (a few seconds).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

INPUT_RATE = 1e-6
CACHED_RATE = 1e-7


def code(body: str) -> str:
    return f"```python\n{body}\n```"


def script(turns: int) -> list[str]:
    steps = [code(f"part{i} = inputs['text'][{i * 1500}:{(i + 1) * 1500}]\nprint(part{i})") for i in range(turns - 1)]
    return [*steps, code("submit('done')")]


def one_run(turns: int, cache: bool) -> dict[str, Any]:
    from rlmnb import RLM
    from rlmnb._models.litellm import load_litellm
    from rlmnb.testing.fake_server import FakeServer

    name = f"root-cost-{'cached' if cache else 'plain'}"
    load_litellm().register_model({f"openai/{name}": {
        "input_cost_per_token": INPUT_RATE, "output_cost_per_token": 0.0,
        "cache_read_input_token_cost": CACHED_RATE, "litellm_provider": "openai", "mode": "chat"}})
    text = " ".join(f"line {i}: the reading at station {i % 97} was {i * 37 % 1000} units." for i in range(4000))
    with FakeServer(script={name: script(turns)}, prompt_cache=cache) as server:
        result = RLM(server.lm(name), server.lm("fake-sub"), sandbox="local", max_iterations=turns + 1,
                     cache=False).run("Read the text part by part.", text=text)
        stats = server.stats()
    if result.answer != "done":
        raise SystemExit(f"the run ended {result.status}: {result.error}")
    usage = result.usage
    return {"root_calls": usage.root_calls, "input": usage.input_tokens, "cached": usage.cached_input_tokens,
            "server_cached": stats["cached_tokens"], "cost": usage.cost_usd}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    os.environ["RLMNB_CACHE_DIR"] = tempfile.mkdtemp(prefix="rlmnb-bench-cache-")
    plain = one_run(args.turns, cache=False)
    cached = one_run(args.turns, cache=True)
    print(f"{args.turns}-turn run, root input at ${INPUT_RATE * 1e6:g}/M tokens, cached input at "
          f"${CACHED_RATE * 1e6:g}/M (10 %)")
    print(f"{'':<22}{'root calls':>11}{'input tokens':>14}{'cached':>10}{'root input $':>14}")
    for label, row in (("no prefix cache", plain), ("prefix cache", cached)):
        print(f"{label:<22}{row['root_calls']:>11}{row['input']:>14,}{row['cached']:>10,}{row['cost']:>14.5f}")
    assert cached["cached"] == cached["server_cached"], "usage must carry the provider's cached tokens exactly"
    ratio = plain["cost"] / cached["cost"]
    print(f"caching makes root input {ratio:.2f}x cheaper (goal >= 3x)  {'PASS' if ratio >= 3 else 'MISS'}")


if __name__ == "__main__":
    main()
