"""The tutorials are saved as JupyterLab saves a notebook: the installed kernel spec's display name
("Python 3 (ipykernel)") and nbformat's own layout, so opening one leaves it clean (nothing to save)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_tutorials() -> None:
    assert len(NOTEBOOKS) >= 8


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_tutorial_is_saved_as_jupyterlab_would(path: Path) -> None:
    spec = KernelSpecManager().get_kernel_spec("python3")
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"] == {"name": "python3", "display_name": spec.display_name,
                                         "language": spec.language}
    assert nb.metadata["kernelspec"]["display_name"] == "Python 3 (ipykernel)"
    assert path.read_text(encoding="utf-8") == nbformat.writes(nb) + "\n"  # what the server writes on save
    assert set(nb.metadata["language_info"]) >= {"name", "version", "codemirror_mode", "pygments_lexer"}
