"""Notebook 06: does an int4 lever's step time move with the per-process tuner? A product of the int4 GEMV or the
fused int4 product without an entry in its table (kernels.fused_int4.configs) is tuned on its first call in each
process, and each session records the choices its process made (env.json: sessions.<n>.timing.tuned, from
kernels.tuned_choices). Per lever and cell, its sessions (selection and confirmation sweeps alike) are grouped by the
choices their processes made, on the kernel the lever's step times (timed_kernel: the fused int4 product for a fused
lever, else the int4 GEMV), on the products every one of them tuned; a lever whose sessions made more than one set of
choices there is listed with each set's sessions and median, and the products whose choice differed.

A process that ran several arms tuned the products of all of them, so a differing choice may belong to another arm
of the same process that launches the same kernel on the same shape and flags: the products are named so that a
reader can tell. Descriptive: no target reads it; the fix is a table entry for each product named (bench/measure.sh's
int4_configs step)."""

from __future__ import annotations

import pandas as pd

from decodegap import arms, stats
from decodegap.finding import Finding
from decodegap.kernels.fused_int4 import configs as int4_configs

LEVER = ["gpu", "model", "ctx", "arm", "quant"]
MOVES_COLUMNS = LEVER + ["sessions", "choice_sets", "fastest_ms", "slowest_ms", "differing", "groups", "in_table"]


def session_choices(env: dict) -> dict:
    """{(gpu, run id, session): {(kernel, shape and flavour): config}} of every session whose env.json entry records
    the tuner's choices (`env`: hardware.load_env, {(gpu, run id): entry}); a session that tuned nothing is absent. A
    session that took more than one process (one died inside a cell; the earlier ones' records are in
    `earlier_processes`) counts every process's choices: a product its processes chose alike keeps that choice, a
    product they chose otherwise is left out of the session (its rows were timed under either, and which is not
    recorded). Until 2026-12-06 only the last process's choices were read."""
    out = {}
    for (gpu, run_id), entry in env.items():
        for session, record in ((entry or {}).get("sessions") or {}).items():
            if not isinstance(record, dict):
                continue
            processes = [p for p in [*(record.get("earlier_processes") or []), record] if isinstance(p, dict)]
            made = [{(kernel, shape): config for kernel, shapes in tuned.items() for shape, config in shapes.items()}
                    for tuned in (((p.get("timing") or {}).get("tuned")) for p in processes) if tuned]
            merged = {}
            for choices in made:
                for key, config in choices.items():
                    merged.setdefault(key, set()).add(config)
            kept = {key: next(iter(configs)) for key, configs in merged.items() if len(configs) == 1}
            if kept:
                out[(gpu, run_id, int(session))] = kept
    return out


def timed_kernel(arm: str) -> str:
    """The tuned kernel (kernels.TUNED_KERNELS) whose choices an int4 arm's timed step runs: the fused int4 product
    for an arm of the fused step (its kernels name "fused"), else the int4 GEMV. The int4 GEMV's choices in a fused
    arm's process come from other steps of that process (its checks' references), not from the step it times."""
    known = arms.REGISTRY.get(str(arm))
    return "fused_int4_gemv" if known is not None and "fused" in known.kernels else "int4_gemv"


def tuner_moves(decode_rows: pd.DataFrame, choices: dict) -> pd.DataFrame:
    """Per int4 lever and cell (LEVER) of `decode_rows` (timed rows, status ok, batch 1) whose sessions made more than
    one set of choices on the products all of them tuned with the kernel its step times (`choices`: session_choices;
    timed_kernel): how many sessions and sets, the fastest and slowest set's median of session medians (ms), the
    products whose choice differed, each set in words and those products the table now holds (MOVES_COLUMNS). A
    session without recorded choices for that kernel is left out."""
    rows = decode_rows[(decode_rows["quant"] != "bf16") & (decode_rows["status"] == "ok")] \
        if not decode_rows.empty else decode_rows
    if "batch" in rows:
        rows = rows[pd.to_numeric(rows["batch"], errors="coerce").fillna(1).astype(int) == 1]
    if rows.empty or not choices:
        return pd.DataFrame(columns=MOVES_COLUMNS)
    per = stats.session_medians(rows, LEVER + ["run_id"])
    out = []
    for key, g in per.groupby(LEVER):
        kernel = timed_kernel(key[3])
        made = {(r.run_id, int(r.session)): ({k: c for k, c in (choices.get((r.gpu, r.run_id, int(r.session))) or {})
                                              .items() if k[0] == kernel}, float(r.step_ms)) for r in g.itertuples()}
        made = {s: v for s, v in made.items() if v[0]}
        if len(made) < 2:
            continue
        common = set.intersection(*(set(c) for c, _ in made.values()))
        sets: dict = {}
        for session, (chosen, ms) in sorted(made.items()):
            sets.setdefault(tuple(sorted((k, chosen[k]) for k in common)), []).append(ms)
        if len(sets) < 2:
            continue
        differing = sorted(k for k in common if len({c[k] for c, _ in made.values()}) > 1)
        medians = {s: float(pd.Series(ms).median()) for s, ms in sets.items()}
        ordered = sorted(sets, key=medians.get)
        groups = "; ".join(f"{len(sets[s])} session{'s' if len(sets[s]) != 1 else ''} at {medians[s]:.3f} ms: "
                           + ", ".join(_compact(dict(s)[k]) for k in differing) for s in ordered)
        in_table = [_short(k) for k in differing if table_entry(*k) is not None]
        out.append(dict(zip(LEVER, key), ctx=int(key[2]), sessions=len(made), choice_sets=len(sets),
                        fastest_ms=medians[ordered[0]], slowest_ms=medians[ordered[-1]],
                        differing="; ".join(_short(k) for k in differing), groups=groups,
                        in_table="; ".join(in_table)))
    return pd.DataFrame(out, columns=MOVES_COLUMNS)


