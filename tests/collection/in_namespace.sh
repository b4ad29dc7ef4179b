#!/usr/bin/env bash
# The converge of tests/collection/test_collection.py, in namespaces of its own: run as
#   unshare --mount --net --pid --fork --kill-child --mount-proc --propagation private \
#       bash in_namespace.sh WORK NODES COMMAND [ARGS...]
# Its network has only its own loopback: the daemons' ports never meet another cluster's (the local
# cluster of tests/deploy, a developer's). /etc and /usr/local are overlays whose changes go to
# WORK/overlay, and /run and the Slurm and munge directories under /var are empty memory file
# systems (owned as the directories they hide): the converge installs its own munge key, slurm.conf
# and accounts there, and this host's are neither read nor changed. Every process started here
# ends with the namespace (--kill-child). Packages are not overlaid: the test skips unless the ones
# the roles install are there already, so nothing is installed.
# COMMAND runs the playbook; after it, the Slurm nodes NODES (comma-separated) must be idle in
# sinfo within 60 s. Exit: COMMAND's status when it failed, 3 when a node is not idle, else 0.
set -euo pipefail
work=$1 nodes=$2
shift 2
ip link set lo up
# Slurm looks addresses up with AI_ADDRCONFIG, for which glibc counts no interface that has only
# 127.0.0.1: a second loopback address stands in for a network (without it slurmctld cannot bind).
ip addr add 127.0.0.2/32 dev lo
for dir in /etc /usr/local; do
    layer="$work/overlay/${dir//\//_}"
    mkdir -p "$layer/upper" "$layer/work"
    mount -t overlay overlay -o "lowerdir=$dir,upperdir=$layer/upper,workdir=$layer/work" "$dir"
done
for dir in /run /var/lib/slurm /var/log/slurm /var/lib/munge /var/log/munge; do
    mkdir -p "$dir"
    mount -t tmpfs -o "mode=$(stat -c %a "$dir"),uid=$(stat -c %u "$dir"),gid=$(stat -c %g "$dir")" tmpfs "$dir"
done
# The daemons' logs go with the namespace: on a failure, their last lines go to the output.
logs() {
    for log in /var/log/slurm/*.log /var/log/munge/munged.log; do
        [ -f "$log" ] && { echo "in_namespace: --- last lines of $log"; tail -n 15 "$log"; }
    done
    return 0
}
started=$SECONDS
status=0
"$@" || status=$?
echo "in_namespace: the playbook took $((SECONDS - started)) s (exit $status)"
if [ "$status" != 0 ]; then
    logs
    exit "$status"
fi
for _ in $(seq 60); do
    idle=$(sinfo --noheader --Node --nodes="$nodes" --format='%N %T' 2>/dev/null | awk '$2 == "idle"' | sort -u | wc -l)
    if [ "$idle" = "$(tr , '\n' <<<"$nodes" | wc -l)" ]; then
        sinfo --noheader --Node --nodes="$nodes" --format='in_namespace: %N %T'
        exit 0
    fi
    sleep 1
done
sinfo --noheader --Node --nodes="$nodes" --format='in_namespace: %N %T %E' || true
logs
exit 3
