"""Write the tutorial notebooks and execute them in a real kernel so their outputs are saved.

    .venv/bin/python notebooks/make_notebooks.py          # all of them
    .venv/bin/python notebooks/make_notebooks.py 02 04    # some of them

The notebooks are committed with their outputs; `make test` re-runs them under nbval and compares.
Everything runs offline: data comes from rlmnb.testing generators (seeded, written to notebooks/data/,
which is not committed) and the models are scripted.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent

SWITCH = '''# This tutorial runs offline: scripted models play the root model and the sub-model.
# To use a real provider instead, set the models (and the provider's key, e.g. OPENAI_API_KEY) and
# leave out -m/-s in the %%rlm cells below:
#   %env RLMNB_MODEL=openai/gpt-5
#   %env RLMNB_SUB_MODEL=openai/gpt-5-mini
%load_ext rlmnb'''


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(text.strip())


NOTEBOOKS: dict[str, list[nbformat.NotebookNode]] = {
    "01_quickstart": [
        md("""
# Quickstart: one question over 20 MB of text

A Recursive Language Model never puts your data in the model's prompt. The data stays in a sandbox as
`inputs[name]`; the root model sees only a short summary and answers with Python that slices the data and
hands pieces to a sub-model with `llm_query_batched`. This notebook hides one fact in 20 MB of generated
text and asks for it."""),
        code(SWITCH),
        code("""
from rlmnb.testing.generators import haystack

hay = haystack(20_000_000, seed=1)
text = hay.text
print(f"{len(text):,} characters; the first 120: {text[:120]!r}")"""),
        md("""
The scripted models below stand in for a provider. Their replies are the code a capable model writes for
this task: look at the input, split it into overlapping chunks, ask the sub-model about every chunk in one
batch, check the candidate, submit."""),
        code("""
from rlmnb.testing.scenarios import needle_models

root, sub = needle_models(chunks=20, text_chars=len(text))
root, sub"""),
        md("""
`-i text` binds the variable `text` as `inputs["text"]`; `-o run` keeps the `RunResult`. The widget shows
each turn's code and output, every sub-call, and the budget. The cell's value is the answer."""),
        code("""
%%rlm -m root -s sub -i text -o run
What is the magic number hidden in the text?"""),
        code("""
print(run.status, run.usage)
print("correct:", run.answer == hay.needle)"""),
        md("What the root model was shown about the input (its first prompt holds this, never the text itself):"),
        code("print(run.trajectory.events[0].summary)"),
    ],
    "02_dataframes": [
        md("""
# DataFrames: counting labels that only the text reveals

An OOLONG-style task: a million support tickets (user, date, free text). Each ticket's label (billing,
shipping, technical, account, praise) is never stored; it is only implied by the wording, so the model must
read every row. Code does the structure (chunks of rows, adding up counts); the sub-model does the reading.
A pydantic schema makes the answer structured and checked."""),
        code(SWITCH),
        code("""
from rlmnb.testing.generators import labelled_table

df, truth = labelled_table(1_000_000, seed=0)
print(df.shape)
df.head()"""),
        code("""
from pydantic import BaseModel


class LabelCounts(BaseModel):
    counts: dict[str, int]
    total: int"""),
        code("""
from rlmnb.testing.scenarios import table_models

root, sub = table_models(rows_per_chunk=20_000)"""),
        code("""
%%rlm -m root -s sub -i tickets=df --schema LabelCounts --max-llm-calls 60 -o run
How many tickets of each label (billing, shipping, technical, account, praise) are there?"""),
        md("The answer is a validated `LabelCounts`. Check it against the ground truth pandas knows:"),
        code("""
print(run.answer.counts == truth.value_counts().to_dict(), run.answer.total == len(df))
print(run.usage)"""),
        md("The user's DataFrame is untouched: the sandbox saw a copy-on-write view."),
        code("df.shape, list(df.columns)"),
    ],
    "03_files": [
        md("""
# Files and folders: one question across logs, prose and tables

