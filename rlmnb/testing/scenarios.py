"""Ready-made offline runs: inputs, a question and scripted models that behave like capable ones.

The root scripts are the code a capable model writes for the task; the sub-models answer with the
deterministic responders. Used by `rlmnb demo`, the tutorials, the tests and the benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .generators import haystack
from .responders import find_needle
from .scripted import ScriptedLM

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
