# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# Confinement, in depth: the canonicalizer already keeps every path inside a
# root; this file refuses a request whose path description says otherwise,
# so a broker bug cannot turn into an escape.
#
#   - path.canonical must be path.root itself or lie beneath root + "/"
#     (never a sibling such as /home/u/project2 for the root /home/u/project);
#   - path.relative must be clean (no "", "." or ".." segment) and agree with
#     canonical and mountPath, because grants and secrets are matched on
#     those fields;
#   - a root itself is never deleted or renamed (docs/protocol.md section 3).
#
# The same holds for newPath (the rename target). For operation "visible",
# an entry whose mountPath disagrees with its mount and relative is hidden.
package fsbroker.authz

import data.fsbroker.lib

# One rule per role of request_paths (written out so that the newPath rule is
# skipped without evaluation when there is no newPath).
deny contains {"code": permission_denied, "reason": confinement_reason("path", p)} if {
	p := input.path
	not well_formed(p)
}

deny contains {"code": permission_denied, "reason": confinement_reason("newPath", p)} if {
	p := input.newPath
	not well_formed(p)
}

deny contains {"code": permission_denied, "reason": sprintf("confinement: %s is a root, which cannot be deleted or renamed", [role])} if {
	input.operation in {"delete", "rename"}
	some role, p in lib.request_paths
	p.relative == ""
}

# An entry is only shown, never opened: what must hold is that the name shown
# (mountPath) is the one the other rules judged (mount and relative), joined
# as trim_suffix(concat("/", [mount, relative]), "/"). The engine hands each
# entry that join as e.joinedMountPath (when it sets input.entryFacts); an
# entry without it is hidden (fail closed).
hide contains e.mountPath if {
	input.entryFacts
	some e in input.entries
	not e.mountPath == e.joinedMountPath
}

# Without the engine's facts (an input a test builds), the join is made here.
hide contains e.mountPath if {
	not input.entryFacts
	some e in input.entries
	e.mountPath != trim_suffix(concat("/", [e.mount, e.relative]), "/")
}

# well_formed(p): p is its root, or lies beneath it, and its relative path is
# clean and agrees with canonical and mountPath.
well_formed(p) if {
	p.relative == ""
	p.root != ""
	p.canonical == p.root
	p.mountPath == p.mount
}

well_formed(p) if {
	p.root != ""
	p.canonical == concat("/", [trim_suffix(p.root, "/"), p.relative])
	p.mountPath == concat("/", [p.mount, p.relative])
	not regex.match(`(^|/)\.{0,2}(/|$)`, p.relative)
}

# confinement_reason(role, p): why p is not well formed.
confinement_reason(role, p) := sprintf("confinement: %s is outside its root", [role]) if {
	not confined(p)
} else := sprintf("confinement: %s fields disagree", [role])

# confined(p): p.canonical is p.root or lies beneath it.
confined(p) if {
	p.root != ""
	p.canonical == p.root
}

confined(p) if {
	p.root != ""
	startswith(p.canonical, lib.dir_prefix(p.root))
}
