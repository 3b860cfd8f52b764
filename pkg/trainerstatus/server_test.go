package trainerstatus

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const validBody = `{"trainerStatus": {"progressPercentage": 45, "metrics": [{"name": "loss", "value": "0.2347"}], "lastUpdatedTime": "2025-01-23T10:30:45Z"}}`

// endpoint is a Server listening on 127.0.0.1 and a client that trusts
// only the job's CA.
type endpoint struct {
	server   *Server
	url      string
	client   *http.Client
	material Material

	mu       sync.Mutex
	statuses []*Status
}

func startEndpoint(t *testing.T, opts Options) *endpoint {
	t.Helper()
	m, err := NewMaterial([]string{"job-status", "127.0.0.1"}, time.Now())
	require.NoError(t, err)
	e := &endpoint{material: m}
	opts.Namespace, opts.JobName, opts.Material = "ns", "job", m
	opts.OnStatus = func(s *Status, raw []byte, _ Source) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.statuses = append(e.statuses, s)
	}
	e.server = New(opts)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, e.server.Serve(l))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.server.Shutdown(ctx)
	})
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(m.CACert))
	e.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	e.url = "https://" + l.Addr().String() + Path("ns", "job")
	return e
}

func (e *endpoint) post(t *testing.T, url, token string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

func (e *endpoint) applied() []*Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Status(nil), e.statuses...)
}

func TestServerAppliesAStatusFromTheJobsToken(t *testing.T) {
	e := startEndpoint(t, Options{})
	resp := e.post(t, e.url, string(e.material.Token), strings.NewReader(validBody))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, e.applied(), 1)
	assert.Equal(t, "training 45% loss=0.2347", e.applied()[0].Summary())
}

func TestServerRefusesWhatIsNotAValidStatusOfTheJob(t *testing.T) {
	e := startEndpoint(t, Options{Rate: 1000, Burst: 1000})
	token := string(e.material.Token)
	wrongToken := strings.Repeat("0", len(token))
	other := strings.Replace(e.url, "/trainjobs/job/", "/trainjobs/other/", 1)
	cases := []struct {
		name  string
		url   string
		token string
		body  io.Reader
		code  int
	}{
		{"no token", e.url, "", strings.NewReader(validBody), http.StatusUnauthorized},
		{"wrong token", e.url, wrongToken, strings.NewReader(validBody), http.StatusUnauthorized},
		{"token prefix", e.url, token[:len(token)-1], strings.NewReader(validBody), http.StatusUnauthorized},
		{"another job's path", other, token, strings.NewReader(validBody), http.StatusNotFound},
		{"1 MiB body", e.url, token, bytes.NewReader(bytes.Repeat([]byte(" "), 1<<20)), http.StatusRequestEntityTooLarge},
		// A body without a Content-Length is cut while it is read.
		{"1 MiB streamed body", e.url, token, io.MultiReader(strings.NewReader(strings.Repeat(" ", 1<<20))), http.StatusRequestEntityTooLarge},
		{"invalid JSON", e.url, token, strings.NewReader(`{"trainerStatus": {`), http.StatusBadRequest},
		{"negative percentage", e.url, token, strings.NewReader(strings.Replace(validBody, "45", "-1", 1)), http.StatusBadRequest},
		{"percentage over 100", e.url, token, strings.NewReader(strings.Replace(validBody, "45", "101", 1)), http.StatusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.post(t, tc.url, tc.token, tc.body)
			assert.Equal(t, tc.code, resp.StatusCode)
		})
	}
	assert.Empty(t, e.applied(), "no refused status may be applied")
	assert.Equal(t, map[int]int{401: 3, 404: 1, 413: 2, 400: 3}, e.server.Refused())
}

func TestServerAnswersABadRequestWithTheField(t *testing.T) {
	e := startEndpoint(t, Options{})
	req, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(strings.Replace(validBody, "45", "101", 1)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+string(e.material.Token))
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), "trainerStatus.progressPercentage")
}

func TestServerRefusesOtherMethods(t *testing.T) {
	e := startEndpoint(t, Options{})
	resp, err := e.client.Get(e.url)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestServerRateLimitsAFlood(t *testing.T) {
	e := startEndpoint(t, Options{})
	token := string(e.material.Token)
	codes := map[int]int{}
	var retryAfter string
	for i := 0; i < 100; i++ {
		resp := e.post(t, e.url, token, strings.NewReader(validBody))
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests {
			retryAfter = resp.Header.Get("Retry-After")
		}
	}
	// 100 posts as fast as one client sends them: the burst and what the
	// rate refills meanwhile are applied, the rest refused.
	assert.GreaterOrEqual(t, codes[http.StatusOK], DefaultBurst)
	assert.Less(t, codes[http.StatusOK], 50, "codes %v", codes)
	assert.Equal(t, 100-codes[http.StatusOK], codes[http.StatusTooManyRequests])
	assert.Equal(t, "1", retryAfter)
	assert.Len(t, e.applied(), codes[http.StatusOK])
}

func TestServerDropsAClientThatSendsNothing(t *testing.T) {
	e := startEndpoint(t, Options{})
	addr := strings.TrimPrefix(strings.Split(e.url, "/apis")[0], "https://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	// No TLS handshake, no header: the server closes the connection after
	// its header timeout, and keeps serving others meanwhile.
	resp := e.post(t, e.url, string(e.material.Token), strings.NewReader(validBody))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(readHeaderTimeout+5*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the server must close an idle connection")
}

func TestAcceptAppliesALogLineUnderTheSameRules(t *testing.T) {
	e := startEndpoint(t, Options{})
	require.NoError(t, e.server.Accept([]byte(validBody), SourceLogLine))
	assert.Error(t, e.server.Accept([]byte(strings.Replace(validBody, "45", "101", 1)), SourceLogLine))
	assert.Len(t, e.applied(), 1)
}

func TestServerWithoutMaterialAcceptsNoRequest(t *testing.T) {
	s := New(Options{Namespace: "ns", JobName: "job"})
	assert.Error(t, s.Serve(nil))
	assert.False(t, s.authorized("Bearer "), "an empty token must never match")
	assert.NoError(t, s.Accept([]byte(validBody), SourceLogLine))
}

func TestMaterialRoundTripsThroughTheSecret(t *testing.T) {
	m, err := NewMaterial([]string{"job-status.ns.svc", "127.0.0.1"}, time.Now())
	require.NoError(t, err)
	back, ok := FromSecretData(m.ClientData(), m.ServingData())
	require.True(t, ok)
	assert.Equal(t, m, back)
	assert.NotContains(t, m.ClientData(), ServingKeyKey, "the replicas' Secret must not hold the serving key")
	serving := m.ServingData()
	delete(serving, ServingKeyKey)
	_, ok = FromSecretData(m.ClientData(), serving)
	assert.False(t, ok)
	block, _ := pemDecode(m.ServingCert)
	cert, err := x509.ParseCertificate(block)
	require.NoError(t, err)
	assert.Equal(t, []string{"job-status.ns.svc"}, cert.DNSNames)
	assert.Equal(t, "127.0.0.1", fmt.Sprint(cert.IPAddresses[0]))
}

func pemDecode(b []byte) ([]byte, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("no PEM block")
	}
	return block.Bytes, nil
}
