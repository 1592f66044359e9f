# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# The helpers of data.fsbroker.lib, called as an operator's files call them.
# (They run with the built-in set's tests, whose input builders they use.)
package fsbroker.authz_test

import data.fsbroker.lib

test_lib_covers_at_a_segment_boundary if {
	lib.covers("proj", "proj")
	lib.covers("proj/dir/", "proj/dir/x")
	not lib.covers("proj/dir", "proj/dirx")
	not lib.covers("", "proj")
	lib.beneath("proj/dir/x", "proj/dir")
	not lib.beneath("proj/dir", "proj/dir")
	lib.dir_prefix("proj/dir/") == "proj/dir/"
	lib.dir_prefix("proj/dir") == "proj/dir/"
}

test_lib_request_paths if {
	lib.request_paths == {"path": with_facts(ro("a"))} with input as read(ro("a"), 1, [])
	lib.request_paths == {"path": with_facts(rw("a")), "newPath": with_facts(rw("b"))} with input as rename(rw("a"), rw("b"), [])
	count(lib.request_paths) == 0 with input as roots_list
}

test_lib_covered_by_a_live_grant if {
	lib.covered(ro("src/a.go"), {"read"}) with input as read(ro("src/a.go"), 1, [grant("read", "proj/src")])
	not lib.covered(ro("srcx/a.go"), {"read"}) with input as read(ro("srcx/a.go"), 1, [grant("read", "proj/src")])
	not lib.covered(ro("src/a.go"), {"write"}) with input as read(ro("src/a.go"), 1, [grant("read", "proj/src")])
	lib.covered(ro("src/a.go"), {"read"}) with input as read(ro("src/a.go"), 1, [expiring("read", "proj", now)])
	not lib.covered(ro("src/a.go"), {"read"}) with input as read(ro("src/a.go"), 1, [expiring("read", "proj", "2025-06-01T11:59:59Z")])
}

test_lib_limits_from_data if {
	lib.max_read_bytes == 16777216
	lib.max_read_bytes == 7 with data.fsbroker.limits as {"max_read_bytes": 7}
	lib.max_watches == 64 with data.fsbroker.limits as {"max_watches": "many"}
	lib.max_bytes_per_day == 1073741824
	lib.max_write_bytes == 16777216 with input as base_input
}

test_lib_server_config if {
	doc := with_server(base_input, "builder", true)
	lib.server_config == {"read_only": true} with input as doc with data.fsbroker.servers as {"builder": {"read_only": true}}
	lib.server_config == {} with input as doc with data.fsbroker.servers as {"other": {"read_only": true}}
	lib.max_write_bytes == 99999999 with input as doc with data.fsbroker.servers as {"builder": {"max_write_bytes": 99999999}}
}

test_lib_secret_path_and_rules if {
	lib.secret_path("a/.ENV")
	not lib.secret_path("envelope.txt")
	lib.secret_rules("certs/a.pem") == {"name pattern \"*.pem\""}
	lib.secret_path("a/store.p12") with data.fsbroker.secrets as {"extra_patterns": ["*.p12"]}
	not lib.secret_path("a/server.pem") with data.fsbroker.secrets as {"allow": ["*.pem"]}
}
