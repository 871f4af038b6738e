"""Rebuild the figures from the shipped rows, measure a GPU into data/raw/<gpu>/, check the raw CSVs.
See `python -m decodegap <command> --help` for each command's options.

A command that measures one experiment is named after it, as its notebook and modules are (cuda-graphs-ab,
attention-backends, quantisation, closing-the-gap, where-the-thesis-ends; kernel-counts profiles a decode step's
kernels), in hyphens as the options are; its earlier short name (ab, attention, quant, ladder, scope, kernels) stays
an alias, so the command lines that earlier runs recorded (env.json `command_line`) still parse."""

from __future__ import annotations

import argparse
import sys

from decodegap import paths


def _csv_list(text: str, kind=str, option: str = "--models") -> tuple:
    """A comma-separated option value as a tuple; a value that is not a `kind` is an InputError naming the option."""
    from decodegap.inputs import InputError

    out = []
    for x in text.split(","):
        if not x.strip():
            continue
        try:
            out.append(kind(x.strip()))
        except ValueError:
            what = ("whole numbers of sequences, e.g. 1,8,64" if option == "--batches" else
                    "whole numbers of tokens, e.g. 2048,16384" if kind is int else f"{kind.__name__} values")
            raise InputError(f"{option} takes comma-separated {what}; {x.strip()!r} is not one") from None
    return tuple(out)


def _resolve_gpu(gpu: str | None, data, device: str = "cuda", flag: str = "--gpu") -> str:
    """The key the rows will carry, checked against the device measured (keys.gpu_to_measure); `flag` names the
    option a misspelled key came from."""
    from decodegap import validate
    from decodegap.harness import keys

    if gpu is not None:
        validate.gpu_key(gpu, data, flag)
    return keys.gpu_to_measure(gpu, device, data)


def _contexts(text: str, model_keys, data) -> tuple:
    """--contexts as whole numbers, de-duplicated with a note, each within the models' maximum (keys.contexts_for)."""
    from decodegap.harness import keys

    return tuple(keys.contexts_for(_csv_list(text, int, "--contexts"), model_keys, data))


def _check_models(model_keys, data_dir) -> None:
    """Every model key has a config: an unknown model fails with a clear error before any session process starts."""
    from decodegap.harness import keys

    keys.models(model_keys, data_dir)


def cmd_measure(args) -> int:
    from decodegap.harness import keys, sweep
    from decodegap.experiments import roofline
    from decodegap.inputs import InputError

    bad = [item for item in args.checkpoint if "=" not in item]
    if bad:
        raise InputError(f"--checkpoint takes MODEL=DIR, got {bad[0]!r}")
    checkpoints = dict(item.split("=", 1) for item in args.checkpoint)
    model_keys = _csv_list(args.models)
    arms = keys.arms(_csv_list(args.arms, option="--arms"))
    keys.attn(args.attn)
    keys.quant(args.quant)
    _check_models(model_keys, args.data_dir)
    contexts = _contexts(args.contexts, model_keys, args.data_dir)
    gpu = _resolve_gpu(args.gpu, args.data_dir, args.device)
    plan = sweep.SweepPlan(
        gpu=gpu, models=model_keys, contexts=contexts, arms=arms,
        sessions=args.sessions, steps=args.steps, warmup=args.warmup, attn=args.attn, quant=args.quant,
        experiment=args.experiment,
        device=args.device, verify=not args.no_verify, checkpoints=checkpoints,
        retry_unavailable=args.retry_unavailable, retry_errors=args.retry_errors, again=args.again,
    )
    run_id = sweep.run_sweep(plan, args.data_dir, progress=not args.no_progress)
    print(f"run {run_id}: rows in {plan.csv_path(args.data_dir)}")
    if args.bandwidth:
        roofline.record_bandwidth(gpu, args.data_dir, args.device)
    return 0


def cmd_cuda_graphs_ab(args) -> int:
    from decodegap.experiments import cuda_graphs_ab

    model_keys = _csv_list(args.models)
    _check_models(model_keys, args.data_dir)
    contexts = _contexts(args.contexts, model_keys, args.data_dir)
    gpu = _resolve_gpu(args.gpu, args.data_dir, args.device)
    cuda_graphs_ab.measure(gpu, model_keys, contexts, args.headline_ctx, args.sessions, args.headline_sessions,
                           args.steps, args.warmup, args.device, args.data_dir, count_kernels=args.count_kernels,
                           progress=not args.no_progress, headline_only=args.headline_only, again=args.again)
    return 0


