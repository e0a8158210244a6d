"""Links in folder and glob inputs: one that leads out of the input's root is refused at bind time, in one
sentence naming it, before any model call; one that stays inside is an ordinary file; no read follows one out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_support import code, observations

from rlmnb import RLM
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.errors import InputError
from rlmnb.inputs import DirectoryView, GlobFiles, bind_inputs
from rlmnb.inputs._filesystem import first_link_out, walk_folder, within
from rlmnb.testing import ScriptedLM
from rlmnb.testing import documents as make

pytestmark = pytest.mark.usefixtures("stop_the_spare")
SECRET = "sk-host-secret-0451"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    private = tmp_path / "private"
    private.mkdir()
    (private / "id_rsa").write_text(f"-----BEGIN KEY----- {SECRET}\n")
    return private / "id_rsa"


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "a.txt").write_text("Ticket A: the printer is on fire.\n")
    (folder / "b.txt").write_text("Ticket B: the coffee machine is empty.\n")
    return folder


def _refused(value: object) -> InputError:
    with pytest.raises(InputError) as caught:
        bind_inputs({"inbox": value}, RLMConfig())
    assert SECRET not in str(caught.value)
    return caught.value


def test_a_glob_matching_a_link_out_of_its_folder_is_refused_before_any_model_call(
        kind: str, inbox: Path, secret: Path) -> None:
    (inbox / "c.txt").symlink_to(secret)
    root = ScriptedLM([code("print(inputs['inbox'])")])
    with pytest.raises(InputError) as caught:
        RLM(root, sandbox=kind).run("What do the tickets say?", inbox=Path(str(inbox / "*.txt")))
    assert str(inbox / "c.txt") in str(caught.value) and SECRET not in str(caught.value)
    assert root.requests == []


@pytest.mark.parametrize("how", ["file", "folder", "folder on the way"])
def test_a_folder_or_glob_with_a_link_out_is_refused_naming_the_link(how: str, inbox: Path, secret: Path) -> None:
    if how == "file":
        link = inbox / "notes.txt"
        link.symlink_to(secret)
        values: list[object] = [inbox, Path(str(inbox / "*.txt")), DirectoryView(inbox)]
    else:
        link = inbox / "more"
        link.symlink_to(secret.parent, target_is_directory=True)
        values = [inbox] if how == "folder" else [Path(str(inbox / "*" / "id_rsa")), Path(str(inbox / "**" / "*"))]
    for value in values:
        assert _refused(value).args[0].count(str(link)) == 1, value


def test_documents_images_and_tables_in_files_are_checked_too(tmp_path: Path, secret: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    make.markdown(docs / "notes.md")
    (docs / "leak.md").symlink_to(secret)
    _refused(docs)
    _refused(Path(str(docs / "*.md")))
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    table = tmp_path / "sales"
    for year in (2023, 2024):
        (table / f"year={year}").mkdir(parents=True)
        pq.write_table(pa.table({"amount": [1, 2]}), table / f"year={year}" / "part-0.parquet")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    pq.write_table(pa.table({"amount": [99]}), outside / "part-0.parquet")
    (table / "year=2025").symlink_to(outside, target_is_directory=True)
    _refused(table)
    (table / "year=2025").unlink()
    (table / "year=2023" / "part-1.parquet").symlink_to(outside / "part-0.parquet")
    _refused(Path(str(table / "*" / "*.parquet")))


def test_a_pattern_that_climbs_out_with_dotdot_is_refused(inbox: Path, secret: Path) -> None:
    (inbox / "sub").mkdir()
    error = _refused(Path(str(inbox / "*" / ".." / ".." / "private" / "id_rsa")))
    assert str(inbox) in str(error)


def test_links_that_stay_inside_the_root_bind_and_are_read(kind: str, inbox: Path) -> None:
    (inbox / "latest.txt").symlink_to(inbox / "b.txt")
    (inbox / "archive").mkdir()
    (inbox / "archive" / "old.txt").write_text("Ticket O: solved.\n")
    (inbox / "alias").symlink_to(inbox / "archive", target_is_directory=True)
    root = ScriptedLM([code("print(sorted(inputs['tickets']), inputs['tickets']['latest.txt'].strip())"),
                       code("submit(inputs['tickets']['latest.txt'].split(':')[0])")])
    result = RLM(root, sandbox=kind).run("Which ticket is the latest?", tickets=Path(str(inbox / "*.txt")))
    assert result.answer == "Ticket B", result.reason
    assert "['a.txt', 'b.txt', 'latest.txt'] Ticket B: the coffee machine is empty." in observations(root)[0]
    root = ScriptedLM([code("print(sorted(inputs['folder']), inputs['folder']['latest.txt'].strip())"),
                       code("submit(inputs['folder']['latest.txt'].split(':')[0])")])
    result = RLM(root, sandbox=kind).run("Which ticket is the latest?", folder=inbox)
    assert result.answer == "Ticket B", result.reason
    assert ("['a.txt', 'archive/old.txt', 'b.txt', 'latest.txt'] Ticket B: the coffee machine is empty."
            in observations(root)[0])  # a linked folder is not entered


def test_no_read_follows_a_link_made_after_binding(inbox: Path, secret: Path) -> None:
    view = DirectoryView(inbox)
    glob = GlobFiles(str(inbox / "*.txt"), sorted(str(p) for p in inbox.glob("*.txt")))
    bind_inputs({"view": view, "glob": glob}, RLMConfig())
    os.remove(inbox / "b.txt")
    (inbox / "b.txt").symlink_to(secret)
    (inbox / "c.txt").symlink_to(secret)
    assert sorted(view) == ["a.txt"] and "b.txt" not in view
    with pytest.raises(KeyError):
        view["b.txt"]
    with pytest.raises(InputError):
        glob["b.txt"]
    assert walk_folder(str(inbox), None, with_sizes=False).links_out == ["b.txt", "c.txt"]


def test_within_and_the_link_named(tmp_path: Path, secret: Path) -> None:
    root = tmp_path / "root"
    (root / "inner").mkdir(parents=True)
    (root / "out").symlink_to(secret.parent, target_is_directory=True)
    linked_root = tmp_path / "linked"
    linked_root.symlink_to(root, target_is_directory=True)
    assert within(str(root), str(root / "inner" / "x")) and within(str(linked_root), str(linked_root / "inner"))
    assert not within(str(root), str(root / "out" / "id_rsa"))
    assert first_link_out(str(root), str(root / "out" / "id_rsa")) == str(root / "out")
    assert first_link_out(str(linked_root), str(linked_root / "inner")) is None
