# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

package fsbroker.authz_test

import data.fsbroker.authz

# A hard link cfg/settings.txt to cfg/.env: the name is innocent, the inode
# has two links.
laundered := with_nlink(rw("cfg/settings.txt"), 2)

hardlink_reason(n) := sprintf("hardlinks: path is a regular file with %d links, which may be another file's content under a second name (data.fsbroker.hardlinks.allow)", [n])

test_multiply_linked_file_is_not_read if {
	d := authz.decision with input as read(laundered, 10, write_all)
	d.allow == false
	d.code == "PERMISSION_DENIED"
	d.reasons == [hardlink_reason(2)]
	d3 := authz.decision with input as read(with_nlink(ro("a.txt"), 3), 10, read_all)
	d3.reasons == [hardlink_reason(3)]
}

test_singly_linked_file_is_read if {
	authz.decision.allow with input as read(rw("cfg/settings.txt"), 10, write_all)
	# No link count known (a platform without one): the rule cannot apply.
	authz.decision.allow with input as read(with_nlink(rw("cfg/settings.txt"), 0), 10, write_all)
}

test_directories_have_links_of_their_own if {
	every op in ["read", "list", "watch"] {
		authz.decision.allow with input as req(op, with_nlink(as_dir(ro("src")), 5), read_all)
	}
}

# Only a read discloses content: a write replaces the inode, a delete or a
# rename of the link leaves the content where it was.
test_changes_of_a_multiply_linked_file_are_allowed if {
	every op in ["write", "create", "delete"] {
		authz.decision.allow with input as req(op, laundered, write_all)
	}
	authz.decision.allow with input as rename(laundered, rw("cfg/other.txt"), write_all)
	every op in ["list", "watch"] {
		authz.decision.allow with input as req(op, laundered, write_all)
	}
}

store := ["proj/node_modules/.pnpm"]

test_allowed_prefix_reads_multiply_linked_files if {
	authz.decision.allow with input as read(with_nlink(rw("node_modules/.pnpm/a@1/index.js"), 2), 10, write_all)
		with data.fsbroker.hardlinks.allow as store
	authz.decision.allow with input as read(with_nlink(rw("node_modules/.pnpm"), 2), 10, write_all)
		with data.fsbroker.hardlinks.allow as store
	d := authz.decision with input as read(with_nlink(rw("node_modules/.pnpmx/a"), 2), 10, write_all)
		with data.fsbroker.hardlinks.allow as store
	d.reasons == [hardlink_reason(2)]
	not authz.decision.allow with input as read(laundered, 10, write_all)
		with data.fsbroker.hardlinks.allow as store
}

test_no_moving_links_into_an_allowed_prefix if {
	d1 := authz.decision with input as rename(laundered, rw("node_modules/.pnpm/x"), write_all)
		with data.fsbroker.hardlinks.allow as store
	d1.reasons == ["hardlinks: a rename may not move a multiply-linked file into \"proj/node_modules/.pnpm\", where multiply-linked files may be read"]
	d2 := authz.decision with input as rename(as_dir(rw("cfg")), rw("node_modules/.pnpm/cfg"), write_all)
		with data.fsbroker.hardlinks.allow as store
	d2.reasons == ["hardlinks: a rename may not move a directory into \"proj/node_modules/.pnpm\", where multiply-linked files may be read"]
	# Onto a path above the prefix: the moved tree's entries land under it.
	d3 := authz.decision with input as rename(as_dir(rw("cfg")), rw("node_modules"), write_all)
		with data.fsbroker.hardlinks.allow as store
	d3.reasons == ["hardlinks: a rename may not move a directory into \"proj/node_modules/.pnpm\", where multiply-linked files may be read"]
}

test_other_renames_with_an_allowed_prefix if {
	# A singly-linked file, a link, a move within or out of the prefix.
	authz.decision.allow with input as rename(rw("cfg/a.txt"), rw("node_modules/.pnpm/a.txt"), write_all)
		with data.fsbroker.hardlinks.allow as store
	authz.decision.allow with input as rename(object.union(rw("cfg/l"), {"type": "symlink"}), rw("node_modules/.pnpm/l"), write_all)
		with data.fsbroker.hardlinks.allow as store
	authz.decision.allow with input as rename(with_nlink(rw("node_modules/.pnpm/a"), 2), rw("node_modules/.pnpm/b"), write_all)
		with data.fsbroker.hardlinks.allow as store
	authz.decision.allow with input as rename(with_nlink(rw("node_modules/.pnpm/a"), 2), rw("cfg/a"), write_all)
		with data.fsbroker.hardlinks.allow as store
	authz.decision.allow with input as rename(as_dir(rw("cfg")), rw("etc"), write_all)
		with data.fsbroker.hardlinks.allow as store
}

test_malformed_hardlinks_config_allows_nothing if {
	every config in ["proj", ["proj"], 7, {"allow": "proj"}, {"allow": [7, ""]}] {
		not authz.decision.allow with input as read(laundered, 10, write_all)
			with data.fsbroker.hardlinks as config
	}
}

# A rename into an allowed prefix spelt in another case is denied too: a
# case-insensitive file system puts it in the allowed directory.
test_rename_into_an_allowed_prefix_in_another_case_is_denied if {
	d := authz.decision with input as rename(laundered, rw("Node_Modules/.PNPM/x"), write_all)
		with data.fsbroker.hardlinks as {"allow": ["proj/node_modules/.pnpm"]}
	d.allow == false
	d.reasons == ["hardlinks: a rename may not move a multiply-linked file into \"proj/node_modules/.pnpm\", where multiply-linked files may be read"]
}