def cmd_quantisation(args) -> int:
    from decodegap.experiments import quantisation
    from decodegap.harness import keys

    model_keys = _csv_list(args.models)
    _check_models(model_keys, args.data_dir)
    quant_paths = None  # every path
    if args.paths is not None:  # each named path checked, a misspelt one refused, an empty list too (not "every")
        quant_paths = list(keys.quants(_csv_list(args.paths, option="--paths")))
    if args.plan:  # what the sweeps would time, on any machine: nothing timed, nothing written
        from decodegap import paths

        data = paths.data_dir(args.data_dir)
        _print_plans(quantisation.plan(_plan_gpu(args, data), model_keys,
                                       _contexts(args.contexts, model_keys, args.data_dir), quant_paths,
                                       _csv_list(args.arms), args.sessions, args.steps, args.warmup, args.device,
                                       args.retry_errors), data,
                     after="; the layer checks come first, not counted here")
        return 0
    gpu = _resolve_gpu(args.gpu, args.data_dir)
    resolved = quantisation.measure(gpu, model_keys, _contexts(args.contexts, model_keys, args.data_dir), quant_paths, _csv_list(args.arms),
                                    args.sessions, args.steps, args.warmup, args.device, args.data_dir,
                                    layers=not args.no_layers, progress=not args.no_progress,
                                    retry_errors=args.retry_errors)
    print("paths measured:", ", ".join(f"{k} -> {v}" for k, v in resolved.items()))
    return 0


def _print_plans(plans, data, after: str = "") -> None:
    """One line per sweep (experiments.closing_the_gap.confirmation_plans or selection_plans), in the order the
    command runs them: its models, path, arms and contexts, whether it resumes or starts a run of its own, and the
    cells each of its sessions would time (SweepPlan.pending); then the total, and `after` (what follows the sweeps
    and is not counted)."""
    total, read = 0, {}
    for p in plans:
        if p.csv_path(data) not in read:
            read[p.csv_path(data)] = p.rows_on_disk(data)
        rows = read[p.csv_path(data)]
        pending = {s: len(cells) for s, cells in p.pending_by_session(data, rows).items()}
        total += sum(pending.values())
        how = ("resumes" if not p.again else "a run of its own" + (
            f", continuing {', '.join(p.continues)} (cut short at this commit)" if p.continues else ""))
        counts = [f"{n} in session {s}" for s, n in pending.items()]
        print(f"{', '.join(p.models)} {p.quant} [{', '.join(p.arms)}] ctx {', '.join(map(str, p.contexts))} ({how}): "
              f"cells to time {', '.join(counts)}")
    print(f"{len(plans)} sweep(s), {total} cell(s) to time (a cell: one arm of one model at one context in one "
          f"session){after}")


def _plan_gpu(args, data) -> str:
    """The GPU key a `--plan` lists the sweeps of (`--gpu`, required: a plan reads one GPU's rows), checked against
    the registry of `data`."""
    from decodegap import validate
    from decodegap.inputs import InputError

    if args.gpu is None:
        raise InputError("--plan lists the sweeps of one GPU's rows: give its key with --gpu")
    validate.gpu_key(args.gpu, data, "--gpu")
    return args.gpu


def cmd_closing_the_gap(args) -> int:
    from decodegap.experiments import closing_the_gap
    from decodegap.harness import keys

    if args.megakernel:  # the megakernel cell: its selection, its confirmation, then the profiled steps
        from decodegap.inputs import InputError

        if args.levers is not None or args.retry_errors or args.confirm:
            raise InputError("--megakernel measures the cell of levers.MEGAKERNEL_CELL, its selection and then its "
                             "confirmation; it takes none of --levers, --retry-errors, --confirm (--again: both in "
                             "runs of their own)")
        gpu = _resolve_gpu(args.gpu, args.data_dir, args.device)
        closing_the_gap.measure_megakernel(gpu, warmup=args.warmup, device=args.device, data=args.data_dir,
                                           again=args.again)
        return 0
    if args.confirm:  # the chosen levers and their runners-up again, after the selection (its own sweeps)
        from decodegap.inputs import InputError

        if args.levers is not None or args.retry_errors:
            raise InputError("--confirm times each cell's chosen lever beside its runner-up as the ladder stands; it "
                             "takes neither --levers nor --retry-errors (--again: confirm the confirmed cells again)")
        kinds = None if args.kinds is None else _csv_list(args.kinds, option="--kinds")
        if kinds is not None and (not kinds or set(kinds) - {"bf16", "int4"}):
            raise InputError(f"--kinds takes bf16 and/or int4, comma-separated; got {args.kinds!r}")
        from decodegap import paths

        data = paths.data_dir(args.data_dir)  # the ladder's tables, which the plans read, take a folder, not None
        if args.plan:  # what a confirmation would measure, on any machine: nothing timed, nothing written
            gpu = _plan_gpu(args, data)
            model_keys = _csv_list(args.models)
            _check_models(model_keys, data)
            _print_plans(closing_the_gap.confirmation_plans(
                gpu, data, model_keys=model_keys, contexts=_contexts(args.contexts, model_keys, data), kinds=kinds,
                again=args.again), data)
            return 0
        gpu = _resolve_gpu(args.gpu, data, args.device)
        model_keys = _csv_list(args.models)
        _check_models(model_keys, data)
        closing_the_gap.confirm(gpu, steps=args.steps, warmup=args.warmup, device=args.device, data=data,
                                model_keys=model_keys, contexts=_contexts(args.contexts, model_keys, data),
                                kinds=kinds, again=args.again)
        return 0
    if args.kinds is not None:
        from decodegap.inputs import InputError

        raise InputError("--kinds is for a confirmation: give it with --confirm")
    model_keys = _csv_list(args.models)
    _check_models(model_keys, args.data_dir)
    contexts = _contexts(args.contexts, model_keys, args.data_dir)
    only = keys.levers(_csv_list(args.levers, option="--levers")) if args.levers is not None else None  # '': refused
    if args.plan:  # what the selection would measure, on any machine: nothing timed, nothing written
        from decodegap import paths

        data = paths.data_dir(args.data_dir)
        _print_plans(closing_the_gap.selection_plans(
            _plan_gpu(args, data), model_keys, contexts, args.sessions, args.steps, args.warmup, args.device, data,
            retry_errors=args.retry_errors, only=only, again=args.again), data,
            after="; then the levers' steps profiled, not counted here")
        return 0
    gpu = _resolve_gpu(args.gpu, args.data_dir, args.device)
    closing_the_gap.measure(gpu, model_keys, contexts, args.sessions, args.steps, args.warmup, args.device,
                            args.data_dir, retry_errors=args.retry_errors, only=only, again=args.again)
    return 0


