package trainerstatus

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"
)

// Defaults of the update rate: a few a second, whatever the number of
// ranks posting; more are answered 429.
const (
	DefaultRate  = 5
	DefaultBurst = 5
)

// Server timeouts: a slow or silent client holds a connection for at most
// these, never the step.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 15 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 16 << 10
)

// MaxConnections bounds the connections the endpoint holds at once: a job
// has at most a few leaders that report, and a replica that opens
// thousands cannot exhaust the step's file descriptors or memory (the
// rest wait in the kernel's backlog).
const MaxConnections = 32

// Source says where a status came from.
type Source string

const (
	SourceHTTP    Source = "http"
	SourceLogLine Source = "log"
)

// Options configure a Server.
type Options struct {
	// Namespace and JobName make the one path served.
	Namespace, JobName string
	Material           Material
	// OnStatus is called with each status applied, in order, one call at a
	// time: raw is the trainerStatus object as sent.
	OnStatus func(s *Status, raw []byte, from Source)
	// Rate and Burst bound the statuses applied; zero takes the defaults.
	Rate  rate.Limit
	Burst int
	// Logger gets the server's own errors (TLS handshakes) at debug level:
	// a client must not be able to fill the step's log.
	Logger *zap.Logger
}

// Server is one job's status endpoint.
type Server struct {
	path     string
	token    []byte
	onStatus func(*Status, []byte, Source)
	limiter  *rate.Limiter
	http     *http.Server
	material Material

	mu      sync.Mutex // serializes OnStatus
	counts  sync.Mutex
	refused map[int]int
}

// Path is the path served for a job, Kubeflow Trainer's own.
func Path(namespace, jobName string) string {
	return "/apis/trainer.kubeflow.org/v1alpha1/namespaces/" + namespace + "/trainjobs/" + jobName + "/status"
}

// New prepares a Server; Serve starts it. Without a Material it serves
// nothing and only Accept applies statuses (from log lines).
func New(opts Options) *Server {
	if opts.Rate <= 0 {
		opts.Rate = DefaultRate
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.OnStatus == nil {
		opts.OnStatus = func(*Status, []byte, Source) {}
	}
	s := &Server{
		path:     Path(opts.Namespace, opts.JobName),
		token:    []byte(strings.TrimSpace(string(opts.Material.Token))),
		onStatus: opts.OnStatus,
		limiter:  rate.NewLimiter(opts.Rate, opts.Burst),
		refused:  map[int]int{},
	}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          debugLog(opts.Logger),
	}
	s.material = opts.Material
	return s
}

// Serve serves HTTPS on l with the Material's certificate until Shutdown;
// it returns at once.
func (s *Server) Serve(l net.Listener) error {
	tlsConfig, err := s.material.tlsConfig()
	if err != nil {
		return err
	}
	s.http.TLSConfig = tlsConfig
	l = netutil.LimitListener(l, MaxConnections)
	go func() { _ = s.http.ServeTLS(l, "", "") }()
	return nil
}

// Shutdown stops serving, waiting for requests in flight until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.http.Shutdown(ctx); err != nil {
		return s.http.Close()
	}
	return nil
}

// Refused counts the requests refused so far, by HTTP status code.
func (s *Server) Refused() map[int]int {
	s.counts.Lock()
	defer s.counts.Unlock()
	out := make(map[int]int, len(s.refused))
	for code, n := range s.refused {
		out[code] = n
	}
	return out
}

// ServeHTTP answers one POST of a status.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path != s.path:
		s.refuse(w, http.StatusNotFound, "only this job's status path is served")
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		s.refuse(w, http.StatusMethodNotAllowed, "POST a status")
		return
	case !s.authorized(r.Header.Get("Authorization")):
		w.Header().Set("WWW-Authenticate", `Bearer realm="trainstep"`)
		s.refuse(w, http.StatusUnauthorized, "a bearer token of this job is required")
		return
	case r.ContentLength > MaxBodyBytes:
		s.refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is limited to %d bytes", MaxBodyBytes))
		return
	}
	if !s.limiter.Allow() {
		w.Header().Set("Retry-After", "1")
		s.refuse(w, http.StatusTooManyRequests, "too many status updates; send at most a few a second")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is limited to %d bytes", MaxBodyBytes))
		return
	case err != nil:
		s.refuse(w, http.StatusBadRequest, "reading the body failed")
		return
	}
	if err := s.apply(body, SourceHTTP); err != nil {
		s.refuse(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("{}\n"))
}

// Accept applies a status that arrived another way (a leader replica's
// log line), under the same validation and rate limit. It reports why a
// status was not applied.
func (s *Server) Accept(body []byte, from Source) error {
	if len(body) > MaxBodyBytes {
		return fmt.Errorf("the status is larger than %d bytes", MaxBodyBytes)
	}
	if !s.limiter.Allow() {
		return errors.New("too many status updates")
	}
	return s.apply(body, from)
}

func (s *Server) apply(body []byte, from Source) error {
	status, raw, err := decodeRaw(body)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onStatus(status, raw, from)
	return nil
}

// authorized compares the bearer token in constant time.
func (s *Server) authorized(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || len(s.token) == 0 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), s.token) == 1
}

func (s *Server) refuse(w http.ResponseWriter, code int, message string) {
	s.counts.Lock()
	s.refused[code]++
	s.counts.Unlock()
	http.Error(w, message, code)
}

// debugLog is the standard logger net/http writes its errors to, at
// debug level.
func debugLog(logger *zap.Logger) *log.Logger {
	l, err := zap.NewStdLogAt(logger, zap.DebugLevel)
	if err != nil {
		return log.New(io.Discard, "", 0)
	}
	return l
}
