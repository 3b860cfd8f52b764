#!/usr/bin/env bash
# Builds the test cluster's binaries into OUTDIR:
#   build.sh OUTDIR          etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok
#   build.sh --node OUTDIR   the real node's kubelet, kube-proxy, pause (the sandbox image's
#                            binary) and coredns, for cluster.Options{RealNode: true}
#   build.sh --argo OUTDIR   Argo's workflow-controller and argoexec, at the version argo/go.mod
#                            pins (trainstep's own)
#   build.sh --scheduler-plugins OUTDIR
#                            scheduler-plugins' kube-scheduler with its plugins (coscheduling) and
#                            its controller, at the version scheduler-plugins/go.mod pins, as
#                            scheduler-plugins and scheduler-plugins-controller
#   build.sh --kueue OUTDIR  Kueue's manager (cmd/kueue), at the version kueue/go.mod pins, as kueue
#
# The binaries are cached outside the clone, keyed by versions.env and the Go version, so a
# fresh clone on a warm machine copies them in seconds and a cold machine builds them once.
# The two sets are separate cache entries: the KWOK cluster never waits for the node's build.
#   TRAINSTEP_CACHE   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/trainstep)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
set=kwok
case "${1:-}" in
--node | --argo | --scheduler-plugins | --kueue)
	set=${1#--}
	shift
	;;
esac
outdir=${1:?usage: build.sh [--node|--argo|--scheduler-plugins|--kueue] <outdir>}
go=${GO:-go}

# shellcheck source=versions.env
source "$here/versions.env"
: "${KUBERNETES_VERSION:?} ${ETCD_VERSION:?} ${KWOK_VERSION:?}"

kube_commands=(kube-apiserver kube-controller-manager kube-scheduler)
# The version a release build stamps into the control plane (Kubernetes' hack/lib/version.sh):
# without it GET /version says v0.0.0-master+$Format:%H$, which clients that parse the
# server's version refuse (Kueue's manager exits).
kube_minor=${KUBERNETES_VERSION#v1.}
kube_minor=${kube_minor%%.*}
kube_version_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kube_version_ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor -X $pkg.gitTreeState=clean"
done
node_commands=(kubelet kube-proxy)
build_flags=(-trimpath "-ldflags=-s -w")
go_version=$("$go" env GOVERSION)
cache_root=${TRAINSTEP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainstep}
argo_commands=(argoexec workflow-controller)
argo_module=github.com/argoproj/argo-workflows/v3

# build_argo builds argo_commands from a copy of Argo's module. Module zips leave out
# symbolic links, and Argo's Linux code of workflow/executor/osspecific is one
# (signal_linux.go -> signal_darwin.go): without it argoexec fails with "undefined: Setpgid",
# whatever the cgo setting or build tags. The copy restores the link; argo/go.mod's graph and
# go.sum are used as they are, with the module replaced by that copy.
build_argo() {
	local dir=$1 src work
	src=$(cd "$here/argo" && "$go" mod download -json "$argo_module@$argo_version" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$src" ] || { log "cannot find $argo_module@$argo_version in the module cache"; return 1; }
	rm -rf "$cache_root"/cluster-bin/.argo-src.* # an interrupted build's copy
	work=$(mktemp -d "$cache_root/cluster-bin/.argo-src.XXXXXX")
	cp -r "$src" "$work/argo"
	chmod -R u+w "$work/argo"
	local link=$work/argo/workflow/executor/osspecific/signal_linux.go
	[ -e "$link" ] || ln -s signal_darwin.go "$link"
	cp "$here/argo/go.mod" "$work/go.mod"
	cp "$here/argo/go.sum" "$work/go.sum"
	(cd "$here/argo" && "$go" mod edit -modfile="$work/go.mod" -replace="$argo_module=$work/argo")
	log "building workflow-controller and argoexec $argo_version"
	(cd "$here/argo" && CGO_ENABLED=0 "$go" build -modfile="$work/go.mod" -trimpath \
		"-ldflags=-s -w -X $argo_module.version=$argo_version" -o "$dir/" "${argo_commands[@]/#/$argo_module/cmd/}")
	rm -rf "$work"
}
case $set in
node)
	binaries=("${node_commands[@]}" pause coredns)
	key=node-$( { echo node; grep -v '^#' "$here/versions.env"; cat "$here/pause/main.go" "$here/coredns/main.go" "$here/coredns/go.mod"; echo "$go_version ${build_flags[*]}"; } | sha256sum | cut -c1-16)
	stamp=.cache-key-node
	;;
argo)
	binaries=("${argo_commands[@]}")
	argo_version=$(sed -n 's#^[[:space:]]*github.com/argoproj/argo-workflows/v3 \(v[^ ]*\).*#\1#p' "$here/argo/go.mod")
	key=argo-$( { echo argo; cat "$here/argo/go.mod" "$here/argo/go.sum"; declare -f build_argo; echo "$go_version ${build_flags[*]}"; } | sha256sum | cut -c1-16)
	stamp=.cache-key-argo
	;;
scheduler-plugins)
	binaries=(scheduler-plugins scheduler-plugins-controller)
	key=scheduler-plugins-$( { echo "${binaries[@]}"; cat "$here/scheduler-plugins/go.mod" "$here/scheduler-plugins/go.sum"; echo "$go_version ${build_flags[*]}"; } | sha256sum | cut -c1-16)
	stamp=.cache-key-scheduler-plugins
	;;
