package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// appendJSON appends in's JSON encoding to b: byte for byte what json.Marshal
// writes for a PolicyInput (TestPolicyInputEncodingMatchesMarshal), without
// its reflection. Every request's input is encoded (the decision cache's key
// is the encoding), and a listing's batch holds an entry per listed name.
func (in *PolicyInput) appendJSON(b []byte) (_ []byte, err error) {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(in.Version), 10)
	b = appendStringField(b, "method", in.Method)
	b = appendStringField(b, "operation", in.Operation)
	b = append(b, `,"server":{"id":`...)
	b = jsonrpc.AppendString(b, in.Server.ID)
	b = appendStringField(b, "name", in.Server.Name)
	b = appendStringField(b, "version", in.Server.Version)
	b = append(b, `,"pinned":`...)
	b = strconv.AppendBool(b, in.Server.Pinned)
	b = append(b, `},"session":{"id":`...)
	b = jsonrpc.AppendString(b, in.Session.ID)
	b = appendStringField(b, "protocolVersion", in.Session.ProtocolVersion)
	b = appendStringField(b, "transport", in.Session.Transport)
	b = append(b, '}')
	if in.Path != nil {
		b = append(b, `,"path":`...)
		b = in.Path.appendJSON(b)
	}
	if in.NewPath != nil {
		b = append(b, `,"newPath":`...)
		b = in.NewPath.appendJSON(b)
	}
	if len(in.Entries) > 0 {
		b = append(b, `,"entries":[`...)
		for i := range in.Entries {
			if i > 0 {
				b = append(b, ',')
			}
			b = in.Entries[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	if len(in.Params) > 0 {
		b = append(b, `,"params":`...)
		if b, err = appendRawJSON(b, in.Params); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, in.Bytes, 10)
	b = append(b, `,"grants":`...)
	if in.Grants == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, g := range in.Grants {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"access":`...)
			b = jsonrpc.AppendString(b, g.Access)
			b = appendStringField(b, "path", g.Path)
			b = appendStringField(b, "granted", g.Granted)
			b = appendStringField(b, "expires", g.Expires)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"usage":{"bytesWrittenToday":`...)
	b = strconv.AppendInt(b, in.Usage.BytesWrittenToday, 10)
	b = append(b, `,"watches":`...)
	b = strconv.AppendInt(b, int64(in.Usage.Watches), 10)
	b = append(b, `},"time":{"rfc3339":`...)
	b = jsonrpc.AppendString(b, in.Time.RFC3339)
	b = append(b, `,"unixNano":`...)
	b = strconv.AppendInt(b, in.Time.UnixNano, 10)
	return append(b, '}', '}'), nil
}

// appendJSON appends p's JSON encoding to b, as json.Marshal writes it.
func (p *InputPath) appendJSON(b []byte) []byte {
	b = append(b, `{"requested":`...)
	b = jsonrpc.AppendString(b, p.Requested)
	b = appendStringField(b, "canonical", p.Canonical)
	b = appendStringField(b, "root", p.Root)
	b = appendStringField(b, "mount", p.Mount)
	b = appendStringField(b, "relative", p.Relative)
	b = appendStringField(b, "mountPath", p.MountPath)
	b = append(b, `,"writable":`...)
	b = strconv.AppendBool(b, p.Writable)
	b = append(b, `,"exists":`...)
	b = strconv.AppendBool(b, p.Exists)
	b = appendStringField(b, "type", p.Type)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, p.Size, 10)
	b = append(b, `,"nlink":`...)
	b = strconv.AppendUint(b, p.Nlink, 10)
	b = append(b, `,"hidden":`...)
	b = strconv.AppendBool(b, p.Hidden)
	return append(b, '}')
}

// appendStringField appends ,"name":"value".
func appendStringField(b []byte, name, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return jsonrpc.AppendString(b, value)
}

// appendRawJSON appends raw as json.Marshal writes a json.RawMessage:
// compacted, with <, >, &, U+2028 and U+2029 escaped. raw must be valid JSON.
func appendRawJSON(b []byte, raw json.RawMessage) ([]byte, error) {
	start := len(b)
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, fmt.Errorf("policy input params: %w", err)
	}
	b = buf.Bytes()
	if !bytes.ContainsAny(b[start:], "<>&\u2028\u2029") {
		return b, nil
	}
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, b[start:])
	return append(b[:start], escaped.Bytes()...), nil
}
