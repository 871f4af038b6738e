"""GPU registry, device-name detection, the copy-bandwidth probe on a CPU, environment capture."""

from __future__ import annotations

import re
import pytest

from decodegap import hardware

KEYS = ("l4", "l40s", "a100-80gb", "h100-sxm", "h200", "b200")
# datasheet peaks in GB/s, as data/README.md gives them with their sources
DATASHEET_GBPS = {"l4": 300, "l40s": 864, "a100-80gb": 2039, "h100-sxm": 3350, "h200": 4800, "b200": 8000}


def test_h200_spec():
    spec = hardware.gpu_spec("h200")
    assert spec.bandwidth_gbps == 4800
    assert spec.memory_gb == 141
    assert spec.architecture == "Hopper"
    assert spec.device_names == ("NVIDIA H200",)
    assert spec.source.startswith("https://")


def test_the_six_keys_with_their_datasheet_bandwidth():
    table = hardware.specs_table()
    assert set(KEYS) <= set(table["gpu"])
    for key, gbps in DATASHEET_GBPS.items():
        assert hardware.gpu_spec(key).bandwidth_gbps == gbps


def test_every_registry_row_has_a_source_and_a_positive_bandwidth():
    table = hardware.specs_table()
    assert table["gpu"].is_unique
    for _, row in table.iterrows():
        assert isinstance(row["source"], str) and row["source"].strip(), row["gpu"]
        assert float(row["bandwidth_gbps"]) > 0, row["gpu"]
        assert isinstance(row["device_names"], str) and row["device_names"].strip(), row["gpu"]


def test_unknown_gpu_key_lists_known_keys_and_how_to_add_one():
    with pytest.raises(hardware.UnknownGPUError) as err:
        hardware.gpu_spec("rtx-9090")
    msg = str(err.value)
    assert "'rtx-9090'" in msg
    for key in KEYS:
        assert key in msg
    assert "gpus.csv" in msg and "Add a row" in msg
    assert isinstance(err.value, KeyError)  # and str() is readable, not KeyError's quoted repr
    assert not msg.startswith('"')


