# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# Builders of policy inputs for the tests. Every input they make satisfies
# schema/policy-input.json (policies_test.go validates schema_samples, built
# with them, against it).
package fsbroker.authz_test

# The decision time of every test input.
now := "2025-06-01T12:00:00.000000000Z"

now_unix_nano := time.parse_rfc3339_ns(now)

# The root of the mount "proj"; read-only unless a test says otherwise.
proj_root := "/home/user/proj"

# in_root(root, mount, rel, writable): the path rel of the root at root,
# mounted as mount, as the broker describes it (a regular file, or the
# directory when rel is the root itself).
in_root(root, mount, rel, writable) := {
	"requested": mount_path(mount, rel),
	"canonical": canonical(root, rel),
	"root": root,
	"mount": mount,
	"relative": rel,
	"mountPath": mount_path(mount, rel),
	"writable": writable,
	"exists": true,
	"type": file_type(rel),
	"size": 0,
	"nlink": 1,
	"hidden": hidden(rel),
}

# with_facts(p): p as the engine hands input.path and input.newPath to the
# policy: with its ancestors, its mountPath cut before each of its slashes.
with_facts(p) := object.union(p, {"ancestors": [substring(p.mountPath, 0, i) | some i in indexof_n(p.mountPath, "/")]})

# grants_by_path(grants): the fact the engine adds to every input: the grants
# by path, each path without one trailing slash.
grants_by_path(grants) := {path: [g | some g in grants; trim_suffix(g.path, "/") == path] |
	some grant in grants
	path := trim_suffix(grant.path, "/")
}

# with_grants(doc, grants): doc with these grants (and their index).
with_grants(doc, grants) := object.union(doc, {"grants": grants, "grantsByPath": grants_by_path(grants)})

mount_path(mount, "") := mount

mount_path(mount, rel) := concat("/", [mount, rel]) if rel != ""

canonical(root, "") := root

canonical(root, rel) := concat("", [trim_suffix(root, "/"), "/", rel]) if rel != ""

file_type("") := "directory"

file_type(rel) := "file" if rel != ""

hidden(rel) if {
	some segment in split(rel, "/")
	startswith(segment, ".")
} else := false

# ro(rel) and rw(rel): rel in proj, a read-only or a writable root.
ro(rel) := in_root(proj_root, "proj", rel, false)

rw(rel) := in_root(proj_root, "proj", rel, true)

# grant(access, path) never expires; expiring(access, path, t) expires at t.
grant(access, path) := expiring(access, path, "")

expiring(access, path, expires) := {
	"access": access,
	"path": path,
	"granted": "2025-05-01T00:00:00Z",
	"expires": expires,
}

# The parts every input has.
base_input := {
	"version": 1,
	"method": "files/read",
	"operation": "read",
	"server": {"id": "srv", "name": "srv", "version": "1.0.0", "pinned": false},
	"session": {"id": "s-1", "protocolVersion": "2025-06-18", "transport": "stdio"},
	"params": {},
	"bytes": 0,
	"grants": [],
	"grantsByPath": {},
	"usage": {"bytesWrittenToday": 0, "watches": 0},
	"time": {"rfc3339": now, "unixNano": now_unix_nano},
}

# The method of each operation (a rename's target comes as a write from
# files/rename; see rename_target).
method_of := {
	"read": "files/read",
	"list": "files/list",
	"watch": "files/watch",
	"write": "files/write",
	"create": "files/create",
	"delete": "files/delete",
	"rename": "files/rename",
}

# req(operation, path, grants): a request on one path.
req(operation, path, grants) := with_grants(object.union(base_input, {
	"method": method_of[operation],
	"operation": operation,
	"path": with_facts(path),
}), grants)

# rename(from, to, grants): the decision on the source of files/rename.
rename(from, to, grants) := object.union(req("rename", from, grants), {"newPath": with_facts(to)})

# rename_target(to, grants): the decision on its target, a write.
rename_target(to, grants) := object.union(req("write", to, grants), {"method": "files/rename"})

# write(path, n, grants): files/write of n bytes.
write(path, n, grants) := object.union(req("write", path, grants), {"bytes": n})

# read(path, n, grants): files/read of at most n bytes.
read(path, n, grants) := object.union(req("read", path, grants), {"bytes": n})

# with_usage(doc, written, watches): doc with these usage counters.
with_usage(doc, written, watches) := object.union(doc, {"usage": {"bytesWrittenToday": written, "watches": watches}})

# with_server(doc, id, pinned): doc from the server id.
with_server(doc, id, pinned) := object.union(doc, {"server": {"id": id, "name": id, "version": "1.0.0", "pinned": pinned}})

# carried(doc, entries): doc decided again with the entries a delete or
# rename of its directory carries along (the broker's subtree check).
carried(doc, entries) := object.union(doc, {"entries": entries})

# with_nlink(p, n): p with n hard links.
with_nlink(p, n) := object.union(p, {"nlink": n})

# as_dir(p): p as a directory.
as_dir(p) := object.union(p, {"type": "directory"})

# roots_list: roots/list (no path).
roots_list := object.union(base_input, {"method": "roots/list", "operation": "list"})

# visible_query(entries): which of entries may be shown (files/list).
visible_query(entries) := with_grants(object.union(base_input, {
	"method": "files/list",
	"operation": "visible",
	"entries": entries,
}), [grant("read", "proj")])

# A read grant and a write grant on the whole of proj.
read_all := [grant("read", "proj")]

write_all := [grant("write", "proj")]

# Inputs of each shape the tests use, for the schema check in
# policies_test.go.
schema_samples := [
	req("read", ro("src/main.go"), read_all),
	req("list", ro(""), read_all),
	write(rw("a.txt"), 10, [expiring("write", "proj/a.txt", "2025-06-02T00:00:00Z")]),
	rename(rw("a"), rw("b"), write_all),
	rename_target(rw("b"), write_all),
	with_usage(with_server(req("watch", ro("src"), read_all), "pinned-id", true), 5, 3),
	roots_list,
	visible_query([ro("a.txt"), ro(".env")]),
	req("create", in_root("/", "slash", "etc/x", true), []),
	carried(req("delete", as_dir(rw("repo")), write_all), [as_dir(rw("repo/.git")), with_nlink(rw("repo/.git/HEAD"), 2)]),
]
