# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# Consent, and the places no consent reaches.
#
# Which of the paths a server asks for in files/consent may be granted at
# all: the broker queries data.fsbroker.authz.consentable with operation
# "consent", method "files/consent", the requested paths (resolved, inside
# the roots) in input.entries and the access asked in input.params.access
# ("read" when absent). Only the paths in the result are put to the consent
# provider (auto, the person at the prompt, a command); what it approves
# becomes a grant.
#
# Never granted:
#   - anything a listing would not show (every hide rule: secrets, per-server
#     deny_paths, malformed paths, the never prefixes below), so a person is
#     never asked to approve a path the policies keep hidden;
#   - write access in a read-only root;
#   - write access under a path segment in data.fsbroker.consent.never_write
#     (default [".git"]: a server may read a repository, never rewrite what
#     is under its .git directory; a bare repository, repo.git/, is not
#     covered);
#   - anything under a mount-relative prefix in data.fsbroker.consent.never.
#
# A grant on a directory above such a path covers it too, so the same two
# settings also hold in the decision, on every request, whatever the grants:
#
#   - every change (write, create, delete, rename: either side) of a path
#     with a never_write segment is denied ("consent: path is under \".git\",
#     which is never writable"); a directory that holds one below it cannot
#     be deleted or renamed as a whole either (the broker decides such an
#     operation again with the entries it would carry along in
#     input.entries);
#   - every request on a path under a never prefix is denied and such an
#     entry is never shown; a delete or rename of a directory above one is
#     denied, and so is a rename onto a path above one (it would put the
#     moved tree's entries there).
#
# Both match case-insensitively (a case-insensitive file system opens .GIT as
# .git), segment by segment for never_write and at a segment boundary for
# never ("proj/dir" covers "proj/dir/x", not "proj/dirx").
package fsbroker.authz

import data.fsbroker.lib

default consentable := set()

consentable := {e.mountPath | some e in input.entries} - hide - withheld if input.operation == "consent"

# The access a files/consent request asks for.
consent_access := access if {
	access := input.params.access
	is_string(access)
} else := "read"

withheld contains e.mountPath if {
	consent_access == "write"
	some e in input.entries
	not e.writable
}

withheld contains e.mountPath if {
	consent_access == "write"
	some e in input.entries
	never_write_path(e.relative)
}

# Every request is decided with this rule: it reads the prefixes straight
# from data (as never_prefixes does; a test holds them equal) rather than
# build the set for every decision.
deny contains {"code": permission_denied, "reason": sprintf("consent: %s is under %q, which is never granted", [role, prefix])} if {
	some prefix in data.fsbroker.consent.never
	is_string(prefix)
	some role, p in lib.request_paths
	lib.covers(lower(prefix), lower(p.mountPath))
}

# The rules that deny changes only, behind one test of the operation: a read
# is decided without evaluating them.
deny contains denial if {
	input.operation in {"write", "create", "delete", "rename"}
	some denial in consent_change_denials
}

# One rule per role of request_paths, as in secrets.rego.
consent_change_denials contains {"code": permission_denied, "reason": sprintf("consent: path is under %q, which is never writable", [name])} if {
	some name in never_write_names_in(input.path.relative)
}

consent_change_denials contains {"code": permission_denied, "reason": sprintf("consent: newPath is under %q, which is never writable", [name])} if {
	some name in never_write_names_in(input.newPath.relative)
}

# The decision on a directory operation as a whole (the broker's subtree
# check): input.entries are the entries a delete or rename of the directory
# at input.path would carry along. None may have a never_write segment.
consent_change_denials contains {"code": permission_denied, "reason": sprintf("consent: the directory holds %q, which is never writable", [name])} if {
	some e in input.entries
	some name in never_write_names_in(e.relative)
}

consent_change_denials contains {"code": permission_denied, "reason": sprintf("consent: %s holds %q, which is never granted", [role, prefix])} if {
	input.operation in {"delete", "rename"}
	some prefix in never_prefixes
	some role, p in lib.request_paths
	lib.beneath(lower(prefix), lower(p.mountPath))
}

hide contains e.mountPath if {
	some prefix in never_prefixes
	some e in input.entries
	lib.covers(lower(prefix), lower(e.mountPath))
}

# never_write_path(rel): a segment of the relative path rel is a never_write
# name.
never_write_path(rel) if {
	some _ in never_write_names_in(rel)
}

# never_write_names_in(rel): the never_write names (as configured) that are a
# segment of the relative path rel (or, for a name with a slash, consecutive
# segments), compared case-insensitively.
never_write_names_in(rel) := {name |
	path := concat("", ["/", lower(rel), "/"])
	some name, needle in never_write_needles
	contains(path, needle)
}

# never_write_needles: each never_write name -> what a path wrapped in
# slashes holds when a segment is that name ("/.git/").
never_write_needles[name] := concat("", ["/", trim(lower(name), "/"), "/"]) if {
	some name in consent_setting("never_write")
}

# The never prefixes in effect: consent_setting("never"), written out.
never_prefixes := {x |
	some x in data.fsbroker.consent.never
	is_string(x)
}

# consent_setting(key): data.fsbroker.consent[key] as a set of strings; the
# default for never_write is {".git"}.
consent_setting(key) := {x |
	some x in object.get(consent_config, key, [])
	is_string(x)
} if {
	key in object.keys(consent_config)
} else := {".git"} if {
	key == "never_write"
} else := set()

consent_config := data.fsbroker.consent if {
	is_object(data.fsbroker.consent)
} else := {}