def test_gpu_key_for_device_name():
    assert hardware.gpu_key_for_device_name("NVIDIA H200") == "h200"
    assert hardware.gpu_key_for_device_name("NVIDIA A100-SXM4-80GB") == "a100-80gb"
    assert hardware.gpu_key_for_device_name("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert hardware.gpu_key_for_device_name("NVIDIA L4") == "l4"
    with pytest.raises(hardware.UnknownGPUError) as err:
        hardware.gpu_key_for_device_name("NVIDIA H200 NVL")  # exact names only, never a guess
    msg = str(err.value)
    assert "'NVIDIA H200 NVL'" in msg and "h200" in msg and "gpus.csv" in msg and "device_names" in msg


def test_private_data_dir_registry(data_dir):
    spec = hardware.gpu_spec("cpu-test", data_dir)
    assert spec.bandwidth_gbps == 10 and spec.name == "CPU (tests only)"
    assert "cpu-test" in str(hardware.specs_table(data_dir)["gpu"].tolist())
    with pytest.raises(hardware.UnknownGPUError):
        hardware.gpu_spec("cpu-test")  # the fixture key is never in the shipped registry


def test_empty_device_names_give_an_empty_tuple(data_dir):
    assert hardware.gpu_spec("cpu-test", data_dir).device_names == ()


def test_copy_bandwidth_on_cpu():
    size = 8 << 20  # 8 MiB = 4,194,304 bf16 elements
    rows = hardware.copy_bandwidth(device="cpu", size_bytes=size, reps=3, warmup=1)
    assert len(rows) == 3
    assert [r["rep"] for r in rows] == [0, 1, 2]
    for r in rows:
        assert r["bytes_moved"] == 2 * size == 16_777_216  # read + write of size//2 two-byte elements
        assert r["method"] == "d2d_copy" and r["status"] == "ok"
        assert r["time_ms"] > 0
        assert r["bandwidth_gbps"] > 0
        assert r["bandwidth_gbps"] == pytest.approx(16_777_216 / (r["time_ms"] / 1e3) / 1e9)


def test_environment_keys():
    env = hardware.environment()
    for key in ("torch", "transformers", "host_cpu", "host_cores", "git_commit", "optional_packages", "python",
                "device_name"):
        assert key in env
    import torch
    import transformers

    assert env["torch"] == torch.__version__
    assert env["transformers"] == transformers.__version__
    assert env["host_cores"] >= 1
    assert set(env["optional_packages"]) == set(hardware.OPTIONAL_PACKAGES)


def test_gpu_state_on_a_cpu_machine_still_has_time_and_load():
    state = hardware.gpu_state()
    assert "time" in state and len(state["load_average"]) == 3


def test_git_commit_given_wins(monkeypatch):
    """A copied working tree may carry an older .git: the commit the copier names is the one recorded."""
    monkeypatch.setenv("DECODEGAP_GIT_COMMIT", "98e6285" + "0" * 33)
    assert hardware.git_commit() == "98e6285" + "0" * 33
    monkeypatch.delenv("DECODEGAP_GIT_COMMIT")
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?|unknown .*", hardware.git_commit())


def test_kernel_builds_are_read_from_the_extension_folder(tmp_path, monkeypatch):
    """env.json's kernel_builds: every <name>_build.json of DECODEGAP_EXT_DIR, and a broken one named as such."""
    import json

    (tmp_path / "marlin_build.json").write_text(json.dumps({"kernel": "marlin_cuda", "build_s": 39}))
    (tmp_path / "broken_build.json").write_text("{not json")
    monkeypatch.setenv(hardware.EXT_DIR_ENV, str(tmp_path))
    builds = hardware.kernel_builds()
    assert builds["marlin"] == {"kernel": "marlin_cuda", "build_s": 39}
    assert builds["broken"].startswith("unreadable")
    monkeypatch.setenv(hardware.EXT_DIR_ENV, str(tmp_path / "absent"))
    assert hardware.kernel_builds() == {}


def _git(repo, *args):
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, check=True).stdout


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A one-commit git checkout of its own (the repository's may be clean or dirty), without the tests' allowance."""
    monkeypatch.delenv("DECODEGAP_ALLOW_DIRTY", raising=False)
    monkeypatch.delenv("DECODEGAP_GIT_COMMIT", raising=False)
    monkeypatch.delenv("DECODEGAP_SOURCE_SHA256", raising=False)
    monkeypatch.delenv("DECODEGAP_GIT_DIFF_SHA256", raising=False)
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-q", "-m", "one")
    return repo


def test_a_clean_checkout_records_its_commit_and_no_diff(checkout):
    head = _git(checkout, "rev-parse", "HEAD").decode().strip()
    assert hardware.git_provenance(checkout) == {"git_commit": head, "git_commit_source": "git"}


def test_a_dirty_checkout_is_refused_without_the_allowance(checkout):
    (checkout / "a.py").write_text("x = 2\n")
    with pytest.raises(hardware.DirtyTreeError, match=r"uncommitted changes \(a\.py\).*DECODEGAP_ALLOW_DIRTY=1"):
        hardware.git_provenance(checkout)


def test_a_dirty_checkout_with_the_allowance_records_the_diff_hash(checkout, monkeypatch):
    import hashlib

    head = _git(checkout, "rev-parse", "HEAD").decode().strip()
    monkeypatch.setenv("DECODEGAP_ALLOW_DIRTY", "1")
    (checkout / "a.py").write_text("x = 2\n")
    first = hardware.git_provenance(checkout)
    expected = hashlib.sha256(_git(checkout, "diff", "HEAD", "--binary")).hexdigest()
    assert first == {"git_commit": head + "+dirty", "git_commit_source": "git", "git_diff_sha256": expected}
    (checkout / "a.py").write_text("x = 3\n")
    assert hardware.git_provenance(checkout)["git_diff_sha256"] not in (expected, None)
    (checkout / "new.py").write_text("untracked\n")  # untracked files are not the measured code's diff
    (checkout / "a.py").write_text("x = 1\n")
    assert hardware.git_provenance(checkout) == {"git_commit": head, "git_commit_source": "git"}


def test_a_copied_tree_is_held_to_the_digest_given_with_its_commit(checkout, monkeypatch, tmp_path):
    """A tree copied to the GPU machine has no .git (or an old one) and names the commit in DECODEGAP_GIT_COMMIT; the
    digest of that commit's source comes with it (DECODEGAP_SOURCE_SHA256) and the copy must match it."""
    commit = "98e6285" + "0" * 33
    src = tmp_path / "src"
    src.mkdir()
    (src / "m.py").write_text("x = 1\n")
    digest = hardware.source_digest(src)
    monkeypatch.setenv("DECODEGAP_GIT_COMMIT", commit)
    with pytest.raises(hardware.DirtyTreeError, match="DECODEGAP_SOURCE_SHA256 is not"):
        hardware.git_provenance(checkout, source=src)  # a given commit without a digest to hold it to
    monkeypatch.setenv("DECODEGAP_SOURCE_SHA256", digest)
    (checkout / "a.py").write_text("x = 2\n")  # the copy's own (stale) .git says nothing
    assert hardware.git_provenance(checkout, source=src) == {"git_commit": commit, "git_commit_source": "given"}
    bare = tmp_path / "copy"
    bare.mkdir()
    assert hardware.git_provenance(bare, source=src)["git_commit"] == commit
    (src / "m.py").write_text("x = 2\n")  # an edited copy is not the commit named
    with pytest.raises(hardware.DirtyTreeError, match="source digest .* is not the"):
        hardware.git_provenance(bare, source=src)
    monkeypatch.setenv("DECODEGAP_ALLOW_DIRTY", "1")
    got = hardware.git_provenance(bare, source=src)
    assert got["git_commit"] == commit + "+dirty" and got["source_sha256_given"] == digest
    assert got["git_diff_sha256"].startswith("unknown")
    monkeypatch.setenv("DECODEGAP_GIT_DIFF_SHA256", "ab" * 32)
    assert hardware.git_provenance(bare, source=src)["git_diff_sha256"] == "ab" * 32
    monkeypatch.delenv("DECODEGAP_GIT_COMMIT")
    assert hardware.git_provenance(bare)["git_commit"].startswith("unknown")


def test_every_run_records_its_source_digest_and_provenance(monkeypatch):
    from decodegap.harness import runs

    monkeypatch.setenv("DECODEGAP_GIT_COMMIT", "98e6285" + "0" * 33)
    monkeypatch.setenv("DECODEGAP_SOURCE_SHA256", hardware.source_digest())
    env = hardware.environment()
    assert env["source_sha256"] == hardware.source_digest() and env["git_commit"] == "98e6285" + "0" * 33
    assert set(env) <= runs.ENV_FIELDS


def test_a_refused_run_writes_nothing_and_the_cli_says_why(checkout, monkeypatch, data_dir, capsys):
    from decodegap import cli, paths

    (checkout / "a.py").write_text("x = 2\n")
    monkeypatch.setattr(paths, "REPO", checkout)
    rc = cli.main(["--data-dir", str(data_dir), "bandwidth", "--gpu", "cpu-test", "--device", "cpu",
                   "--size-mib", "1", "--reps", "1"])
    assert rc == 2
    assert "uncommitted changes" in capsys.readouterr().err
    assert not (data_dir / "raw" / "cpu-test" / "bandwidth.csv").exists()
    assert not (data_dir / "raw" / "cpu-test" / "env.json").exists()


def test_a_package_copied_without_metadata_reports_its_version_file(tmp_path, monkeypatch):
    """The flash-attn package beside its trimmed build has no dist-info: its __init__'s __version__ is read, not
    imported (its import would load the extension)."""
    pkg = tmp_path / "flash_attn"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('__version__ = "2.8.3"\nraise ImportError("never imported")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    assert hardware._version("flash-attn") == "2.8.3 (no package metadata: copied, not installed)"
    assert hardware._version("no-such-package-here") is None


def test_source_digest_by_hand(tmp_path):
    """The digest is sha256 over (relative path, NUL, bytes, NUL) of every .py file in path order, caches left out;
    a changed byte or a new file changes it."""
    import hashlib

    (tmp_path / "b").mkdir()
    (tmp_path / "a.py").write_bytes(b"x = 1\n")
    (tmp_path / "b" / "c.py").write_bytes(b"y = 2\n")
    (tmp_path / "notes.txt").write_text("not source")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.py").write_bytes(b"stale")
    expected = hashlib.sha256(b"a.py\0x = 1\n\0b/c.py\0y = 2\n\0").hexdigest()
    assert hardware.source_digest(tmp_path) == expected
    (tmp_path / "a.py").write_bytes(b"x = 2\n")
    assert hardware.source_digest(tmp_path) != expected
    assert len(hardware.source_digest()) == 64  # the package itself
