package engine

import (
	"context"
	"maps"
	"slices"
	"testing"
)

// consentInput is a files/consent request for entries (in a writable root) with the given
// access.
func consentInput(t testing.TB, access string, entries ...string) map[string]any {
	t.Helper()
	in := visibleInput(t, entries...)
	list := make([]any, 0, len(entries))
	for _, e := range entries {
		list = append(list, pathDoc(e, true))
	}
	in["entries"] = list
	in["method"], in["operation"] = "files/consent", "consent"
	in["params"] = map[string]any{"message": "m", "requestedPaths": entries, "access": access}
	checkInput(t, in)
	return in
}

func TestConsentable(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Source{Dir: policyDir(t, defaultFiles(t))})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Consentable(ctx, consentInput(t, "write", "proj/src/a.go", "proj/.git/config", "proj/.env"))
	if err != nil {
		t.Fatal(err)
	}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"proj/src/a.go"}) {
		t.Errorf("consentable = %v, want only proj/src/a.go (no write under .git, no secrets)", keys)
	}
	// A set without the rule grants nothing; no policy grants nothing.
	bare := newTestEngine(t, map[string]string{"authz.rego": "package fsbroker.authz\n\ndecision := {\"allow\": true}\n"})
	if got, _ := bare.Consentable(ctx, consentInput(t, "read", "proj/a")); len(got) != 0 {
		t.Errorf("a set without consentable granted %v", got)
	}
	var none Engine
	if got, err := none.Consentable(ctx, consentInput(t, "read", "proj/a")); len(got) != 0 || err == nil {
		t.Errorf("no policy: %v, %v", got, err)
	}
}
