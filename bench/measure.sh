#!/usr/bin/env bash
# Measure this machine's GPU for every notebook, resumably. `bash bench/measure.sh --help` prints the usage below.
usage() {
  cat <<'EOF'
usage: bench/measure.sh GPU OUTDIR [STEP ...]
       bench/measure.sh --help

Measures this machine's GPU for the notebooks, step by step, into data/raw/GPU/ (and data/diagnostics/ rows into
OUTDIR). Every step resumes: the sweeps skip the cells already in the CSVs, so after a cut run the same command
carries on. Notebook 05 (cost) measures nothing.

  GPU     the registry key of this machine's GPU (data/specs/gpus.csv, e.g. h200, h100-sxm; python -m decodegap gpus),
          checked against the device before the first step (python -m decodegap gpus --this-machine --expect GPU);
          `detect`: the key of this machine's GPU, whichever it is (a machine lent as one kind may be another).
  OUTDIR  a folder for what a run leaves: OUTDIR/raw-GPU.tgz (data/raw/GPU packed every 20 s and after each step, so a
          run cut short keeps what it measured; tar xzf it in data/raw), OUTDIR/STEP.log per step, the builds' logs,
          the tuners' and diagnostics' CSVs (copy them to data/diagnostics/ to commit them), and OUTDIR/ext.tgz
          or ext.txz (builds made here, xz where gzip leaves them past 16 MiB; put it in .extpack/ to reuse them
          on another machine).
  STEP    any of these, in the order given (default: all of them, in this order):
    env        the optional packages and quantisation paths this machine has (bench/optional_report.py)
    tests      the GPU tests, python -m pytest -m gpu
    roofline   notebook 01: eager, hf_default and graph, 3 fresh sessions a cell, and the copy-bandwidth probe
    ab         notebook 02: python -m decodegap cuda-graphs-ab (eager, graph, compile; headline cells to 10
               sessions) with the kernels per step, from a cold inductor cache
    attention  notebook 03: flash-attn's trimmed extension built (bench/build_flash_attn.sh, from
               .src/flash-attention), then the per-layer microbenchmark of every backend
    attention_step  notebook 03: the whole step with each backend of STEP_BACKENDS inside the HF model (eager and
               graph, ctx 2048 and 16384, one session), flash-attn built first as above
    quant      notebook 04: Marlin and ExLlamaV2 built (bench/build_marlin.sh, ExLlamaV2's JIT build), the
               quantisation GPU tests, then python -m decodegap quantisation
    quant_power  notebook 04: Marlin and ExLlamaV2 built as above, then bench/quant_power_gpu.py, the quantisation
               checks' power on the whole Llama-3.1-8B at ctx 2048 (every path's null, its kernel and its reference
               build, correct and with each planted fault), then bench/quant_power_cpu.py, the same on one product
               per shape and two full decoder layers on the CPU, about 25 minutes on 2 cores
               (OUTDIR/quant_power_gpu.csv and quant_power_cpu.csv, committed as data/diagnostics/quant_power_*.csv)
    marlin_prefill  notebook 04: Marlin built as above, then bench/marlin_prefill_gpu.py: repeated identical calls
               of Marlin's kernel on the four Llama-3.1-8B shapes, 1 to 16384 rows, and the layer's prefill route
               (OUTDIR/marlin_prefill_gpu.csv, committed as data/diagnostics/marlin_prefill_gpu.csv)
    gemv       notebook 04: bench/int4_gemv.py, the int4 GEMV by itself against tinygemm
               and bf16 per product shape (OUTDIR/int4_gemv.csv, committed as data/diagnostics/int4_gemv.csv)
    fused      notebook 06: the fused Triton step's GPU tests (tests/test_fused.py, tests/test_norm_scale.py), then
               bench/fused_gemv.py, its GEMV against cuBLAS per product shape, configs, split-K
               and PDL (OUTDIR/fused_gemv.csv, committed as data/diagnostics/fused_gemv.csv)
    attention_splits  notebook 06: bench/attention_splits.py, the split-KV attention by itself on the grid's
               attention shapes and contexts over block, split, load order and merge, each checked, with PDL
               (OUTDIR/attention_splits.csv, committed as data/diagnostics/attention_splits.csv)
    int4_configs  notebook 06: bench/fused_int4_gemv.py, the fused int4 product on every config of the int4 GEMV's
               and each launch (none, PDL, early trigger) per product of the fused int4 step (the int4 LM head of
               int4-triton-head among them), beside the per-process
               tuner's choice (OUTDIR/fused_int4_gemv.csv, committed as data/diagnostics/fused_int4_gemv.csv: the
               rows kernels.fused_int4.configs' table is read from; a compile per shape, config and launch; it
               resumes from the committed rows, INT4_CONFIGS_AGAIN=1 times every product again); then
               bench/int4_sass.py, the same products' SASS counted by this Triton (OUTDIR/int4_sass.csv, committed as
               data/diagnostics/int4_sass.csv; it runs on a CPU with Triton too)
    fused_int4  notebook 06: the fused int4 step's GPU tests (tests/test_fused_int4.py: every int4 product on the
               real shapes against its reference), then python -m decodegap measure --quant int4-triton on the
               fused int4 levers of levers.LEVERS (lean_fused_silu_epilogue_graph, lean_fused_graph,
               lean_fused_pdl_norm_graph, lean_fused_early_products_graph, lean_fused_merged_graph) over MODELS and CONTEXTS, INT4_SESSIONS fresh sessions (default
               1), each session writing its format, layer and model checks (against bf16 and the path's own
               eager step) before it times; the ladder reads the rows as the int4 fused levers; then each of those
               levers' steps profiled at llama-3.1-8b ctx 2048 (python -m decodegap kernel-counts, kernels.csv and
               breakdown.csv), the profile notebook 06's int4 target reads
    int4_head  notebook 06: the int4 LM head (path int4-triton-head: the head quantised too, in the int4-triton
               format): its GPU tests (tests/test_int4_head.py, tests/test_next_token.py), then python -m decodegap measure --quant
               int4-triton-head on INT4_HEAD_ARMS (default its eight levers of levers.LEVERS) over MODELS and
               CONTEXTS, INT4_SESSIONS fresh sessions, each session checking the head against the bf16 head with a
               null of its own beside the model check before it times (INT4_AGAIN=1: again); then those levers'
               steps profiled at llama-3.1-8b ctx 2048
    check_sensitivity  notebook 06: bench/check_sensitivity_cpu.py, the decode check against a sign-flipped rotary
               and the sharpened check's faults on a narrow model on the CPU (under a minute;
               OUTDIR/check_sensitivity_cpu.csv, committed as data/diagnostics/check_sensitivity_cpu.csv), then
               bench/sharp_noise_gpu.py, the decode check on the real shapes at sharpening factors 1, 2, 4 and 16,
               correct arms against the faults it must catch (OUTDIR/sharp_noise_gpu.csv, committed as
               data/diagnostics/sharp_noise_gpu.csv: the 06_check_sensitivity table)
    ladder     notebook 06: python -m decodegap closing-the-gap (every lean lever, then the profiled steps; a
               target-cell-only lever over the grid once a confirmation holds it fastest at the target cell)
    confirm    notebook 06: python -m decodegap closing-the-gap --confirm (after ladder: each cell's chosen lever
               beside its runner-up again, 3 fresh sessions, arm order alternated; the targets read only these),
               the cells of MODELS and CONTEXTS (MODELS=llama-3.1-8b CONTEXTS=2048: the targets' cell first;
               CONFIRM_KINDS=bf16 or int4: those cells only; CONFIRM_AGAIN=1: confirmed cells again, in a run of
               their own, after a change to a lever's code)
    megakernel  notebook 06: python -m decodegap closing-the-gap --megakernel (the cell of a public megakernel
               study, levers.MEGAKERNEL_CELL: llama-3.2-1b in bf16, 32 prompt tokens, 127 timed steps, its levers in
               3 fresh sessions each checked, then the fastest and its runner-up again in 3 fresh sessions, then
               those two levers' steps profiled at the cell: kernels.csv and breakdown.csv)
    batch      notebook 07: python -m decodegap where-the-thesis-ends --axis batch --sweep timed (llama-3.1-8b at
               ctx 2048, batch 1 to 64: eager, graph and the lean levers at every batch in 3 sessions, each cell
               checked against eager per sequence; then one profiled eager, lean and lean_attn_graph step per
               batch); SCOPE_ARGS=--again measures every cell again in a new run (resume a cut run without it)
    batch_compile  notebook 07: the batch axis's compiled sweep (--sweep compiled): compile and lean_compile at
               batches 1, 8 and 64 in 1 session, each cell checked (a call of its own: a compile per cell)
    size       notebook 07: python -m decodegap where-the-thesis-ends --axis size --sweep timed (the Qwen2.5
               family, 0.5B to 32B, random bf16 weights, batch 1 at ctx 2048 and 8192: eager, graph and the lean
               levers in 3 sessions; then the profiled steps)
    size_compile  notebook 07: the size axis's compiled sweep: compile at ctx 2048 in 1 session
    peers      notebook 06: gpt-fast (pytorch-labs, pinned commit) fetched into .peers/gpt-fast by
               bench/fetch_gpt_fast.sh (or copied there), then bench/peer_gpt_fast.py: its compiled decode, bf16 and
               int4, beside the package's best levers in one process, llama-3.1-8b at ctx 2048 and 16384, every
               cell checked first (peers.csv; a (model, ctx) measured already is skipped unless PEERS_AGAIN=1)

Options, as environment variables (all optional):
  What is measured
    MODELS             comma-separated model keys (default: the CLI's three, qwen2.5-7b, mistral-7b-v0.3 and
                       llama-3.1-8b)
    CONTEXTS           comma-separated context lengths in tokens (default: the CLI's 2048, 4096, 8192 and 16384)
    STEP_BACKENDS      attention keys of the attention_step step (default: the forced SDPA backends, flex, fa2, fa3
                       and flashinfer_paged)
    QUANT_ARGS         more options of python -m decodegap quantisation, e.g. "--paths int4-tinygemm --contexts 2048"
                       (its sweep resumes: a cell already in decode.csv is not timed again; QUANT_AGAIN times it again)
                       (with --paths, the quant step builds only the extensions of the paths named)
    PROFILE            quantisation paths: after the quant sweep, one profiled lean_attn_graph step of each per cell
                       (python -m decodegap kernel-counts, into kernels.csv and breakdown.csv)
    LADDER_LEVERS      arms of levers.LEVERS: the ladder step sweeps and profiles only these
    LADDER_SESSIONS    fresh sessions a ladder cell (default 1)
    SCOPE_ARGS         more options of python -m decodegap where-the-thesis-ends for the batch, batch_compile, size
                       and size_compile steps
                       (e.g. "--no-kernels", "--batches 1,8,64", "--models qwen2.5-0.5b,qwen2.5-7b")
    AB_ARGS            more options of python -m decodegap cuda-graphs-ab (e.g. "--headline-only --again": the
                       headline sweep again in a run of its own, every session checked)
    FUSED_TESTS        a pytest -k expression: the fused step runs only those of its GPU tests
    INT4_SESSIONS      fresh sessions a cell of the fused_int4 step (default 1)
    INT4_ARMS          comma-separated fused int4 levers of the fused_int4 step, swept and profiled (default its five;
                       each lever adds its own checks and steps to every cell, so two of them, e.g.
                       lean_fused_early_products_graph,lean_fused_pdl_norm_graph, sweep the grid in about half the time)
    INT4_PRODUCTS      comma-separated products of the int4_configs step (kernels.fused_int4.configs.INT4_STEP_PRODUCTS;
                       default all), e.g. the new ones only: gate_up_silu,down,qkv_rotary,down_norm,lm_head,lm_head_plain
    INT4_LAUNCHES      the int4_configs step's launches, of none,pdl,early (default all three)
    INT4_HEAD_ARMS     comma-separated levers of the int4_head step (default its eight:
                       lean_fused_all_next_token_graph,lean_fused_norms_next_token_graph,
                       lean_fused_epilogue_norms_graph,
                       lean_fused_all_epilogues_graph,lean_fused_silu_epilogue_graph,
                       lean_fused_early_products_graph,
                       lean_fused_pdl_norm_graph,lean_attn_compile)
    FUSED_GEMV_MODELS  the fused step's models whose products it times (default llama-3.1-8b,qwen2.5-7b,
                       mistral-7b-v0.3; llama-3.2-1b: the megakernel cell's widths)
    FUSED_GEMV_PRODUCTS  the fused step's products by name only, no layer chain (e.g. the norm-scale levers':
                       qkv_scaled,o_scale,gate_up_plain_scaled,down_silu_scale)
    CONFIRM_KINDS      the confirm step's cells of these kinds only, bf16 and/or int4 (default both; an int4 pair
                       on a compiled lever compiles in every session)
    SKIP_TESTS=1       the quant, fused, fused_int4 and int4_head steps without their GPU tests
  Measuring again
    RETRY=1            measure again the cells recorded as `error` or `oom` (--retry-errors), once their cause is fixed
    RETRY_UNAVAILABLE=1  the attention steps measure again the cells recorded as `unavailable` (e.g. fa2 once
                       flash-attn is built)
    ATTENTION_AGAIN=1  the per-layer microbenchmark measures every cell again, all in one run's interleaved rounds
    CONFIRM_AGAIN=1    the confirm step confirms the cells already confirmed again, in a run of their own (after a
                       change to a lever's code; the confirmation table reads each cell's newest commit's runs)
    MEGAKERNEL_AGAIN=1  the megakernel step measures the cell's selection and confirmation again, each in a run of
                       its own (after a change to the code its levers run, e.g. config table entries at its widths)
    INT4_CONFIGS_AGAIN=1  the int4_configs step times every product and launch again, not only those it lacks
    INT4_AGAIN=1       the fused_int4 step measures its cells again in a run of their own (after a change to the
                       fused int4 kernels or their config table)
    LADDER_AGAIN=1     the ladder step measures and profiles its cells again (the old rows kept as history)
    PEERS_AGAIN=1      the peers step measures its contexts again (a new run beside the old rows)
    QUANT_AGAIN        quantisation paths: the quant step, in place of its sweep, measures these paths' cells
                       again (python -m decodegap measure --again --quant PATH --sessions 1 over MODELS and
                       CONTEXTS), each session writing its null, format, layer and model checks before it times;
                       e.g. QUANT_AGAIN=awq-marlin,gptq-exllamav2 CONTEXTS=2048 for the cells rule R4l reads;
                       only the extensions these paths need are built (Marlin for awq-marlin, ExLlamaV2's for
                       gptq-exllamav2)
    QUANT_AGAIN_ARMS   the arms of QUANT_AGAIN, in groups separated by spaces, every path measured in one group
                       before the next (default "eager,graph,lean_attn_graph lean_attn_compile")
  Where and how long
    DATA_DIR           a data folder other than data/ (the registry and model configs are copied into a new one)
    STEP_TIMEOUT       seconds each step may run (default: no limit); a run it stops (SIGTERM) records `stopped` and the
                       rows it left in env.json
    TOTAL_TIMEOUT      seconds all the steps may run together, from the first (default: no limit): each step gets what
                       is left (or STEP_TIMEOUT where that is less), and a step after it is spent is skipped, so one
                       call's time limit can take `ladder confirm` and cut whichever step it reaches
    .largepack/        the large committed files a copied tree left out (`bash bench/pack_large.sh` packs them;
                       carry the folder): each is put back, checked against its sha256, before any step
    RESUME_FROM        raw-GPU.tgz tarballs of earlier calls (comma-separated paths, e.g. .resume/raw-h100-sxm.tgz in a
                       carried folder), merged into the data folder (python -m decodegap merge-runs: all or nothing)
                       before any step, so a sweep an earlier call's time limit stopped resumes where it stopped on
                       a fresh copy of the tree instead of timing its cells again; a tarball missing or refused by
                       merge-runs stops measure.sh (exit 2) before any step

Optional kernel packages: wheels in .whl/ are installed by bench/gpu_env.sh; Marlin's sources in .src/marlin,
flash-attn's in .src/flash-attention. `python3` must be the interpreter with torch and the dependencies (activate
.venv first where they live there).
Example (repository root): bash bench/measure.sh h200 /tmp/out roofline ab
EOF
}
case "${1:-}" in -h|--help) usage; exit 0;; esac
set -u
if [ $# -lt 2 ]; then
  echo "usage: bench/measure.sh GPU OUTDIR [STEP ...] (bench/measure.sh --help for the steps and options)" >&2
  exit 2
fi
GPU=$1
OUTDIR=$2
shift 2
ALL_STEPS="env tests roofline ab attention attention_step quant quant_power marlin_prefill gemv fused attention_splits int4_configs fused_int4 int4_head check_sensitivity ladder confirm megakernel batch batch_compile size size_compile peers"
STEPS=${*:-$ALL_STEPS}
if [ -z "${EPOCHREALTIME-}" ]; then  # the steps' clock (clock_ms) reads it
  echo "measure.sh: needs bash 5.0 or later (EPOCHREALTIME); this is bash $BASH_VERSION" >&2
  exit 2
fi
for var in STEP_TIMEOUT TOTAL_TIMEOUT; do  # seconds, whole and positive, checked before anything is set up
  value=${!var:-}
  if [ -n "$value" ] && ! [[ "$value" =~ ^[0-9]+$ && "$value" -gt 0 ]]; then
    echo "measure.sh: $var='$value': give a whole number of seconds above 0, e.g. $var=560" >&2
    exit 2
  fi
done
for step in $STEPS; do
  case " $ALL_STEPS " in *" $step "*) ;; *) echo "measure.sh: unknown step $step (steps: $ALL_STEPS)" >&2; exit 2;; esac
