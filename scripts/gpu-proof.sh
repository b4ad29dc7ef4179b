#!/usr/bin/env bash
# gpu-proof.sh: prove cluster-cli on one real GPU machine with no network (docs/gpu-validation.md).
#
#   scripts/gpu-proof.sh [--dry-run] BUNDLE_DIR [OUT_DIR]
#
# On a bare Debian GPU machine (root, the NVIDIA driver installed, nvidia-smi working, no network):
#  1. checks the prerequisites: root, nvidia-smi lists the GPUs, the Debian release is the bundle's;
#  2. points apt only at the bundle (BUNDLE_DIR/apt, a flat repository) for this run and installs
#     the control node's needs: python3-venv, then cluster-cli and ansible-core into a virtual
#     environment from BUNDLE_DIR/control (cluster-cli bundle --control-node), or uses the
#     cluster-cli already on PATH;
#  3. writes the single-host inventory (inventories/examples/gpu-single.yaml) with this machine's
#     name, CPU layout, memory, GPU count and type, the bundle as its package_mirror;
#  4. deploys with cluster-cli;
#  5. checks that slurmctld's node has as many GPUs as nvidia-smi lists (AutoDetect=nvml) and that
#     slurmd found them through NVML (slurmd -G, its log);
#  6. runs the smoke suite's GPU checks (gpu-binding, gpu: bf16 matmul and HBM copy, allreduce,
#     ddp) with JSON and JUnit reports;
#  7. writes OUT_DIR/summary.md.
# --dry-run prints the steps (and what the prerequisite checks find) and changes nothing.
set -euo pipefail

readonly BUNDLE_HOST_PATH=/srv/cluster-bundle
readonly GPU_CHECKS=gpu-binding,gpu,allreduce,ddp
DRY_RUN=0

usage() {
  sed -n '3,4p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

die() {
  echo "gpu-proof: error: $*" >&2
  exit 1
}

step() {
  echo "==> $*"
}

# Run a command with its output into a file, or print it in dry-run mode.
act_into() {
  local file=$1
  shift
  if ((DRY_RUN)); then
    echo "+ $* > $file"
  else
    "$@" >"$file" 2>&1
  fi
}

# Run a command, or print it in dry-run mode.
act() {
  if ((DRY_RUN)); then
    printf '+'
    printf ' %q' "$@"
    printf '\n'
  else
    "$@"
  fi
}

bundle_field() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$BUNDLE/bundle.json" "$1"
}

