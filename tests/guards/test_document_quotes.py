"""Quotes in documents: QuotesFound names the document and page, checks citations' pages, and reads
documents only in a confined helper process (never with a C parser in the host process)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import code

from rlmnb import RLM, QuotesFound
from rlmnb._ground.config import RLMConfig
from rlmnb._guards.quote_pages import search_documents
from rlmnb._guards.quotes import Citation, extract_citations, extract_quotes
from rlmnb._sandbox.confinement.policy import support
from rlmnb.events import AttemptVerified
from rlmnb.inputs import bind_inputs
from rlmnb.testing import ScriptedLM
from rlmnb.testing import documents as make

pytestmark = pytest.mark.usefixtures("stop_the_spare")
RENT = "The tenant pays 1,250 EUR per month."
NOTICE = "Notice period is ninety days."


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("contracts")
    make.pdf(d / "lease.pdf", 12, title="Lease", extra={7: RENT})
    make.docx(d / "agreement.docx", extra={1: NOTICE})
    (d / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF")
    return d


def check(answer: Any, **values: Any) -> tuple[float, str, dict[str, Any]]:
    context: dict[str, Any] = {"inputs": bind_inputs(values, RLMConfig())[0]}
    confidence, reason = QuotesFound()(answer, context)
    return confidence, reason, context["details"]


def test_citations_are_extracted_and_their_source_is_not_taken_for_a_quote() -> None:
    answer = {"answer": "1,250 EUR", "citations": [{"text": RENT, "source": "lease.pdf", "page": 8},
                                                   {"quote": "x y", "page": 2}]}
    assert extract_quotes(answer) == [RENT, "x y"]
    assert extract_citations(answer) == [Citation(RENT, "lease.pdf", 8), Citation("x y", None, 2)]


def test_a_quote_in_a_document_is_found_with_its_document_and_page(folder: Path) -> None:
    confidence, reason, details = check({"quotes": [RENT, NOTICE]}, lease=folder / "lease.pdf",
                                        docs=Path(str(folder / "*.docx")))
    assert confidence == 1.0, reason
    rent, notice = details["quotes"]
    assert (rent["input"], rent["source"], rent["page"]) == ("lease", "lease.pdf", 8)
    assert rent["where"] == "input 'lease', document 'lease.pdf', page 8"
    assert (notice["source"], notice["page"], notice["label"]) == ("agreement.docx", 3, "Terms")
    assert notice["where"] == "input 'docs', document 'agreement.docx', page 3 ('Terms')"


def test_a_citation_is_checked_at_its_page_and_source(folder: Path) -> None:
    docs = {"contracts": Path(str(folder / "*.docx")), "lease": folder / "lease.pdf"}
    right = {"answer": "1,250", "citations": [{"text": RENT, "source": "lease.pdf", "page": 8}]}
    assert check(right, **docs)[0] == 1.0
    wrong_page = {"answer": "1,250", "citations": [{"text": RENT, "source": "lease.pdf", "page": 12}]}
    confidence, reason, details = check(wrong_page, **docs)
    assert confidence == 0.0
    assert '"The tenant pays 1,250 EUR per month." is not on page 12 of lease.pdf: it is on page 8' in reason
    assert "word for word" not in reason  # the text is there; only the page is wrong
    assert details["quotes"][0]["found"] is False and details["quotes"][0]["page"] == 12
    wrong_source = {"citations": [{"text": NOTICE, "source": "lease.pdf", "page": 3}]}
    confidence, reason, _ = check(wrong_source, **docs)
    assert confidence == 0.0 and "is not in lease.pdf: it is in agreement.docx, page 3" in reason


def test_a_quote_over_a_page_break_is_found_where_it_starts(folder: Path) -> None:
    found = search_documents(["This is page 8 of Lease."], [("lease.pdf", str(folder / "lease.pdf"))],
                             deadline=time.monotonic() + 20)
    assert [(h.page, h.end_page) for h in found.hits["This is page 8 of Lease."]] == [(8, 8)]
    from rlmnb._guards.quote_pages import find_quotes, quote_pattern

    pages = [{"text": "end of one page"}, {"text": "start of the next", "label": "Two"}]
    quote = "one page start of"
    assert find_quotes(pages, {quote: quote_pattern(quote)}) == {quote: [(1, "", 2)]}


def test_a_document_the_reader_refuses_is_named_and_the_host_is_untouched(folder: Path) -> None:
    found = search_documents(["anything at all here"], [("broken.pdf", str(folder / "broken.pdf"))],
                             deadline=time.monotonic() + 20)
    assert "broken.pdf" in found.errors["broken.pdf"] and not found.hits
    guard = (f"import sys; from pathlib import Path; sys.path.insert(0, {str(Path(__file__).parents[1])!r})\n"
             "from rlmnb import QuotesFound; from rlmnb._ground.config import RLMConfig; from rlmnb.inputs import bind_inputs\n"
             f"fields = bind_inputs({{'docs': Path({str(folder)!r})}}, RLMConfig())[0]\n"
             f"print(QuotesFound()({{'quote': {RENT!r}}}, {{'inputs': fields}})[0],\n"
             "      [m for m in sys.modules if m.split('.')[0] in ('pypdfium2', 'docx', 'lxml')])\n")
    out = subprocess.run([sys.executable, "-c", guard], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "1.0 []", out.stdout + out.stderr  # found, and no C parser in this process


@pytest.mark.skipif(bool(support()[1]), reason="this system cannot confine a process (Landlock ABI 4)")
def test_the_helper_is_confined_to_the_documents_it_reads(folder: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    probe = (f"import sys; sys.path.insert(0, {str(Path(__file__).parents[1])!r})\n"
             "from rlmnb._guards.quote_pages import confine, limit_resources\n"
             f"limit_resources(10); confine([{str(folder / 'lease.pdf')!r}])\n"
             f"open({str(folder / 'lease.pdf')!r}, 'rb').read(4)\n"
             "import socket\n"
             "for what in (lambda: open(" + repr(str(secret)) + ").read(),\n"
             "             lambda: open('/tmp/rlmnb-escape', 'w'),\n"
             "             lambda: socket.create_connection(('127.0.0.1', 22), timeout=1)):\n"
             "    try:\n        what(); print('escaped')\n"
             "    except OSError as e:\n        print('refused', type(e).__name__)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split("\n")[:3] == ["refused PermissionError", "refused PermissionError",
                                           "refused PermissionError"], out.stdout + out.stderr
    assert search_documents([RENT], [("lease.pdf", str(folder / "lease.pdf"))],
                            deadline=time.monotonic() + 20).confined


@pytest.mark.parametrize("kind", ["local", "kernel"])
def test_a_run_revises_a_wrong_page_and_the_views_show_the_page(kind: str, folder: Path) -> None:
    from rlmnb.views import render_text

    wrong = code(f'submit({{"total": "1,250 EUR", "citations": [{{"text": {RENT!r}, "source": "lease.pdf", '
                 '"page": 7}]})')
    good = code("hit = inputs['docs']['lease.pdf'].find('1,250 EUR')[0]\n"
                'submit({"total": "1,250 EUR", "citations": [{"text": str(hit).splitlines()[-1], '
                '"source": "lease.pdf", "page": hit.number}]})')
    root = ScriptedLM([code("print(inputs['docs'])"), wrong, good], name="root")
    result = RLM(root, ScriptedLM(lambda m: "x", name="sub"), sandbox=kind, verify=QuotesFound()).run(
        "What is the rent?", docs=folder)
    assert result.verified and result.answer["citations"][0]["page"] == 8, result.reason
    first, second = result.trajectory.of(AttemptVerified)
    assert "is not on page 7 of lease.pdf: it is on page 8" in first.reason
    assert second.details["quotes"][0]["page"] == 8
    text = render_text(result.trajectory)
    assert "quote NOT found: \"The tenant pays 1,250 EUR per month.\" (not on page 7 of lease.pdf: it is on page 8)" \
        in text
    assert "quote found: \"The tenant pays 1,250 EUR per month.\" (input 'docs', document 'lease.pdf', page 8)" in text


@pytest.mark.parametrize("kind", ["local", "kernel"])
def test_the_documents_tutorial_run_in_both_sandboxes(kind: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmnb.testing.documents import contracts_folder
    from rlmnb.testing.scenarios import documents_models

    monkeypatch.setenv("RLMNB_DOCUMENT_CACHE", str(tmp_path / "cache"))
    truth: Any = contracts_folder(tmp_path)
    root, sub = documents_models()
    result = RLM(root, sub, sandbox=kind, verify=QuotesFound()).run(
        "Notice periods and invoice totals?", contracts=tmp_path / "contracts", invoices=tmp_path / "invoices")
    assert result.verified, result.reason
    cited = {c["source"]: (c["page"], c["text"]) for c in result.answer["notice_periods"]}
    assert cited == truth["notice"] and result.answer["invoice_totals"] == truth["totals"]
    first, second = result.trajectory.of(AttemptVerified)
    assert "is not on page 6 of lease-harbour.pdf: it is on page 7" in first.reason and second.accepted


def test_the_helper_stops_once_every_quote_is_placed(folder: Path) -> None:
    docs = [("lease.pdf", str(folder / "lease.pdf")), ("agreement.docx", str(folder / "agreement.docx"))]
    found = search_documents([RENT], docs, deadline=time.monotonic() + 20)
    assert found.reached == {"lease.pdf"} and found.hits[RENT][0].page == 8
    cited = search_documents([RENT], docs, deadline=time.monotonic() + 20, every={RENT: None})
    assert cited.reached == {"lease.pdf", "agreement.docx"}  # a page-only citation is looked for everywhere
    named = search_documents([NOTICE], docs, deadline=time.monotonic() + 20, every={NOTICE: ["lease.pdf"]})
    assert named.reached == {"lease.pdf", "agreement.docx"}  # not in the cited one: read on to say where it is


CANARIES = {"OPENAI_API_KEY": "sk-canary-1", "REDIS_URL": "redis://:canary-pw@cache.internal:6379/0",
            "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/canary", "AWS_PROFILE": "canary-profile"}


def test_the_helper_gets_only_its_allow_listed_environment(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rlmnb._guards.quote_pages as quote_pages

    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_TIME", "C")
    seen: list[dict[str, str]] = []

    class Spy(subprocess.Popen):  # type: ignore[type-arg]
        """The real helper process; the environment it is started with (execve's whole environment)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            seen.append(kwargs["env"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(quote_pages.subprocess, "Popen", Spy)
    answer = code(f'submit({{"rent": "1,250 EUR", "citations": [{{"text": {RENT!r}, "source": "lease.pdf", '
                  '"page": 8}]})')
    root = ScriptedLM([code("print(inputs['docs']['lease.pdf'].find('1,250 EUR')[0].number)"), answer])
    result = RLM(root, sandbox="kernel", verify=QuotesFound()).run("What is the rent?", docs=folder)
    assert result.verified, result.reason  # the quote was found at its page by the helper
    (env,) = seen
    assert not set(CANARIES) & set(env)
    assert not any(value in "\0".join(env.values()) for value in CANARIES.values())
    assert set(env) <= {"PATH", "LANG", "TZ", "PYTHONPATH", "HOME", "TMPDIR", "PYTHONSAFEPATH", "LC_TIME", "LC_ALL",
                        "LC_CTYPE"} and env["LC_TIME"] == "C"
    assert env["HOME"] == env["TMPDIR"] and not os.path.exists(env["TMPDIR"])  # its own scratch, removed after
