# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# The entry points of fsbroker's policy set: the broker queries
# data.fsbroker.authz.decision for every request and data.fsbroker.authz.visible
# for every listing page and batch of watch events.
#
# How the rules fit together (every file of the set is in this package):
#
#   allow     complete boolean rule (default false). Some allow rule must match.
#             readonly.rego holds the default ones (a covering consent grant).
#             An operator pre-approval is one more allow rule.
#   deny      partial set. Each element is an object
#               {"code": "PERMISSION_DENIED" | "QUOTA_EXCEEDED", "reason": string}
#             (a bare string is taken as a PERMISSION_DENIED reason). Any match
#             denies, whatever allowed.
#   hide      partial set of mountPath values of input.entries that must not be
#             shown (operation "visible").
#   obligations
#             partial object of limits the broker applies to an allowed request
#             (maxReadBytes for reads).
#
# To add a rule, drop a file beside these:
#
#   package fsbroker.authz
#
#   deny contains {"code": "PERMISSION_DENIED", "reason": "local: no builds on Fridays"} if {
#       input.operation == "write"
#       startswith(input.path.mountPath, "proj/build/")
#   }
#
# Start each reason with the file's concern ("local: ...") so audit readers
# see which rule fired. Reasons go to the server and the audit trail: name the
# rule, never file content.
#
# Every file shares this package, so a rule name defined in one of its files
# is shared too: a file that defines one again adds a definition to it
# instead of a new rule. Give your own helpers a prefix of their own
# (local_...).
#
# The helper rules live in package fsbroker.lib (policies/lib/lib.rego),
# which the broker loads with every policy set, this one or an operator's
# own: covers(prefix, mountPath), read_operations, change_operations,
# request_paths, covered(p, accesses), secret_path(relative), max_read_bytes
# and the other limits, ... Call them as lib.covers(...) after
# "import data.fsbroker.lib". The ones meant for reuse are also defined in
# this package under their own names (at the end of this file), so a file
# beside this set calls covers(...) as before; secret_path here is also an
# extension point: a file adding a definition of it protects more paths
# (secrets.rego).
package fsbroker.authz

import data.fsbroker.lib

# The error code of a quota denial.
quota_exceeded := "QUOTA_EXCEEDED"

# The error code of every other denial.
permission_denied := "PERMISSION_DENIED"

# The reason given when no allow rule matches.
no_allow_reason := "no rule allows this request"

# Deny unless some allow rule matches.
default allow := false

# Fail closed if the decision below could not be built (it always can with the
# rules of this set; a broken extension must not make it undefined).
default decision := {
	"allow": false,
	"code": "PERMISSION_DENIED",
	"reasons": ["the policy could not decide"],
	"obligations": {},
}

# The decision on one request: allowed when some allow rule matches and no
# deny rule does (the common case takes the first branch, which builds
# nothing).
decision := {"allow": true, "code": "", "reasons": [], "obligations": obligations} if {
	allow
	count(deny) == 0
} else := {
	"allow": false,
	"code": decision_code,
	"reasons": sort({d.reason | some d in denials}),
	"obligations": obligations,
}

# Every denial, normalized to {"code", "reason"}; the missing allow counts as
# one.
denials contains {"code": denial_code(d), "reason": denial_reason(d)} if some d in deny

denials contains {"code": permission_denied, "reason": no_allow_reason} if not allow

# QUOTA_EXCEEDED when every denial is a quota one, else PERMISSION_DENIED.
decision_code := quota_exceeded if {
	every d in denials {
		d.code == quota_exceeded
	}
} else := permission_denied

denial_code(d) := quota_exceeded if {
	d.code == quota_exceeded
} else := permission_denied

denial_reason(d) := d if {
	is_string(d)
} else := d.reason if {
	is_string(d.reason)
} else := "denied by policy"

# The mountPath of each entry that may be shown, for operation "visible":
# every entry that no hide rule names.
default visible := set()

visible := {e.mountPath | some e in input.entries} - hide if input.operation == "visible"

# The helpers meant for reuse, under their names in this package (each is
# data.fsbroker.lib's; lib.rego says what they do).

# covers(prefix, path): prefix is path, or a directory above it.
covers(prefix, path) if lib.covers(prefix, path)

# The paths a request acts on, by role: "path" and "newPath".
request_paths := lib.request_paths

# Operations that change the file system.
change_operations := lib.change_operations

# Operations that only observe it.
read_operations := lib.read_operations

# The limits in effect (data.fsbroker.limits, and a server's own
# max_write_bytes).
max_write_bytes := lib.max_write_bytes

max_bytes_per_day := lib.max_bytes_per_day

max_read_bytes := lib.max_read_bytes

max_watches := lib.max_watches
