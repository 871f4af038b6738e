"""A peer in the same run: gpt-fast's compiled decode (its model.py, the package's random weights, bf16 and int4)
timed beside the package's best levers in one process, on one model and context (bench/peer_gpt_fast.py; rows in
data/raw/<gpu>/peers.csv, records.PEERS).

The peer's source is never part of this repository: bench/fetch_gpt_fast.sh brings gpt-fast at GPT_FAST_COMMIT into
`.peers/gpt-fast` (git-ignored), and this module imports its model.py and quantize.py from there (`load_gpt_fast`).

Both systems decode the same function: the HF model is built with the package's random weights
(models.build_model), and its weights are laid out as gpt-fast's Transformer holds them (`gpt_fast_state`: q, k and
v in one wqkv, gate/up/down as w1/w3/w2, and the rows of q and k reordered within each head from HF's rotary layout,
which rotates the pairs (i, i + head_dim/2), to gpt-fast's, which rotates the pairs (2i, 2i + 1): the dot products
q.k are unchanged, so the attention is the same). Before any step is timed each cell is checked (records.PEER_CHECKS):
gpt-fast bf16 and the package's levers against the HF eager step on the same prompt, teacher-forced
(compare.VERIFY_TOL); each int4 model against the bf16 model it was quantised from, layer by layer
(harness.quant_checks' metric and tolerance, the null measured in this run on the same weights and ctx), each int4
output layer on its own (gpt-fast's int4 quantises its output layer; the package's lever where its path quantises
the LM head: quant_checks' head check, `head_references`), and gpt-fast's compiled int4 step against its own eager
step.

What is timed for gpt-fast: the loop body of its generate.decode_n_tokens, one step of batch 1 at position ctx and
on, after a prefill of ctx tokens: the forward `model(x, input_pos)` and the next token, compiled as its generate.py
compiles decode_one_token (torch.compile mode="reduce-overhead", fullgraph=True, under its inductor settings
GPT_FAST_INDUCTOR and its decode loop's math-only SDPA), then the position advanced and the token copied, as its
loop does. The next token is the argmax (the package's step): gpt-fast's own decode_one_token samples top-k with a
temperature, a few small kernels more on the logits, not timed here (its generate.py imports its tokenizer, which
needs packages this one does not). int4 is gpt-fast's WeightOnlyInt4 path at group size 128 (tinygemm,
`_weight_int4pack_mm`, every nn.Linear of its model, the output layer included, as its quantize.py does), its codes,
scales and zeros from its own group_quantize_tensor; only the packing call is this torch's (`int4_pack`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import subprocess
import sys
import types
from pathlib import Path

from decodegap import compare, paths, prompts
from decodegap.harness import checks, decode

GPT_FAST_COMMIT = "32971d3129541c5bfb4f715abc33d1c5f408d204"
"""The gpt-fast commit this step measures (pytorch-labs/gpt-fast, 2024-09-15, "Fix Llama3 HF checkpoint converter")."""
GPT_FAST_DIR = paths.REPO / ".peers" / "gpt-fast"
"""Where bench/fetch_gpt_fast.sh puts it (git-ignored)."""
GPT_FAST_FILES = {"model.py": "c26579956664bd62ed72f896f51417a781589096",
                  "quantize.py": "fb566421f68f84aeca22c2ab91f5bff53c819c13"}
"""The files of gpt-fast this module imports, with their git blob ids at GPT_FAST_COMMIT (source_commit checks them;
their sha256 go into env.json with the commit)."""
GPT_FAST_GROUP_SIZE = 128
GPT_FAST_INNER_K_TILES = 8  # WeightOnlyInt4QuantHandler's default
GPT_FAST_INDUCTOR = {"coordinate_descent_tuning": True, "triton.unique_kernel_names": True, "fx_graph_cache": True}
"""The inductor settings gpt-fast's generate.py sets at import: applied while its step compiles, after the package's
levers are timed (so that they do not change the package's compiled lever)."""
GPT_FAST_ARM = "compiled_decode"

PEER_LEVERS = {"bf16": ("lean_fused_kv_together_graph", "bf16"),
               "int4": ("lean_fused_all_kv_together_graph", "int4-triton-head")}
"""The package's levers timed beside the peer, per precision: the fastest lever of each kind confirmed at notebook
06's target cell (levers.TARGETS; experiments.closing_the_gap.confirmed_at_target, which tests/test_peers.py checks
them against; a lever the selection sweeps pick there moves them once its confirmation holds; until 2026-12-05 the
test read the selection's pick, figures/06_confirmation.csv): bf16 the fused step with PDL, the products' early
trigger, the next token in one kernel, every norm made in an epilogue left to the next product as a scale and the
attention in blocks of 64 positions (kernels.step.attention_blocks); int4 its twin on the package's int4 GEMV with the LM head quantised too (`int4-triton-head`, kernels.fused_int4). History:
the int4 lever was `lean_attn_compile` on `int4-triton` until the fused int4 step overtook it (2026-12-04), then
lean_fused_early_products_graph on `int4-triton` until run 20261205T142347-17d6dd confirmed
lean_fused_all_norm_scale_graph, and that until runs 20261205T155920-fac1a2 and 20261205T160920-09b2e3 confirmed
lean_fused_all_kv_together_graph (all 2026-12-05); the bf16 lever was lean_fused_early_products_graph until run
20261205T053526-b283dc confirmed lean_fused_next_token_graph, that until run 20261205T143337-c9c069 confirmed
lean_fused_norm_scale_graph, and that until run 20261205T155814-2be9f5 confirmed lean_fused_kv_together_graph (all
2026-12-05). The peer rows measured before a move name the earlier lever: rows
name the arm they timed."""

NULL_PATH = "int4-tinygemm"
"""The path whose format's rounding sets the int4 checks' null (quant_checks.model_tolerance): the float-zero format
of group size 128, which int4-triton (power.FORMAT_OF) and gpt-fast's int4 (tests/test_peers.py) share."""
CHECK_CALLS = 6  # teacher-forced decode calls of a check (checks.verify_arm's default)
SUPPORTED_TYPES = ("llama", "mistral")


class PeerUnavailable(RuntimeError):
    """The peer cannot run here or cannot express the model; the message is the reason (a refusal or an
    `unavailable` row)."""


# ------------------------------------------------------------------------------------------------ the peer's source

def source_commit(folder: Path) -> str:
    """The commit of the gpt-fast source in `folder`: `git rev-parse HEAD` of its checkout, or for a copied folder
    without .git the commit bench/fetch_gpt_fast.sh wrote into its COMMIT file. Raises PeerUnavailable (one line)
    when the folder, a file this module imports, or the commit is missing, or the commit is not GPT_FAST_COMMIT."""
    folder = Path(folder)
    fix = "fetch it with `bash bench/fetch_gpt_fast.sh` (or copy a fetched .peers/gpt-fast here)"
    if not folder.is_dir():
        raise PeerUnavailable(f"no gpt-fast source in {folder}: {fix}")
    missing = [f for f in GPT_FAST_FILES if not (folder / f).is_file()]
    if missing:
        raise PeerUnavailable(f"{folder} lacks {', '.join(missing)}: {fix}")
    commit = None
    if (folder / ".git").exists():
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True)
        commit = out.stdout.strip() if out.returncode == 0 else None
    if commit is None and (folder / "COMMIT").is_file():
        commit = (folder / "COMMIT").read_text().split()[0] if (folder / "COMMIT").read_text().split() else None
    if commit is None:
        raise PeerUnavailable(f"{folder} has neither a git checkout nor a COMMIT file: {fix}")
    if commit != GPT_FAST_COMMIT:
        raise PeerUnavailable(f"{folder} holds gpt-fast {commit[:12]}, not the pinned {GPT_FAST_COMMIT[:12]}: {fix}")
    for name, blob in GPT_FAST_FILES.items():
        data = (folder / name).read_bytes()
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != blob:
            raise PeerUnavailable(f"{folder / name} is not gpt-fast {GPT_FAST_COMMIT[:12]}'s (edited?): {fix}")
    return commit


