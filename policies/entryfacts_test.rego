# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# The hide rules read facts the engine adds to each entry of a batch
# (lowerSlashRelative, joinedMountPath; input.entryFacts says they are
# there) and compute them themselves when input.entryFacts is absent. Both
# ways give the same answers, and with input.entryFacts an entry that lacks
# a fact is hidden.
package fsbroker.authz_test

import data.fsbroker.authz

# with_entry_facts(e): the entry e with the facts the engine adds to it.
with_entry_facts(e) := object.union(e, {
	"lowerSlashRelative": concat("", ["/", lower(e.relative)]),
	"joinedMountPath": trim_suffix(concat("/", [e.mount, e.relative]), "/"),
})

# as_engine_hands_it(query): a batch query as the engine hands it to the
# policy: each entry with its facts, and input.entryFacts.
as_engine_hands_it(query) := object.union(query, {
	"entries": [with_entry_facts(e) | some e in query.entries],
	"entryFacts": true,
})

# Entries of every kind the hide rules tell apart: secrets by name, by
# directory and by path in any case, near misses, the mount itself, and
# mountPaths that disagree with mount and relative.
fact_entries := [
	ro("a.txt"), ro(".env"), ro("Certs/Server.PEM"), ro("x/.SSH/known_hosts"), ro(".git/config"),
	ro(".git/HEAD"), ro("envelope.txt"), ro("id_rsa.pub"), ro("cfg/.Env.Local"), ro("ünï/ÇA.KEY"),
	ro("private/notes.txt"), ro("Vendor/lib.go"), ro(""),
	object.union(ro("a.txt"), {"mountPath": "proj/b.txt"}),
	object.union(ro("d/"), {"mountPath": "proj/d"}),
	ro("d/"),
	object.union(ro("x"), {"mount": "other"}),
]

# The settings under which both ways are compared, as [secrets, consent,
# servers]: the defaults, extra secrets, never prefixes, and a server's
# denied paths.
fact_settings := [
	[data.fsbroker.secrets, data.fsbroker.consent, data.fsbroker.servers],
	[{"extra_patterns": ["*.txt"], "extra_dirs": ["Private"], "allow": [".env"]}, data.fsbroker.consent, data.fsbroker.servers],
	[data.fsbroker.secrets, {"never_write": [".git"], "never": ["proj/vendor"]}, data.fsbroker.servers],
	[data.fsbroker.secrets, data.fsbroker.consent, {"srv": {"deny_paths": ["proj/PRIVATE"]}}],
]

test_entry_facts_hide_as_computing_them if {
	every settings in fact_settings {
		[secrets, consent, servers] := settings
		without := authz.visible with input as visible_query(fact_entries)
			with data.fsbroker.secrets as secrets
			with data.fsbroker.consent as consent
			with data.fsbroker.servers as servers
		given := authz.visible with input as as_engine_hands_it(visible_query(fact_entries))
			with data.fsbroker.secrets as secrets
			with data.fsbroker.consent as consent
			with data.fsbroker.servers as servers
		given == without
		count(without) > 0
		count(without) < count(fact_entries)
	}
}

test_entry_facts_grant_as_computing_them if {
	every access in ["read", "write"] {
		query := object.union(visible_query(fact_entries), {"method": "files/consent", "operation": "consent", "params": {"access": access}})
		without := authz.consentable with input as query
		given := authz.consentable with input as as_engine_hands_it(query)
		given == without
	}
	count(authz.consentable) > 0 with input as object.union(visible_query(fact_entries), {"method": "files/consent", "operation": "consent"})
}

# The defaults hide exactly the secrets and the entries whose mountPath
# disagrees, with the facts as without them.
test_entry_facts_hide_the_secrets_and_the_disagreeing if {
	authz.visible == {"proj/a.txt", "proj/.git/HEAD", "proj/envelope.txt", "proj/private/notes.txt", "proj/Vendor/lib.go", "proj", "proj/d"} with input as as_engine_hands_it(visible_query(fact_entries))
}

# With input.entryFacts, an entry whose mountPath has no join to agree with
# is hidden (one without lowerSlashRelative fails the evaluation, which shows
# nothing: engine.TestEntryWithoutItsFactsShowsNothing).
test_entry_without_its_join_is_hidden if {
	entry := object.remove(with_entry_facts(ro("a.txt")), ["joinedMountPath"])
	count(authz.visible) == 0 with input as object.union(visible_query([entry]), {"entryFacts": true})
	authz.visible == {"proj/a.txt"} with input as as_engine_hands_it(visible_query([ro("a.txt")]))
}

# A pattern list that does not compile hides everything with the facts too.
test_broken_glob_hides_entries_with_facts if {
	count(authz.visible) == 0 with input as as_engine_hands_it(visible_query([ro("a.txt")])) with glob.match as broken_combined_glob
}
