# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# fsbroker's helper rules, for every policy set: the broker loads this
# package with any policy directory or bundle that does not define package
# fsbroker.lib itself (so do not put files of your own in this package).
# The built-in set (package fsbroker.authz, policies/*.rego) calls them from
# here; an operator's files call them the same way, with or without the
# built-in set:
#
#   package fsbroker.authz
#
#   import data.fsbroker.lib
#
#   deny contains "local: no writes outside proj/src" if {
#       input.operation in lib.change_operations
#       some _, p in lib.request_paths
#       not lib.covers("proj/src", p.mountPath)
#   }
#
# or one name at a time: "import data.fsbroker.lib.covers", then covers(...).
#
# The helpers:
#
#   covers(prefix, path)    prefix is path or a directory above it
#   beneath(path, above)    path lies strictly beneath the directory above
#   dir_prefix(path)        path with exactly one trailing slash
#   read_operations         {"read", "list", "watch"}
#   change_operations       {"write", "create", "delete", "rename"}
#   request_paths           role -> path of the request: "path", "newPath"
#   covered(p, accesses)    a live grant of input.grants with one of accesses
#                           covers the path p (an input.path or an entry): a
#                           grant on it or on a directory above it
#   grant_live(g)           the grant g has not expired at input.time
#   secret_path(rel)        the relative path rel is a secret (below)
#   secret_rules(rel)       the secret rules that match rel, for a reason
#   max_write_bytes, max_bytes_per_day, max_read_bytes, max_watches
#                           the limits in effect (below)
#   server_config           data.fsbroker.servers[input.server.id], or {}
#
# Paths are mount-relative, as input.path.mountPath and grant paths are
# ("proj/src/main.py"), and compared at a segment boundary: "proj/dir" covers
# "proj/dir/x", not "proj/dirx".
package fsbroker.lib

# --- paths and requests ---

# covers(prefix, path): prefix is path, or a directory above it (segment
# boundary: "proj/dir" covers "proj/dir/x" but not "proj/dirx"). Both are
# mount-relative; an empty prefix covers nothing.
covers(prefix, path) if startswith(concat("", [path, "/"]), dir_prefix(prefix))

# beneath(path, above): path lies strictly beneath the directory above.
beneath(path, above) if startswith(path, dir_prefix(above))

# dir_prefix(path): path with exactly one trailing slash: the prefix of every
# path it covers, itself included (path + "/"). "" for "" gives "/", which no
# mount-relative path starts with.
dir_prefix(path) := concat("", [trim_suffix(path, "/"), "/"])

# Operations that only observe the file system.
read_operations := {"read", "list", "watch"}

# Operations that change it.
change_operations := {"write", "create", "delete", "rename"}

# The paths a request acts on, by role: "path" (for files/rename, the source)
# and "newPath" (the rename target).
request_paths["path"] := input.path

request_paths["newPath"] := input.newPath

# --- consent grants ---

# covered(p, accesses): a live grant with one of accesses covers p: a grant on
# p's mountPath or on a directory above it. (Any grant covers reading; only a
# write grant covers changes.) The grants are looked up by path in
# input.grantsByPath, the index of input.grants the engine adds to every input,
# from p.mountPath and p.ancestors (the directories above it, which the engine
# adds to input.path and input.newPath), so a request costs a lookup per
# directory level, whatever the number of grants.
covered(p, accesses) if {
	some g in input.grantsByPath[p.mountPath]
	g.access in accesses
	grant_live(g)
}

covered(p, accesses) if {
	some dir in p.ancestors
	some g in input.grantsByPath[dir]
	g.access in accesses
	grant_live(g)
}

# Without those facts (an entry of input.entries, or an input built without
# them, as a test may build one), every grant is compared with the path.
covered(p, accesses) if {
	not grants_indexed(p)
	path := concat("", [p.mountPath, "/"])
	startswith(path, input.grants[i].path) # cheap and necessary: it rules out most grants
	g := input.grants[i]
	startswith(path, concat("", [trim_suffix(g.path, "/"), "/"])) # dir_prefix(g.path), written out
	g.access in accesses
	grant_live(g)
}

