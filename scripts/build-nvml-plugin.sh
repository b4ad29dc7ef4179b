#!/usr/bin/env bash
# Build only Slurm's gpu_nvml.so, from Debian's patched source of exactly the installed slurmd
# version, for the NVML emulator tests (tests/nvml). Not the cluster's build (roles/slurm_build).
#
#   scripts/build-nvml-plugin.sh            # -> $CACHE/<slurmd version>/gpu_nvml.so
#
# CACHE: CLUSTER_CLI_NVML_PLUGIN_CACHE, default /var/cache/cluster-cli/nvml-plugin. Idempotent: a
# plugin whose build-info.json names the same version is kept. apt runs with a private
# configuration under the work directory (deb-src for main, deb for non-free's nvml.h); the
# machine's /etc/apt is not touched and nothing is installed. Root is not needed, only network
# to the Debian mirror (MIRROR, SECURITY_MIRROR), gcc and make.
set -euo pipefail

CACHE=${CLUSTER_CLI_NVML_PLUGIN_CACHE:-/var/cache/cluster-cli/nvml-plugin}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

version=$(dpkg-query -W -f='${Version}' slurmd)
upstream=${version%%-*}
out=$CACHE/$version
work=$out/work
if [ -f "$out/gpu_nvml.so" ] && grep -q "\"version\": \"$version\"" "$out/build-info.json" 2>/dev/null; then
  echo "cached: $out/gpu_nvml.so"
  exit 0
fi
rm -rf "$work"
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/deb"

private_apt() {
  local release
  release=$(. /etc/os-release && echo "$VERSION_CODENAME")
  cat >"$work/apt/sources.sources" <<EOF
Types: deb-src
URIs: $MIRROR
Suites: $release $release-updates
Components: main
Signed-By: $KEYRING

Types: deb-src
URIs: $SECURITY_MIRROR
Suites: $release-security
Components: main
Signed-By: $KEYRING

Types: deb
URIs: $MIRROR
Suites: $release $release-updates
Components: non-free
Signed-By: $KEYRING
EOF
  cat >"$work/apt/apt.conf" <<EOF
Dir::Etc::SourceList "$work/apt/sources.sources";
Dir::Etc::SourceParts "/dev/null";
Dir::State::Lists "$work/apt/lists";
Dir::Cache "$work/apt/cache";
APT::Sandbox::User "root";
EOF
  export APT_CONFIG=$work/apt/apt.conf
  apt-get -q update >/dev/null
}

fetch_sources() {
  (cd "$work" && apt-get -q source "slurm-wlm=$version" >/dev/null)
  (cd "$work/deb" && apt-get -q download libnvidia-ml-dev libnvidia-ml1 >/dev/null)
  local deb
  for deb in "$work"/deb/*.deb; do dpkg-deb -x "$deb" "$work/deb/x"; done
  # The CUDA-toolkit layout configure searches (docs/gpu.md).
  mkdir -p "$work/nvml/include" "$work/nvml/lib64/stubs"
  cp "$work/deb/x/usr/include/nvml.h" "$work/nvml/include/"
  cp "$(find "$work/deb/x" -name 'libnvidia-ml.so.1' | head -n1)" "$work/nvml/lib64/stubs/libnvidia-ml.so"
}

# Debian's options (debian/rules, dh_auto_configure) that change the plugin; --with-munge and
# --with-pmix only where their headers are installed (the plugin uses neither, and configure
# stops when an explicitly requested one is missing).
configure_slurm() {
  local multiarch opts
  multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
  opts=(--prefix=/usr --libdir="/usr/lib/$multiarch" --sysconfdir=/etc/slurm --localstatedir=/var
        --runstatedir=/run --disable-maintainer-mode --disable-dependency-tracking --without-rpath
        --disable-debug --enable-multiple-slurmd --with-nvml="$work/nvml")
  [ -f /usr/include/munge.h ] && opts+=(--with-munge)
  [ -d "/usr/lib/$multiarch/pmix2" ] && opts+=(--with-pmix="/usr/lib/$multiarch/pmix2")
  (cd "$work/slurm-wlm-$upstream" \
     && eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+all,-bindnow dpkg-buildflags --export=sh)" \
     && ./configure "${opts[@]}" SUCMD=/bin/su SLEEP_CMD=/bin/sleep >"$work/configure.log" 2>&1)
  grep -q '^#define HAVE_NVML 1' "$work/slurm-wlm-$upstream/config.h" \
    || { echo "configure found no NVML (see $work/configure.log)" >&2; exit 1; }
}

build_plugin() {
  local tree=$work/slurm-wlm-$upstream
  make -C "$tree/src/plugins/gpu/common" >"$work/make.log" 2>&1
  make -C "$tree/src/plugins/gpu/nvml" >>"$work/make.log" 2>&1
  cp "$tree/src/plugins/gpu/nvml/.libs/gpu_nvml.so" "$out/gpu_nvml.so.new"
  mv "$out/gpu_nvml.so.new" "$out/gpu_nvml.so"
}

step() {  # step NAME FUNCTION: run it, remember its seconds
  local start=$SECONDS
  "$2"
  timings+=("\"$1\": $((SECONDS - start))")
}

timings=()
step fetch_s private_apt
step sources_s fetch_sources
step configure_s configure_slurm
step make_s build_plugin
cat >"$out/build-info.json" <<EOF
{"version": "$version", "source": "slurm-wlm=$version (Debian)", $(IFS=,; echo "${timings[*]}"), "built": "$(date -u +%FT%TZ)"}
EOF
cat "$out/build-info.json"
echo "built: $out/gpu_nvml.so"
