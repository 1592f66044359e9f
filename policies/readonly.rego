# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# Read-only by default, and nothing without consent.
#
#   - roots/list needs nothing (what it shows is filtered by visible);
#   - read, list and watch need a live read or write grant covering the path;
#   - write, create, delete and rename need a live write grant covering the
#     path, and for a rename one covering the target too (allow rules);
#   - whatever the grants, a change inside a root the operator did not make
#     writable (--root DIR:rw) is denied (deny rule).
#
# A grant covers its path and everything beneath it at a segment boundary
# ("proj/dir" covers "proj/dir/x", not "proj/dirx"); a grant whose non-empty
# expires is earlier than input.time.rfc3339 does not count (lib.covered).
# Grant paths and mountPath are mount-relative ("proj/src/main.py").
#
# An operator pre-approval is another allow rule, in a file of its own, e.g.
#
#   allow if {
#       input.server.pinned
#       input.server.id == "indexer"
#       input.operation in read_operations
#       covers("proj/docs", input.path.mountPath)
#   }
package fsbroker.authz

import data.fsbroker.lib

allow if input.method == "roots/list"

allow if {
	input.operation in {"read", "list", "watch"}
	lib.covered(input.path, {"read", "write"})
}

allow if {
	input.operation in {"write", "create", "delete", "rename"}
	input.path
	every p in lib.request_paths {
		lib.covered(p, {"write"})
	}
}

deny contains {"code": permission_denied, "reason": sprintf("readonly: the root of %s (%q) is read-only", [role, object.get(p, "mount", "")])} if {
	input.operation in {"write", "create", "delete", "rename"}
	some role, p in lib.request_paths
	not p.writable
}
