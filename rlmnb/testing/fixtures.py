"""pytest fixtures for rlmnb's own tests and for users' tests (`pytest_plugins = ["rlmnb.testing.fixtures"]`).

- `rlmnb_cache_dir` (autouse): every test gets its own response-cache folder through
  `RLMNB_CACHE_DIR`, so no test reads or writes the user's real cache or sees another test's replies.
- `fake_server`: a fresh in-process FakeServer (default knobs), stopped after the test.
- `fake_server_factory`: `make(**knobs) -> FakeServer`; every server it made is stopped after the test.
- `fake_server_session`: one in-process server for the whole session; call `.reset()` before relying
  on its stats.
- `fake_server_process_factory`: like the factory, but each server runs as its own process.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rlmnb.testing.fake_process import FakeServerProcess
from rlmnb.testing.fake_server import FakeServer

__all__ = ["fake_server", "fake_server_factory", "fake_server_process_factory", "fake_server_session",
           "rlmnb_cache_dir"]


@pytest.fixture(autouse=True)
def rlmnb_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private response-cache folder for this test (created only if something caches)."""
    from rlmnb._engine.cache import ENV_DIR, close_cache

    path = tmp_path_factory.getbasetemp() / f"rlmnb-cache-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(ENV_DIR, str(path))
    yield path
    close_cache(path)


@pytest.fixture
def fake_server_factory() -> Iterator[Callable[..., FakeServer]]:
    servers: list[FakeServer] = []

    def make(**knobs: Any) -> FakeServer:
        server = FakeServer(**knobs)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def fake_server(fake_server_factory: Callable[..., FakeServer]) -> FakeServer:
    return fake_server_factory()


@pytest.fixture(scope="session")
def fake_server_session() -> Iterator[FakeServer]:
    server = FakeServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_server_process_factory() -> Iterator[Callable[..., FakeServerProcess]]:
    servers: list[FakeServerProcess] = []

    def make(**knobs: Any) -> FakeServerProcess:
        server = FakeServerProcess(**knobs)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()
