#!/bin/sh
# ImageNet-1k shape benchmark of the planner and the simulator (issue 3, section 5).
#
#   env/run scheduler/bench/run_imagenet_bench.sh [BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR (default build/sched-plan) must hold prescient-schedule and
# prescient-plan-bench; OUT_DIR (default BUILD_DIR/bench) receives the schedule
# files (about 460 MB each), the logs, CSV/JSON and plots. Peak memory and
# times come from /usr/bin/time -v (Debian package 'time', in env/packages.txt).
# Shape: 1,281,167 samples, 90 epochs, 16 ranks on 4 nodes, batch 256 per rank,
# node cache 25% of the dataset, 110,000 bytes per sample (135 GB / 1.28 M).
set -eu
BUILD=${1:-build/sched-plan}
OUT=${2:-$BUILD/bench}
TOOL=$(find "$BUILD" -name prescient-schedule -type f -perm -u+x | head -n 1)
PHASES=$(find "$BUILD" -name prescient-plan-bench -type f -perm -u+x | head -n 1)
[ -n "$TOOL" ] || { echo "no prescient-schedule under $BUILD" >&2; exit 1; }
mkdir -p "$OUT"
SHAPE="--samples 1281167 --epochs 90 --ranks 16 --ranks-per-node 4 --batch-size 256 --seed 1 --row-bytes 110000"

timed() {  # timed NAME CMD...: runs CMD under /usr/bin/time -v, keeps the log
  name=$1; shift
  echo "== $name: $*"
  /usr/bin/time -v "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  grep -vE '^ *(Average|Exit|Page|Swaps|File|Socket|Signals|Percent|Command|Voluntary|Involuntary|Minor|Major)' "$OUT/$name.err" \
    | grep -E 'epoch order|remap|wrote|simulated|User time|System time|Elapsed|Maximum resident' || true
}

echo "load before: $(cat /proc/loadavg)"
# 1. generate with every SOLAR optimisation (epoch order, remap, balance, sort).
timed generate_solar "$TOOL" generate --source plan --plan "order=global,cache=25%,solar=on" \
  $SHAPE --output "$OUT/imagenet_solar.sched"
# 2. simulate it (all policies, NoPFS Lassen model).
timed simulate_solar "$TOOL" simulate "$OUT/imagenet_solar.sched" --cache 25% --quiet \
  --csv "$OUT/imagenet_solar.csv" --json "$OUT/imagenet_solar.json" --plot "$OUT/imagenet_solar.png"
# 3. the unplanned baseline: PyTorch DistributedSampler (shuffle, seed 1), lists.
timed generate_torch "$TOOL" generate --source torch-distributed --store lists $SHAPE \
  --output "$OUT/imagenet_torch.sched"
timed simulate_torch "$TOOL" simulate "$OUT/imagenet_torch.sched" --cache 25% --quiet \
  --json "$OUT/imagenet_torch.json" --plot "$OUT/imagenet_torch.png"
# 4. a smaller cache (5% per node), where the epoch order has something to gain.
timed generate_solar5 "$TOOL" generate --source plan --plan "order=global,cache=5%,solar=on" \
  $SHAPE --output "$OUT/imagenet_solar5.sched"
timed simulate_solar5 "$TOOL" simulate "$OUT/imagenet_solar5.sched" --cache 5% --quiet
timed generate_global "$TOOL" generate --source plan --plan "order=global" \
  $SHAPE --output "$OUT/imagenet_global.sched"
timed simulate_global5 "$TOOL" simulate "$OUT/imagenet_global.sched" --cache 5% --quiet
# 5. where the planner's time goes (in memory, no file).
if [ -n "$PHASES" ]; then
  timed phases_solar "$PHASES" 1281167 90 16 4 256 "cache=25%,solar=on"
  timed phases_solar5 "$PHASES" 1281167 90 16 4 256 "cache=5%,solar=on"
  cat "$OUT/phases_solar.out" "$OUT/phases_solar5.out"
fi
echo "load after: $(cat /proc/loadavg)"
for f in simulate_solar simulate_torch simulate_solar5 simulate_global5; do
  echo "== $f"; sed -n '1,14p' "$OUT/$f.out"
done
