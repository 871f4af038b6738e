"""A second GPU's rows, cut short after notebook 01's and 02's headline cells, replay beside the shipped ones.

The rows are the shipped H200 rows at ctx 2048 (roofline arms, the A/B sweep, the copy probe, their checks and
env.json entries, their device named as that GPU's) copied into a temporary data folder under the key of a paper
GPU with no shipped rows (h100-sxm while none is shipped): a test fixture, never shipped, whose timings are the H200's. Because they are the same rows,
what notebooks 01, 02 and 05 derive from them is known by hand: the same speed-ups, floors scaled by the ratio of the
two datasheet bandwidths, and more of the paper's claims read as tested on the paper's GPU class (whatever their
verdict, which these rows do not stand for)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from decodegap import cli, paths

PAPER_GPUS = ("h100-sxm", "l4")
"""GPUs the paper's findings name (its headline claims are about both); the fixture takes the first with no shipped
rows, so the test keeps its premise once the paper's own GPU is measured."""
NEW = next((gpu for gpu in PAPER_GPUS if not paths.raw_dir(gpu).exists()), PAPER_GPUS[-1])
NOTEBOOKS = ("01_roofline", "02_cuda_graphs_ab", "05_cost")


def _relabelled(data) -> None:
    src, dst = paths.raw_dir("h200", data), paths.raw_dir(NEW, data)
    assert not dst.exists(), f"rows of every GPU of {PAPER_GPUS} are shipped: add another the paper's claims name"
    dst.mkdir()
    read = dict(low_memory=False, keep_default_na=False, dtype=str)
    decode = pd.read_csv(src / "decode.csv", **read)
    decode = decode[(decode["ctx"] == "2048") & decode["arm"].isin(["eager", "hf_default", "graph"])
                    & (decode["quant"] == "bf16") & (decode["attn"] == "sdpa")]
    ab = pd.read_csv(src / "ab.csv", **read)
    ab = ab[ab["ctx"] == "2048"]
    bandwidth = pd.read_csv(src / "bandwidth.csv", **read)
    runs = set(decode["run_id"]) | set(ab["run_id"]) | set(bandwidth["run_id"])
    verify = pd.read_csv(src / "verify.csv", **read)
    verify = verify[verify["run_id"].isin(runs) & (verify["ctx"] == "2048")]
    for name, frame in (("decode", decode), ("ab", ab), ("bandwidth", bandwidth), ("verify", verify)):
        frame.assign(gpu=NEW).to_csv(dst / f"{name}.csv", index=False)
    env = json.loads((src / "env.json").read_text())
    text = json.dumps({run: env[run] for run in sorted(runs) if run in env})
    specs = pd.read_csv(paths.data_dir(data) / "specs" / "gpus.csv").set_index("gpu")["device_names"]
    names = {gpu: str(specs[gpu]).split(";")[0] for gpu in ("h200", NEW)}  # a run's device is its folder's GPU
    (dst / "env.json").write_text(text.replace('"h200"', f'"{NEW}"')
                                  .replace(f'"{names["h200"]}"', f'"{names[NEW]}"'))


@pytest.fixture(scope="module")
def replayed_two_gpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two_gpus")
    data, figures = tmp / "data", tmp / "figures"
    shutil.copytree(paths.DATA, data, ignore=shutil.ignore_patterns("breakdown*.csv"))
    _relabelled(data)
    argv = ["reproduce", "--data-dir", str(data), "--figures-dir", str(figures)]
    assert cli.main(argv + [a for nb in NOTEBOOKS for a in ("--only", nb)]) == 0
    return figures


@pytest.mark.slow
def test_the_new_gpus_headline_speedups_are_the_rows_own(replayed_two_gpus):
    speed = pd.read_csv(replayed_two_gpus / "02_speedups.csv")
    head = speed[(speed["sweep"] == "headline") & (speed["arm"] == "graph")].set_index(["gpu", "model"])
    new, old = head.loc[NEW].sort_index(), head.loc["h200"].sort_index()
    assert len(new) == 3
    pd.testing.assert_frame_equal(new[["speedup", "ci_low", "ci_high", "sessions"]],
                                  old[["speedup", "ci_low", "ci_high", "sessions"]])


@pytest.mark.slow
def test_the_new_gpus_floors_scale_by_the_datasheet_bandwidths(replayed_two_gpus):
    specs = pd.read_csv(paths.DATA / "specs" / "gpus.csv").set_index("gpu")["bandwidth_gbps"]
    cells = pd.read_csv(replayed_two_gpus / "01_roofline_cells.csv")
    floors = cells[cells["ctx"] == 2048].groupby(["gpu", "model"])["t_floor_ms_W_all"].first()
    ratio = specs["h200"] / specs[NEW]  # the same bytes over the other datasheet bandwidth
    for model in floors.loc[NEW].index:
        assert floors.loc[(NEW, model)] == pytest.approx(floors.loc[("h200", model)] * ratio, rel=5e-4)  # 3 decimals


@pytest.mark.slow
def test_claims_about_the_new_gpu_read_its_rows_as_the_papers_gpu_class(replayed_two_gpus):
    def on_the_papers_class(claims):
        return int((claims["category"].str.contains("on the paper's GPU class")
                    | claims["also"].fillna("").str.contains("on the paper's GPU class")).sum())

    shipped = on_the_papers_class(pd.read_csv(paths.FIGURES / "claims.csv"))
    assert on_the_papers_class(pd.read_csv(replayed_two_gpus / "claims.csv")) > shipped