kueue)
	binaries=(kueue)
	# Comment lines of go.mod do not change the build.
	key=kueue-$( { echo kueue; grep -v '^//' "$here/kueue/go.mod"; cat "$here/kueue/go.sum"; echo "$go_version ${build_flags[*]}"; } | sha256sum | cut -c1-16)
	stamp=.cache-key-kueue
	;;
*)
	binaries=(etcd "${kube_commands[@]}" kwok)
	key=$( { grep -v '^#' "$here/versions.env"; cat "$here/etcd/main.go"; echo "$go_version ${build_flags[*]}$kube_version_ldflags"; } | sha256sum | cut -c1-16)
	stamp=.cache-key
	;;
esac
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
	if [ "$set" = argo ]; then
		build_argo "$dir"
		return
	fi
	if [ "$set" = scheduler-plugins ]; then
		# Its own module: sigs.k8s.io/scheduler-plugins is built on Kubernetes 1.34's scheduler
		# framework, so its k8s.io/* stay on 1.34 whatever the cluster's version.
		log "building scheduler-plugins $(sed -n 's#^[[:space:]]*sigs.k8s.io/scheduler-plugins \(v[^ ]*\).*#\1#p' "$here/scheduler-plugins/go.mod")"
		(cd "$here/scheduler-plugins" && "$go" build "${build_flags[@]}" -o "$dir/scheduler-plugins" sigs.k8s.io/scheduler-plugins/cmd/scheduler)
		# Its controller keeps PodGroups' status: the update that sends pods coscheduling turned
		# away back to the scheduler's queue when room frees up.
		(cd "$here/scheduler-plugins" && "$go" build "${build_flags[@]}" -o "$dir/scheduler-plugins-controller" sigs.k8s.io/scheduler-plugins/cmd/controller)
		return
	fi
	if [ "$set" = kueue ]; then
		# Its own module: Kueue pins its own k8s.io/* and controller-runtime, built as it
		# declares them (no replace lines).
		log "building kueue $(sed -n 's#^[[:space:]]*sigs.k8s.io/kueue \(v[^ ]*\).*#\1#p' "$here/kueue/go.mod")"
		(cd "$here/kueue" && "$go" build "${build_flags[@]}" -o "$dir/kueue" sigs.k8s.io/kueue/cmd/kueue)
		return
	fi
	sync_go_mod
	if [ "$set" = node ]; then
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
	(cd "$here" && "$go" build -trimpath "-ldflags=-s -w$kube_version_ldflags" -o "$dir/" "${kube_commands[@]/#/k8s.io/kubernetes/cmd/}")
	(cd "$here" && "$go" build "${build_flags[@]}" -o "$dir/" ./etcd)
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
