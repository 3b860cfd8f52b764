// Command coredns is CoreDNS with only the plugins the test cluster's real node needs to
// serve cluster.local from the API server — kubernetes, ready, errors, log — so that
// <svc>.<ns>.svc, <pod>.<svc>.<ns>.svc and every per-replica Service resolve in its pods.
// A full CoreDNS build pulls in every cloud provider's SDK; this is the same server, the
// way CoreDNS documents building it with a chosen set of plugins.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	// The order the plugins handle a query in, as in CoreDNS's plugin.cfg.
	dnsserver.Directives = []string{"ready", "errors", "log", "kubernetes"}
}

func main() {
	coremain.Run()
}
