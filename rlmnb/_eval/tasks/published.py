"""Published long-context benchmarks: OOLONG (synth and real), LongBench-v2 and BrowseComp-Plus.

`rlmnb eval --task oolong_synth --data PATH` reads a local copy in the published format (a file, or a
folder whose `*.jsonl`, `*.json` and `*.parquet` files are read in name order); without `--data` the
task is loaded with Hugging Face `datasets` from the hub (`pip install datasets`; imported only then).

- `oolong_synth` (oolongbench/oolong-synth): rows `id, context_len, dataset, context_window_text,
  question, task_group, task, answer, answer_type, context_window_id`. The context is
  `context_window_text`, the paper's variant, never `context_window_text_with_labels` (which hands the
  labels over). Scored as its `synth_process_response`: the answer after a last "Answer:"/"Label:"/
  "User:"/"Date:" prefix if any; equal to the gold (`ast.literal_eval(answer)[0]`, or a date) scores 1;
  a comparison phrase contained in the gold scores 1; numeric answers score `0.75 ** |error|`.
- `oolong_real` (oolongbench/oolong-real, config `dnd`): rows `id, context_window_id,
  context_window_text, question, answer`; scored as its `dnd_process_response`: a `\\boxed{...}` answer if
  there is one, else the whole answer, read as an integer (`0.75 ** |error|`), a comma-separated list
  (the fraction of gold items given) or a string (case-insensitive equality).
- `longbench_v2` (THUDM/LongBench-v2, `data.json`): rows `_id, domain, sub_domain, difficulty, length,
  question, choice_A..choice_D, answer, context`; the question carries the four choices and the paper's
  "The correct answer is (insert answer here)" instruction; accuracy of the chosen letter.
- `browsecomp_plus` (Tevatron/browsecomp-plus, decrypted as its `decrypt_dataset.py` writes it): rows
  `query_id, query, answer, evidence_docs, gold_docs, negative_docs` (documents `docid, url, text`); the
  row's documents (deduplicated, in that order) are the context; exact match of the normalised answer.
  Encrypted rows (with a `canary` field, as the hub serves them) are refused with the decrypting step.

Sizes pick a length band (`rlmnb._eval.tasks.rows`): rows with more than half and at most `size` tokens (the
row's own `context_len` when it has one).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlmnb._eval.tasks.base import Instance
from rlmnb._eval.tasks.rows import Row, RowsTask
from rlmnb._eval.tasks.scoring import exact_match, normalize_text, parse_number, unwrap
from rlmnb._ground.errors import ConfigError

__all__ = ["CHOICE_PROMPT", "COMPARISONS", "HUB", "PUBLISHED", "browsecomp_plus", "browsecomp_score", "hub_records",
           "longbench_v2", "oolong_gold", "oolong_real", "oolong_real_score", "oolong_synth", "oolong_synth_score",
           "published_task", "read_records"]

HUB = {"oolong_synth": ("oolongbench/oolong-synth", None, "validation"),
       "oolong_real": ("oolongbench/oolong-real", "dnd", "validation"),
       "longbench_v2": ("THUDM/LongBench-v2", None, "train"),
       "browsecomp_plus": ("Tevatron/browsecomp-plus", None, "test")}
PUBLISHED = tuple(HUB)


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a published file or folder (JSON Lines, a JSON array, Parquet), in name order."""
    source = Path(path).expanduser()
    if source.is_dir():
        files = sorted(p for p in source.rglob("*") if p.suffix in (".jsonl", ".json", ".parquet"))
    elif source.is_file():
        files = [source]
    else:
        raise ConfigError(f"--data {str(source)!r} does not exist: pass the folder or file of the dataset.")
    records: list[dict[str, Any]] = []
    for file in files:
        if file.suffix == ".parquet":
            import pyarrow.parquet as pq

            records += pq.read_table(file).to_pylist()
        elif file.suffix == ".json":
            data = json.loads(file.read_text(encoding="utf-8"))
            records += data if isinstance(data, list) else [data]
        else:
            records += [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    return records


def hub_records(name: str) -> list[dict[str, Any]]:
    """The dataset from the Hugging Face hub; ConfigError in one sentence when `datasets` or the hub is missing."""
    repo, config, split = HUB[name]
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"{name} from the hub needs Hugging Face datasets (pip install datasets), or pass "
                          f"--data PATH to a local copy.") from None
    try:
        loaded = datasets.load_dataset(repo, config, split=split)
    except Exception as exc:
        raise ConfigError(f"the Hugging Face hub could not give {repo} ({type(exc).__name__}); pass --data PATH "
                          f"to a local copy in the published format.") from None
    return [dict(r) for r in loaded]


