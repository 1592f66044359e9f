# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

package fsbroker.authz_test

import data.fsbroker.authz
import data.fsbroker.lib

# secret(rel): the reasons reading rel in proj is denied with.
secret(rel) := {r | some r in d.reasons} if {
	d := authz.decision with input as read(ro(rel), 10, read_all)
	not d.allow
}

readable(rel) := allowed if {
	allowed := authz.decision.allow with input as read(ro(rel), 10, read_all)
}

# --- what is secret ---

test_default_names if {
	secret(".env") == {"secrets: path matches the protected name pattern \".env\""}
	secret("config/.env.local") == {"secrets: path matches the protected name pattern \".env.*\""}
	secret("certs/server.pem") == {"secrets: path matches the protected name pattern \"*.pem\""}
	secret("tls/server.key") == {"secrets: path matches the protected name pattern \"*.key\""}
	secret("home/id_rsa") == {"secrets: path matches the protected name pattern \"id_rsa*\""}
	secret("id_rsa.pub") == {"secrets: path matches the protected name pattern \"id_rsa*\""}
	secret(".netrc") == {"secrets: path matches the protected name pattern \".netrc\""}
	secret("a/b/c/my.cert.pem") == {"secrets: path matches the protected name pattern \"*.pem\""}
}

test_default_dirs_nested if {
	secret("a/b/.ssh/known_hosts") == {"secrets: path matches the protected directory \".ssh\""}
	secret(".ssh/config") == {"secrets: path matches the protected directory \".ssh\""}
	secret(".aws/credentials") == {"secrets: path matches the protected directory \".aws\""}
	secret("home/.gnupg/pubring.kbx") == {"secrets: path matches the protected directory \".gnupg\""}
}

test_the_protected_dir_itself if {
	secret(".ssh") == {"secrets: path matches the protected directory \".ssh\""}
	secret("a/.aws") == {"secrets: path matches the protected directory \".aws\""}
}

test_git_config if {
	secret(".git/config") == {"secrets: path matches the protected path \".git/config\""}
	secret("vendor/lib/.git/config") == {"secrets: path matches the protected path \".git/config\""}
}

test_several_rules_at_once if {
	secret(".ssh/deploy.key") == {
		"secrets: path matches the protected directory \".ssh\"",
		"secrets: path matches the protected name pattern \"*.key\"",
	}
}

test_case_insensitive if {
	secret(".ENV") == {"secrets: path matches the protected name pattern \".env\""}
	secret("certs/Server.PEM") == {"secrets: path matches the protected name pattern \"*.pem\""}
	secret("a/.SSH/x") == {"secrets: path matches the protected directory \".ssh\""}
}

# --- what is not ---

test_lookalikes_are_not_secret if {
	readable("envelope.txt") == true
	readable("my.environment") == true
	readable("keys.txt") == true
	readable("env") == true
	readable("a/.envrc.example.md/x") == true
	readable("server.pem.txt") == true
	readable("keys/README") == true
	readable("my.ssh/x") == true
	readable(".sshx/x") == true
	readable("ssh/x") == true
	readable("aws/credentials") == true
	readable(".git/HEAD") == true
	readable(".git/config.d/x") == true
	readable("git/config") == true
	readable("x.git/config") == true
	readable("id-rsa") == true
	readable("netrc") == true
	readable("") == true
}

# --- every operation, both sides of a rename ---

test_every_operation_on_a_secret_denied if {
	every op in ["read", "list", "watch", "write", "create", "delete"] {
		d := authz.decision with input as req(op, rw("a/.env"), write_all)
		d.reasons == ["secrets: path matches the protected name pattern \".env\""]
	}
}

test_rename_onto_a_secret_denied if {
	d := authz.decision with input as rename(rw("notes.txt"), rw(".env"), write_all)
	d.reasons == ["secrets: newPath matches the protected name pattern \".env\""]
}

test_rename_a_secret_away_denied if {
	d := authz.decision with input as rename(rw(".ssh/id_ed25519"), rw("out.txt"), write_all)
	d.reasons == ["secrets: path matches the protected directory \".ssh\""]
}

test_rename_target_write_on_a_secret_denied if {
	not authz.decision.allow with input as rename_target(rw("certs/x.pem"), write_all)
}

# --- data: extras and exemptions ---

