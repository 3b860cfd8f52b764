#!/usr/bin/env bash
# Installs what the test cluster's real node (cluster.Options{RealNode: true}, make cluster-up
# REAL_NODE=1) needs from Debian besides the binaries build.sh makes: containerd and runc, the
# CNI plugins (bridge, host-local, loopback, portmap), iptables for kube-proxy and the bridge's
# masquerading, and conntrack. Needs root; packages already present are left alone.
# With --list it prints the packages, one a line, and installs nothing (hack/test-deps.sh).
set -euo pipefail

packages=(containerd runc containernetworking-plugins iptables conntrack iproute2)
if [ "${1:-}" = --list ]; then
	printf '%s\n' "${packages[@]}"
	exit 0
fi
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "node packages: all installed (${packages[*]})" >&2
	exit 0
fi
echo "node packages: installing ${missing[*]}" >&2
apt-get update -qq
# The test cluster starts its own containerd with its own root and socket; the package's
# service is not wanted (and on machines without systemd it is not started anyway).
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
