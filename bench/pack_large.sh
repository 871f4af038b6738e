#!/usr/bin/env bash
# The committed files too large to travel with the working tree to a GPU machine (its limit, with what a call carries,
# is 64 MiB), packed for the machine: tracked files of at least LARGE_MIB MiB (default 8) go into .largepack/large.txz
# (xz: the CSVs shrink about 30-fold), with their sha256 in .largepack/SHA256SUMS. Take them out of the index for the
# call (`git rm --cached -q FILE ...`, the paths listed in .git/info/exclude so they stay out; `git reset -q FILE ...`
# after) and carry .largepack: bench/measure.sh puts each file back where the copied tree lacks it, so a sweep or a
# profiled step there sees the rows measured before (a step profiled already is not profiled again).
# Usage (repository root): bash bench/pack_large.sh            prints the files packed, one a line
set -euo pipefail
LARGE_MIB=${LARGE_MIB:-8}
if ! [[ "$LARGE_MIB" =~ ^[0-9]+$ && "$LARGE_MIB" -gt 0 ]]; then
  echo "pack_large.sh: LARGE_MIB='$LARGE_MIB': give a whole number of MiB above 0, e.g. LARGE_MIB=8" >&2
  exit 2
fi
[ -e .git ] || { echo "pack_large.sh: run it from the repository root (no .git here)" >&2; exit 2; }
files=()
while IFS= read -r -d '' f; do
  [ -f "$f" ] && [ "$(stat -c %s "$f")" -ge $((LARGE_MIB * 1024 * 1024)) ] && files+=("$f")
done < <(git ls-files -z)
mkdir -p .largepack
rm -f .largepack/large.txz .largepack/SHA256SUMS
if [ ${#files[@]} -eq 0 ]; then
  echo "pack_large.sh: no tracked file of $LARGE_MIB MiB or more; nothing packed" >&2
  exit 0
fi
tar cJf .largepack/large.txz.partial "${files[@]}"
sha256sum "${files[@]}" > .largepack/SHA256SUMS
mv .largepack/large.txz.partial .largepack/large.txz
printf '%s\n' "${files[@]}"
