#!/bin/sh
# Simulator scale check: 1,024 ranks (256 nodes of 4) on one machine, ImageNet-1k
# sample count, PyTorch DistributedSampler order, batch 32 per rank.
#
#   env/run scheduler/bench/run_scale_bench.sh [BUILD_DIR] [OUT_DIR] [EPOCHS]
set -eu
BUILD=${1:-build/sched-plan}
OUT=${2:-$BUILD/bench}
EPOCHS=${3:-10}
TOOL=$(find "$BUILD" -name prescient-schedule -type f -perm -u+x | head -n 1)
[ -n "$TOOL" ] || { echo "no prescient-schedule under $BUILD" >&2; exit 1; }
mkdir -p "$OUT"
echo "load before: $(cat /proc/loadavg)"
/usr/bin/time -v "$TOOL" generate --source torch-distributed --store lists --samples 1281167 \
  --epochs "$EPOCHS" --ranks 1024 --ranks-per-node 4 --batch-size 32 --seed 1 --row-bytes 110000 \
  --output "$OUT/scale1024.sched" 2> "$OUT/scale_generate.err"
grep -E 'wrote|Elapsed|Maximum resident|User time' "$OUT/scale_generate.err"
/usr/bin/time -v "$TOOL" simulate "$OUT/scale1024.sched" --cache 1% --quiet \
  > "$OUT/scale_simulate.out" 2> "$OUT/scale_simulate.err"
sed -n '1,14p' "$OUT/scale_simulate.out"
grep -E 'Elapsed|Maximum resident|User time|System time' "$OUT/scale_simulate.err"
echo "load after: $(cat /proc/loadavg)"