`-f NAME=PATH` binds a file (text, or bytes for binary files), a table in files (Parquet, CSV, JSON Lines or
Arrow files, a folder or a glob of them: a DuckDB relation that `sql()` queries in place) or a whole directory
(a lazy mapping of relative path to text). Nothing is read until the model's code asks for it."""),
        code(SWITCH),
        code("""
from pathlib import Path

from rlmnb.testing.generators import log_folder

ops = log_folder(Path("data/ops"), seed=0, days=5, lines_per_day=2000)
sorted(p.relative_to(ops).as_posix() for p in ops.rglob("*") if p.is_file())"""),
        code("""
from rlmnb.testing.scenarios import files_models

root, sub = files_models()"""),
        code("""
%%rlm -m root -s sub -f logs=data/ops/logs -f runbook=data/ops/runbook.md -f costs=data/ops/costs.parquet -f services=data/ops/services.csv -o run
Which service logged the most errors, who is its on-call owner, and what does it cost per month?"""),
        code("""
import re
from collections import Counter

errors = Counter(m for p in (ops / "logs").glob("*.log") for m in re.findall(r" ERROR (\\w+) ", p.read_text()))
print("ground truth:", errors.most_common(1))"""),
    ],
    "04_recursion_and_verification": [
        md("""
# Recursion and verification

Three ways a run can recurse, all on one shared budget and shown as one tree:
- `--depth 2`: `rlm_query` hands a piece of the data to a **child run** with its own sandbox.
- `--verify`: a guard scores each answer; a low score sends the run back to revise it.
- `--refine N`: the answer becomes the input `draft` of a child run that improves it."""),
        code(SWITCH),
        code("""
from rlmnb.testing.scenarios import recursion_models, report_text

report, secret = report_text(sections=6, section_chars=50_000, seed=3)
root, child, sub = recursion_models()
print(f"{len(report):,} characters in {report.count('## Section')} sections")"""),
        md("The root splits the report into sections and starts one child run per section:"),
        code("""
%%rlm -m root -s sub --child-model child --depth 2 --verify min_chars=40 -i report -o tree
Find the magic number in the report."""),
        code("""
from rlmnb.events import AttemptVerified, RunFinished, RunStarted

for start in tree.trajectory.of(RunStarted):
    print("  " * start.depth + f"depth {start.depth}: {start.label or 'root run'}: {start.question[:50]}")
print("attempts:", [(a.depth, a.confidence) for a in tree.trajectory.of(AttemptVerified)])
print("correct:", secret in tree.answer)
per_run = sum(f.usage["sub_calls"] + f.usage["root_calls"] for f in tree.trajectory.of(RunFinished))
print("usage rolls up:", per_run == tree.usage.calls, tree.usage)"""),
        md("Refinement: the first answer is bound as `draft` in a child run of the same question, which checks it:"),
        code("""
from rlmnb.testing.scenarios import refine_models

drafter = refine_models()"""),
        code("""
%%rlm -m drafter --refine 1 -i report -o refined
What are the three most common words in the report?"""),
        code("[(s.depth, s.label or 'root run') for s in refined.trajectory.of(RunStarted)]"),
    ],
    "05_inspecting_runs": [
        md("""
# Inspecting runs: dry runs, exports, pandas, replay

Before spending anything, `--dry-run` shows exactly what the root model would be sent and what it may
cost. After a run, the trajectory can be exported, read as a DataFrame (one row per sub-call) and replayed
offline with every model reply served from the record."""),
        code(SWITCH),
        code("""
from rlmnb.testing.generators import haystack
from rlmnb.testing.scenarios import needle_models

text = haystack(2_000_000, seed=5).text
root, sub = needle_models(chunks=10, text_chars=len(text))"""),
        md("A dry run against a priced model: no call is made, no key is needed."),
        code("""
%%rlm --dry-run -m openai/gpt-5-mini -i text
What is the magic number hidden in the text?"""),
        code("""
%%rlm -m root -s sub -i text -o run --quiet
What is the magic number hidden in the text?"""),
        md("""
Export the run. In JupyterLab, double-click `data/run.rlmnb.json` in the file browser: the rlmnb extension
shows the whole run tree from the file, with no kernel. The HTML file is a standalone page to share."""),
        code("""
%rlm export data/run.rlmnb.json
%rlm export data/run.html"""),
        code("""
from rlmnb import Trajectory

calls = Trajectory.load("data/run.rlmnb.json").to_frame()
calls[["turn", "prompt_chars", "reply", "input_tokens", "output_tokens"]].head()"""),
        code("""calls.groupby("reply").size()"""),
        md("Replay the saved run: same code, same sandbox, every reply from the record, zero cost."),
        code("""
%%rlm --replay data/run.rlmnb.json -i text --quiet
(the question comes from the record)"""),
        code("""
print(_rlm.status, _rlm.answer == run.answer, _rlm.usage.cost_usd)"""),
        md("A run whose inputs changed diverges, and says where:"),
        code("""
from rlmnb import RLM, ReplayDivergence

try:
    RLM.replay("data/run.rlmnb.json", text=text.replace("magic", "secret"))
except ReplayDivergence as exc:
    print(str(exc)[:90])"""),
    ],
    "08_evaluating_models": [
        md("""
# Evaluating models: how good is it on your models?

`rlmnb eval` (and `rlmnb.evaluation` from Python) generates long-context tasks at any size from about 8K to 10M tokens, each with its ground
truth and scorer: `niah` (one needle among distractors), `oolong` (aggregates over labels that need
reading), `oolong_pairs` (pairs of records by a predicate over two labels, F1) and `multihop` (a chain of
two or three documents). `rlmnb.evaluation` runs methods side by side on the same instances: `rlm`,
`rlm_no_sub` (the REPL without sub-calls) and `direct` (the input in the prompt, cut to the window)."""),
        code("""
from rlmnb.evaluation import generate

inst = generate("oolong", "32k", seed=0, index=0)
print(inst.question)
print()
print(inst.inputs["context"][:300])
print()
print("answer:", inst.answer, "| tokens:", f"{inst.tokens:,}", "| score of the answer itself:", inst.score(inst.answer))"""),
        md("""
A partly right answer earns partial credit (OOLONG counts score `0.75 ** |error|`, as in the paper);
a malformed one scores 0."""),
        code("""
print(inst.score(inst.answer + 2), inst.score("about a hundred"), inst.score(None))"""),
        md("""
This notebook runs offline: oracle models that know the generators play the root model and the
sub-model. The root still writes real code that slices the input and calls `llm_query_batched`; the
oracle sub-model reads each piece as the generator wrote it. `direct` gets a 16K-token window, so the
larger inputs are cut, and `rlm_no_sub` has to manage with code alone."""),
        code("""
import shutil

from rlmnb.evaluation import EvalSpec, Setup, format_table, run_eval, summarise
from rlmnb.testing import ScriptedLM
from rlmnb.evaluation import OracleModel

oracle = OracleModel()
setup = Setup(ScriptedLM(oracle, name="oracle-root"), ScriptedLM(oracle, name="oracle-sub"),
              settings={"sandbox": "local"}, context_window=16_000)
spec = EvalSpec(tasks=["niah", "oolong", "oolong_pairs", "multihop"], sizes=["8k", "32k", "128k"],
                methods=["rlm", "rlm_no_sub", "direct"], setup=setup, n=2, out="data/eval")
shutil.rmtree("data/eval", ignore_errors=True)  # start afresh each time this notebook runs
report = run_eval(spec)
summary = summarise(report.rows)
print(format_table(summary))"""),
        md("""
Every run is one line of `data/eval/results.jsonl` (score, cost, calls, tokens, wall time). Running the
same evaluation again skips what is done, so an interrupted evaluation resumes:"""),
        code("""
again = run_eval(spec)
print(f"{again.ran} new runs, {again.skipped} already done")"""),
        md("Score and cost per query against input size, one line per method (matplotlib):"),
        code("""
from IPython.display import Image

from rlmnb.evaluation import plot_summary

Image(filename=str(plot_summary(summary, "data/eval/plot.png")))"""),
        md("""
## On real models

The same from a terminal, with any litellm model (set the provider's key first). Estimate first:
`--dry-run` calls no model; `--max-cost` stops the evaluation before it would pass a dollar limit.

```
rlmnb eval --task oolong --sizes 32k,256k,1m --methods rlm,direct -m openai/gpt-5 -s openai/gpt-5-mini -n 5 --dry-run
rlmnb eval --task oolong --sizes 32k,256k,1m --methods rlm,direct -m openai/gpt-5 -s openai/gpt-5-mini -n 5 \\
    --max-cost 20 --out results/
```

A local OpenAI-compatible server (vLLM, Ollama) works with `--api-base http://127.0.0.1:8000/v1` and a
price of your choosing (`--price NAME=IN,OUT`, dollars per million tokens). From Python, a dry-run
estimate for a priced model:"""),
        code("""
from rlmnb.evaluation import estimate

real = EvalSpec(tasks=["oolong"], sizes=["32k"], methods=["rlm", "direct"],
                setup=Setup("openai/gpt-5-mini", "openai/gpt-5-nano"), n=5)
for (task, size, method), cost in estimate(real).items():
    print(f"{task} {size:,} tokens {method}: ${cost.low:.4f} to ${cost.high:.4f} per run")"""),
    ],
    "06_big_data": [
        md("""
# Big data: Parquet datasets, Polars, DuckDB and Dask as inputs

Large tables rarely sit in one pandas DataFrame. Here a year of shop sales is held the four ways data people
hold big tables, and one question needs all of them:

- **sales**: a Hive-partitioned Parquet dataset (a folder per month), bound with `-f` as a file table;
- **products**: a Polars `LazyFrame` (a query plan, never collected to bind it);
- **stores**: a DuckDB relation;
- **reviews**: a Dask `DataFrame` on a local cluster with two worker processes.

None of them is loaded to describe it: the summary comes from file footers, schemas and a few first rows.
In the kernel sandbox each is reopened where it lives (the Parquet files, the Polars plan, the relation's
SQL, the same Dask scheduler) instead of being copied. `sql()` joins them all out of core with DuckDB."""),
        code(SWITCH),
        code("""
from pathlib import Path

from rlmnb.testing.shop import shop_data

shop = shop_data(Path("data/shop"))  # written once with DuckDB, about 20 MB
shop"""),
        code("""
# NBVAL_IGNORE_OUTPUT
# (a cluster's start-up may log)
import dask.dataframe as dd
import duckdb
import polars as pl
from distributed import Client, LocalCluster

cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0")
client = Client(cluster)"""),
        code("""
products = pl.scan_parquet("data/shop/products.parquet").select("product_id", "category", "name", "price")
stores = duckdb.read_parquet("data/shop/stores.parquet")
reviews = dd.read_parquet("data/shop/reviews")
print(type(products).__name__, type(stores).__name__, type(reviews).__name__, reviews.npartitions, "partitions")"""),
        md("""
The scripted root below writes what a capable model writes here: `sql()` for the join across the sales files,
the catalogue and the stores; Dask for the reviews (the aggregate runs on the cluster's workers); and
`llm_query_batched` over the unhappy reviews it picked, because the complaint is only implied by their
wording."""),
        code("""
from rlmnb.testing.shop import shop_models

root, sub = shop_models()"""),
        code("""
%%rlm -m root -s sub -f sales=data/shop/sales -i products -i stores -i reviews --max-llm-calls 150 -o run
Which product category earned the most in the North region in 2025, which of its products has the lowest average review rating, and what do that product's unhappy reviewers complain about most?"""),
        md("The same answer, worked out directly with DuckDB and pandas:"),
        code("""
from collections import Counter

from rlmnb.testing.shop import complaint_in

top = duckdb.sql(\"\"\"
    SELECT p.category FROM read_parquet('data/shop/sales/*/*.parquet', hive_partitioning = true) s
    JOIN 'data/shop/products.parquet' p USING (product_id) JOIN 'data/shop/stores.parquet' st USING (store_id)
    WHERE st.region = 'North' GROUP BY 1 ORDER BY sum(s.amount) DESC LIMIT 1\"\"\").fetchall()[0][0]
catalogue = pl.read_parquet("data/shop/products.parquet").to_pandas()
mine = reviews.compute().merge(catalogue[catalogue.category == top], on="product_id")
worst = mine.groupby("name").rating.mean().idxmin()
said = Counter(complaint_in(t) for t in mine[(mine.name == worst) & (mine.rating <= 2)].text)
print(top, worst, said.most_common(1))
print(run.answer == {"category": top, "product": worst, "complaint": said.most_common(1)[0][0],
                     "unhappy_reviews": said.total()})"""),
        md("""
What the root model was told about the inputs: kinds, sizes, columns, statistics and three rows each, never
the data."""),
        code("print(run.trajectory.events[0].summary)"),
        code("""
# NBVAL_IGNORE_OUTPUT
# (a cluster's shut-down may log)
client.close()
cluster.close()"""),
    ],
}


