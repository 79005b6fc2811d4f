#!/usr/bin/env bash
# Runs on the device machine: an A/B timing of kernel variants, interleaved (A B C A B C ...) so
# the clock and thermal drift between runs falls on every variant alike. Each argument is one
# variant, `label` or `label:VAR=value,VAR=value` (environment for that variant, e.g.
# `v10:NVFP4_MOE_GEMM=v10,NVFP4_MOE_ASTAGES=2`; BIN=path, relative to the repository, runs
# another binary). Prints, per
# round, variant and shape, the rows of `bench moe --device cuda --precision w4a16` (ms first).
#   NVFP4_AB_SHAPES: shape:tokens ... (default "deepseek-v3:8,16,64,128,256");
#   NVFP4_AB_ROUNDS (default 2); NVFP4_AB_PRECISION (default w4a16).
# tests/gpu/ab_table.py summarizes the output (each variant's fastest round).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/device-env.sh
shapes=${NVFP4_AB_SHAPES:-deepseek-v3:8,16,64,128,256}
for r in $(seq 1 "${NVFP4_AB_ROUNDS:-2}"); do
    for v in "$@"; do
        label=${v%%:*}
        vars=()
        [ "$label" != "$v" ] && IFS=, read -r -a vars <<<"${v#*:}"
        exe=$BIN env=()
        for x in "${vars[@]}"; do
            case $x in BIN=*) exe=$PWD/${x#BIN=} ;; *) env+=("$x") ;; esac
        done
        for st in $shapes; do
            echo "$label ${st%%:*} r$r"
            env "${env[@]}" "$exe" bench moe --device cuda --shape "${st%%:*}" --tokens "${st#*:}" \
                --precision "${NVFP4_AB_PRECISION:-w4a16}" 2>&1 | grep -E "^ +[0-9]+ w4"
        done
    done
done
