// Package cluster runs a real Kubernetes control plane for integration tests: etcd,
// kube-apiserver (RBAC on), kube-controller-manager, kube-scheduler and kwok, built by
// `make cluster-bin` into bin/cluster and started on free loopback ports in a temporary
// directory. KWOK nodes stand in for kubelets; trainstep's own KWOK Stages (stages.yaml)
// play containers that run, exit with a chosen code, restart in place or stay Waiting, as
// annotations on the live pod ask (see the Annotation constants).
//
// Options.RealNode adds one real node, opt-in because it needs root, `make cluster-bin-node`
// and Debian's containerd, runc and CNI plugins: a kubelet, containerd and kube-proxy in a
// network namespace the cluster creates, running real containers of images imported into
// that containerd (ImportImage, ImportGoImage) — nothing is pulled. Stop removes every
// process, mount and the namespace again. Options.RealNodes starts more than one, each in a
// namespace of its own, routed to each other through this host; KillRealNode,
// PartitionRealNode, RestartRealNode and DeleteNode make one fail as a machine does.
//
// A test package calls Main from TestMain and Get from each test. The package must not be
// imported by product code, and it never fakes an API: behaviour asserted against it is
// Kubernetes' own.
package cluster
