# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

package fsbroker.authz_test

import data.fsbroker.authz
import data.fsbroker.lib

# --- decision: shape, allow, default deny ---

test_allowed_read_decision if {
	authz.decision == {
		"allow": true,
		"code": "",
		"reasons": [],
		"obligations": {"maxReadBytes": 16777216},
	} with input as read(ro("src/main.go"), 4096, read_all)
}

test_allowed_write_has_no_obligations if {
	authz.decision == {
		"allow": true,
		"code": "",
		"reasons": [],
		"obligations": {},
	} with input as write(rw("src/main.go"), 10, write_all)
}

test_nothing_allows if {
	d := authz.decision with input as read(ro("src/main.go"), 10, [])
	d.allow == false
	d.code == "PERMISSION_DENIED"
	d.reasons == ["no rule allows this request"]
}

test_unknown_operation_denies if {
	doc := object.union(req("read", ro("a.txt"), write_all), {"operation": "chmod"})
	d := authz.decision with input as doc
	d.allow == false
	d.code == "PERMISSION_DENIED"
	d.reasons == ["no rule allows this request"]
	d.obligations == {}
}

test_unknown_method_denies if {
	doc := object.union(req("read", ro("a.txt"), write_all), {"method": "files/chmod", "operation": "chmod"})
	d := authz.decision with input as doc
	d.allow == false
	d.code == "PERMISSION_DENIED"
}

test_empty_input_denies if {
	d := authz.decision with input as {}
	d.allow == false
	d.code == "PERMISSION_DENIED"
	d.reasons == ["no rule allows this request"]
}

test_visible_operation_is_not_a_request if {
	d := authz.decision with input as visible_query([ro("a.txt")])
	d.allow == false
}

# --- how denials combine ---

test_one_quota_denial_is_quota_exceeded if {
	d := authz.decision with input as write(rw("big.bin"), 16777217, write_all)
	d.allow == false
	d.code == "QUOTA_EXCEEDED"
	d.reasons == ["quotas: a write of 16777217 bytes is over the limit of 16777216 bytes per write"]
}

test_only_quota_denials_is_quota_exceeded if {
	doc := with_usage(write(rw("big.bin"), 16777217, write_all), 1073741824, 0)
	d := authz.decision with input as doc
	d.code == "QUOTA_EXCEEDED"
	count(d.reasons) == 2
}

test_quota_and_permission_is_permission_denied if {
	# Over the write size, on a secret, in a read-only root.
	d := authz.decision with input as write(ro("certs/server.pem"), 16777217, write_all)
	d.allow == false
	d.code == "PERMISSION_DENIED"
	d.reasons == [
		"quotas: a write of 16777217 bytes is over the limit of 16777216 bytes per write",
		"readonly: the root of path (\"proj\") is read-only",
		"secrets: path matches the protected name pattern \"*.pem\"",
	]
}

test_quota_without_allow_is_permission_denied if {
	d := authz.decision with input as write(rw("big.bin"), 16777217, [])
	d.code == "PERMISSION_DENIED"
	d.reasons == [
		"no rule allows this request",
		"quotas: a write of 16777217 bytes is over the limit of 16777216 bytes per write",
	]
}

test_reasons_are_sorted_and_unique if {
	doc := rename(rw(".ssh/id_rsa"), rw(".ssh/id_rsa.old"), write_all)
	d := authz.decision with input as doc
	d.code == "PERMISSION_DENIED"
	d.reasons == [
		"secrets: newPath matches the protected directory \".ssh\"",
		"secrets: newPath matches the protected name pattern \"id_rsa*\"",
		"secrets: path matches the protected directory \".ssh\"",
		"secrets: path matches the protected name pattern \"id_rsa*\"",
	]
}

# --- what an admin adds ---

test_admin_deny_object if {
	d := authz.decision with input as read(ro("a.txt"), 1, read_all)
		with authz.deny as {{"code": "PERMISSION_DENIED", "reason": "local: no"}}
	d == {"allow": false, "code": "PERMISSION_DENIED", "reasons": ["local: no"], "obligations": {"maxReadBytes": 16777216}}
}

test_admin_quota_deny if {
	d := authz.decision with input as read(ro("a.txt"), 1, read_all)
		with authz.deny as {{"code": "QUOTA_EXCEEDED", "reason": "local: rate"}}
	d.code == "QUOTA_EXCEEDED"
}