done
# the key checked against the registry (the one DATA_DIR will hold: its own, or data/'s copied there) before anything
# is created or installed; whether it is this machine's GPU is checked below, once the environment is set up
if [ "$GPU" != detect ]; then
  REGISTRY=${DATA_DIR:-data}/specs/gpus.csv
  [ -f "$REGISTRY" ] || REGISTRY=data/specs/gpus.csv
  if [ ! -f "$REGISTRY" ]; then
    echo "measure.sh: no GPU registry at $REGISTRY (run bench/measure.sh from the repository root)" >&2
    exit 2
  fi
  KNOWN=$(awk -F, 'NR > 1 { sub(/\r$/, "", $1); gsub(/^"|"$/, "", $1); if ($1 != "") print $1 }' "$REGISTRY")
  KEY_OK=""
  for key in $KNOWN; do [ "$key" = "$GPU" ] && KEY_OK=1; done
  if [ -z "$KEY_OK" ]; then
    typed=$(printf '%s' "$GPU" | tr '[:upper:]' '[:lower:]' | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
    near=""
    [ "$typed" = detect ] && near=detect
    for key in $KNOWN; do [ -z "$near" ] && [ "$key" = "$typed" ] && near=$key; done
    for key in $KNOWN; do  # h100 -> h100-sxm, the key that names its form
      [ -z "$near" ] && [ -n "$typed" ] && case "$key" in "$typed"-*) near=$key;; esac
    done
    echo "measure.sh: unknown GPU key '$GPU': ${near:+did you mean '$near'? }Known: $(echo $KNOWN | sed 's/ /, /g')," \
      "or detect (this machine's GPU, whichever it is) ($REGISTRY; python -m decodegap gpus lists them)" >&2
    exit 2
  fi
