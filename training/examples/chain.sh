#!/bin/bash
# Train, then evaluate, as two jobs: the second waits in the queue until the first has ended, and
# runs only if it ended well (--dependency=afterok); otherwise Slurm never starts it (squeue shows
# it pending with the reason DependencyNeverSatisfied until you scancel it).
#   bash chain.sh [train.py arguments]
set -euo pipefail
cd "$(dirname "$0")"
weights=$PWD/model-$(date +%Y%m%d-%H%M%S).pt
train=$(sbatch --parsable ddp.sbatch --save "$weights" "$@")
evaluate=$(sbatch --parsable --dependency="afterok:$train" evaluate.sbatch "$weights")
echo "training: job $train (ddp-$train.out); evaluation: job $evaluate (evaluate-$evaluate.out), after it"
