"""Oracle models for the `rlmnb._eval.tasks` suite: they know the generators, so a correct harness scores 100 %.

One `OracleModel` answers every role, told apart by the request's shape, so one object can back a
ScriptedLM or the fake server's responder for root and sub-model alike:

- root (a conversation with rlmnb's system prompt): writes real code over `inputs["context"]`: explore,
  then slice the input and hand the pieces to `llm_query_batched` with an instruction, aggregate the
  replies with code, then `submit`. With no sub-calls in its budget (`rlm_no_sub`) it writes the best
  code-only program instead: a search for NIAH, one phrasing per hop for multi-hop, and a keyword rule
  (the category of the first thing named) for the OOLONG labels, which the generator defeats by design;
- sub-model (one user message with an instruction and text): reads as the generator wrote, knowing every
  template; with `error_rate` it mislabels a known, seeded fraction of records (see `mislabelled`);
- direct (the `direct` method's prompt): answers from the visible, possibly cut, input the same way.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

from rlmnb._eval.tasks.facts import read_fact
from rlmnb._eval.tasks.oolong import LABELS, THINGS, answer_for, pairs_for, parse_line, read_note

__all__ = ["CHUNK_CHARS", "LABEL_INSTRUCTION", "OracleModel", "mislabelled", "parse_question", "read_answer",
           "root_program", "wrong_label"]

_QUESTIONS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("niah", "needle", re.compile(r"special magic number for (?P<key>[a-z]+ [a-z]+)\?")),
    ("oolong", "count", re.compile(r"How many records are labelled (?P<label>\w+)\?")),
    ("oolong", "most_frequent", re.compile(r"Which label is the most frequent")),
    ("oolong", "least_frequent", re.compile(r"Which label is the least frequent")),
    ("oolong", "compare", re.compile(r"Are records labelled (?P<a>\w+) more or fewer than records labelled (?P<b>\w+)\?")),
    ("oolong_pairs", "same_label", re.compile(r"where both notes are about a (?P<a>\w+) \(by label\)")),
    ("oolong_pairs", "label_pair", re.compile(r"where one note is about a (?P<a>\w+) and the other about a (?P<b>\w+) ")),
    ("multihop", "2-hop", re.compile(r"In which city does the company that (?P<person>.+?) works for have")),
    ("multihop", "3-hop", re.compile(r"In which country is the headquarters city of the company that (?P<person>.+?) "
                                     r"works for\?")),
)
CHUNK_CHARS = 200_000  # characters per sub-call prompt (~30-50K tokens)
LABEL_INSTRUCTION = ("Label each record below by the category of the one thing its note is about (" + ", ".join(LABELS)
                     + "); ignore things mentioned only for contrast. Reply with one line per record: id: label")


def parse_question(text: str) -> tuple[str, str, dict[str, str]] | None:
    """(task, kind, params) of a suite question found in `text`, else None."""
    for task, kind, pattern in _QUESTIONS:
        match = pattern.search(text)
        if match:
            params = dict(match.groupdict())
            if kind == "same_label":
                params["b"] = params["a"]
            return task, kind, params
    return None


def mislabelled(record_id: int, error_rate: float, salt: str = "oracle") -> bool:
    """Whether the erring oracle mislabels this record (a seeded hash: the same records every time)."""
    return error_rate > 0 and zlib.crc32(f"{salt}:{record_id}".encode()) / 2**32 < error_rate


def wrong_label(label: str) -> str:
    return LABELS[(LABELS.index(label) + 1) % len(LABELS)]


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else message
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


class OracleModel:
    """A responder `f(messages) -> str` that plays root, sub-model or direct reader (see the module docs)."""

    def __init__(self, *, error_rate: float = 0.0, salt: str = "oracle", chunk_chars: int = CHUNK_CHARS) -> None:
        self.error_rate = error_rate
        self.salt = salt
        self.chunk_chars = chunk_chars

    def __call__(self, messages: Any) -> str:
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        system = " ".join(_text(m) for m in messages if m.get("role") == "system")
        if "llm_query" in system:
            return self.root(messages)
        last = _text(messages[-1]) if messages else ""
        if "<context>\n" in last:
            return self.direct(last)
        return self.sub(last)

    # ---- root -----------------------------------------------------------------------------------------
    def root(self, messages: list[dict[str, Any]]) -> str:
        opening = next((_text(m) for m in messages if m.get("role") == "user"), "")
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        found = parse_question(opening)
        if found is None:
            return "I cannot tell which task this is.\n```python\nsubmit('unknown')\n```"
        budget = re.search(r"(\d+) sub-calls", opening)
        calls = int(budget.group(1)) if budget else 50
        if turn == 0:
            return ("Let me look at the input first.\n```python\ntext = inputs[\"context\"]\n"
                    "print(f\"{len(text):,} characters, {text.count(chr(10)) + 1:,} lines\")\nprint(text[:300])\n```")
        if turn == 1:
            task, kind, params = found
            return root_program(task, kind, params, sub_calls=calls, chunk_chars=self.chunk_chars)
        return "The result above is what the question asks for.\n```python\nsubmit(answer)\n```"

    # ---- sub-model --------------------------------------------------------------------------------------
    def sub(self, prompt: str) -> str:
        head, _, body = prompt.partition("\n\n")
        needle = re.search(r"special magic number for (.+?) in the text below", head)
        if needle:
            hit = re.search(r"special magic number for " + re.escape(needle.group(1)) + r" is (\d{7})", body)
            return hit.group(1) if hit else "NONE"
        if head.startswith("Label each record"):
            out = []
            for line in body.splitlines():
                parsed = parse_line(line)
                label = read_note(parsed[2]) if parsed else None
                if parsed is None or label is None:
                    continue
                if mislabelled(parsed[0], self.error_rate, self.salt):
                    label = wrong_label(label)
                out.append(f"{parsed[0]}: {label}")
            return "\n".join(out)
        for relation, pattern in (("works", r"Which company does (.+?) work for\?"),
                                  ("hq", r"In which city does (.+?) have its headquarters\?"),
                                  ("country", r"Which country is the city of (.+?) in\?")):
            asked = re.search(pattern, head)
            if asked:
                return read_fact(body, relation, asked.group(1)) or "NONE"
        return "NONE"

    # ---- direct ---------------------------------------------------------------------------------------
    def direct(self, prompt: str) -> str:
        question = prompt.split("<context>\n", 1)[0]
        context = prompt.split("<context>\n", 1)[1].rsplit("\n</context>", 1)[0]
        found = parse_question(question)
        if found is None:
            return "unknown"
        return json.dumps(read_answer(*found, context)) if found[0] == "oolong_pairs" else str(
            read_answer(*found, context))


def read_answer(task: str, kind: str, params: dict[str, str], context: str) -> Any:
    """The answer a perfect reader gives from `context` alone (all of it, or the visible part of a cut)."""
    if task == "niah":
        hit = re.search(r"special magic number for " + re.escape(params["key"]) + r" is (\d{7})", context)
        return hit.group(1) if hit else "NONE"
    if task == "multihop":
        company = read_fact(context, "works", params["person"]) or "NONE"
        city = read_fact(context, "hq", company) or "NONE"
        return city if kind == "2-hop" else (read_fact(context, "country", city) or "NONE")
    records = [p for p in map(parse_line, context.split("\n")) if p is not None]
    labels = [read_note(note) or "" for _, _, note in records]
    if task == "oolong":
        counts = {label: labels.count(label) for label in LABELS}
        return answer_for(kind, counts, params)
    return pairs_for([r[0] for r in records], [r[1] for r in records], labels, params["a"], params["b"])


# ---- the code the oracle root writes --------------------------------------------------------------
_CHUNKS = "n_chunks = max(1, min({budget}, -(-len(text) // {chunk})))\n"
_NIAH_SUB = '''key = {key!r}
step = -(-len(text) // n_chunks)
chunks = [text[i : i + step + 200] for i in range(0, len(text), step)]
prompts = [f"Find the special magic number for {{key}} in the text below. Reply with the 7-digit number only, "
           f"or NONE.\\n\\n" + c for c in chunks]
replies = llm_query_batched(prompts)
found = [r.strip() for r in replies if r.strip().isdigit()]
answer = found[0] if found else "NONE"
print(len(chunks), "chunks searched; found:", sorted(set(found)))
'''
_NIAH_CODE = '''import re
match = re.search(r"special magic number for " + re.escape({key!r}) + r" is (\\d{{7}})", text)
answer = match.group(1) if match else "NONE"
print("found:", answer)
'''
_RECORDS = '''lines = [line for line in text.split("\\n") if line.strip()]
users = {int(line.split(" | ")[0].lstrip("#")): line.split(" | ")[1] for line in lines}
'''
_LABELS_SUB = '''size = -(-len(lines) // n_chunks)
instruction = {instruction!r}
prompts = [instruction + "\\n\\n" + "\\n".join(lines[i : i + size]) for i in range(0, len(lines), size)]
replies = llm_query_batched(prompts)
labels = {{}}
for reply in replies:
    for row in reply.splitlines():
        rid, sep, label = row.partition(":")
        rid = rid.strip().lstrip("#")
        if sep and rid.isdigit():
            labels[int(rid)] = label.strip().lower()
print(len(lines), "records,", len(labels), "labelled by", len(prompts), "sub-calls")
'''
_LABELS_CODE = '''import re
category = {category!r}
labels = {{}}
for line in lines:
    rid, user, date, note = line.split(" | ", 3)
    named = [category[w] for w in re.findall(r"[a-z]+", note.lower()) if w in category]
    labels[int(rid.lstrip("#"))] = named[0] if named else "unknown"
print(len(lines), "records labelled by keyword")
'''
_AGGREGATE = {
    "count": 'answer = sum(1 for v in labels.values() if v == {label!r})\nprint("count:", answer)\n',
    "most_frequent": ('from collections import Counter\ncounts = Counter(labels.values())\n'
                      'answer = max({labels!r}, key=lambda k: counts.get(k, 0))\nprint(dict(counts), answer)\n'),
    "least_frequent": ('from collections import Counter\ncounts = Counter(labels.values())\n'
                       'answer = min({labels!r}, key=lambda k: counts.get(k, 0))\nprint(dict(counts), answer)\n'),
    "compare": ('from collections import Counter\ncounts = Counter(labels.values())\n'
                'a, b = counts.get({a!r}, 0), counts.get({b!r}, 0)\n'
                'answer = "more" if a > b else "fewer" if a < b else "same"\nprint(a, b, answer)\n'),
    "pairs": '''from collections import defaultdict
from itertools import combinations
wanted = {{{a!r}, {b!r}}}
by_user = defaultdict(list)
for rid, label in labels.items():
    if label in wanted:
        by_user[users[rid]].append((rid, label))
answer = sorted(sorted([i, j]) for group in by_user.values() for (i, la), (j, lb) in combinations(group, 2)
                if {{la, lb}} == wanted)
print(len(answer), "pairs")
''',
}
_HOPS_SUB = '''docs = text.split("\\n\\n### Document")

def ask(question, name):
    hits = [d for d in docs if name in d]
    prompts = [f"Read the documents below. {{question}} Reply with the name only, or NONE.\\n\\n"
               + "\\n\\n".join(hits[i : i + 10]) for i in range(0, len(hits), 10)]
    replies = [r.strip() for r in llm_query_batched(prompts)] if prompts else []
    found = [r for r in replies if r and r != "NONE" and not r.startswith("[error]")]
    return found[0] if found else "NONE"

company = ask("Which company does {person} work for?", {person!r})
city = ask(f"In which city does {{company}} have its headquarters?", company)
'''
_HOPS_CODE = '''import re

def grab(pattern):
    match = re.search(pattern, text)
    return match.group(1) if match else "NONE"

company = grab(re.escape({person!r}) + r" has worked at ([A-Z][a-z]+ [A-Z][a-z]+) for")
city = grab(re.escape(company) + r" has its headquarters in ([A-Z][a-z]+)\\.")
'''


def root_program(task: str, kind: str, params: dict[str, str], *, sub_calls: int,
                 chunk_chars: int = CHUNK_CHARS) -> str:
    """The oracle root's working step for a question: sub-calls when it has any, code alone otherwise."""
    use_sub = sub_calls > 0
    chunks = _CHUNKS.format(budget=max(1, sub_calls - 5), chunk=chunk_chars)
    if task == "niah":
        body = chunks + _NIAH_SUB.format(**params) if use_sub else _NIAH_CODE.format(**params)
    elif task == "multihop":
        body = (_HOPS_SUB if use_sub else _HOPS_CODE).format(**params)
        if kind == "3-hop":
            body += ('answer = ask(f"Which country is the city of {city} in?", city)\n' if use_sub else
                     'answer = grab(re.escape(city) + r" is a city in ([A-Z][a-z]+)\\.")\n')
        else:
            body += "answer = city\n"
        body += 'print(company, city, answer)\n'
    else:
        labelling = (chunks + _LABELS_SUB.format(instruction=LABEL_INSTRUCTION) if use_sub else
                     _LABELS_CODE.format(category={w: k for k, words in THINGS.items() for w in words}))
        aggregate = _AGGREGATE["pairs" if task == "oolong_pairs" else kind].format(labels=list(LABELS), **params)
        body = _RECORDS + labelling + aggregate
    intro = ("I will hand the pieces to the sub-model and aggregate its answers with code." if use_sub else
             "There are no sub-calls in my budget, so code has to do it alone.")
    return f"{intro}\n```python\n{body}```"


oracle = OracleModel()
"""A ready oracle, for `python -m rlmnb.testing.fake_cli --responder rlmnb._eval.oracles:oracle`."""
