#!/usr/bin/env bash
# Convert a checkpoint on a Slurm cluster: a job array of N parts (convert-array.sbatch, one
# GPU each) and a merge job that starts when every part has succeeded (merge.sbatch,
# --dependency=afterok). SRC and DST must be on a filesystem that every node sees.
#
#   submit.sh                 submit the N parts and the merge
#   submit.sh --tasks 2,5     run parts 2 and 5 again (after they failed; the others are kept,
#                             and --resume keeps the shards a failed part had finished), then
#                             the merge again
#
# Prints `convert=<array job id>` and `merge=<job id>` on stdout. Edit the variables below, or
# set them in the environment (the environment wins).
set -euo pipefail

# ---- what a user edits ----------------------------------------------------------------------
SRC=${SRC:-/shared/models/DeepSeek-V3}          # source checkpoint (FP8, BF16 or NVFP4)
DST=${DST:-/shared/models/DeepSeek-V3-NVFP4}    # output directory
N=${N:-16}                                      # parts = array tasks (one node/GPU each)
CONVERT_OPTS=${CONVERT_OPTS:-}                  # e.g. "--target prepared-w4a16 --ep 8"
NVFP4TOOL=${NVFP4TOOL:-nvfp4tool}               # the tool, by a path every node sees
PARTITION=${PARTITION:-}                        # empty: the cluster's default partition
GRES=${GRES-gpu:1}                              # per part; empty: request no GPU
DEVICE=${DEVICE:-cuda}                          # cuda, or cpu (then set GRES empty)
CPUS=${CPUS:-16}                                # CPUs per part and for the merge
MEM=${MEM:-16G}                                 # host memory per part (convert's budget is
                                                # --max-host-memory, 8 GiB by default)
TIME=${TIME:-02:00:00}                          # time limit per part
MERGE_OPTS=${MERGE_OPTS:-}                      # e.g. --rehash
CHECK=${CHECK:-hash}                            # after the merge: hash | validate | none
LOGDIR=${LOGDIR:-${DST%/}.slurm-logs}           # job outputs (not inside DST: DST holds
                                                # only what the conversion writes)
EXTRA_SBATCH=${EXTRA_SBATCH:-}                  # more sbatch options, e.g. "--account=abc"
# ---------------------------------------------------------------------------------------------

here=$(cd "$(dirname "$0")" && pwd)
tasks="0-$((N - 1))"
while [ $# -gt 0 ]; do
    case "$1" in
    --tasks)
        [ $# -ge 2 ] || { echo "submit.sh: --tasks needs a list, e.g. 2,5 or 3-7" >&2; exit 2; }
        tasks=$2
        shift 2
        ;;
    -h | --help)
        sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "submit.sh: unknown argument '$1' (see --help)" >&2
        exit 2
        ;;
    esac
done
case "$N" in '' | *[!0-9]* | 0)
    echo "submit.sh: N must be a positive integer, not '$N'" >&2
    exit 2
    ;;
esac
command -v sbatch >/dev/null || { echo "submit.sh: sbatch not found (no Slurm client here)" >&2; exit 1; }

# The jobs run in the directory sbatch is called from; make the paths independent of it.
SRC=$(realpath -m -- "$SRC")
DST=$(realpath -m -- "$DST")
LOGDIR=$(realpath -m -- "$LOGDIR")
if [[ "$NVFP4TOOL" == */* ]]; then NVFP4TOOL=$(realpath -m -- "$NVFP4TOOL"); fi
mkdir -p "$LOGDIR"

common=()
[ -n "$PARTITION" ] && common+=(--partition="$PARTITION")
read -r -a extra <<<"$EXTRA_SBATCH"
common+=("${extra[@]}")
gres=(--gres=none)
[ -n "$GRES" ] && gres=(--gres="$GRES")

# The sbatch scripts read these from their environment (sbatch exports it by default).
export SRC DST N CONVERT_OPTS NVFP4TOOL DEVICE MERGE_OPTS CHECK

convert=$(sbatch --parsable --array="$tasks" "${gres[@]}" --cpus-per-task="$CPUS" \
    --mem="$MEM" --time="$TIME" --output="$LOGDIR/convert-%A_%a.out" "${common[@]}" \
    "$here/convert-array.sbatch")
convert=${convert%%;*}
# kill-on-invalid-dep: when a part fails, the merge is cancelled instead of waiting forever;
# `submit.sh --tasks <failed>` queues a new one.
merge=$(sbatch --parsable --dependency="afterok:$convert" --kill-on-invalid-dep=yes \
    --cpus-per-task="$CPUS" --output="$LOGDIR/merge-%j.out" "${common[@]}" "$here/merge.sbatch")
merge=${merge%%;*}

echo "submit.sh: parts $tasks of N=$N: array job $convert; merge job $merge after it;" \
    "logs in $LOGDIR" >&2
echo "convert=$convert"
echo "merge=$merge"
