#!/usr/bin/env bash
# cache/io storage benchmark: cold random single-row reads vs coalesced runs vs
# one sequential scan, on contiguous and gzip-chunked copies of a 20,000 x 64 KiB
# dataset (one at a time, each deleted after its run; at most ~1.3 GB on disk).
#
#   env/run cache/io/bench/run_bench.sh [BUILD_DIR] [SCRATCH_DIR] [-- extra prescient-io-bench flags]
#
# BUILD_DIR defaults to $PRESCIENT_BUILD_DIR or build/dev; SCRATCH_DIR to
# BUILD_DIR/io-bench (not /tmp: env/run gives every command a private tmpfs /tmp,
# which is memory, not storage).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:-${PRESCIENT_BUILD_DIR:-build/dev}}"
scratch="${2:-$build/io-bench}"
shift $(( $# > 2 ? 2 : $# ))
[[ "${1:-}" == "--" ]] && shift
bench="$build/cache/io/prescient-io-bench"
[[ -x "$bench" ]] || { echo "run_bench.sh: $bench not built" >&2; exit 2; }
mkdir -p "$scratch"
trap 'rm -f "$scratch"/bench_*.h5' EXIT

for kind in contiguous gzip; do
  file="$scratch/bench_$kind.h5"
  echo "=== $kind"
  python3 "$here/make_dataset.py" "$kind" "$file" "$scratch/layout_$kind.txt"
  if [[ "$kind" == gzip ]]; then
    # Per-sample chunk decoding costs milliseconds per row: time 1,000 rows of it,
    # and skip the small windows (each would decode most chunks again).
    "$bench" --layout "$scratch/layout_$kind.txt" --single-rows 1000 --windows 4096,all "$@"
  else
    "$bench" --layout "$scratch/layout_$kind.txt" --single-rows 20000 "$@"
  fi
  rm -f "$file"
done
