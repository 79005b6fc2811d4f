#!/usr/bin/env python3
"""check_validate.py SCHEMA REPORT.json pass|fail [ID[@FILE[@TENSOR]] ...]

Validate a validate report against schemas/validate.schema.json (jsonschema) and check it
independently of the tool: the summary counts the findings, pass is "no error finding", the
findings are sorted by (file, tensor, id, message); `pass` wants no error finding, `fail` wants
an error. Each ID given must be among the findings (with that file, and tensor, when given)."""
import json
import sys

import jsonschema

schema_path, report_path, want = sys.argv[1:4]
r = json.load(open(report_path))
schema = json.load(open(schema_path))
jsonschema.Draft202012Validator.check_schema(schema)
jsonschema.Draft202012Validator(schema).validate(r)
f = r["findings"]
errors = [x for x in f if x["severity"] == "error"]
assert r["summary"]["errors"] == len(errors), r["summary"]
assert r["summary"]["warnings"] == len(f) - len(errors), r["summary"]
assert r["pass"] == (not errors), r["pass"]
keys = [(x["file"], x["tensor"], x["id"], x["message"]) for x in f]
assert keys == sorted(keys, key=lambda k: tuple(s.encode() for s in k)), "findings not sorted"
assert r["read"]["bytes"] > 0 and r["read"]["files"] > 0, r["read"]
if want == "pass":
    assert not errors, [x["message"] for x in errors]
else:
    assert errors, "no error finding"
for spec in sys.argv[4:]:
    parts = spec.split("@")
    hit = [x for x in f if x["id"] == parts[0]
           and (len(parts) < 2 or x["file"] == parts[1])
           and (len(parts) < 3 or x["tensor"] == parts[2])]
    assert hit, f"no finding {spec}: {[(x['id'], x['file'], x['tensor']) for x in f]}"
