#!/usr/bin/env bash
# Runs on the device machine after `tests/gpu/device-run.sh build`: end-to-end conversion on the
# GPU against the CPU, and the conversion rate of a large synthetic FP8 checkpoint against the
# storage floor measured in the same run, then with the source in the page cache (GPU and
# CPU-only input rates).
#   tests/gpu/device-convert.sh [SIZE]   SIZE: small (default) or large (~20 GB)
# large also converts with the output in tmpfs (the host pipeline's rate without the disk), and
# with NVFP4_TOOL_BASE (an earlier build's nvfp4tool) times that build beside this one there.
# Writes $OUT/convert-e2e.json (large: also the stage profiles of the cached runs,
# $OUT/convert-profile-{cuda,cpu}.{txt,json}, and of the tmpfs runs).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/device}
mkdir -p "$OUT"
tool=${NVFP4_TOOL:-$PWD/build-dev/nvfp4tool}
work=${NVFP4_WORK:-/tmp/nvfp4-e2e}
rm -rf "$work"
mkdir -p "$work"
mode=${1:-small}
calc() { python3 -c "print($1)"; }
dev=${NVFP4_E2E_DEVICE:-cuda}
# NVFP4_E2E_DEVICES=0,1: the device side uses --devices (tensors spread over several GPUs).
devopt=(--device "$dev")
[ -z "${NVFP4_E2E_DEVICES:-}" ] || { devopt=(--devices "$NVFP4_E2E_DEVICES"); dev="devices $NVFP4_E2E_DEVICES"; }
rc=0
res="$OUT/convert-e2e.json"
echo "{" >"$res"
echo " \"commit\": \"${NVFP4_COMMIT:-unknown}\"," >>"$res"

# 1. CPU and GPU conversions write identical checkpoints (same manifest bytes).
i=0
for spec in "qwen3-moe bf16" "deepseek-v3 fp8-block" "qwen3-moe fp8-block --fused-experts"; do
    set -- $spec
    src="$work/src$i"
    "$tool" synth "$src" --preset "$1" --dtype "$2" "${@:3}" --hidden 1024 --experts 16 \
        --moe-intermediate 512 --quiet >/dev/null || rc=1
    "$tool" convert "$src" "$work/ref$i" --device cpu --quiet --json >/dev/null || rc=1
    "$tool" convert "$src" "$work/dev$i" "${devopt[@]}" --quiet --json >/dev/null || rc=1
    if cmp -s "$work/ref$i/nvfp4-manifest.json" "$work/dev$i/nvfp4-manifest.json"; then
        echo "e2e $spec: cpu and $dev manifests identical"
        same=true
    else
        echo "e2e $spec: MANIFESTS DIFFER"
        same=false
        rc=1
    fi
    echo " \"e2e_$i\": {\"source\": \"$spec\", \"identical\": $same}," >>"$res"
    rm -rf "$src" "$work/ref$i" "$work/dev$i"
    i=$((i + 1))
done

