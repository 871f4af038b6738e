"""Tables written next to the figures: CSV (full precision, for machines) and Markdown (for readers)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from decodegap import finding


def write_table(frame: pd.DataFrame, stem: str, out_dir: Path, digits: int = 3, preamble: str = "") -> tuple[Path, Path]:
    """Write `frame` as <stem>.csv and <stem>.md in out_dir; floats rounded to `digits` significant
    decimals in both so that regenerating from the same data gives identical files. `preamble` (Markdown)
    goes above the table in the .md file, where a missing value reads "-" (the CSV leaves it empty)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rounded = frame.copy()
    for col in rounded.columns:
        if pd.api.types.is_float_dtype(rounded[col]):
            rounded[col] = rounded[col].round(digits + 3 if "bytes" in col else digits)
    csv_path, md_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    rounded.to_csv(csv_path, index=False)
    shown = rounded.astype(object).where(rounded.notna(), None)  # a missing value reads "-", not "nan"
    md_path.write_text(preamble + shown.to_markdown(index=False, floatfmt=f".{digits}f", missingval="-") + "\n")
    return csv_path, md_path


SHOWN_ROWS = 20
"""A table a notebook cell shows has at most this many rows: a longer one shows its first and last rows (its whole is
the CSV and Markdown beside the figures)."""
SAID_LINES = 36
"""The most finding lines one `say_all` prints in a notebook cell (`say`: 6 by default); the rest are in the .md
file it names."""


def short_outputs() -> None:
    """Notebook outputs short: pandas shows a table of more than SHOWN_ROWS rows by its head and tail."""
    pd.set_option("display.max_rows", SHOWN_ROWS)
    pd.set_option("display.min_rows", 10)
    pd.set_option("display.max_columns", 14)  # a wide table shows its first and last columns, on one line each row
    pd.set_option("display.max_colwidth", 40)
    pd.set_option("display.width", 1000)


def say(lines, stem: str, out_dir: Path, shown: int = 6) -> list[str]:
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
    for line in lines[:shown]:
        print("-", line)
    if len(lines) > shown:
        print(f"  ... and {len(lines) - shown} more in {out_dir / (stem + '.md')}")
    return lines


def say_all(found, out_dir: Path) -> None:
    """`say` each list of findings of `found` ({stem: lines}, an experiment's findings) under its stem, printing at
    most SAID_LINES lines in all (each stem's first ones; every line is written to its files)."""
    shown = max(2, SAID_LINES // max(1, len(found)) - 1)
    for stem, lines in found.items():
        say(lines, stem, out_dir, shown=shown)
