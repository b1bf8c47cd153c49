package network

// resolver is boxd's DNS for egress sandboxes (stage 2).
type resolver struct{}
