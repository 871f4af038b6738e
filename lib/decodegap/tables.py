"""Tables written next to the figures: CSV (full precision, for machines) and Markdown (for readers)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from decodegap import finding


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


def say(lines, stem: str, out_dir: Path) -> list[str]:
    """Generated findings as data: print each as "- line" and write them to <stem>.csv (one `finding` per row, with
    a column per value the findings state: finding.frame, floats to 6 decimals) and <stem>.md (a bullet list) in
    out_dir, so that every number a notebook states can be read, quoted and compared without running it. Returns the
    lines (each Finding with its values)."""
    lines = [line if isinstance(line, str) else str(line) for line in lines]  # a Finding keeps its values
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = finding.frame(lines)
    for col in table.columns:
        if pd.api.types.is_float_dtype(table[col]):
            table[col] = table[col].round(6)
    table.to_csv(out_dir / f"{stem}.csv", index=False)
    (out_dir / f"{stem}.md").write_text("".join(f"- {line}\n" for line in lines))
    for line in lines:
        print("-", line)
    return lines


def say_all(found, out_dir: Path) -> None:
    """`say` each list of findings of `found` ({stem: lines}, an experiment's findings) under its stem."""
    for stem, lines in found.items():
        say(lines, stem, out_dir)
