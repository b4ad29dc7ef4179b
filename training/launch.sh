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
#   RDZV_PORT       first rendezvous port, +1 per launch (default: a port the kernel says is
#                   free on the head node, when this batch shell runs there; else 29500 + job id
#                   mod 1500 x 2 + launch, below the kernel's ephemeral range)
#
# and `launch_for_result RESULT SCRIPT [ARGS...]`: srun_torchrun SCRIPT --out RESULT ARGS, where
# a launch that fails after RESULT was written is not a failure of the job script: rank 0 writes
# RESULT after the last collective, so every rank's work is done and the failure is in teardown.
# It prints a `teardown-warning:` line, which the smoke check reports as a warning.

TRAINING_DIR=${TRAINING_DIR:-$SLURM_SUBMIT_DIR}
_launch_count=0

# A fixed formula can land on a port another program listens on (the old 29500 + id mod 20000
# reached into the ephemeral range), and the launch then fails on a healthy cluster.
rendezvous_port() {
    local head=$1 free=""
    if [ -n "${RDZV_PORT:-}" ]; then
        echo $((RDZV_PORT + _launch_count))
        return
    fi
    if [ "${SLURMD_NODENAME:-}" = "$head" ]; then
        free=$("${TRAIN_PYTHON:-python3}" -c \
            'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])' 2>/dev/null) || free=""
    fi
    echo "${free:-$((29500 + SLURM_JOB_ID % 1500 * 2 + _launch_count))}"
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