# grants_indexed(p): the facts covered looks grants up by are there for p.
grants_indexed(p) if {
	p.ancestors
	input.grantsByPath
}

# grant_live(g): g never expires, or expires no earlier than now.
grant_live(g) if g.expires == ""

grant_live(g) if time.parse_rfc3339_ns(g.expires) >= now_ns

# The time of the decision, in nanoseconds since the Unix epoch.
now_ns := time.parse_rfc3339_ns(input.time.rfc3339)

# --- secrets ---
#
# Paths that never leave the broker in the built-in set (secrets.rego denies
# every request on them and hides them from listings). Matched on the
# relative path, case-insensitively (a case-insensitive file system opens
# .ENV as .env), segment by segment:
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
# that is secret. A pattern list that does not compile makes every path
# secret (fail closed).

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

# secret_path(rel): the relative path rel is protected; every path is when
# secret_glob does not compile (fail closed: glob.match is then undefined,
# and so not false).
secret_path(rel) if not secret_glob_misses(concat("", ["/", lower(rel)]))

secret_glob_misses(path) if glob.match(secret_glob, ["/"], path) == false

# secret_glob_compiles: glob.match gives an answer with secret_glob (a call
# that fails is undefined, and so is this rule).
secret_glob_compiles if is_boolean(glob.match(secret_glob, ["/"], "/"))

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

# secret_rules(rel): the rules that protect rel, for a reason such as
# "name pattern \"*.pem\""; a path the combined glob matched but no single
# rule did gets a general one.
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

# --- limits ---
#
# Set in data.fsbroker.limits; a knob that is unset or not a number takes its
# default:
#
#   max_write_bytes    16777216    decoded bytes per files/write request (a
#                                  server's data.fsbroker.servers entry may
#                                  override it, below)
#   max_bytes_per_day  1073741824  bytes a server may write per day (UTC)
#   max_read_bytes     16777216    length of one files/read
#   max_watches        64          watches a server may hold

# The defaults of data.fsbroker.limits (policies/data.json spells them out).
default_limits := {
	"max_write_bytes": 16777216,
	"max_bytes_per_day": 1073741824,
	"max_read_bytes": 16777216,
	"max_watches": 64,
}

# The limits in effect: data.fsbroker.limits[name] when it is a number, else
# the default. (Written out per limit rather than through a helper function:
# a read evaluates max_read_bytes on every decision.)
#
# A server's own max_write_bytes (data.fsbroker.servers[id].max_write_bytes)
# replaces the global limit when the server's id is pinned by the operator;
# for a name the server only declared, it may lower the limit but never raise
# it (any server can declare any name).
max_write_bytes := server_config.max_write_bytes if {
	is_number(server_config.max_write_bytes)
	server_limit_applies(server_config.max_write_bytes, global_max_write_bytes)
} else := global_max_write_bytes

server_limit_applies(_, _) if input.server.pinned == true

server_limit_applies(limit, global) if limit <= global

global_max_write_bytes := data.fsbroker.limits.max_write_bytes if {
	is_number(data.fsbroker.limits.max_write_bytes)
} else := default_limits.max_write_bytes

max_bytes_per_day := value if {
	value := data.fsbroker.limits.max_bytes_per_day
	is_number(value)
} else := default_limits.max_bytes_per_day

max_read_bytes := value if {
	value := data.fsbroker.limits.max_read_bytes
	is_number(value)
} else := default_limits.max_read_bytes

max_watches := value if {
	value := data.fsbroker.limits.max_watches
	is_number(value)
} else := default_limits.max_watches

# The overrides of the requesting server (data.fsbroker.servers[input.server.id]);
# {} when it has none.
server_config := data.fsbroker.servers[input.server.id] if {
	is_object(data.fsbroker.servers[input.server.id])
} else := {}
