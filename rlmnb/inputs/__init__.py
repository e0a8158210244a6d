"""Turn the user's values, paths, tables and lazy frames into `Field`s and render the InputsSummary.

The root model never sees an input's body: it sees the summary (name, kind, size, estimated tokens,
columns, a short preview) and reads `inputs[name]` in the sandbox. Describing an input reads metadata
and a bounded sample and never scans it whole, so binding a 10 GB table costs milliseconds, and the
rendered summary stays under `config.summary_max_tokens` whatever the inputs.

Families and the registry
-------------------------
Each family of values is one module in `_families/` holding one `FAMILY = Family(...)` record, and one
line in `_registry.FAMILY_MODULES`. A family says:

    kinds       the FieldInfo kinds it produces ("text", "table", "file_table"...), unique per family
    classes     "module:Class" names recognised on the value's type or its bases without importing
                the module (the user has imported it if they hold such a value); `accepts` is a
                predicate for stdlib values instead
    describe    (name, value, config) -> Field: a FieldInfo from metadata and a bounded sample, and a
                loader that gives the local sandbox's read-only view (cached by `Field.load()`);
                the Field's `read_paths` / `endpoints` name what a confined kernel must reach
    crossing    Field -> spec, how it reaches the kernel sandbox without its data (a path, SQL, a
                serialised plan, a scheduler address); None (the default) ships the data as a file
                (Arrow IPC, .npy, text, pickle; see rlmnb/_sandbox/transfer.py)
    reopen      (name, spec) -> the kernel's view, rebuilt from the crossing spec inside the kernel
    view        (name, shipped data) -> the kernel's read-only view of data that was shipped
    tables/sql  the kinds sql() registers as DuckDB tables, and how a loaded value becomes something
                DuckDB scans (a relation, an Arrow table, a pandas frame)
    relations   more relations than the one under the input's name (a workbook's sheets), each made
                when a query names it

    export      (source) -> one pyarrow Table to ship when the input cannot be reopened

To add a kind:

1. write `rlmnb/inputs/_families/<family>.py` ending in `FAMILY = Family(...)` (`Family` is exported
   here) and add its module name to `FAMILY_MODULES` in `rlmnb/inputs/_registry.py`;
2. a lazy table builds its FieldInfo with `_tables/lazytable.py:lazy_table_info` (column names, type
   names, an Arrow head, the row count if known), sets `Field.plan` to what its `reopen` needs, and
   `read_paths` / `endpoints` to what a confined kernel must reach;
3. list the kinds that `sql()` should see in `tables`: sql() registers them under their input names
   with DuckDB's `register` (pandas, Arrow, Polars, datasets, relations).

Modules: `_records` (FieldInfo, InputsSummary, Field), `_registry` (Family, recognise, describe,
crossing and kernel loaders), `_summary` (bind_inputs, rendering under the cap), `_previews` (bounded
renderings and token estimates), `_readonly` (read-only proxies), `_filesystem` (text-or-binary sniff,
folder walk); `_tables/`: `duck` (the process's DuckDB database and sql()), `lazytable` (FieldInfo of
a lazy table), `filetables` (tables in files), `parquet` (Parquet footers); `_families/`: `files`,
`text`, `frames` (pandas), `arrow`, `datasets` (pyarrow.dataset), `relations` (DuckDB), `arrays`
(numpy), `containers`, `polars_frames`, `dask_frames`, `documents` (with `pdfscan` on the host, `docread`
in the sandbox, `sheets`, a workbook's sheets as tables, and `biff`, an .xls's records), `image_folders`. The lazy families use DuckDB, not narwhals:
docs/decisions/narwhals.md.

What the sandbox sees (`Field.load()`) never lets model code change the user's objects and never
copies them in bulk:

    str, bytes, pyarrow Table, scalars    as is (immutable)
    pandas DataFrame / Series             obj.copy(deep=False): copy-on-write keeps writes local
    numpy ndarray                         a read-only view
    list / tuple, dict / Mapping          ReadOnlySequence / ReadOnlyMapping: zero-copy views whose
                                          elements are frozen by the same rules when accessed
    bytearray / memoryview                a read-only memoryview
    pathlib.Path to a file                its text (str) or bytes, read by the first load()
    pathlib.Path to a directory           DirectoryView: relative path -> text or bytes, each file
                                          read when first accessed

`list(x)` and `dict(x)` give shallow copies whose nested lists and dicts are still read-only views;
`copy.deepcopy(x)` gives a plain, writable, JSON-able copy. Views are not JSON-serialisable
themselves (json only accepts real lists and dicts, which would mean copying), and pandas treats
any Mapping that is not a dict as a list of its keys: `pd.DataFrame(dict(x))`, not `pd.DataFrame(x)`.

Previews: `config.preview_chars` governs text, bytes, files and scalars; `config.preview_rows`
governs tables, series, arrays, lists, dicts and a directory's file names. With both at 0 the
summary holds no data at all, only names, kinds, sizes, column names and dtypes.
"""

from __future__ import annotations

from rlmnb.inputs._families.files import GlobFiles
from rlmnb.inputs._filesystem import decode_file
from rlmnb.inputs._readonly import DirectoryView, ReadOnlyMapping, ReadOnlySequence
from rlmnb.inputs._records import KINDS, SUPPORTED, Field, FieldInfo, InputsSummary
from rlmnb.inputs._registry import Family, describe, recognise
from rlmnb.inputs._summary import bind_inputs, render_summary

__all__ = [
    "KINDS", "SUPPORTED", "DirectoryView", "Family", "Field", "FieldInfo", "GlobFiles", "InputsSummary",
    "ReadOnlyMapping", "ReadOnlySequence", "bind_inputs", "decode_file", "describe", "recognise",
    "render_summary",
]
