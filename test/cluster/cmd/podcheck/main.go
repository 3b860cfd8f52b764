// Command podcheck is the container the real-node tests run (cluster.ImportGoImage puts it in
// a FROM-scratch image): it reports, on stdout, what a pod sees of the node it runs on — its
// downward-API identity, its service-account token, the API server through the kubernetes
// Service, names through the cluster's DNS, other pods over TCP — and exits non-zero on the
// first check that fails. With -listen it then serves its pod name on a TCP port until
// killed, for other pods to dial. It is a test tool only; nothing in the product calls it.
//
//	podcheck [-api] [-resolve NAME]... [-dial HOST:PORT]... [-listen PORT | -exit-after DURATION]
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

type names []string

func (n *names) String() string     { return strings.Join(*n, ",") }
func (n *names) Set(v string) error { *n = append(*n, v); return nil }

func main() {
	api := flag.Bool("api", false, "GET /version from the API server at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT with the pod's token")
	var resolve, dial names
	flag.Var(&resolve, "resolve", "look NAME up in DNS (repeatable)")
	flag.Var(&dial, "dial", "connect to HOST:PORT, where another podcheck -listen answers (repeatable)")
	listen := flag.Int("listen", 0, "after the checks, answer TCP connections on this port with the pod's name until killed")
	exitAfter := flag.Duration("exit-after", 0, "check nothing: run this long, then exit 0 (a replica that trains, then finishes; replicas have no service-account token)")
	flag.Parse()
	if *exitAfter > 0 {
		fmt.Printf("podcheck: pod %s/%s runs for %s\n", os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"), *exitAfter)
		time.Sleep(*exitAfter)
		fmt.Println("podcheck: done")
		return
	}
	if err := check(*api, resolve, dial); err != nil {
		fmt.Println("podcheck: FAIL:", err)
		os.Exit(1)
	}
	if *listen > 0 {
		if err := serve(*listen); err != nil {
			fmt.Println("podcheck: FAIL:", err)
			os.Exit(1)
		}
	}
}

func check(api bool, resolve, dial []string) error {
	fmt.Printf("podcheck: pod %s/%s on node %s\n", os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"), os.Getenv("NODE_NAME"))
	token, err := os.ReadFile(serviceAccountDir + "/token")
	if err != nil {
		return fmt.Errorf("reading the service-account token: %w", err)
	}
	fmt.Printf("podcheck: service-account token of %d bytes\n", len(token))
	if api {
		version, err := apiVersion(strings.TrimSpace(string(token)))
		if err != nil {
			return err
		}
		fmt.Printf("podcheck: API server %s\n", version)
	}
	for _, name := range resolve {
		addrs, err := lookup(name)
		if err != nil {
			return err
		}
		fmt.Printf("podcheck: %s resolves to %s\n", name, strings.Join(addrs, ","))
	}
	for _, addr := range dial {
		answer, err := dialPod(addr)
		if err != nil {
			return err
		}
		fmt.Printf("podcheck: %s answers %s\n", addr, answer)
	}
	return nil
}

// lookup resolves name, retrying for a while: a Service's records appear in DNS a moment
// after its pods become ready.
func lookup(name string) ([]string, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		addrs, err := net.LookupHost(name)
		if err == nil {
			return addrs, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("resolving %s: %w", name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// dialPod connects to addr and reads the line a podcheck -listen writes.
func dialPod(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "", fmt.Errorf("dialing %s: %w", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading from %s: %w", addr, err)
	}
	return strings.TrimSpace(line), nil
}

// serve answers every connection on port with the pod's name.
func serve(port int) error {
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		return fmt.Errorf("listening on port %d: %w", port, err)
	}
	fmt.Printf("podcheck: listening on port %d\n", port)
	for {
		conn, err := l.Accept()
		if err != nil {
			return fmt.Errorf("accepting on port %d: %w", port, err)
		}
		fmt.Fprintln(conn, os.Getenv("POD_NAME"))
		_ = conn.Close()
	}
}

// apiVersion asks the API server for its version through the kubernetes Service, verifying
// it with the pod's CA bundle and authenticating with the pod's token.
func apiVersion(token string) (string, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return "", errors.New("KUBERNETES_SERVICE_HOST/PORT not set")
	}
	caPEM, err := os.ReadFile(serviceAccountDir + "/ca.crt")
	if err != nil {
		return "", fmt.Errorf("reading the CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	url := "https://" + net.JoinHostPort(host, port) + "/version"
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	var version struct {
		GitVersion string `json:"gitVersion"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&version); err != nil {
		return "", fmt.Errorf("GET %s: decoding: %w", url, err)
	}
	return version.GitVersion, nil
}
