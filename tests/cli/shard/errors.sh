#!/usr/bin/env bash
# --shard values out of range are usage errors (exit 2). merge refuses (exit 3, naming them, and
# writing nothing): no part records, a missing part, a part of another recipe (fingerprint), a
# shard claimed by two parts, parts of two splits, a shard file missing or of another size, a
# source file changed since the parts ran, a malformed record; with --rehash, a shard whose bytes
# changed (without it the parts are trusted, and `hash --check` then finds the change). A part
# still running (its lock held, its record not written yet) is exit 1, and so is a part started
# while DST's lock (a merge's) is held.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
"$T" synth "$tmp/src" --preset deepseek-v3 --dtype fp8-block --hidden 128 --moe-intermediate 64 \
    --experts 8 --quiet >/dev/null
opts=(--quiet --max-shard-size 100KB --threads 2)
for bad in 3/3 x/2 0/0 -1/2 1/2x 1 /2 1/ 0/100001; do
    expect 2 "--shard: bad value '$bad'" -- "$T" convert "$tmp/src" "$tmp/u" "${opts[@]}" --shard "$bad"
done
[ ! -e "$tmp/u" ] || fail "a usage error created DST"
for i in 0 1 2; do "$T" convert "$tmp/src" "$tmp/p" "${opts[@]}" --shard "$i/3" >/dev/null; done
fresh() { rm -rf "$tmp/m"; cp -a "$tmp/p" "$tmp/m"; }
refused() { # TEXT [merge options]: merge of $tmp/m exits 3 saying TEXT and writes nothing
    local text=$1
    shift
    expect 3 "$text" -- "$T" merge "$tmp/m" "$@"
    [ ! -e "$tmp/m/nvfp4-manifest.json" ] && [ ! -e "$tmp/m/config.json" ] &&
        [ -d "$tmp/m/.nvfp4-parts" ] || fail "a refused merge ($text) wrote or removed something"
}
mkdir "$tmp/empty"
expect 3 "no part records" -- "$T" merge "$tmp/empty"
expect 1 "is not a directory" -- "$T" merge "$tmp/none"

fresh
rm "$tmp/m/.nvfp4-parts/1-of-3.json"
refused "part 1-of-3 is missing"

fresh
"$T" convert "$tmp/src" "$tmp/m" "${opts[@]}" --e4m3-max 448 --shard 1/3 >/dev/null
refused "part 1-of-3 has another fingerprint than part 0-of-3 (its recipe differs"

fresh
"$NVFP4_PYTHON" - "$tmp/m/.nvfp4-parts" <<'PY'
import json, os, sys
d = sys.argv[1]
one, two = (os.path.join(d, "%d-of-3.json" % i) for i in (1, 2))
r1, r2 = json.load(open(one)), json.load(open(two))
r2["shards"].insert(0, r1["shards"][-1])
json.dump(r2, open(two, "w"))
print(r1["shards"][-1]["name"], file=open(os.path.join(d, "..", "doubled"), "w"))
PY
doubled=$(cat "$tmp/m/doubled")
rm "$tmp/m/doubled"
refused "shard '$doubled' is in two parts: 1-of-3 and 2-of-3"

fresh
"$T" convert "$tmp/src" "$tmp/m" "${opts[@]}" --shard 1/2 >/dev/null
refused "part records of different splits (N=2: 1-of-2.json; N=3: 0-of-3.json, 1-of-3.json, 2-of-3.json)"

fresh
victim=$("$NVFP4_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["shards"][0]["name"])' \
    "$tmp/m/.nvfp4-parts/2-of-3.json")
rm "$tmp/m/$victim"
refused "shard file '$victim' of part 2-of-3 is missing"

fresh
truncate -s -1 "$tmp/m/$victim"
refused "shard file '$victim' has"

fresh
echo '{"format": "nvfp4tool-part-v1"' >"$tmp/m/.nvfp4-parts/0-of-3.json"
refused "invalid part record"

fresh
"$NVFP4_PYTHON" - "$tmp/m/$victim" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-1, 2)
    b = f.read(1)
    f.seek(-1, 2)
    f.write(bytes([b[0] ^ 0x40]))
PY
refused "shard '$victim' does not hold what its part recorded" --rehash
"$T" merge "$tmp/m" --quiet || fail "merge without --rehash exited $?"
expect 3 "$victim" -- "$T" hash "$tmp/m" --check

fresh
rm "$tmp/m/.nvfp4-parts/1-of-3.json" # a part run again removes its record first
flock "$tmp/m/.nvfp4-parts/1-of-3.lock" -c "'$T' merge '$tmp/m'" >"$tmp/out" 2>"$tmp/err" &&
    fail "merge while part 1-of-3 holds its lock exited 0"
grep -qF "part 1-of-3 is still running" "$tmp/err" || fail "running part: $(cat "$tmp/err")"

fresh
flock "$tmp/m/.nvfp4-convert.lock" -c "'$T' convert '$tmp/src' '$tmp/m' --quiet --max-shard-size 100KB --shard 0/3" \
    >"$tmp/out" 2>"$tmp/err" && fail "a part ran while DST's lock (a merge's) was held"
grep -qF "is in use by a merge or conversion" "$tmp/err" || fail "part during a merge: $(cat "$tmp/err")"
[ -e "$tmp/m/.nvfp4-parts/0-of-3.json" ] || fail "a refused part removed its record"

fresh
touch -d '2001-01-01' "$tmp/src/tokenizer.json"
refused "source file 'tokenizer.json' changed (size or mtime) since the parts ran"
echo "merge refuses missing, foreign, doubled, mixed, missing-file, changed and running parts"
