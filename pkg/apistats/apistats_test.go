package apistats

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestKeyNamesVerbAndResource(t *testing.T) {
	cases := []struct{ method, url, want string }{
		{"POST", "/api/v1/namespaces/team/pods", "create pods"},
		{"GET", "/api/v1/namespaces/team/pods?labelSelector=a%3Db", "list pods"},
		{"GET", "/api/v1/namespaces/team/pods?watch=true&resourceVersion=5", "watch pods"},
		{"GET", "/api/v1/namespaces/team/pods/mnist-worker-0/log?follow=true", "get pods/log"},
		{"DELETE", "/api/v1/namespaces/team/services/mnist-ps-0", "delete services"},
		{"PATCH", "/api/v1/namespaces/team/pods/mnist-ps-0", "patch pods"},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "create selfsubjectaccessreviews"},
		{"DELETE", "/api/v1/namespaces/team/pods", "deletecollection pods"},
	}
	for _, tc := range cases {
		req := httptest.NewRequest(tc.method, tc.url, nil)
		if got := Key(req); got != tc.want {
			t.Errorf("Key(%s %s) = %q, want %q", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestCounterCountsEveryRequestThatPassesThrough(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	c := New()
	client := &http.Client{Transport: c.Wrap(http.DefaultTransport)}
	for i := 0; i < 3; i++ {
		resp, err := client.Post(srv.URL+"/api/v1/namespaces/x/pods", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := c.Counts()["create pods"]; got != 3 {
		t.Errorf("counted %d creates, want 3", got)
	}
	if got := Total(c.Counts(), "create", "delete"); got != 3 {
		t.Errorf("Total(create, delete) = %d, want 3", got)
	}
}

func TestCounterCountsThrottledRequestsApart(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls++; calls == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	c := New()
	client := &http.Client{Transport: c.Wrap(http.DefaultTransport)}
	for i := 0; i < 2; i++ {
		resp, err := client.Post(srv.URL+"/api/v1/namespaces/x/pods", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	counts := c.Counts()
	if counts["create pods"] != 2 || counts[ThrottledPrefix+"create pods"] != 1 {
		t.Errorf("counts %v, want 2 creates of which 1 throttled", counts)
	}
	if got := Total(counts, "create"); got != 2 {
		t.Errorf("Total(create) = %d, want 2: a throttled request is counted once as a request", got)
	}
}
