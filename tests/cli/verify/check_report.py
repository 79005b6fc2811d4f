#!/usr/bin/env python3
"""check_report.py SCHEMA REPORT.json pass|fail [LAYER [EXPERT [CHECK]]]

Validate a verify report against schemas/report.schema.json (when jsonschema is installed) and
check its verdict: `pass` wants pass true, every layer passed and no error finding; `fail` wants
pass false and a finding of layer LAYER (and of expert EXPERT, and of check id CHECK, when given;
EXPERT '-' for none asked)."""
import json
import sys

schema_path, report_path, want = sys.argv[1:4]
r = json.load(open(report_path))
try:
    import jsonschema
    schema = json.load(open(schema_path))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(r)
except ImportError:
    pass
layers = r["layers"]
assert r["summary"]["layers"] == len(layers) > 0, r["summary"]
assert r["summary"]["passed"] == sum(l["pass"] for l in layers), r["summary"]
assert r["summary"]["failed"] == sum(not l["pass"] for l in layers), r["summary"]
for l in layers:
    assert l["pass"] == all(c["pass"] for c in l["checks"]), l
if want == "pass":
    assert r["pass"] is True, [f["message"] for f in r["findings"]]
    assert not [f for f in r["findings"] if f["severity"] == "error"], r["findings"]
    sys.exit(0)
assert r["pass"] is False, "the report passed"
layer = int(sys.argv[4]) if len(sys.argv) > 4 else None
expert = sys.argv[5] if len(sys.argv) > 5 else "-"
check = sys.argv[6] if len(sys.argv) > 6 else None
hits = [f for f in r["findings"] if layer is None or f["layer"] == layer]
assert hits, "no finding names layer %s: %s" % (layer, r["findings"])
if expert != "-":
    hits = [f for f in hits if f["expert"] == int(expert)]
    assert hits, "no finding names expert %s: %s" % (expert, r["findings"])
    failed = [l for l in layers if l["layer"] == layer and not l["pass"]]
    assert failed and int(expert) in failed[0]["experts_flagged"], failed
if check:
    assert [f for f in hits if f["id"] == check], "no '%s' finding: %s" % (check, hits)
# no other expert is blamed for an expert defect (the localization names the right one)
if expert != "-":
    others = {f["expert"] for f in r["findings"] if f["expert"] is not None} - {int(expert)}
    assert not others, "other experts blamed too: %s" % sorted(others)