def provenance(folder: Path) -> dict:
    """What env.json records of the peer: its repository, commit and the sha256 of the files imported."""
    folder = Path(folder)
    return {"gpt-fast": {"repository": "https://github.com/pytorch-labs/gpt-fast", "commit": source_commit(folder),
                         "files_sha256": {f: hashlib.sha256((folder / f).read_bytes()).hexdigest()
                                          for f in GPT_FAST_FILES}}}


def load_gpt_fast(folder: Path, quantize: bool = True):
    """gpt-fast's `model` module (and its `quantize` module, else None) imported from `folder`. quantize.py imports
    its tokenizer module at the top (sentencepiece, tiktoken), which none of the functions used here needs: where it
    does not import, a stand-in module `tokenizer` without those packages takes its place."""
    folder = str(Path(folder).resolve())
    for name in ("model", "quantize"):  # another folder's module of the same name
        mod = sys.modules.get(name)
        if mod is not None and not str(getattr(mod, "__file__", "")).startswith(folder):
            raise PeerUnavailable(f"a module named {name!r} from {getattr(mod, '__file__', '?')} is imported already")
    sys.path.insert(0, folder)
    try:
        model = importlib.import_module("model")
        if not quantize:
            return model, None
        if "tokenizer" not in sys.modules:
            try:
                importlib.import_module("tokenizer")
            except ImportError:
                stub = types.ModuleType("tokenizer")
                stub.get_tokenizer = None  # never called here
                sys.modules["tokenizer"] = stub
        return model, importlib.import_module("quantize")
    finally:
        sys.path.remove(folder)


# -------------------------------------------------------------------------------------------- the model and weights

