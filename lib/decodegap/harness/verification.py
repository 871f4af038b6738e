"""The checks of a sweep's session: whether a cell is checked against eager before it is timed (once per run, or
every session), the check itself and its verify.csv rows, and whether a cell gets the sharpened-attention check too.
The session body (harness.session) calls them; the comparisons themselves are harness.checks'.
"""

from __future__ import annotations

from decodegap import paths, records
from decodegap.compare import VERIFY_TOL
from decodegap.harness.sweep import Cell, SweepPlan


def verify_row(plan: SweepPlan, run_id: str, session: int, cell: Cell, err: float, tol: float, check: str,
               reason: str = "", layer: str = "model") -> dict:
    """A verify.csv row of a model check (records.CHECKS): `ok` when the error passes `tol`, else `error`; `layer`
    what it checked (the model, or the LM head's `lm_head`)."""
    from decodegap.quant.paths import passes

    return dict(run_id=run_id, session=session, gpu=plan.gpu, model=cell.model, ctx=cell.ctx, batch=cell.batch,
                arm=cell.arm, attn=cell.attn, quant=cell.quant, max_rel_err=err, tol=tol,
                status="ok" if passes(err, tol) else "error", reason=reason, check=check, layer=layer, rows=None)


def check_cell(plan: SweepPlan, model, cell: Cell, run_id: str, session: int, data, cache_len: int) -> None:
    """Check the cell's arm against eager (checks.verify_arm: each of its batch's sequences against the same sequence
    of the eager step) and append the verdict to verify.csv, passed or failed, the worst sequence's error
    (its reason names the sequence where the batch holds more than one); a failed check then raises
    AssertionError (the cell is not timed). Where the model's weights share a lean decoder's storage (lean
    .shared_projection_storage: its copies did not fit), the reason says so (lean.SHARED_STORAGE_NOTE)."""
    from decodegap.harness import checks, lean

    errors: list[float] = []
    err = checks.verify_arm(model, cell.arm, cell.ctx, seed=plan.seed, tol=VERIFY_TOL, attn=cell.attn,
                            cache_len=cache_len, raise_past_tol=False, batch=cell.batch, sequences=errors)
    notes = [sequences_reason(errors), lean.SHARED_STORAGE_NOTE if lean.shared_projection_storage(model) else ""]
    row = verify_row(plan, run_id, session, cell, err, VERIFY_TOL, "vs_eager", "; ".join(n for n in notes if n))
    records.append_rows(paths.raw_dir(plan.gpu, data) / "verify.csv", records.VERIFY, [row])
    if row["status"] != "ok":
        raise AssertionError(f"arm {cell.arm!r} at ctx {cell.ctx}: logits differ from eager by {err:.3g} "
                             f"(> {VERIFY_TOL}; verify.csv)")
    config = model.config.to_dict()
    if wants_sharp_check(cell, config):
        sharp = checks.verify_arm_sharpened(model, cell.arm, cell.ctx, seed=plan.seed, tol=checks.SHARP_TOL,
                                            attn=cell.attn, cache_len=cache_len, factor=checks.factor_for(config),
                                            batch=cell.batch)
        records.append_rows(paths.raw_dir(plan.gpu, data) / "verify.csv", records.VERIFY,
                            [verify_row(plan, run_id, session, cell, sharp, checks.SHARP_TOL, "vs_eager_sharp",
                                        checks.sharpened_reason(config))])


def sequences_reason(errors: list[float]) -> str:
    """The reason of a check of several sequences: how many, and which was the worst (as verify.csv's max_rel_err
    holds its error); empty for one sequence (a batch-1 check's row is as it always was)."""
    if len(errors) <= 1:
        return ""
    bad = [i for i, e in enumerate(errors) if e != e]
    at = bad[0] if bad else max(range(len(errors)), key=errors.__getitem__)
    return f"each of {len(errors)} sequences against eager's; the worst is sequence {at}"


def wants_sharp_check(cell: Cell, config=None) -> bool:
    """Whether a cell also gets the sharpened-attention check (harness.checks' sharpened check; recorded, not gating), bf16 only: a lean
    arm that is not compiled (a compiled one would compile its sharpened decoder again) with SDPA's default, or an
    HF arm running one of hf_attention's kernels (FA2, FA3, FlashInfer: attention code of decodegap's own inside the
    HF step); and, given the model's `config`, only where its attention scores are too flat for the plain check
    (checks.factor_for above 1: the tiny and narrow models, not the paper's)."""
    from decodegap.arms import REGISTRY
    from decodegap.harness.hf_attention import IN_MODEL
    from decodegap.harness.checks import factor_for

    arm = REGISTRY.get(cell.arm)
    if arm is None or arm.runner == "compile" or cell.quant != "bf16":
        return False
    if config is not None and factor_for(config) <= 1.0:
        return False
    return (arm.decoder == "lean" and cell.attn == "sdpa") or (arm.decoder == "hf" and cell.attn in IN_MODEL)


def passed_in_run(plan: SweepPlan, run_id: str, cell: Cell, data, check: str = "vs_eager") -> bool:
    """Whether verify.csv holds a passing `check` (status ok) of `cell` from run `run_id` (for vs_bf16, the model
    check, at the cell's model, context and quantisation, arm eager as it is recorded)."""
    path = paths.raw_dir(plan.gpu, data) / "verify.csv"
    if not path.exists():
        return False
    v = records.read_csv(path, records.VERIFY)
    v = v[(v["run_id"] == run_id) & (v["check"] == check) & (v["status"] == "ok") & (v["gpu"] == plan.gpu)
          & (v["model"] == cell.model) & (v["ctx"].astype(int) == int(cell.ctx)) & (v["quant"] == cell.quant)
          & (v["batch"].astype(int) == int(cell.batch))]
    if check == "vs_eager":
        v = v[(v["arm"] == cell.arm) & (v["attn"] == cell.attn)]
    return not v.empty


def wants_check(plan: SweepPlan, cell: Cell, run_id: str, session: int, data) -> bool:
    """Whether `cell` is checked against eager before (a compiled arm: right after) its timing in `session`: a
    non-eager arm with plan.verify, in every session with plan.check_every_session, else where this run has no
    passing check of the cell yet (passed_in_run)."""
    if not plan.verify or (cell.arm == "eager" and cell.attn == "sdpa"):
        return False
    return plan.check_every_session or not passed_in_run(plan, run_id, cell, data)
