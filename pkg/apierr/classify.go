package apierr

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
)

// quotaMarkers are what the ResourceQuota admission plugin says when it
// refuses a create (403 Forbidden): the quota is full, or its usage is not
// computed yet.
var quotaMarkers = []string{"exceeded quota", "failed quota", "status unknown for quota"}

// IsQuotaExceeded reports a create refused by a ResourceQuota: a 403 that
// names a quota, not a missing right. It passes once usage goes down or
// the quota is raised.
func IsQuotaExceeded(err error) bool {
	if !apierrors.IsForbidden(err) {
		return false
	}
	msg := err.Error()
	for _, m := range quotaMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// etcdMarkers are etcd's own words for a fault that passes, as the API
// server relays them inside a 500.
var etcdMarkers = []string{"etcdserver: leader changed", "etcdserver: request timed out",
	"etcdserver: too many requests", "etcdserver: no leader", "etcdserver: server stopped"}

// IsTransient reports an error that the same request may not meet again:
// 5xx, 429, server and client timeouts, etcd's leader changes, refused or
// reset connections, a quota that is full. Missing rights (403), bad
// requests and invalid objects are not transient: retrying cannot fix them.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	switch {
	case IsQuotaExceeded(err),
		apierrors.IsTooManyRequests(err),
		apierrors.IsServerTimeout(err),
		apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err),
		apierrors.IsInternalError(err),
		apierrors.IsUnexpectedServerError(err):
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		if code >= 500 {
			return true
		}
		msg := status.Status().Message
		for _, m := range etcdMarkers {
			if strings.Contains(msg, m) {
				return true
			}
		}
		return false
	}
	// A request's own deadline; a caller's ended context is checked by the caller.
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	msg := err.Error()
	for _, m := range etcdMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return strings.Contains(msg, "http2: client connection lost") || strings.Contains(msg, "connection reset by peer")
}

// IsPermanent reports a refusal that says the request itself is wrong or
// not allowed: 401, a 403 that is not a quota, 400, 404 for a kind, 422.
// Callers treat it as Invalid only while nothing was created.
func IsPermanent(err error) bool {
	if err == nil || IsTransient(err) {
		return false
	}
	return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) ||
		apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err) ||
		apierrors.IsUnsupportedMediaType(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// WriteBackoff is how a single write is retried in place before the error
// goes back to the caller (whose own loop retries it later): about 1.5 s in
// all, short enough not to hold up the rest of the job.
var WriteBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5}

// Retry runs write until it succeeds, fails with an error that is not
// transient (quota refusals included: waiting for room is the caller's
// business, not a tight loop's), or WriteBackoff is spent. ctx ending stops
// the retries.
func Retry(ctx context.Context, write func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, WriteBackoff, func(context.Context) (bool, error) {
		last = write()
		switch {
		case last == nil:
			return true, nil
		case IsTransient(last) && !IsQuotaExceeded(last):
			return false, nil
		default:
			return false, last
		}
	})
	if err != nil && last != nil {
		// The write's own error says more than "timed out" or "canceled".
		return last
	}
	return err
}
