# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

package fsbroker.authz_test

import data.fsbroker.authz

ro_reason := "readonly: the root of path (\"proj\") is read-only"

# --- roots/list needs nothing ---

test_roots_list_needs_no_grant if {
	authz.decision == {"allow": true, "code": "", "reasons": [], "obligations": {}} with input as roots_list
}

# --- reads, lists and watches need a read or write grant ---

test_read_with_read_grant if {
	authz.decision.allow with input as read(ro("src/main.go"), 10, read_all)
}

test_read_with_write_grant if {
	authz.decision.allow with input as read(ro("src/main.go"), 10, [grant("write", "proj/src")])
}

test_list_and_watch_with_grant if {
	every op in ["list", "watch"] {
		authz.decision.allow with input as req(op, ro("src"), [grant("read", "proj/src")])
	}
}

test_read_list_watch_without_grant_denied if {
	every op in ["read", "list", "watch"] {
		d := authz.decision with input as req(op, ro("src/main.go"), [])
		d.reasons == ["no rule allows this request"]
	}
}

test_reading_needs_no_writable_root if {
	authz.decision.allow with input as read(ro("a.txt"), 10, read_all)
}

# --- grant coverage: segment boundaries ---

test_grant_covers_its_path if {
	authz.decision.allow with input as read(ro("dir"), 10, [grant("read", "proj/dir")])
}

test_grant_covers_beneath if {
	authz.decision.allow with input as read(ro("dir/x/y.txt"), 10, [grant("read", "proj/dir")])
}

test_grant_does_not_cover_a_sibling_prefix if {
	not authz.decision.allow with input as read(ro("dirx"), 10, [grant("read", "proj/dir")])
	not authz.decision.allow with input as read(ro("dirx/y"), 10, [grant("read", "proj/dir")])
}

test_grant_does_not_cover_above if {
	not authz.decision.allow with input as req("list", ro(""), [grant("read", "proj/dir")])
}

test_grant_on_another_mount_does_not_cover if {
	not authz.decision.allow with input as read(ro("a.txt"), 10, [grant("read", "other")])
	not authz.decision.allow with input as read(ro("a.txt"), 10, [grant("read", "pro")])
}

test_one_covering_grant_among_many if {
	grants := [grant("read", "proj/a"), grant("write", "other"), grant("read", "proj/src")]
	authz.decision.allow with input as read(ro("src/x.go"), 10, grants)
}

# --- expiry ---

test_expired_grant_does_not_count if {
	g := expiring("read", "proj", "2025-06-01T11:59:59.999999999Z")
	d := authz.decision with input as read(ro("a.txt"), 10, [g])
	d.reasons == ["no rule allows this request"]
}

test_grant_expiring_later_counts if {
	g := expiring("read", "proj", "2025-06-01T12:00:01Z")
	authz.decision.allow with input as read(ro("a.txt"), 10, [g])
}

test_grant_expiring_now_still_counts if {
	g := expiring("read", "proj", now)
	authz.decision.allow with input as read(ro("a.txt"), 10, [g])
}

test_expiry_in_another_zone if {
	# 13:30+02:00 is 11:30Z: expired.
	g := expiring("read", "proj", "2025-06-01T13:30:00+02:00")
	not authz.decision.allow with input as read(ro("a.txt"), 10, [g])
}

test_expired_write_grant_live_read_grant if {
	grants := [expiring("write", "proj", "2025-01-01T00:00:00Z"), grant("read", "proj")]
	authz.decision.allow with input as read(rw("a.txt"), 10, grants)
	not authz.decision.allow with input as write(rw("a.txt"), 10, grants)
}

# --- changes: a writable root and a write grant ---

test_changes_with_write_grant_in_writable_root if {
	every op in ["write", "create", "delete"] {
		authz.decision.allow with input as req(op, rw("src/a.go"), [grant("write", "proj/src")])
	}
}

test_changes_with_read_grant_denied if {
	every op in ["write", "create", "delete"] {
		d := authz.decision with input as req(op, rw("src/a.go"), read_all)
		d.reasons == ["no rule allows this request"]
	}
}

test_changes_in_read_only_root_denied if {
	every op in ["write", "create", "delete"] {
		d := authz.decision with input as req(op, ro("src/a.go"), write_all)
		d.allow == false
		d.code == "PERMISSION_DENIED"
		d.reasons == [ro_reason]
	}
}

test_write_grant_boundary if {
	not authz.decision.allow with input as write(rw("srcx/a.go"), 1, [grant("write", "proj/src")])
}

test_expired_write_grant_denied if {
	g := expiring("write", "proj", "2025-06-01T11:00:00Z")
	not authz.decision.allow with input as write(rw("a.txt"), 1, [g])
}

# --- rename: both sides ---

test_rename_both_writable_and_granted if {
	authz.decision.allow with input as rename(rw("a/x"), rw("b/x"), write_all)
}

test_rename_target_read_only_denied if {
	to := in_root("/srv/data", "data", "x", false)
	d := authz.decision with input as rename(rw("a/x"), to, [grant("write", "proj"), grant("write", "data")])
	d.allow == false
	d.reasons == ["readonly: the root of newPath (\"data\") is read-only"]
}

test_rename_source_read_only_denied if {
	from := in_root("/srv/data", "data", "x", false)
	d := authz.decision with input as rename(from, rw("x"), [grant("write", "proj"), grant("write", "data")])
	d.reasons == ["readonly: the root of path (\"data\") is read-only"]
}

test_rename_target_not_granted_denied if {
	d := authz.decision with input as rename(rw("a/x"), rw("b/x"), [grant("write", "proj/a")])
	d.reasons == ["no rule allows this request"]
}

test_rename_source_not_granted_denied if {
	d := authz.decision with input as rename(rw("a/x"), rw("b/x"), [grant("write", "proj/b"), grant("read", "proj/a")])
	d.reasons == ["no rule allows this request"]
}

test_rename_target_write_decision if {
	authz.decision.allow with input as rename_target(rw("b/x"), write_all)
	d := authz.decision with input as rename_target(ro("b/x"), write_all)
	d.reasons == [ro_reason]
}

# --- the operation, not the method, decides ---

test_rename_without_target_needs_source_grant if {
	# A rename decision that lacks newPath is decided on its source alone.
	authz.decision.allow with input as req("rename", rw("a"), write_all)
	not authz.decision.allow with input as req("rename", rw("a"), read_all)
}

test_change_without_path_denied if {
	doc := object.remove(req("write", rw("a"), write_all), {"path"})
	d := authz.decision with input as doc
	d.reasons == ["no rule allows this request"]
}