NOTEBOOKS["07_semantic_operators"] = [
    md("""
# Semantic operators: label every row, then check the answer's quotes

Some questions need the sub-model to read every row (the paper's OOLONG tasks: label thousands of records,
then aggregate). Inside the sandbox, `llm_classify(items, labels, instruction)`, `llm_filter(items,
condition)` and `llm_map(items, instruction, output=...)` do the tedious part: they pack many rows into each
sub-call with the instruction once, ask for a JSON reply, validate every answer and re-ask the broken ones on
their own. Items that still fail are `None`, listed with their reasons in `result.attrs["llm_errors"]`."""),
    code(SWITCH),
    code("""
from rlmnb.testing.generators import labelled_table

df, truth = labelled_table(20_000, seed=0)
print(df.shape)
df.head(3)"""),
    md("""
The scripted root model's replies are the code a capable model writes: look at the table, classify the text
column with one `llm_classify` call, count with pandas, submit. The scripted sub-model answers the packed
prompts and garbles 2 % of the items of every pack (dropped, unparsable or not a label), to show the re-asks."""),
    code('''
from rlmnb.testing import ScriptedLM
from rlmnb.testing.generators import label_of
from rlmnb.testing.packed import PackedResponder

look = """```python
print(inputs["tickets"].shape)
print(inputs["tickets"]["text"].head(3).tolist())
```"""
label = """```python
labels = llm_classify(inputs["tickets"]["text"], ["billing", "shipping", "technical", "account", "praise"],
                      "Label each support ticket by its topic.")
counts = {k: int(v) for k, v in labels.value_counts().items()}
print(counts, "unlabelled:", len(labels.attrs["llm_errors"]))
```"""
root = ScriptedLM([look, label, "```python\\nsubmit(counts)\\n```"], name="root")
sub = ScriptedLM(PackedResponder(label_of, garble=0.02, seed=1), name="sub")'''),
    code("""
%%rlm -m root -s sub -i tickets=df --max-llm-calls 1000 -o run
How many tickets of each label (billing, shipping, technical, account, praise) are there?"""),
    md("""
The widget shows the classification as one group with its packing figures. The same figures are in the
trajectory's `MapFinished` event:"""),
    code("""
from rlmnb.events import MapFinished

m = run.trajectory.of(MapFinished)[0]
print(f"{m.items:,} tickets in {m.packs:,} packs, {m.reasks:,} re-asked, {m.failures:,} failed, "
      f"{m.calls:,} sub-calls in all")
print("correct:", run.answer == truth.value_counts().to_dict())"""),
    md("""
## Checking quotes against the data

`--verify quotes` (or `verify=QuotesFound()` in the API) finds the quoted passages of an answer (strings in
quotation marks of 20+ characters, and fields named `quote`, `quotes`, `evidence`...) and looks each one up in
the run's inputs, whitespace forgiven: text, files, folders and the string columns of tables (through DuckDB,
a batch of rows at a time). A quote that is not in the data sends the answer back for revision."""),
    code('''
report = """Incident review, week 12.
The storage cluster ran out of disk twice in March.
Engineers added two nodes and the alerts stopped."""

first = """```python
submit({"cause": "disk", "evidence": "the cluster ran out of memory in March"})
```"""
second = """```python
submit({"cause": "disk", "evidence": "The storage cluster ran out of disk twice in March."})
```"""
root = ScriptedLM(["```python\\nprint(inputs['report'])\\n```", first, second], name="root")'''),
    code("""
%%rlm -m root -s sub -i report --verify quotes -o checked
What caused the incident? Quote the report."""),
    code("""
from rlmnb.events import AttemptVerified

for attempt in checked.trajectory.of(AttemptVerified):
    for q in attempt.details["quotes"]:
        found = f"found ({q['where']})" if q["found"] else "NOT found"
        print(f"attempt {attempt.attempt}: {q['quote']!r} {found}")"""),
    md("A quote can also point into a table: the finding names the row and the column."),
    code("""
from rlmnb import QuotesFound
from rlmnb import RLMConfig
from rlmnb.inputs import bind_inputs

fields, _ = bind_inputs({"tickets": df}, RLMConfig())
context = {"inputs": fields}
ticket = df["text"].iloc[12_345]
print(QuotesFound(min_chars=10)({"quote": ticket}, context))
print(context["details"]["quotes"][0]["where"])"""),
]