def _field(record: dict[str, Any], key: str, name: str) -> Any:
    if key not in record:
        raise ConfigError(f"a {name} record has no {key!r} field: is --data the {HUB[name][0]} dataset?")
    return record[key]


# ---- OOLONG ---------------------------------------------------------------------------------------------
_PREFIX = re.compile(r"(?:answer|label|user|date)\s*:\s*", re.I)
COMPARISONS = ("more common", "less common", "same frequency")


def oolong_gold(answer: str) -> Any:
    """The gold of an oolong-synth row: `ast.literal_eval(answer)[0]`, or the date of a datetime.date literal."""
    if "datetime" in answer:
        return datetime.strptime(answer.strip(), "[datetime.date(%Y, %m, %d)]").date()
    return ast.literal_eval(answer)[0]


def oolong_synth_score(instance: Instance, prediction: Any) -> float:
    gold, kind = oolong_gold(str(instance.answer[0])), instance.meta.get("answer_type", "")
    text = str(unwrap(prediction)).strip()
    found = list(_PREFIX.finditer(text))
    got = (text[found[-1].end():] if found else text).strip().strip("*").strip()
    if got == str(gold):
        return 1.0
    if got in COMPARISONS:
        return 1.0 if got in str(gold) else 0.0
    if kind == "ANSWER_TYPE.NUMERIC":
        number = parse_number(got)
        return float(0.75 ** abs(int(gold) - number)) if number is not None else 0.0
    if kind == "ANSWER_TYPE.DATE" and isinstance(gold, date):
        try:
            from dateutil import parser

            return 1.0 if parser.parse(got).date() == gold else 0.0
        except (ValueError, OverflowError):
            return 0.0
    return 0.0


def _dnd_parse(answer: str) -> int | str | list[str]:
    try:
        return int(answer)
    except ValueError:
        pass
    if "," in answer:
        return [item.strip() for item in answer.split(",") if item.strip()]
    return answer


def oolong_real_score(instance: Instance, prediction: Any) -> float:
    gold = _dnd_parse(str(instance.answer[0]))
    text = ", ".join(str(v) for v in unwrap(prediction)) if isinstance(unwrap(prediction), list) else str(
        unwrap(prediction))
    match = re.search(r"\\boxed\{\\text\{([^}]*)\}\}", text) or re.search(r"\\boxed[\{]+([^}]*)[\}]+", text)
    got = _dnd_parse((match.group(1) if match else text).strip())
    if isinstance(gold, int) and isinstance(got, int):
        return float(0.75 ** abs(gold - got))
    if isinstance(gold, str) and isinstance(got, str):
        return float(gold.strip().lower() == got.strip().lower())
    if isinstance(gold, list) and isinstance(got, list):
        return len(set(gold) & set(got)) / len(gold) if gold else 0.0
    return 0.0


def _oolong_rows(records: list[dict[str, Any]], name: str) -> list[Row]:
    rows = []
    for r in records:
        answer = str(_field(r, "answer", name))
        meta: dict[str, Any] = {k: r[k] for k in ("answer_type", "task", "task_group", "dataset", "context_window_id")
                                if k in r}
        rows.append(Row(id=str(_field(r, "id", name)), question=str(_field(r, "question", name)),
                        inputs={"context": str(_field(r, "context_window_text", name))}, answers=[answer],
                        metric=name, meta=meta, tokens=int(r["context_len"]) if r.get("context_len") else None))
    return rows


