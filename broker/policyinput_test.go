package broker

import "testing"

// TestIsHidden: a path is hidden when any of its segments starts with a dot,
// and only then (a dot inside or at the end of a segment does not count).
func TestIsHidden(t *testing.T) {
	for rel, want := range map[string]bool{
		"": false, "a": false, "a.b": false, "a./b": false, "a/b.": false, "a/b/c.txt": false,
		".a": true, ".": true, "a/.b": true, "a/b/.c/d": true, ".git/config": true,
	} {
		if got := isHidden(rel); got != want {
			t.Errorf("isHidden(%q) = %v, want %v", rel, got, want)
		}
	}
}
