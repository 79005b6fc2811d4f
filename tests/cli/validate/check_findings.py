#!/usr/bin/env python3
"""Runs `nvfp4tool validate CKPT --json [OPTIONS]` and checks its exit code and findings.

    check_findings.py NVFP4TOOL CASE CKPT EXIT REQUIRE [OPTION ...]
    check_findings.py NVFP4TOOL --batch FILE   # lines CASE<TAB>CKPT<TAB>EXIT<TAB>REQUIRE
                                               # <TAB>OPTIONS<TAB>PHRASE<TAB>NAMED ("-": none)

REQUIRE is a comma-separated list of finding ids ("-": none) that must all be in the JSON
report's `findings`, each with severity "error" when EXIT is 3 and "warning" when EXIT is 0
(finding-ids.md: exit 0 exactly when no finding is an error). Other findings are allowed; an
exit-0 case may have no error finding, and one that requires none (a good checkpoint) may have
no finding at all. Every finding has the fields id, severity, file, tensor and message.
Prints nothing on success, else one diagnostic paragraph naming the case, what was expected
and what came back (exit code, ids, the first lines of stderr); exit 1 then. With a PHRASE
(batch) or the environment variable EXPECT_MESSAGE set, some required finding's message must
contain it. With NAMED (batch), some required finding must name it: its file or tensor is
NAMED, or its message contains it. Batch mode checks every line; exit 1 if any failed.
"""
import json
import os
import subprocess
import sys


def check(tool, case, ckpt, want_rc, require, options, phrase, named=None):
    want_rc = int(want_rc)
    require = [] if require == "-" else require.split(",")
    cmd = [tool, "validate", ckpt, "--json"] + options
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    problems = []
    findings = None
    try:
        doc = json.loads(p.stdout)
        findings = doc.get("findings") if isinstance(doc, dict) else None
        if not isinstance(findings, list):
            problems.append("the JSON report has no 'findings' array")
            findings = None
    except ValueError as e:
        problems.append("stdout is not one JSON document (%s)" % e)
    if p.returncode != want_rc:
        problems.append("exit %d, expected %d" % (p.returncode, want_rc))
    got = []
    if findings is not None:
        for f in findings:
            if not isinstance(f, dict) or not all(
                    isinstance(f.get(k), str) for k in ("id", "severity", "file", "tensor",
                                                        "message")):
                problems.append("finding without the string fields id/severity/file/tensor/"
                                "message: %s" % json.dumps(f)[:300])
                continue
            got.append(f)
        want_sev = "error" if want_rc == 3 else "warning"
        for rid in require:
            sevs = {f["severity"] for f in got if f["id"] == rid}
            if not sevs:
                problems.append("finding '%s' missing" % rid)
            elif want_rc in (0, 3) and want_sev not in sevs:
                problems.append("finding '%s' has severity %s, expected %s"
                                % (rid, "/".join(sorted(sevs)), want_sev))
        if want_rc == 0:
            errs = [f["id"] for f in got if f["severity"] == "error"]
            if errs:
                problems.append("exit-0 case with error findings %s" % errs)
            elif not require and got:
                problems.append("a clean case with findings %s" % [f["id"] for f in got])
        if require and any(not f["message"] for f in got if f["id"] in require):
            problems.append("a required finding has an empty message")
        if phrase and require and not any(phrase in f["message"] for f in got
                                          if f["id"] in require):
            problems.append("no %s message contains \"%s\"" % ("/".join(require), phrase))
        if named and require and not any(
                named in (f["file"], f["tensor"]) or named in f["message"]
                for f in got if f["id"] in require):
            problems.append("no %s finding names '%s'" % ("/".join(require), named))
    if problems:
        ids = sorted({"%s(%s)" % (f["id"], f["severity"]) for f in got})
        print("%s: %s\n  command: %s\n  expected: exit %d, findings %s\n  got: exit %d, "
              "findings %s" % (case, "; ".join(problems), " ".join(cmd), want_rc,
                               ",".join(require) or "-", p.returncode, " ".join(ids) or "-"))
        for f in got:
            if f["id"] in require or f["severity"] == "error":
                print("    %s %s file=%r tensor=%r: %s" % (f["severity"], f["id"], f["file"],
                                                         f["tensor"], f["message"][:200]))
        err = p.stderr.strip().splitlines()
        if err:
            print("  stderr: " + "\n          ".join(err[:6]))
        return 1
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--batch":
        bad = n = 0
        with open(argv[2]) as f:
            for line in f:
                case, ckpt, code, require, options, phrase, named = \
                    line.rstrip("\n").split("\t")
                opts = [] if options == "-" else options.split()
                bad += check(argv[0], case, ckpt, code, require, opts,
                             None if phrase == "-" else phrase, None if named == "-" else named)
                n += 1
        print("%d of %d cases as expected" % (n - bad, n))
        return 1 if bad or n == 0 else 0
    return check(argv[0], argv[1], argv[2], argv[3], argv[4], argv[5:],
                 os.environ.get("EXPECT_MESSAGE"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