# ---- LongBench-v2 and BrowseComp-Plus --------------------------------------------------------------------
CHOICE_PROMPT = ("What is the correct answer to this question: {question}\nChoices:\n(A) {A}\n(B) {B}\n(C) {C}\n"
                 "(D) {D}\n\nFormat your response as follows: \"The correct answer is (insert answer here)\".")


def _longbench_rows(records: list[dict[str, Any]]) -> list[Row]:
    name = "longbench_v2"
    return [Row(id=str(_field(r, "_id", name)),
                question=CHOICE_PROMPT.format(question=_field(r, "question", name),
                                              **{c: _field(r, f"choice_{c}", name) for c in "ABCD"}),
                inputs={"context": str(_field(r, "context", name))}, answers=[str(_field(r, "answer", name))],
                metric="choice", meta={k: r[k] for k in ("domain", "sub_domain", "difficulty", "length") if k in r})
            for r in records]


def _browsecomp_rows(records: list[dict[str, Any]]) -> list[Row]:
    name = "browsecomp_plus"
    rows = []
    for r in records:
        if "canary" in r:
            raise ConfigError("BrowseComp-Plus rows from the hub are encrypted: decrypt them with the benchmark's "
                              "scripts_build_index/decrypt_dataset.py and pass its output as --data PATH.")
        docs: dict[str, str] = {}
        for group in ("evidence_docs", "gold_docs", "negative_docs"):
            for doc in r.get(group) or []:
                docs.setdefault(str(doc["docid"]), f"Document {doc['docid']} ({doc.get('url', '')}):\n{doc['text']}")
        if not docs:
            raise ConfigError(f"BrowseComp-Plus query {r.get('query_id')} has no documents: is --data the "
                              f"decrypted dataset (decrypt_dataset.py's output)?")
        rows.append(Row(id=str(_field(r, "query_id", name)), question=str(_field(r, "query", name)),
                        inputs={"context": "\n\n".join(docs.values())}, answers=[str(_field(r, "answer", name))],
                        metric="exact", meta={"documents": len(docs)}))
    return rows


def browsecomp_score(instance: Instance, prediction: Any) -> float:
    """Exact match of the normalised answer (`scoring.normalize_text`)."""
    return exact_match(normalize_text(instance.answer[0]), prediction)


_BUILD: dict[str, tuple[Callable[[list[dict[str, Any]]], list[Row]], Callable[[Instance, Any], float] | None]] = {
    "oolong_synth": (lambda recs: _oolong_rows(recs, "oolong_synth"), oolong_synth_score),
    "oolong_real": (lambda recs: _oolong_rows(recs, "oolong_real"), oolong_real_score),
    "longbench_v2": (_longbench_rows, None),
    "browsecomp_plus": (_browsecomp_rows, browsecomp_score),
}


def published_task(name: str, source: str) -> RowsTask:
    """Task `name` read from `source`: a local path, or "hub" for the Hugging Face hub."""
    return _task(name, source if source == "hub" else str(Path(source).expanduser().resolve()))


@lru_cache(maxsize=16)
def _task(name: str, source: str) -> RowsTask:
    build, scorer = _BUILD[name]

    def load() -> list[Row]:
        return build(hub_records(name) if source == "hub" else read_records(source))

    return RowsTask(f"{name}:{source}", load, by_size=True, description=__doc__ or "", scorer=scorer)


def oolong_synth(source: str) -> RowsTask:
    return published_task("oolong_synth", source or "hub")


def oolong_real(source: str) -> RowsTask:
    return published_task("oolong_real", source or "hub")


def longbench_v2(source: str) -> RowsTask:
    return published_task("longbench_v2", source or "hub")


def browsecomp_plus(source: str) -> RowsTask:
    return published_task("browsecomp_plus", source or "hub")
