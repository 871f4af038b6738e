"""Where the diagnostics (bench/'s scripts, the kernel tuners among them) keep their results: data/diagnostics/NAME.csv,
one row per measurement, each with its provenance (the time, the command line, the commit and, for a tree with
uncommitted changes, the diff's hash: hardware.git_provenance, which refuses such a tree unless
DECODEGAP_ALLOW_DIRTY=1; the device and host CPU).
Rows are appended as they are measured, so a run cut short keeps what it measured and later runs add theirs.
DECODEGAP_DIAG_DIR names another folder (e.g. bench/measure.sh's OUTDIR)."""

import csv
import os
import statistics
import sys
import time
from pathlib import Path

from decodegap import hardware, paths

PROVENANCE = ("time", "command", "git_commit", "git_diff_sha256", "device", "host_cpu")


def folder() -> Path:
    return Path(os.environ.get("DECODEGAP_DIAG_DIR") or paths.DATA / "diagnostics")


def _provenance() -> dict:
    import torch

    git = hardware.git_provenance()
    return dict(command=" ".join(["python3", *_invocation()]), git_commit=git["git_commit"],
                git_diff_sha256=git.get("git_diff_sha256", ""),
                device=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                host_cpu=hardware._cpu_model())


def _invocation() -> list[str]:
    """The command line as it was typed: `-m MODULE ARGS` for a module of this package run with `python -m`
    (whose sys.argv[0] is the module's file), else sys.argv."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name.startswith("decodegap."):
        return ["-m", spec.name, *sys.argv[1:]]
    return list(sys.argv)


class Rows:
    """Appends rows of `fields` (then PROVENANCE) to folder()/NAME.csv; an existing file must have that header."""

    def __init__(self, name: str, fields):
        self.fields = tuple(fields) + PROVENANCE
        self.path = folder() / f"{name}.csv"
        self.provenance = _provenance()  # before anything is measured: a dirty tree is refused here
        if self.path.exists():
            with open(self.path, newline="") as fh:
                header = tuple(next(csv.reader(fh), ()))
            if header != self.fields:
                sys.exit(f"{self.path} has columns {header}, this script writes {self.fields}: move it aside first")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w", newline="") as fh:
                csv.writer(fh).writerow(self.fields)

    def add(self, **row) -> None:
        self._write([row])
        print(self.path.name, {k: v for k, v in row.items()}, flush=True)

    def add_times(self, times, *, err=None, err_field: str = "max_rel_err", status: str = "ok", reason: str = "",
                  **fields) -> list[dict]:
        """One row per timed repetition of one measurement (rep 0, 1, ...; `us` to 3 decimals; `gbps` = fields'
        `bytes` / us / 1e3 where the file has that column; `err_field` = err in 3 significant digits), or one row
        with `us` blank when `times` is empty or None (a measurement that failed: its status and reason say why).
        All written at once; the log gets one line per measurement (its median), not one per repetition.
        Returns the rows as written (strings, before the provenance)."""
        if err_field not in self.fields:
            raise KeyError(f"{self.path.name}: no column {err_field!r} for the error")
        rows = []
        for rep, us in enumerate(times or [None]):
            row = dict(fields, rep=rep, us="" if us is None else f"{us:.3f}", status=status, reason=reason)
            row[err_field] = "" if err is None else f"{err:.3e}"
            if "gbps" in self.fields:
                row["gbps"] = "" if us is None else f"{fields['bytes'] / us / 1e3:.1f}"
            rows.append(row)
        self._write(rows)
        told = {k: v for k, v in fields.items() if k not in ("gpu", "bytes")}
        got = f"median {statistics.median(times):.3f} us of {len(times)}" if times else f"{status}: {reason}"
        print(self.path.name, told, got, flush=True)
        return rows

    def _write(self, rows: list[dict]) -> None:
        for row in rows:  # every row known good before any is written
            unknown = set(row) - set(self.fields)
            if unknown:
                raise KeyError(f"{self.path.name}: no column {sorted(unknown)}")
        stamp = dict(self.provenance, time=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        with open(self.path, "a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=self.fields).writerows(dict(row, **stamp) for row in rows)
