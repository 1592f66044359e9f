// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A protocol is how fsbench talks to one kind of target:
//
//   - filesProto: fsbroker's wire. The target is the MCP client side (it
//     sends initialize); fsbench plays the MCP server and sends files/read,
//     files/write and files/list (fsbroker and fsbaseline).
//   - toolsProto: an MCP filesystem server (the reference TypeScript one,
//     mark3labs', and fsbroker serve and fsbaseline --tools in the serve
//     workloads). fsbench plays the MCP client: initialize, then tools/call
//     of the server's read tool (read_text_file, or mark3labs' read_file),
//     write_file and list_directory.
type protocol interface {
	// handshake completes the session start on c and returns the time from
	// the child's start to initialize: the broker's initialize request, or
	// a server's result to fsbench's initialize.
	handshake(c *child) (time.Duration, error)
	// readOp reads paths (relative to the tree's root) of size bytes each.
	readOp(paths []string, size int) op
	// writeOp writes content to paths.
	writeOp(paths []string, content string) op
	// listOp lists dirs in turn, each of which holds n files.
	listOp(dirs []string, n int) op
	// pageOp lists dir page by page, limit entries a page; nil when the
	// protocol has no paging.
	pageOp(dir string, limit int) *pageOp
}

// op is one kind of request of a run.
type op struct {
	// req appends the i-th request of a run, with id, to buf.
	req func(buf []byte, id int64, i int) []byte
	// check checks a result: cheaply (a skim), or in full (decoded) for the
	// first reply of a run.
	check func(result []byte, full bool) error
}

// pageOp is a paged listing: each request continues from the previous
// page's cursor.
type pageOp struct {
	req   func(buf []byte, id int64, cursor string) []byte
	parse func(result []byte) (entries int, next string, err error)
}

// envelope returns the parts of a JSON-RPC message that fsbench looks at.
// reply is false for requests and notifications; id is -1 for an id that
// is not a number (fsbench's ids are).
func envelope(line []byte) (id int64, result, rpcErr []byte, reply bool, err error) {
	id, reply = -1, true
	err = members(line, func(k, v []byte) bool {
		switch string(k) {
		case "id":
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				id = n
			}
		case "method":
			reply = false
		case "result":
			result = v
		case "error":
			rpcErr = v
		}
		return true
	})
	if err != nil {
		return 0, nil, nil, false, fmt.Errorf("not a JSON-RPC message: %.200q", line)
	}
	return id, result, rpcErr, reply, nil
}

// requestLines pre-encodes one request per params: what comes before the id
// (the same for all) and after it.
type requestLines struct {
	suffixes [][]byte
}

const requestPrefix = `{"jsonrpc":"2.0","id":`

func newRequestLines(method string, params []any) *requestLines {
	r := &requestLines{}
	for _, p := range params {
		b, err := json.Marshal(p)
		if err != nil {
			panic(err)
		}
		r.suffixes = append(r.suffixes, []byte(`,"method":"`+method+`","params":`+string(b)+"}\n"))
	}
	return r
}

func (r *requestLines) req(buf []byte, id int64, i int) []byte {
	buf = append(buf, requestPrefix...)
	buf = strconv.AppendInt(buf, id, 10)
	return append(buf, r.suffixes[i%len(r.suffixes)]...)
}

// filesProto is fsbroker's wire; paths are mount-relative.
type filesProto struct {
	mount string
}

// initializeRequest is the part of the broker's initialize request fsbench
// reads.
type initializeRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Roots struct {
				FilesystemBrokering bool `json:"filesystemBrokering"`
			} `json:"roots"`
		} `json:"capabilities"`
	} `json:"params"`
}