def model_args(gf_model, config: dict):
    """gpt-fast's ModelArgs of an HF config (the registry's config fields), or PeerUnavailable with the reason where
    its model.py cannot express the model: a head_dim other than hidden/heads (ModelArgs derives it), biases, an
    activation other than SiLU, a sliding window, a rotary scaling other than llama3's."""
    c = config
    heads, hidden = c["num_attention_heads"], c["hidden_size"]
    reasons = []
    if c.get("model_type") not in SUPPORTED_TYPES:
        reasons.append(f"model_type {c.get('model_type')!r} (gpt-fast's model.py is a Llama: {SUPPORTED_TYPES})")
    if c.get("head_dim") not in (None, hidden // heads) or hidden % heads:
        reasons.append(f"head_dim {c.get('head_dim')} != hidden_size / heads (gpt-fast's ModelArgs sets "
                       "head_dim = dim // n_head)")
    if c.get("attention_bias") or c.get("mlp_bias"):
        reasons.append("biased projections (gpt-fast's linears have no bias)")
    if c.get("hidden_act", "silu") != "silu":
        reasons.append(f"activation {c.get('hidden_act')!r} (gpt-fast's FeedForward is SiLU)")
    if c.get("sliding_window") and c.get("use_sliding_window", True):
        reasons.append("a sliding window (gpt-fast attends over the whole cache)")
    scaling = c.get("rope_scaling")
    if scaling and scaling.get("rope_type", scaling.get("type")) != "llama3":
        reasons.append(f"rope_scaling {scaling.get('rope_type', scaling.get('type'))!r} (gpt-fast applies llama3's)")
    if reasons:
        raise PeerUnavailable("gpt-fast cannot express this model: " + "; ".join(reasons))
    rope = None if not scaling else {k: scaling[k] for k in ("factor", "low_freq_factor", "high_freq_factor",
                                                             "original_max_position_embeddings")}
    return gf_model.ModelArgs(
        block_size=c["max_position_embeddings"], vocab_size=c["vocab_size"], n_layer=c["num_hidden_layers"],
        n_head=heads, dim=hidden, intermediate_size=c["intermediate_size"],
        n_local_heads=c.get("num_key_value_heads", heads), rope_base=float(c.get("rope_theta", 10000.0)),
        norm_eps=float(c.get("rms_norm_eps", 1e-5)), rope_scaling=rope)


def preset_differs(gf_model, args, key: str) -> list[str]:
    """The ModelArgs fields where `args` differs from gpt-fast's own preset of `key` (its transformer_configs);
    [] when they agree or gpt-fast has no preset of that name."""
    if key not in gf_model.transformer_configs:
        return []
    preset = gf_model.ModelArgs.from_name(key)
    return [f for f in vars(preset) if getattr(preset, f) != getattr(args, f)]


def rotary_order(head_dim: int):
    """Row order of one head's q (or k) rows from HF's rotary layout to gpt-fast's: gpt-fast's row 2i + j (j = 0, 1:
    the two halves of pair i) is HF's row j * head_dim/2 + i."""
    import torch

    half = head_dim // 2
    i = torch.arange(head_dim) // 2
    j = torch.arange(head_dim) % 2
    return j * half + i


def to_gpt_fast_rows(weight, heads: int):
    """A q or k projection's weight [heads * head_dim, dim] with each head's rows in gpt-fast's rotary order."""
    n, dim = weight.shape
    head_dim = n // heads
    return weight.reshape(heads, head_dim, dim)[:, rotary_order(head_dim)].reshape(n, dim)


def gpt_fast_state(hf_model) -> dict:
    """The state dict of gpt-fast's Transformer holding the HF Llama's weights (copies; the module docstring). A
    tied LM head is copied into gpt-fast's output layer (the same values; gpt-fast keeps its own weight)."""
    cfg = hf_model.config
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    body = hf_model.model
    out = {"tok_embeddings.weight": body.embed_tokens.weight, "norm.weight": body.norm.weight,
           "output.weight": hf_model.lm_head.weight}
    for i, layer in enumerate(body.layers):
        a, m, p = layer.self_attn, layer.mlp, f"layers.{i}."
        import torch

        out[p + "attention.wqkv.weight"] = torch.cat([to_gpt_fast_rows(a.q_proj.weight, heads),
                                                      to_gpt_fast_rows(a.k_proj.weight, kv_heads), a.v_proj.weight])
        out[p + "attention.wo.weight"] = a.o_proj.weight
        out[p + "feed_forward.w1.weight"] = m.gate_proj.weight
        out[p + "feed_forward.w3.weight"] = m.up_proj.weight
        out[p + "feed_forward.w2.weight"] = m.down_proj.weight
        out[p + "attention_norm.weight"] = layer.input_layernorm.weight
        out[p + "ffn_norm.weight"] = layer.post_attention_layernorm.weight
    return {k: v.detach().clone() for k, v in out.items()}


def build_gpt_fast(gf_model, hf_model, config: dict):
    """gpt-fast's Transformer with the HF model's weights, on its device and in its dtype (eval mode)."""
    import torch

    first = next(hf_model.parameters())
    args = model_args(gf_model, config)
    with torch.device("meta"):
        model = gf_model.Transformer(args)
    model.load_state_dict(gpt_fast_state(hf_model), assign=True, strict=True)
    return model.to(device=first.device, dtype=first.dtype).eval()


def int4_pack(codes, inner_k_tiles: int = GPT_FAST_INNER_K_TILES):
    """gpt-fast's int4 codes [N, K] (int32, 0..15) in the layout tinygemm's `_convert_weight_to_int4pack` gives: its
    quantize.py passes the int32 codes, which torch >= 2.5's op refuses (it takes uint8 [N, K/2], two codes a byte,
    the even k in the high nibble); the packed result is the same layout its WeightOnlyInt4Linear reads."""
    import torch

    as_bytes = (codes[:, ::2] << 4 | codes[:, 1::2]).to(torch.uint8).contiguous()
    return torch.ops.aten._convert_weight_to_int4pack(as_bytes, inner_k_tiles)


def quantise_gpt_fast_(model, gf_quantize, group_size: int = GPT_FAST_GROUP_SIZE) -> int:
    """gpt-fast's int4 weight-only quantisation of `model` in place (CUDA): every nn.Linear's codes, scales and zeros
    from its group_quantize_tensor, the linears replaced by its WeightOnlyInt4Linear (convert_for_runtime's
    replace_linear_int4), as WeightOnlyInt4QuantHandler does (an in_features its kernel does not take padded with zeros
    to a multiple of 1024, as its handler pads; none of the 7-8B models' is), the codes packed by `int4_pack`. Returns
    the layers quantised."""
    import torch

    state = {}
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.Linear):
                weight = mod.weight.to(torch.bfloat16)
                if not gf_quantize._check_linear_int4_k(mod.in_features, group_size, GPT_FAST_INNER_K_TILES):
                    padded = sys.modules["model"].find_multiple(mod.in_features, 1024)  # as its handler pads
                    weight = torch.nn.functional.pad(weight, (0, padded - mod.in_features))
                codes, scales_and_zeros = gf_quantize.group_quantize_tensor(weight, 4, group_size)
                state[name] = (int4_pack(codes), scales_and_zeros)
    with torch.device("meta"):  # its layers' buffers, every one of them assigned below
        gf_quantize.replace_linear_int4(model, group_size, GPT_FAST_INNER_K_TILES, True)
    for name, (packed, sz) in state.items():
        layer = model.get_submodule(name)
        layer.weight, layer.scales_and_zeros = packed, sz  # buffers of WeightOnlyInt4Linear
    return len(state)


