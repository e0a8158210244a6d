from __future__ import annotations

import builtins
import contextlib
import copy
import datetime
import decimal
import io
import json
import random
import string
import threading
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import rlmnb.inputs as inputs_mod
import rlmnb.inputs._families.files as files_mod
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import InputError
from rlmnb._ground.tokens import count_tokens
from rlmnb.inputs import (
    DirectoryView,
    FieldInfo,
    InputsSummary,
    ReadOnlyMapping,
    ReadOnlySequence,
    bind_inputs,
    describe,
    render_summary,
)

CFG = RLMConfig()
OFF = RLMConfig(preview_chars=0, preview_rows=0)


def _words(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(n))


def _frame(n: int = 1000) -> pd.DataFrame:
    return pd.DataFrame({
        "id": np.arange(n),
        "user": [f"user{i % 13}" for i in range(n)],
        "date": pd.date_range("2024-01-01", periods=n, freq="h"),
        "score": np.linspace(0, 1, n),
        "text": ["lorem ipsum dolor sit amet " * 3] * n,
    })


# --- kinds ---------------------------------------------------------------------------------------


def test_text_is_kept_as_is_with_head_and_tail_preview() -> None:
    text = "HEADMARK " + "middle " * 1000 + " TAILMARK"
    field = describe("doc", text, CFG)
    info = field.info
    assert (info.kind, info.python_type, info.size_chars) == ("text", "str", len(text))
    assert info.truncated and info.est_tokens > 1000
    head, tail = info.preview.split("\n")
    assert "HEADMARK" in head and "TAILMARK" in tail
    assert field.load() is text


def test_short_text_preview_is_whole_and_not_truncated() -> None:
    info = describe("q", "short text\nwith a newline", CFG).info
    assert info.preview == repr("short text\nwith a newline")
    assert not info.truncated


def test_a_str_that_looks_like_a_path_is_text() -> None:
    assert describe("p", "/etc/passwd", CFG).info.kind == "text"


def test_bytes_and_bytearray() -> None:
    field = describe("blob", b"abc" * 1000, CFG)
    assert (field.info.kind, field.info.size_bytes) == ("bytes", 3000)
    assert field.load() == b"abc" * 1000
    buf = bytearray(b"hello world")
    loaded = describe("buf", buf, CFG).load()
    assert isinstance(loaded, memoryview) and loaded.readonly and bytes(loaded) == b"hello world"
    with pytest.raises(TypeError):
        loaded[0] = 1
    assert buf == bytearray(b"hello world")


