"""Model registry (data/models/<key>.json) and model building: random bf16 weights on the target
device with no hub access, or a real checkpoint from a local directory."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decodegap import paths

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


class UnknownModelError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return self.args[0]


@dataclass(frozen=True)
class ModelSpec:
    """One registry entry: `config` holds the fields of the published HF config.json."""

    key: str
    name: str
    hf_repo: str | None
    source: str
    tiny: bool
    config: dict[str, Any]

    @property
    def model_type(self) -> str:
        return self.config["model_type"]


def model_keys(data: str | Path | None = None) -> list[str]:
    """Every registered model key (file stems under data/models/)."""
    return sorted(p.stem for p in (paths.data_dir(data) / "models").glob("*.json"))


def load_spec(key: str, data: str | Path | None = None) -> ModelSpec:
    """The registry entry of `key`; an unknown key names the known ones and how to add one."""
    path = paths.data_dir(data) / "models" / f"{key}.json"
    if not path.exists():
        raise UnknownModelError(
            f"unknown model {key!r}. Known: {', '.join(model_keys(data))}. To add one, put its HF "
            f"config.json fields in {path} as {{\"key\", \"name\", \"hf_repo\", \"source\", \"tiny\", \"config\"}}."
        )
    raw = json.loads(path.read_text())
    return ModelSpec(
        key=raw["key"], name=raw["name"], hf_repo=raw.get("hf_repo"), source=raw["source"],
        tiny=bool(raw.get("tiny", False)), config=raw["config"],
    )


def configs(keys, data: str | Path | None = None) -> dict[str, dict]:
    """{key: its HF config} of every model key in `keys`, in key order."""
    return {key: load_spec(key, data).config for key in sorted(set(keys))}


def hf_config(spec: ModelSpec, attn: str = "sdpa"):
    """A transformers config object of the spec's architecture (no network)."""
    from transformers import AutoConfig

    fields = {k: v for k, v in spec.config.items() if k not in ("model_type", "architectures", "transformers_version")}
    cfg = AutoConfig.for_model(spec.model_type, **fields)
    cfg._attn_implementation = attn
    return cfg


def randomise_(model, seed: int = 0, std: float | None = None) -> None:
    """Fill every weight with N(0, std) (std = the config's initializer_range), norms with 1 and biases
    with N(0, std): never empty or zero memory, whose timing can differ from real data."""
    import torch

    std = std if std is not None else float(getattr(model.config, "initializer_range", 0.02))
    first = next(model.parameters())
    gen = torch.Generator(device=first.device).manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name and param.ndim == 1:
                param.fill_(1.0)
            else:
                param.normal_(0.0, std, generator=gen)


def build_model(spec: ModelSpec, device: str = "cuda", dtype: str = "bf16", attn: str = "sdpa",
                checkpoint_dir: str | Path | None = None, seed: int = 0):
    """The HF causal-LM of `spec` on `device` in eval mode.

    With `checkpoint_dir` the real weights are loaded from that local directory (no hub access);
    otherwise the model is built directly on the device with random normal weights (`randomise_`).
    `attn` is HF's attn_implementation (hf_attention.hf_implementation of a backend key): one of decodegap's own
    (hf_attention.IN_MODEL) is registered with transformers first, and the model gets its per-model state.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from decodegap.harness import hf_attention

    if hf_attention.by_hf_name(attn) is not None:
        hf_attention.register()
    torch_dtype = getattr(torch, DTYPES[dtype])
    if checkpoint_dir is not None:
        ckpt = Path(checkpoint_dir)
        if not (ckpt / "config.json").exists():
            raise FileNotFoundError(f"{ckpt} holds no config.json: give the folder of a downloaded HF checkpoint")
        # no device_map: that would need `accelerate`; load, then move
        model = AutoModelForCausalLM.from_pretrained(
            ckpt, dtype=torch_dtype, attn_implementation=attn, local_files_only=True
        ).to(device)
    else:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(hf_config(spec, attn), dtype=torch_dtype, attn_implementation=attn)
        randomise_(model, seed=seed)
    hf_attention.prepare(model)
    return model.eval()