def cmd_where_the_thesis_ends(args) -> int:
    """Notebook 07's sweep of one axis (experiments.where_the_thesis_ends.measure): every option checked first."""
    from decodegap.experiments import where_the_thesis_ends
    from decodegap.harness import sweep

    where_the_thesis_ends.check_axis(args.axis)
    which = where_the_thesis_ends.check_sweeps(args.sweep)
    model_keys = _csv_list(args.models) if args.models else None
    if model_keys:
        _check_models(model_keys, args.data_dir)
    contexts = _contexts(args.contexts, model_keys or where_the_thesis_ends.plan("-", args.axis)[0].models,
                         args.data_dir) if args.contexts else None
    batches = sweep.check_batches(_csv_list(args.batches, int, "--batches")) if args.batches else None
    gpu = _resolve_gpu(args.gpu, args.data_dir, args.device)
    run_ids = where_the_thesis_ends.measure(gpu, args.axis, model_keys, contexts, batches, args.sessions, args.steps,
                                            args.warmup, args.device, args.data_dir, count_kernels=not args.no_kernels,
                                            retry_errors=args.retry_errors, progress=not args.no_progress,
                                            compile_sessions=args.compile_sessions, again=args.again, which=which)
    print(f"runs {', '.join(run_ids)}: rows in {paths.raw_dir(gpu, args.data_dir) / 'decode.csv'}")
    return 0


def cmd_bandwidth(args) -> int:
    from decodegap.experiments import roofline

    gpu = _resolve_gpu(args.gpu, args.data_dir, args.device)
    run_id = roofline.record_bandwidth(gpu, args.data_dir, args.device, size_bytes=args.size_mib << 20, reps=args.reps)
    print(f"run {run_id}: rows in {paths.raw_dir(gpu, args.data_dir) / 'bandwidth.csv'}")
    return 0


def cmd_kernel_counts(args) -> int:
    from decodegap.harness import keys, profile

    model_keys = _csv_list(args.models)
    arms = keys.arms(_csv_list(args.arms, option="--arms"))
    keys.quant(args.quant)
    _check_models(model_keys, args.data_dir)
    contexts = _contexts(args.contexts, model_keys, args.data_dir)
    gpu = _resolve_gpu(args.gpu, args.data_dir, args.device)
    profile.record_kernels(gpu, model_keys, contexts, arms, args.data_dir, args.device, quant=args.quant)
    return 0


def cmd_attention_backends(args) -> int:
    from decodegap.experiments import attention_backends
    from decodegap.harness import keys

    backends = tuple(keys.attn(b) for b in _csv_list(args.backends, option="--backends")) if args.backends else None
    model_keys = _csv_list(args.models)
    _check_models(model_keys, args.data_dir)
    contexts = _contexts(args.contexts, model_keys, args.data_dir)
    gpu = _resolve_gpu(args.gpu, args.data_dir, args.device)
    attention_backends.record_attention(gpu, model_keys, contexts, backends, args.data_dir, args.device,
                                        retry_unavailable=args.retry_unavailable, again=args.again)
    return 0


def cmd_session(args) -> int:
    from decodegap.harness import session, sweep

    plan = sweep.SweepPlan.from_json(args.plan)
    session.run_session(plan, args.session, args.run_id, args.data_dir)
    return 0


def cmd_gpus(args) -> int:
    """The GPU registry; with --this-machine, the key of this machine's CUDA device alone (detected by its name, and
    where --expect names a key, checked to be that GPU: bench/measure.sh asks before its first step)."""
    from decodegap import hardware, inputs

    if args.expect is not None and not args.this_machine:
        raise inputs.InputError("--expect names the key this machine's GPU should have; it takes --this-machine")
    if args.this_machine:
        print(_resolve_gpu(args.expect, inputs.data_folder(args.data_dir), flag="--expect"))
        return 0
    print(hardware.specs_table(args.data_dir).to_string(index=False))
    return 0


