#!/usr/bin/env bash
# The peer's source for bench/peer_gpt_fast.py: gpt-fast (github.com/pytorch-labs/gpt-fast) at the pinned commit,
# in .peers/gpt-fast (git-ignored: never part of this repository). Usage, from the repository root:
#   bash bench/fetch_gpt_fast.sh [SRC]      # SRC: a clone or bare mirror of gpt-fast to copy from (default: GitHub)
# A folder there already is verified, not fetched again. On a machine without network, run this where there is one
# and copy .peers/gpt-fast to the same place in the GPU machine's checkout (its COMMIT file says which commit it is).
set -euo pipefail
COMMIT=32971d3129541c5bfb4f715abc33d1c5f408d204  # = decodegap.harness.peers.GPT_FAST_COMMIT
DEST=.peers/gpt-fast
SRC=${1:-https://github.com/pytorch-labs/gpt-fast.git}
refuse() { echo "fetch_gpt_fast: $*" >&2; exit 1; }

[ -f lib/decodegap/harness/peers.py ] || refuse "run it from the repository root"
if [ ! -d "$DEST" ]; then
  command -v git >/dev/null || refuse "no git here to fetch gpt-fast; copy a fetched $DEST from another machine"
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  git init -q "$TMP/repo"
  git -C "$TMP/repo" fetch -q --depth 1 "$SRC" "$COMMIT" 2>/dev/null \
    || git -C "$TMP/repo" fetch -q "$SRC" 2>/dev/null \
    || refuse "cannot fetch gpt-fast from $SRC (no network?); copy a fetched $DEST from another machine"
  git -C "$TMP/repo" cat-file -e "$COMMIT^{commit}" 2>/dev/null || refuse "$SRC has no commit $COMMIT"
  mkdir -p "$DEST"
  git -C "$TMP/repo" archive "$COMMIT" | tar x -C "$DEST"
  echo "$COMMIT" > "$DEST/COMMIT"
fi
# verify: the commit recorded, and the files the step imports as that commit holds them (their git blob ids)
[ -f "$DEST/COMMIT" ] || refuse "$DEST has no COMMIT file; remove it and fetch again"
[ "$(cut -d' ' -f1 < "$DEST/COMMIT")" = "$COMMIT" ] || refuse "$DEST holds $(cat "$DEST/COMMIT"), not $COMMIT; remove it and fetch again"
for pair in model.py:c26579956664bd62ed72f896f51417a781589096 quantize.py:fb566421f68f84aeca22c2ab91f5bff53c819c13; do
  f=${pair%%:*} want=${pair#*:}
  [ -f "$DEST/$f" ] || refuse "$DEST lacks $f; remove it and fetch again"
  if command -v git >/dev/null; then
    [ "$(git hash-object "$DEST/$f")" = "$want" ] || refuse "$DEST/$f is not commit $COMMIT's (blob $want); remove it and fetch again"
  fi
done
echo "fetch_gpt_fast: gpt-fast $COMMIT in $(cd "$DEST" && pwd)"
