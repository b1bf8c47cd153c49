package registry

import (
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"

	"github.com/boxd-dev/boxd/snapshot"
)

// Ref is a registry reference boxd may pull or push.
type Ref struct {
	// Name is the full reference as the image is named locally, with
	// ":latest" added when it has neither tag nor digest.
	Name string
	// Host is the registry, HOST or HOST:PORT.
	Host string
}

// ParseRef checks that s is a full reference, HOST[:PORT]/PATH[:TAG][@DIGEST].
// A name without a registry host is refused rather than sent to a default
// registry: boxd reaches only the registry a reference names. The first
// component is a host when it holds a "." or a ":" or is "localhost", as
// in docker's reference rules; "team/app" is a path, so it is refused.
func ParseRef(s string) (Ref, error) {
	if s == "" {
		return Ref{}, fmt.Errorf("reference is empty: %w", errdefs.ErrInvalidArgument)
	}
	parsed, err := reference.Parse(s)
	if err != nil {
		return Ref{}, fmt.Errorf("reference %q is malformed (want HOST[:PORT]/PATH[:TAG][@DIGEST], lowercase path): %v: %w", s, err, errdefs.ErrInvalidArgument)
	}
	named, ok := parsed.(reference.Named)
	if !ok {
		return Ref{}, fmt.Errorf("reference %q has no name (want HOST[:PORT]/PATH[:TAG][@DIGEST]): %w", s, errdefs.ErrInvalidArgument)
	}
	host := reference.Domain(named)
	if !isHost(host) {
		return Ref{}, fmt.Errorf("reference %q names no registry host; write the registry first, HOST[:PORT]/PATH[:TAG] (boxd has no default registry): %w", s, errdefs.ErrInvalidArgument)
	}
	name, err := snapshot.NormalizeName(s)
	if err != nil {
		return Ref{}, err
	}
	return Ref{Name: name, Host: host}, nil
}

func isHost(h string) bool {
	return h == "localhost" || strings.ContainsAny(h, ".:")
}
