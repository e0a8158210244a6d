"""Each turn-loop policy on and off, on tasks of several kinds: does it earn its place? (issue 44)

For each split it runs `rlmnb eval` with every policy on, reads from the trajectories which policies acted, then
runs the split again once per policy that acted, with that policy off. A policy that never acted on an instance
cannot have changed it (every action is a `PolicyActed` event), so only the splits where it acted are rerun.

The model server is reached through a record/replay proxy started here: a request body seen before is answered
from disk, so an off-run pays only for the turns after the point where it leaves the on-run (at temperature 0
the shared prefix is the same request). The proxy is a measuring device, not part of rlmnb.

    python bench/policies_ablation.py --out /tmp/ablation [--splits working,heldout,tickets,log,contract]
        [--base default] [--confirm small] [--off NAME,...] [--seed N] [--api-base http://127.0.0.1:8899/v1]
        [--summary-only]

With `--base PROFILE` the on-run is that profile's policies and each off-run drops one of them (a split where
every policy on costs too much model time). The tables pair any two runs of a split whose policies differ by one
policy, so the runs of profiles `small` and `default` (which differ by `first_read`) are its on and off.

Splits (docs/decisions/policies-held-out-split.md): `working` (the RULER tasks the old rules were made from,
seed 0), `heldout` (the other seven RULER tasks, seed 1), `tickets` (a DataFrame), `log` (a text log) and
`contract` (a long document) from `rlmnb eval --task ordinary`; all at 8K with the local 1.5B model, 8 turns.

On one kind of task a policy *helps* when switching it off loses points there, or keeps the points and spends at
least 10% more root tokens (the goal is right answers at fewer tokens; tokens count only where some answers are
right); it *harms* when switching it off gains points, or keeps them at least 10% cheaper. Verdict: "keep" when it
helps on at least two kinds and harms on none; "harms" when it harms anywhere; else "unproven" (no change, one kind
only, or never acted). Goal: every policy in a profile is "keep" (PASS/MISS); the others run only when a user names
them. With `--confirm PROFILE` each split also runs under that profile, which is confirmed where it
scores at least what every policy on scores, at no more than 10% more root tokens per right answer. `--off` limits the off-runs
to the policies named; `--seed` runs the RULER splits at another seed (a second sample of the same tasks).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rlmnb import POLICIES, PROFILES

SPLITS: dict[str, tuple[str, str, int, int]] = {
    # name: (kind, tasks, instances per task, seed)
    "working": ("RULER", "ruler:niah_single_2,ruler:niah_multikey_1,ruler:niah_multivalue,ruler:vt,ruler:cwe,"
                "ruler:qa_1", 1, 0),
    "heldout": ("RULER", "ruler:niah_single_1,ruler:niah_single_3,ruler:niah_multikey_2,ruler:niah_multikey_3,"
                "ruler:niah_multiquery,ruler:fwe,ruler:qa_2", 1, 1),
    "tickets": ("DataFrame", "ordinary:tickets", 5, 0),
    "log": ("text log", "ordinary:log", 4, 0),
    "contract": ("document", "ordinary:contract", 3, 0),
}
EVAL = ["-m", "openai/local", "--api-key", "none", "--context-window", "16384", "--temperature", "0",
        "--max-tokens", "800", "--max-iterations", "8", "--no-plot", "--sizes", "8k", "--methods", "rlm"]


def replay_proxy(upstream: str, cache: Path) -> str:
    """Start the record/replay proxy in a daemon thread; returns its base URL (same path layout as `upstream`)."""
    cache.mkdir(parents=True, exist_ok=True)
    origin = upstream.split("/v1")[0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _forward(self, request: urllib.request.Request | str, timeout: float) -> tuple[int, bytes]:
            """The server's answer; its error as is; 502 when it cannot be reached (no stack trace)."""
            try:
                with urllib.request.urlopen(request, timeout=timeout) as resp:
                    return resp.status, resp.read()
            except urllib.error.HTTPError as exc:  # a probe the server does not serve: pass its answer on
                return exc.code, exc.read()
            except OSError as exc:  # the server is down (a replay-only run) or went away
                return 502, json.dumps({"error": {"message": f"upstream unreachable: {exc}"}}).encode()

        def do_GET(self) -> None:  # noqa: N802 - http.server's hook name
            self._send(*self._forward(origin + self.path, 600))

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            path = cache / hashlib.sha256(self.path.encode() + b"\0" + body).hexdigest()
            if path.exists():
                return self._send(200, path.read_bytes())
            request = urllib.request.Request(origin + self.path, data=body,
                                             headers={"Content-Type": "application/json"})
            code, data = self._forward(request, 3600)
            if code == 200:
                path.with_suffix(".tmp").write_bytes(data)
                path.with_suffix(".tmp").replace(path)
            self._send(code, data)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def results(folder: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """A run folder's rows by (task, instance), each scored by the task's metric as it is now (`rescored`)."""
    path = folder / "results.jsonl"
    if not path.exists():
        return {}
    return {(r["task"], r["index"]): rescored(r) for r in map(json.loads, path.read_text().splitlines())}


def rescored(row: dict[str, Any]) -> dict[str, Any]:
    """`row` scored again from its recorded answer by the task's current metric: a metric fixed after a round ran
    (round 6: an empty-set answer) applies to the answers already paid for. A row whose answer the record cut
    keeps its score (the metric saw the whole answer)."""
    from rlmnb._eval.tasks import generate

    prediction = str(row.get("prediction") or "")
    if prediction.endswith(" characters]"):
        return row
    instance = generate(row["task"], row["size"], seed=row["seed"], index=int(row["index"]))
    return {**row, "score": instance.score(prediction), "recorded_score": row["score"]}


def acted(folder: Path) -> collections.Counter[str]:
    """How many actions each policy took over a run folder's trajectories."""
    counts: collections.Counter[str] = collections.Counter()
    for path in (folder / "trajectories").glob("*.json"):
        counts.update(e["policy"] for e in json.loads(path.read_text())["events"] if e["kind"] == "policy_acted")
    return counts


def run_split(split: str, off: str | None, out: Path, api_base: str, profile: str | None = None) -> Path:
    """`rlmnb eval` over one split with every policy on, or a `profile`'s policies, all but `off`; skipped when its
    results are in. Folders: `all`, `no_X`, `profile_P`, `P_no_X`."""
    _, tasks, n, seed = SPLITS[split]
    if off:
        name = f"{profile}_no_{off}" if profile else f"no_{off}"
        policies = ",".join(p for p in (PROFILES[profile] if profile else POLICIES) if p != off)
    else:
        name, policies = (f"profile_{profile}", profile) if profile else ("all", ",".join(POLICIES))
    folder = out / split / name
    if len(results(folder)) >= n * len(tasks.split(",")):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    command = [str(Path(sys.executable).with_name("rlmnb")), "eval", *EVAL, "--api-base", api_base, "--task", tasks,
               "-n", str(n), "--seed", str(seed), "--policies", policies, "--out", str(folder)]
    with (folder.parent / f"{folder.name}.log").open("w") as log:
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    return folder


def pairs(out: Path, split: str) -> list[tuple[str, Path, Path]]:
    """(policy, on-run, off-run) for each pair of a split's runs whose policies differ by that one policy: every
    policy on (`all`) and `no_X`; a profile's run (`profile_P`) and `P_no_X`, or another profile's run when that
    profile is P without one policy (`small` and `default` differ by `first_read`)."""
    root = out / split
    found = [(f.name[3:], root / "all", f) for f in sorted(root.glob("no_*")) if f.is_dir()]
    for p, names in PROFILES.items():
        on = root / f"profile_{p}"
        found += [(f.name[len(p) + 4:], on, f) for f in sorted(root.glob(f"{p}_no_*")) if f.is_dir()]
        for q, other in PROFILES.items():
            extra = set(names) - set(other)
            if set(other) < set(names) and len(extra) == 1:
                found.append((extra.pop(), on, root / f"profile_{q}"))
    return found


TOKENS = 0.10
"""Same points at this share more (or fewer) root tokens counts as help (or harm) on a kind of task."""


def verdict(kinds: dict[str, list[float]]) -> tuple[str, str]:
    """("keep" | "harms" | "unproven", what it did by kind) from {kind: [points on, points off, tokens on, off]}."""
    helps = harms = 0
    said = []
    for kind, (on, off, t_on, t_off) in kinds.items():
        ratio = t_off / t_on if t_on else 1.0
        same = on == off > 0  # tokens count only beside right answers: they are the cost of one
        helps += on > off or (same and ratio >= 1 + TOKENS)
        harms += on < off or (same and ratio <= 1 - TOKENS)
        said.append(f"{kind} {on - off:+.2f} points, off {ratio - 1:+.0%} tokens")
    return ("harms" if harms else "keep" if helps >= 2 else "unproven"), ", ".join(said)


def summarise(out: Path, splits: list[str]) -> int:
    """Print each split's on/off table and each policy's verdict; 0 when every policy is kept. Tokens are the root
    model's: the policies act on root turns, and a rerun's sub-calls come from rlmnb's response cache uncounted."""
    effect: dict[str, dict[str, list[float]]] = collections.defaultdict(dict)
    seen: set[str] = set()  # policies that acted somewhere, measured off or not
    for split in splits:
        by_on: dict[Path, list[tuple[str, Path]]] = collections.defaultdict(list)
        for policy, on_run, off_run in pairs(out, split):
            by_on[on_run].append((policy, off_run))
        for folder in [out / split / "all", *(out / split / f"profile_{p}" for p in PROFILES)]:
            on = results(folder)
            if not on:
                continue
            seen.update(acted(folder))
            score = sum(r["score"] for r in on.values())
            tokens = sum(r["root_input_tokens"] + r["root_output_tokens"] for r in on.values())
            print(f"\n{split} ({SPLITS[split][0]}): {folder.name} {score:.2f} of {len(on)}, {tokens:,} root tokens; "
                  f"acted: {dict(acted(folder))}\n")
            rows = [(policy, off_folder, results(off_folder)) for policy, off_folder in by_on.get(folder, [])]
            rows = [row for row in rows if len(row[2]) >= len(on)]  # an off-run still under way counts once done
            if rows:
                print("| off | run | right answers | change | root tokens | instances that changed |\n"
                      "|---|---|--:|--:|--:|---|")
            for policy, off_folder, off in rows:
                off_score = sum(r["score"] for r in off.values())
                off_tokens = sum(r["root_input_tokens"] + r["root_output_tokens"] for r in off.values())
                changed = [f"{task.split(':')[-1]}#{i} {on[task, i]['score']:.2f}->{off[task, i]['score']:.2f}"
                           for task, i in on if abs(on[task, i]["score"] - off[task, i]["score"]) > 1e-9]
                print(f"| {policy} | {off_folder.name} | {off_score:.2f} | {off_score - score:+.2f} | "
                      f"{off_tokens:,} | {', '.join(changed) or '-'} |")
                sums = effect[policy].setdefault(SPLITS[split][0], [0.0, 0.0, 0.0, 0.0])
                for k, v in enumerate((score, off_score, tokens, off_tokens)):
                    sums[k] += v
    in_profiles = {name for names in PROFILES.values() for name in names}
    print("\n| policy | in a profile | switched off, by kind | verdict |\n|---|---|---|---|")
    kept = True
    for policy in POLICIES:
        if policy in effect:
            said, what = verdict(effect[policy])
        else:
            said, what = "unproven", "acted, not yet run off" if policy in seen else "never acted"
        kept = kept and (said == "keep" or policy not in in_profiles)
        print(f"| {policy} | {'yes' if policy in in_profiles else 'no'} | {what} | {said} |")
    print(f"\nevery policy in a profile earns its place (helps on two kinds, harms none): {'PASS' if kept else 'MISS'}")
    return 0 if kept else 1


def confirm(out: Path, splits: list[str], profile: str) -> int:
    """The profile against every policy on, split by split: confirmed (0) where it has at least the points, at
    root tokens per right answer no more than TOKENS above (the noise a policy's verdict also ignores)."""
    print(f"\n| split | every policy on | profile {profile} | confirmed |\n|---|---|---|---|")
    confirmed = True
    for split in splits:
        on, mine = results(out / split / "all"), results(out / split / f"profile_{profile}")
        if not on or len(mine) < len(on):
            continue
        said = []
        for rows in (on, mine):
            score = sum(r["score"] for r in rows.values())
            tokens = sum(r["root_input_tokens"] + r["root_output_tokens"] for r in rows.values())
            said.append((score, tokens / score if score else float("inf")))
        ok = said[1][0] >= said[0][0] and said[1][1] <= said[0][1] * (1 + TOKENS)
        confirmed = confirmed and ok
        print(f"| {split} | " + " | ".join(f"{s:.2f} of {len(on)}, {t:,.0f} root tokens a right answer"
                                            for s, t in said) + f" | {'PASS' if ok else 'MISS'} |")
    return 0 if confirmed else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--splits", default=",".join(SPLITS))
    parser.add_argument("--api-base", default=f"http://127.0.0.1:{os.environ.get('RLMNB_REALMODEL_PORT', '8899')}/v1")
    parser.add_argument("--summary-only", action="store_true", help="only print the tables of --out")
    parser.add_argument("--confirm", metavar="PROFILE", help="then run each split with this profile and compare")
    parser.add_argument("--base", metavar="PROFILE", choices=list(PROFILES),
                        help="the on-run is this profile's (not every policy on); off-runs drop one of its policies")
    parser.add_argument("--off", metavar="NAME,...", help="switch off only these policies (default: each that acted)")
    parser.add_argument("--seed", type=int, help="another seed for the RULER splits (give another --out)")
    args = parser.parse_args()
    splits = args.splits.split(",")
    only = set(args.off.split(",")) if args.off else set(POLICIES)
    if only - set(POLICIES):
        parser.error(f"--off takes policy names from {', '.join(POLICIES)}; unknown: {', '.join(only - set(POLICIES))}")
    if args.seed is not None:
        for split, (kind, tasks, n, _) in list(SPLITS.items()):
            if kind == "RULER":
                SPLITS[split] = (kind, tasks, n, args.seed)
    if not args.summary_only:
        api_base = replay_proxy(args.api_base, args.out / "replay")
        for split in splits:
            for policy in sorted(only & set(acted(run_split(split, None, args.out, api_base, profile=args.base)))):
                run_split(split, policy, args.out, api_base, profile=args.base)
            if args.confirm:
                run_split(split, None, args.out, api_base, profile=args.confirm)
    status = summarise(args.out, splits)
    return confirm(args.out, splits, args.confirm) or status if args.confirm else status


if __name__ == "__main__":
    sys.exit(main())
