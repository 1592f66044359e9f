# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

package fsbroker.authz_test

import data.fsbroker.authz

mib16 := 16777216

gib := 1073741824

# --- per-write size ---

test_write_exactly_at_limit_allowed if {
	authz.decision.allow with input as write(rw("a.bin"), mib16, write_all)
}

test_write_one_over_limit_denied if {
	d := authz.decision with input as write(rw("a.bin"), mib16 + 1, write_all)
	d.allow == false
	d.code == "QUOTA_EXCEEDED"
	d.reasons == ["quotas: a write of 16777217 bytes is over the limit of 16777216 bytes per write"]
}

test_write_limit_from_data if {
	authz.decision.allow with input as write(rw("a.bin"), 100, write_all) with data.fsbroker.limits.max_write_bytes as 100
	d := authz.decision with input as write(rw("a.bin"), 101, write_all) with data.fsbroker.limits.max_write_bytes as 100
	d.code == "QUOTA_EXCEEDED"
}

test_write_limit_default_without_data if {
	authz.decision.allow with input as write(rw("a.bin"), mib16, write_all) with data.fsbroker.limits as {}
	not authz.decision.allow with input as write(rw("a.bin"), mib16 + 1, write_all) with data.fsbroker.limits as {}
}

test_limits_not_an_object_take_defaults if {
	authz.decision.allow with input as write(rw("a.bin"), mib16, write_all) with data.fsbroker.limits as "big"
	not authz.decision.allow with input as write(rw("a.bin"), mib16 + 1, write_all) with data.fsbroker.limits as "big"
}

test_limit_not_a_number_takes_default if {
	not authz.decision.allow with input as write(rw("a.bin"), mib16 + 1, write_all) with data.fsbroker.limits.max_write_bytes as "1GiB"
}

# --- bytes per day ---

test_day_exactly_at_limit_allowed if {
	doc := with_usage(write(rw("a.bin"), 1000, write_all), gib - 1000, 0)
	authz.decision.allow with input as doc
}

test_day_one_over_limit_denied if {
	doc := with_usage(write(rw("a.bin"), 1001, write_all), gib - 1000, 0)
	d := authz.decision with input as doc
	d.code == "QUOTA_EXCEEDED"
	d.reasons == ["quotas: 1073740824 bytes written today plus 1001 is over the limit of 1073741824 bytes per day"]
}

test_day_limit_from_data if {
	doc := with_usage(write(rw("a.bin"), 10, write_all), 90, 0)
	authz.decision.allow with input as doc with data.fsbroker.limits.max_bytes_per_day as 100
	not authz.decision.allow with input as doc with data.fsbroker.limits.max_bytes_per_day as 99
}

test_day_limit_does_not_touch_reads_or_renames if {
	authz.decision.allow with input as with_usage(read(rw("a.bin"), 10, write_all), gib + 1, 0)
	authz.decision.allow with input as with_usage(rename_target(rw("b"), write_all), gib + 1, 0)
	authz.decision.allow with input as with_usage(rename(rw("a"), rw("b"), write_all), gib + 1, 0)
}

# --- read length, and the obligation ---

test_read_exactly_at_limit_allowed if {
	d := authz.decision with input as read(ro("a.bin"), mib16, read_all)
	d.allow == true
	d.obligations == {"maxReadBytes": mib16}
}

test_read_one_over_limit_denied if {
	d := authz.decision with input as read(ro("a.bin"), mib16 + 1, read_all)
	d.code == "QUOTA_EXCEEDED"
	d.reasons == ["quotas: a read of 16777217 bytes is over the limit of 16777216 bytes per read"]
}

test_read_limit_from_data if {
	d := authz.decision with input as read(ro("a.bin"), 4096, read_all) with data.fsbroker.limits.max_read_bytes as 4096
	d.allow == true
	d.obligations.maxReadBytes == 4096
	not authz.decision.allow with input as read(ro("a.bin"), 4097, read_all) with data.fsbroker.limits.max_read_bytes as 4096
}

test_no_read_obligation_for_other_operations if {
	authz.decision.obligations == {} with input as req("list", ro(""), read_all)
}

# --- watches ---

test_watch_under_limit_allowed if {
	authz.decision.allow with input as with_usage(req("watch", ro("src"), read_all), 0, 63)
}

test_watch_at_limit_denied if {
	d := authz.decision with input as with_usage(req("watch", ro("src"), read_all), 0, 64)
	d.code == "QUOTA_EXCEEDED"
	d.reasons == ["quotas: the server holds 64 watches and the limit is 64"]
}

test_watch_limit_from_data if {
	doc := with_usage(req("watch", ro("src"), read_all), 0, 1)
	authz.decision.allow with input as doc with data.fsbroker.limits.max_watches as 2
	not authz.decision.allow with input as doc with data.fsbroker.limits.max_watches as 1
}

test_watch_count_does_not_touch_other_operations if {
	authz.decision.allow with input as with_usage(read(ro("a"), 1, read_all), 0, 1000)
}