os_codename() {
  # shellcheck disable=SC1091
  (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
}

# Every prerequisite that fails is named, then the script stops before it changes anything.
check_prerequisites() {
  local problems=()
  if [[ ! -f "$BUNDLE/bundle.json" || ! -f "$BUNDLE/apt/Packages" ]]; then
    problems+=("$BUNDLE is not a bundle (no bundle.json or apt/Packages): make one with cluster-cli bundle")
  fi
  if ! compgen -G "$BUNDLE/wheels/torch-*.whl" >/dev/null; then
    problems+=("$BUNDLE/wheels has no torch wheel (made with --no-wheels?): the training checks need it")
  fi
  if [[ $(id -u) -ne 0 ]]; then
    problems+=("must run as root (it installs packages and deploys Slurm on this machine)")
  fi
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    problems+=("nvidia-smi not found: install the NVIDIA driver first (nvidia-smi counts the GPUs to expect)")
  elif ! nvidia-smi -L >/dev/null 2>&1; then
    problems+=("nvidia-smi -L fails: the NVIDIA driver does not work")
  fi
  if [[ -f "$BUNDLE/bundle.json" ]]; then
    local want have
    want=$(bundle_field release)
    have=$(os_codename)
    if [[ "$want" != "$have" ]]; then
      problems+=("release mismatch: the bundle is for Debian $want, this machine is ${have:-not Debian}")
    fi
  fi
  if ((${#problems[@]})); then
    local problem
    for problem in "${problems[@]}"; do
      echo "gpu-proof: prerequisite: $problem" >&2
    done
    if ((DRY_RUN)); then
      echo "gpu-proof: (dry run: continuing to print the steps)" >&2
    else
      die "${#problems[@]} prerequisite(s) missing; nothing was changed"
    fi
  fi
}

apt_only_bundle() {
  # apt options: the bundle is the only source for this run; the host's own lists are untouched
  APT_OPTS=(-o "Dir::Etc::SourceList=$WORK/bundle.list" -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$WORK/lists" -o Acquire::Languages=none)
  act mkdir -p "$WORK/lists/partial"
  if ((DRY_RUN)); then
    echo "+ echo 'deb [trusted=yes] file:$BUNDLE_HOST_PATH/apt ./' > $WORK/bundle.list"
  else
    echo "deb [trusted=yes] file:$BUNDLE_HOST_PATH/apt ./" >"$WORK/bundle.list"
  fi
}

place_bundle() {
  step "bundle at $BUNDLE_HOST_PATH (the inventory's package_mirror)"
  if [[ -e "$BUNDLE_HOST_PATH" ]]; then
    [[ "$(realpath "$BUNDLE_HOST_PATH")" == "$(realpath "$BUNDLE")" ]] ||
      die "$BUNDLE_HOST_PATH exists and is not $BUNDLE"
  else
    act ln -s "$(realpath "$BUNDLE")" "$BUNDLE_HOST_PATH"
  fi
}

install_control_node() {
  step "control node: python3-venv from the bundle, cluster-cli and ansible-core"
  apt_only_bundle
  act apt-get "${APT_OPTS[@]}" update
  act env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y python3-venv python3-apt
  if [[ -d "$BUNDLE/control" ]]; then
    act python3 -m venv --system-site-packages "$WORK/venv"
    act "$WORK/venv/bin/pip" install --no-index --find-links "$BUNDLE/control" cluster-cli
    CLUSTER_CLI="$WORK/venv/bin/cluster-cli"
  elif command -v cluster-cli >/dev/null 2>&1; then
    CLUSTER_CLI=$(command -v cluster-cli)
  elif ((DRY_RUN)); then
    CLUSTER_CLI=cluster-cli
  else
    die "no $BUNDLE/control and no cluster-cli on PATH: make the bundle with --control-node"
  fi
}

gpu_facts() {
  if ((DRY_RUN)) && ! nvidia-smi -L >/dev/null 2>&1; then
    GPU_COUNT=8 GPU_TYPE=h200
    return
  fi
  GPU_COUNT=$(nvidia-smi -L | grep -c '^GPU ')
  # "NVIDIA H200" -> h200: a substring of the type slurmd's NVML plugin reports (docs/gpu.md)
  GPU_TYPE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1 |
    tr '[:upper:]' '[:lower:]' | sed 's/^nvidia //' | awk '{print $1}' | tr -cd 'a-z0-9_-')
}

write_inventory() {
  step "inventory $INVENTORY: $NODE, $GPU_COUNT x $GPU_TYPE, autodetect: nvml"
  local sockets cores threads memory_mb
  sockets=$(lscpu -p=SOCKET | grep -v '^#' | sort -u | wc -l)
  cores=$(($(lscpu -p=CORE | grep -v '^#' | sort -u | wc -l) / sockets))
  threads=$(($(nproc --all) / (sockets * cores)))
  memory_mb=$(awk '/^MemTotal:/ {printf "%d", $2 / 1024 * 0.95}' /proc/meminfo)
  ((DRY_RUN)) && return
  cat >"$INVENTORY" <<EOF
# Written by scripts/gpu-proof.sh from inventories/examples/gpu-single.yaml and this machine.
cluster_name: gpu-proof
hosts:
  - name: $NODE
    connection: local
controllers:
  primary: $NODE
accounting:
  enabled: true
  host: $NODE
  users: [smoke]
node_groups:
  - name: gpu
    nodes: $NODE
    sockets: $sockets
    cores_per_socket: $cores
    threads_per_core: $threads
    real_memory_mb: $memory_mb
    gpus:
      count: $GPU_COUNT
      type: $GPU_TYPE
      autodetect: nvml
partitions:
  - name: gpu
    nodes: [gpu]
    default: true
package_mirror:
  apt:
    uri: file:$BUNDLE_HOST_PATH/apt
    suites: ["./"]
    trusted: true
  pip:
    find_links: [$BUNDLE_HOST_PATH/wheels]
    no_index: true
slurm:
  nvml_plugin: apt
EOF
}

check_autodetect() {
  step "slurmctld's node $NODE has the $GPU_COUNT GPUs nvidia-smi lists, found by NVML"
  act_into "$OUT/scontrol-node.txt" scontrol show node "$NODE"
  act_into "$OUT/slurmd-G.txt" slurmd -G -N "$NODE" || true
  ((DRY_RUN)) && return
  grep -Eq "Gres=gpu:([A-Za-z0-9_-]+:)?$GPU_COUNT([^0-9]|$)" "$OUT/scontrol-node.txt" ||
    die "scontrol show node $NODE: Gres is not $GPU_COUNT GPUs (see $OUT/scontrol-node.txt)"
  grep -rhs -e 'gpu/nvml' -e 'GPU system device' /var/log/slurm/ "$OUT/slurmd-G.txt" >"$OUT/nvml-evidence.txt" ||
    die "no gpu/nvml lines from slurmd -G or /var/log/slurm: NVML did not detect the GPUs"
}

write_summary() {
  step "summary: $OUT/summary.md"
  ((DRY_RUN)) && return
  python3 - "$OUT" "$NODE" "$GPU_COUNT" "$GPU_TYPE" "$BUNDLE" <<'EOF'
import json, pathlib, sys
out, node, count, kind, bundle = sys.argv[1:]
out = pathlib.Path(out)
report = json.loads((out / "smoke.json").read_text())
lines = [f"# GPU proof: {node}, {count} x {kind}", "",
         f"bundle: {bundle} ({json.loads(pathlib.Path(bundle, 'bundle.json').read_text())['total_bytes']} bytes)",
         f"smoke verdict: {report['verdict']}, started {report['started_at']}", "",
         "| check | verdict | figure | threshold | reason |", "|---|---|---|---|---|"]
for check in report["checks"]:
    figure = "" if check["figure"] is None else f"{check['figure']} {check['unit'] or ''} ({check['figure_name']})"
    bound = "" if check["threshold"] is None else f"{check['comparison']} {check['threshold']}"
    lines.append(f"| {check['name']} | {check['verdict']} | {figure} | {bound} | {check['reason'] or ''} |")
(out / "summary.md").write_text("\n".join(lines) + "\n")
EOF
}

main() {
  local args=()
  while (($#)); do
    case "$1" in
      --dry-run) DRY_RUN=1 ;;
      -h | --help) usage 0 ;;
      -*) usage ;;
      *) args+=("$1") ;;
    esac
    shift
  done
  ((${#args[@]} >= 1 && ${#args[@]} <= 2)) || usage
  BUNDLE=${args[0]}
  OUT=${args[1]:-gpu-proof-$(date -u +%Y%m%dT%H%M%SZ)}
  check_prerequisites
  NODE=$(hostname -s)
  WORK=$OUT/work
  INVENTORY=$OUT/inventory.yaml
  act mkdir -p "$OUT" "$WORK"
  place_bundle
  install_control_node
  gpu_facts
  write_inventory
  step "deploy"
  act "$CLUSTER_CLI" validate "$INVENTORY"
  act "$CLUSTER_CLI" deploy "$INVENTORY"
  check_autodetect
  step "smoke: $GPU_CHECKS"
  local smoke_rc=0
  act "$CLUSTER_CLI" smoke "$INVENTORY" --only "$GPU_CHECKS" --json "$OUT/smoke.json" --junit "$OUT/smoke.xml" ||
    smoke_rc=$?
  write_summary
  ((smoke_rc == 0)) || die "the smoke suite's GPU checks did not all pass (exit $smoke_rc): $OUT/summary.md"
}

main "$@"
