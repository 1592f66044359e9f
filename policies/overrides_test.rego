# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

package fsbroker.authz_test

import data.fsbroker.authz

servers := {
	"indexer": {"read_only": true},
	"builder": {"deny_paths": ["proj/private", "proj/dist/", 3], "max_write_bytes": 100},
	"big": {"max_write_bytes": 33554432},
	"broken": "yes",
}

as_server(doc, id) := with_server(doc, id, true)

# --- read_only ---

test_read_only_server_cannot_change if {
	every op in ["write", "create", "delete"] {
		d := authz.decision with input as as_server(req(op, rw("a"), write_all), "indexer")
			with data.fsbroker.servers as servers
		d.allow == false
		d.code == "PERMISSION_DENIED"
		d.reasons == ["overrides: server \"indexer\" is read-only"]
	}
	d := authz.decision with input as as_server(rename(rw("a"), rw("b"), write_all), "indexer")
		with data.fsbroker.servers as servers
	d.reasons == ["overrides: server \"indexer\" is read-only"]
}

test_read_only_server_can_read if {
	authz.decision.allow with input as as_server(read(rw("a"), 1, write_all), "indexer")
		with data.fsbroker.servers as servers
}

test_read_only_is_per_server if {
	authz.decision.allow with input as as_server(write(rw("a"), 1, write_all), "other")
		with data.fsbroker.servers as servers
}

test_read_only_applies_to_declared_names_too if {
	not authz.decision.allow with input as with_server(write(rw("a"), 1, write_all), "indexer", false)
		with data.fsbroker.servers as servers
}

test_read_only_must_be_true if {
	authz.decision.allow with input as as_server(write(rw("a"), 1, write_all), "x")
		with data.fsbroker.servers as {"x": {"read_only": "no"}}
}

# --- deny_paths ---

test_deny_paths if {
	d := authz.decision with input as as_server(read(ro("private/notes.md"), 1, read_all), "builder")
		with data.fsbroker.servers as servers
	d.reasons == ["overrides: path is under the denied path \"proj/private\""]

	not authz.decision.allow with input as as_server(read(ro("private"), 1, read_all), "builder")
		with data.fsbroker.servers as servers
	not authz.decision.allow with input as as_server(req("list", ro("dist"), read_all), "builder")
		with data.fsbroker.servers as servers
}

# A case-insensitive file system opens PROJ/Private as proj/private: the
# prefix holds for every case variant, in decisions and listings alike.
test_deny_paths_in_any_case if {
	d := authz.decision with input as as_server(read(ro("Private/notes.md"), 1, read_all), "builder")
		with data.fsbroker.servers as servers
	d.reasons == ["overrides: path is under the denied path \"proj/private\""]
	shown := authz.visible with input as as_server(visible_query([ro("PRIVATE/x"), ro("public")]), "builder")
		with data.fsbroker.servers as servers
	shown == {"proj/public"}
}

test_deny_paths_segment_boundary if {
	authz.decision.allow with input as as_server(read(ro("privateer.md"), 1, read_all), "builder")
		with data.fsbroker.servers as servers
	authz.decision.allow with input as as_server(read(ro("distx/a"), 1, read_all), "builder")
		with data.fsbroker.servers as servers
	authz.decision.allow with input as as_server(read(ro("src/private"), 1, read_all), "builder")
		with data.fsbroker.servers as servers
}

test_deny_paths_other_server_unaffected if {
	authz.decision.allow with input as as_server(read(ro("private/notes.md"), 1, read_all), "big")
		with data.fsbroker.servers as servers
}

test_deny_paths_rename_target if {
	d := authz.decision with input as as_server(rename(rw("a"), rw("private/a"), write_all), "builder")
		with data.fsbroker.servers as servers
	d.reasons == ["overrides: newPath is under the denied path \"proj/private\""]
}

test_deny_paths_hidden_from_listings if {
	entries := [ro("a"), ro("private"), ro("private/x"), ro("privateer"), ro("dist/app")]
	authz.visible == {"proj/a", "proj/privateer"} with input as as_server(visible_query(entries), "builder")
		with data.fsbroker.servers as servers
	count(authz.visible) == 5 with input as visible_query(entries)
		with data.fsbroker.servers as servers
}

# --- max_write_bytes ---

test_max_write_bytes_lowers if {
	authz.decision.allow with input as as_server(write(rw("a"), 100, write_all), "builder")
		with data.fsbroker.servers as servers
	d := authz.decision with input as as_server(write(rw("a"), 101, write_all), "builder")
		with data.fsbroker.servers as servers
	d.code == "QUOTA_EXCEEDED"
	d.reasons == ["quotas: a write of 101 bytes is over the limit of 100 bytes per write"]
}

test_max_write_bytes_raises_for_a_pinned_id if {
	authz.decision.allow with input as as_server(write(rw("a"), 33554432, write_all), "big")
		with data.fsbroker.servers as servers
	not authz.decision.allow with input as as_server(write(rw("a"), 33554433, write_all), "big")
		with data.fsbroker.servers as servers
}

# A declared name may still lower a limit (a restriction binds whoever claims it).
test_max_write_bytes_lowers_for_a_declared_name if {
	authz.decision.allow with input as with_server(write(rw("a"), 100, write_all), "builder", false)
		with data.fsbroker.servers as servers
	not authz.decision.allow with input as with_server(write(rw("a"), 101, write_all), "builder", false)
		with data.fsbroker.servers as servers
}

# A declared (unpinned) name cannot raise a limit: any server can declare "big".
test_max_write_bytes_never_raises_for_a_declared_name if {
	authz.decision.allow with input as with_server(write(rw("a"), 16777216, write_all), "big", false)
		with data.fsbroker.servers as servers
	d := authz.decision with input as with_server(write(rw("a"), 16777217, write_all), "big", false)
		with data.fsbroker.servers as servers
	d.code == "QUOTA_EXCEEDED"
	d.reasons == ["quotas: a write of 16777217 bytes is over the limit of 16777216 bytes per write"]
}

test_max_write_bytes_not_a_number_ignored if {
	not authz.decision.allow with input as as_server(write(rw("a"), 16777217, write_all), "x")
		with data.fsbroker.servers as {"x": {"max_write_bytes": "huge"}}
}

# --- malformed entries change nothing ---

test_malformed_server_entry_ignored if {
	authz.decision.allow with input as as_server(write(rw("a"), 1, write_all), "broken")
		with data.fsbroker.servers as servers
}