test_extra_patterns if {
	extra := {"extra_patterns": ["*.P12", "secrets.*"]}
	d := authz.decision with input as read(ro("a/store.p12"), 1, read_all) with data.fsbroker.secrets as extra
	d.reasons == ["secrets: path matches the protected name pattern \"*.p12\""]
	not authz.decision.allow with input as read(ro("secrets.yaml"), 1, read_all) with data.fsbroker.secrets as extra
	authz.decision.allow with input as read(ro("my-secrets.yaml"), 1, read_all) with data.fsbroker.secrets as extra
}

test_extra_dirs if {
	extra := {"extra_dirs": [".kube/", "deploy/keys", "/", 7]}
	d := authz.decision with input as read(ro("home/.kube/config"), 1, read_all) with data.fsbroker.secrets as extra
	d.reasons == ["secrets: path matches the protected directory \".kube\""]
	not authz.decision.allow with input as read(ro("ops/deploy/keys/a"), 1, read_all) with data.fsbroker.secrets as extra
	authz.decision.allow with input as read(ro("deploy/keysx/a"), 1, read_all) with data.fsbroker.secrets as extra
	authz.decision.allow with input as read(ro("keys/a"), 1, read_all) with data.fsbroker.secrets as extra
}

test_allow_drops_a_default if {
	exempt := {"allow": ["*.pem", ".ssh/", ".git/config"]}
	authz.decision.allow with input as read(ro("certs/server.pem"), 1, read_all) with data.fsbroker.secrets as exempt
	authz.decision.allow with input as read(ro(".ssh/known_hosts"), 1, read_all) with data.fsbroker.secrets as exempt
	authz.decision.allow with input as read(ro(".git/config"), 1, read_all) with data.fsbroker.secrets as exempt

	# The others stay.
	not authz.decision.allow with input as read(ro(".env"), 1, read_all) with data.fsbroker.secrets as exempt
	not authz.decision.allow with input as read(ro(".ssh/id_rsa"), 1, read_all) with data.fsbroker.secrets as exempt
	not authz.decision.allow with input as read(ro(".aws/credentials"), 1, read_all) with data.fsbroker.secrets as exempt
}

test_malformed_settings_keep_defaults if {
	not authz.decision.allow with input as read(ro(".env"), 1, read_all) with data.fsbroker.secrets as "off"
	not authz.decision.allow with input as read(ro(".env"), 1, read_all) with data.fsbroker.secrets as {"allow": ".env"}
	not authz.decision.allow with input as read(ro(".env"), 1, read_all) with data.fsbroker.secrets as {"allow": [1]}
}

# --- visibility ---

test_secrets_hidden_from_listings if {
	entries := [ro("a.txt"), ro(".env"), ro("b/id_rsa"), ro(".aws"), ro(".aws/config"), ro("certs"), ro("certs/ca.pem")]
	authz.visible == {"proj/a.txt", "proj/certs"} with input as visible_query(entries)
}

test_exempt_secrets_shown if {
	entries := [ro("a.txt"), ro("certs/ca.pem")]
	authz.visible == {"proj/a.txt", "proj/certs/ca.pem"} with input as visible_query(entries)
		with data.fsbroker.secrets.allow as ["*.pem"]
}

test_allowing_every_default_protects_nothing if {
	exempt := {"allow": [".env", ".env.*", "*.pem", "*.key", "id_rsa*", ".netrc", ".ssh", ".aws", ".gnupg", ".git/config"]}
	lib.secret_glob == "" with data.fsbroker.secrets as exempt
	every rel in [".env", "a/.ssh/id_rsa", ".git/config", "x.pem"] {
		authz.decision.allow with input as read(ro(rel), 1, read_all) with data.fsbroker.secrets as exempt
	}
}

# A pattern list that does not compile (the combined glob is undefined here)
# protects everything, with a general reason.
test_broken_glob_fails_closed if {
	d := authz.decision with input as read(ro("README.md"), 1, read_all) with glob.match as broken_combined_glob
	d.allow == false
	d.reasons == ["secrets: path matches the protected secret pattern list"]
	count(authz.visible) == 0 with input as visible_query([ro("a.txt")]) with glob.match as broken_combined_glob
}

broken_combined_glob(pattern, _, _) := false if not startswith(pattern, "{")

