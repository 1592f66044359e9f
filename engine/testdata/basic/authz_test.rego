package fsbroker.authz_test

import data.fsbroker.authz

test_hidden_denied if {
	not authz.allow with input as {"path": {"hidden": true, "mountPath": "p/.env"}, "grants": [{"path": "p"}]}
}

test_granted_read_allowed if {
	authz.allow with input as {
		"operation": "read",
		"path": {"hidden": false, "mountPath": "p/a.txt", "writable": false},
		"grants": [{"path": "p"}],
	}
}
