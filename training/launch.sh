# Sourced by the *.sbatch scripts: defines `srun_torchrun SCRIPT [ARGS...]`, which runs
#
#   srun torchrun --nnodes=$SLURM_NNODES --nproc_per_node=N \
#        --rdzv_backend=c10d --rdzv_endpoint=HEAD:PORT SCRIPT ARGS...
#
# with one torchrun agent per node and HEAD the first node of the allocation
# (`scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1`), reached at its NodeAddr.
#
# Environment (all optional):
#   TRAINING_DIR    directory holding the scripts (default: $SLURM_SUBMIT_DIR)
#   TRAIN_PYTHON    python with torch; runs `$TRAIN_PYTHON -m torch.distributed.run`
#                   (default: `torchrun` from PATH)
#   NPROC_PER_NODE  ranks per node (default: GPUs allocated on the node, else 1)
#   LAUNCH_NODES    nodes for this launch (default: all of the job's; 1 for a baseline run)
#   CONTAINER_BUNDLE  an OCI bundle: every srun runs its task in it (`srun --container`, docs/
#                   containers.md); TRAIN_PYTHON and the scripts must be at the same paths inside
#   RDZV_PORT       first rendezvous port, +1 per launch (default: 29500 + job id mod 1500 x 2
#                   + launch, below the kernel's ephemeral range, checked free on the head node)
#
# and `launch_for_result RESULT SCRIPT [ARGS...]`: srun_torchrun SCRIPT --out RESULT ARGS, where
# a launch that fails after RESULT was written is not a failure of the job script: rank 0 writes
# RESULT after the last collective, so every rank's work is done and the failure is in teardown.
# It prints a `teardown-warning:` line, which the smoke check reports as a warning.

TRAINING_DIR=${TRAINING_DIR:-$SLURM_SUBMIT_DIR}
_launch_count=0

# The port comes from below the kernel's ephemeral range (32768 and up by default), which no
# socket gets without asking for that number: a port the kernel hands out (bind to 0) can be
# handed to srun's own listeners a moment later, and the agents then wait on a socket that is not
# their store (a silent rendezvous hang, seen once in 50 smoke rounds). On the head node the
# candidate is checked free; a taken one moves on by 2, at most 20 times.
rendezvous_port() {
    local head=$1 port tries=0
    if [ -n "${RDZV_PORT:-}" ]; then
        echo $((RDZV_PORT + _launch_count))
        return
    fi
    port=$((29500 + SLURM_JOB_ID % 1500 * 2 + _launch_count))
    if [ "${SLURMD_NODENAME:-}" = "$head" ]; then
        while [ "$tries" -lt 20 ] && ! port_free "$port"; do
            port=$((29500 + (port - 29500 + 2) % 3000))
            tries=$((tries + 1))
        done
    fi
    echo "$port"
}

# port_free PORT: nothing on this host is bound to it (asked of the kernel with a bind).
port_free() {
    "${TRAIN_PYTHON:-python3}" -c \
        'import socket, sys; s = socket.socket(); s.bind(("", int(sys.argv[1])))' "$1" 2>/dev/null
}

srun_torchrun() {
    local script=$1
    shift
    local nodes=${LAUNCH_NODES:-$SLURM_NNODES}
    local head addr port nproc
    head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
    addr=$(scontrol show node "$head" -o | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')
    port=$(rendezvous_port "$head")
    nproc=${NPROC_PER_NODE:-${SLURM_GPUS_ON_NODE:-1}}
    _launch_count=$((_launch_count + 1))
    local -a torchrun=(torchrun)
    if [ -n "${TRAIN_PYTHON:-}" ]; then
        torchrun=("$TRAIN_PYTHON" -m torch.distributed.run)
    fi
    echo "launch: $script on $nodes node(s) x $nproc rank(s), rendezvous ${head} (${addr:-$head}):$port"
    srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 \
        --cpus-per-task="${SLURM_CPUS_ON_NODE:-1}" --kill-on-bad-exit=1 \
        ${CONTAINER_BUNDLE:+--container="$CONTAINER_BUNDLE"} \
        "${torchrun[@]}" --nnodes="$nodes" --nproc_per_node="$nproc" \
        --rdzv_backend=c10d --rdzv_endpoint="${addr:-$head}:$port" \
        --rdzv_id="${SLURM_JOB_ID}-${SLURM_RESTART_COUNT:-0}-${_launch_count}" \
        "$TRAINING_DIR/$script" "$@"
}

launch_for_result() {
    local result=$1 script=$2 rc=0
    shift 2
    rm -f "$result"  # so that a result found afterwards is this launch's
    srun_torchrun "$script" --out "$result" "$@" || rc=$?
    if [ "$rc" -ne 0 ] && [ -s "$result" ]; then
        echo "teardown-warning: $script exited $rc after writing its complete result $result"
        return 0
    fi
    return "$rc"
}
