package registry

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	remoteerrors "github.com/containerd/containerd/v2/core/remotes/errors"
	"github.com/containerd/errdefs"
)

// explain turns what the resolver, fetcher or pusher returned into an
// error that names the registry and what was wrong with it, classified
// for the API (errdefs).
func (r *Registry) explain(ref Ref, err error) error {
	host := ref.Host
	var (
		status  remoteerrors.ErrUnexpectedStatus
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
		hostErr x509.HostnameError
		dnsErr  *net.DNSError
		netErr  net.Error
	)
	var le *layerError
	var ge *guardError
	switch {
	case errors.As(err, &ge):
		// Where the registry sent boxd, and why not: the rest of the
		// chain (containerd's and net/http's wrapping) says nothing more.
		return fmt.Errorf("registry %s, %s: %w", host, ref.Name, ge)
	case errors.As(err, &le):
		return fmt.Errorf("pull %s: %w", ref.Name, le)
	case errdefs.IsInvalidArgument(err), errdefs.IsResourceExhausted(err), errdefs.IsAlreadyExists(err):
		return err // a check of boxd's own, already explained
	case errors.As(err, &status):
		switch status.StatusCode {
		case http.StatusUnauthorized:
			return fmt.Errorf("registry %s refused the credentials for %s (401 Unauthorized; give them with --username/--password-stdin or in ~/.docker/config.json): %w", host, ref.Name, errdefs.ErrUnauthenticated)
		case http.StatusForbidden:
			return fmt.Errorf("registry %s denies access to %s (403 Forbidden): %w", host, ref.Name, errdefs.ErrPermissionDenied)
		case http.StatusNotFound:
			return fmt.Errorf("registry %s has no %s (404 Not Found): %w", host, ref.Name, errdefs.ErrNotFound)
		case http.StatusTooManyRequests:
			return fmt.Errorf("registry %s is rate-limiting (429 Too Many Requests): %w", host, errdefs.ErrResourceExhausted)
		}
		return fmt.Errorf("registry %s answered %s to %s %s: %w", host, status.Status, status.RequestMethod, status.RequestURL, errdefs.ErrUnavailable)
	case errors.Is(err, docker.ErrInvalidAuthorization):
		return fmt.Errorf("registry %s refused the credentials for %s (give them with --username/--password-stdin or in ~/.docker/config.json): %v: %w", host, ref.Name, err, errdefs.ErrUnauthenticated)
	case errdefs.IsNotFound(err):
		return fmt.Errorf("registry %s has no %s: %w", host, ref.Name, errdefs.ErrNotFound)
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &hostErr):
		return fmt.Errorf("the TLS certificate of registry %s is not trusted: %v (give boxd the registry's CA with --registry-ca): %w", host, err, errdefs.ErrFailedPrecondition)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("registry %s answered in plain HTTP; boxd speaks plain HTTP only to registries named with boxd --insecure-registry %s: %w", host, host, errdefs.ErrFailedPrecondition)
	case strings.Contains(err.Error(), "malformed HTTP response") || strings.Contains(err.Error(), "server gave HTTPS response"):
		return fmt.Errorf("registry %s does not speak plain HTTP (it is named with --insecure-registry; drop that to use HTTPS): %v: %w", host, err, errdefs.ErrFailedPrecondition)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("pull or push of %s cancelled: %w", ref.Name, err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("registry %s did not answer within %v (boxd --registry-timeout): %v: %w", host, r.cfg.Timeout, err, context.DeadlineExceeded)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.As(err, &dnsErr), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Errorf("cannot reach registry %s: %v: %w", host, err, errdefs.ErrUnavailable)
	}
	return fmt.Errorf("registry %s, %s: %w", host, ref.Name, err)
}
