"""Ready-made offline runs: inputs, a question and scripted models that behave like capable ones.

The root scripts are the code a capable model writes for the task; the sub-models answer with the
deterministic responders. Used by `rlmnb demo`, the tutorials, the tests and the benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlmnb.testing.generators import haystack
from rlmnb.testing.responders import find_needle
from rlmnb.testing.scripted import ScriptedLM

__all__ = ["CHILD_ASK", "CHILD_SEARCH", "CHILD_SUBMIT", "DOCS_FIND", "DOCS_FIX", "DOCS_LOOK", "DOCS_SUBMIT",
           "DOCS_TOTALS", "FILES_ANALYSE", "FILES_EXPLORE", "FILES_SUBMIT",
           "NEEDLE_EXPLORE", "NEEDLE_SEARCH", "NEEDLE_SUBMIT", "NEEDLE_VERIFY", "RECURSE_CHILDREN", "RECURSE_SPLIT",
           "RECURSE_SUBMIT", "REFINE_CHECK", "REFINE_CHECK_SUBMIT", "REFINE_DRAFT", "REFINE_DRAFT_SUBMIT",
           "TABLE_COUNT", "TABLE_EXPLORE", "TABLE_SUBMIT", "Scenario", "documents_models", "files_models", "needle_models",
           "needle_scenario", "recursion_models", "refine_models", "report_text", "table_models"]

NEEDLE_EXPLORE = '''Let me look at the input first.
```python
text = inputs["text"]
print(f"{len(text):,} characters")
print(text[:200])
```'''

NEEDLE_SEARCH = '''The text is far too long to read at once. I will split it into overlapping chunks and ask the
sub-model to look for the magic number in each, all chunks in one batch.
```python
chunk, overlap = {chunk}, 200
starts = range(0, len(text), chunk)
chunks = [text[s : s + chunk + overlap] for s in starts]
prompts = [
    "Find the magic number in the text below. Reply with the 7-digit number only, or NONE.\\n\\n" + c
    for c in chunks
]
replies = llm_query_batched(prompts)
found = sorted({{r.strip() for r in replies if r.strip().isdigit()}})
print(len(chunks), "chunks searched; candidates:", found)
```'''

NEEDLE_VERIFY = '''Let me verify the candidate against the text itself before submitting.
```python
assert len(found) == 1, found
answer = found[0]
print("context:", text[text.find(answer) - 40 : text.find(answer) + 20])
```'''

NEEDLE_SUBMIT = '''The number appears in the text in the right sentence.
```python
submit(answer)
```'''


@dataclass
class Scenario:
    question: str
    inputs: dict[str, Any]
    root: ScriptedLM
    sub: ScriptedLM
    expected: Any
    settings: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Scenario({self.question!r}, inputs={sorted(self.inputs)})"


def needle_scenario(size_chars: int = 2_000_000, *, seed: int = 0, chunks: int = 20,
                    latency: float = 0.0) -> Scenario:
    """Find a hidden 7-digit number in a large generated text with one batched fan-out."""
    hay = haystack(size_chars, seed=seed)
    chunk = -(-len(hay.text) // chunks)
    root = ScriptedLM([NEEDLE_EXPLORE, NEEDLE_SEARCH.format(chunk=chunk), NEEDLE_VERIFY, NEEDLE_SUBMIT],
                      name="scripted-root")
    sub = ScriptedLM(find_needle, name="scripted-sub", latency=latency)
    return Scenario(question="What is the magic number hidden in the text?", inputs={"text": hay.text},
                    root=root, sub=sub, expected=hay.needle, settings={"max_llm_calls": max(50, chunks + 5)})


def needle_models(chunks: int, text_chars: int, *, latency: float = 0.0) -> tuple[ScriptedLM, ScriptedLM]:
    """The scripted root and sub-model of the needle search, for a text of `text_chars` characters."""
    chunk = -(-text_chars // chunks)
    root = ScriptedLM([NEEDLE_EXPLORE, NEEDLE_SEARCH.format(chunk=chunk), NEEDLE_VERIFY, NEEDLE_SUBMIT],
                      name="scripted-root")
    return root, ScriptedLM(find_needle, name="scripted-sub", latency=latency)


# ---- tutorial 2: counting hidden labels in a large table ------------------------------------------------
TABLE_EXPLORE = '''First, the shape of the table and a few rows.
```python
df = inputs["tickets"]
print(df.shape)
print(df.dtypes.to_string())
print(df.head(3).to_string())
```'''

TABLE_COUNT = '''The label is only implied by the wording, so the sub-model has to read every text. I will send the
texts in chunks of {rows:,} rows, one ticket per line, and add up the JSON counts with code.
```python
import json
from collections import Counter

texts = df["text"].tolist()
size = {rows}
instruction = ("Classify each support ticket below (one per line) as billing, shipping, technical, "
               "account or praise. Reply with JSON counts per label only.")
prompts = [instruction + "\\n\\n" + "\\n".join(texts[i : i + size]) for i in range(0, len(texts), size)]
replies = llm_query_batched(prompts)
counts, unparsed = Counter(), 0
for reply in replies:
    try:
        counts.update(json.loads(reply))
    except ValueError:
        unparsed += 1
print(len(prompts), "chunks,", unparsed, "unparsed")
print(dict(counts), "total", sum(counts.values()))
```'''

TABLE_SUBMIT = '''Every row was counted once (the total matches the number of rows), so I can submit.
```python
assert sum(counts.values()) == len(df)
submit({"counts": dict(counts), "total": sum(counts.values())})
```'''


def table_models(rows_per_chunk: int = 20_000) -> tuple[ScriptedLM, ScriptedLM]:
    from rlmnb.testing.responders import count_labels

    root = ScriptedLM([TABLE_EXPLORE, TABLE_COUNT.format(rows=rows_per_chunk), TABLE_SUBMIT], name="scripted-root")
    return root, ScriptedLM(count_labels, name="scripted-sub")


# ---- tutorial 3: a question across several files --------------------------------------------------------
FILES_EXPLORE = '''Several inputs of different kinds: let me see what each one is.
```python
for name in inputs:
    value = inputs[name]
    print(name, type(value).__name__, len(value))
print(sorted(inputs["logs"])[:5])
print(inputs["logs"]["day1.log"][:160])
```'''

FILES_ANALYSE = '''The logs have a fixed format, so counting errors per service is a job for code. The runbook is prose:
I will ask the sub-model who owns the worst service. Costs come from the Parquet file, which sql() reads in place.
```python
import re
from collections import Counter

errors = Counter()
for name, text in inputs["logs"].items():
    errors.update(re.findall(r" ERROR (\\w+) ", text))
worst, worst_count = errors.most_common(1)[0]
owner = llm_query(f"Who is the on-call owner for {worst}? Reply with the name only.\\n\\n" + inputs["runbook"]).strip()
cost = sql(f"SELECT monthly_cost FROM costs WHERE service = '{worst}'")
monthly = float(cost["monthly_cost"].iloc[0])
print(dict(errors), worst, owner, monthly)
```'''

FILES_SUBMIT = '''All three facts are checked against the files.
```python
submit({"service": worst, "errors": worst_count, "owner": owner, "monthly_cost": monthly})
```'''


def files_models() -> tuple[ScriptedLM, ScriptedLM]:
    from rlmnb.testing.responders import runbook_owner

    root = ScriptedLM([FILES_EXPLORE, FILES_ANALYSE, FILES_SUBMIT], name="scripted-root")
    return root, ScriptedLM(runbook_owner, name="scripted-sub")


# ---- tutorial 4: child runs, verification and refinement ------------------------------------------------
RECURSE_SPLIT = '''The report has sections; each deserves its own small investigation, so I will hand each section
to a child run with the section bound as its input.
```python
sections = [s for s in inputs["report"].split("\\n## ") if s.strip()]
print(len(sections), "sections:", [s.splitlines()[0][:40] for s in sections])
```'''

RECURSE_CHILDREN = '''```python
findings = rlm_query_batched(
    ["Find the magic number in this section; answer with the number or NONE." for _ in sections],
    [{"section": s} for s in sections],
)
print(findings)
```'''

RECURSE_SUBMIT = '''```python
numbers = [f for f in findings if isinstance(f, str) and f.isdigit()]
submit(f"The magic number is {numbers[0]}; it was found in 1 of {len(sections)} sections by child runs.")
```'''

CHILD_SEARCH = '''```python
text = inputs["section"]
print(len(text))
```'''

CHILD_ASK = '''```python
reply = llm_query("Reply with the 7-digit number after 'magic number is', or NONE.\\n\\n" + text).strip()
print(reply)
```'''

CHILD_SUBMIT = '''```python
submit(reply)
```'''


def recursion_models() -> tuple[ScriptedLM, ScriptedLM, ScriptedLM]:
    """(root, child root, sub): the root fans out to child runs; each child asks the sub-model."""

    def child(messages: list[dict[str, Any]]) -> str:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return (CHILD_SEARCH, CHILD_ASK, CHILD_SUBMIT)[min(turn, 2)]

    root = ScriptedLM([RECURSE_SPLIT, RECURSE_CHILDREN, RECURSE_SUBMIT], name="scripted-root")
    return root, ScriptedLM(child, name="scripted-child"), ScriptedLM(find_needle, name="scripted-sub")


def report_text(sections: int = 6, section_chars: int = 50_000, *, seed: int = 0) -> tuple[str, str]:
    """(markdown report with `sections` sections, the hidden number) for tutorial 4."""
    hay = haystack(sections * section_chars, seed=seed, position=0.55)
    text = hay.text
    size = len(text) // sections
    parts = []
    for i in range(sections):
        body = text[i * size: (i + 1) * size if i < sections - 1 else len(text)]
        parts.append(f"## Section {i + 1}\n{body}")
    return "\n".join(parts), hay.needle


# ---- tutorial 4b: refinement --------------------------------------------------------------------------
REFINE_DRAFT = '''```python
import re
from collections import Counter

words = Counter(re.findall(r"[a-z]+", inputs["report"].lower()))
top = [w for w, _ in words.most_common(3)]
print(top)
```'''

REFINE_DRAFT_SUBMIT = '''```python
submit({"top_words": top})
```'''

REFINE_CHECK = '''A draft answer is bound as inputs["draft"]. I will check it against the report and add the counts.
```python
import re
from collections import Counter

draft = dict(inputs["draft"])
words = Counter(re.findall(r"[a-z]+", inputs["report"].lower()))
checked = [w for w, _ in words.most_common(3)]
print(draft, checked)
```'''

REFINE_CHECK_SUBMIT = '''```python
submit({"top_words": checked, "counts": [words[w] for w in checked], "draft_was_right": draft["top_words"] == checked})
```'''


def refine_models() -> ScriptedLM:
    """One root model for every pass: it drafts when there is no draft, and checks a draft when there is."""

    def brain(messages: list[dict[str, Any]]) -> str:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        has_draft = 'inputs["draft"]' in messages[1]["content"]
        steps = (REFINE_CHECK, REFINE_CHECK_SUBMIT) if has_draft else (REFINE_DRAFT, REFINE_DRAFT_SUBMIT)
        return steps[min(turn, 1)]

    return ScriptedLM(brain, name="scripted-root")


# ---- tutorial 9: documents and images --------------------------------------------------------------------
DOCS_LOOK = '''Contracts and invoice scans. Let me see what is there first.
```python
contracts, invoices = inputs["contracts"], inputs["invoices"]
print(contracts, list(contracts))
print(invoices, {k: (v.width, v.height) for k, v in invoices.items()})
```'''

DOCS_FIND = '''I will ask the sub-model about every page of every contract with one llm_map, and keep the pages where
it quotes a notice clause.
```python
pages = [(name, i, page) for name in contracts for i, page in enumerate(contracts[name].pages)]
found = llm_map([str(page) for _, _, page in pages],
                "Quote, word for word, the sentence that sets the notice period for terminating the agreement. "
                "Reply with an empty string if the page has none.")
hits = [(name, i, page, quote) for (name, i, page), quote in zip(pages, found) if quote]
for name, i, page, quote in hits:
    print(name, i, quote)
```'''

DOCS_TOTALS = '''The invoices are images: a vision sub-call reads each total, all in one batch.
```python
files = sorted(invoices)
replies = llm_query_batched(["What is the total due on this invoice? Reply with the amount and currency only."]
                            * len(files), images=[[invoices[f]] for f in files])
totals = dict(zip(files, replies))
print(totals)
```'''

DOCS_SUBMIT = '''```python
submit({"notice_periods": [{"text": quote, "source": name, "page": i} for name, i, page, quote in hits],
        "invoice_totals": totals})
```'''

DOCS_FIX = '''The pages were counted from 0 by enumerate(); a page knows its own number.
```python
submit({"notice_periods": [{"text": quote, "source": name, "page": page.number} for name, i, page, quote in hits],
        "invoice_totals": totals})
```'''


def documents_models() -> tuple[ScriptedLM, ScriptedLM]:
    """The scripted root of tutorial 9 (it cites 0-based pages first, and fixes them when the quotes guard
    says so), and a scripted sub-model that quotes notice clauses from packed pages and reads invoice
    totals from images: from the PNG text the generator wrote (it reads no pixels)."""
    from rlmnb.testing.fake_behaviours import image_text_responder, images_of

    from .packed import PackedResponder

    def clause(page: str) -> str:
        return next((line.strip() for line in page.splitlines() if "written notice" in line), "")

    packed = PackedResponder(clause)

    def sub(messages: list[dict[str, Any]]) -> str:
        if messages and images_of(messages[-1]):
            return image_text_responder(messages)
        return str(packed(messages))

    root = ScriptedLM([DOCS_LOOK, DOCS_FIND, DOCS_TOTALS, DOCS_SUBMIT, DOCS_FIX], name="scripted-root")
    return root, ScriptedLM(sub, name="scripted-vision-sub")
