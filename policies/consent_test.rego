# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

package fsbroker.authz_test

import data.fsbroker.authz

# consent_query(entries, access): a files/consent request for entries.
consent_query(entries, access) := object.union(base_input, {
	"method": "files/consent",
	"operation": "consent",
	"entries": entries,
	"params": {"message": "please", "requestedPaths": [e.requested | some e in entries], "access": access},
})

test_plain_paths_are_consentable if {
	authz.consentable == {"proj/src", "proj/README.md"} with input as consent_query([ro("src"), ro("README.md")], "read")
}

test_access_defaults_to_read if {
	q := json.patch(consent_query([rw(".git/config2")], "write"), [{"op": "remove", "path": "/params/access"}])
	authz.consentable == {"proj/.git/config2"} with input as q
}

test_no_write_under_git if {
	authz.consentable == {"proj/src"} with input as consent_query([rw(".git/hooks/pre-commit"), rw("src"), rw(".git")], "write")
	authz.consentable == {"proj/.git/hooks/pre-commit", "proj/src"} with input as consent_query([rw(".git/hooks/pre-commit"), rw("src")], "read")
}

test_never_write_from_data if {
	authz.consentable == {"proj/src"} with input as consent_query([rw("build/out"), rw("src")], "write")
		with data.fsbroker.consent.never_write as ["build"]
	# An explicit list replaces the default: .git is writable-consentable then.
	authz.consentable == {"proj/.git/x"} with input as consent_query([rw(".git/x")], "write")
		with data.fsbroker.consent.never_write as ["build"]
}

test_never_from_data if {
	authz.consentable == {"proj/srcx"} with input as consent_query([ro("src/a"), ro("srcx")], "read")
		with data.fsbroker.consent.never as ["proj/src", 7]
}

test_secrets_are_never_consentable if {
	authz.consentable == {"proj/a.txt"} with input as consent_query([ro(".env"), ro("a.txt"), ro("keys/id_rsa")], "read")
}

test_server_deny_paths_are_never_consentable if {
	authz.consentable == {"proj/docs"} with input as with_server(consent_query([ro("private/x"), ro("docs")], "read"), "builder", true)
		with data.fsbroker.servers as {"builder": {"deny_paths": ["proj/private"]}}
}

test_consentable_only_for_consent if {
	authz.consentable == set() with input as visible_query([ro("a")])
}

test_malformed_config_ignored if {
	authz.consentable == {"proj/a"} with input as consent_query([rw("a")], "write")
		with data.fsbroker.consent as "nonsense"
}

test_no_write_consent_in_a_read_only_root if {
	authz.consentable == {"proj/b"} with input as consent_query([ro("a"), rw("b")], "write")
	authz.consentable == {"proj/a", "proj/b"} with input as consent_query([ro("a"), rw("b")], "read")
}

# --- never_write in the decision: a write grant on proj does not reach .git ---

git_reason(role) := sprintf("consent: %s is under \".git\", which is never writable", [role])

test_no_change_under_git_with_a_write_grant if {
	every rel in [".git/hooks/pre-commit", ".git/HEAD", ".git", "sub/repo/.git/config2", "sub/.git"] {
		every op in ["write", "create", "delete"] {
			d := authz.decision with input as req(op, rw(rel), write_all)
			d.allow == false
			d.code == "PERMISSION_DENIED"
			git_reason("path") in d.reasons
		}
	}
}

test_no_rename_from_or_into_git if {
	d1 := authz.decision with input as rename(rw(".git/hooks/pre-commit"), rw("x"), write_all)
	d1.reasons == [git_reason("path")]
	d2 := authz.decision with input as rename(rw("payload"), rw(".git/hooks/pre-commit"), write_all)
	d2.reasons == [git_reason("newPath")]
	d3 := authz.decision with input as rename(rw("hooks"), rw(".git/hooks"), write_all)
	d3.reasons == [git_reason("newPath")]
	d4 := authz.decision with input as rename(rw("x"), rw("sub/.git"), write_all)
	d4.reasons == [git_reason("newPath")]
	d5 := authz.decision with input as rename_target(rw(".git/HEAD"), write_all)
	d5.reasons == [git_reason("path")]
}

test_never_write_is_case_insensitive if {
	every rel in [".GIT/hooks/pre-commit", "a/.Git/HEAD"] {
		d := authz.decision with input as write(rw(rel), 1, write_all)
		git_reason("path") in d.reasons
	}
}

test_never_write_matches_whole_segments if {
	every rel in [".github/workflows/ci.yml", ".gitignore", "my.git/x", "git/HEAD", ".git.bak/HEAD"] {
		authz.decision.allow with input as write(rw(rel), 1, write_all)
	}
}

test_git_stays_readable if {
	every op in ["read", "list", "watch"] {
		authz.decision.allow with input as req(op, rw(".git/HEAD"), write_all)
	}
}

