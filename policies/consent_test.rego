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
