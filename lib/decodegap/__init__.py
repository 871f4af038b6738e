"""decodegap: rebuild and re-measure 'Memory-Bound but Not Bandwidth-Limited' (batch-1 LLM decode).

The package by stage, the data flowing one way: each stage imports only from the stages listed before it, and no
modules import each other in a circle (tests/test_layout.py checks both, and that this map names every module of the
tree, and nothing else). The kernel tuners are scripts of bench/ (int4_gemv.py, fused_gemv.py), as the other
measurements that write data/diagnostics/ are.

base: paths, rows and the numbers every stage shares
  paths                     repository paths
  sessions                  session numbers: one band per kind of sweep (grid, notebook 07's axes, confirmations)
  records                   the raw CSV schemas, the validating reader, atomic resumable appends
  selection                 which rows count: cells done, each step's latest profile, superseded rows, runs' plans
  checked                   timed rows joined to the checks of their own run: no unchecked cell counts
  tables                    tables written as CSV + Markdown, findings as sentences
  finding                   a finding: a sentence with the values it states
  outcome                   a measurement's outcome as a row status
  diagnostics               the diagnostics' rows (data/diagnostics/), with their provenance
  inputs                    CLI values and notebook parameters checked by type and value
  validate                  the data folder checked whole before reproduce writes anything
  hardware                  the GPU registry, detection, env.json capture, the source digest
  published                 the paper's numbers (data/published/paper.csv)
  arms                      the arms registry: decoder x runner x kernels
  levers                    notebook 06's levers, targets, plan and the changes made to their code
  timing                    device-event timing, written once
  prompts                   the check's prompts and teacher token
  compare                   how every check compares outputs, and its tolerance
  accounting                bytes per step from a config, t_floor and R_floor
  roofline                  the cell table: each cell against its memory floor
  stats                     medians and seeded bootstrap CIs
kernels: the Triton kernels
  kernels/step              the lean step's GEMV and split-KV decode attention
  kernels/next_token        the greedy next token (argmax, position + 1) in one kernel
  kernels/l2_prefetch       weights asked of the L2 before a kernel waits: its Triton function, the columns a row
  kernels/device_buffers    the kernels' workspaces, made once a device and kept (a graph holds their addresses)
  kernels/offline           a kernel compiled for sm_90 without a GPU, its cubin read back (cuobjdump)
  kernels/int4_gemv/format  the int4-triton format: packing, round to nearest, dequantise
  kernels/int4_gemv/kernel  the int4 GEMV of one row, autotuned per shape
  kernels/int4_gemv/ops     the int4 GEMV as the custom operator decodegap::int4_gemv
  kernels/int4_gemv/layer   Int4GemvLinear: a row through the kernel, a prefill dequantised
  kernels/fused/launch      the fused decode step's launchers (FusedOps)
  kernels/fused/source      their Triton source
  kernels/fused/reference   their PyTorch references
  kernels/fused/configs     their launch configs per product shape (the fastest of bench/fused_gemv.py's rows)
  kernels/fused/workspace   their split-K and output-norm workspace, one a device
  kernels/fused/rotary_args the rotary epilogue's argument check (bf16 and int4), random operands, the rows it wrote
  kernels/fused/norm_scale  the norm left to the next product as a scale: its operand, the kernels' arguments of it
  kernels/fused/signature   the fused bf16 kernel's argument types for an offline compile
  kernels/fused/product_check the product benches' check: output and rotary cache rows against the reference
  kernels/fused_int4/configs    their launch configs per shape, flavour and launch (bench/fused_int4_gemv.py's rows)
  kernels/fused_int4/launch     the fused step's products on int4-triton weights (fused_int4_gemv)
  kernels/fused_int4/source     its Triton source: the int4 GEMV's loop in the fused step's design
  kernels/fused_int4/reference  the int4 layer's rounding, which the fused references call for int4 weights
  kernels/fused_int4/flavours   each flavour's product beside its reference (the bench's and the GPU test's)
  kernels/fused_int4/signature  its argument types and constexprs for an offline compile (no GPU)
quant: the quantisation paths
  quant/paths               the registry of paths, the swap into a model, the layer check
  quant/formats             each format's round to nearest and packing
  quant/layers              the layers calling each package's kernel
  quant/loaders             the packages loaded as their layers call them; QuantUnavailable
  quant/fuse                several layers of one path fused into one (qkv, gate_up)
  quant/ops                 the packages' kernels as custom operators for torch.compile
  quant/bytes               the bytes each path streams
  quant/power               each format's rounding step, the format check, the null's noise, the planted faults
harness: measuring
  harness/models            model configs and random-weight builds
  harness/keys              registry keys checked, contexts against the models, the GPU key against the device
  harness/attention         the attention backends, per layer
  harness/hf_attention      FA2, FA3 and FlashInfer inside the HF step; which attention runs there
  harness/paged_kv          FlashInfer's batch decode over HF's cache read as pages
  harness/lean              the lean decoder
  harness/decode            the decode-timing arms
  harness/checks            each arm against eager, teacher-forced; the sharpened check a wrong attention cannot pass
  harness/quant_checks      the quantised model's check against bf16, its tolerance, the checks' power
  harness/runs              run ids and their env.json entries
  harness/continuation      a sweep run of its own cut short by a call's limit, continued by the next call
  harness/sweep             sweeps of fresh session processes, resumable: the plan, its cells, spawning the sessions
  harness/verification      a session's checks: which cells are checked, the check against eager, its verify.csv rows
  harness/session           one session process's body: build each model, quantise and check it, time its cells
  harness/profile           the kernel profile of a decode step (notebooks 02, 04, 06)
  harness/peers             gpt-fast's compiled decode beside the package's levers, same weights, checked first
analysis: each notebook's tables and findings, from frames
  analysis/cuda_graphs_ab   02: speed-ups with CIs, the decomposition of a step
  analysis/attention_backends  03: the per-layer backends and the whole step
  analysis/quantisation     04: each path against its own floor, the paper's table
  analysis/quant_checks     04: the layer and model checks
  analysis/quant_profile    04: where a quantised step's time goes, the grid
  analysis/quant_across_gpus  04: the grid's cells on two GPUs, against their bandwidth ratio
  analysis/cost             05: $/Mtok of every configuration
  analysis/profiles         04 and 06: a profiled step by kernel category and by product
  analysis/closing_the_gap  06: the ladder and where the time goes
  analysis/closing_the_gap_confirmation  06: each chosen lever timed again beside its runner-up
  analysis/closing_the_gap_peers  06: a peer's compiled decode beside the package's levers, checked cells only
  analysis/closing_the_gap_megakernel  06: the levers on a public megakernel study's cell, beside its published times
  analysis/closing_the_gap_targets  06: the ladder's confirmed levers against its targets
  analysis/closing_the_gap_bands  06: the same cell measured by sweeps of different bands, compared
  analysis/closing_the_gap_int4_products  06: the fused int4 products alone, per config and launch, a layer summed
  analysis/closing_the_gap_int4_instructions  06: the fused int4 products' instructions a weight, counted offline
  analysis/closing_the_gap_tuner_sessions  06: the int4 levers whose processes tuned their products otherwise
  analysis/closing_the_gap_attention  06: the split-KV attention alone, over its splits and loads, against its KV floor
  analysis/check_sensitivity  06: the decode check's faults against correct arms
  analysis/where_the_thesis_ends  07: floors per batch, the two-term step model, the paper's points
  analysis/where_the_thesis_ends_anatomy  07: the steps' copy share, the two-term model per axis (descriptive)
experiments: one per notebook (plan, measure, rows, tables, findings)
  experiments/roofline      01
  experiments/cuda_graphs_ab  02
  experiments/attention_backends  03
  experiments/quantisation  04
  experiments/cost          05
  experiments/closing_the_gap  06
  experiments/where_the_thesis_ends  07: the batch and model-size sweeps and their replay
claims: the claims table (figures/claims.md)
  claims/table              its entry: build, write, the counts the README quotes
  claims/evidence           what it reads from each experiment
  claims/rules              every rule as data, fixed before the rows
  claims/provenance         which runs each rule reads, and whether the rule was fixed after them
  claims/run_provenance     the runs behind each experiment's counted rows and each raw file's, from env.json
  claims/remeasure          from each rule to the notebook, command and GPU time that re-measure its rows
  claims/one_left_out       each finding's rule again without one model's, context's, headline, A/B or grid session's rows
  claims/verdicts           the verdicts and their rules
  claims/thesis             rows of the paper's thesis
  claims/method             rows of its method and scope
  claims/roofline           rows of result 1
  claims/cuda_graphs_ab     rows of result 2
  claims/attention_backends  rows of result 3
  claims/quantisation       rows of result 4
  claims/quant_across_gpus  our claim on result 4's grid across two fast GPUs (R4o), judged on rows after it
  claims/cost               rows of result 5
  claims/where_the_thesis_ends  rows of the scope: batch, model size, the two-term step model
figures: DataFrames to figures
  figures/style             one style: colours per arm and GPU, titles, axes, a deterministic PNG
  figures/checks            a drawn figure checked: every point inside its axes, no labels on top of each other
  figures/roofline          01's figures
  figures/cuda_graphs_ab    02's figures
  figures/attention_backends  03's figure
  figures/quantisation      04's figure
  figures/cost              05's figure
  figures/closing_the_gap   06's figures
  figures/where_the_thesis_ends  07's figures
  figures/gallery           the README gallery's findings (figures/gallery.csv)
entry points
  notebooks                 running the notebooks (papermill)
  cli                       python -m decodegap ...
  __main__                  the module run by python -m decodegap
"""

__version__ = "0.1.0"
