#!/usr/bin/env bash
# Run a hightide command as N shards side by side with GNU parallel, then merge them.
#
#   shards/parallel.sh N OUT_DIR COMMAND ARGS...
#   shards/parallel.sh 4 out explore scenarios/explore/unsafe-nemesis.toml --seeds 2000
#   shards/parallel.sh 2 out sweep sweeps/durability.toml        # the report goes to reports/
#
# Each shard writes OUT_DIR/shard-K.jsonl; `hightide merge` prints what the one unsharded
# command would have printed (for a sweep, it writes the report) and exits as it would.
# A shard's exit status 1 (it found a failing run) is a result, not an error; anything
# else stops the others. HIGHTIDE names the binary (default: target/release/hightide).
set -euo pipefail

if [ $# -lt 3 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
n=$1
out=$2
shift 2
hightide=${HIGHTIDE:-target/release/hightide}
mkdir -p "$out"
command=$(printf '%q ' "$hightide" "$@")
seq 1 "$n" | parallel --halt now,fail=1 -j "$n" \
  "$command --shard {}/$n > $(printf '%q' "$out")/shard-{}.jsonl; test \$? -le 1"
files=()
for k in $(seq 1 "$n"); do files+=("$out/shard-$k.jsonl"); done
exec "$hightide" merge "${files[@]}"
