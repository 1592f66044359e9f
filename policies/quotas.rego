# Quotas (QUOTA_EXCEEDED), set in data.fsbroker.limits; a knob that is unset
# or not a number takes its default:
#
#   max_write_bytes    16777216    decoded bytes per files/write request (a
#                                  server's data.fsbroker.servers entry may
#                                  override it, see overrides.rego)
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

# The defaults of data.fsbroker.limits (policies/data.json spells them out).
default_limits := {
	"max_write_bytes": 16777216,
	"max_bytes_per_day": 1073741824,
	"max_read_bytes": 16777216,
	"max_watches": 64,
}

deny contains {"code": quota_exceeded, "reason": sprintf("quotas: a write of %d bytes is over the limit of %d bytes per write", [input.bytes, max_write_bytes])} if {
	input.operation == "write"
	input.bytes > max_write_bytes
}

deny contains {"code": quota_exceeded, "reason": sprintf("quotas: %d bytes written today plus %d is over the limit of %d bytes per day", [input.usage.bytesWrittenToday, input.bytes, max_bytes_per_day])} if {
	input.method == "files/write"
	input.operation == "write"
	input.usage.bytesWrittenToday + input.bytes > max_bytes_per_day
}

deny contains {"code": quota_exceeded, "reason": sprintf("quotas: a read of %d bytes is over the limit of %d bytes per read", [input.bytes, max_read_bytes])} if {
	input.operation == "read"
	input.bytes > max_read_bytes
}

deny contains {"code": quota_exceeded, "reason": sprintf("quotas: the server holds %d watches and the limit is %d", [input.usage.watches, max_watches])} if {
	input.operation == "watch"
	input.usage.watches >= max_watches
}

obligations["maxReadBytes"] := max_read_bytes if input.operation == "read"

# The limits in effect: data.fsbroker.limits[name] when it is a number, else
# the default. (Written out per limit rather than through a helper function:
# a read evaluates max_read_bytes on every decision.)
#
# A server's own max_write_bytes (overrides.rego) replaces the global limit
# when the server's id is pinned by the operator; for a name the server only
# declared, it may lower the limit but never raise it (any server can declare
# any name).
max_write_bytes := server_config.max_write_bytes if {
	is_number(server_config.max_write_bytes)
	server_limit_applies(server_config.max_write_bytes, global_max_write_bytes)
} else := global_max_write_bytes

server_limit_applies(_, _) if input.server.pinned == true

server_limit_applies(limit, global) if limit <= global

global_max_write_bytes := data.fsbroker.limits.max_write_bytes if {
	is_number(data.fsbroker.limits.max_write_bytes)
} else := default_limits.max_write_bytes

max_bytes_per_day := value if {
	value := data.fsbroker.limits.max_bytes_per_day
	is_number(value)
} else := default_limits.max_bytes_per_day

max_read_bytes := value if {
	value := data.fsbroker.limits.max_read_bytes
	is_number(value)
} else := default_limits.max_read_bytes

max_watches := value if {
	value := data.fsbroker.limits.max_watches
	is_number(value)
} else := default_limits.max_watches
