# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# Cases the rewrites for speed (rule indexing, limits read straight from
# data, one rule per request path role) must decide as before.
package fsbroker.authz_test

import data.fsbroker.authz
import data.fsbroker.lib

test_helper_operation_sets if {
	authz.read_operations == {"read", "list", "watch"}
	authz.change_operations == {"write", "create", "delete", "rename"}
}

test_limits_not_an_object_take_the_defaults if {
	every limits in [["x"], "big", 7, null] {
		d := authz.decision with input as read(ro("a.bin"), 4096, read_all) with data.fsbroker.limits as limits
		d.obligations == {"maxReadBytes": 16777216}
		authz.max_write_bytes == 16777216 with data.fsbroker.limits as limits
		authz.max_bytes_per_day == 1073741824 with data.fsbroker.limits as limits
		authz.max_watches == 64 with data.fsbroker.limits as limits
	}
}

test_server_entry_not_an_object_is_no_override if {
	every entry in [false, "read_only", ["proj"], 1] {
		authz.decision.allow with input as write(rw("a.txt"), 10, write_all) with data.fsbroker.servers as {"srv": entry}
		authz.max_write_bytes == 16777216 with input as write(rw("a.txt"), 10, write_all) with data.fsbroker.servers as {"srv": entry}
	}
}

test_override_for_another_server_does_not_apply if {
	servers := {"other": {"read_only": true, "deny_paths": ["proj"]}}
	authz.decision.allow with input as write(rw("a.txt"), 10, write_all) with data.fsbroker.servers as servers
	authz.visible == {"proj/a.txt"} with input as visible_query([ro("a.txt")]) with data.fsbroker.servers as servers
}

test_override_by_server_id_applies if {
	servers := {"srv": {"read_only": true, "deny_paths": ["proj/private"]}}
	d := authz.decision with input as write(rw("private/a.txt"), 10, write_all) with data.fsbroker.servers as servers
	d.reasons == [
		"overrides: path is under the denied path \"proj/private\"",
		"overrides: server \"srv\" is read-only",
	]
	authz.visible == {"proj/a.txt"} with input as visible_query([ro("a.txt"), ro("private/b")]) with data.fsbroker.servers as servers
}

test_secret_glob_default_for_every_default_config if {
	every config in [{}, {"extra_patterns": [], "extra_dirs": [], "allow": []}, [], "x"] {
		lib.secret_glob == lib.default_secret_glob with data.fsbroker.secrets as config
	}
}

test_grant_path_prefix_without_boundary_does_not_cover if {
	# "proj/s" is a string prefix of "proj/src/...", not a directory above it.
	not authz.decision.allow with input as read(ro("src/main.go"), 10, [grant("read", "proj/s"), grant("read", "proj/src/main")])
	authz.decision.allow with input as read(ro("src/main.go"), 10, [grant("read", "proj/s"), grant("read", "proj/src/")])
}

test_rename_both_sides_secret if {
	d := authz.decision with input as rename(rw(".env"), rw("keys/id_rsa"), write_all)
	d.reasons == [
		"secrets: newPath matches the protected name pattern \"id_rsa*\"",
		"secrets: path matches the protected name pattern \".env\"",
	]
}

# lib.covered answers alike with the engine's facts (the grants looked up by
# path, from the path and its ancestors) and without them (every grant
# compared with the path), for paths and grant paths of every shape: nested,
# a mount, a string prefix that is not a directory, trailing and doubled
# slashes, an expired grant, the other access.
test_covered_alike_with_and_without_facts if {
	answers := [[indexed, walked] |
		some rel in ["", "a", "src", "src/main.go", "src/pkg/x/y.go", "srcx/a", "s", "src/main.golang", ".git/HEAD"]
		some grant_path in ["proj", "proj/", "proj/src", "proj/src/", "proj/src//", "proj/s", "proj/src/main.go", "proj/src/pkg", "", "/", "other", "proj//src", "proj/srcx"]
		some access in ["read", "write"]
		some expires in ["", "2025-06-01T11:59:59Z"]
		doc := read(ro(rel), 1, [expiring(access, grant_path, expires)])
		indexed := covered_answer(doc.path, {"read"}) with input as doc
		walked := covered_answer(object.remove(doc.path, ["ancestors"]), {"read"}) with input as object.remove(doc, ["grantsByPath"])
	]
	every answer in answers {
		answer[0] == answer[1]
	}
	count({answer | some answer in answers; answer[0]}) > 0
	count({answer | some answer in answers; not answer[0]}) > 0
}

covered_answer(p, accesses) := true if lib.covered(p, accesses) else := false
