# Consent: which of the paths a server asks for in files/consent may be
# granted at all. The broker queries data.fsbroker.authz.consentable with
# operation "consent", method "files/consent", the requested paths (resolved,
# inside the roots) in input.entries and the access asked in
# input.params.access ("read" when absent). Only the paths in the result are
# put to the consent provider (auto, the person at the prompt, a command);
# what it approves becomes a grant.
#
# Never granted:
#   - anything a listing would not show (every hide rule: secrets, per-server
#     deny_paths, malformed paths), so a person is never asked to approve a
#     path the policies keep hidden;
#   - write access in a read-only root;
#   - write access under a path segment in data.fsbroker.consent.never_write
#     (default [".git"]: a server may read a repository, never rewrite its
#     history or hooks);
#   - anything under a mount-relative prefix in data.fsbroker.consent.never.
package fsbroker.authz

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
	never := consent_setting("never_write")
	some e in input.entries
	some segment in split(e.relative, "/")
	segment in never
}

withheld contains e.mountPath if {
	prefixes := consent_setting("never")
	some e in input.entries
	some prefix in prefixes
	covers(prefix, e.mountPath)
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
