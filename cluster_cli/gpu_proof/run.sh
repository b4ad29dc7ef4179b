#!/bin/sh
# The GPU proof (docs/gpu-validation.md), one command on the GPU machine, as root:
#
#   KIT/run OUT_DIR [--python PY] [--work DIR] [--fake-gpus] [--keep]
#
# Step 1 is this script's: can the machine run the kit's programs at all (x86-64, a C library at
# least as new as the kit's programs ask for, root, a Python of 3.10 or newer)? It stops in
# seconds with the reason otherwise. The rest is `python -m cluster_cli.gpu_proof` from the kit.
set -u
kit=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [--python PY] [--work DIR] [--fake-gpus] [--keep]" >&2; exit 2; }
out=$1; shift
python=""
rest=""
while [ $# -gt 0 ]; do
  case $1 in
    --python) python=$2; shift 2 ;;
    *) rest="$rest $1"; shift ;;
  esac
done
mkdir -p "$out" || exit 2
started=$(date +%s)

stop() {  # the first step's verdict, in the results directory too
  printf '# GPU proof\n\nStopped at the first step (machine): %s\n' "$1" >"$out/summary.md"
  printf '{"ok": false, "steps": [{"name": "machine-check", "verdict": "stop", "says": "%s"}]}\n' \
    "$(printf '%s' "$1" | sed 's/"/\\"/g')" >"$out/proof.json"
  echo "[   stop] machine-check: $1" >&2
  exit 1
}

floor=$(sed -n 's/.*"glibc_floor": "\([0-9.]*\)".*/\1/p' "$kit/kit.json")
[ -n "$floor" ] || stop "$kit/kit.json has no glibc_floor: not a GPU kit"
[ "$(uname -m)" = x86_64 ] || stop "this machine is $(uname -m); the kit's programs are x86-64"
[ "$(id -u)" = 0 ] || stop "run as root: the proof starts Slurm's daemons and creates the test user"
libc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p')
[ -n "$libc" ] || libc=$(ldd --version 2>/dev/null | sed -n '1s/.* \([0-9][0-9]*\.[0-9][0-9]*\)$/\1/p')
[ -n "$libc" ] || stop "no GNU C library found (getconf GNU_LIBC_VERSION, ldd --version): the kit needs glibc >= $floor"
if [ "$(printf '%s\n%s\n' "$floor" "$libc" | sort -t. -k1,1n -k2,2n | head -n1)" != "$floor" ]; then
  stop "the C library here is glibc $libc; the kit's programs (Slurm, munge) need glibc >= $floor: use a kit made on an older release"
fi
if [ -z "$python" ]; then
  python=$(command -v python3) || stop "no python3 on PATH: name the Python with torch with --python"
fi
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null ||
  stop "$python is not a Python 3.10 or newer"
checked="x86-64, glibc $libc >= $floor, root, $("$python" -V 2>&1) ($(( $(date +%s) - started )) s)"
# shellcheck disable=SC2086  # the other options, word-split on purpose
PYTHONPATH="$kit/python" exec "$python" -m cluster_cli.gpu_proof "$out" --kit "$kit" --python "$python" --machine-check "$checked" $rest