# ------------------------------------------------------------------------------------------------------ the step

def gpt_fast_decode(model, x, input_pos):
    """One step: gpt-fast's forward and the next token (the argmax; the module docstring)."""
    logits = model(x, input_pos)
    return logits, logits[:, -1:].argmax(-1)


class GptFastStep:
    """gpt-fast's decode state for one prompt: caches set up for `cache_len` positions, `ctx` tokens prefilled
    (its prefill: one eager forward), then `step()` decodes one token at the next position as its decode loop does
    and returns the logits [1, 1, V]. `compiled`: the step compiled as its generate.py compiles decode_one_token.
    `feedback=False` feeds prompts.teacher_token every step (a check)."""

    def __init__(self, model, ctx: int, cache_len: int, seed: int = 0, compiled=None, feedback: bool = True):
        import torch

        device = next(model.parameters()).device
        self.model, self.feedback, self.math = model, feedback, device.type == "cuda"

        with torch.device(device):
            model.setup_caches(max_batch_size=1, max_seq_length=cache_len)
        self.fn = compiled or gpt_fast_decode
        ids = prompts.batch_prompt_ids(model.config.vocab_size, ctx, device, seed, 1)
        with torch.no_grad():
            logits = model(ids, torch.arange(ctx, device=device))
        self.tok = logits[:, -1:].argmax(-1).clone()
        if not feedback:
            self.tok.fill_(prompts.teacher_token(model.config.vocab_size, seed))
        self.pos = torch.tensor([ctx], device=device, dtype=torch.int)

    def step(self):
        if self.math:  # its decode loop's SDPA: math only, which inductor generates code for (not its prefill's)
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.MATH):
                logits, nxt = self.fn(self.model, self.tok, self.pos)
        else:
            logits, nxt = self.fn(self.model, self.tok, self.pos)
        self.pos += 1
        if self.feedback:
            self.tok = nxt.clone()
        return logits


@contextlib.contextmanager
def gpt_fast_settings():
    """gpt-fast's inductor settings (GPT_FAST_INDUCTOR), without autograd (its generate is under no_grad)."""
    import torch

    with torch._inductor.config.patch(GPT_FAST_INDUCTOR), torch.no_grad():
        yield


def compile_gpt_fast():
    """gpt-fast's decode step compiled as its generate.py compiles decode_one_token."""
    import torch

    return torch.compile(gpt_fast_decode, mode="reduce-overhead", fullgraph=True)


def gpt_fast_logits(model, ctx: int, compiled=None, calls: int = CHECK_CALLS, seed: int = 0,
                    cache_len: int | None = None) -> list:
    """The logits of `calls` teacher-forced gpt-fast steps after the prefill (each fed prompts.teacher_token), as
    checks.teacher_forced_logits gives the HF eager step's: what the vs_hf_eager check compares."""
    with gpt_fast_settings():
        state = GptFastStep(model, ctx, max(cache_len or 0, ctx + calls), seed, compiled, feedback=False)
        return [state.step().detach().float().clone() for _ in range(calls)]


def hf_reference(hf_model, ctx: int, seed: int = 0, calls: int = CHECK_CALLS) -> list:
    """The HF eager step's teacher-forced logits (checks.teacher_forced_logits of the eager arm, SDPA's default)."""
    with checks.sdpa_reference(hf_model):
        return checks.teacher_forced_logits(hf_model, "eager", ctx, calls=calls, seed=seed)