# 2. A large FP8 checkpoint: storage floor (read + write rates of this disk) vs convert time.
if [ "$mode" = large ]; then
    big="$work/big"
    "$tool" synth "$big" --preset deepseek-v3 --dtype fp8-block ${NVFP4_BIG_DIMS:---hidden 7168 --moe-intermediate 2048 --experts 256 --layers 3} --max-shard-size 5GB --quiet --json \
        >/dev/null || rc=1
    src_bytes=$(du -sb "$big" | cut -f1)
    sync
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null && cold=true || cold=false
    t0=$(date +%s.%N)
    cat "$big"/*.safetensors >/dev/null
    t1=$(date +%s.%N)
    read_gbs=$(calc "$src_bytes / ($t1 - $t0) / 1e9")
    # Write rate: as many bytes as the NVFP4 output will have (~0.6 of the FP8 input), fsynced.
    wbytes=$((src_bytes * 6 / 10 / 16777216))
    t0=$(date +%s.%N)
    dd if=/dev/zero of="$work/wtest" bs=16M count=$wbytes conv=fsync status=none
    t1=$(date +%s.%N)
    write_gbs=$(calc "$wbytes * 16777216 / ($t1 - $t0) / 1e9")
    rm -f "$work/wtest"
    sync
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    t0=$(date +%s.%N)
    "$tool" convert "$big" "$work/bigout" "${devopt[@]}" --json --quiet >"$OUT/convert-big.json" || rc=1
    t1=$(date +%s.%N)
    out_bytes=$(du -sb "$work/bigout" | cut -f1)
    secs=$(calc "$t1 - $t0")
    floor=$(calc "$src_bytes / ($read_gbs * 1e9) + $out_bytes / ($write_gbs * 1e9)")
    ratio=$(calc "$secs / $floor")
    rss=$(python3 -c "import json;print(json.load(open('$OUT/convert-big.json'))['peak_rss_bytes'])")
    printf ' "large": {"source_bytes": %s, "output_bytes": %s, "page_cache_dropped": %s, "read_gbs": %.3f, "write_gbs": %.3f, "floor_s": %.2f, "convert_s": %.2f, "ratio": %.3f, "peak_rss_bytes": %s},\n' \
        "$src_bytes" "$out_bytes" "$cold" "$read_gbs" "$write_gbs" "$floor" "$secs" "$ratio" "$rss" >>"$res"
    printf 'large: %.1f GB in, %.1f GB out; read %.2f GB/s, write %.2f GB/s; floor %.1f s; convert %.1f s (%.2fx floor), peak RSS %.2f GB\n' \
        "$(calc "$src_bytes/1e9")" "$(calc "$out_bytes/1e9")" "$read_gbs" "$write_gbs" "$floor" "$secs" "$ratio" "$(calc "$rss/1e9")"
    # 3. The same conversion with the source in the page cache (the host pipeline's own rate),
    #    on the GPU and then on the CPU alone (all cores): input GB/s.
    # warm_runs DST KEY LABEL: one run per device, source cached, JSON row "KEY_dev"/"KEY_cpu".
    # Each run's stage profile (NVFP4_CONVERT_PROFILE=1: the table on stderr; the --json
    # "profile" object) is kept as $OUT/convert-profile[-KEY]-{cuda,cpu}.{txt,json}.
    warm_runs() {
        local dst=$1 key=$2 label=$3 d t0 t1 secs rss which prof
        for d in "${devopt[*]}" "--device cpu"; do
            which=$([ "$d" = "--device cpu" ] && echo cpu || echo dev)
            prof="$OUT/convert-profile$([ "$key" = cached ] || echo "-$key")-$([ "$which" = cpu ] && echo cpu || echo cuda)"
            rm -rf "$dst"
            sync
            cat "$big"/*.safetensors >/dev/null
            t0=$(date +%s.%N)
            NVFP4_CONVERT_PROFILE=1 "$tool" convert "$big" "$dst" $d --json --quiet \
                >"$OUT/convert-warm.json" 2>"$prof.txt" || rc=1
            t1=$(date +%s.%N)
            cat "$prof.txt" >&2
            python3 -c "import json;print(json.dumps(json.load(open('$OUT/convert-warm.json'))['profile'], indent=1))" \
                >"$prof.json" || true
            secs=$(calc "$t1 - $t0")
            rss=$(python3 -c "import json;print(json.load(open('$OUT/convert-warm.json'))['peak_rss_bytes'])")
            printf ' "%s_%s": {"options": "%s", "convert_s": %.2f, "input_gbs": %.3f, "peak_rss_bytes": %s},\n' \
                "$key" "$which" "$d" "$secs" "$(calc "$src_bytes / $secs / 1e9")" "$rss" >>"$res"
            printf '%s (%s): convert %.1f s = %.2f GB/s of input, peak RSS %.2f GB\n' \
                "$label" "$d" "$secs" "$(calc "$src_bytes / $secs / 1e9")" "$(calc "$rss/1e9")"
        done
        rm -rf "$dst"
    }
    warm_runs "$work/bigout" cached cached
    # 4. The host pipeline alone: source in the page cache and the output in memory (tmpfs), so
    #    that neither the disk's write rate nor its fsync bounds the rate (the GPU and the CPU).
    shm=""
    need=$((out_bytes + out_bytes / 5))
    avail=$(df --output=avail -B1 /dev/shm 2>/dev/null | tail -1 || echo 0)
    if [ "${avail:-0}" -gt "$need" ]; then
        shm=/dev/shm/nvfp4-e2e-out
    elif mkdir -p "$work/shm" && mount -t tmpfs -o size=$((need / 1048576))m tmpfs "$work/shm" 2>/dev/null; then
        shm=$work/shm/out
    fi
    if [ -n "$shm" ]; then
        warm_runs "$shm" tmpfs "cached, output in tmpfs"
        # 4b. With NVFP4_TOOL_BASE (an earlier build): this run on the GPU again, that build and
        #     this one interleaved NVFP4_TOOL_BASE_ROUNDS times (default 2: base new base new), so that a host-pipeline change is
        #     timed side by side on one host; profiles in $OUT/convert-profile-ab-WHICH-rN-cuda.txt.
        #     NVFP4_AB_ENV="VAR=VALUE" adds a third build in each round: this one with that
        #     variable set ("newenv"), to split a change into its parts.
        for r in ${NVFP4_TOOL_BASE:+$(seq 1 "${NVFP4_TOOL_BASE_ROUNDS:-2}")}; do
            for which in base new ${NVFP4_AB_ENV:+newenv}; do
                exe=$tool
                [ "$which" = base ] && exe=$NVFP4_TOOL_BASE
                abenv=NVFP4_AB_UNSET=1
                [ "$which" = newenv ] && abenv=$NVFP4_AB_ENV
                rm -rf "$shm"
                cat "$big"/*.safetensors >/dev/null
                t0=$(date +%s.%N)
                env "$abenv" NVFP4_CONVERT_PROFILE=1 "$exe" convert "$big" "$shm" "${devopt[@]}" \
                    --json --quiet >/dev/null 2>"$OUT/convert-profile-ab-$which-r$r-cuda.txt" || rc=1
                t1=$(date +%s.%N)
                secs=$(calc "$t1 - $t0")
                printf ' "tmpfs_ab_%s_r%s": {"convert_s": %.2f, "input_gbs": %.3f},\n' "$which" "$r" \
                    "$secs" "$(calc "$src_bytes / $secs / 1e9")" >>"$res"
                printf 'cached, output in tmpfs, %s build, round %s: convert %.1f s = %.2f GB/s of input\n' \
                    "$which" "$r" "$secs" "$(calc "$src_bytes / $secs / 1e9")"
            done
        done
        rm -rf "$shm"
        umount "$work/shm" 2>/dev/null || true
    else
        echo "tmpfs: no room for the output in memory; host-pipeline rate not measured"
    fi
    # 5-7. Optional: the cached GPU run again for each value of NVFP4_CUDA_WORKER_SWEEP
    #    (NVFP4_CUDA_WORKERS, e.g. "1 8": what the compute workers per GPU buy), of
    #    NVFP4_CONVERT_WRITER_SWEEP (NVFP4_CONVERT_WRITERS, e.g. "1 4": what writing shards side
    #    by side buys) and of NVFP4_CONVERT_WRITEBACK_SWEEP (NVFP4_WRITEBACK_STEP_MB, e.g. "0":
    #    what starting the writeback early costs or buys); each run's stage profile table in
    #    $OUT/convert-profile-KEY-VALUE-cuda.txt.
    sweep_env() { # VAR KEY WHAT VALUE...
        local var=$1 key=$2 what=$3 v t0 t1 secs
        shift 3
        for v in "$@"; do
            rm -rf "$work/bigout"
            cat "$big"/*.safetensors >/dev/null
            t0=$(date +%s.%N)
            env "$var=$v" NVFP4_CONVERT_PROFILE=1 "$tool" convert "$big" "$work/bigout" \
                "${devopt[@]}" --json --quiet >"$OUT/convert-warm.json" \
                2>"$OUT/convert-profile-$key-$v-cuda.txt" || rc=1
            t1=$(date +%s.%N)
            cat "$OUT/convert-profile-$key-$v-cuda.txt" >&2
            secs=$(calc "$t1 - $t0")
            printf ' "cached_dev_%s_%s": {"convert_s": %.2f, "input_gbs": %.3f},\n' "$key" "$v" \
                "$secs" "$(calc "$src_bytes / $secs / 1e9")" >>"$res"
            printf 'cached, %s %s: convert %.1f s = %.2f GB/s of input\n' "$v" "$what" "$secs" \
                "$(calc "$src_bytes / $secs / 1e9")"
        done
    }
    # shellcheck disable=SC2086 # the sweeps are lists of values
    sweep_env NVFP4_CUDA_WORKERS workers "compute workers on the GPU" \
        ${NVFP4_CUDA_WORKER_SWEEP:-}
    # shellcheck disable=SC2086
    sweep_env NVFP4_CONVERT_WRITERS writers "writer threads" ${NVFP4_CONVERT_WRITER_SWEEP:-}
    # shellcheck disable=SC2086
    sweep_env NVFP4_WRITEBACK_STEP_MB writeback "MiB writeback step" \
        ${NVFP4_CONVERT_WRITEBACK_SWEEP:-}
    # 8. Optional: cold runs (page cache dropped) for each value of NVFP4_COLD_SWEEP_VAR
    #    (default NVFP4_SOURCE_HASH_COLD, the source files hashed at once) in NVFP4_COLD_SWEEP
    #    (e.g. "1 4"), interleaved NVFP4_COLD_ROUNDS times (default 2), each against the floor
    #    measured above; profiles in $OUT/convert-profile-cold-VALUE-rN-cuda.txt.
    cvar=${NVFP4_COLD_SWEEP_VAR:-NVFP4_SOURCE_HASH_COLD}
    for r in ${NVFP4_COLD_SWEEP:+$(seq 1 "${NVFP4_COLD_ROUNDS:-2}")}; do
        for v in ${NVFP4_COLD_SWEEP:-}; do
            rm -rf "$work/bigout"
            sync
            echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
            t0=$(date +%s.%N)
            env "$cvar=$v" NVFP4_CONVERT_PROFILE=1 "$tool" convert "$big" "$work/bigout" \
                "${devopt[@]}" --json --quiet >/dev/null \
                2>"$OUT/convert-profile-cold-$v-r$r-cuda.txt" || rc=1
            t1=$(date +%s.%N)
            secs=$(calc "$t1 - $t0")
            printf ' "cold_%s_%s_r%s": {"convert_s": %.2f, "ratio": %.3f},\n' "$cvar" "$v" "$r" \
                "$secs" "$(calc "$secs / $floor")" >>"$res"
            printf 'cold, %s=%s, round %s: convert %.1f s (%.2fx floor)\n' "$cvar" "$v" "$r" \
                "$secs" "$(calc "$secs / $floor")"
        done
    done
    rm -f "$OUT/convert-warm.json"
    rm -rf "$big" "$work/bigout"
fi
echo " \"rc\": $rc" >>"$res"
echo "}" >>"$res"
exit $rc
