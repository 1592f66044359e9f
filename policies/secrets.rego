# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# Secrets: paths that never leave the broker. A request on such a path (any
# operation, either side of a rename) is denied, and such an entry is never
# shown in a listing or a watch event.
#
# Which paths are secret, and the knobs that change the list
# (data.fsbroker.secrets: extra_patterns, extra_dirs, allow), is
# data.fsbroker.lib's (lib.rego): .env, .env.*, *.pem, *.key, id_rsa*,
# .netrc, .git/config, and anything under .ssh, .aws, .gnupg, matched on
# path.relative, case-insensitively, segment by segment. So
# a/b/.ssh/known_hosts, config/.env.local and certs/server.pem are secret;
# envelope.txt, my.environment and keys.txt are not. A pattern list that
# does not compile denies everything it is asked about (fail closed).
#
# A reason names the rule that matched ("name pattern \"*.pem\""), never the
# file's content.
package fsbroker.authz

import data.fsbroker.lib

# One rule per role of request_paths. Both go through secret_path, so that a
# file adding a definition of secret_path protects more paths.
deny contains {"code": permission_denied, "reason": sprintf("secrets: path matches the protected %s", [rule])} if {
	secret_path(input.path.relative)
	some rule in lib.secret_rules(input.path.relative)
}

deny contains {"code": permission_denied, "reason": sprintf("secrets: newPath matches the protected %s", [rule])} if {
	secret_path(input.newPath.relative)
	some rule in lib.secret_rules(input.newPath.relative)
}

# secret_path(rel): the relative path rel is protected. The extension point:
# a file of this package that adds a definition
#
#   secret_path(rel) if startswith(rel, "private/")
#
# protects more paths (requests on them are denied). This definition is
# lib.secret_path's, written out: one call fewer on every request.
secret_path(rel) if not lib.secret_glob_misses(concat("", ["/", lower(rel)]))

# Entries are matched as secret_path matches a path: "/" + lower(relative).
# The engine hands each entry that string as e.lowerSlashRelative (when it
# sets input.entryFacts), so a listing costs one glob.match an entry; for an
# entry without it glob.match gets null and fails, and a batch whose
# evaluation fails shows nothing (fail closed). lib.secret_glob is looked up
# once per batch, not once per entry.
hide contains e.mountPath if {
	input.entryFacts
	pattern := lib.secret_glob
	some e in input.entries
	glob.match(pattern, ["/"], object.get(e, "lowerSlashRelative", null))
}

# Without the engine's facts (an input a test builds), the string is made
# here.
hide contains e.mountPath if {
	not input.entryFacts
	pattern := lib.secret_glob
	some e in input.entries
	glob.match(pattern, ["/"], concat("", ["/", lower(e.relative)]))
}

hide contains e.mountPath if {
	not lib.secret_glob_compiles
	some e in input.entries
}
