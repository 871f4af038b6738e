"""A peer in the same run (notebook 06): gpt-fast's compiled decode (its model.py at the pinned commit, the package's
random weights, bf16 and int4 at group size 128) timed beside the package's best levers (harness.peers.PEER_LEVERS)
in one process, on one model and context, every cell checked before it is timed (decodegap.harness.peers).
Rows: data/raw/<gpu>/peers.csv (records.PEERS); the run's env.json entry records gpt-fast's commit (peer_source).
Needs gpt-fast in .peers/gpt-fast (bash bench/fetch_gpt_fast.sh) and a CUDA device; refuses in one line, before
anything is written, without them, or for an unknown model or GPU key.
Usage (repository root, GPU): PYTHONPATH=lib python3 bench/peer_gpt_fast.py --gpu h200 [--model llama-3.1-8b]
    [--ctx 2048] [--quants bf16,int4] [--warmup 5] [--steps 30] [--peer .peers/gpt-fast] [--again]
"""

import argparse
import sys
from pathlib import Path

from decodegap.harness import models, peers
from decodegap.inputs import InputError

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--gpu", default=None, help="the GPU key (data/specs/gpus.csv); default: detected")
parser.add_argument("--model", default="llama-3.1-8b")
parser.add_argument("--ctx", type=int, default=2048)
parser.add_argument("--quants", default="bf16,int4")
parser.add_argument("--warmup", type=int, default=5)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--peer", default=str(peers.GPT_FAST_DIR), help="the gpt-fast folder (default .peers/gpt-fast)")
parser.add_argument("--device", default="cuda")
parser.add_argument("--data", default=None, help="the data folder (default the repository's data/)")
parser.add_argument("--again", action="store_true",
                    help="measure a (model, ctx) whose timed steps peers.csv holds already (a new run beside them)")


def main(argv=None) -> int:
    args = parser.parse_args(argv)
    quants = tuple(q for q in args.quants.split(",") if q)
    unknown = [q for q in quants if q not in ("bf16", "int4")]
    if unknown or not quants:
        print(f"peer_gpt_fast: --quants takes bf16 and/or int4, got {args.quants!r}", file=sys.stderr)
        return 2
    try:
        _, gpu, _ = peers.refusal(args.model, args.gpu, args.device, args.data, Path(args.peer))
    except (peers.PeerUnavailable, models.UnknownModelError, InputError) as exc:
        print(f"peer_gpt_fast: {exc}", file=sys.stderr)
        return 2
    if not args.again and peers.measured(gpu, args.model, args.ctx, args.data):
        print(f"peer_gpt_fast: {args.model} at ctx {args.ctx} is in peers.csv already (--again measures it again)")
        return 0
    run_id = peers.measure(args.model, args.ctx, args.gpu, args.data, Path(args.peer), args.device, args.warmup,
                           args.steps, args.seed, quants)
    print(f"peer_gpt_fast: run {run_id}, rows in peers.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
