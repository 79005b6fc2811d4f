# Sourced by the quantize tests (not a test itself: ctest runs *.sh). Needs $tmp.
# expect CODE PATTERN -- command...: the command exits CODE and its stderr matches PATTERN.
expect() {
    local code=$1 pat=$2
    shift 3
    local rc=0
    "$@" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
    if [ "$rc" != "$code" ] || ! grep -q -- "$pat" "$tmp/stderr"; then
        echo "expected exit $code and '$pat' from: $*" >&2
        echo "got exit $rc, stderr:" >&2
        cat "$tmp/stderr" >&2
        exit 1
    fi
}