test_never_write_from_data_in_the_decision if {
	d := authz.decision with input as write(rw("build/out"), 1, write_all)
		with data.fsbroker.consent.never_write as ["build", 3]
	d.reasons == ["consent: path is under \"build\", which is never writable"]
	authz.decision.allow with input as write(rw(".git/HEAD"), 1, write_all)
		with data.fsbroker.consent.never_write as ["build"]
	authz.decision.allow with input as write(rw(".git/HEAD"), 1, write_all)
		with data.fsbroker.consent.never_write as []
}

# The subtree check: a delete or rename of a directory decided again with
# what it carries along.
repo_entries := [as_dir(rw("repo/src")), rw("repo/src/a.go"), as_dir(rw("repo/.git")), rw("repo/.git/HEAD")]

carried_reason := "consent: the directory holds \".git\", which is never writable"

test_no_carrying_git_along if {
	d1 := authz.decision with input as carried(req("delete", as_dir(rw("repo")), write_all), repo_entries)
	d1.reasons == [carried_reason]
	d2 := authz.decision with input as carried(req("rename", as_dir(rw("repo")), write_all), repo_entries)
	d2.reasons == [carried_reason]
	d3 := authz.decision with input as carried(rename_target(as_dir(rw("old")), write_all), [as_dir(rw("old/.GIT"))])
	d3.reasons == [carried_reason]
}

test_carrying_without_git_is_allowed if {
	entries := [as_dir(rw("repo/src")), rw("repo/src/a.go"), rw("repo/.gitignore"), as_dir(rw("repo/.github"))]
	authz.decision.allow with input as carried(req("delete", as_dir(rw("repo")), write_all), entries)
	authz.decision.allow with input as carried(req("rename", as_dir(rw("repo")), write_all), entries)
}

test_entries_of_a_read_are_no_carry if {
	doc := carried(req("list", as_dir(rw("repo")), write_all), repo_entries)
	authz.decision.allow with input as doc
}

# --- never prefixes in the decision ---

never_vendor := ["proj/lib/vendor"]

vendor_reason(role) := sprintf("consent: %s is under \"proj/lib/vendor\", which is never granted", [role])

test_nothing_under_a_never_prefix if {
	every op in ["read", "list", "watch", "write", "create", "delete"] {
		every rel in ["lib/vendor", "lib/vendor/x.go", "LIB/Vendor/x.go"] {
			d := authz.decision with input as req(op, rw(rel), write_all)
				with data.fsbroker.consent.never as never_vendor
			vendor_reason("path") in d.reasons
		}
	}
	d := authz.decision with input as rename(rw("x"), rw("lib/vendor/x"), write_all)
		with data.fsbroker.consent.never as never_vendor
	d.reasons == [vendor_reason("newPath")]
}

test_never_prefix_segment_boundary if {
	every rel in ["lib/vendorx/a", "lib/vendo", "lib/a"] {
		authz.decision.allow with input as write(rw(rel), 1, write_all)
			with data.fsbroker.consent.never as never_vendor
	}
}

test_no_delete_or_rename_above_a_never_prefix if {
	d1 := authz.decision with input as req("delete", as_dir(rw("lib")), write_all)
		with data.fsbroker.consent.never as never_vendor
	d1.reasons == ["consent: path holds \"proj/lib/vendor\", which is never granted"]
	d2 := authz.decision with input as rename(as_dir(rw("lib")), rw("lib2"), write_all)
		with data.fsbroker.consent.never as never_vendor
	d2.reasons == ["consent: path holds \"proj/lib/vendor\", which is never granted"]
	# A moved tree's entries would land under the prefix.
	d3 := authz.decision with input as rename(as_dir(rw("evil")), rw("lib"), write_all)
		with data.fsbroker.consent.never as never_vendor
	d3.reasons == ["consent: newPath holds \"proj/lib/vendor\", which is never granted"]
	# Creating or listing a directory above one is fine.
	authz.decision.allow with input as req("create", as_dir(rw("lib")), write_all)
		with data.fsbroker.consent.never as never_vendor
	authz.decision.allow with input as req("list", as_dir(rw("lib")), write_all)
		with data.fsbroker.consent.never as never_vendor
}

test_never_prefix_hidden if {
	entries := [rw("lib"), rw("lib/vendor"), rw("lib/Vendor/x"), rw("lib/vendorx")]
	authz.visible == {"proj/lib", "proj/lib/vendorx"} with input as visible_query(entries)
		with data.fsbroker.consent.never as never_vendor
}

test_never_prefixes_read_as_every_consent_setting if {
	every consent in [{}, {"never": []}, {"never": ["proj/a", 7, "proj/b"]}, {"never": {"k": "proj/c"}}, {"never": "proj"}, "nonsense", ["proj"]] {
		authz.never_prefixes == authz.consent_setting("never") with data.fsbroker.consent as consent
	}
}