def test_text_file_is_read_on_load_not_at_bind(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("first version " * 100, encoding="utf-8")
    field = describe("notes", path, CFG)
    assert field.info.kind == "text_file" and field.info.python_type == "str"
    assert field.info.path == str(path.absolute()) and field.info.size_bytes == len("first version " * 100)
    assert "first version" in field.info.preview
    path.write_text("second version", encoding="utf-8")
    assert field.load() == "second version"


def test_describing_a_big_text_file_reads_only_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.log"
    line = "2024-01-01 INFO something happened in the system\n"
    path.write_text(line * 60_000, encoding="utf-8")  # ~3 MB
    read_sizes: list[int] = []
    real_open = builtins.open

    def counting_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        real_read = handle.read

        def read(n: int = -1) -> Any:
            data = real_read(n)
            read_sizes.append(len(data))
            return data

        handle.read = read  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr(files_mod, "open", counting_open, raising=False)
    field = describe("log", path, CFG)
    assert 0 < sum(read_sizes) <= 100_000
    assert field.info.est_tokens > 300_000
    read_sizes.clear()
    assert len(field.load()) == path.stat().st_size
    assert sum(read_sizes) >= path.stat().st_size


@pytest.mark.parametrize("data", [b"\x00\x01\x02binary" * 50, b"\xff\xfe\xfa not utf-8 " * 50])
def test_binary_file(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    field = describe("blob", path, CFG)
    assert field.info.kind == "binary_file" and field.info.detail.startswith("binary:")
    assert field.load() == data


def test_directory_is_a_lazy_read_only_mapping(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# beta", encoding="utf-8")
    (tmp_path / "c.bin").write_bytes(b"\x00\x01")
    field = describe("docs", tmp_path, CFG)
    info = field.info
    assert (info.kind, info.rows, info.truncated) == ("directory", 3, False)
    assert "3 files" in info.detail and "1 .md" in info.detail and "1 .txt" in info.detail
    assert info.preview.split("\n")[0] == "a.txt"
    view = field.load()
    assert isinstance(view, DirectoryView)
    (tmp_path / "a.txt").write_text("changed after load", encoding="utf-8")  # nothing read yet
    assert view["a.txt"] == "changed after load"
    assert view["sub/b.md"] == "# beta"
    assert view["c.bin"] == b"\x00\x01"
    assert sorted(view) == ["a.txt", "c.bin", "sub/b.md"] and len(view) == 3
    assert "sub/b.md" in view and "sub" not in view and "../a.txt" not in view
    for bad in ("missing.txt", "../a.txt", "/etc/passwd", "./a.txt", "sub"):
        with pytest.raises(KeyError):
            view[bad]
    with pytest.raises(TypeError, match="read-only"):
        view["new.txt"] = "x"
    with pytest.raises(TypeError, match="read-only"):
        del view["a.txt"]
    assert not (tmp_path / "new.txt").exists()


def test_directory_listing_stops_at_the_entry_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(8):
        (tmp_path / f"f{i}.txt").write_text("x", encoding="utf-8")
    monkeypatch.setattr(files_mod, "MAX_DIR_ENTRIES", 5)
    info = describe("many", tmp_path, CFG).info
    assert info.truncated and info.rows == 5 and "5+ files" in info.detail
    assert len(describe("many", tmp_path, CFG).load()) == 8  # the mapping itself is complete


def test_missing_path() -> None:
    with pytest.raises(InputError) as exc:
        describe("notes", Path("no/such/file.txt"), CFG)
    where = Path("no/such/file.txt").absolute()
    assert str(exc.value) == f"Input 'notes': no file or directory at {where}; check the path."


def test_table() -> None:
    df = _frame(1000)
    df.loc[0, "text"] = "y" * 500
    field = describe("tickets", df, CFG)
    info = field.info
    assert (info.kind, info.python_type, info.rows, info.columns) == ("table", "pandas.DataFrame", 1000, 5)
    assert info.size_bytes == int(df.memory_usage(deep=False).sum())
    assert dict(info.dtypes) == {"id": "int64", "user": "str", "date": "datetime64[us]", "score": "float64",
                                 "text": "str"}
    lines = info.preview.split("\n")
    assert lines[0] == "id | user | date | score | text" and len(lines) == 1 + CFG.preview_rows
    assert "y" * 59 + "…" in lines[1] and "y" * 61 not in lines[1]
    assert info.truncated
    block = render_summary([info], CFG).text
    assert 'inputs["tickets"]: table (pandas.DataFrame), 1,000 rows x 5 columns, ~' in block
    assert "columns: id int64, user str, date datetime64[us], score float64, text str" in block


def test_table_token_estimate_is_in_the_right_range() -> None:
    df = _frame(2000)
    exact = count_tokens(df.to_csv(index=False, header=False))
    est = describe("t", df, CFG).info.est_tokens
    assert 0.5 * exact < est < 2 * exact


def test_series_arrow_and_array() -> None:
    s = pd.Series(np.arange(100.0), name="score")
    sf = describe("s", s, CFG)
    assert (sf.info.kind, sf.info.rows, sf.info.dtypes) == ("series", 100, (("score", "float64"),))
    table = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    af = describe("t", table, CFG)
    assert (af.info.kind, af.info.rows, af.info.columns) == ("arrow", 3, 2)
    assert af.load() is table
    arr = np.arange(12.0).reshape(3, 4)
    arf = describe("m", arr, CFG)
    assert (arf.info.kind, arf.info.rows, arf.info.columns) == ("array", 3, 4)
    assert arf.info.detail == "shape 3 x 4, dtype float64"


def test_array_is_a_read_only_view() -> None:
    arr = np.arange(10)
    loaded = describe("v", arr, CFG).load()
    assert np.shares_memory(loaded, arr) and not loaded.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        loaded[0] = 99
    assert arr[0] == 0 and arr.flags.writeable


@pytest.mark.parametrize("value, python_type", [
    (42, "int"), (3.5, "float"), (True, "bool"), (None, "NoneType"), (decimal.Decimal("1.5"), "decimal.Decimal"),
    (datetime.date(2024, 1, 2), "datetime.date"), (np.float64(2.5), "numpy.float64"),
    (pd.Timestamp("2024-01-01"), "pandas.Timestamp"),
])
def test_scalars(value: Any, python_type: str) -> None:
    field = describe("x", value, CFG)
    assert (field.info.kind, field.info.python_type) == ("scalar", python_type)
    assert field.load() is value


# --- errors --------------------------------------------------------------------------------------


class _Custom:
    pass


@pytest.mark.parametrize("value", [lambda: 1, io.StringIO("x"), _Custom(), {1, 2}, threading.Lock()])
def test_unsupported_values(value: Any) -> None:
    with pytest.raises(InputError) as exc:
        describe("thing", value, CFG)
    message = str(exc.value)
    assert message.startswith("Input 'thing': ") and "pandas DataFrame" in message and "pathlib.Path" in message
    assert isinstance(exc.value, TypeError)


def test_unsupported_nested_value_names_where_it_is() -> None:
    with pytest.raises(InputError, match=r"Input 'rows': item \[1\]\['cb'\] is function"):
        describe("rows", [{"cb": 1}, {"cb": lambda: 0}], CFG)
    with pytest.raises(InputError, match=r"Input 'cfg': value \['f'\] is "):
        describe("cfg", {"f": open}, CFG)


@pytest.mark.parametrize("name", ["", "1x", "a-b", "has space", 3, None])
def test_bad_names(name: Any) -> None:
    with pytest.raises(InputError, match="not a valid Python identifier"):
        describe(name, "x", CFG)


def test_bind_inputs_needs_a_mapping() -> None:
    with pytest.raises(InputError, match="mapping"):
        bind_inputs([("a", 1)], CFG)  # type: ignore[arg-type]


# --- read-only guarantees --------------------------------------------------------------------------


def test_frame_writes_never_reach_the_users_frame() -> None:
    df = pd.DataFrame({"a": [3, 1, 2], "b": [4.0, 5.0, 6.0], "c": ["x", "y", "z"]})
    before = df.copy(deep=True)
    attempts = [
        lambda t: t.iloc.__setitem__((0, 0), 99),
        lambda t: t.loc.__setitem__((1, "c"), "changed"),
        lambda t: t.__setitem__("x", 1),
        lambda t: t.__setitem__("a", 0),
        lambda t: t.drop(columns=["b"], inplace=True),
        lambda t: t.sort_values("a", inplace=True),
        lambda t: t.values.__setitem__((0, 0), 7),
        lambda t: t[["a", "b"]].to_numpy().__setitem__((0, 0), 7),
        lambda t: t["a"].to_numpy().__setitem__(0, 7),
        lambda t: t["b"].iloc.__setitem__(0, 7.0),
    ]
    for attempt in attempts:
        loaded = describe("df", df, CFG).load()  # a fresh binding each time: one write per attempt
        # pandas warns about chained assignment and inplace=; numpy refuses writes into shared buffers
        with warnings.catch_warnings(), contextlib.suppress(ValueError):
            warnings.simplefilter("ignore")
            attempt(loaded)
        pd.testing.assert_frame_equal(df, before)
    field2 = describe("df2", df, CFG)
    loaded = field2.load()
    loaded.iloc[0, 0] = 123
    assert loaded.iloc[0, 0] == 123  # the model's copy does change
    pd.testing.assert_frame_equal(df, before)


def test_series_writes_never_reach_the_users_series() -> None:
    s = pd.Series([1.0, 2.0, 3.0])
    loaded = describe("s", s, CFG).load()
    loaded.iloc[0] = 100.0
    loaded[5] = 1.0
    pd.testing.assert_series_equal(s, pd.Series([1.0, 2.0, 3.0]))


def test_list_view_behaves_like_a_sequence() -> None:
    data = [{"a": 1, "tags": ["x"]}, 2, "three", [4, 5], (6, 7)]
    view = describe("rows", data, CFG).load()
    assert isinstance(view, ReadOnlySequence)
    assert len(view) == 5 and view[1] == 2 and view[-2] == [4, 5] and view[4] == (6, 7)
    assert list(view) == data and view == data and view == tuple(data) and data == view
    assert view != data[:4] and view != "not a list"
    assert "three" in view and {"a": 1, "tags": ["x"]} in view and 99 not in view
    assert repr(view) == repr(data)
    part = view[1:4]
    assert isinstance(part, ReadOnlySequence) and part == [2, "three", [4, 5]] and repr(part) == repr(data[1:4])
    assert part[::-1] == [[4, 5], "three", 2] and view.index("three") == 2 and view.count(2) == 1
    assert list(reversed(view))[0] == (6, 7)
    assert view + [9] == [*data, 9] and isinstance(view + [9], list)
    with pytest.raises(IndexError):
        view[5]
    assert isinstance(view[0], ReadOnlyMapping) and isinstance(view[0]["tags"], ReadOnlySequence)


def test_list_view_is_zero_copy_and_read_only() -> None:
    inner = {"a": 1, "tags": ["x"]}
    data = [inner, [1, 2]]
    before = copy.deepcopy(data)
    view = describe("rows", data, CFG).load()
    assert view[0]._data is inner  # no copy
    writes = [
        lambda: view.__setitem__(0, 1), lambda: view.append(3), lambda: view.extend([3]), lambda: view.pop(),
        lambda: view.sort(), lambda: view.__delitem__(0), lambda: view[0].__setitem__("a", 2),
        lambda: view[0]["tags"].append("y"), lambda: view[1].insert(0, 0), lambda: view[0].update(b=1),
        lambda: view[0].pop("a"), lambda: view[1:].clear(),
    ]
    for write in writes:
        with pytest.raises(TypeError, match=r"inputs\['rows'\] is read-only .*copy it first"):
            write()
    with pytest.raises(TypeError, match="read-only"):
        view += [1]
    shallow = list(view)
    shallow.append("mine")
    with pytest.raises(TypeError):
        shallow[0]["a"] = 5
    deep = copy.deepcopy(view)
    deep[0]["tags"].append("y")
    assert json.loads(json.dumps(deep))[0]["tags"] == ["x", "y"]
    assert data == before


def test_dict_view_behaves_like_a_mapping() -> None:
    data = {"a": 1, "b": [1, 2], "c": {"d": "e"}}
    view = describe("cfg", data, CFG).load()
    assert isinstance(view, ReadOnlyMapping)
    assert len(view) == 3 and list(view) == ["a", "b", "c"] and list(view.keys()) == ["a", "b", "c"]
    assert view["a"] == 1 and view.get("zz", 5) == 5 and view.get("b") == [1, 2] and "c" in view
    assert view == data and data == view and dict(view.items()) == data and repr(view) == repr(data)
    assert list(view.values())[2] == {"d": "e"} and view != {"a": 1}
    assert (view | {"z": 0})["z"] == 0
    with pytest.raises(TypeError, match=r"data = dict\(inputs\['cfg'\]\)"):
        view["a"] = 2
    with pytest.raises(TypeError, match="read-only"):
        view["b"].append(3)
    with pytest.raises(TypeError, match="read-only"):
        view.setdefault("x", 1)
    deep = copy.deepcopy(view)
    deep["b"].append(3)
    assert data == {"a": 1, "b": [1, 2], "c": {"d": "e"}}
    assert pd.DataFrame(describe("r", [{"x": 1}, {"x": 2}], CFG).load())["x"].tolist() == [1, 2]


def test_dict_view_never_calls_missing_on_the_users_dict() -> None:
    data: defaultdict[str, list[int]] = defaultdict(list, {"a": [1]})
    view = describe("d", data, CFG).load()
    with pytest.raises(KeyError):
        view["new"]
    assert view.get("new") is None and "new" not in data


def test_nested_values_are_frozen_on_access() -> None:
    arr = np.arange(3)
    df = pd.DataFrame({"a": [1, 2]})
    view = describe("mixed", {"arr": arr, "df": df, "buf": bytearray(b"ab"), "s": {1, 2}}, CFG).load()
    assert not view["arr"].flags.writeable
    frame = view["df"]
    frame.iloc[0, 0] = 9
    assert df.iloc[0, 0] == 1
    assert view["buf"].readonly and view["s"] == frozenset({1, 2})


def test_loaded_views_can_be_bound_again_for_child_runs(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha", encoding="utf-8")
    parent = {
        "rows": describe("rows", [{"a": 1}, {"a": 2}], CFG).load(),
        "cfg": describe("cfg", {"k": [1]}, CFG).load(),
        "docs": describe("docs", tmp_path, CFG).load(),
        "arr": describe("arr", np.arange(4), CFG).load(),
        "df": describe("df", _frame(10), CFG).load(),
    }
    fields, summary = bind_inputs(parent, CFG)
    assert [f.info.kind for f in fields] == ["list", "dict", "directory", "array", "table"]
    assert fields[0].info.python_type == "list" and fields[0].load() == [{"a": 1}, {"a": 2}]
    assert fields[1].load()["k"] == [1] and fields[2].load()["a.txt"] == "alpha"
    assert fields[2].info.path == str(tmp_path)


# --- laziness and caching --------------------------------------------------------------------------


def test_load_is_cached_and_thread_safe() -> None:
    calls = []
    field = describe("rows", [1, 2, 3], CFG)
    real = field._loader

    def counting() -> Any:
        calls.append(1)
        return real()

    field._loader = counting
    with ThreadPoolExecutor(8) as pool:
        values = list(pool.map(lambda _: field.load(), range(32)))
    assert len(calls) == 1 and all(v is values[0] for v in values)


def test_field_repr_hides_the_source() -> None:
    field = describe("secret", "SENSITIVE-CONTENT " * 10, CFG)
    assert "SENSITIVE" not in repr(field) and "secret" in repr(field)


# --- the summary -----------------------------------------------------------------------------------


def test_summary_starts_with_the_intro_line() -> None:
    _, one = bind_inputs({"a": "x"}, CFG)
    assert one.text.startswith("1 input is bound in the sandbox as inputs[name]; its contents are not shown")
    _, three = bind_inputs({"a": "x", "b": 1, "c": b"y"}, CFG)
    assert three.text.startswith("3 inputs are bound in the sandbox as inputs[name]")
    assert three.tokens == count_tokens(three.text)
    _, none = bind_inputs({}, CFG)
    assert none.text.startswith("No inputs")


def test_huge_text_stays_under_the_cap_and_is_described_fast() -> None:
    big = "x" * 10**8
    fields, summary = bind_inputs({"big": big}, CFG)
    assert summary.tokens <= CFG.summary_max_tokens
    assert "100,000,000 chars" in summary.text
    assert fields[0].info.est_tokens > 10**6


def test_two_hundred_fields_collapse_into_a_more_line() -> None:
    values: dict[str, Any] = {}
    for i in range(200):
        values[f"field_{i}"] = [f"text {i} " * 200, _frame(20), [1, 2, 3], {"a": i}][i % 4]
    fields, summary = bind_inputs(values, CFG)
    assert len(fields) == 200 and len(summary.fields) == 200
    assert summary.tokens <= CFG.summary_max_tokens
    assert "more inputs: " in summary.text and "(table)" in summary.text
    assert 'inputs["field_0"]' in summary.text


def test_wide_frames_stay_under_the_cap() -> None:
    wide = pd.DataFrame(np.zeros((3, 10_000)), columns=[f"column_number_{i}" for i in range(10_000)])
    field = describe("wide", wide, CFG)
    assert field.info.more_columns == 10_000 - CFG.max_columns_shown
    assert len(field.info.dtypes) == CFG.max_columns_shown
    fields, summary = bind_inputs({f"w{i}": wide for i in range(6)}, CFG)
    assert summary.tokens <= CFG.summary_max_tokens
    assert "more" in summary.text


@pytest.mark.parametrize("cap", [60, 200, 400])
def test_small_caps_are_respected(cap: int) -> None:
    config = RLMConfig(summary_max_tokens=cap)
    values = {"text": _words(1, 5000), "table": _frame(50), "rows": [{"a": 1}] * 10, "n": 5}
    _, summary = bind_inputs(values, config)
    assert 0 < summary.tokens <= cap


def test_previews_shrink_before_they_are_dropped() -> None:
    values = {f"t{i}": _words(i, 400) for i in range(6)}
    _, full = bind_inputs(values, RLMConfig(summary_max_tokens=10_000))
    _, capped = bind_inputs(values, RLMConfig(summary_max_tokens=600))
    assert "head: " in full.text and "head: " in capped.text
    assert len(capped.text) < len(full.text) and capped.tokens <= 600


def test_previews_off_show_no_data(tmp_path: Path) -> None:
    texts = [_words(seed, 40) for seed in range(8)]
    (tmp_path / "notes.txt").write_text(texts[0], encoding="utf-8")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "inside.txt").write_text(texts[1], encoding="utf-8")
    frame = pd.DataFrame({"a": [texts[2][:80], texts[2][80:160]], "b": [1234567.891, 7654321.123]})
    values = {
        "text": texts[3], "blob": texts[4].encode(), "notes": tmp_path / "notes.txt", "folder": tmp_path / "dir",
        "frame": frame, "series": pd.Series([texts[5][:50]]), "rows": [texts[6][:60], 987654321987],
        "cfg": {"key": texts[7][:70]}, "n": 31415926535, "arr": np.array([271828182845]),
        "arrow": pa.table({"c": [texts[5][60:120]]}),
    }
    fields, summary = bind_inputs(values, OFF)
    data = [*texts, "1234567.891", "7654321.123", "987654321987", "31415926535", "271828182845", "inside.txt"]
    for item in data:
        for i in range(len(item) - 7):
            assert item[i:i + 8] not in summary.text, item[i:i + 8]
    assert all(f.info.preview == "" for f in fields)


def test_describing_a_frame_never_scans_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("scanned the whole frame")

    real_usage = pd.DataFrame.memory_usage
    real_series_usage = pd.Series.memory_usage

    def shallow_only(self: Any, index: bool = True, deep: bool = False) -> Any:
        if deep:
            raise AssertionError("memory_usage(deep=True)")
        return real_usage(self, index=index, deep=deep)

    def shallow_only_series(self: Any, index: bool = True, deep: bool = False) -> Any:
        if deep:
            raise AssertionError("memory_usage(deep=True)")
        return real_series_usage(self, index=index, deep=deep)

    for cls in (pd.DataFrame, pd.Series):
        monkeypatch.setattr(cls, "describe", refuse)
        monkeypatch.setattr(cls, "sample", refuse)
        monkeypatch.setattr(cls, "info", refuse, raising=False)
    monkeypatch.setattr(pd.DataFrame, "memory_usage", shallow_only)
    monkeypatch.setattr(pd.Series, "memory_usage", shallow_only_series)
    df = _frame(100_000)
    wide = pd.DataFrame(np.zeros((10, 1000)))
    fields, summary = bind_inputs({"df": df, "s": df["text"], "wide": wide}, CFG)
    assert fields[0].info.rows == 100_000 and summary.tokens <= CFG.summary_max_tokens


def test_summary_text_is_deterministic() -> None:
    values = {"df": _frame(500), "t": _words(3, 2000), "rows": list(range(1000))}
    assert bind_inputs(values, CFG)[1].text == bind_inputs(values, CFG)[1].text


# --- records ---------------------------------------------------------------------------------------


def test_field_info_round_trips_through_json(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hello", encoding="utf-8")
    values = {"t": "text", "df": _frame(5), "p": tmp_path / "f.txt", "d": tmp_path, "l": [1], "a": np.ones(3),
              "n": 1.5, "s": pd.Series([1]), "b": b"x", "arrow": pa.table({"x": [1]}), "m": {"k": "v"}}
    fields, summary = bind_inputs(values, CFG)
    for field in fields:
        restored = FieldInfo.from_dict(json.loads(json.dumps(field.info.to_dict())))
        assert restored == field.info
    again = InputsSummary.from_dict(json.loads(json.dumps(summary.to_dict())))
    assert again == summary
    assert {f.info.kind for f in fields} == set(inputs_mod.KINDS) - {"binary_file"}
