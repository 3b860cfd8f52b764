// Package apistats counts the requests a client sends to the API server, by
// verb and resource, on the client side. The benchmarks use it to show what
// trainstep itself costs the API server (the server's own metrics also count
// the scheduler's and the nodes' writes). It never changes a request.
package apistats

import (
	"encoding/json"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
)

// Counter is an http.RoundTripper wrapper that counts requests.
type Counter struct {
	mu     sync.Mutex
	counts map[string]int
}

// New returns an empty counter.
func New() *Counter { return &Counter{counts: map[string]int{}} }

// Wrap returns rt counting through c; it fits rest.Config.Wrap.
func (c *Counter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{counter: c, next: rt}
}

type roundTripper struct {
	counter *Counter
	next    http.RoundTripper
}

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	key := Key(req)
	r.counter.add(key)
	resp, err := r.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		r.counter.add(ThrottledPrefix + key)
	}
	return resp, err
}

// ThrottledPrefix starts the key of a request the API server answered 429
// Too Many Requests: its flow control turned the request away, and
// client-go sends it again after the Retry-After (counted again as a
// request). "throttled create pods" counts the creates turned away.
const ThrottledPrefix = "throttled "

func (c *Counter) add(key string) {
	c.mu.Lock()
	c.counts[key]++
	c.mu.Unlock()
}

// Counts returns a copy of the counts, keyed "verb resource", and the
// requests turned away, keyed ThrottledPrefix + "verb resource".
func (c *Counter) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// WriteFile writes the counts as a JSON object with sorted keys.
func (c *Counter) WriteFile(path string) error {
	b, err := json.MarshalIndent(c.Counts(), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Key names a request as Kubernetes' audit log would: a verb (get, list,
// watch, create, update, patch, delete, deletecollection) and the resource
// with its subresource ("pods", "pods/log", "selfsubjectaccessreviews").
func Key(req *http.Request) string {
	r := Describe(req)
	return r.Verb + " " + r.Resource
}

// Request is what an API request asks, read from its method and path.
type Request struct {
	Verb, Resource string
	// Name is the object's name when the path has one.
	Name string
}

// Describe reads the verb, resource and name of an API request:
// /api/v1/namespaces/ns/pods/name/log, /apis/group/version/namespaces/ns/leases/name, ….
// A path outside the API gives the method as verb and the path as resource.
func Describe(req *http.Request) Request {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// /api/v1/... or /apis/<group>/<version>/...
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return Request{Verb: strings.ToLower(req.Method), Resource: req.URL.Path}
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	var r Request
	if len(parts) > 0 {
		r.Resource = parts[0]
	}
	if len(parts) > 1 {
		r.Name = parts[1]
	}
	if len(parts) > 2 {
		r.Resource += "/" + parts[2]
	}
	r.Verb = verb(req, r.Name != "")
	return r
}

func verb(req *http.Request, named bool) string {
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			return "watch"
		case named:
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return strings.ToLower(req.Method)
}

// Total sums the counts whose verb is one of verbs.
func Total(counts map[string]int, verbs ...string) int {
	total := 0
	for key, n := range counts {
		v, _, _ := strings.Cut(key, " ")
		for _, want := range verbs {
			if v == want {
				total += n
			}
		}
	}
	return total
}

// Sorted returns the keys in order, for printing.
func Sorted(counts map[string]int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
