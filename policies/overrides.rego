# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# Per-server overrides: data.fsbroker.servers[input.server.id], e.g.
#
#   "servers": {
#     "indexer": {"read_only": true},
#     "builder": {"deny_paths": ["proj/secrets", "proj/.github"], "max_write_bytes": 67108864}
#   }
#
#   read_only        true: every change (write, create, delete, rename) is
#                    denied, whatever the grants
#   deny_paths       mount-relative prefixes: every request on a path under one
#                    (segment boundary: "proj/a" covers "proj/a/b", not
#                    "proj/ab"; compared case-insensitively, as a
#                    case-insensitive file system opens "PROJ/A" as "proj/a")
#                    is denied, either side of a rename, and such entries are
#                    not shown in listings and watch events
#   max_write_bytes  the per-write limit for this server, in place of
#                    data.fsbroker.limits.max_write_bytes (lib.max_write_bytes
#                    in lib.rego); for a server whose id is not pinned it can
#                    only lower the limit, never raise it
#
# The key is input.server.id: the id the operator pinned for the server when
# there is one (input.server.pinned), else the name the server declared in
# initialize. A declared name is only a claim: any server can declare any
# name, so an override that relaxes something (a larger max_write_bytes)
# applies only to a pinned id. Pin an id in the configuration for every server
# an override is meant for: a restriction keyed by a declared name only binds
# servers that declare it.
package fsbroker.authz

import data.fsbroker.lib

# Each rule starts with data.fsbroker.servers[input.server.id]: OPA's rule
# index then skips it without evaluation for a server with no overrides.
deny contains {"code": permission_denied, "reason": sprintf("overrides: server %q is read-only", [input.server.id])} if {
	data.fsbroker.servers[input.server.id]
	input.operation in {"write", "create", "delete", "rename"}
	lib.server_config.read_only == true
}

deny contains {"code": permission_denied, "reason": sprintf("overrides: %s is under the denied path %q", [role, prefix])} if {
	data.fsbroker.servers[input.server.id]
	some role, p in lib.request_paths
	some prefix in server_deny_paths
	lib.covers(prefix, lower(p.mountPath))
}

hide contains e.mountPath if {
	data.fsbroker.servers[input.server.id]
	some e in input.entries
	some prefix in server_deny_paths
	lib.covers(prefix, lower(e.mountPath))
}

# The server's denied path prefixes, in lower case.
server_deny_paths := {lower(prefix) |
	some prefix in object.get(lib.server_config, "deny_paths", [])
	is_string(prefix)
}
