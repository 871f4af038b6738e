"""The batch dimension of the harness on a CPU: B sequences per cell, each checked against eager's same sequence, the
batch column of every row (old files read as batch 1, a batch-1 row as it was plus `,1`), the one-row kernels'
arms `unavailable` naming what is measured instead, resume, and bad batch values refused before anything is
written."""

from __future__ import annotations

import csv
import shutil
from collections import Counter

import pytest
import torch

from decodegap import arms, inputs, paths, prompts, records, selection
from decodegap.compare import max_relative_error
from decodegap.harness import checks, decode, models, session, sweep, verification

PLAN = sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16,), arms=("eager", "hf_default", "lean",
                       "lean_kernels"), batches=(1, 2, 4), sessions=1, steps=3, warmup=1, device="cpu")


@pytest.fixture(scope="module")
def tiny_model():
    return models.build_model(models.load_spec("llama-tiny"), device="cpu")


# --- the step: B different prompts, each sequence its own -------------------------------------------------------

def test_a_batch_decodes_different_prompts_and_sequence_b_is_prompt_b_alone(tiny_model):
    vocab, ctx = tiny_model.config.vocab_size, 16
    ids = prompts.batch_prompt_ids(vocab, ctx, "cpu", seed=0, batch=3)
    assert ids.shape == (3, ctx)
    assert torch.equal(ids[0:1], prompts.prompt_ids(vocab, ctx, "cpu", 0))  # sequence 0: the batch-1 prompt
    assert len({tuple(r.tolist()) for r in ids}) == 3  # no two sequences alike
    with torch.inference_mode():
        batched = decode.StaticStep(tiny_model, ctx, ctx + 2, batch=3)
        batched.tok.fill_(7)  # one token into every sequence (a near-tied argmax could differ between the two sides)
        first = batched.step().float()
        for b in range(3):
            alone = decode.StaticStep(tiny_model, ctx, ctx + 2, seed=b * prompts.PROMPT_SEED_STRIDE)
            alone.tok.fill_(7)
            assert max_relative_error(first[b], alone.step().float()[0]) < 2e-2
    assert max_relative_error(first[0], first[1]) > 0.1  # different prompts, different logits


def test_batch_one_is_the_step_as_it_was(tiny_model):
    """batch=1 takes the path every batch-1 row was measured with: the same prompt tensor and the same logits."""
    plain = decode.run_arm(tiny_model, "lean", 16, warmup=0, steps=2, keep_logits=True, feedback=False)
    one = decode.run_arm(tiny_model, "lean", 16, warmup=0, steps=2, keep_logits=True, feedback=False, batch=1)
    assert plain.batch == one.batch == 1 and all(torch.equal(a, b) for a, b in zip(plain.logits, one.logits))
    assert [t.shape for t in one.logits] == [torch.Size([1, 1, tiny_model.config.vocab_size])] * 2


@pytest.mark.parametrize("arm", ["eager", "hf_default", "lean"])
def test_every_arm_that_takes_rows_decodes_b_sequences(tiny_model, arm):
    t = decode.run_arm(tiny_model, arm, 16, warmup=1, steps=2, keep_logits=True, batch=4)
    assert t.batch == 4 and len(t.step_ms) == 2 and t.max_cache_len == 16 + 1 + 2
    assert {tuple(x.shape) for x in t.logits} == {(4, 1, tiny_model.config.vocab_size)}
    errors = checks.verify_arm_sequences(tiny_model, arm, 16, batch=4)
    assert len(errors) == 4 and max(errors) < 1e-3


def test_each_sequence_is_compared_with_its_own_reference():
    """A fault in one sequence shows as that sequence's error, computed here by hand, and the check's reason names it."""
    ref = [torch.tensor([[[1.0, -2.0, 4.0]], [[0.5, 0.5, -1.0]], [[2.0, 0.0, 1.0]]]) for _ in range(3)]
    got = [r.clone() for r in ref]
    got[1][2, 0, 0] += 0.5  # sequence 2, second call: |0.5| / max|ref[2]| = 0.5 / 2
    errors = checks.sequence_errors(got, ref)
    assert errors == [0.0, 0.0, 0.25]
    assert checks.worst(errors) == 0.25 and checks.worst([0.0, float("nan")]) != checks.worst([0.0, float("nan")])
    assert verification.sequences_reason(errors) == "each of 3 sequences against eager's; the worst is sequence 2"
    assert verification.sequences_reason([0.01]) == ""  # a batch-1 check's row as it always was


def test_a_wrong_sequence_fails_the_cell(tiny_model, data_dir, monkeypatch):
    """The check compares every sequence: an arm right on sequence 0 and wrong on sequence 3 fails, with an error row."""
    real = checks.teacher_forced_logits

    def third_wrong(*a, **k):
        out = [x.clone() for x in real(*a, **k)]
        for x in out:
            x[3] += 5.0 * x[3].abs().max()
        return out

    monkeypatch.setattr(checks, "teacher_forced_logits", third_wrong)
    cell = sweep.Cell("llama-tiny", 16, "lean", batch=4)
    rows = session.measure_cell(PLAN, tiny_model, cell, "rid", 0, data_dir)
    assert [r["status"] for r in rows] == ["error"] and rows[0]["batch"] == 4
    verify = records.read_csv(paths.raw_dir("cpu-test", data_dir) / "verify.csv", records.VERIFY)
    assert verify["batch"].tolist() == [4] and verify["status"].tolist() == ["error"]
    assert verify["reason"].iloc[0].endswith("the worst is sequence 3") and verify["max_rel_err"].iloc[0] > 1


