"""Absolute repository paths. Never depend on the working directory: papermill runs in notebooks/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data"
FIGURES = REPO / "figures"
NOTEBOOKS = REPO / "notebooks"
EXECUTED = NOTEBOOKS / "executed"


def data_dir(override: str | Path | None = None) -> Path:
    """The data folder: `override` when given (tests, a user's own copy), else the repository's data/."""
    return Path(override).resolve() if override else DATA


def figures_dir(override: str | Path | None = None) -> Path:
    """The figures folder, created if missing."""
    path = Path(override).resolve() if override else FIGURES
    path.mkdir(parents=True, exist_ok=True)
    return path


def raw_dir(gpu: str, data: str | Path | None = None) -> Path:
    """data/raw/<gpu>/, where every measured row of that GPU lives."""
    return data_dir(data) / "raw" / gpu
