# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# Hard links: a regular file with more than one link (input.path.nlink > 1)
# is one inode under several names, and the secrets rules judge names. A link
# cfg/settings.txt to cfg/.env, or to a key anywhere else on the same file
# system (outside every root too), would otherwise read as an innocent file.
# So, in every root:
#
#   - a read of a regular file with more than one link is denied
#     ("hardlinks: path is a regular file with 2 links ...");
#   - under a mount-relative prefix in data.fsbroker.hardlinks.allow (segment
#     boundary, as everywhere; compared exactly, so a case variant is not
#     allowed) such a file may be read: for trees that hard-link legitimately
#     (a pnpm store, git clone --local objects);
#   - a rename that would move a multiply-linked file, or a directory (which
#     may hold some), from outside every allowed prefix to under one (or onto
#     a path above one) is denied, so a server cannot carry a linked secret
#     to where it may be read; this one compares case-insensitively, since a
#     case-insensitive file system puts "PNPM/x" where "pnpm/x" is read.
#
# Why every root, not only one that "holds secrets": no root can be known to
# hold none without reading all of it, and the other name of a linked file
# can be anywhere on its file system, outside the roots included.
#
# Only reads disclose content: a write replaces the file (a new inode, the
# other names keep the old content), and a delete or rename of the link
# leaves the content where it was. Where the platform gives no link count,
# nlink is 0 and this rule cannot apply.
package fsbroker.authz

import data.fsbroker.lib

deny contains {"code": permission_denied, "reason": sprintf("hardlinks: path is a regular file with %d links, which may be another file's content under a second name (data.fsbroker.hardlinks.allow)", [input.path.nlink])} if {
	input.operation == "read"
	input.path.nlink > 1
	input.path.type == "file"
	not hardlinks_allowed(input.path.mountPath)
}

deny contains {"code": permission_denied, "reason": sprintf("hardlinks: a rename may not move a %s into %q, where multiply-linked files may be read", [hardlinks_carrier(input.path), prefix])} if {
	input.operation == "rename"
	some prefix in hardlinks_allow_prefixes
	hardlinks_carrier(input.path)
	not hardlinks_allowed(input.path.mountPath)
	hardlinks_reaches(input.newPath.mountPath, prefix)
}

# hardlinks_allowed(mountPath): mountPath is under an allowed prefix.
hardlinks_allowed(mountPath) if {
	some prefix in hardlinks_allow_prefixes
	lib.covers(prefix, mountPath)
}

# hardlinks_carrier(p): what p is, when a rename of it may carry a
# multiply-linked file: a directory, or a regular file with several links.
hardlinks_carrier(p) := "directory" if {
	p.type == "directory"
} else := "multiply-linked file" if {
	p.type == "file"
	p.nlink > 1
}

# hardlinks_reaches(target, prefix): what is moved to target lands under
# prefix: target is under it, or a directory above it.
hardlinks_reaches(target, prefix) if lib.covers(lower(prefix), lower(target))

hardlinks_reaches(target, prefix) if lib.beneath(lower(prefix), lower(target))

# The allowed prefixes: data.fsbroker.hardlinks.allow, strings only.
hardlinks_allow_prefixes := {prefix |
	some prefix in object.get(hardlinks_config, "allow", [])
	is_string(prefix)
}

hardlinks_config := data.fsbroker.hardlinks if {
	is_object(data.fsbroker.hardlinks)
} else := {}
