#!/usr/bin/env bash
# The GPU checks the open issues wait for, in priority order, in one call on a lent GPU machine.
#
#   JOBS="lab05 lab04" BUDGET_S=570 OUT=/tmp/out bash benchmarks/device_run.sh
#
# Each job runs under `timeout`, alone on the GPU (timings beside another job are not comparable),
# and is skipped with a message when fewer seconds are left than it took last time (SECONDS_OF).
# Results land in $OUT/r (lab reports and executed notebooks, benchmark JSON, doctor, nvidia-smi);
# commit them under benchmarks/<device>/ with the commit they ran at (`git log -1`: a lent machine's
# copy of .git can be older than the tree it ran). A machine without the Jupyter stack takes it from
# .whl/ (py3.12 wheels, see ../benchmarks/nvidia-h100-80gb-hbm3/README.md for the download line).
set -uo pipefail
T0=$(date +%s)  # the budget covers the setup below too: the call's own limit does
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
BUDGET_S=${BUDGET_S:-570}
JOBS=${JOBS:-"lab05 bf16-loss lab04 mfu-medium lab02 precision lab01"}
# Since 2026-11-27 a lent machine has 15 minutes of device time in all, its start (minutes) included: one call
# of BUDGET_S=540 at most, so pick one group by the issue that most needs it, in this order:
#   issue 15: JOBS="lab02" (its full profile has not run since the command-buffer-off trace and the CUPTI skip)
#   issue 18: JOBS="lab05 mfu-medium" (Lab 05 at the final commit; bench_mfu's gpt2-medium step for issue 15)
#   issue 17: JOBS="lab04 peak" (bf16 >= 2x TF32, the fp8 GEMM assert; Lab 00's bandwidth roof)
# With 30 minutes, two more: JOBS="precision probe" | "lab00 lab01". Peak's and probe's times are estimates.
# "reexport" (~1 min) exports Lab 05's shipped program again with this machine's newer jaxlib (on the CPU).

# Seconds each job took on an H100/H200 with the GPU to itself (lab02 468 s, lab05 301 s; the others
# beside other work, or estimated): a job is not started with less than this left.
declare -A SECONDS_OF=([lab00]=90 [lab01]=120 [lab02]=480 [lab03]=180 [lab04]=330 [lab05]=310 [lab06]=70
                       [mfu-medium]=200 [precision]=240 [serve]=110 [t4]=240 [bf16-loss]=360 [peak]=120 [probe]=120
                       [reexport]=60)

if [ -d .whl ] && ! python3 -c "import papermill" 2>/dev/null; then
  pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >/dev/null 2>&1 || { echo "installing .whl/ failed"; exit 2; }
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
mkdir -p "$OUT/r"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/r/nvidia-smi.txt" 2>&1
git log -1 --format='%H %s' > "$OUT/r/commit.txt" 2>/dev/null || true
python3 -m labkit.course.cli doctor > "$OUT/r/doctor.txt" 2>&1

left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }  # seconds of the budget still unspent

lab() {  # lab NN [VAR=value...]: the full profile of one lab, in $OUT/r/lab<NN><suffix>, within what is left
  local nn=$1; shift
  env "$@" timeout "$(left)" python3 -m labkit.course.cli run --profile full --out "$OUT/r/lab$nn${SUFFIX:-}" "$nn" \
    2>&1 | tail -4
}

for job in $JOBS; do
  LEFT=$(left)
  need=${SECONDS_OF[$job]:-}
  if [ -z "$need" ]; then echo "unknown job '$job': one of ${!SECONDS_OF[*]}"; continue; fi
  if [ "$LEFT" -lt "$need" ]; then echo "skip $job: $LEFT s left, it took ~$need s"; continue; fi
  echo "== $job ($LEFT s left)"
  case $job in
    lab0[0-6]) lab "${job#lab}" ;;
    t4) SUFFIX=_t4 lab 00 LABKIT_EMULATE=t4; SUFFIX=_t4 lab 01 LABKIT_EMULATE=t4 ;;
    mfu-medium) timeout "$LEFT" python3 benchmarks/bench_mfu.py --model gpt2-medium --batch 16 \
                  --out "$OUT/r/mfu_gpt2-medium.json" 2>&1 | grep -v Warning | tail -8 ;;
    precision) timeout "$LEFT" python3 benchmarks/bench_precision.py --out "$OUT/r/precision.json" 2>&1 \
                 | grep -v Warning | tail -16 ;;
    bf16-loss) timeout "$LEFT" python3 benchmarks/diag_bf16_loss.py --out "$OUT/r/bf16_loss.json" 2>&1 \
                 | grep -v Warning | tail -10 ;;
    probe) timeout "$LEFT" python3 benchmarks/probe_shapes.py --hlo --out "$OUT/r/shape_probe.json" 2>&1 \
             | grep -v Warning | tail -24 ;;
    peak) timeout "$LEFT" python3 benchmarks/bench_peak.py --out "$OUT/r/peak.json" 2>&1 | grep -v Warning | tail -8 ;;
    serve) timeout "$LEFT" python3 benchmarks/bench_serve.py --batches 1 32 --out "$OUT/r/serve.json" 2>&1 \
             | grep -v Warning | tail -12 ;;
    reexport) timeout "$LEFT" python3 datasets/lab05_reference/build.py --reexport 2>&1 | tail -3 \
                && cp -r datasets/lab05_reference "$OUT/r/lab05_reference" ;;  # the artifact from this jaxlib
  esac
  echo "   $job ended at $(( $(date +%s) - T0 )) s"
done
(cd "$OUT" && tar czf r.tgz r && rm -rf r) && echo "results: $OUT/r.tgz"
