package cluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// dnsUser is CoreDNS's user name (its client certificate's common name).
	dnsUser = "system:coredns"
	// dnsReadyPort is CoreDNS's ready plugin on the node IP: 200 once it has synced with
	// the API server.
	dnsReadyPort = 8181
	// clusterDomain is the DNS domain of Services and pods, as in a kubeadm cluster.
	clusterDomain = "cluster.local"
)

// startCoreDNS runs CoreDNS in the node's namespace on the node IP, port 53, serving
// cluster.local from the API server; the kubelet gives pods the node IP as their
// nameserver. Every real node has its own, so a node's pods resolve names while another
// node is down. There is no upstream: other names do not resolve.
func (c *Cluster) startCoreDNS(ctx context.Context, n *realNode, watched ...*component) error {
	if err := c.grantCoreDNS(ctx); err != nil {
		return err
	}
	ready := n.Network.NodeIP + ":" + strconv.Itoa(dnsReadyPort)
	corefile := clusterDomain + `:53 in-addr.arpa:53 ip6.arpa:53 {
    errors
    ready ` + ready + `
    kubernetes ` + clusterDomain + ` in-addr.arpa ip6.arpa {
        kubeconfig ` + c.files.node.dnsKubeconfig + `
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
}
`
	path := filepath.Join(n.Dir, "Corefile")
	if err := writeFiles(map[string][]byte{path: []byte(corefile)}); err != nil {
		return err
	}
	dns, err := c.startInNode(n, "coredns", "-conf", path)
	if err != nil {
		return err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := waitFor(ctx, "CoreDNS /ready", append(watched, dns), httpOK(plain, "http://"+ready+"/ready")); err != nil {
		return err
	}
	c.mark(n.component("CoreDNS"))
	return nil
}

// grantCoreDNS gives dnsUser what CoreDNS's own deployment manifests grant it: reading
// Services, EndpointSlices, pods and namespaces.
func (c *Cluster) grantCoreDNS(ctx context.Context) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "trainstep:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "trainstep:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: dnsUser}},
	}
	rbac := c.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CoreDNS's ClusterRole: %w", err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CoreDNS's ClusterRoleBinding: %w", err)
	}
	return nil
}