def time_gpt_fast(model, ctx: int, warmup: int, steps: int, seed: int = 0, compiled=None,
                  cache_len: int | None = None) -> decode.ArmTiming:
    """gpt-fast's compiled step timed as the package times an arm: prefill ctx tokens, `warmup` wall-clock calls
    (at least decode.COMPILE_MIN_WARMUP: the first compiles), then `steps` calls each timed with CUDA events
    (timing.event_times_ms; perf_counter on a CPU), every step kept."""
    from decodegap.timing import event_times_ms

    warmup = max(warmup, decode.COMPILE_MIN_WARMUP)
    cuda = next(model.parameters()).device.type == "cuda"
    cache_len = max(cache_len or 0, ctx + warmup + steps)  # a cache set up longer already is kept (setup_caches)
    result = decode.ArmTiming(arm=GPT_FAST_ARM, ctx=ctx, max_cache_len=cache_len)
    with gpt_fast_settings():
        state = GptFastStep(model, ctx, cache_len, seed, compiled or compile_gpt_fast())
        result.warmup_ms = decode.wall_calls(state.step, warmup, cuda)
        result.step_ms = event_times_ms(state.step, steps, cuda)
    return result


# ------------------------------------------------------------------------------------- the int4 check (layer by layer)

def record_blocks(model, ctx: int, seed: int = 0, cache_len: int | None = None) -> list[list[tuple]]:
    """Per gpt-fast block, per forward call of gpt_fast_logits (eager: prefill, then the teacher-forced steps): its
    (input, output) hidden states (quant_checks.record_io, as record_layers keeps the HF layers')."""
    from decodegap.harness import quant_checks

    return quant_checks.record_io(model.layers, lambda: gpt_fast_logits(model, ctx, seed=seed, cache_len=cache_len))


def forced_block_error(model, ctx: int, reference: list[list[tuple]], seed: int = 0,
                       cache_len: int | None = None) -> float:
    """quant_checks.forced_error for gpt-fast's blocks: each block fed the reference's input, its output against the
    reference's, relative to what the reference block adds; the worst, NaN if any is NaN."""
    from decodegap.harness import quant_checks

    return quant_checks.forced_error(model.layers, lambda: gpt_fast_logits(model, ctx, seed=seed, cache_len=cache_len),
                                     reference, "gpt-fast")


def record_output(model, ctx: int, seed: int = 0, cache_len: int | None = None) -> list[list[tuple]]:
    """gpt-fast's output layer's (input, logits) per forward call of gpt_fast_logits (eager), as
    quant_checks.record_head keeps the HF model's LM head's."""
    from decodegap.harness import quant_checks

    return quant_checks.record_io([model.output], lambda: gpt_fast_logits(model, ctx, seed=seed, cache_len=cache_len))


def forced_output_error(model, ctx: int, reference: list[list[tuple]], seed: int = 0,
                        cache_len: int | None = None) -> float:
    """quant_checks.forced_head_error's metric for gpt-fast's output layer: fed the reference's final hidden states,
    its logits against the reference's, relative to their largest value; NaN if any is NaN."""
    from decodegap.harness import quant_checks

    return quant_checks.forced_error([model.output], lambda: gpt_fast_logits(model, ctx, seed=seed,
                                                                             cache_len=cache_len),
                                     reference, "gpt-fast's output layer", relative_to_added=False)


def head_references(hf, gf, path_key: str, ctx: int, seed: int = 0, cache_len: int | None = None) -> dict:
    """What the int4 cells' output-layer checks (vs_bf16_head) read, recorded on the bf16 models before either is
    quantised: `hf` the HF model's LM head's (input, logits) (quant_checks.record_head) where the package's path
    `path_key` quantises the head (accounting.HEAD_QUANTISED), else None; `gf` gpt-fast's output layer's (None
    without gpt-fast); `tol` and `null` the head check's, from the float-zero format's rounding (NULL_PATH, which
    gpt-fast's int4 shares) on the HF model's head (quant_checks.head_tolerance: same weights, ctx). With neither
    side to check (no gpt-fast, a path with a bf16 head) nothing is recorded and `tol` and `null` are NaN."""
    from decodegap import accounting
    from decodegap.harness import quant_checks

    if gf is None and path_key not in accounting.HEAD_QUANTISED:
        return dict(hf=None, gf=None, tol=float("nan"), null=float("nan"))
    reference = quant_checks.record_head(hf, ctx, seed=seed)
    tol, null, _ = quant_checks.head_tolerance(hf, NULL_PATH, ctx, reference, seed=seed)
    return dict(hf=reference if path_key in accounting.HEAD_QUANTISED else None,
                gf=record_output(gf, ctx, seed=seed, cache_len=cache_len) if gf is not None else None,
                tol=tol, null=null)


def head_reason(null: float, ctx: int, what: str) -> str:
    """The reason text of a vs_bf16_head row."""
    return (f"{what}, fed the bf16 model's final hidden states; null {null:.4f} (the float-zero format's rounding, "
            f"{NULL_PATH}'s, on the HF model's head, ctx {ctx}); tol MODEL_K_PASS x null")


# ------------------------------------------------------------------------------------------------------------ rows

def passes(err: float, tol: float) -> bool:
    return err == err and err <= tol


def check_row(base: dict, system: str, arm: str, quant: str, check: str, err: float, tol: float, reason: str) -> dict:
    return dict(base, system=system, arm=arm, quant=quant, check=check, step=None, step_ms=None, max_rel_err=err,
                tol=tol, status="ok" if passes(err, tol) else "error", reason=reason)


