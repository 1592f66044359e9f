# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# data.fsbroker.derived: visible and consentable derived from the decision.
# With the built-in set's decision they agree with the built-in set's own
# visible (everything granted) and consentable, which is what makes the
# derivation a safe stand-in for a set that defines only decision.
package fsbroker.authz_test

import data.fsbroker.authz
import data.fsbroker.derived

derived_entries := [
	ro("README.md"), ro("src"), ro("src/main.go"), ro(".env"), ro("config/.env.local"),
	ro("certs/server.pem"), ro(".git/config"), ro(".git/HEAD"), ro(".ssh"), ro(""),
]

test_derived_visible_is_what_a_read_may_see if {
	derived.visible == {"proj/README.md", "proj/src", "proj/src/main.go", "proj/.git/HEAD", "proj"} with input as visible_query(derived_entries)

	# The built-in decision needs a grant: what none covers is not shown.
	only_src := object.union(visible_query(derived_entries), {"grants": [grant("read", "proj/src")]})
	derived.visible == {"proj/src", "proj/src/main.go"} with input as only_src
	no_grants := object.union(visible_query(derived_entries), {"grants": []})
	derived.visible == set() with input as no_grants
}

test_derived_visible_agrees_with_the_builtin_one if {
	derived.visible == authz.visible with input as visible_query(derived_entries)
	servers := {"srv": {"deny_paths": ["proj/src"]}}
	derived.visible == authz.visible with input as visible_query(derived_entries) with data.fsbroker.servers as servers
	derived.visible == authz.visible with input as visible_query(derived_entries) with data.fsbroker.consent.never as ["proj/README.md"]
}

test_derived_visible_only_for_operation_visible if {
	doc := object.union(req("list", ro(""), read_all), {"entries": [ro("a.txt")]})
	derived.visible == set() with input as doc
	derived.consentable == set() with input as visible_query([ro("a.txt")])
}

# consent_query carries no grants: the derived consentable adds one of the
# access asked on each path, so the built-in decision, which needs a grant,
# can allow.
test_derived_consentable_agrees_with_the_builtin_one if {
	cases := [
		[[ro("src"), ro("README.md"), ro(".env"), ro("keys/id_rsa")], "read"],
		[[rw("src"), rw(".git/hooks/pre-commit"), rw(".git"), rw(".gitignore")], "write"],
		[[rw(".git/hooks/pre-commit"), rw("src")], "read"],
		[[ro("a"), rw("b"), rw("b/.env")], "write"],
	]
	every c in cases {
		got := derived.consentable with input as consent_query(c[0], c[1])
		got == authz.consentable with input as consent_query(c[0], c[1])
		count(got) > 0
	}
	derived.consentable == authz.consentable with input as consent_query([rw("vendor/x"), rw("y")], "write")
		with data.fsbroker.consent.never as ["proj/vendor"]
}

test_derived_consentable_for_write_needs_a_write if {
	derived.consentable == set() with input as consent_query([ro("src"), ro("README.md")], "write")
	derived.consentable == {"proj/b"} with input as consent_query([ro("a"), rw("b")], "write")
	derived.consentable == {"proj/a", "proj/b"} with input as consent_query([ro("a"), rw("b")], "read")
}

test_derived_consentable_without_access_is_read if {
	q := json.patch(consent_query([ro("a")], "write"), [{"op": "remove", "path": "/params/access"}])
	derived.consentable == {"proj/a"} with input as q
}

test_derived_consentable_other_access_grants_nothing if {
	derived.consentable == set() with input as consent_query([rw("a")], "execute")
}

# Whatever the decision is: allow true shows and grants everything, anything
# else nothing (a malformed decision compiles, and allows nothing).
test_derived_any_decision if {
	entries := [rw("a"), rw(".env")]
	derived.visible == {"proj/a", "proj/.env"} with input as visible_query(entries) with authz.decision as {"allow": true}
	derived.consentable == {"proj/a", "proj/.env"} with input as consent_query(entries, "write") with authz.decision as {"allow": true}
	every decision in [{"allow": false}, {"allow": "true"}, "allow", {}, [true], true] {
		derived.visible == set() with input as visible_query(entries) with authz.decision as decision
		derived.consentable == set() with input as consent_query(entries, "read") with authz.decision as decision
	}
}

# Each entry is decided on a read of it alone: the batch's entries are not
# carried along (the built-in decision would deny every change of a path
# while an entry of the batch is under .git), nor its params.
test_derived_decides_each_entry_alone if {
	derived.consentable == {"proj/src"} with input as consent_query([rw(".git/hooks"), rw("src")], "write")
}
