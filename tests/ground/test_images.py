"""Images to sub-calls: llm_query(prompt, images=[...]) over real HTTP to the fake server in both sandboxes,
image tokens counted, the response cache keyed on the image bytes, refusal for a model that does not read
images, resizing, headers read without decoding, and folders of images as inputs."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage
from PIL import PngImagePlugin
from sandbox_support import code, observations

from rlmnb import RLM
from rlmnb._ground.config import RLMConfig
from rlmnb._ground.images import MAX_SIDE, from_wire, header, image_tokens, prepare, prepare_all
from rlmnb.events import SubCallFinished, SubCallStarted
from rlmnb.inputs import bind_inputs
from rlmnb.testing import ScriptedLM
from rlmnb.testing.fake_behaviours import image_text_responder
from rlmnb.testing.fake_server import FakeServer

pytestmark = pytest.mark.usefixtures("stop_the_spare")


def invoice(path: Path | None, total: str, size: tuple[int, int] = (600, 800), fmt: str = "PNG") -> bytes:
    """An 'invoice' image; what it shows is written into its PNG text (the scripted vision model reads that)."""
    image = PILImage.new("RGB", size, "white")
    out = io.BytesIO()
    if fmt == "PNG":
        meta = PngImagePlugin.PngInfo()
        meta.add_text("shows", total)
        image.save(out, format="PNG", pnginfo=meta)
    else:
        image.save(out, format=fmt)
    if path is not None:
        path.write_bytes(out.getvalue())
    return out.getvalue()


@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("scans")
    for i, total in enumerate(["1,250.00 EUR", "980.40 EUR", "77.10 EUR"]):
        invoice(d / f"invoice-{i + 1}.png", total)
    invoice(d / "receipt.jpg", "", (1200, 900), "JPEG")
    return d


# ---- images, without a model -----------------------------------------------------------------------------
def test_headers_give_format_and_size_without_decoding() -> None:
    for fmt, mime in (("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")):
        assert header(invoice(None, "x", (321, 123), fmt)) == (mime, 321, 123)
    assert header(b"%PDF-1.4 not an image") is None
    png = invoice(None, "x", (50, 50))
    assert from_wire(png, thumb=png).thumb == png and from_wire(png, thumb=b"<svg/>").thumb == b""
    assert from_wire(png, thumb=invoice(None, "x", (500, 50))).thumb == b""  # too big to be a thumbnail
    assert image_tokens(1024, 1024) == 765 and image_tokens(4096, 8192) == 1105  # OpenAI's published examples


def test_images_are_prepared_from_bytes_paths_pil_and_pdf_pages_and_resized(tmp_path: Path) -> None:
    big = PILImage.new("RGB", (5000, 1000), "white")
    shrunk = prepare(big)
    assert (shrunk.width, shrunk.height) == (MAX_SIDE, 410) and header(shrunk.data) == ("image/png", 2048, 410)
    path = tmp_path / "a.png"
    data = invoice(path, "12")
    assert prepare(path).data == data == prepare(str(path)).data == prepare(data).data

    class Page(str):  # like docread.Page: a str with .image()
        def image(self) -> bytes:
            return data

    assert prepare_all([Page('text of the page'), data], "x")[0].sha == prepare(data).sha
    with pytest.raises(ValueError, match="not a PNG, JPEG, GIF or WebP"):
        prepare(b"hello")
    with pytest.raises(ValueError, match="pass bytes, a path, a PIL image or a PDF page"):
        prepare(3.5)


def test_a_folder_of_images_binds_from_headers_with_sizes(scans: Path) -> None:
    fields, summary = bind_inputs({"scans": scans}, RLMConfig())
    assert fields[0].info.kind == "images"
    assert "4 images: 3 PNG, 1 JPEG; 600x800 px (3 of 4), from 600x800 to 1200x900" in summary.text
    assert "invoice-1.png  600x800" in summary.text
    folder = fields[0].load()
    assert len(folder) == 4 and folder["receipt.jpg"].width == 1200


# ---- over HTTP, in both sandboxes ------------------------------------------------------------------------------
def vision_run(kind: str, scans: Path, snippet: str, answer: str, sub: str = "gpt-4o-mini",
               ) -> tuple[Any, dict[str, Any], ScriptedLM]:
    """A run whose root runs `snippet` then submits `answer` (code), its sub-model `sub` on a fake server."""
    with FakeServer(responder=image_text_responder) as server:
        root = ScriptedLM([code(snippet), code(answer)], name="root")
        result = RLM(root, server.lm(sub), sandbox=kind, evidence_check=False).run("Totals?", scans=scans)
        return result, server.stats(), root


@pytest.mark.parametrize("kind", ["local", "kernel"])
def test_vision_sub_calls_over_http_count_image_tokens_and_are_cached(kind: str, scans: Path) -> None:
    with FakeServer(responder=image_text_responder) as server:
        sub = server.lm("gpt-4o-mini")  # litellm knows it reads images
        root = ScriptedLM([
            code("scans = inputs['scans']\n"
                 "one = llm_query('What total does this invoice show?', images=[scans['invoice-1.png']])\n"
                 "many = llm_query_batched(['Total?'] * 2, images=[[scans['invoice-2.png']], "
                 "[open(scans['invoice-3.png'].path, 'rb').read()]])\n"
                 "again = llm_query('What total does this invoice show?', images=[scans['invoice-1.png']])\n"
                 "print(one, many, again)"),
            code("submit(one)")], name="root")
        result = RLM(root, sub, sandbox=kind).run("Totals?", scans=scans)
        stats = server.stats()
    assert result.answer == "1,250.00 EUR", result.reason
    assert "1,250.00 EUR ['980.40 EUR', '77.10 EUR'] 1,250.00 EUR" in observations(root)[0]
    assert stats["requests"] == 3 and stats["images"] == 3  # the repeated call came from the cache
    per_image = image_tokens(600, 800)
    assert stats["prompt_tokens"] >= 3 * per_image
    started = result.trajectory.of(SubCallStarted)
    assert [len(e.images) for e in started] == [1, 1, 1, 1]
    assert started[0].images[0]["width"] == 600 and started[0].images[0]["sha"] == started[3].images[0]["sha"]
    assert started[0].images[0]["thumb"].startswith("data:image/png;base64,")  # a thumbnail for the views
    finished = result.trajectory.of(SubCallFinished)
    assert finished[-1].cached and all(f.usage["input_tokens"] >= per_image for f in finished[:3])


@pytest.mark.parametrize("kind", ["local", "kernel"])
def test_a_model_that_does_not_read_images_is_refused_before_any_call(kind: str, scans: Path) -> None:
    _, stats, root = vision_run(kind, scans, "try:\n    llm_query('Total?', images=[inputs['scans']['invoice-1.png']])\n"
                                "except Exception as e:\n    print(type(e).__name__, e)\n"
                                "try:\n    llm_query('Total?', model='openai/fake-unknown', images=[b'\\x89PNG'])\n"
                                "except Exception as e:\n    print(type(e).__name__, e)", "submit('done')",
                                sub="gpt-3.5-turbo")
    requests = stats["requests"]
    seen = observations(root)[0]
    assert ("ImagesRefused openai/gpt-3.5-turbo cannot be sent images (litellm's model info says it does not read "
            "images); nothing was sent.") in seen
    assert "ImageError llm_query() image 0 is not a PNG, JPEG, GIF or WebP image" in seen  # checked in the sandbox
    assert requests == 0


def test_an_unknown_model_takes_images_once_it_says_vision_true(scans: Path) -> None:
    from rlmnb._engine.subcalls import check_vision
    from rlmnb._ground.errors import ImagesRefused

    with FakeServer(responder=image_text_responder) as server:
        with pytest.raises(ImagesRefused, match="litellm does not know whether it reads images"):
            check_vision(server.lm("my-local-vlm"))
        lm = server.lm("my-local-vlm", vision=True)
        check_vision(lm)
        root = ScriptedLM([code("print(len(inputs['scans']))"),
                           code("submit(llm_query('Total?', images=[inputs['scans']['invoice-2.png']]))")])
        result = RLM(root, lm, sandbox="local").run("Total?", scans=scans)
    assert result.answer == "980.40 EUR"


def test_scripted_models_see_the_image_parts(scans: Path) -> None:
    seen: list[Any] = []

    def responder(messages: list[dict[str, Any]]) -> str:
        seen.append(messages[-1]["content"])
        return "ok"

    root = ScriptedLM([code("print(len(inputs['scans']))"),
                       code("submit(llm_query('Look', images=[inputs['scans']['receipt.jpg']]))")])
    RLM(root, ScriptedLM(responder, name="sub"), sandbox="local").run("?", scans=scans)
    text, part = seen[0]
    assert text == {"type": "text", "text": "Look"}
    assert part["image_url"]["url"].startswith("data:image/jpeg;base64,/9j/")


def test_a_pdf_page_rendered_in_the_kernel_goes_to_a_vision_sub_call(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmnb.testing import documents as make
    from rlmnb.views import render_html, render_text

    monkeypatch.setenv("RLMNB_DOCUMENT_CACHE", str(tmp_path / "docs-cache"))
    make.pdf(tmp_path / "scan.pdf", 3, scanned=[1])
    with FakeServer(responder=image_text_responder) as server:
        root = ScriptedLM([code("page = inputs['scan'].pages[1]\n"
                                "print(page.has_text, llm_query('Read this scanned page.', images=[page]))"),
                           code("submit('read')")], name="root")
        result = RLM(root, server.lm("gpt-4o-mini"), sandbox="kernel", evidence_check=False).run(
            "Read the scan", scan=tmp_path / "scan.pdf")
        stats = server.stats()
    assert "False NONE" in observations(root)[0], observations(root)  # a scan: no text layer; the model saw pixels
    (started,) = result.trajectory.of(SubCallStarted)
    assert (started.images[0]["width"], started.images[0]["height"]) == (1241, 1754)  # A4 (595.3 x 841.9 pt) at 150 dpi
    assert stats["images"] == 1 and stats["prompt_tokens"] >= image_tokens(1241, 1754)
    assert "'Read this scanned page.' + 1 image (1241x1754 PNG) -> 'NONE'" in render_text(result.trajectory)
    assert "1 image (1241x1754 PNG)" in render_html(result.trajectory)
    thumb = started.images[0]["thumb"]  # made in the kernel, checked by its header on the host, shown as is
    assert header(base64.b64decode(thumb.split(",", 1)[1])) == ("image/png", 68, 96)
    assert f'<img src="{thumb}"' in render_html(result.trajectory)


@pytest.mark.parametrize("kind", ["local", "kernel"])
def test_llm_map_sends_each_item_alone_with_its_images(kind: str, scans: Path) -> None:
    from rlmnb.events import MapFinished

    result, stats, root = vision_run(kind, scans, "files = sorted(k for k in inputs['scans'] if k.endswith('.png'))\n"
                                     "totals = llm_map(files, 'Read the total due on this invoice.', "
                                     "images=[inputs['scans'][f] for f in files])\n"
                                     "print(dict(zip(files, totals)))\n"
                                     "try:\n    llm_map(files, 'x', images=[None] * len(files), pack_items=5)\n"
                                     "except ValueError as e:\n    print(e)", "submit(totals)")
    assert result.answer == ["1,250.00 EUR", "980.40 EUR", "77.10 EUR"], result.reason
    assert "llm_map() with images sends one item per call; leave pack_items out." in observations(root)[0]
    (m,) = result.trajectory.of(MapFinished)
    assert (m.items, m.packs, m.calls) == (3, 3, 3) and stats["images"] == 3
    assert [len(e.images) for e in result.trajectory.of(SubCallStarted)] == [1, 1, 1]


@pytest.fixture(scope="module")
def statements(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three statement scans; each 'shows' (to the scripted vision model) its stamp: paid or overdue."""
    d = tmp_path_factory.mktemp("statements")
    for i, stamp in enumerate(["paid", "overdue", "paid"]):
        invoice(d / f"statement-{i + 1}.png", stamp, (640 + 64 * i, 480))
    return d


