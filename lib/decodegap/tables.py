"""Tables written next to the figures: CSV (full precision, for machines) and Markdown (for readers)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def write_table(frame: pd.DataFrame, stem: str, out_dir: Path, digits: int = 3, preamble: str = "") -> tuple[Path, Path]:
    """Write `frame` as <stem>.csv and <stem>.md in out_dir; floats rounded to `digits` significant
    decimals in both so that regenerating from the same data gives identical files. `preamble` (Markdown)
    goes above the table in the .md file."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rounded = frame.copy()
    for col in rounded.columns:
        if pd.api.types.is_float_dtype(rounded[col]):
            rounded[col] = rounded[col].round(digits + 3 if "bytes" in col else digits)
    csv_path, md_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    rounded.to_csv(csv_path, index=False)
    md_path.write_text(preamble + rounded.to_markdown(index=False, floatfmt=f".{digits}f") + "\n")
    return csv_path, md_path
