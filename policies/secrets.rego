# Secrets: paths that never leave the broker. A request on such a path (any
# operation, either side of a rename) is denied, and such an entry is never
# shown in a listing or a watch event.
#
# Matched on path.relative, case-insensitively (a case-insensitive file system
# opens .ENV as .env), segment by segment:
#
#   name patterns  globs on the last segment (the base name):
#                  .env  .env.*  *.pem  *.key  id_rsa*  .netrc
#   directories    a segment with this name anywhere, and everything beneath:
#                  .ssh  .aws  .gnupg
#   paths          consecutive segments anywhere, and everything beneath:
#                  .git/config
#
# So a/b/.ssh/known_hosts, config/.env.local and certs/server.pem are secret;
# envelope.txt, my.environment and keys.txt are not.
#
# Knobs (data.fsbroker.secrets):
#
#   extra_patterns  more name patterns: globs on the base name ("*" and "?"
#                   never match "/"; {a,b} alternatives are allowed; a bare
#                   comma is not)
#   extra_dirs      more directory names, or segment sequences ("deploy/keys");
#                   globs within a segment are allowed
#   allow           patterns, directories or paths to drop from the list, as
#                   written above (".env.*", ".ssh", ".git/config")
#
# Every pattern in effect is folded into one glob (secret_glob), so a path
# costs one glob.match; the rule that matched is worked out only for a path
# that is secret. A pattern list that does not compile denies everything it
# is asked about (fail closed).
#
# A reason names the rule that matched ("name pattern \"*.pem\""), never the
# file's content.
package fsbroker.authz

# The default name patterns.
default_secret_names := {".env", ".env.*", "*.pem", "*.key", "id_rsa*", ".netrc"}

# The default directory names.
default_secret_dirs := {".ssh", ".aws", ".gnupg"}

# The default segment sequences.
default_secret_paths := {".git/config"}

# secret_glob for the defaults, precomputed: what the defaults compile to
# (compile_secret_glob) with "**/" distributed over the alternatives and
# "{/**,}" written out, alternatives sorted. It is the same set of paths
# (tests hold the two to the same answers) and matches several times faster:
# glob.match backtracks on "**/{...}", the more so the deeper the path.
default_secret_glob := "{**/*.key,**/*.pem,**/.aws,**/.aws/**,**/.env,**/.env.*,**/.git/config,**/.git/config/**,**/.gnupg,**/.gnupg/**,**/.netrc,**/.ssh,**/.ssh/**,**/id_rsa*}"

# One rule per role of request_paths. Both go through secret_path, so that a
# file adding a definition of secret_path (authz.rego) protects more paths.
deny contains {"code": permission_denied, "reason": sprintf("secrets: path matches the protected %s", [rule])} if {
	secret_path(input.path.relative)
	some rule in secret_rules(input.path.relative)
}

deny contains {"code": permission_denied, "reason": sprintf("secrets: newPath matches the protected %s", [rule])} if {
	secret_path(input.newPath.relative)
	some rule in secret_rules(input.newPath.relative)
}

# secret_glob is looked up once per batch, not once per entry.
hide contains e.mountPath if {
	pattern := secret_glob
	some e in input.entries
	glob.match(pattern, ["/"], concat("", ["/", lower(e.relative)]))
}

hide contains e.mountPath if {
	not secret_glob_compiles
	some e in input.entries
}

# secret_glob_compiles: glob.match gives an answer with secret_glob (a call
# that fails is undefined, and so is this rule).
secret_glob_compiles if is_boolean(glob.match(secret_glob, ["/"], "/"))

# secret_path(rel): the relative path rel is protected; every path is when
# secret_glob does not compile (fail closed: glob.match is then undefined,
# and so not false).
secret_path(rel) if not secret_glob_misses(concat("", ["/", lower(rel)]))

secret_glob_misses(path) if glob.match(secret_glob, ["/"], path) == false

# The glob that matches "/" + a protected relative path (lower case). The
# default when data.fsbroker.secrets is missing, not an object, {} or the
# empty lists of data.json.
secret_glob := default_secret_glob if {
	data.fsbroker.secrets == {"extra_patterns": [], "extra_dirs": [], "allow": []}
} else := default_secret_glob if {
	secrets_config == {}
} else := compile_secret_glob(secret_name_patterns, {sequence | some [_, sequence] in secret_sequences})

# compile_secret_glob(names, sequences): one glob for name patterns and
# segment sequences; "" (matches no path) when both are empty.
compile_secret_glob(names, sequences) := glob if {
	branches := [branch |
		some [items, format] in [[names, "**/{%s}"], [sequences, "**/{%s}{/**,}"]]
		count(items) > 0
		branch := sprintf(format, [concat(",", items)])
	]
	glob := concat("", ["{", concat(",", branches), "}"])
	count(branches) > 0
} else := ""

# secret_rules(rel): the rules that protect rel, for the reason; a path the
# combined glob matched but no single rule did gets a general reason.
secret_rules(rel) := rules if {
	path := concat("", ["/", lower(rel)])
	names := {sprintf("name pattern %q", [pattern]) |
		some pattern in secret_name_patterns
		glob.match(concat("", ["**/", pattern]), ["/"], path)
	}
	sequences := {sprintf("%s %q", [kind, sequence]) |
		some [kind, sequence] in secret_sequences
		glob.match(concat("", ["**/", sequence, "{/**,}"]), ["/"], path)
	}
	rules := names | sequences
	count(rules) > 0
} else := {"secret pattern list"}

# The name patterns in effect: defaults and extras, less the allowed ones.
secret_name_patterns := {lower(pattern) |
	some pattern in (default_secret_names | secret_setting("extra_patterns"))
	not lower(pattern) in secret_exemptions
}

# The segment sequences in effect, as [kind, sequence] pairs.
secret_sequences := dirs | paths if {
	dirs := {["directory", dir] |
		some raw in (default_secret_dirs | secret_setting("extra_dirs"))
		dir := trim(lower(raw), "/")
		dir != ""
		not dir in secret_exemptions
	}
	paths := {["path", path] |
		some path in default_secret_paths
		not path in secret_exemptions
	}
}

# What data.fsbroker.secrets.allow drops.
secret_exemptions := {trim(lower(x), "/") | some x in secret_setting("allow")}

# secret_setting(key): the strings listed under data.fsbroker.secrets[key].
secret_setting(key) := {x |
	some x in object.get(secrets_config, key, [])
	is_string(x)
}

secrets_config := data.fsbroker.secrets if {
	is_object(data.fsbroker.secrets)
} else := {}