def status_row(base: dict, system: str, arm: str, quant: str, status: str, reason: str) -> dict:
    return dict(base, system=system, arm=arm, quant=quant, check="-", step=None, step_ms=None, max_rel_err=None,
                tol=None, status=status, reason=reason)


def timing_rows(base: dict, system: str, quant: str, timing: decode.ArmTiming, reason: str = "") -> list[dict]:
    """The warm-up rows (steps -warmup..-1, status warmup) and the timed steps (0.., ok) of one cell."""
    common = dict(base, system=system, arm=timing.arm, quant=quant, check="-", max_rel_err=None, tol=None)
    n = len(timing.warmup_ms)
    return ([dict(common, step=i - n, step_ms=t, status="warmup", reason=reason)
             for i, t in enumerate(timing.warmup_ms)]
            + [dict(common, step=i, step_ms=t, status="ok", reason=reason) for i, t in enumerate(timing.step_ms)])


def check_frame(frame) -> None:
    """What the schema cannot say: every step row (check `-`, status ok or warmup) has its step and step_ms, and
    every check row names a known check (records.PEER_CHECKS). Raises ValueError naming the first bad row."""
    from decodegap.records import PEER_CHECKS

    for i, row in frame.reset_index(drop=True).iterrows():
        if row["check"] == "-":
            if row["status"] in ("ok", "warmup") and (row["step"] != row["step"] or row["step_ms"] != row["step_ms"]
                                                      or row["step"] is None or row["step_ms"] is None):
                raise ValueError(f"peers row {i}: a {row['status']} step row without its step and step_ms")
        elif row["check"] not in PEER_CHECKS:
            raise ValueError(f"peers row {i}: unknown check {row['check']!r}; known: {sorted(PEER_CHECKS)}")


# ------------------------------------------------------------------------------------------------------------ a run

def measured(gpu: str, model_key: str, ctx: int, data=None) -> bool:
    """Whether data/raw/<gpu>/peers.csv holds timed steps of `model_key` at `ctx` (the step skips it then)."""
    from decodegap import records

    path = paths.raw_dir(gpu, data) / "peers.csv"
    if not path.exists():
        return False
    rows = records.read_csv(path, records.PEERS)
    return bool(((rows["model"] == model_key) & (rows["ctx"] == ctx) & (rows["status"] == "ok")
                 & (rows["check"] == "-")).any())


def refusal(model_key: str, gpu: str | None, device: str, data=None, folder: Path = GPT_FAST_DIR):
    """(spec, gpu key, the peer's provenance) of a run, or the one-line reason it cannot start, raised before
    anything is written: PeerUnavailable (no source, another commit), models.UnknownModelError (an unknown model
    key), keys.InputError (an unknown GPU key, no CUDA device, a GPU the key does not name)."""
    from decodegap.harness import keys, models

    prov = provenance(folder)
    spec = models.load_spec(model_key, data)
    gpu = keys.gpu_to_measure(gpu, device, data)
    return spec, gpu, prov