@pytest.mark.parametrize("kind", ["local", "kernel"])
def test_llm_classify_and_llm_filter_send_each_item_alone_with_its_images(kind: str, statements: Path) -> None:
    from rlmnb.events import MapFinished, MapStarted

    snippet = ("files = sorted(inputs['scans'])\n"
               "pictures = [inputs['scans'][f] for f in files]\n"
               "stamps = llm_classify(files, ['paid', 'overdue'], 'Read the stamp on this statement.', "
               "images=pictures)\n"
               "paid = llm_filter(files, 'the statement is stamped paid', images=[[p] for p in pictures])\n"
               "print(list(stamps), list(paid))\n"
               "for call in ('llm_classify(files, [\"a\", \"b\"], images=pictures, pack_items=3)',\n"
               "             'llm_filter(files, \"x\", images=pictures[:2])', 'llm_filter(files, \"x\", images=b\"png\")'):\n"
               "    try:\n        eval(call)\n    except (TypeError, ValueError) as e:\n        print(e)")

    def stamp_or_truth(messages: list[dict[str, Any]]) -> str:  # llm_filter asks true/false of the same scans
        shows = image_text_responder(messages)
        text = str(messages[-1]["content"][0]["text"])
        return ("true" if shows == "paid" else "false") if "condition holds" in text else shows

    with FakeServer(responder=stamp_or_truth) as server:
        root = ScriptedLM([code(snippet), code("submit(list(stamps))")], name="root")
        result = RLM(root, server.lm("gpt-4o-mini"), sandbox=kind).run("Which are paid?", scans=statements)
        stats = server.stats()
    assert result.answer == ["paid", "overdue", "paid"], result.reason
    seen = observations(root)[0]
    assert "['paid', 'overdue', 'paid'] [True, False, True]" in seen
    assert "llm_classify() with images sends one item per call; leave pack_items out." in seen
    assert "llm_filter(): 3 items but 2 image entries." in seen
    assert "llm_filter() takes images as a list with one entry per item" in seen
    assert [m.operator for m in result.trajectory.of(MapStarted)] == ["llm_classify", "llm_filter"]
    maps = result.trajectory.of(MapFinished)
    assert [(m.items, m.packs, m.calls) for m in maps] == [(3, 3, 3), (3, 3, 3)]
    assert stats["requests"] == 6 and stats["images"] == 6  # the same images, other prompts: not cached
    started = result.trajectory.of(SubCallStarted)
    assert [len(e.images) for e in started] == [1] * 6
    assert [e.images[0]["width"] for e in started] == [640, 704, 768] * 2
    finished = result.trajectory.of(SubCallFinished)
    for event in finished:  # counted and priced with their images (gpt-4o-mini has a price)
        (width,) = [e.images[0]["width"] for e in started if e.call_id == event.call_id]
        assert event.usage["input_tokens"] >= image_tokens(width, 480) and event.usage["cost_usd"] > 0
    assert result.usage.sub_calls == 6 and result.usage.unpriced_calls == 0
    assert result.usage.input_tokens >= 2 * sum(image_tokens(w, 480) for w in (640, 704, 768))


@pytest.mark.parametrize("kind", ["local", "kernel"])
def test_llm_classify_and_llm_filter_with_images_refuse_a_model_that_does_not_read_them(
        kind: str, statements: Path) -> None:
    snippet = ("pictures = [inputs['scans'][f] for f in sorted(inputs['scans'])]\n"
               "for call in (lambda: llm_classify(['a', 'b', 'c'], ['paid', 'overdue'], images=pictures),\n"
               "             lambda: llm_filter(['a', 'b', 'c'], 'paid', images=pictures)):\n"
               "    try:\n        print('result', call())\n    except Exception as e:\n"
               "        print(type(e).__name__, e)")
    _, stats, root = vision_run(kind, statements, snippet, "submit('done')", sub="gpt-3.5-turbo")
    seen = observations(root)[0]
    assert seen.count("ImagesRefused openai/gpt-3.5-turbo cannot be sent images (litellm's model info says it "
                      "does not read images); nothing was sent.") == 2, seen
    assert "result" not in seen and stats["requests"] == 0
