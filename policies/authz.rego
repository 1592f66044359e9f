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
# Every file shares this package, so a rule name defined here or in a
# concern file (covers, covered, secret_path, ...) is shared too: a file that
# defines one again adds a definition to it instead of a new rule. Give your
# own helpers a prefix of their own (local_...). The helpers meant for reuse:
# covers(prefix, mountPath), read_operations, change_operations,
# request_paths, secret_path(relative), max_read_bytes and the other limits.
package fsbroker.authz

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

# The paths a request acts on, by role: "path" (for files/rename, the source)
# and "newPath" (the rename target).
request_paths["path"] := input.path

request_paths["newPath"] := input.newPath

# Operations that change the file system.
change_operations := {"write", "create", "delete", "rename"}

# Operations that only observe it.
read_operations := {"read", "list", "watch"}

# covers(prefix, path): prefix is path, or a directory above it (segment
# boundary: "proj/dir" covers "proj/dir/x" but not "proj/dirx"). Both are
# mount-relative; an empty prefix covers nothing.
covers(prefix, path) if startswith(concat("", [path, "/"]), dir_prefix(prefix))

# dir_prefix(path): path with exactly one trailing slash: the prefix of every
# path it covers, itself included (path + "/"). "" for "" gives "/", which no
# mount-relative path starts with.
dir_prefix(path) := concat("", [trim_suffix(path, "/"), "/"])
