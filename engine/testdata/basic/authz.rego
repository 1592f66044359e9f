# A small policy set for the engine's tests (the real defaults live in policies/).
package fsbroker.authz

write_ops := {"write", "create", "delete", "rename"}

default allow := false

allow if {
	count(deny) == 0
	some g in input.grants
	covers(g.path, input.path.mountPath)
}

covers(granted, p) if granted == p

covers(granted, p) if startswith(p, concat("", [granted, "/"]))

deny contains "hidden files are not served" if input.path.hidden

deny contains "the root is read-only" if {
	input.operation in write_ops
	not input.path.writable
}

default code := ""

code := "PERMISSION_DENIED" if not allow

decision := {
	"allow": allow,
	"code": code,
	"reasons": deny,
	"obligations": {"maxBytes": data.fsbroker.limits.maxBytes},
}

visible contains e.mountPath if {
	some e in input.entries
	not e.hidden
}