def test_one_row_kernels_are_unavailable_above_batch_one_naming_the_arm_measured_instead(tiny_model):
    # the fused step and the GEMVs take one row; the split-KV attention takes a batch (B x kv_heads heads)
    assert arms.batch_fallback("lean_fused_early_products_graph") == "lean_attn_graph"
    assert arms.batch_fallback("lean_kernels_graph") == "lean_attn_graph"
    assert arms.batch_fallback("lean_kernels") == "lean"  # no eager arm keeps the attention alone
    assert arms.batch_fallback("graph") is None and arms.batch_fallback("lean_attn_compile") is None
    assert arms.takes_batch("lean_attn_graph") and not arms.takes_batch("lean_fused_graph")
    reason = decode.arm_available("lean_fused_pdl_graph", tiny_model, batch=8)
    assert reason.startswith("lean_fused_pdl_graph's kernels (fused, pdl) take one row; at batch 8")
    assert "measured as lean_attn_graph" in reason and "attention kernel" in reason
    with pytest.raises(decode.ArmUnavailable, match="measured as lean"):
        decode.run_arm(tiny_model, "lean_kernels", 16, batch=2)
    with pytest.raises(decode.ArmUnavailable, match="batch 1 only"):
        decode.run_arm(tiny_model, "eager", 16, batch=2, attn="sdpa_math")


# --- one sweep of three batches in fresh processes ----------------------------------------------------------------

@pytest.fixture(scope="session")  # once per worker, however xdist interleaves the modules
def swept(tmp_path_factory):
    from test_sweep import make_data

    data = make_data(tmp_path_factory.mktemp("batch") / "data")
    return data, sweep.run_sweep(PLAN, data, progress=False)


def raw(data):
    return paths.raw_dir("cpu-test", data)


@pytest.mark.slow
def test_sweep_rows_carry_their_batch(swept):
    data, run_id = swept
    frame = records.read_csv(raw(data) / "decode.csv")
    ok = frame[frame["status"] == "ok"]
    assert Counter(zip(ok["batch"], ok["arm"])) == {(b, a): 3 for b in (1, 2, 4) for a in ("eager", "hf_default", "lean")}
    assert set(frame["max_cache_len"].dropna()) == {16 + 1 + 3}  # every sequence's cache: ctx + warmup + steps
    kernels = frame[frame["arm"] == "lean_kernels"]
    assert kernels.groupby("batch")["status"].agg(set).to_dict() == {1: {"unavailable"}, 2: {"unavailable"},
                                                                     4: {"unavailable"}}
    above = kernels[kernels["batch"] > 1]["reason"]
    assert above.str.contains("take one row").all() and above.str.contains("measured as lean ").all()
    text = (raw(data) / "decode.csv").read_text()
    assert text.splitlines()[0] == ",".join(records.DECODE.names) and records.DECODE.names[-1] == "batch"


@pytest.mark.slow
def test_sweep_checks_every_batch_and_every_sequence(swept):
    data, run_id = swept
    verify = records.read_csv(raw(data) / "verify.csv", records.VERIFY)
    model = verify[verify["check"] == "vs_eager"]
    assert sorted(zip(model["batch"], model["arm"])) == sorted((b, a) for b in (1, 2, 4) for a in ("hf_default", "lean"))
    assert set(model["status"]) == {"ok"} and (model["max_rel_err"] < 1e-3).all()
    for b, reason in zip(model["batch"], model["reason"]):
        assert (reason == "") if b == 1 else reason.startswith(f"each of {b} sequences against eager's")


@pytest.mark.slow
def test_a_killed_sweep_resumes_without_measuring_again(swept, tmp_path):
    """A run killed before its last cell's block was written carries on with that cell alone."""
    data, first = swept
    shutil.copytree(data, tmp_path / "data")
    data = tmp_path / "data"
    path = raw(data) / "decode.csv"
    lines = path.read_text().splitlines(keepends=True)
    last = list(csv.reader([lines[-1]]))[0]
    keep = [ln for ln in lines if list(csv.reader([ln]))[0][-1] != "4" or list(csv.reader([ln]))[0][6] != last[6]]
    path.write_text("".join(keep))  # the batch-4 cell of the last arm never written
    cell = (int(last[-1]), last[6])
    assert [(c.batch, c.arm) for c in PLAN.pending(0, data)] == [cell]
    again = sweep.run_sweep(PLAN, data, progress=False)
    frame = records.read_csv(path)
    assert set(zip(frame[frame["run_id"] == again]["batch"], frame[frame["run_id"] == again]["arm"])) == {cell}
    assert len(frame) == len(lines) - 1  # every row once: the header aside
    assert sweep.run_sweep(PLAN, data, progress=False) and len(records.read_csv(path)) == len(lines) - 1


