"""Every view says which turn-loop policy acted (issue 44): a `PolicyActed` event is a note on its turn naming the
policy and what it did, with its detail; a send-back's note says how to turn that policy off, and its
`GuardRejected` adds no second note; a run that records policies shows them in place of the reply's asked-again
notes. Trajectories from before policies were recorded render as they did. The Python fold, the HTML and text
views, the exported page (static and in Chromium), the extension's fold and `RunResult.policies_acted` are checked
on synthetic trajectories: no engine runs here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from test_fold_parity import python_figures, ts_figures, ts_fold  # noqa: F401  (ts_fold is a fixture)

from rlmnb import RunResult
from rlmnb._ground.usage import Usage
from rlmnb.events import (
    EventBus,
    GuardRejected,
    ModelReply,
    PolicyActed,
    RunFinished,
    RunScope,
    RunStarted,
    Submitted,
    Trajectory,
    TurnStarted,
)
from rlmnb.testing.lab import chromium_page
from rlmnb.views import RunTree, _page, render_html, render_text
from rlmnb.views._fold import EVIDENCE_HINT
from rlmnb.views._format import ASKED_AGAIN
from rlmnb.views._page import page_title, viewer_page

ROOT = RunScope("root", "root")
CHILD = RunScope("child", "root", parent_run_id="root", depth=1)
UNSHOWN = "42 was typed, not printed: print what shows it, then submit"


def _run(events: list[tuple[type[Any], dict[str, Any]]], scope: RunScope = ROOT,
         bus: EventBus | None = None) -> Trajectory:
    """A trajectory of one run: its start, `events` (each turn's TurnStarted first), its end."""
    bus = bus or EventBus()
    bus.emit(RunStarted, scope, question="how many?", model="root-m", sub_model="sub-m", sandbox="local",
             config={"max_iterations": 5})
    started: set[int] = set()
    for cls, fields in events:
        turn = fields.get("turn")
        if isinstance(turn, int) and turn > 0 and turn not in started:
            started.add(turn)
            bus.emit(TurnStarted, scope, turn=turn, max_turns=5)
        bus.emit(cls, scope, **fields)
    bus.emit(RunFinished, scope, status="submitted", answer=7)
    return bus.trajectory


def _reply(turn: int, notes: tuple[str, ...] = ()) -> tuple[type[Any], dict[str, Any]]:
    return ModelReply, {"turn": turn, "text": "```python\nprint(7)\n```", "notes": list(notes)}


def _acted(turn: int, policy: str, action: str, detail: str = "") -> list[tuple[type[Any], dict[str, Any]]]:
    """A policy's action as the engine records it: a send-back is a PolicyActed and then a GuardRejected."""
    out: list[tuple[type[Any], dict[str, Any]]] = [
        (PolicyActed, {"turn": turn, "policy": policy, "action": action, "detail": detail})]
    if action == "send_back":
        out.append((GuardRejected, {"turn": turn, "guard": policy, "reason": detail}))
    return out


def _notes(trajectory: Trajectory, turn: int, run_id: str = "root") -> list[tuple[str, str]]:
    tree = RunTree.from_trajectory(trajectory)
    return [(kind, text) for kind, text in tree.turn_view(run_id, turn)["notes"]]


def _policy_run() -> Trajectory:
    """A run in which most policies act: a first reading, an ask-again, a note, a send-back, a prose answer."""
    return _run([
        *_acted(0, "first_read", "read_first", "2 parts read; part 1 says 7"),
        _reply(1),
        *_acted(1, "same_error", "note", "line 2 raised the KeyError it raised at turn 1"),
        *_acted(2, "repeat_breaker", "ask_again", "that code ran at turn 1 and nothing it reads changed"),
        _reply(2, ("repeat_reasked",)),
        (Submitted, {"turn": 2, "answer": 42}),
        *_acted(2, "unshown_value", "send_back", UNSHOWN),
        *_acted(3, "look_first", "send_back", "look at the data before you submit"),
        *_acted(4, "prose_answer", "answer", "the reply was 7, which turn 3 printed"),
    ])


# ---- the Python fold ---------------------------------------------------------------------------------------------
def test_a_send_back_is_one_note_naming_the_policy_and_its_switch() -> None:
    notes = _notes(_policy_run(), 2)
    rejected = [text for kind, text in notes if kind == "rejected"]
    assert len(rejected) == 1  # the GuardRejected that follows the PolicyActed adds no second note
    assert rejected[0].startswith("unshown_value") and UNSHOWN in rejected[0]
    assert "policies=" in rejected[0] and "evidence_check=False" in rejected[0]  # an evidence policy: both switches
    [look] = [text for kind, text in _notes(_policy_run(), 3) if kind == "rejected"]
    assert look.startswith("look_first") and "policies=" in look
    assert "evidence_check" not in look  # evidence_check=False does not remove look_first


def test_each_action_is_a_note_on_its_turn_naming_the_policy() -> None:
    trajectory = _policy_run()
    acted = {(e.turn, e.policy) for e in trajectory.of(PolicyActed)}
    for turn, policy in acted:
        assert any(text.startswith(policy) for _kind, text in _notes(trajectory, turn)), (turn, policy)
    kinds = {policy: kind for turn, policy in acted for kind, text in _notes(trajectory, turn)
             if text.startswith(policy)}
    assert kinds == {"first_read": "policy", "same_error": "policy", "repeat_breaker": "policy",
                     "unshown_value": "rejected", "look_first": "rejected", "prose_answer": "policy"}
    [first] = _notes(trajectory, 0)  # before turn 1: the first reading, with what it found
    assert "2 parts read" in first[1]


def test_an_action_this_version_does_not_know_is_shown_as_recorded() -> None:
    [(kind, text)] = _notes(_run(_acted(1, "new_policy", "rewound", "why")), 1)
    assert kind == "policy" and "new_policy" in text and "rewound" in text and "why" in text


@pytest.mark.parametrize("policy_first", [True, False])
def test_a_run_that_records_policies_says_an_ask_again_once(policy_first: bool) -> None:
    """Whichever of the reply and the PolicyActed comes first, the turn says the ask once: by its policy."""
    acted = _acted(1, "empty_reply", "ask_again", "the reply was empty")
    reply = _reply(1, ("empty", "empty_retried"))
    notes = _notes(_run([*acted, reply] if policy_first else [reply, *acted]), 1)
    assert [kind for kind, _ in notes] == ["policy"] and notes[0][1].startswith("empty_reply")
    # a later turn's asked-again note is said by its own PolicyActed, never by the reply's note
    later = _run([*acted, reply, _reply(2, ("repeat_reasked",)), *_acted(2, "repeat_breaker", "ask_again")])
    assert [text.split(" ")[0] for _, text in _notes(later, 2)] == ["repeat_breaker"]


def test_a_trajectory_without_policy_events_renders_as_before() -> None:
    old = _run([_reply(1, ("empty", "empty_retried")),
                (GuardRejected, {"turn": 1, "guard": "evidence", "reason": "it looks like a guess"}),
                (GuardRejected, {"turn": 1, "guard": "schema", "reason": "not an int"})])
    assert _notes(old, 1) == [("info", ASKED_AGAIN["empty_retried"]),
                              ("rejected", f"submit rejected (evidence): it looks like a guess{EVIDENCE_HINT}"),
                              ("rejected", "submit rejected (schema): not an int")]


def test_a_guard_rejection_that_no_policy_made_keeps_its_own_note() -> None:
    """The answer contract (a schema, several submits) is not a policy: its rejection is noted as before."""
    notes = _notes(_run([*_acted(1, "look_first", "send_back", "look first"),
                         (GuardRejected, {"turn": 1, "guard": "schema", "reason": "not an int"})]), 1)
    assert [text.split(" ")[0] for kind, text in notes if kind == "rejected"] == ["look_first", "submit"]


def test_the_live_fold_marks_the_turn_a_policy_acted_on() -> None:
    bus = EventBus()
    tree = RunTree()
    bus.subscribe(tree.add)
    _run([_reply(1)], bus=bus)
    tree.take_changes()
    bus.emit(PolicyActed, ROOT, turn=1, policy="guess_note", action="note", detail="the sub-calls saw only the question")
    assert ("turn", "root", 1) in tree.take_changes()
    assert tree.turn_view("root", 1)["notes"][-1][1].startswith("guess_note")


# ---- the renderers -----------------------------------------------------------------------------------------------
def test_the_html_and_text_views_show_the_notes() -> None:
    trajectory = _policy_run()
    html, text = render_html(trajectory), render_text(trajectory)
    for policy in ("first_read", "same_error", "repeat_breaker", "unshown_value", "look_first", "prose_answer"):
        assert policy in html and f"note: {policy}" in text, policy
    assert UNSHOWN in text and "evidence_check=False" in html
    assert text.count(UNSHOWN) == 1  # said once, by the policy's note (not again by its GuardRejected)


def test_the_exported_page_carries_the_notes_in_its_static_tree_and_its_data(monkeypatch: pytest.MonkeyPatch) -> None:
    trajectory = _policy_run()
    page = viewer_page([(trajectory, "RLM")], page_title(trajectory))
    assert '"kind": "policy_acted"' in page or '"kind":"policy_acted"' in page  # the viewer folds the events
    monkeypatch.setattr(_page, "viewer_assets", lambda: None)  # no viewer build: the page is the static tree
    static = viewer_page([(trajectory, "RLM")], page_title(trajectory))
    assert "<script" not in static
    for policy in ("first_read", "repeat_breaker", "unshown_value", "prose_answer"):
        assert policy in static, policy


# ---- RunResult.policies_acted --------------------------------------------------------------------------------
def test_the_result_lists_the_root_runs_policy_actions_in_order() -> None:
    bus = EventBus()
    _run(_acted(1, "look_first", "send_back", "look first"), scope=CHILD, bus=bus)  # a child run's: not listed
    trajectory = _run([*_acted(0, "first_read", "read_first"), *_acted(1, "empty_reply", "ask_again"),
                       *_acted(2, "unshown_value", "send_back", UNSHOWN)], bus=bus)
    result = RunResult(answer=7, status="submitted", usage=Usage(), trajectory=trajectory, run_id="root")
    acted = [{"turn": 0, "policy": "first_read", "action": "read_first"},
             {"turn": 1, "policy": "empty_reply", "action": "ask_again"},
             {"turn": 2, "policy": "unshown_value", "action": "send_back"}]
    assert result.policies_acted == acted
    assert result.to_dict()["policies_acted"] == acted
    old = RunResult(answer=7, status="submitted", usage=Usage(), trajectory=_run([_reply(1)]), run_id="root")
    assert old.policies_acted == [] and old.to_dict()["policies_acted"] == []


# ---- the extension -------------------------------------------------------------------------------------------------
def test_the_extensions_fold_gives_the_same_notes(ts_fold: Path, tmp_path: Path) -> None:  # noqa: F811
    runs = {"policies": _policy_run(),
            "asked-first": _run([_reply(1, ("empty", "empty_retried")), *_acted(1, "empty_reply", "ask_again")]),
            "old": _run([_reply(1, ("repeat_reasked",)),
                         (GuardRejected, {"turn": 1, "guard": "copy", "reason": "a copy of the input"})])}
    payloads = [t.to_dict() for t in runs.values()]
    for payload, figures in zip(payloads, ts_figures(ts_fold, payloads, tmp_path), strict=True):
        python = python_figures(payload)["runs"]["root"]["turns"]
        assert [t["notes"] for t in figures["runs"]["root"]["turns"]] == [t["notes"] for t in python]
    assert any(kind == "rejected" and text.startswith("unshown_value")
               for turn in python_figures(payloads[0])["runs"]["root"]["turns"] for kind, text in turn["notes"])


@pytest.mark.integration
def test_the_viewer_shows_the_notes_in_a_browser(tmp_path: Path, browser_ready: None) -> None:
    trajectory = _policy_run()
    path = tmp_path / "run.html"
    path.write_text(viewer_page([(trajectory, "RLM")], page_title(trajectory)), encoding="utf-8")
    console: list[str] = []
    with chromium_page(console=console) as page:
        page.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())
        page.goto(path.as_uri())
        view = page.locator(".rlmnb-view")
        expect(view).to_have_count(1)
        rejected = view.locator(".rlmnb-note-rejected")
        expect(rejected).to_have_count(2)  # unshown_value and look_first: one note each, none from GuardRejected
        expect(rejected.first).to_contain_text("unshown_value")
        expect(rejected.first).to_contain_text("evidence_check=False")
        policy = view.locator(".rlmnb-note-policy")
        expect(policy).to_have_count(4)
        expect(policy.first).to_contain_text("first_read")
    assert not [line for line in console if "pageerror" in line], console
