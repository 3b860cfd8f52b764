#!/usr/bin/env bash
# Installs the Debian packages `make test` needs, those missing only:
#   test-deps.sh               for the unit and KWOK tests
#   test-deps.sh --real-node   and for the real node's tests, test/e2e's among them
# As root it runs apt-get update once, and only when something is missing, then installs it.
# As another user with something missing it names the packages and the command that installs
# them, and exits 1 before any test runs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The executor's local MPI test runs OpenMPI's mpirun and compiles its program with mpicc,
# which calls gcc; PyTorch tests train with the system's torch.
packages=(openmpi-bin libopenmpi-dev gcc python3-torch)
if [ "${1:-}" = --real-node ]; then
	# The node's own packages, then what test/e2e packs into images from this machine: ssh and
	# sshd for the MPI job's replicas, python3 for the examples' script steps.
	mapfile -t node < <("$here/cluster/install-node-deps.sh" --list)
	packages+=("${node[@]}" openssh-server python3)
fi

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "test packages: all installed (${packages[*]})" >&2
	exit 0
fi

install=(apt-get install -y --no-install-recommends "${missing[@]}")
if [ "$(id -u)" != 0 ]; then
	cat >&2 <<MSG
make test needs these Debian packages, which are not installed: ${missing[*]}
Install them as root, then run make test again:
  sudo apt-get update && sudo ${install[*]}
(or run make test-deps as root)
MSG
	exit 1
fi

echo "test packages: installing ${missing[*]}" >&2
# Wait for another apt or dpkg run to finish rather than fail on its lock.
lock=(-o DPkg::Lock::Timeout=600)
apt-get "${lock[@]}" update -qq
DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

# Only ssh and sshd are wanted from openssh-server: the daemon its package starts is stopped
# and kept from starting at boot.
if [[ " ${missing[*]} " == *" openssh-server "* ]]; then
	if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
		systemctl disable --now ssh.service ssh.socket >/dev/null 2>&1 || true
	else
		update-rc.d ssh disable >/dev/null 2>&1 || true
		service ssh stop >/dev/null 2>&1 || true
	fi
fi
echo "test packages: installed ${missing[*]}" >&2
