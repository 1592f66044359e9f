# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# Visibility and consent derived from the decision, for a policy set that
# defines data.fsbroker.authz.decision but not data.fsbroker.authz.visible or
# data.fsbroker.authz.consentable (a directory holding one file that defines
# only decision, for example). The broker loads this package with every
# policy set that does not define package fsbroker.derived itself, and asks
# data.fsbroker.derived.visible in place of a missing visible and
# data.fsbroker.derived.consentable in place of a missing consentable. A set
# that defines its own (the built-in one does) is asked for its own; it may
# also use these (visible := data.fsbroker.derived.visible - local_hidden).
#
#   visible      for operation "visible": the mountPath of each entry whose
#                read the decision allows. The read is the batch's input
#                with method "files/read", operation "read", path the entry,
#                params {"path": its mountPath}, bytes 0, and neither entries
#                nor newPath: what the broker sends for a files/read of it.
#   consentable  for operation "consent": the mountPath of each requested
#                path that the decision would allow once granted. Access
#                "read" (or none) asks about a read of the path, access
#                "write" about a files/write of it (bytes 0), each with the
#                server's grants plus a new grant of that access on that
#                path, so a decision that requires a grant can allow it.
#                Another access grants nothing.
#
# Each entry is decided on its own (with input as ...), so a batch costs
# about one decision per entry: docs/policy.md gives the numbers.
package fsbroker.derived

default visible := set()

visible := {e.mountPath |
	some e in input.entries
	allows(object.union(read_request, {"path": e, "params": {"path": e.mountPath}}))
} if input.operation == "visible"

default consentable := set()

consentable := {e.mountPath |
	some e in input.entries
	grant := {"access": consent_access, "path": e.mountPath, "granted": input.time.rfc3339, "expires": ""}
	allows(object.union(consent_request, {"path": e, "params": {"path": e.mountPath}, "grants": array.concat(input.grants, [grant])}))
} if input.operation == "consent"

# The access a files/consent request asks for.
consent_access := access if {
	access := input.params.access
	is_string(access)
} else := "read"

# The method of each access that consent can grant.
method_of := {"read": "files/read", "write": "files/write"}

# What every entry's request shares (built once per batch).
shared := {
	"version": input.version,
	"server": input.server,
	"session": input.session,
	"bytes": 0,
	"usage": input.usage,
	"time": input.time,
}

read_request := object.union(shared, {"method": "files/read", "operation": "read", "grants": input.grants})

consent_request := object.union(shared, {"method": method_of[consent_access], "operation": consent_access})

# allows(request): the decision on request allows it: it has allow true.
# (Read through object.get from a wrapper object, so that this module
# compiles whatever type the set's decision has: a malformed decision is
# the engine's to refuse, and allows nothing here unless its allow is true.)
allows(request) if {
	decision := data.fsbroker.authz.decision with input as request
	object.get({"decision": decision}, ["decision", "allow"], false) == true
}
