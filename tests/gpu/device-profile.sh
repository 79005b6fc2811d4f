#!/usr/bin/env bash
# Runs on the device machine with binaries built elsewhere and carried with the call (no device
# time goes into compiling; see the README's "GPU runs"):
#   NVFP4_BIN       nvfp4tool under test (default build-gpu/nvfp4tool), its GPU tests beside it
#                   in build-gpu/tests (NVFP4_TESTS)
#   NVFP4_BASE_BIN  optional: a baseline nvfp4tool benchmarked in the same run
#   NVFP4_VARIANTS  optional: more nvfp4tool builds benchmarked by the step `variants`
#   NVFP4_E2E_SIZE  small (default) or large: the size of tests/gpu/device-convert.sh (step e2e)
#   tests/gpu/device-profile.sh [test|cmp|e2e|bench|configs|variants|ncu|sass|pack]...
#   (default: test cmp e2e bench ncu sass pack)
# Writes to $OUT: ctest-like logs of the GPU tests, bench JSON of both binaries, Nsight Compute
# details of the quantizing kernels (BF16/FP8-block, RTN and 4over6 MSE scaled), and their SASS
# instruction histograms.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/profile}
mkdir -p "$OUT"
. tests/gpu/device-env.sh
TESTS=$PWD/${NVFP4_TESTS:-build-gpu/tests}
BASE=${NVFP4_BASE_BIN:+$PWD/$NVFP4_BASE_BIN}
export PATH=$PATH:/usr/local/cuda/bin
echo "commit ${NVFP4_COMMIT:-unknown}" | tee "$OUT/commit.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(test cmp e2e bench ncu sass pack)
rc=0
for step in "${steps[@]}"; do
    case $step in
    test)
        for t in "$TESTS"/gpu_test_*; do
            if "$t" >"$OUT/$(basename "$t").log" 2>&1; then
                echo "PASS $(basename "$t")"
            else
                echo "FAIL $(basename "$t") (exit $?)"; tail -30 "$OUT/$(basename "$t").log"; rc=1
            fi
        done
        # the MoE kernels the default (v8) leaves out on this GPU: v6's for every tile height (its
        # 16-row kernel is v7's)
        if NVFP4_MOE_GEMM=v6 "$TESTS/gpu_test_moe_cuda" >"$OUT/gpu_test_moe_cuda-v6.log" 2>&1; then
            echo "PASS gpu_test_moe_cuda (NVFP4_MOE_GEMM=v6)"
        else
            echo "FAIL gpu_test_moe_cuda (NVFP4_MOE_GEMM=v6)"; tail -30 "$OUT/gpu_test_moe_cuda-v6.log"; rc=1
        fi
        ;;
    cmp)
        tmp=$(mktemp -d)
        for f in tests/data/hf/*/model-0000[12]-of-*.safetensors; do
            # its FP8 weights' scales are in another shard: quantize refuses it (exit 3)
            [ "$f" != tests/data/hf/deepseekv3-fp8/model-00002-of-00003.safetensors ] || continue
            for m in 4over6 rtn; do
                for d in cpu cuda; do
                    "$BIN" quantize "$f" "$tmp/$d.safetensors" --force --method $m --device $d --quiet ||
                        { echo "cmp: quantize $f --device $d failed"; rc=1; }
                done
                if cmp "$tmp/cpu.safetensors" "$tmp/cuda.safetensors"; then
                    echo "cmp: $f $m: cpu and cuda identical"
                else
                    echo "cmp: $f $m: cpu and cuda DIFFER"; rc=1
                fi
            done
        done
        rm -rf "$tmp"
        ;;
    e2e)
        NVFP4_TOOL=$BIN bash tests/gpu/device-convert.sh "${NVFP4_E2E_SIZE:-small}" 2>&1 | tail -8 || rc=1
        ;;
    bench)
        "$BIN" bench quant --device cuda --size-mb 1024 --runs 25 --json >"$OUT/bench-new.json" 2>/dev/null || rc=1
        "$BIN" bench quant --device cuda --size-mb 1024 --runs 25 2>&1 | tee "$OUT/bench-new.txt"
        if [ -n "$BASE" ]; then
            "$BASE" bench quant --device cuda --size-mb 1024 --runs 25 2>&1 | tee "$OUT/bench-base.txt"
        fi
        ;;
    sass)
        cuobjdump -sass "$BIN" | c++filt >"$OUT/sass-all.txt" 2>&1
        python3 - "$OUT/sass-all.txt" >"$OUT/sass.txt" <<'PY'
import re, sys, collections
text = open(sys.argv[1]).read()
for f in re.split(r'\n\s*Function : ', text)[1:]:
    name = f.split('\n', 1)[0].strip()
    if not re.search(r'quant_kernel<[01], [01], 0, 0, 1, 1>|amax_kernel<[01], 1>', name):
        continue
    ins = re.findall(r'/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)', f)
    hist = collections.Counter(i.split('.')[0] for i in ins)
    print('==', name, 'static instructions', len(ins))
    print('  ', ' '.join(f'{k}:{v}' for k, v in hist.most_common()))
    print(f)
PY
        rm -f "$OUT/sass-all.txt"
        ;;
    ncu)
        ncu --clock-control none --kernel-name-base demangled \
            --kernel-name 'regex:quant_kernel<\(int\)[01], \(int\)[01], \(int\)0, \(int\)0' \
            --launch-count ${NVFP4_NCU_COUNT:-32} \
            --section SpeedOfLight --section Occupancy --section LaunchStats \
            --section WarpStateStats --section SchedulerStats --section InstructionStats \
            --section ComputeWorkloadAnalysis \
            --metrics sm__cycles_elapsed.avg.per_second,smsp__thread_inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum \
            "$BIN" bench quant --device cuda --size-mb 256 --runs 1 >"$OUT/ncu.txt" 2>&1
        grep -c "quant_kernel" "$OUT/ncu.txt"
        ;;
    configs)
        # bench quant once per launch configuration, one JSON a line
        for c in $(seq 0 9); do
            "$BIN" bench quant --device cuda --config "$c" --json >"$OUT/cfg.json" 2>/dev/null || break
            echo "{\"config_run\": $(cat "$OUT/cfg.json")}" >>"$OUT/bench-configs.jsonl"
        done
        rm -f "$OUT/cfg.json"
        ;;
    variants)
        # further builds to compare (NVFP4_VARIANTS: paths of nvfp4tool binaries)
        for v in ${NVFP4_VARIANTS:-}; do
            echo "== variant $v"
            "$PWD/$v" bench quant --device cuda --size-mb 1024 --runs 25 2>&1 | tee "$OUT/bench-$(basename "$(dirname "$v")").txt"
        done
        ;;
    pack)
        # $OUT returns at most 8 files: everything but the bench JSON goes into one archive
        (cd "$OUT" && tar czf results.tgz --exclude=results.tgz --exclude=bench-new.json * && \
            find . -type f ! -name results.tgz ! -name bench-new.json -delete)
        ;;
    *)
        echo "unknown step $step"; exit 2 ;;
    esac
done
exit $rc
