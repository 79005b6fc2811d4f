#!/usr/bin/env bash
# Runs on the device machine with carried binaries (see device-profile.sh): kernel versions side
# by side, for GEMM work. Per version in NVFP4_MOE_VERSIONS (default "v6 v5"): gpu_test_moe_cuda
# under NVFP4_MOE_GEMM=version, then `bench moe` (W4A16, no baseline) on NVFP4_MOE_SHAPES
# (default deepseek-v3) at NVFP4_MOE_TOKENS, the versions interleaved twice (A B A B) so that a
# drift of the machine shows; then tests/gpu/device-ncu.sh times for the first version and, with
# NVFP4_GEMM_NCU=1, its sections. Outputs under $OUT, tarred to $OUT/gemm.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/gemm}
res=$OUT/res
mkdir -p "$res"
. tests/gpu/device-env.sh
TESTS=$PWD/${NVFP4_TESTS:-build-gpu/tests}
versions=${NVFP4_MOE_VERSIONS:-v6 v5}
tokens=${NVFP4_MOE_TOKENS:-1,16,64,128,256,512,1024,4096}
rc=0
echo "commit ${NVFP4_COMMIT:-unknown}" | tee "$res/commit.txt"
for v in $versions; do
    if NVFP4_MOE_GEMM=$v "$TESTS/gpu_test_moe_cuda" >"$res/test-moe-$v.log" 2>&1; then
        echo "PASS gpu_test_moe_cuda $v"
    else
        echo "FAIL gpu_test_moe_cuda $v"; tail -20 "$res/test-moe-$v.log"; rc=1
    fi
done
for round in 1 2; do
    for s in ${NVFP4_MOE_SHAPES:-deepseek-v3}; do
        for v in $versions; do
            f=$res/moe-$v-$s-r$round.json
            NVFP4_MOE_GEMM=$v "$BIN" bench moe --device cuda --shape "$s" --tokens "$tokens" \
                --precision w4a16 --json >"$f" 2>"$res/moe-$v-$s-r$round.err" ||
                { echo "bench $v $s failed"; tail -5 "$res/moe-$v-$s-r$round.err"; rc=1; continue; }
            python3 - "$f" "$v $s r$round" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2] + ": " + "  ".join("%d:%.3f(%.0f%%)" % (r["tokens"], r["ms"], r["pct_of_copy"])
                                    for r in d["results"]))
PY
        done
    done
done
first=${versions%% *}
# Where the time of a small run goes between kernels: Nsight Systems' GPU trace of 16 tokens
# (kernel start and end times), when nsys is there.
NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
    for t in ${NVFP4_NSYS_TOKENS:-16 512}; do
        NVFP4_MOE_GEMM=$first timeout 120 "$NSYS" profile -o "$res/nsys-$t" --force-overwrite true \
            "$BIN" bench moe --device cuda --shape deepseek-v3 --tokens "$t" --runs 5 \
            --precision w4a16 >"$res/nsys-$t.log" 2>&1
        timeout 120 "$NSYS" stats --report cuda_gpu_trace --format csv --output "$res/nsys-$t" \
            "$res/nsys-$t.nsys-rep" >>"$res/nsys-$t.log" 2>&1
        python3 - "$res/nsys-${t}_cuda_gpu_trace.csv" "$t" <<'PY' || true
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
k = [r for r in rows if r.get("Name") and "[CUDA" not in r["Name"]]
start = lambda r: int(r["Start (ns)"]); dur = lambda r: int(r["Duration (ns)"])
k.sort(key=start)
last = max(i for i, r in enumerate(k) if "route" in r["Name"])
prev_end = start(k[last]) + dur(k[last])
print("nsys %s tokens, the last run: kernel (us) and gap before it (us)" % sys.argv[2])
for r in k[last + 1:]:
    print("  %-40s %8.1f  gap %6.1f" % (r["Name"][:40], dur(r) / 1e3, (start(r) - prev_end) / 1e3))
    prev_end = start(r) + dur(r)
PY
    done
else
    echo "no nsys"
fi
# SASS of the GEMM kernels (instruction histograms), when cuobjdump is there.
if command -v cuobjdump >/dev/null || [ -x /usr/local/cuda/bin/cuobjdump ]; then
    CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
    # the whole SASS (-fun takes no part of a mangled name), the GEMM kernels' kept
    "$CUOBJ" -sass "$BIN" >"$res/sass-all.txt" 2>&1
    python3 - "$res/sass-all.txt" "$res/sass-gemm.txt" <<'PY' >"$res/sass-hist.txt"
import re, sys, collections
text = open(sys.argv[1]).read()
keep = open(sys.argv[2], "w")
for f in re.split(r"\n\s*Function : ", text)[1:]:
    name = f.split("\n", 1)[0].strip()
    if "moe_gemm" not in name:
        continue
    keep.write("Function : " + f + "\n")
    ins = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", f)
    hist = collections.Counter(i.split(".")[0] for i in ins)
    print("==", name, "static instructions", len(ins))
    print("  ", " ".join("%s:%d" % kv for kv in hist.most_common()))
PY
    head -40 "$res/sass-hist.txt"
    rm -f "$res/sass-all.txt"
fi
NVFP4_MOE_GEMM=$first NVFP4_NCU_MODE=times OUT=$res/ncu-times bash tests/gpu/device-ncu.sh || rc=1
if [ "${NVFP4_GEMM_NCU:-0}" = 1 ]; then
    NVFP4_MOE_GEMM=$first OUT=$res/ncu bash tests/gpu/device-ncu.sh || rc=1
fi
tar czf "$OUT/gemm.tgz" -C "$res" .
exit $rc
