#!/usr/bin/env bash
# A real single-node Slurm for the test suite: Debian 12's slurm-wlm (slurmctld + slurmd) and
# munge, started on localhost without systemd or cgroups, all state in one directory.
#
#   setup.sh install     install the packages when missing (root: `scripts/deps.sh slurm`)
#   setup.sh start DIR   install when missing, then start munged, slurmctld and slurmd with their
#                        configuration, keys, sockets, state and logs under DIR (a new or empty
#                        directory) and wait (at most 60 s) until the node is idle; writes
#                        DIR/env, to be sourced: it exports SLURM_CONF, which every Slurm command
#                        (sbatch, squeue, scontrol, scancel) reads
#   setup.sh stop DIR    cancel the jobs, stop the daemons started by `start DIR` (by their pids)
#
# Exit status: 0 done; 77 Slurm cannot be installed or started here (not root, apt-get failed,
# a daemon failed: the reason and the logs' last lines go to stderr), which tests report as
# SKIP; with NVFP4_SLURM_REQUIRE=1 those are exit 1 instead. 2 usage.
#
# Each start picks free TCP ports and its own node name, so two clusters (two worktrees, two
# builds) can run side by side; the ctest case runs serially all the same.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
skip_rc=77
[ "${NVFP4_SLURM_REQUIRE:-0}" = 1 ] && skip_rc=1

skip() {
    echo "slurm setup: SKIP: $*" >&2
    exit "$skip_rc"
}

have_slurm() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
        command -v sbatch >/dev/null && command -v munged >/dev/null
}

install() {
    have_slurm && return 0
    [ "$(id -u)" -eq 0 ] ||
        skip "Slurm (slurm-wlm, munge) is not installed and we are not root to install it" \
            "(as root: bash scripts/deps.sh slurm)"
    local t0 rc=0
    t0=$(date +%s)
    bash "$root/scripts/deps.sh" slurm || rc=$?
    [ "$rc" -eq 0 ] || skip "installing slurm-wlm and munge failed (scripts/deps.sh slurm: exit $rc)"
    have_slurm || skip "slurm-wlm and munge installed but slurmctld/slurmd/sbatch/munged not found"
    echo "slurm setup: installed slurm-wlm and munge in $(($(date +%s) - t0)) s" >&2
}

