#!/usr/bin/env bash
# Commands not built yet (merge) take the options of their usage lines (SPEC sections 2, 7, 8;
# moe is built: tests/cli/moe; verify and validate too: tests/cli/verify, tests/cli/validate,
# their option errors here): bad values are usage errors (exit 2), a bad recipe too, a missing
# recipe file an I/O error (exit 1); valid ones end in "not implemented yet" (exit 1).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
C=$tmp/ckpt
NI="not implemented yet"
printf 'verify: {tokens: 16, seed: 3}\n' >"$tmp/ok.yaml"
printf 'verify: {tokens: 0}\n' >"$tmp/bad.yaml"

expect 1 "cannot" -- "$T" verify "$C"
expect 1 "cannot" -- "$T" verify "$C" --reference "$tmp/src" --tokens 128 --seed 7 --device cpu \
    --threads 2 --json --recipe "$tmp/ok.yaml"
expect 1 "$NI" -- "$T" verify "$C" --input "$tmp/x.safetensors" --per-token-activations \
    --precision w4a4
expect 2 "needs --precision w4a4" -- "$T" verify "$C" --per-token-activations
expect 2 "--layers '1,x'" -- "$T" verify "$C" --layers 1,x
expect 2 "w4a16 or w4a4" -- "$T" verify "$C" --precision bf16
expect 2 "tokens: bad value '0'" -- "$T" verify "$C" --tokens 0
expect 2 "seed: bad value '-1'" -- "$T" verify "$C" --seed -1
expect 2 "exclude each other" -- "$T" verify "$C" --tokens 8 --input x.safetensors
expect 2 "verify.tokens" -- "$T" verify "$C" --recipe "$tmp/bad.yaml"
expect 1 "cannot open recipe" -- "$T" verify "$C" --recipe "$tmp/none.yaml"
expect 2 "unknown option '--bogus'" -- "$T" verify "$C" --bogus
expect 0 "--reference SRC" -- "$T" verify --help

expect 1 "cannot read" -- "$T" validate "$C" --deep --require-manifest --json --recipe "$tmp/ok.yaml"
expect 2 "verify.tokens" -- "$T" validate "$C" --deep --recipe "$tmp/bad.yaml"
expect 1 "cannot open recipe" -- "$T" validate "$C" --deep --recipe "$tmp/none.yaml"
expect 0 "--require-manifest" -- "$T" validate --help

expect 1 "$NI" -- "$T" merge "$tmp/dst" --threads 2 --json
expect 2 "merge does not take --device" -- "$T" merge "$tmp/dst" --device cpu
expect 2 "expected 1 argument" -- "$T" merge
[ ! -e "$C" ] && [ ! -e "$tmp/dst" ] || fail "a command not built yet wrote something"
echo "verify, validate, merge: options checked; merge then says 'not implemented yet' (exit 1)"
