package snapshot

import "github.com/containerd/platforms"

// platformMatcher matches only the host's platform: sandboxes run natively.
func platformMatcher() platforms.MatchComparer { return platforms.Only(platforms.DefaultSpec()) }

// HostPlatform is the platform images are run and unpacked for.
func HostPlatform() platforms.MatchComparer { return platformMatcher() }
