#!/usr/bin/env bash
# Runs on the device machine (the lent H200; see the README's "GPU runs"): unpack the Debian
# packages the device image lacks (libyaml, cJSON; carried in .debs/), build with CUDA, run the
# whole ctest suite there (GPU tests included), then the benchmarks. Results go to $OUT.
#   tests/gpu/device-run.sh [build|test|test-gpu|cmp|bench|bench-configs]...
#   (default: build test cmp bench)
# test-gpu: only the GPU tests (ctest -L gpu). NVFP4_COMMIT names the commit measured where the
# copy has no .git (e.g. NVFP4_COMMIT=<hash>+changes); it goes to commit.txt and the JSON.
# bench-configs: `bench quant --device cuda` once per launch configuration, one JSON a line.
# NVFP4_BENCH_CPU=0 leaves the CPU benchmark out of `bench`.
# cmp: `quantize --device cpu` and `--device cuda` of the test checkpoints' shards must be
# byte-identical (cmp). bench: `bench quant` on the CPU and on the GPU, JSON under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/device}
mkdir -p "$OUT"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(build test cmp bench)

deps=/tmp/deps
mkdir -p "$deps"
for f in .debs/*.deb; do dpkg -x "$f" "$deps"; done
export PKG_CONFIG_SYSROOT_DIR=$deps
export PKG_CONFIG_PATH=$deps/usr/lib/x86_64-linux-gnu/pkgconfig
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
commit=${NVFP4_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
echo "commit $commit" | tee "$OUT/commit.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"

rc=0
for step in "${steps[@]}"; do
    case $step in
    build)
        cmake -S . -B build-dev -DNVFP4_CUDA=ON -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 &&
            cmake --build build-dev -j 16 >>"$OUT/cmake.log" 2>&1 || { tail -50 "$OUT/cmake.log"; exit 1; }
        ;;
    test)
        ctest --test-dir build-dev --output-on-failure -j 8 2>&1 | tee "$OUT/ctest.log" | tail -25
        [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
        ;;
    test-gpu)
        ctest --test-dir build-dev --output-on-failure -L gpu 2>&1 | tee "$OUT/ctest.log" | tail -25
        [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
        ;;
    bench-configs)
        for c in $(seq 0 9); do
            ./build-dev/nvfp4tool bench quant --device cuda --config "$c" --json \
                >"$OUT/cfg.json" 2>/dev/null || break
            echo "{\"commit\": \"$commit\", \"config_run\": $(cat "$OUT/cfg.json")}" \
                >>"$OUT/bench-quant-cuda-configs.jsonl"
            echo "config $c done"
        done
        rm -f "$OUT/cfg.json"
        ;;
    cmp)
        tmp=$(mktemp -d)
        for f in tests/data/hf/*/model-0000[12]-of-*.safetensors; do
            # its FP8 weights' scales are in another shard: quantize refuses it (exit 3)
            [ "$f" != tests/data/hf/deepseekv3-fp8/model-00002-of-00003.safetensors ] || continue
            for m in 4over6 rtn; do
                for d in cpu cuda; do
                    ./build-dev/nvfp4tool quantize "$f" "$tmp/$d.safetensors" --force --method $m \
                        --device $d --quiet || { echo "cmp: quantize $f --device $d failed"; rc=1; }
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
    bench)
        ./build-dev/nvfp4tool bench quant --device cuda --json \
            >"$OUT/bench-quant-cuda.json" 2>"$OUT/bench-quant-cuda.log" || rc=1
        ./build-dev/nvfp4tool bench quant --device cuda --size-mb 1024 --runs 25 || rc=1
        if [ "${NVFP4_BENCH_CPU:-1}" != 0 ]; then
            ./build-dev/nvfp4tool bench quant --device cpu --threads 16 --json \
                >"$OUT/bench-quant-cpu.json" 2>"$OUT/bench-quant-cpu.log" || rc=1
            cat "$OUT/bench-quant-cpu.json"
        fi
        ;;
    *)
        echo "unknown step $step"; exit 2 ;;
    esac
done
exit $rc