NOTEBOOKS["09_documents"] = [
    md("""
# Documents and images: contracts, scans and pages in the answer

`-f NAME=PATH` binds a PDF, Word, PowerPoint, Excel, HTML, Markdown or mail file, or a folder or glob of them,
as **documents**: the root model sees pages, words, metadata and outlines, never the text; in the sandbox a
document has `.text`, `.pages` (each page knows its `.number` and `.label`) and `.meta`, and is extracted on
first use (PDFium, python-docx...), inside the sandbox only. A folder of PNG/JPEG images binds as a mapping
of path to image, with sizes read from the file headers. `llm_query(prompt, images=[...])` sends images
(files, bytes, PIL images, or a scanned PDF page via `doc.pages[i]`) to a vision sub-model, and
`--verify quotes` checks quotes and **citations with pages**: `{"text": ..., "source": "a.pdf", "page": 7}`
must be on page 7 of a.pdf, or the answer goes back for revision.

**Both models here are scripted** (offline and deterministic). The scripted "vision" sub-model does not look
at pixels: the invoice images below show their totals in drawn text *and* carry them in their PNG metadata,
which is what the scripted sub-model reads. A real vision model (`-s openai/gpt-4o-mini`, a local Qwen2.5-VL
through Ollama) reads the pixels."""),
    code(SWITCH),
    code("""
from pathlib import Path

from rlmnb.testing.documents import contracts_folder

truth = contracts_folder(Path("data/docs"))
sorted(p.relative_to("data/docs").as_posix() for p in Path("data/docs").rglob("*") if p.is_file())"""),
    md("""
The scripted root's replies are the code a capable model writes: look at the inputs, ask the sub-model about
every page of every contract with one `llm_map`, read the invoice totals with one batch of vision sub-calls,
then submit citations. Its first answer counts pages from 0 (`enumerate`), a real mistake; the quotes guard
finds each sentence on the page after the cited one and sends the answer back."""),
    code("""
from rlmnb.testing.scenarios import documents_models

root, sub = documents_models()"""),
    md("""
What the root model is told about these inputs (`--dry-run` binds them and stops before any model call):"""),
    code("""
%%rlm --dry-run -m root -s sub -f contracts=data/docs/contracts -f invoices=data/docs/invoices
Which contracts set a notice period for termination, on which page, and what do the invoices total?"""),
    code("""
%%rlm -m root -s sub -f contracts=data/docs/contracts -f invoices=data/docs/invoices --verify quotes -o run
Which contracts set a notice period for termination, on which page, and what do the invoices total?"""),
    code("""
from rlmnb.events import AttemptVerified

for attempt in run.trajectory.of(AttemptVerified):
    print(f"attempt {attempt.attempt}: accepted={attempt.accepted}")
    for q in attempt.details["quotes"]:
        print("   ", "found" if q["found"] else "NOT found", "-", q["where"])"""),
    md("The vision sub-calls, as the trajectory records them (the images' sizes and hashes, never their bytes):"),
    code("""
from rlmnb.events import SubCallFinished, SubCallStarted

replies = {f.call_id: f.reply for f in run.trajectory.of(SubCallFinished)}
for call in run.trajectory.of(SubCallStarted):
    if call.images:
        image = call.images[0]
        print(f"{image['width']}x{image['height']} {image['mime']} -> {replies[call.call_id]!r}")"""),
    code("""
cited = {c["source"]: (c["page"], c["text"]) for c in run.answer["notice_periods"]}
print("citations correct:", cited == truth["notice"])
print("totals correct:", run.answer["invoice_totals"] == truth["totals"])"""),
]


def build(name: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = NOTEBOOKS[name]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    started = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    path = HERE / f"{name}.ipynb"
    nbformat.write(nb, path)
    print(f"{path.name}: {len(nb.cells)} cells, executed in {time.perf_counter() - started:.1f} s")
    return path


if __name__ == "__main__":
    wanted = sys.argv[1:]
    for key in NOTEBOOKS:
        if not wanted or any(key.startswith(w) for w in wanted):
            build(key)
