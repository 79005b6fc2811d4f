# Helpers for tests/cli/<group>/<case>.sh (not a test itself: ctest runs cli/*/*.sh only).
# Source it after making the scratch directory $tmp:  . "$(dirname "$0")/../lib.sh"
#   fail MESSAGE...                      "<case>: MESSAGE" on stderr, exit 1
#   expect CODE TEXT -- COMMAND ARGS...  run COMMAND (stdout in $tmp/out, stderr in $tmp/err);
#                                        it must exit CODE and print TEXT (a fixed string) on
#                                        stdout or stderr
fail() {
    echo "$(basename "$0" .sh): $*" >&2
    exit 1
}
expect() {
    local want=$1 text=$2 rc=0
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want: $(head -c 2000 "$tmp/err")"
    grep -qF -- "$text" "$tmp/err" "$tmp/out" ||
        fail "'$*' did not say '$text': $(head -c 2000 "$tmp/err")"
}
