#!/usr/bin/env bash
# Runs on the device machine: Nsight Compute on the MoE GEMM kernels of `bench moe` (DeepSeek-V3
# EP8 shape) at a few token counts, for where the time goes (speed of light, occupancy, warp
# stalls, memory). Carried binaries as in device-profile.sh. Output: $OUT/ncu.tgz.
#   NVFP4_BIN; NVFP4_NCU_TOKENS (default "16 512 4096"); NVFP4_MOE_GEMM as for the kernels;
#   NVFP4_NCU_MODE=times: only every kernel's duration (gpu__time_duration) of the last run.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/ncu}
res=$OUT/res
mkdir -p "$res"
. tests/gpu/device-env.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu"; exit 1; }
if [ "${NVFP4_NCU_MODE:-sections}" = times ]; then
    # every kernel's duration over one bench run (3 warm-up runs + 1), for the non-GEMM share
    for t in ${NVFP4_NCU_TOKENS:-16 512 4096}; do
        timeout 120 "$NCU" --clock-control none --metrics gpu__time_duration.sum \
            "$BIN" bench moe --device cuda --shape deepseek-v3 --tokens "$t" --runs 1 \
            --precision w4a16 >"$res/times-$t.txt" 2>&1
        echo "tokens $t: rc $?"
        python3 - "$res/times-$t.txt" <<'PY'
import re, sys
names, rows = None, []
cur = None
for line in open(sys.argv[1]):
    m = re.match(r"\s+(\S.*?)\s*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
    if m:
        cur = m.group(1).split("(")[0].strip()
        continue
    m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m and cur:
        v = float(m.group(2).replace(",", ""))
        u = m.group(1)
        v = v / 1000 if u.startswith("n") else v * 1000 if u.startswith("m") else v
        rows.append((cur, v))
        cur = None
# the last run: the kernels after the last route_kernel
last = max(i for i, r in enumerate(rows) if "route" in r[0]) if any("route" in r[0] for r in rows) else 0
tot = 0
for n, v in rows[last + 1:]:
    print("  %-60s %9.1f us" % (n[:60], v)); tot += v
print("  total %.1f us" % tot)
PY
    done
    tar czf "$OUT/ncu.tgz" -C "$res" .
    exit 0
fi
for t in ${NVFP4_NCU_TOKENS:-16 512 4096}; do
    timeout 150 "$NCU" --clock-control none ${NVFP4_NCU_DETAILS:+--print-details all} -k regex:moe_gemm --launch-skip 6 --launch-count 2 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SchedulerStats --section InstructionStats --section LaunchStats --section ComputeWorkloadAnalysis \
        "$BIN" bench moe --device cuda --shape deepseek-v3 --tokens "$t" --runs 1 \
        --precision w4a16 >"$res/ncu-$t.txt" 2>&1
    echo "tokens $t: rc $?"
    grep -E "moe_gemm|Duration|Bank Conflicts|Issue Slots Busy|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Compute \(SM\) Throughput|Theoretical Occupancy|Block Limit|Stall|L2 Hit" "$res/ncu-$t.txt" | head -60
done
tar czf "$OUT/ncu.tgz" -C "$res" .