def measure(model_key: str, ctx: int, gpu: str | None = None, data=None, folder: Path = GPT_FAST_DIR,
            device: str = "cuda", warmup: int = 5, steps: int = 30, seed: int = 0, quants=("bf16", "int4"),
            say=print) -> str:
    """One run: gpt-fast's compiled decode and the package's levers (PEER_LEVERS) on `model_key` at `ctx`, each cell
    checked before it is timed (the module docstring), rows appended to data/raw/<gpu>/peers.csv cell by cell
    (records.append_rows), the run's env.json entry recording the peer's commit (`peer_source`). Refuses (`refusal`)
    before anything is written. A model gpt-fast cannot express gets its gpt-fast cells `unavailable` with the
    reason; the package's levers are timed all the same. Returns the run id.

    The order, in one process: both models built (gpt-fast's from the HF model's weights); the HF eager reference
    logits, and for int4 the bf16 layers' inputs and outputs of both models and the null of the int4 format's
    rounding on the HF model; the package's bf16 lever, then its int4 lever (the HF model quantised in place); then
    gpt-fast bf16 and int4 (quantised in place), compiled under its inductor settings, so that those settings never
    reach the package's compiled lever."""
    import torch

    from decodegap import records
    from decodegap.harness import models, quant_checks, runs
    from decodegap.quant import paths as quant

    spec, gpu, prov = refusal(model_key, gpu, device, data, folder)
    gf_model, gf_quantize = load_gpt_fast(folder)
    try:
        args = model_args(gf_model, spec.config)
        differ = preset_differs(gf_model, args, model_key)
        peer_reason = None if not differ else (f"gpt-fast's preset {model_key!r} differs from the model's config in "
                                               f"{differ}: not the same model")
    except PeerUnavailable as exc:
        peer_reason = str(exc)
    cuda = str(device).startswith("cuda")
    out = paths.raw_dir(gpu, data) / "peers.csv"
    warm = max(warmup, decode.COMPILE_MIN_WARMUP)
    cache_len = ctx + max(warm + steps, CHECK_CALLS)

    with runs.recorded(gpu, data, "peers", ["peers"], device=device, peer_source=prov) as run_id:
        base = dict(run_id=run_id, session=1, gpu=gpu, model=model_key, ctx=ctx)

        def write(rows):
            records.append_rows(out, records.PEERS, rows)
            for row in rows:
                if row["check"] != "-" or row["status"] not in ("ok", "warmup"):
                    say(f"{row['system']} {row['arm']} {row['quant']} {row['check']}: {row['status']} "
                        f"{row['max_rel_err'] if row['max_rel_err'] is not None else ''} {row['reason']}".rstrip())
            timed = [r["step_ms"] for r in rows if r["status"] == "ok" and r["check"] == "-"]
            if timed:
                say(f"{rows[0]['system']} {rows[0]['arm']} {rows[0]['quant']}: median "
                    f"{sorted(timed)[len(timed) // 2]:.3f} ms over {len(timed)} steps")

        hf = models.build_model(spec, device=device, seed=seed)
        gf = build_gpt_fast(gf_model, hf, spec.config) if peer_reason is None else None
        tied = bool(spec.config.get("tie_word_embeddings"))
        ref = hf_reference(hf, ctx, seed)
        lever4 = PEER_LEVERS["int4"]
        int4_reason = package4_reason = None  # why no int4 cell can run here; why the package's cannot
        if "int4" in quants:
            int4_reason = (None if cuda else "tinygemm's int4 kernel and the package's int4 GEMV need a CUDA device")
            int4_reason = int4_reason or quant.unavailable_reason(NULL_PATH, device)
            package4_reason = int4_reason or quant.unavailable_reason(lever4[1], device)
        hf_io = gf_io = heads = None
        tol4 = null4 = float("nan")
        if "int4" in quants and int4_reason is None:
            hf_io = quant_checks.record_layers(hf, ctx, seed=seed)
            tol4, null4, _ = quant_checks.model_tolerance(hf, NULL_PATH, ctx, hf_io, seed=seed)
            heads = head_references(hf, gf, lever4[1], ctx, seed, cache_len)
            if gf is not None:
                gf_io = record_blocks(gf, ctx, seed=seed, cache_len=cache_len)

        hf_io = _package_levers(hf, base, ctx, warmup, steps, seed, quants, package4_reason, hf_io, tol4, null4,
                                write, heads)
        decode.release_compiled()
        del hf
        if cuda:
            torch.cuda.empty_cache()
        _gpt_fast_cells(gf, gf_quantize, base, ctx, warmup, steps, seed, quants, cache_len, cuda, tied, ref,
                        peer_reason, int4_reason, gf_io, tol4, null4, write, heads)
    return run_id


def _package_levers(hf, base, ctx, warmup, steps, seed, quants, package4_reason, hf_io, tol4, null4, write,
                    heads=None):
    """measure's first half: the package's bf16 lever, then its int4 lever (the HF model quantised in place,
    checked layer by layer against its bf16 layers `hf_io` within `tol4`, and its LM head against the bf16 head where
    its path quantises it, `heads`: head_references); returns what is left of hf_io (None)."""
    from decodegap.harness import quant_checks
    from decodegap.quant import paths as quant

    lever4 = PEER_LEVERS["int4"]
    if "bf16" in quants:
        write(package_cell(hf, base, *PEER_LEVERS["bf16"], ctx, warmup, steps, seed))
    if "int4" in quants:
        if package4_reason is not None:
            write([status_row(base, "decodegap", *lever4, "unavailable", package4_reason)])
        else:
            quant.quantise_model_(hf, lever4[1])
            err = quant_checks.forced_layer_error(hf, ctx, hf_io, seed=seed)
            hf_io = None
            layers = check_row(base, "decodegap", *lever4, "vs_bf16_layers", err, tol4,
                               f"null {null4:.4f} (the float-zero format's rounding, {NULL_PATH}'s, on these "
                               f"weights, ctx {ctx}); "
                               "tol MODEL_K_PASS x null")
            first = [layers]
            if heads is not None and heads["hf"] is not None:
                err = quant_checks.forced_head_error(hf, ctx, heads["hf"], seed=seed)
                first.append(check_row(base, "decodegap", *lever4, "vs_bf16_head", err, heads["tol"],
                                       head_reason(heads["null"], ctx, "its int4 LM head against the bf16 head")))
            write(package_cell(hf, base, *lever4, ctx, warmup, steps, seed, first=first))
    return hf_io


