#!/usr/bin/env bash
# The GPU checks the open issues wait for, in one call on a lent GPU machine (the device tool's `run`,
# with carry [".whl"] where the machine lacks the Jupyter stack):
#
#   JOBS="lab02" BUDGET_S=540 OUT=$OUT bash benchmarks/device_run.sh
#
# Each job runs under `timeout`, alone on the GPU (timings beside another job are not comparable),
# and is skipped with a message when fewer seconds are left than it took last time (SECONDS_OF).
# Results are written to a scratch folder and packed into $OUT/r.tgz after every job (the device tool
# returns at most 8 files from $OUT, so a call stopped at its limit still brings back the jobs that
# finished): lab reports and executed notebooks, benchmark JSON, doctor, nvidia-smi, jobs.txt with each
# job's exit status (124: timed out) and log.txt with every job's whole output. Commit them under
# benchmarks/<device>/ with the commit they ran at (`git log -1`: a lent machine's copy of .git can be
# older than the tree it ran). A machine without
# the Jupyter stack takes it from .whl/ (py3.12 wheels, see benchmarks/nvidia-h100-80gb-hbm3/README.md).
# Exit status: 0 when every job that started ended 0; 1 when one failed or timed out; 2 when setup failed.
set -uo pipefail
T0=$(date +%s)  # the budget covers the setup below too: the call's own limit does
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
BUDGET_S=${BUDGET_S:-540}
JOBS=${JOBS:-"lab02"}
# A lent machine has 15 minutes of device time in all, its start (minutes) included: one call of
# BUDGET_S=540 at most (a warm machine takes a second call at once: the 2026-11-27 session ran three), so pick
# one group by the issue that most needs it, in this order:
#   issue 15: JOBS="mfu-medium slowdown" (the Flax step with the embedding's one-hot gradient; which of Lab 02's
#             cells slows its JAX step), then "lab02" (its last full profile: 2026-11-27 at fa1b186)
#   issue 18: JOBS="lab05" (Lab 05 at the final commit)
#   issue 17: JOBS="lab04" (bf16 >= 2x TF32, the fp8 GEMM assert)
# With 30 minutes, more: JOBS="precision probe" | "lab00 lab01" | "bf16-loss" | "t4". Peak's and probe's
# times are estimates. "reexport" (~1 min, on the CPU) exports Lab 05's shipped program again with this
# machine's newer jaxlib; it rewrites datasets/lab05_reference, so it must come after "lab05" (refused before).

# Seconds each job took on an H100/H200 with the GPU to itself (lab02 468 and 436 s on an H100, mfu-medium 151 s
# before it also timed a copy without command buffers and profiled torch, lab05 320 s on an H100, 301 s on an H200;
# the others beside other work, or estimated): a job is not started with less left.
declare -A SECONDS_OF=([lab00]=90 [lab01]=120 [lab02]=480 [lab03]=180 [lab04]=330 [lab05]=340 [lab06]=70
                       [mfu-medium]=200 [slowdown]=200 [precision]=240 [serve]=110 [t4]=240 [bf16-loss]=360 [peak]=120 [probe]=120
                       [reexport]=60)

if [ -d .whl ] && ! python3 -c "import papermill" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl >/dev/null 2>&1 || { echo "installing .whl/ failed"; exit 2; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1  # labkit from this checkout, kernels too
WORK=$(mktemp -d)  # results gather here; only r.tgz goes under $OUT
R=$WORK/r
mkdir -p "$R" "$OUT" || { echo "cannot create $OUT"; exit 2; }
OUT=$(cd "$OUT" && pwd)  # absolute: pack() writes it from inside $WORK
pack() { (cd "$WORK" && tar czf "$OUT/r.tgz.part" r && mv "$OUT/r.tgz.part" "$OUT/r.tgz"); }
JOB=""  # the running job's `timeout`: it leads its own process group (GNU timeout without --foreground)
stop() {  # a call stopped at its limit: end the job's whole group, then bring back what finished
  [ -n "$JOB" ] && kill -TERM -- "-$JOB" 2>/dev/null
  pack; exit "$1"
}
trap 'stop 143' TERM
trap 'stop 130' INT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$R/nvidia-smi.txt" 2>&1
git log -1 --format='%H %s' > "$R/commit.txt" 2>/dev/null || true
python3 -m labkit.course.cli doctor > "$R/doctor.txt" 2>&1

left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }  # seconds of the budget still unspent