def cmd_digest(args) -> int:
    """Print the package source's digest (hardware.source_digest), as env.json's `source_sha256` records it."""
    from decodegap import hardware

    print(hardware.source_digest())
    return 0


def cmd_merge_runs(args) -> int:
    """Merge the runs of measure.sh's raw-GPU.tgz tarballs (or unpacked data/raw/<gpu> folders) into this checkout's
    data/raw (harness.runs.merge_sources: all of them or nothing, the result checked as replay checks it first): the
    runs it lacks, their env.json entries unchanged."""
    from pathlib import Path

    from decodegap import inputs
    from decodegap.harness import runs
    from decodegap.inputs import InputError

    data = inputs.data_folder(args.data_dir)
    try:
        done = runs.merge_sources(map(Path, args.sources), data)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    for source, gpu, what in done:
        print(f"{source}: {gpu}: " + (", ".join(f"{n} {f}" for f, n in what.items()) or "nothing new"))
    return 0


def cmd_check(args) -> int:
    """Validate every raw CSV (with --repair, move cut final blocks into <file>.partial first), every env.json (only
    fields code writes: hardware.read_env) and corrections.json (hardware.read_corrections), list the reviewed
    corrections, hold every run's recorded source digest to the commit it names (hardware.digests_against_commits:
    a mismatch is an error), then report per experiment the runs behind its counted rows that ran from a dirty tree
    or recorded no source digest (claims.run_provenance.provenance_report; --no-provenance skips both)."""
    from decodegap import hardware, inputs, records, validate

    raw = inputs.data_folder(args.data_dir) / "raw"
    files = sorted(raw.glob("*/*.csv"))
    if not files:
        raise inputs.InputError(f"no raw CSV under {raw}/<gpu>/; nothing to check (is --data-dir the right folder?)")

    def failed(step) -> int:
        """1 where the check `step` raises InputError (its message printed as an ERROR line), else 0."""
        try:
            step()
        except inputs.InputError as exc:
            print(f"ERROR {exc}", file=sys.stderr)
            return 1
        return 0

    # the GPU and price registries, the paper's values, the models
    bad, frames = sum(failed(step) for step in validate.registry_checks(raw.parent)), {}
    for path in files:
        schema = records.schema_for(path.stem)
        if args.repair:
            moved = records.repair_tail(path, schema)
            if moved:
                print(f"{path}: moved {moved} line(s) of a cut block into {path.name}.partial")
        try:
            frames[path] = frame = validate.check_raw_csv(path)
            print(f"{path}: {len(frame)} rows ok")
        except inputs.InputError as exc:
            bad += 1
            print(f"ERROR {exc}", file=sys.stderr)
    for folder in sorted({p.parent for p in files}):  # errors, as reproduce refuses them (validate.data_whole)
        bad += sum(failed(step) for step in (
            lambda: validate.folder_is_a_gpu(folder),
            *validate.folder_checks(folder, {p: f for p, f in frames.items() if p.parent == folder})))
    for path in sorted(raw.glob("*/env.json")):
        try:
            env = validate.check_env(path)
            fixes = validate.env_checks(path, env, {p: f for p, f in frames.items() if p.parent == path.parent})
        except (inputs.InputError, hardware.EnvError) as exc:
            bad += 1
            print(f"ERROR {exc}", file=sys.stderr)
            continue
        print(f"{path}: {len(env)} runs ok")
        for run_id, items in sorted(fixes.items()):
            for fix in items:
                print(f"  corrected ({path.with_name('corrections.json').name}): run {run_id} {fix['field']} "
                      f"{fix['recorded'][:12]} -> {fix['corrected'][:12]}, reviewed {fix['reviewed']}")
        for run_id, entry in sorted(env.items()):  # runs stopped before their end with rows kept (runs.stop_record)
            stop = entry.get("stopped") if isinstance(entry, dict) else None
            if isinstance(stop, dict):
                kept = ", ".join(f"{k} {v}" for k, v in sorted((entry.get("rows_written") or {}).items()))
                print(f"  stopped before its end: run {run_id} by {stop.get('by')} at {stop.get('at')}, rows kept: "
                      f"{kept or 'none recorded'}")
    if bad or args.no_provenance:
        return 1 if bad else 0
    held = hardware.digests_against_commits(hardware.load_env(inputs.data_folder(args.data_dir)))
    print(f"source digests: {len(held['matched'])} runs name a clean commit whose package source is the digest they "
          f"record (hardware.source_digest_at); {len(held['not_held'])} record no digest or name no clean commit")
    for (gpu, run), commit in held["commit_missing"]:
        print(f"  note: {gpu}/{run} names commit {commit[:12]}, which this clone lacks (a shallow clone?): not held")
    for (gpu, run), commit, recorded, at_commit in held["mismatched"]:
        bad += 1
        print(f"ERROR {validate.mismatch_text(gpu, run, commit, recorded, at_commit)}", file=sys.stderr)
    if bad:
        return 1
    from decodegap.claims import run_provenance

    reports = run_provenance.provenance_report(inputs.data_folder(args.data_dir))
    print("\n".join(run_provenance.provenance_lines(reports)))
    return 0