# --- old files read as batch 1; the column lands with the first batch > 1 row -------------------------------------

def _row(batch=1, session=0, step=0):
    return dict(run_id="r", session=session, gpu="g", model="m", ctx=16, max_cache_len=20, arm="eager", attn="sdpa",
                quant="bf16", step=step, step_ms=1.5, status="ok", reason="", batch=batch)


def test_old_rows_read_as_batch_one_and_keep_their_bytes(tmp_path):
    path = tmp_path / "decode.csv"
    old = ",".join(records.DECODE.legacy_names) + "\n" + "r0,0,g,m,16,20,eager,sdpa,bf16,0,1.25,ok,\n"
    path.write_text(old)
    assert records.read_csv(path)["batch"].tolist() == [1]
    assert selection.done_keys(path, records.DECODE) == {("0", "g", "m", "16", "eager", "sdpa", "bf16", "1")}
    records.append_rows(path, records.DECODE, [_row(step=1)])  # batch 1: the file keeps its layout
    assert path.read_text() == old + "r,0,g,m,16,20,eager,sdpa,bf16,1,1.5,ok,\n"
    records.append_rows(path, records.DECODE, [_row(batch=8)])  # the first batch > 1 row brings the column
    lines = path.read_text().splitlines()
    assert lines == [",".join(records.DECODE.names), "r0,0,g,m,16,20,eager,sdpa,bf16,0,1.25,ok,,1",
                     "r,0,g,m,16,20,eager,sdpa,bf16,1,1.5,ok,,1", "r,0,g,m,16,20,eager,sdpa,bf16,0,1.5,ok,,8"]
    assert records.read_csv(path)["batch"].tolist() == [1, 1, 8]


def test_a_batch_one_row_is_the_old_row_then_its_batch(tmp_path):
    path = tmp_path / "decode.csv"
    records.append_rows(path, records.DECODE, [{k: v for k, v in _row().items() if k != "batch"}])
    assert path.read_text().splitlines()[1] == "r,0,g,m,16,20,eager,sdpa,bf16,0,1.5,ok,,1"  # a row without batch: 1


@pytest.mark.parametrize("layout", ["legacy", "current"])
def test_a_cut_first_line_of_a_block_moves_only_that_block(tmp_path, layout):
    """The cut line's key is whole (a comma after `quant`): only its block leaves, in either layout (`batch`, the last
    column, is its block's own)."""
    path = tmp_path / "decode.csv"
    legacy = layout == "legacy"
    names = records.DECODE.legacy_names if legacy else records.DECODE.names
    head = ",".join(names) + "\n" + "r,0,g,m,16,20,eager,sdpa,bf16,0,1.25,ok," + ("" if legacy else ",1") + "\n"
    path.write_text(head + "r,0,g,m,32,36,eager,sdpa,bf16,0,1.")
    assert records.repair_tail(path, records.DECODE) == 1 and path.read_text() == head
    assert records.read_csv(path)["batch"].tolist() == [1]


def test_the_shipped_rows_read_as_batch_one():
    """Every check row of a run whose plan has no batch above 1 reads batch 1 (rows written before the column
    existed among them); a batch run's rows carry its plan's batches (a run cut by its call's limit, fewer of them)."""
    rows = records.load_experiment("verify", paths.DATA)
    plans = {run: plan for (_, run), plan in selection.run_plans(paths.DATA).items()}
    batched = {run for run, plan in plans.items() if max((plan or {}).get("batches", [1])) > 1}
    old = rows[~rows["run_id"].isin(batched)]
    assert not old.empty and set(old["batch"]) == {1}
    measured = set()
    for run, got in rows[rows["run_id"].isin(batched)].groupby("run_id"):  # a run cut by its call holds fewer
        assert set(got["batch"]) <= set(plans[run]["batches"]) and len(got) > 0
        measured |= set(got["batch"])
    assert measured == {1, 2, 4, 8, 16, 32, 64}  # between them, the batch axis's runs checked every batch


# --- bad batch values: refused before anything is written ---------------------------------------------------------

@pytest.mark.parametrize("batches, why", [((0,), "batch 0 is not a whole number"), ((2, 2), "repeat"),
                                          ((1.5,), "1.5"), ((True,), "True"), ((), "no batch size")])
def test_a_bad_batch_is_refused(batches, why):
    with pytest.raises(inputs.InputError, match=why):
        sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16,), batches=batches, device="cpu")


def test_batch_above_one_is_bf16_with_sdpa_only():
    with pytest.raises(inputs.InputError, match="bf16 with SDPA's default attention only"):
        sweep.SweepPlan(gpu="g", models=("m",), contexts=(16,), batches=(1, 8), quant="int4-tinygemm")


def test_an_old_plan_reads_as_batch_one():
    raw_plan = PLAN.to_json().replace(', "batches": [1, 2, 4]', "")
    assert "batches" not in raw_plan and sweep.SweepPlan.from_json(raw_plan).batches == (1,)
    assert sweep.SweepPlan.from_json(PLAN.to_json()) == PLAN