run() {  # run LINES CMD...: CMD under what is left of the budget, its last LINES lines shown; returns its status
  local lines=$1 l; shift
  l=$(left)
  if [ "$l" -le 0 ]; then echo "   budget spent: not started"; return 124; fi  # `timeout 0` would not limit it
  # In the background, then `wait`: a trapped SIGTERM interrupts `wait`, not a foreground pipeline.
  timeout "$l" "$@" > "$R/job.log" 2>&1 &
  JOB=$!
  wait "$JOB"
  local rc=$?
  JOB=""
  grep -v Warning "$R/job.log" | tail -"$lines"
  cat "$R/job.log" >> "$R/log.txt" && rm -f "$R/job.log"  # every job's whole output, in the tarball
  return "$rc"
}

lab() {  # lab NN [VAR=value...]: the full profile of one lab, in $R/lab<NN><suffix>
  local nn=$1; shift
  run 4 env "$@" python3 -m labkit.course.cli run --profile full --out "$R/lab$nn${SUFFIX:-}" "$nn"
}

failed=0 seen=" "
for job in $JOBS; do
  LEFT=$(left)
  need=${SECONDS_OF[$job]:-}
  if [ -z "$need" ]; then echo "unknown job '$job': one of ${!SECONDS_OF[*]}"; failed=1; continue; fi
  if [ "$job" = reexport ] && [[ " $JOBS " == *" lab05 "* ]] && [[ "$seen" != *" lab05 "* ]]; then
    echo "skip reexport: it comes before lab05, which must run the artifact as shipped"; failed=1; continue
  fi
  if [ "$LEFT" -lt "$need" ]; then echo "skip $job: $LEFT s left, it took ~$need s"; continue; fi
  echo "== $job ($LEFT s left)"
  case $job in
    lab0[0-6]) lab "${job#lab}" ;;
    t4) t4=0; SUFFIX=_t4 lab 00 LABKIT_EMULATE=t4 || t4=$?; SUFFIX=_t4 lab 01 LABKIT_EMULATE=t4 || t4=$?
        (exit "$t4") ;;  # both labs run; the job fails if either did
    mfu-medium) run 12 python3 benchmarks/bench_mfu.py --model gpt2-medium --batch 16 --out "$R/mfu_gpt2-medium.json" ;;
    slowdown) run 10 python3 benchmarks/diag_jax_slowdown.py --out "$R/jax_slowdown.json" ;;
    precision) run 16 python3 benchmarks/bench_precision.py --out "$R/precision.json" ;;
    bf16-loss) run 10 python3 benchmarks/diag_bf16_loss.py --out "$R/bf16_loss.json" ;;
    probe) run 24 python3 benchmarks/probe_shapes.py --hlo --out "$R/shape_probe.json" ;;
    peak) run 8 python3 benchmarks/bench_peak.py --out "$R/peak.json" ;;
    serve) run 12 python3 benchmarks/bench_serve.py --batches 1 32 --out "$R/serve.json" ;;
    reexport) run 3 python3 datasets/lab05_reference/build.py --reexport \
                && cp -r datasets/lab05_reference "$R/lab05_reference" ;;  # the artifact from this jaxlib
  esac
  rc=$?
  seen="$seen$job "
  [ "$rc" -eq 0 ] || failed=1
  echo "$job rc=$rc $(( $(date +%s) - T0 ))s" >> "$R/jobs.txt"
  echo "   $job ended at $(( $(date +%s) - T0 )) s, rc=$rc$([ "$rc" -eq 124 ] && echo ' (timed out)')"
  pack
done
if pack; then
  rm -rf "$WORK"; echo "results: $OUT/r.tgz"
else
  echo "packing the results failed: they are in $R"; failed=1
fi
exit "$failed"