fi
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)  # absolute: save() packs from inside data/raw
source bench/gpu_env.sh

restore_large() {  # the large committed files a copied tree lacks, from .largepack/ (bench/pack_large.sh)
  local pack=.largepack/large.txz sums=.largepack/SHA256SUMS f missing=()
  [ -f "$pack" ] && [ -f "$sums" ] || return 0
  while read -r _ f; do [ -e "$f" ] || missing+=("$f"); done < "$sums"
  [ ${#missing[@]} -eq 0 ] && return 0
  tar xJf "$pack" "${missing[@]}" || { echo "measure.sh: $pack lacks or cannot give ${missing[*]}" >&2; return 1; }
  if ! grep -F -f <(printf '  %s\n' "${missing[@]}") "$sums" | sha256sum --quiet -c -; then
    echo "measure.sh: a file restored from $pack is not the one packed; removed: ${missing[*]}" >&2
    rm -f "${missing[@]}"
    return 1
  fi
  echo "measure.sh: restored from $pack: ${missing[*]}"
}
restore_large || exit 2  # before any step reads data/: the large files the call's tree left out
DATA=${DATA_DIR:-data}
if [ ! -f "$DATA/specs/gpus.csv" ]; then
  mkdir -p "$DATA" && cp -r data/models data/specs data/published "$DATA"/
fi
EXPECT=(--expect "$GPU"); [ "$GPU" = detect ] && EXPECT=()  # the key checked, or found, before any step
GPU=$(python3 -m decodegap --data-dir "$DATA" gpus --this-machine "${EXPECT[@]}") || exit 2
echo "measure.sh: measuring this machine's $GPU"
resume_from() {  # RESUME_FROM's tarballs (earlier calls' OUTDIR/raw-GPU.tgz) merged into $DATA, all or none
  local t tarballs=()
  [ -n "${RESUME_FROM:-}" ] || return 0
  for t in ${RESUME_FROM//,/ }; do
    if [ ! -f "$t" ]; then
      echo "measure.sh: RESUME_FROM names $t, which is not here (put the earlier call's raw-GPU.tgz in a folder" \
        "git ignores, e.g. .resume/, and carry it); nothing merged, no step run" >&2
      return 1
    fi
    tarballs+=("$t")
  done
  if ! python3 -m decodegap --data-dir "$DATA" merge-runs "${tarballs[@]}"; then
    echo "measure.sh: RESUME_FROM: merge-runs refused ${tarballs[*]} (its message above); nothing merged, no step run" >&2
    return 1
  fi
}
resume_from || exit 2  # the rows of earlier calls, before a sweep decides which cells it still has to time
RAW=$DATA/raw/$GPU
GRID=()
[ -n "${MODELS:-}" ] && GRID+=(--models "$MODELS")
[ -n "${CONTEXTS:-}" ] && GRID+=(--contexts "$CONTEXTS")
RETRY_FLAG=()
PROFILE=${PROFILE:-}
[ "${RETRY:-0}" = 1 ] && RETRY_FLAG=(--retry-errors)
LADDER_AGAIN_FLAG=()
[ "${LADDER_AGAIN:-0}" = 1 ] && LADDER_AGAIN_FLAG=(--again)
UNAVAILABLE_FLAG=()
[ "${RETRY_UNAVAILABLE:-0}" = 1 ] && UNAVAILABLE_FLAG=(--retry-unavailable)
STEP_BACKENDS=${STEP_BACKENDS:-sdpa_flash,sdpa_efficient,sdpa_cudnn,sdpa_math,flex,fa2,fa3,flashinfer_paged}

bounded() {  # a command within what is left of the step's time (STEP_TIMEOUT, TOTAL_TIMEOUT; no limit without them)
  local left_ms=0
  if [ -n "${STEP_TIMEOUT:-}${TOTAL_TIMEOUT:-}" ]; then
    clock_ms; left_ms=$((STEP_END_MS - CLOCK_MS))
    [ $left_ms -le 0 ] && { echo "out of step time: skipped $*"; return 124; }
  fi
  local left; printf -v left '%d.%03d' $((left_ms / 1000)) $((left_ms % 1000))
  timeout "$left" "$@"
}
dg() { bounded python3 -m decodegap --data-dir "$DATA" "$@"; }
quiet() { grep -v "TensorFloat32\|warnings.warn\|^DEBUG"; }
save() {  # the raw files to OUTDIR as one tarball, raw-GPU.tgz; written aside, then moved, so a copy is never cut
  local tmp="$OUTDIR/.raw.$BASHPID.tgz"  # the saver loop and the exit trap each write their own
  # env.json first: a run or session it records as finished, with its row counts, wrote those rows before it, so the
  # CSVs read after it hold them all (read before it, a CSV could miss rows env.json then counts: merge-runs refuses)
  ( cd "$DATA/raw" || exit 1
    files=(); [ -f "$GPU/env.json" ] && files+=("$GPU/env.json")
    for f in "$GPU"/*; do [ "$f" = "$GPU/env.json" ] || files+=("$f"); done
    tar czf "$tmp" "${files[@]}" 2>/dev/null ) && mv "$tmp" "$OUTDIR/raw-$GPU.tgz" || rm -f "$tmp"
  true
}
# milliseconds since the first step, in CLOCK_MS (bash's SECONDS ticks on the wall clock's whole seconds, so a bound
# read from it could run up to a second long or short)
clock_ms() { local t=${EPOCHREALTIME/[.,]/}; CLOCK_MS=$((t / 1000 - RUN_T0_MS)); }
seconds() { printf -v "$1" '%d.%d' $(($2 / 1000)) $(($2 % 1000 / 100)); }  # a variable, milliseconds as seconds
# name, then the command; bounded by STEP_TIMEOUT and what is left of TOTAL_TIMEOUT, logged to OUTDIR/NAME.log
run_step() {
  local name=$1; shift
  local t0_ms at took
  clock_ms; t0_ms=$CLOCK_MS; seconds at "$t0_ms"
  STEP_END_MS=$((t0_ms + ${STEP_TIMEOUT:-0} * 1000))
  if [ -n "${TOTAL_TIMEOUT:-}" ]; then  # the run's end when it comes first
    { [ -z "${STEP_TIMEOUT:-}" ] || [ $((TOTAL_TIMEOUT * 1000)) -lt "$STEP_END_MS" ]; } && STEP_END_MS=$((TOTAL_TIMEOUT * 1000))
    if [ "$t0_ms" -ge $((TOTAL_TIMEOUT * 1000)) ]; then
      echo "== $name skipped: TOTAL_TIMEOUT=${TOTAL_TIMEOUT} s spent at ${at} s"
      return 0
    fi
  fi
  echo "== $name (started at ${at} s)"
  "$@" 2>&1 | quiet | tee "$OUTDIR/$name.log" | tail -n 40
  local rc=${PIPESTATUS[0]}
  clock_ms; seconds at "$CLOCK_MS"; seconds took $((CLOCK_MS - t0_ms))
  echo "== $name ended at ${at} s (exit ${rc}, ${took} s)"
  save
}

step_env() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  bounded python3 bench/optional_report.py
}
step_tests() {
  bounded python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short --durations=8 tests/
}
step_roofline() {
  dg measure --gpu "$GPU" "${GRID[@]}" --arms eager,hf_default,graph --sessions 3 --steps 30 --warmup 5 \
    --no-progress --bandwidth "${RETRY_FLAG[@]}"
}
step_ab() {
  rm -rf "$TORCHINDUCTOR_CACHE_DIR"  # cold: the compile arm's first session compiles from nothing
  dg cuda-graphs-ab --gpu "$GPU" "${GRID[@]}" --count-kernels --no-progress ${AB_ARGS:-}
}
gpu_tests() {  # NAME FILE...: one step's GPU tests, their output in OUTDIR/gpu_tests_NAME.txt, its tail shown
  local name=$1; shift
  bounded python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short -W ignore::DeprecationWarning "$@" \
    > "$OUTDIR"/gpu_tests_"$name".txt 2>&1
  tail -n 12 "$OUTDIR"/gpu_tests_"$name".txt
}
unpack_builds() {  # the builds of earlier runs on other machines, put in .extpack/ (any .extpack*/*.tgz or *.txz)
  local pack
  for pack in .extpack*/*.tgz .extpack*/*.txz; do [ -f "$pack" ] && tar xf "$pack" -C .ext; done
  true
}
PACK_LIMIT_BYTES=$((16 * 1024 * 1024))  # the largest file a device call brings back from OUTDIR
pack_builds() {  # the builds made here, as OUTDIR/ext.tgz: put it in .extpack/ on another machine to reuse them
  ( cd .ext && tar czf - *.so *.json flash_attn 2>/dev/null ) > "$OUTDIR"/ext.tgz
  # gzip left ExLlamaV2's and Marlin's builds at 18.3 MB, past what comes back: xz then, as OUTDIR/ext.txz
  if [ "$(stat -c %s "$OUTDIR"/ext.tgz)" -gt "$PACK_LIMIT_BYTES" ] && command -v xz > /dev/null; then
    ( cd .ext && tar cf - *.so *.json flash_attn 2>/dev/null ) | xz -9 -T0 > "$OUTDIR"/ext.txz && rm "$OUTDIR"/ext.tgz
  fi
  ls -la "$OUTDIR"/ext.t?z
}
build_attention() {  # flash-attn's trimmed extension, unless .ext holds one (built here or unpacked)
  unpack_builds
  local BUILT_HERE=""
  [ -f .ext/flash_attn_2_cuda.so ] || BUILT_HERE=1
  bounded bash bench/build_flash_attn.sh .src/flash-attention .ext > "$OUTDIR"/build_attention.log 2>&1
  tail -3 "$OUTDIR"/build_attention.log
  [ -n "$BUILT_HERE" ] && [ -f .ext/flash_attn_2_cuda.so ] && pack_builds
  bounded python3 bench/optional_report.py
}
step_attention() {
  build_attention
  local AGAIN=(); [ "${ATTENTION_AGAIN:-0}" = 1 ] && AGAIN=(--again)
  dg attention-backends --gpu "$GPU" "${GRID[@]}" "${UNAVAILABLE_FLAG[@]}" "${AGAIN[@]}"
}
step_attention_step() {
  build_attention
  local attn
  for attn in ${STEP_BACKENDS//,/ }; do
    dg measure --gpu "$GPU" ${MODELS:+--models "$MODELS"} --attn $attn --arms eager,graph --contexts 2048,16384 \
      --sessions 1 --no-progress "${RETRY_FLAG[@]}" "${UNAVAILABLE_FLAG[@]}"
    save
  done
}
needs() {  # PATHS NAME: whether the comma-separated quantisation paths (or "all") include NAME
  case ",$1," in *",all,"*|*",$2,"*) return 0;; *) return 1;; esac
}
quant_args_paths() {  # the paths QUANT_ARGS names (--paths X or --paths=X), else "all": what the sweep can time
  local prev="" arg
  for arg in ${QUANT_ARGS:-}; do
    case "$arg" in --paths=*) echo "${arg#--paths=}"; return;; esac
    [ "$prev" = --paths ] && { echo "$arg"; return; }
    prev=$arg
  done
  echo all
}
build_quant() {  # PATHS (comma-separated, default all): Marlin's extension (bench/build_marlin.sh) where they include
  # awq-marlin and ExLlamaV2's where they include gptq-exllamav2, unless .ext holds them (built here or unpacked);
  # then which quantisation paths this machine has
  local want=${1:-all} BUILT_HERE="" marlin=""
  unpack_builds
  # the two builds side by side (Marlin's one large CUDA file beside ExLlamaV2's many), each with its own log
  if needs "$want" awq-marlin && ! ls .ext/marlin_cuda*.so >/dev/null 2>&1; then
    BUILT_HERE=1
    bounded bash bench/build_marlin.sh .src/marlin .ext > "$OUTDIR"/build.log 2>&1 &
    marlin=$!
  fi
  # ExLlamaV2 imports a prebuilt exllamav2_ext first
  if needs "$want" gptq-exllamav2 && ! ls .ext/exllamav2_ext*.so >/dev/null 2>&1; then
    BUILT_HERE=1
    local t0=$SECONDS
    timeout 400 python3 -c "from exllamav2.ext import exllamav2_ext; print('exllamav2 extension built')" \
      > "$OUTDIR"/build_exllamav2.log 2>&1
    cp .ext/torch_extensions/exllamav2_ext/exllamav2_ext*.so .ext/ 2>/dev/null \
      && python3 bench/optional_report.py --exllamav2-build $((SECONDS - t0)) .ext/exllamav2_build.json
    tail -3 "$OUTDIR"/build_exllamav2.log
  fi
  if [ -n "$marlin" ]; then wait $marlin; tail -3 "$OUTDIR"/build.log; fi
  [ -n "$BUILT_HERE" ] && pack_builds
  python3 bench/optional_report.py --quant-paths
}
quant_again() {  # QUANT_AGAIN's paths measured again, one group of QUANT_AGAIN_ARMS after another
  local arms path
  for arms in ${QUANT_AGAIN_ARMS:-eager,graph,lean_attn_graph lean_attn_compile}; do
    for path in ${QUANT_AGAIN//,/ }; do
      echo "-- $path: $arms again"
      dg measure --gpu "$GPU" "${GRID[@]}" --quant "$path" --arms "$arms" --sessions 1 --again --no-progress
      save
    done
  done
}
step_quant() {
  build_quant "${QUANT_AGAIN:-$(quant_args_paths)}"  # no extension build for paths the sweep will not time
  if [ -z "${SKIP_TESTS:-}" ]; then
    gpu_tests quant tests/test_quant_gpu.py tests/test_int4_gemv.py
  fi
  save
  if [ -n "${QUANT_AGAIN:-}" ]; then
    quant_again
  else
    dg quantisation --gpu "$GPU" "${GRID[@]}" --no-progress "${RETRY_FLAG[@]}" ${QUANT_ARGS:-}
  fi
  for path in ${PROFILE//,/ }; do  # a profiled lean step per path: its products' kernels, fixed us and GB/s
    dg kernel-counts --gpu "$GPU" "${GRID[@]}" --quant "$path" --arms lean_attn_graph
  done
}
step_quant_power() {  # the quantisation checks' power: the whole model on the GPU, then the CPU's products and layers
  build_quant
  DECODEGAP_DIAG_DIR="$OUTDIR" bounded python3 bench/quant_power_gpu.py
  DECODEGAP_DIAG_DIR="$OUTDIR" bounded python3 bench/quant_power_cpu.py
}
step_marlin_prefill() {  # Marlin's multi-row products: a kernel defect or not, and the layer's prefill route
  build_quant awq-marlin
  DECODEGAP_DIAG_DIR="$OUTDIR" bounded python3 bench/marlin_prefill_gpu.py
}
step_gemv() {
  DECODEGAP_DIAG_DIR="$OUTDIR" bounded python3 bench/int4_gemv.py
}
step_fused() {
  [ -n "${SKIP_TESTS:-}" ] || gpu_tests fused tests/test_fused.py tests/test_norm_scale.py ${FUSED_TESTS:+-k "$FUSED_TESTS"}
  DECODEGAP_DIAG_DIR="$OUTDIR" bounded python3 bench/fused_gemv.py
}
step_attention_splits() {
  DECODEGAP_DIAG_DIR="$OUTDIR" bounded python3 bench/attention_splits.py
}
step_int4_configs() {  # the fused int4 product's configs per shape, flavour and launch (its table's rows): the
  # committed rows first, so that the bench resumes from them (it skips what they time whole) and OUTDIR's file is the
  # whole set, to commit as data/diagnostics/fused_int4_gemv.csv
  # (INT4_CONFIGS_AGAIN=1: a file of its own, every config timed again, so that no config pools two runs' times)
  [ -n "${INT4_CONFIGS_AGAIN:-}" ] || [ -f "$OUTDIR/fused_int4_gemv.csv" ] ||
    [ ! -f data/diagnostics/fused_int4_gemv.csv ] || cp data/diagnostics/fused_int4_gemv.csv "$OUTDIR/fused_int4_gemv.csv"
  DECODEGAP_DIAG_DIR="$OUTDIR" bounded python3 bench/fused_int4_gemv.py ${MODELS:+--models "$MODELS"} \
    ${INT4_LAUNCHES:+--launches "$INT4_LAUNCHES"} ${INT4_PRODUCTS:+--products "$INT4_PRODUCTS"} ${INT4_CONFIGS_AGAIN:+--again}
  DECODEGAP_DIAG_DIR="$OUTDIR" bounded python3 bench/int4_sass.py  # the same products' SASS counted (no GPU needed)
}
INT4_FUSED_ARMS=${INT4_ARMS:-lean_fused_silu_epilogue_graph,lean_fused_graph,lean_fused_pdl_norm_graph,lean_fused_early_products_graph,lean_fused_merged_graph}
step_fused_int4() {  # the fused int4 step: its GPU tests, its levers measured with their in-run checks, then each
  # lever's step profiled at notebook 06's target cell (the targets' "what stands in the way" reads its own profile)
  [ -n "${SKIP_TESTS:-}" ] || gpu_tests fused_int4 tests/test_fused_int4.py
  dg measure --gpu "$GPU" "${GRID[@]}" --quant int4-triton --sessions "${INT4_SESSIONS:-1}" --no-progress \
    --arms "$INT4_FUSED_ARMS" ${INT4_AGAIN:+--again}
  save
  dg kernel-counts --gpu "$GPU" --models llama-3.1-8b --contexts 2048 --quant int4-triton --arms "$INT4_FUSED_ARMS"
}
INT4_HEAD_ARMS=${INT4_HEAD_ARMS:-lean_fused_all_next_token_graph,lean_fused_norms_next_token_graph,lean_fused_epilogue_norms_graph,lean_fused_all_epilogues_graph,lean_fused_silu_epilogue_graph,lean_fused_early_products_graph,lean_fused_pdl_norm_graph,lean_attn_compile}
step_int4_head() {  # the int4 LM head (int4-triton-head): its GPU tests, its levers over the grid with their in-run
  # checks (the head check and its null beside the model check), then each lever's step profiled at the target cell
  [ -n "${SKIP_TESTS:-}" ] || gpu_tests int4_head tests/test_int4_head.py tests/test_next_token.py
  dg measure --gpu "$GPU" "${GRID[@]}" --quant int4-triton-head --sessions "${INT4_SESSIONS:-1}" --no-progress \
    --arms "$INT4_HEAD_ARMS" ${INT4_AGAIN:+--again}
  save
  dg kernel-counts --gpu "$GPU" --models llama-3.1-8b --contexts 2048 --quant int4-triton-head --arms "$INT4_HEAD_ARMS"
}
step_check_sensitivity() {  # the CPU's narrow model (data/diagnostics/check_sensitivity_cpu.csv), then the three runs
  # behind data/diagnostics/sharp_noise_gpu.csv: factors 1 and 16 (the plain and the sharpened check), then 2 over
  # the grid, then llama-3.1-8b at ctx 2048 at factors 2 and 4
  DECODEGAP_DIAG_DIR="$OUTDIR" bounded python3 bench/check_sensitivity_cpu.py
  local sharp=(bounded python3 bench/sharp_noise_gpu.py ${MODELS:+--models "$MODELS"})
  DECODEGAP_DIAG_DIR="$OUTDIR" "${sharp[@]}"
  DECODEGAP_DIAG_DIR="$OUTDIR" "${sharp[@]}" --factors 2
  DECODEGAP_DIAG_DIR="$OUTDIR" bounded python3 bench/sharp_noise_gpu.py --models llama-3.1-8b --contexts 2048 \
    --arms graph,lean,lean_attn_graph --factors 2,4
}
step_ladder() {
  dg closing-the-gap --gpu "$GPU" "${GRID[@]}" --sessions "${LADDER_SESSIONS:-1}" "${RETRY_FLAG[@]}" ${LADDER_LEVERS:+--levers "$LADDER_LEVERS"} "${LADDER_AGAIN_FLAG[@]}"
}
step_confirm() {  # notebook 06's winners confirmed, not selected: run after the ladder step
  dg closing-the-gap --confirm --gpu "$GPU" "${GRID[@]}" ${CONFIRM_KINDS:+--kinds "$CONFIRM_KINDS"} \
    ${CONFIRM_AGAIN:+--again}
}
step_megakernel() {  # notebook 06's megakernel cell: its selection, then its confirmation
  dg closing-the-gap --megakernel --gpu "$GPU" ${MEGAKERNEL_AGAIN:+--again}
}
scope_sweep() {  # notebook 07: one sweep (timed: then its profiled steps; compiled) of one axis
  dg where-the-thesis-ends --axis "$1" --sweep "$2" --gpu "$GPU" --no-progress "${RETRY_FLAG[@]}" ${SCOPE_ARGS:-}
}
step_batch() { scope_sweep batch timed; }  # notebook 07's batch axis: its timed sweep, then its profiled steps
step_batch_compile() { scope_sweep batch compiled; }  # notebook 07's batch axis: its compiled sweep
step_size() { scope_sweep size timed; }  # notebook 07's model-size axis: its timed sweep, then its profiled steps
step_size_compile() { scope_sweep size compiled; }  # notebook 07's model-size axis: its compiled sweep
step_peers() {  # notebook 06's peer: gpt-fast's compiled decode beside the package's levers, one run a context
  bash bench/fetch_gpt_fast.sh || return 1
  local ctx
  for ctx in 2048 16384; do
    bounded python3 bench/peer_gpt_fast.py --gpu "$GPU" --data "$DATA" --model llama-3.1-8b --ctx $ctx \
      ${PEERS_AGAIN:+--again}
    save
  done
}

( while sleep 20; do save; done ) & SAVER=$!
trap 'kill $SAVER 2>/dev/null; save' EXIT
SECONDS=0; RUN_T0_MS=0; clock_ms; RUN_T0_MS=$CLOCK_MS  # SECONDS for a build's seconds
for step in $STEPS; do
  run_step "$step" "step_$step"
done
clock_ms; seconds at "$CLOCK_MS"
echo "measure.sh: steps [$STEPS] done at ${at} s; rows in $RAW, copies in $OUTDIR"