# secret_path, the helper documented for extensions (authz.rego), answers as
# the deny rules do, and fails closed with them; so does lib.secret_path,
# which it writes out.
test_secret_path_helper if {
	authz.secret_path(".env")
	authz.secret_path("a/B/.SSH/known_hosts")
	authz.secret_path("certs/server.pem")
	not authz.secret_path("README.md")
	not authz.secret_path("envelope.txt")
	authz.secret_path("README.md") with glob.match as broken_combined_glob
	lib.secret_path(".env")
	lib.secret_path("a/B/.SSH/known_hosts")
	lib.secret_path("certs/server.pem")
	not lib.secret_path("README.md")
	not lib.secret_path("envelope.txt")
	lib.secret_path("README.md") with glob.match as broken_combined_glob
}

# --- the precomputed default glob ---

# The precomputed glob is the compiled one written out: every alternative of
# the compiled glob is one of it, and both answer alike on paths of every
# kind (policies_test.go compares them on many more, generated).
test_default_glob_is_what_the_defaults_compile_to if {
	names := lib.default_secret_names
	sequences := lib.default_secret_dirs | lib.default_secret_paths
	compiled := lib.compile_secret_glob(names, sequences)
	compiled == "{**/{*.key,*.pem,.env,.env.*,.netrc,id_rsa*},**/{.aws,.git/config,.gnupg,.ssh}{/**,}}"
	written_out := {sprintf("**/%s", [n]) | some n in names} | {sprintf(f, [s]) | some s in sequences; some f in ["**/%s", "**/%s/**"]}
	lib.default_secret_glob == concat("", ["{", concat(",", sort(written_out)), "}"])
	every rel in glob_probe_paths {
		path := concat("", ["/", lower(rel)])
		glob.match(compiled, ["/"], path) == glob.match(lib.default_secret_glob, ["/"], path)
	}
	lib.secret_glob == lib.default_secret_glob
	lib.secret_glob == lib.default_secret_glob with data.fsbroker.secrets as {}
}

glob_probe_paths := [
	"", ".env", "a/.env", "a/.env/b", ".env.local", "a/.env.", ".envx", "x.env", "env",
	"a.pem", ".pem", "a/b.PEM", "a.pem/b", "a.pemx", "pem", "a.key", "a/b/c.key", "key",
	"id_rsa", "id_rsa.pub", "a/id_rsa_x", "xid_rsa", ".netrc", "a/.netrc", ".netrcx",
	".ssh", ".ssh/known_hosts", "a/.ssh", "a/.ssh/b/c", ".sshx", "x.ssh", "a/ssh",
	".aws", "a/.aws/credentials", ".gnupg/x", "a.gnupg", ".git/config", "a/.git/config",
	".git/config/x", ".git/configx", ".git/HEAD", "x.git/config", ".git", "config",
	"a//.env", "a/./.ssh", "../.aws", "a/\\.env", "a/{.env}", "a/*.pem", "a/[x].key",
	"é/.env", "a\\n.env/x", "a\n/.env", "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/file.txt", "a/b/c/d/e/f/.ssh",
]

test_settings_take_the_computed_glob if {
	lib.secret_glob != lib.default_secret_glob with data.fsbroker.secrets.extra_patterns as ["*.p12"]
}

# Every default case, again with settings that force the computed glob
# (they change nothing the cases look at).
test_computed_glob_matches_like_the_default if {
	settings := {"extra_patterns": ["*.never-used"], "extra_dirs": [], "allow": []}
	every rel in [".env", "config/.env.local", "certs/server.pem", "a/b/.ssh/known_hosts", ".git/config", "id_rsa", "x.KEY", ".netrc", ".aws", "g/.gnupg/x"] {
		not authz.decision.allow with input as read(ro(rel), 1, read_all) with data.fsbroker.secrets as settings
	}
	every rel in ["envelope.txt", "my.environment", "keys.txt", ".git/HEAD", "x.git/config", ".sshx/a", ""] {
		authz.decision.allow with input as read(ro(rel), 1, read_all) with data.fsbroker.secrets as settings
	}
}

test_secrets_hidden_whatever_the_case if {
	entries := [ro("a.txt"), ro(".ENV"), ro("certs/CA.Pem"), ro("home/.SSH/config")]
	authz.visible == {"proj/a.txt"} with input as visible_query(entries)
}
