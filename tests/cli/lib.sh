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
#   interrupt PID SIG [BYTES]            once process PID catches SIG (SigCgt in /proc) and has
#                                        read BYTES (rchar in /proc/PID/io; default 0), send SIG
#                                        and wait for it: its exit status in $rc (fail when it
#                                        ended first). Needs /proc.
interrupt() {
    local pid=$1 sig=$2 bytes=${3:-0} signo mask read
    signo=$(kill -l "$sig")
    for _ in $(seq 1 4000); do
        kill -0 "$pid" 2>/dev/null || break
        mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || mask=
        read=$(awk '/^rchar:/ {print $2}' "/proc/$pid/io" 2>/dev/null) || read=0
        if [ -n "$mask" ] && (((0x$mask >> (signo - 1)) & 1)) && [ "${read:-0}" -ge "$bytes" ]; then
            break
        fi
        sleep 0.005
    done
    sig_at=$(date +%s) # when the signal went out, for tests that bound the time to stop
    kill -s "$sig" "$pid" 2>/dev/null || fail "process $pid ended before SIG$sig"
    rc=0
    wait "$pid" || rc=$?
}
#   snapshot DIR [SKIP]...               every path under DIR (type, size, mtime), sorted, leaving
#                                        out the subdirectories SKIP (relative to DIR) and what
#                                        they hold: compare two to show that nothing outside DST
#                                        (a SKIP) was written
snapshot() {
    local dir=$1 x prune=()
    shift
    for x in "$@"; do prune+=(-path "$dir/$x" -prune -o); done
    find "$dir" -mindepth 1 "${prune[@]}" -printf '%P %y %s %T@\n' | LC_ALL=C sort
}
#   kill_shim                            build $tmp/kill_shim.so (tests/cli/convert/kill_shim.c):
#                                        under LD_PRELOAD, rename() to a path whose last component
#                                        is $KILL_AT sends SIGKILL to the process, before the
#                                        rename (KILL_WHEN=before) or after it (after). Exit 77
#                                        without a C compiler.
kill_shim() {
    local cc
    cc=$(command -v cc || command -v gcc || command -v clang || true)
    [ -n "$cc" ] || { echo "no C compiler: skipped"; exit 77; }
    "$cc" -shared -fPIC -o "$tmp/kill_shim.so" "$NVFP4_SOURCE_DIR/tests/cli/convert/kill_shim.c" \
        -ldl
}
#   unprivileged                         run the tool where file permissions hold: as root, TOOL is
#                                        a copy of the tool in $tmp/bin (so that the build's own
#                                        directory need not be open to all; $tmp is made 0755) run
#                                        by "nobody" through setpriv (exit 77 without setpriv or
#                                        uid 65534 able to run it); otherwise TOOL is the tool
#                                        itself. Run it as "${TOOL[@]}" ARGS...
unprivileged() {
    if [ "$(id -u)" -ne 0 ]; then
        TOOL=("$NVFP4TOOL")
        return
    fi
    command -v setpriv >/dev/null || { echo "root without setpriv: skipped"; exit 77; }
    chmod 0755 "$tmp"
    mkdir -p "$tmp/bin"
    cp "$NVFP4TOOL" "$tmp/bin/nvfp4tool"
    chmod 0755 "$tmp/bin" "$tmp/bin/nvfp4tool"
    TOOL=(setpriv --reuid=65534 --regid=65534 --clear-groups "$tmp/bin/nvfp4tool")
    "${TOOL[@]}" --version >/dev/null 2>&1 ||
        { echo "uid 65534 cannot run the tool (${TOOL[*]}): skipped"; exit 77; }
}
