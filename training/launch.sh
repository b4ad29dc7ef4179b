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
#   RDZV_PORT       first rendezvous port (default 29500 + job id mod 20000; +1 per launch)

TRAINING_DIR=${TRAINING_DIR:-$SLURM_SUBMIT_DIR}
_launch_count=0

srun_torchrun() {
    local script=$1
    shift
    local nodes=${LAUNCH_NODES:-$SLURM_NNODES}
    local head addr port nproc
    head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
    addr=$(scontrol show node "$head" -o | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')
    port=$(( ${RDZV_PORT:-$((29500 + SLURM_JOB_ID % 20000))} + _launch_count ))
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