def cmd_reproduce(args) -> int:
    """Check the parameters and every input file (validate.data_whole) before anything runs, then run the notebooks
    into a temporary folder and move their outputs into place only when all succeeded (notebooks.reproduce)."""
    import time

    from decodegap import inputs, notebooks, paths, validate
    from decodegap.figures import gallery
    from decodegap.harness import keys

    started = time.monotonic()
    params = {name: _papermill_value(value) for name, value in args.parameter or ()}
    unknown = sorted(set(params) - set(inputs.PARAMETERS))
    if unknown:
        raise inputs.InputError(f"no notebook takes parameter(s) {unknown}; known: {', '.join(sorted(inputs.PARAMETERS))}")
    data_arg = args.data_dir or params.get("DATA_DIR")
    if args.data_dir and params.get("DATA_DIR") and paths.data_dir(params["DATA_DIR"]) != paths.data_dir(args.data_dir):
        raise inputs.InputError("--data-dir and -p DATA_DIR name two folders; pass one of them")
    data = inputs.data_folder(data_arg)
    params["DATA_DIR"] = str(data)  # every key below is checked against this folder's registries
    named = args.figures_dir or params.pop("FIGURES_DIR", None)
    figures = validate.figures_for(data, named)
    measure = bool(args.measure or params.get("MEASURE") is True)
    gpu = args.gpu if args.gpu is not None else params.get("GPU")
    if gpu is not None and not measure:
        what = "--gpu" if args.gpu is not None else "-p GPU"
        raise inputs.InputError(f"{what} names the GPU to measure; it takes --measure (or -p MEASURE True): "
                                "replay reads every GPU's rows")
    keys.check_parameters(params)  # the notebooks check again; a bad value stops before the first one runs
    stems = [p.stem for p in notebooks.notebook_paths(args.only)]  # an unknown notebook fails before any runs
    if measure:
        params.update(MEASURE=True, GPU=_resolve_gpu(gpu, data, params.get("DEVICE", "cuda")))
    validate.data_whole(data, stems, measure=measure)
    print(f"inputs checked: {data}", flush=True)
    with_gallery = not args.only and data == paths.DATA  # the README's gallery is the repository's data's
    written = notebooks.reproduce(params, figures, only=args.only, then=gallery.write if with_gallery else None)
    print(f"wrote {len(written)} files into {figures}" + (" (gallery.csv among them)" if with_gallery else ""))
    print(f"reproduce took {time.monotonic() - started:.0f} s")
    return 0


def cmd_gallery(args) -> int:
    """figures/gallery.csv from the tables in figures/; with --readme, the README gallery's lines from it and
    data/README.md's runs-by-file table from env.json. With --data-dir, the gallery of that folder's figures (where
    `reproduce --data-dir` wrote them: validate.figures_for), never the repository's; --readme only for the
    repository's data/, whose figures the README shows."""
    from decodegap import inputs, paths, validate
    from decodegap.claims import run_provenance, table as claims
    from decodegap.figures import gallery

    data = inputs.data_folder(args.data_dir)
    if args.readme and data != paths.DATA:
        raise inputs.InputError(f"--readme rewrites the repository's README from its own data/ and figures/; "
                                f"{data} is another folder: leave out --readme (or --data-dir)")
    figures = validate.figures_for(data)
    if not figures.is_dir():
        raise inputs.InputError(f"no figures at {figures} for data folder {data}: run `python -m decodegap "
                                f"reproduce --data-dir {data}` first")
    print(f"wrote {gallery.write(figures)}")
    if args.readme:
        readme = paths.REPO / "README.md"
        readme.write_text(gallery.readme_text(readme.read_text(), gallery.read(), claims.claim_counts(),
                                              gallery.quant_counts()))
        print(f"updated the gallery of {readme}")
        data_readme = paths.DATA / "README.md"
        data_readme.write_text(run_provenance.with_provenance_table(data_readme.read_text(), paths.DATA))
        print(f"updated the runs-by-file table of {data_readme}")
    return 0


