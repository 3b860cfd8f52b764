#!/usr/bin/env bash
# Builds the test cluster's binaries into OUTDIR:
#   build.sh OUTDIR          etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok
#   build.sh --node OUTDIR   the real node's kubelet, kube-proxy, pause (the sandbox image's
#                            binary) and coredns, for cluster.Options{RealNode: true}
#
# The binaries are cached outside the clone, keyed by versions.env and the Go version, so a
# fresh clone on a warm machine copies them in seconds and a cold machine builds them once.
# The two sets are separate cache entries: the KWOK cluster never waits for the node's build.
#   TRAINSTEP_CACHE   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/trainstep)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
node=false
if [ "${1:-}" = --node ]; then
	node=true
	shift
fi
outdir=${1:?usage: build.sh [--node] <outdir>}
go=${GO:-go}

# shellcheck source=versions.env
source "$here/versions.env"
: "${KUBERNETES_VERSION:?} ${ETCD_VERSION:?} ${KWOK_VERSION:?}"

kube_commands=(kube-apiserver kube-controller-manager kube-scheduler)
node_commands=(kubelet kube-proxy)
build_flags=(-trimpath "-ldflags=-s -w")
go_version=$("$go" env GOVERSION)
cache_root=${TRAINSTEP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainstep}
if $node; then
	binaries=("${node_commands[@]}" pause coredns)
	key=node-$( { echo node; grep -v '^#' "$here/versions.env"; cat "$here/pause/main.go" "$here/coredns/main.go" "$here/coredns/go.mod"; echo "$go_version ${build_flags[*]}"; } | sha256sum | cut -c1-16)
	stamp=.cache-key-node
else
	binaries=(etcd "${kube_commands[@]}" kwok)
	key=$( { grep -v '^#' "$here/versions.env"; cat "$here/etcd/main.go"; echo "$go_version ${build_flags[*]}"; } | sha256sum | cut -c1-16)
	stamp=.cache-key
fi
cache=$cache_root/cluster-bin/$key

log() { echo "cluster-bin: $*" >&2; }

# install_from_cache hard-links (or copies, across file systems) the cached binaries into
# outdir and records the key so the next call is a no-op.
install_from_cache() {
	mkdir -p "$outdir"
	for b in "${binaries[@]}"; do
		rm -f "$outdir/$b"
		ln "$cache/$b" "$outdir/$b" 2>/dev/null || cp "$cache/$b" "$outdir/$b"
	done
	echo "$key" >"$outdir/$stamp"
}

# sync_go_mod writes versions.env into go.mod: the commands' module, etcd, and a replace for
# every staging module that k8s.io/kubernetes itself replaces with ./staging/src/....
sync_go_mod() {
	local staging_version=v0.${KUBERNETES_VERSION#v1.}
	local kube_mod
	kube_mod=$(cd "$here" && "$go" mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	local edits=(-require="k8s.io/kubernetes@$KUBERNETES_VERSION" -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION")
	# tool lines keep the commands' packages in the module graph through `go mod tidy`.
	for cmd in "${kube_commands[@]}" "${node_commands[@]}"; do
		edits+=(-tool="k8s.io/kubernetes/cmd/$cmd")
	done
	local module cmd
	for module in $(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$kube_mod"); do
		edits+=(-replace="$module=$module@$staging_version")
	done
	cp "$here/go.mod" "$here/go.mod.before"
	(cd "$here" && "$go" mod edit "${edits[@]}")
	if ! cmp -s "$here/go.mod" "$here/go.mod.before" || [ ! -s "$here/go.sum" ]; then
		log "versions changed: updating hack/cluster/go.mod and go.sum (commit them)"
		(cd "$here" && "$go" mod tidy)
	fi
	rm -f "$here/go.mod.before"
}

build_into() {
	local dir=$1
	sync_go_mod
	if $node; then
		log "building kubelet, kube-proxy $KUBERNETES_VERSION and pause"
		(cd "$here" && "$go" build "${build_flags[@]}" -o "$dir/" "${node_commands[@]/#/k8s.io/kubernetes/cmd/}")
		# pause is the only process of a FROM-scratch image: static, no libc.
		(cd "$here" && CGO_ENABLED=0 "$go" build "${build_flags[@]}" -o "$dir/pause" ./pause)
		# CoreDNS is its own module (coredns/go.mod pins its version), so its dependencies
		# never change the versions the Kubernetes binaries are built with.
		log "building coredns $(sed -n 's#^require github.com/coredns/coredns ##p' "$here/coredns/go.mod")"
		(cd "$here/coredns" && "$go" build "${build_flags[@]}" -o "$dir/coredns" .)
		return
	fi
	log "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBERNETES_VERSION and etcd $ETCD_VERSION"
	(cd "$here" && "$go" build "${build_flags[@]}" -o "$dir/" ./etcd "${kube_commands[@]/#/k8s.io/kubernetes/cmd/}")
	log "building kwok $KWOK_VERSION"
	# go install pkg@version ignores the current module, so kwok keeps its own k8s.io versions.
	(cd "$dir" && GOBIN="$dir" "$go" install "${build_flags[@]}" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
}

installed() {
	[ -f "$outdir/$stamp" ] && [ "$(cat "$outdir/$stamp")" = "$key" ] || return 1
	for b in "${binaries[@]}"; do [ -x "$outdir/$b" ] || return 1; done
}
if installed; then
	log "up to date in $outdir"
	exit 0
fi

mkdir -p "$cache_root/cluster-bin"
# One build at a time per machine: a second caller waits and then reuses the result.
exec 9>"$cache_root/cluster-bin/.lock"
flock 9
if [ ! -f "$cache/.complete" ]; then
	log "no cached binaries for key $key: building once (this takes a while on a small machine)"
	start=$(date +%s)
	# Leftovers of an interrupted build are useless; this run's own go on failure.
	rm -rf "$cache".partial.*
	partial="$cache.partial.$$"
	mkdir -p "$partial"
	trap 'rm -rf "$partial"' EXIT
	build_into "$partial"
	touch "$partial/.complete"
	rm -rf "$cache"
	mv "$partial" "$cache"
	trap - EXIT
	log "built in $(($(date +%s) - start))s, cached in $cache"
fi
install_from_cache
log "installed in $outdir (from cache $cache)"
