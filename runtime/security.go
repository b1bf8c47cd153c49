// Room: shared. The capabilities every sandbox's processes hold, for
// inspect and the docs.

package runtime

import "github.com/boxd-dev/boxd/oci"

// Capabilities lists the capabilities every sandbox's processes hold.
func Capabilities() []string { return oci.DefaultCapabilities() }
