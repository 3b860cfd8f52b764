package cluster

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/trainstep/trainstep/pkg/apistats"
)

// FaultProxy stands between a client under test and the cluster's API
// server: it forwards every request with the cluster's admin identity, and
// can delay or answer requests itself (429s, 409s), or go away entirely as
// an API server that stopped does. Requests are counted by verb and
// resource as they arrive.
type FaultProxy struct {
	// Kubeconfig points a client at the proxy (plain HTTP on 127.0.0.1).
	Kubeconfig string

	addr    string
	forward http.Handler

	mu       sync.Mutex
	fault    func(r *http.Request, call Call) Fault
	counts   map[string]int
	dryRuns  map[string]int
	server   *http.Server
	listener net.Listener
}

// Call describes one request as the proxy sees it.
type Call struct {
	// Verb is the Kubernetes verb: get, list, watch, create, update, patch, delete.
	Verb string
	// Resource is the resource's plural (pods, services, leases,
	// selfsubjectrulesreviews, …), with its subresource after a slash.
	Resource string
	// Name is the object's name when the path has one.
	Name string
	// Count is how many requests with this verb and resource came before.
	Count int
}

// Fault is what the proxy does with one request.
type Fault struct {
	// Status, when not 0, is answered without forwarding (429 with a
	// Retry-After of one second, 409 as an AlreadyExists for creates, 500
	// and 503 without Retry-After, so that client-go does not retry them
	// itself).
	Status int
	// ForwardFirst forwards the request and then answers Status anyway: the
	// server acted, the client never heard.
	ForwardFirst bool
	// Hold, when not nil, is waited on before the request is handled.
	Hold <-chan struct{}
}

// FaultProxy starts a proxy in front of the cluster's API server for one
// test; it stops when the test ends.
func (c *Cluster) FaultProxy(t testing.TB) *FaultProxy {
	t.Helper()
	target, err := url.Parse(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	p := &FaultProxy{forward: rp, counts: map[string]int{}, dryRuns: map[string]int{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = l.Addr().String()
	p.serve(l)
	p.Kubeconfig = filepath.Join(t.TempDir(), "proxy-kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: "http://%s"}}]
users: [{name: admin, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: admin}}]
current-context: proxy
`, p.addr)
	if err := os.WriteFile(p.Kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Down)
	return p
}

func (p *FaultProxy) serve(l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(p.handle)}
	p.mu.Lock()
	p.server, p.listener = srv, l
	p.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

// SetFault installs f, called for every request from now on; nil forwards all.
func (p *FaultProxy) SetFault(f func(r *http.Request, call Call) Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

// Count returns how many requests with verb and resource arrived so far.
func (p *FaultProxy) Count(verb, resource string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[verb+" "+resource]
}

// DryRuns is how many of Count's requests were dry runs (trainstep asks, before it creates
// anything, whether the namespace admits its pods): nothing was written for them.
func (p *FaultProxy) DryRuns(verb, resource string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dryRuns[verb+" "+resource]
}

// Down closes the proxy's listener and every open connection: clients see
// connections refused, as with an API server that stopped.
func (p *FaultProxy) Down() {
	p.mu.Lock()
	srv := p.server
	p.server = nil
	p.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Up listens again on the same address after Down.
func (p *FaultProxy) Up(t testing.TB) {
	t.Helper()
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", p.addr, err)
	}
	p.serve(l)
}

func (p *FaultProxy) handle(w http.ResponseWriter, r *http.Request) {
	req := apistats.Describe(r)
	call := Call{Verb: req.Verb, Resource: req.Resource, Name: req.Name}
	p.mu.Lock()
	key := call.Verb + " " + call.Resource
	call.Count = p.counts[key]
	p.counts[key]++
	if r.URL.Query().Has("dryRun") {
		p.dryRuns[key]++
	}
	fault := p.fault
	p.mu.Unlock()
	var f Fault
	if fault != nil {
		f = fault(r, call)
	}
	if f.Hold != nil {
		select {
		case <-f.Hold:
		case <-r.Context().Done():
			return
		}
	}
	if f.Status == 0 {
		p.forward.ServeHTTP(w, r)
		return
	}
	if f.ForwardFirst {
		p.forward.ServeHTTP(discardResponse{header: http.Header{}}, r)
	}
	w.Header().Set("Content-Type", "application/json")
	var reason string
	switch f.Status {
	case http.StatusTooManyRequests:
		reason = "TooManyRequests"
		w.Header().Set("Retry-After", "1")
	case http.StatusConflict:
		reason = "AlreadyExists"
		if call.Verb != "create" {
			reason = "Conflict"
		}
	case http.StatusInternalServerError:
		reason = "InternalError"
	case http.StatusServiceUnavailable:
		reason = "ServiceUnavailable"
	case http.StatusForbidden:
		reason = "Forbidden"
	}
	w.WriteHeader(f.Status)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":"injected by the test's proxy","details":{"name":%q,"kind":%q}}`,
		reason, f.Status, call.Name, strings.Split(call.Resource, "/")[0])
}

// discardResponse swallows the answer of a request forwarded for its effect only.
type discardResponse struct{ header http.Header }

func (d discardResponse) Header() http.Header         { return d.header }
func (d discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d discardResponse) WriteHeader(int)             {}
