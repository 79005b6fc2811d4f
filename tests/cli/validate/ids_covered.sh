#!/usr/bin/env bash
# Every finding id of the README's validate findings table is required by some case of
# tests/data/invalid/ckpt/cases.tsv (or tests/cli/validate/invalid_files.sh's
# safetensors.malformed), or listed in tests/data/invalid/ckpt/uncovered.tsv with a reason;
# and every id the corpus requires is documented in that table.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
rc=0
"$NVFP4_PYTHON" - "$NVFP4_SOURCE_DIR/README.md" "$NVFP4_TESTDATA/invalid/ckpt" <<'PY' || rc=$?
import os, re, sys
readme, dir_ = sys.argv[1], sys.argv[2]
lines = open(readme).read().splitlines()
# The validate findings table: the first table after a heading naming findings, up to the
# next heading; its first cells are `id`s.
ids, in_section = [], False
for line in lines:
    if line.startswith("#"):
        if ids:
            break
        in_section = bool(re.search(r"finding", line, re.I))
        continue
    m = re.match(r"\|\s*`?([a-z0-9_<>*-]+(?:\.[a-z0-9_<>*-]+)+)`?\s*\|", line)
    if in_section and m:
        ids.append(m.group(1))
if not ids:
    print("ids_covered: the README has no validate findings table yet (a heading naming "
          "findings followed by rows '| `id` | ...')")
    sys.exit(77)
def pattern(i):
    """A README id; a placeholder row such as `verify.<id>` stands for every id it matches."""
    return re.compile(re.sub(r"<[a-z]+>", "[a-z0-9_-]+", re.escape(i).replace(r"\<", "<")
                             .replace(r"\>", ">")) + "$")
documented = {i: pattern(i) for i in ids}
required = {"safetensors.malformed"}
for line in open(os.path.join(dir_, "cases.tsv")):
    if line.strip() and not line.startswith("#"):
        req = line.rstrip("\n").split("\t")[3]
        if req != "-":
            required |= set(req.split(","))
uncovered = {}
for line in open(os.path.join(dir_, "uncovered.tsv")):
    if line.strip() and not line.startswith("#"):
        i, reason = line.rstrip("\n").split("\t")
        assert reason.strip(), i
        uncovered[i] = reason
bad = 0
def covering(doc):
    """The required ids a README row covers (a literal row only itself)."""
    if doc in ids and "<" not in doc:
        return {doc} & required
    return {r for r in required if documented[doc].match(r) and r not in ids}
for doc in ids:
    if not covering(doc) and doc not in uncovered:
        print("ids_covered: README finding '%s' is required by no case and not in uncovered.tsv"
              % doc)
        bad = 1
for i in sorted(required | set(uncovered)):
    if not any(p.match(i) for p in documented.values()):
        print("ids_covered: '%s' (cases.tsv / uncovered.tsv) is not in the README's findings "
              "table" % i)
        bad = 1
for i in sorted(uncovered):
    if i in documented and covering(i):
        print("ids_covered: '%s' is required by a case and also listed as uncovered" % i)
        bad = 1
if not bad:
    print("ids_covered: %d documented ids, %d covered by cases, %d with a reason (%s)"
          % (len(ids), sum(1 for d in ids if covering(d)), len(uncovered),
             ", ".join(sorted(uncovered))))
sys.exit(bad)
PY
exit $rc