func (p filesProto) handshake(c *child) (time.Duration, error) {
	line, err := c.readLine()
	if err != nil {
		return 0, err
	}
	took := time.Since(c.started)
	var init initializeRequest
	if err := json.Unmarshal(line, &init); err != nil || init.Method != "initialize" || len(init.ID) == 0 {
		return 0, fmt.Errorf("first message is not an initialize request: %.300s", line)
	}
	if !init.Params.Capabilities.Roots.FilesystemBrokering {
		return 0, errors.New("initialize does not advertise roots.filesystemBrokering")
	}
	reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": init.ID, "result": map[string]any{
		"protocolVersion": init.Params.ProtocolVersion,
		"capabilities":    map[string]any{},
		"serverInfo":      map[string]any{"name": "fsbench", "version": "dev"},
	}})
	if err := c.send(append(reply, '\n')); err != nil {
		return 0, err
	}
	for {
		line, err := c.readLine()
		if err != nil {
			return 0, fmt.Errorf("waiting for notifications/initialized: %w", err)
		}
		var m struct{ Method string }
		if json.Unmarshal(line, &m) == nil && m.Method == "notifications/initialized" {
			return took, nil
		}
	}
}

func (p filesProto) path(rel string) string { return p.mount + "/" + rel }

func (p filesProto) readOp(paths []string, size int) op {
	var params []any
	for _, rel := range paths {
		params = append(params, map[string]any{"path": p.path(rel)})
	}
	lines := newRequestLines("files/read", params)
	sizeText := strconv.Itoa(size)
	return op{req: lines.req, check: func(res []byte, full bool) error {
		if full {
			var r filesReadResult
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			if r.Content == nil || len(*r.Content) != size || r.Size != int64(size) || r.Length != int64(size) || !r.EOF || r.Encoding != "utf-8" {
				return fmt.Errorf("files/read result is not the whole %d-byte file: %.200s", size, res)
			}
			return nil
		}
		if string(member(res, "length")) != sizeText || len(member(res, "content")) < size+2 {
			return fmt.Errorf("files/read result is not the whole %d-byte file: %.200s", size, res)
		}
		return nil
	}}
}

// filesReadResult is the result of files/read (docs/protocol.md), as fsbench checks it.
type filesReadResult struct {
	Content  *string `json:"content"`
	Encoding string  `json:"encoding"`
	Size     int64   `json:"size"`
	Offset   int64   `json:"offset"`
	Length   int64   `json:"length"`
	EOF      bool    `json:"eof"`
}

func (p filesProto) writeOp(paths []string, content string) op {
	var params []any
	for _, rel := range paths {
		params = append(params, map[string]any{"path": p.path(rel), "content": content})
	}
	lines := newRequestLines("files/write", params)
	sizeText := strconv.Itoa(len(content))
	return op{req: lines.req, check: func(res []byte, full bool) error {
		if full {
			var r struct {
				Path string `json:"path"`
				Size int    `json:"size"`
				Etag string `json:"etag"`
			}
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			if r.Size != len(content) || r.Etag == "" || r.Path == "" {
				return fmt.Errorf("files/write result: %.200s", res)
			}
			return nil
		}
		if string(member(res, "size")) != sizeText {
			return fmt.Errorf("files/write result: %.200s", res)
		}
		return nil
	}}
}

// listEntries is a files/list result.
type listEntries struct {
	Entries    []listEntry `json:"entries"`
	NextCursor string      `json:"nextCursor"`
}

// listEntry is one entry of a files/list result.
type listEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

func (p filesProto) listOp(dirs []string, n int) op {
	var params []any
	for _, dir := range dirs {
		params = append(params, map[string]any{"path": p.path(dir)})
	}
	lines := newRequestLines("files/list", params)
	return op{req: lines.req, check: func(res []byte, full bool) error {
		if full {
			var r listEntries
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			if len(r.Entries) != n || r.NextCursor != "" {
				return fmt.Errorf("files/list: %d entries (next cursor %q), want all %d", len(r.Entries), r.NextCursor, n)
			}
			if !slices.IsSortedFunc(r.Entries, func(a, b listEntry) int { return strings.Compare(a.Name, b.Name) }) {
				return errors.New("files/list: entries not sorted")
			}
			return nil
		}
		if got := bytes.Count(member(res, "entries"), []byte(`"name":`)); got != n {
			return fmt.Errorf("files/list: %d entries, want %d", got, n)
		}
		return nil
	}}
}

