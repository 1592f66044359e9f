# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# Quotas (QUOTA_EXCEEDED), set in data.fsbroker.limits; the limits in effect
# are data.fsbroker.lib's (lib.rego: a knob that is unset or not a number
# takes its default, and a server's own max_write_bytes applies as
# overrides.rego says):
#
#   max_write_bytes    16777216    decoded bytes per files/write request
#   max_bytes_per_day  1073741824  bytes a server may write per day (UTC):
#                                  usage.bytesWrittenToday + bytes, checked
#                                  on files/write (a rename writes nothing)
#   max_read_bytes     16777216    length of one files/read; also the
#                                  maxReadBytes obligation of every read
#   max_watches        64          watches a server may hold; a files/watch
#                                  is refused when it already holds as many
#
# Exactly at a limit is allowed; one byte (or watch) over is denied.
package fsbroker.authz

import data.fsbroker.lib

deny contains {"code": quota_exceeded, "reason": sprintf("quotas: a write of %d bytes is over the limit of %d bytes per write", [input.bytes, lib.max_write_bytes])} if {
	input.operation == "write"
	input.bytes > lib.max_write_bytes
}

deny contains {"code": quota_exceeded, "reason": sprintf("quotas: %d bytes written today plus %d is over the limit of %d bytes per day", [input.usage.bytesWrittenToday, input.bytes, lib.max_bytes_per_day])} if {
	input.method == "files/write"
	input.operation == "write"
	input.usage.bytesWrittenToday + input.bytes > lib.max_bytes_per_day
}

deny contains {"code": quota_exceeded, "reason": sprintf("quotas: a read of %d bytes is over the limit of %d bytes per read", [input.bytes, lib.max_read_bytes])} if {
	input.operation == "read"
	input.bytes > lib.max_read_bytes
}

deny contains {"code": quota_exceeded, "reason": sprintf("quotas: the server holds %d watches and the limit is %d", [input.usage.watches, lib.max_watches])} if {
	input.operation == "watch"
	input.usage.watches >= lib.max_watches
}

obligations["maxReadBytes"] := lib.max_read_bytes if input.operation == "read"
