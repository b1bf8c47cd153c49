package snapshot

import (
	"fmt"
	"strings"
	"testing"
)

// Errors and the replaced-in-use label name at most maxListedUsers
// sandboxes, so a busy image cannot make an unbounded message or label.
func TestDescribeUsersIsBounded(t *testing.T) {
	if got := describeUsers([]string{"a1"}); got != "1 sandbox (a1)" {
		t.Errorf("one user: %q", got)
	}
	if got := describeUsers([]string{"a1", "b2"}); got != "2 sandboxes (a1, b2)" {
		t.Errorf("two users: %q", got)
	}
	var many []string
	for i := range 25 {
		many = append(many, fmt.Sprintf("%012d", i))
	}
	got := describeUsers(many)
	if !strings.HasPrefix(got, "25 sandboxes (000000000000, ") || !strings.HasSuffix(got, "000000000009 and 15 more)") ||
		strings.Contains(got, "000000000010") {
		t.Errorf("25 users: %q", got)
	}
}