func (p filesProto) pageOp(dir string, limit int) *pageOp {
	path, _ := json.Marshal(p.path(dir))
	head := `,"method":"files/list","params":{"path":` + string(path) + `,"limit":` + strconv.Itoa(limit)
	return &pageOp{
		req: func(buf []byte, id int64, cursor string) []byte {
			buf = append(buf, requestPrefix...)
			buf = strconv.AppendInt(buf, id, 10)
			buf = append(buf, head...)
			if cursor != "" {
				c, _ := json.Marshal(cursor)
				buf = append(append(buf, `,"cursor":`...), c...)
			}
			return append(buf, "}}\n"...)
		},
		parse: func(res []byte) (int, string, error) {
			n := bytes.Count(member(res, "entries"), []byte(`"name":`))
			var next string
			if raw := member(res, "nextCursor"); raw != nil {
				if err := json.Unmarshal(raw, &next); err != nil {
					return 0, "", fmt.Errorf("files/list nextCursor: %v", err)
				}
			}
			return n, next, nil
		},
	}
}

// toolsProto is an MCP filesystem server's tools; paths are absolute.
type toolsProto struct {
	root     string
	readTool string // the tool that reads a whole text file, given its path
}

// toolsVersion is the MCP version fsbench offers a server.
const toolsVersion = "2025-06-18"

func (p toolsProto) handshake(c *child) (time.Duration, error) {
	init, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": toolsVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "fsbench", "version": "dev"},
	}})
	if err := c.send(append(init, '\n')); err != nil {
		return 0, err
	}
	for {
		line, err := c.readLine()
		if err != nil {
			return 0, err
		}
		id, result, rpcErr, reply, err := envelope(line)
		if err != nil {
			return 0, err
		}
		if !reply || id != 0 {
			continue
		}
		took := time.Since(c.started)
		if rpcErr != nil || result == nil {
			return 0, fmt.Errorf("initialize failed: %.300s", line)
		}
		return took, c.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	}
}

func (p toolsProto) path(rel string) string { return p.root + "/" + rel }

// toolLines pre-encodes tools/call requests of tool with each arguments.
func toolLines(tool string, args []map[string]any) *requestLines {
	var params []any
	for _, a := range args {
		params = append(params, map[string]any{"name": tool, "arguments": a})
	}
	return newRequestLines("tools/call", params)
}

// toolResult is a tools/call result.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

// toolCheck checks a tools/call result: not an error, and then check on
// its decoded text (full) or its raw content member.
func toolCheck(check func(text []byte, full bool) error) func([]byte, bool) error {
	return func(res []byte, full bool) error {
		if full {
			var r toolResult
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			if r.IsError || len(r.Content) == 0 {
				return fmt.Errorf("tool error: %.300s", res)
			}
			return check([]byte(r.Content[0].Text), true)
		}
		if string(member(res, "isError")) == "true" {
			return fmt.Errorf("tool error: %.300s", res)
		}
		return check(member(res, "content"), false)
	}
}

func (p toolsProto) readOp(paths []string, size int) op {
	var args []map[string]any
	for _, rel := range paths {
		args = append(args, map[string]any{"path": p.path(rel)})
	}
	return op{req: toolLines(p.readTool, args).req, check: toolCheck(func(text []byte, full bool) error {
		if full && len(text) != size || !full && len(text) < size {
			return fmt.Errorf("%s: %d bytes, want %d", p.readTool, len(text), size)
		}
		return nil
	})}
}

func (p toolsProto) writeOp(paths []string, content string) op {
	var args []map[string]any
	for _, rel := range paths {
		args = append(args, map[string]any{"path": p.path(rel), "content": content})
	}
	return op{req: toolLines("write_file", args).req, check: toolCheck(func(text []byte, full bool) error {
		if full && !bytes.HasPrefix(text, []byte("Successfully")) {
			return fmt.Errorf("write_file: %.200s", text)
		}
		return nil
	})}
}

func (p toolsProto) listOp(dirs []string, n int) op {
	var args []map[string]any
	for _, dir := range dirs {
		args = append(args, map[string]any{"path": p.path(dir)})
	}
	return op{req: toolLines("list_directory", args).req, check: toolCheck(func(text []byte, full bool) error {
		if got := bytes.Count(text, []byte("[FILE]")); got != n {
			return fmt.Errorf("list_directory: %d files, want %d", got, n)
		}
		return nil
	})}
}

func (p toolsProto) pageOp(string, int) *pageOp { return nil }