def _gpt_fast_cells(gf, gf_quantize, base, ctx, warmup, steps, seed, quants, cache_len, cuda, tied, ref, peer_reason,
                    int4_reason, gf_io, tol4, null4, write, heads=None):
    """measure's second half: gpt-fast bf16 (checked against HF eager `ref`), then int4 (quantised in place, checked
    layer by layer against its bf16 blocks `gf_io` within `tol4`, its output layer against its bf16 one, `heads`:
    head_references, and its compiled step against its eager one)."""
    import torch

    note = ("the step: its forward and the argmax, compiled as its decode_one_token (reduce-overhead, fullgraph), "
            "its inductor settings, math SDPA" + ("; tied embeddings copied into its output layer" if tied else ""))
    if "bf16" in quants:
        if gf is None:
            write([status_row(base, "gpt-fast", GPT_FAST_ARM, "bf16", "unavailable", peer_reason)])
        else:
            write(gpt_fast_cell(gf, base, "bf16", ctx, warmup, steps, seed, cache_len, cuda, note, ref=ref))
    if "int4" in quants:
        reason = peer_reason or int4_reason
        if reason is not None:
            write([status_row(base, "gpt-fast", GPT_FAST_ARM, "int4-gpt-fast", "unavailable", reason)])
        else:
            torch._dynamo.reset()  # the bf16 step's compiled graphs and CUDA graphs go; the int4 model compiles anew
            n = quantise_gpt_fast_(gf, gf_quantize)
            err = forced_block_error(gf, ctx, gf_io, seed=seed, cache_len=cache_len)
            gf_io = None
            own = gpt_fast_logits(gf, ctx, seed=seed, cache_len=cache_len)  # eager: the compiled step's reference
            layers = check_row(base, "gpt-fast", GPT_FAST_ARM, "int4-gpt-fast", "vs_bf16_layers", err, tol4,
                               f"its {n} linears (the output layer's checked on its own, vs_bf16_head) at group "
                               f"size {GPT_FAST_GROUP_SIZE}, against gpt-fast bf16; tol from the null {null4:.4f} of "
                               "the same float-zero format on the HF model's layers (same weights, ctx)")
            first = [layers]
            if heads is not None and heads["gf"] is not None:
                err = forced_output_error(gf, ctx, heads["gf"], seed=seed, cache_len=cache_len)
                first.append(check_row(base, "gpt-fast", GPT_FAST_ARM, "int4-gpt-fast", "vs_bf16_head", err,
                                       heads["tol"], head_reason(heads["null"], ctx,
                                                                 "its int4 output layer against its bf16 one")))
            write(gpt_fast_cell(gf, base, "int4-gpt-fast", ctx, warmup, steps, seed, cache_len, cuda,
                                note + "; int4: its group_quantize_tensor and WeightOnlyInt4Linear (tinygemm)",
                                ref=own, first=first, check="vs_own_eager"))


def package_cell(hf, base: dict, arm: str, quant: str, ctx: int, warmup: int, steps: int, seed: int,
                 first: list | None = None) -> list[dict]:
    """The rows of the package's lever `arm` on `hf` (quantised already for an int4 `quant`): `first` (checks made
    before), its vs_hf_eager check (checks.verify_arm against the same model's eager step), and, every check passed,
    its timed steps (decode.run_arm); an arm that cannot run here is one `unavailable` row."""
    rows = list(first or [])
    reason = decode.unavailable_reason(arm, hf)
    if reason:
        return [status_row(base, "decodegap", arm, quant, "unavailable", reason)]
    cache_len = decode.max_cache_len(arm, ctx, warmup, steps)
    err = checks.verify_arm(hf, arm, ctx, seed=seed, tol=compare.VERIFY_TOL, cache_len=cache_len,
                            raise_past_tol=False)
    rows.append(check_row(base, "decodegap", arm, quant, "vs_hf_eager", err, compare.VERIFY_TOL,
                          "teacher-forced against the same model's HF eager step (checks.verify_arm)"))
    if all(r["status"] == "ok" for r in rows):
        timing = decode.run_arm(hf, arm, ctx, warmup=warmup, steps=steps, seed=seed, cache_len=cache_len)
        rows += timing_rows(base, "decodegap", quant, timing, f"decode.run_arm, max_cache_len {timing.max_cache_len}")
    return rows


def gpt_fast_cell(gf, base: dict, quant: str, ctx: int, warmup: int, steps: int, seed: int, cache_len: int,
                  cuda: bool, note: str, ref: list | None = None, first: list | None = None,
                  check: str = "vs_hf_eager") -> list[dict]:
    """The rows of gpt-fast's compiled step on `gf`: `first` (checks made before), with `ref` its `check` (the
    reference's teacher-forced logits: HF eager's, or for int4 its own eager step's, vs_own_eager) through the
    compiled step that is then timed, and, every check passed, its timed steps. On a CPU the check runs
    its step eagerly and the timing is `unavailable` (reduce-overhead is CUDA graphs: a CPU would time something
    else)."""
    rows = list(first or [])
    compiled = compile_gpt_fast() if cuda else None
    if ref is not None:
        got = gpt_fast_logits(gf, ctx, compiled, seed=seed, cache_len=cache_len)
        err = compare.logits_error(got, ref)
        against = ("the HF eager step on the same weights and prompt" if check == "vs_hf_eager" else
                   "its own eager step (the model the layer check judged), same prompt")
        rows.append(check_row(base, "gpt-fast", GPT_FAST_ARM, quant, check, err, compare.VERIFY_TOL,
                              "teacher-forced, its " + ("compiled" if cuda else "eager (CPU)") + " step against "
                              + against))
    if not all(r["status"] == "ok" for r in rows):
        return rows
    if not cuda:
        return rows + [status_row(base, "gpt-fast", GPT_FAST_ARM, quant, "unavailable",
                                  "compiled with mode='reduce-overhead' (CUDA graphs); on a CPU it would time "
                                  "something else")]
    timing = time_gpt_fast(gf, ctx, warmup, steps, seed, compiled, cache_len)
    return rows + timing_rows(base, "gpt-fast", quant, timing, f"{note}; max_seq_length {gf.max_seq_length}")
