#!/usr/bin/env bash
# Runs on the device machine: Nsight Compute on the MoE GEMM kernels of `bench moe` (DeepSeek-V3
# EP8 shape) at a few token counts, for where the time goes (speed of light, occupancy, warp
# stalls, memory). Carried binaries as in device-profile.sh. Output: $OUT/ncu.tgz.
#   NVFP4_BIN; NVFP4_NCU_TOKENS (default "16 512 4096"); NVFP4_MOE_GEMM as for the kernels.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/ncu}
res=$OUT/res
mkdir -p "$res"
BIN=$PWD/${NVFP4_BIN:-build-gpu/nvfp4tool}
deps=/tmp/deps
mkdir -p "$deps"
for f in .debs/*.deb; do dpkg -x "$f" "$deps"; done
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu"; exit 1; }
for t in ${NVFP4_NCU_TOKENS:-16 512 4096}; do
    timeout 150 "$NCU" --clock-control none -k regex:moe_gemm --launch-skip 6 --launch-count 2 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section LaunchStats --section ComputeWorkloadAnalysis \
        "$BIN" bench moe --device cuda --shape deepseek-v3 --tokens "$t" --runs 1 \
        --precision w4a16 >"$res/ncu-$t.txt" 2>&1
    echo "tokens $t: rc $?"
    grep -E "moe_gemm|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Compute \(SM\) Throughput|Theoretical Occupancy|Block Limit|Stall|L2 Hit" "$res/ncu-$t.txt" | head -60
done
tar czf "$OUT/ncu.tgz" -C "$res" .