def _papermill_value(text: str):
    """A `-p NAME VALUE` value as papermill's own `-p` reads it: True, False, None, an int, a float, else text."""
    for value, word in ((True, "True"), (False, "False"), (None, "None")):
        if text == word:
            return value
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _add_grid_args(parser: argparse.ArgumentParser) -> None:
    """--gpu, --models, --contexts and --device, shared by the measuring subcommands."""
    parser.add_argument("--gpu", help="registry key (data/specs/gpus.csv); detected when omitted")
    parser.add_argument("--models", default="qwen2.5-7b,mistral-7b-v0.3,llama-3.1-8b")
    parser.add_argument("--contexts", default="2048,4096,8192,16384")
    parser.add_argument("--device", default="cuda")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m decodegap", description=__doc__)
    parser.add_argument("--data-dir", default=None, help="data folder (default: the repository's data/)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    m = sub.add_parser("measure", help="measure decode cells in fresh sessions (resumes a killed sweep)")
    _add_grid_args(m)
    m.add_argument("--arms", default="eager,hf_default", help="any of eager,hf_default,graph,compile")
    m.add_argument("--sessions", type=int, default=3, help="fresh processes; each measures every cell")
    m.add_argument("--steps", type=int, default=30, help="timed decode steps per cell")
    m.add_argument("--warmup", type=int, default=5, help="warm-up steps per cell (kept as warmup rows)")
    m.add_argument("--attn", default="sdpa", help="attention backend key (decodegap.harness.attention.BACKENDS)")
    m.add_argument("--quant", default="bf16", help="quantisation path key (decodegap.quant.paths.PATHS)")
    m.add_argument("--experiment", default="decode", help="CSV name under data/raw/<gpu>/")
    m.add_argument("--checkpoint", action="append", default=[], metavar="MODEL=DIR",
                   help="load real weights of MODEL from a local HF checkpoint folder")
    m.add_argument("--no-verify", action="store_true", help="skip the arm-vs-eager logits check")
    m.add_argument("--retry-unavailable", action="store_true",
                   help="measure again cells recorded only as unavailable (e.g. after installing a package)")
    m.add_argument("--retry-errors", action="store_true",
                   help="measure again cells recorded only as error or oom (e.g. after fixing a failed check or "
                        "compile, or freeing memory)")
    m.add_argument("--again", action="store_true",
                   help="measure every cell again in a run of its own (its cells checked in it); the older rows stay "
                        "as history and the tables read each cell's newest such run (roofline.one_sweep)")
    m.add_argument("--bandwidth", action="store_true", help="also run the copy-bandwidth probe")
    m.add_argument("--no-progress", action="store_true")
    m.set_defaults(func=cmd_measure)

    ab = sub.add_parser("cuda-graphs-ab", aliases=["ab"],
                        help="notebook 02's whole A/B sweep (eager, graph, compile) in one run, into ab.csv")
    _add_grid_args(ab)
    ab.add_argument("--headline-ctx", type=int, default=2048, help="context of the headline cells")
    ab.add_argument("--sessions", type=int, default=3, help="fresh sessions of every cell of the grid")
    ab.add_argument("--headline-sessions", type=int, default=10, help="fresh sessions of the headline cells")
    ab.add_argument("--steps", type=int, default=30)
    ab.add_argument("--warmup", type=int, default=5)
    ab.add_argument("--count-kernels", action="store_true", help="also profile kernels per step (kernels.csv)")
    ab.add_argument("--headline-only", action="store_true",
                    help="the headline sweep alone (eager and graph at --headline-ctx, every session checked)")
    ab.add_argument("--again", action="store_true",
                    help="measure again in a run of its own; notebook 02 reads each cell's newest run of a sweep, the "
                         "older runs stay as history (reported, not counted)")
    ab.add_argument("--no-progress", action="store_true")
    ab.set_defaults(func=cmd_cuda_graphs_ab)

    q = sub.add_parser("quantisation", aliases=["quant"],
                       help="notebook 04: every quantisation path's layer checks, then its decode steps (checked "
                            "against the bf16 model first) in fresh sessions")
    _add_grid_args(q)
    q.add_argument("--paths", default=None,
                   help="comma-separated quant.PATHS keys (default: experiments.quantisation.DEFAULT_PATHS)")
    q.add_argument("--arms", default=",".join(("eager", "graph", "lean_graph", "lean_attn_graph")))
    q.add_argument("--sessions", type=int, default=1, help="fresh processes; each measures every cell")
    q.add_argument("--steps", type=int, default=30)
    q.add_argument("--warmup", type=int, default=5)
    q.add_argument("--no-layers", action="store_true", help="skip the per-layer checks")
    q.add_argument("--no-progress", action="store_true")
    q.add_argument("--retry-errors", action="store_true",
                   help="measure again cells recorded only as `error` or `oom` (after the cause is fixed)")
    q.add_argument("--plan", action="store_true", help="with --gpu: list each path's sweep, in order, and the cells "
                   "each session would time, from the rows as they stand; measure nothing (no GPU needed)")
    q.set_defaults(func=cmd_quantisation)

    lad = sub.add_parser("closing-the-gap", aliases=["ladder"],
                         help="notebook 06's ladder: every lean lever over the grid, checked against HF eager first, "
                              "then the profiled steps (experiments.closing_the_gap.measure; resumes)")
    _add_grid_args(lad)
    lad.add_argument("--sessions", type=int, default=3, help="fresh processes; each measures every cell (notebook 06: 3)")
    lad.add_argument("--steps", type=int, default=30)
    lad.add_argument("--warmup", type=int, default=5)
    lad.add_argument("--retry-errors", action="store_true",
                     help="measure again cells recorded only as `error` or `oom` (after the cause is fixed)")
    lad.add_argument("--levers", help="comma-separated arms of the ladder's levers (decodegap.levers.LEVERS): sweep "
                     "and profile only these (default: every lever)")
    lad.add_argument("--again", action="store_true", help="measure and profile every cell again (with --levers: "
                     "those levers' cells), after a change to their kernels; the old rows stay as history and the "
                     "tables read the new ones (with --confirm: the confirmed cells again, the confirmation table "
                     "then reading the newest commit's runs)")
    lad.add_argument("--confirm", action="store_true", help="after the selection: time each cell's chosen lever "
                     "beside its runner-up again, 3 fresh sessions, arm order alternated, numbered apart from the "
                     "selection (experiments.closing_the_gap.confirm), the cells of --models and --contexts (e.g. "
                     "--models llama-3.1-8b --contexts 2048: the targets' cell); the targets read only these rows")
    lad.add_argument("--kinds", help="with --confirm: the cells of these kinds only, bf16 and/or int4 (default both)")
    lad.add_argument("--plan", action="store_true", help="with --gpu: list the sweeps it would run (the selection's, "
                     "or with --confirm the confirmation's), in order, and the cells each session would time, from "
                     "the rows as they stand; measure nothing (no GPU needed)")
    lad.add_argument("--megakernel", action="store_true", help="the megakernel cell (levers.MEGAKERNEL_CELL: "
                     "llama-3.2-1b, 32 prompt tokens, 127 steps): every lever of the cell in 3 sessions, then the "
                     "fastest and its runner-up again, then their steps profiled "
                     "(experiments.closing_the_gap.measure_megakernel)")
    lad.set_defaults(func=cmd_closing_the_gap)

    sc = sub.add_parser("where-the-thesis-ends", aliases=["scope"],
                        help="notebook 07: the batch axis or the model-size axis in fresh sessions, then the profiled "
                             "steps (experiments.where_the_thesis_ends; resumes)")
    sc.add_argument("--axis", required=True, help="batch (llama-3.1-8b, ctx 2048, batch 1 to 64) or size (the "
                    "Qwen2.5 family at batch 1)")
    sc.add_argument("--gpu", help="registry key (data/specs/gpus.csv); detected when omitted")
    sc.add_argument("--device", default="cuda")
    sc.add_argument("--models", default=None, help="comma-separated model keys (default: the axis's own)")
    sc.add_argument("--contexts", default=None, help="comma-separated contexts in tokens (default: the axis's own)")
    sc.add_argument("--batches", default=None, help="comma-separated batch sizes (--axis batch; default 1,2,4,...,64)")
    sc.add_argument("--sessions", type=int, default=3, help="fresh processes of the timed arms; each measures "
                    "every cell")
    sc.add_argument("--compile-sessions", type=int, default=1, help="fresh processes of the compiled arms (a "
                    "compile per cell and process)")
    sc.add_argument("--sweep", default="both", help="timed (eager, graph and the lean levers, then the profiled "
                    "steps), compiled (the compiled arms) or both (default); bench/measure.sh runs each as a step")
    sc.add_argument("--again", action="store_true", help="measure every cell again in a new run (the older rows "
                    "stay; the readers take each cell's newest measurement); resume a cut run without it")
    sc.add_argument("--steps", type=int, default=30)
    sc.add_argument("--warmup", type=int, default=5)
    sc.add_argument("--no-kernels", action="store_true", help="skip the profiled steps (kernels.csv, breakdown.csv)")
    sc.add_argument("--retry-errors", action="store_true",
                    help="measure again cells recorded only as `error` or `oom` (after the cause is fixed)")
    sc.add_argument("--no-progress", action="store_true")
    sc.set_defaults(func=cmd_where_the_thesis_ends)

    b = sub.add_parser("bandwidth", help="measure the attainable (copy) bandwidth of this GPU")
    b.add_argument("--gpu")
    b.add_argument("--device", default="cuda")
    b.add_argument("--size-mib", type=int, default=2048)
    b.add_argument("--reps", type=int, default=20)
    b.set_defaults(func=cmd_bandwidth)

    k = sub.add_parser("kernel-counts", aliases=["kernels"],
                       help="count the kernels one decode step launches (torch.profiler), into kernels.csv")
    _add_grid_args(k)
    k.add_argument("--arms", default="eager,hf_default")
    k.add_argument("--quant", default="bf16", help="quantisation path of the profiled model (decodegap.quant.paths.PATHS)")
    k.set_defaults(func=cmd_kernel_counts)

    a = sub.add_parser("attention-backends", aliases=["attention"],
                       help="notebook 03: per-layer decode attention of every backend (correct first, then timed)")
    _add_grid_args(a)
    a.add_argument("--backends", default=None, help="comma-separated keys (default: every registered backend)")
    a.add_argument("--retry-unavailable", action="store_true",
                   help="measure again cells recorded only as unavailable (e.g. after building flash-attn)")
    a.add_argument("--again", action="store_true",
                   help="measure every cell again, all interleaved in this run's rounds (old rows stay as history; "
                        "notebook 03 reads each cell's newest run)")
    a.set_defaults(func=cmd_attention_backends)

    s = sub.add_parser("_session")  # internal: one fresh session process of a sweep (sweep._spawn_session)
    s.add_argument("--plan", required=True)
    s.add_argument("--session", type=int, required=True)
    s.add_argument("--run-id", required=True)
    s.set_defaults(func=cmd_session)

    g = sub.add_parser("gpus", help="list the GPU registry, or name this machine's GPU (--this-machine)")
    g.add_argument("--this-machine", action="store_true",
                   help="print only the registry key of this machine's CUDA device (an error where there is none, or "
                        "where its name is not in the registry)")
    g.add_argument("--expect", default=None, metavar="KEY",
                   help="with --this-machine: the key the device should be; an error, naming the device, if not")
    g.set_defaults(func=cmd_gpus)

    gal = sub.add_parser("gallery", help="the README gallery's findings (figures/gallery.csv) from the tables in figures/ "
                         "(with --data-dir: the figures beside that folder, where reproduce wrote them)")
    gal.add_argument("--readme", action="store_true", help="also rewrite the README gallery's lines from them")
    gal.set_defaults(func=cmd_gallery)

    dg = sub.add_parser("digest", help="the package source's sha256, as a run's env.json records it (source_sha256)")
    dg.set_defaults(func=cmd_digest)

    mr = sub.add_parser("merge-runs", help="merge the runs of bench/measure.sh's raw-GPU.tgz (or a data/raw/<gpu> "
                        "folder) measured on another machine into this checkout's data/raw, refused whole if unreadable")
    mr.add_argument("sources", nargs="+", help="raw-GPU.tgz tarballs or data/raw/<gpu> folders")
    mr.set_defaults(func=cmd_merge_runs)

    c = sub.add_parser("check", help="validate every raw CSV and env.json; report the provenance of counted rows")
    c.add_argument("--repair", action="store_true", help="move cut final blocks into <file>.partial")
    c.add_argument("--no-provenance", action="store_true",
                   help="skip the report of dirty and digest-less runs behind each experiment's counted rows")
    c.set_defaults(func=cmd_check)

    r = sub.add_parser("reproduce", help="run every notebook through papermill (replay mode by default)")
    r.add_argument("--measure", action="store_true", help="measure this GPU first (MEASURE=True)")
    r.add_argument("--gpu")
    r.add_argument("--only", action="append", help="notebook stem(s) to run, e.g. 01_roofline")
    r.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="a notebook parameter, as papermill's -p (e.g. -p CONTEXTS 2048,16384); checked before any runs")
    r.add_argument("--figures-dir", default=None,
                   help="where figures and tables go (default: the repository's figures/ for its data/, else "
                        "figures/ beside --data-dir); written only when every notebook succeeded")
    r.set_defaults(func=cmd_reproduce)
    for command in dict.fromkeys(sub.choices.values()):  # --data-dir also after the command, as `check --data-dir DIR`
        # (an alias names the same parser again: each parser once)
        command.add_argument("--data-dir", default=argparse.SUPPRESS, help="data folder (default: the repository's data/)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        if argv is None:  # the command itself (not a caller in this process): a second Ctrl-C while the process
            import signal  # exits (its kernels' sockets closing) must not turn exit 130 into a kill by SIGINT

            signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("decodegap: interrupted; nothing was moved into place (figures and executed notebooks as before)",
              file=sys.stderr)
        return 130
    except SystemExit as exc:
        if type(exc).__name__ == "Stopped":  # harness.runs.Stopped: SIGTERM inside a run (a step's time limit)
            print(f"decodegap: stopped by {exc.signal_name}; the run's rows so far are kept, and env.json records "
                  "where it stopped (`stopped`, `rows_written`)", file=sys.stderr)
        raise
    except Exception as exc:
        from decodegap.analysis import cost
        from decodegap import hardware, inputs, records
        from decodegap.harness import models

        expected = (inputs.InputError, hardware.UnknownGPUError, hardware.DirtyTreeError, hardware.EnvError,
                    models.UnknownModelError, records.SchemaError, cost.NoPriceError, FileNotFoundError)
        if isinstance(exc, expected):
            print(f"decodegap: {exc}", file=sys.stderr)
            return 2
        if type(exc).__name__ == "PapermillExecutionError":  # a notebook stopped: its error, not papermill's stack
            copy = getattr(exc, "failed_copy", None)
            print(f"decodegap: {exc.ename}: {exc.evalue} (cell {getattr(exc, 'exec_count', '?')!s} of the notebook "
                  f"above{f'; its executed copy: {copy}' if copy else ''}; no figure was written)", file=sys.stderr)
            return 1
        raise