# Two TCP ports free on this machine now (a later bind may still lose a race; start then fails
# and says so).
free_ports() {
    python3 - <<'EOF'
import socket
socks = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

logs() {
    local dir=$1 f
    for f in "$dir"/log/*.log; do
        [ -f "$f" ] || continue
        echo "--- last lines of $f:" >&2
        tail -n 15 "$f" >&2
    done
}

# Start one daemon in the foreground mode, in the background, its pid in DIR/pids/NAME.
launch() {
    local dir=$1 name=$2
    shift 2
    "$@" </dev/null >"$dir/log/$name.out" 2>&1 &
    echo $! >"$dir/pids/$name"
}

alive() {
    local pidf=$1
    [ -f "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null
}

# Every cluster started, with the pid of the process it belongs to (NVFP4_SLURM_OWNER, else
# the caller of `start`): a test killed before its teardown (a ctest timeout) leaves daemons
# behind, which the next start stops.
registry=/tmp/nvfp4-slurm-clusters
reap_stale() {
    local d owner keep=()
    [ -f "$registry" ] || return 0
    while read -r d owner; do
        [ -d "$d" ] || continue
        if kill -0 "$owner" 2>/dev/null; then
            keep+=("$d $owner")
        else
            echo "slurm setup: stopping the cluster left in $d (its owner $owner is gone)" >&2
            stop "$d" || true
        fi
    done <"$registry"
    printf '%s\n' "${keep[@]}" >"$registry"
}

start() {
    local dir=$1
    install
    [ "$(id -u)" -eq 0 ] || skip "the test cluster runs its daemons as root (SlurmUser=root)"
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ -z "$(ls -A "$dir")" ] || { echo "slurm setup: $dir is not empty" >&2; exit 2; }
    # munged refuses a socket or key in a directory that others may write to.
    chmod 0700 "$dir"
    mkdir -p "$dir"/{munge,state,spool,log,pids}
    chmod 0700 "$dir/munge"
    (
        flock 9
        reap_stale
        echo "$dir ${NVFP4_SLURM_OWNER:-$PPID}" >>"$registry"
    ) 9>>"$registry.lock"

    local host node ports ctld_port slurmd_port hw
    host=$(hostname -s)
    node="nvfp4t$$"
    mkdir -p "$dir/spool/$node"
    ports=$(free_ports) || skip "cannot find free TCP ports (python3 failed)"
    ctld_port=${ports% *}
    slurmd_port=${ports#* }
    # The node's real hardware as slurmd sees it, so that it registers without a mismatch.
    hw=$(slurmd -C 2>/dev/null | head -n 1 | sed -e 's/^NodeName=[^ ]* //') ||
        skip "slurmd -C failed"
    [ -n "$hw" ] || skip "slurmd -C printed nothing"

    if command -v mungekey >/dev/null; then
        mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null 2>&1 ||
            skip "mungekey --create failed"
    else
        dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    fi
    chmod 0400 "$dir/munge/munge.key"

    cat >"$dir/slurm.conf" <<EOF
# Written by tests/slurm/setup.sh: a one-node test cluster, no systemd, no cgroups.
ClusterName=nvfp4test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
ReturnToService=2
MinJobAge=600
SlurmdTimeout=60
InactiveLimit=0
KillWait=2
MailProg=/bin/true
NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    : >"$dir/plugstack.conf"
    {
        echo "export SLURM_CONF='$dir/slurm.conf'"
        echo "NVFP4_SLURM_NODE='$node'"
    } >"$dir/env"
    export SLURM_CONF="$dir/slurm.conf"

    launch "$dir" munged munged --foreground --force \
        --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
        --seed-file="$dir/munge/munged.seed"
    for _ in $(seq 1 50); do
        [ -S "$dir/munge/munge.socket" ] && break
        alive "$dir/pids/munged" || break
        sleep 0.1
    done
    if [ ! -S "$dir/munge/munge.socket" ]; then
        logs "$dir"
        stop "$dir"
        skip "munged did not start"
    fi

    launch "$dir" slurmctld slurmctld -D -c -i -f "$dir/slurm.conf"
    launch "$dir" slurmd slurmd -D -N "$node" -f "$dir/slurm.conf"

    local state=
    for _ in $(seq 1 600); do
        state=$(sinfo -h -N -n "$node" -o %t 2>/dev/null | head -n 1) || state=
        [ "$state" = idle ] && break
        if ! alive "$dir/pids/slurmctld" || ! alive "$dir/pids/slurmd"; then
            state="a daemon exited"
            break
        fi
        sleep 0.1
    done
    if [ "$state" != idle ]; then
        logs "$dir"
        stop "$dir"
        skip "the Slurm node did not become idle within 60 s (last state: '${state:-none}')"
    fi
    echo "slurm setup: node $node idle (slurmctld port $ctld_port, slurmd port $slurmd_port)" >&2
}

# Stop one daemon by its recorded pid: TERM, then KILL after 10 s.
halt() {
    local pidf=$1 pid
    [ -f "$pidf" ] || return 0
    pid=$(cat "$pidf")
    kill -TERM "$pid" 2>/dev/null || { rm -f "$pidf"; return 0; }
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -f "$pidf"
}

# slurmstepd processes outlive slurmd; find ours by their sockets under DIR's spool.
stepds() {
    local dir=$1 p fd
    for p in /proc/[0-9]*; do
        [ "$(cat "$p/comm" 2>/dev/null)" = slurmstepd ] || continue
        for fd in "$p"/fd/*; do
            case "$(readlink "$fd" 2>/dev/null)" in "$dir/spool/"*)
                echo "${p#/proc/}"
                break
                ;;
            esac
        done
    done
}

stop() {
    local dir=$1 pid
    [ -d "$dir" ] || return 0
    dir=$(cd "$dir" && pwd)
    export SLURM_CONF="$dir/slurm.conf"
    if alive "$dir/pids/slurmctld"; then
        scancel --quiet --full --user="$(id -un)" 2>/dev/null || true
        for _ in $(seq 1 100); do
            [ -z "$(squeue -h -t PD,R,CG,S -o %i 2>/dev/null)" ] && break
            sleep 0.1
        done
    fi
    halt "$dir/pids/slurmd"
    halt "$dir/pids/slurmctld"
    for pid in $(stepds "$dir"); do
        kill -KILL "$pid" 2>/dev/null || true
    done
    halt "$dir/pids/munged"
}

case "${1:-}" in
install) install ;;
start)
    [ $# -eq 2 ] || { echo "usage: setup.sh start DIR" >&2; exit 2; }
    start "$2"
    ;;
stop)
    [ $# -eq 2 ] || { echo "usage: setup.sh stop DIR" >&2; exit 2; }
    stop "$2"
    ;;
*)
    echo "usage: setup.sh install | start DIR | stop DIR" >&2
    exit 2
    ;;
esac