def table_entry(kernel: str, shape: str) -> str | None:
    """The config the fused int4 product's table (kernels.fused_int4.configs) now holds for a product the tuner
    chose in a session ('N=.. K=.. G=.. FLAGS', launch.tuned_configs' key), in the bench's short form, or None: no
    entry (the tuner chooses in each process) or not the fused int4 product (the int4 GEMV has no table). Read as the
    launch reads it (int4_configs.launched_config)."""
    if kernel != "fused_int4_gemv":
        return None
    words = str(shape).split()
    size = {k: int(v) for k, v in (w.split("=", 1) for w in words if "=" in w)}
    flags = {w: True for w in words if "=" not in w}
    try:
        found = int4_configs.launched_config(size["N"], size["K"], size["G"], flags, bool(flags.get("OUT_NORM")))
    except ValueError:  # flags the fused int4 step does not launch: no entry can hold them
        return None
    return int4_configs.config_key(found) if found is not None else None


def _short(key: tuple) -> str:
    """A tuned product in words: its kernel, shape and flags, without the group size ('fused_int4_gemv N=3584
    K=18944 EARLY_TRIGGER RESIDUAL USE_PDL')."""
    kernel, shape = key
    return f"{kernel} {' '.join(w for w in str(shape).split() if not w.startswith('G='))}"


COMPACT = {"BLOCK_N": "n", "SUB_MAX": "s", "CHUNKS": "c", "num_warps": "w", "num_stages": "st"}


def _compact(config: str) -> str:
    """A tuned config in the bench's short form: 'BLOCK_N=4 SUB_MAX=1 num_warps=2' is n4_s1_w2
    (kernels.fused_int4.configs.config_key), the int4 GEMV's CHUNKS and num_stages as c and st."""
    parts = [w.split("=", 1) for w in str(config).split() if "=" in w]
    return "_".join(f"{COMPACT.get(k, k)}{v}" for k, v in parts) or str(config)


def findings(moves: pd.DataFrame) -> list[str]:
    """One sentence per lever and cell of tuner_moves, with the spread between its fastest and slowest set's medians;
    it describes, it does not attribute: sessions that made the same choices differ too (host noise, the machine), so
    the spread is not the tuner's alone. (Until 2026-12-06 the sentence said the tuner "moved" the lever.)"""
    out = []
    for r in moves.itertuples(index=False):
        spread = r.slowest_ms / r.fastest_ms - 1
        out.append(Finding(
            f"The {r.quant} lever {r.arm} at {r.model} ctx {r.ctx} on the {r.gpu}: its {r.sessions} sessions with "
            f"the tuner's choices recorded made {r.choice_sets} sets of choices on the products all of them tuned, the "
            f"sets' medians {100 * spread:.1f} % apart (descriptive, not a cause: host noise between processes moves a "
            f"step too, the eager arm's most). The products whose choice differed: {r.differing}; their configs in "
            f"that order, fastest set first: {r.groups}. "
            + _table_words(r),
            gpu=r.gpu, model=r.model, ctx=r.ctx, arm=r.arm, quant=r.quant, sessions=r.sessions,
            choice_sets=r.choice_sets, fastest_ms=r.fastest_ms, slowest_ms=r.slowest_ms, spread=spread))
    return out


def _table_words(r) -> str:
    """What the table holds now of a move's products: every one (the sessions ran before the entries), some, none."""
    fix = " (bench/measure.sh's int4_configs step) would fix its config across processes."
    held = [p for p in str(r.in_table or "").split("; ") if p]
    if held and len(held) == len(str(r.differing).split("; ")):
        return ("The table now holds an entry for each of them, so a session at the current commit runs one config "
                "there: these sessions ran before the entries.")
    if held:
        return f"The table now holds an entry for {'; '.join(held)}; one for each other product" + fix
    return "None of them has a table entry now; one for each" + fix

