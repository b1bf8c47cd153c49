package snapshot

import "github.com/containerd/platforms"

// platformMatcher matches only the host's platform: sandboxes run natively.
func platformMatcher() platforms.MatchComparer { return platforms.Only(platforms.DefaultSpec()) }