test_admin_deny_string if {
	d := authz.decision with input as read(ro("a.txt"), 1, read_all)
		with authz.deny as {"local: not today"}
	d.code == "PERMISSION_DENIED"
	d.reasons == ["local: not today"]
}

test_admin_deny_malformed if {
	d := authz.decision with input as read(ro("a.txt"), 1, read_all)
		with authz.deny as {{"code": "SOMETHING_ELSE"}, 42}
	d.allow == false
	d.code == "PERMISSION_DENIED"
	d.reasons == ["denied by policy"]
}

test_admin_allow_rule if {
	d := authz.decision with input as read(ro("a.txt"), 1, []) with authz.allow as true
	d.allow == true
}

# --- visible ---

test_visible_filters_a_mixed_batch if {
	entries := [
		ro("README.md"),
		ro("envelope.txt"),
		ro(".env"),
		ro("config/.env.local"),
		ro("src"),
		ro("src/main.go"),
		ro(".ssh"),
		ro("a/b/.ssh/known_hosts"),
		ro("certs/server.pem"),
		ro("keys.txt"),
		ro(".git/config"),
		ro(".git/HEAD"),
		ro(""),
	]
	authz.visible == {
		"proj/README.md",
		"proj/envelope.txt",
		"proj/src",
		"proj/src/main.go",
		"proj/keys.txt",
		"proj/.git/HEAD",
		"proj",
	} with input as visible_query(entries)
}

test_visible_empty_batch if {
	count(authz.visible) == 0 with input as visible_query([])
}

test_visible_only_for_operation_visible if {
	doc := object.union(req("list", ro(""), read_all), {"entries": [ro("a.txt")]})
	count(authz.visible) == 0 with input as doc
}

test_visible_roots_for_roots_list if {
	other := in_root("/srv/data", "data", "", false)
	authz.visible == {"proj", "data"} with input as visible_query([ro(""), other])
}

# --- covers ---

test_covers if {
	authz.covers("proj", "proj")
	authz.covers("proj", "proj/a")
	authz.covers("proj/dir", "proj/dir")
	authz.covers("proj/dir", "proj/dir/x/y")
	authz.covers("proj/dir/", "proj/dir/x")
	authz.covers("proj/dir/", "proj/dir")
	not authz.covers("proj/dir", "proj/dirx")
	not authz.covers("proj/dir", "proj")
	not authz.covers("proj/dir/x", "proj/dir")
	not authz.covers("", "proj")
	not authz.covers("/", "proj")
}

test_same_reason_twice_is_listed_once if {
	d := authz.decision with input as read(ro("a.txt"), 1, read_all)
		with authz.deny as {{"code": "QUOTA_EXCEEDED", "reason": "local: x"}, {"code": "PERMISSION_DENIED", "reason": "local: x"}}
	d.code == "PERMISSION_DENIED"
	d.reasons == ["local: x"]
}

# A decision that cannot be built (here: sort made undefined) denies.
test_decision_fails_closed if {
	d := authz.decision with input as read(ro("a.txt"), 1, []) with sort as undefined_function
	d == {
		"allow": false,
		"code": "PERMISSION_DENIED",
		"reasons": ["the policy could not decide"],
		"obligations": {},
	}
}

undefined_function(_) := x if {
	x := 1
	x == 2
}

# The helpers meant for reuse answer under their names in this package as
# data.fsbroker.lib's do.
test_reusable_helpers_under_their_names if {
	doc := rename(rw("a"), rw("b"), write_all)
	authz.request_paths == {"path": with_facts(rw("a")), "newPath": with_facts(rw("b"))} with input as doc
	authz.request_paths == lib.request_paths with input as doc
	authz.read_operations == lib.read_operations
	authz.change_operations == lib.change_operations
	authz.max_read_bytes == 16777216
	authz.max_read_bytes == 5 with data.fsbroker.limits.max_read_bytes as 5
	authz.max_write_bytes == lib.max_write_bytes with input as doc
	authz.max_bytes_per_day == lib.max_bytes_per_day
	authz.max_watches == lib.max_watches
	authz.covers("proj/a", "proj/a/b")
	not authz.covers("proj/a", "proj/ab")
}
