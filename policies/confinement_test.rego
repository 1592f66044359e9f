# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

package fsbroker.authz_test

import data.fsbroker.authz

# --- allowed: inside the root, and the root itself ---

test_inside_the_root_allowed if {
	authz.decision.allow with input as read(ro("src/main.go"), 10, read_all)
}

test_the_root_itself_can_be_listed if {
	authz.decision.allow with input as req("list", ro(""), read_all)
}

test_the_root_itself_can_be_watched if {
	authz.decision.allow with input as req("watch", ro(""), read_all)
}

test_slash_root_allowed if {
	p := in_root("/", "slash", "etc/hosts", false)
	authz.decision.allow with input as read(p, 10, [grant("read", "slash")])
}

test_root_with_trailing_slash_allowed if {
	p := object.union(ro("a.txt"), {"root": "/home/user/proj/"})
	authz.decision.allow with input as read(p, 10, read_all)
}

# --- denied: outside, siblings, inconsistent descriptions ---

outside_reason := "confinement: path is outside its root"

test_sibling_prefix_denied if {
	p := object.union(ro("x"), {"canonical": "/home/user/proj2/x"})
	d := authz.decision with input as read(p, 10, read_all)
	d.allow == false
	outside_reason in d.reasons
}

test_sibling_without_slash_denied if {
	p := object.union(ro(""), {"canonical": "/home/user/project_evil"})
	d := authz.decision with input as read(p, 10, read_all)
	outside_reason in d.reasons
}

test_parent_of_root_denied if {
	p := object.union(ro(""), {"canonical": "/home/user"})
	d := authz.decision with input as req("list", p, read_all)
	outside_reason in d.reasons
}

test_empty_root_denied if {
	p := object.union(ro(""), {"root": "", "canonical": ""})
	d := authz.decision with input as req("list", p, read_all)
	outside_reason in d.reasons
}

test_rename_target_outside_denied if {
	to := object.union(rw("b"), {"canonical": "/etc/b"})
	d := authz.decision with input as rename(rw("a"), to, write_all)
	d.allow == false
	d.reasons == ["confinement: newPath is outside its root"]
}

test_dotdot_relative_denied if {
	p := in_root(proj_root, "proj", "../etc/passwd", false)
	d := authz.decision with input as read(p, 10, read_all)
	d.reasons == ["confinement: path fields disagree"]
}

test_dot_and_empty_segments_denied if {
	every rel in ["./a", "a//b", "a/"] {
		d := authz.decision with input as read(in_root(proj_root, "proj", rel, false), 10, read_all)
		"confinement: path fields disagree" in d.reasons
	}
}

test_relative_disagrees_with_canonical_denied if {
	# The secret check sees "notes.txt"; the file acted on is .env.
	p := object.union(ro("notes.txt"), {"canonical": "/home/user/proj/.env"})
	d := authz.decision with input as read(p, 10, read_all)
	d.reasons == ["confinement: path fields disagree"]
}

test_mount_path_disagrees_denied if {
	# The grant covers "other/..."; the file is in proj.
	p := object.union(ro("a.txt"), {"mountPath": "other/a.txt"})
	d := authz.decision with input as read(p, 10, [grant("read", "other")])
	d.reasons == ["confinement: path fields disagree"]
}

test_root_description_disagrees_denied if {
	p := object.union(ro(""), {"mountPath": "proj/x"})
	d := authz.decision with input as req("list", p, [grant("read", "proj/x")])
	d.reasons == ["confinement: path fields disagree"]
}

# --- a root itself is never deleted or renamed ---

test_delete_root_denied if {
	d := authz.decision with input as req("delete", rw(""), write_all)
	d.allow == false
	d.reasons == ["confinement: path is a root, which cannot be deleted or renamed"]
}

test_rename_root_denied if {
	d := authz.decision with input as rename(rw(""), rw("elsewhere"), write_all)
	d.reasons == ["confinement: path is a root, which cannot be deleted or renamed"]
}

test_rename_onto_root_denied if {
	d := authz.decision with input as rename(rw("a"), rw(""), write_all)
	d.reasons == ["confinement: newPath is a root, which cannot be deleted or renamed"]
}

test_delete_inside_root_allowed if {
	authz.decision.allow with input as req("delete", rw("a/b"), write_all)
}

# --- visibility ---

test_entries_whose_name_disagrees_hidden if {
	disagreeing := object.union(ro("y"), {"mountPath": "proj/z"})
	wrong_mount := object.union(ro("w"), {"mount": "other"})
	authz.visible == {"proj/a", "proj"} with input as visible_query([ro("a"), disagreeing, wrong_mount, ro("")])
}

# An entry is only named, never opened: where its canonical path points does
# not hide it (a symbolic link is listed, never followed).
test_entries_are_judged_by_name if {
	link := object.union(ro("link"), {"canonical": "/etc/passwd", "type": "symlink"})
	authz.visible == {"proj/link"} with input as visible_query([link])
}
