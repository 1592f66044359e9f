// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"encoding/base64"
	"path"
	"strings"
)

// mediaTypes are the extensions read_media_file knows; everything else is
// application/octet-stream (no content sniffing).
var mediaTypes = map[string]string{
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".gif":  "image/gif",
	".webp": "image/webp",
	".bmp":  "image/bmp",
	".svg":  "image/svg+xml",
	".mp3":  "audio/mpeg",
	".wav":  "audio/wav",
	".ogg":  "audio/ogg",
	".flac": "audio/flac",
}

// MediaType returns the MIME type read_media_file gives a file: from the
// lower-cased extension of its real path (Node's path.extname: a leading
// dot alone is no extension).
func MediaType(realPath string) string {
	if t, ok := mediaTypes[strings.ToLower(jsExtname(realPath))]; ok {
		return t
	}
	return "application/octet-stream"
}

// jsExtname is Node's path.posix.extname: from the last dot of the last
// element, unless that dot is its first character.
func jsExtname(p string) string {
	base := path.Base(strings.TrimRight(p, "/"))
	dot := strings.LastIndexByte(base, '.')
	if dot <= 0 || base == ".." {
		return ""
	}
	return base[dot:]
}

// MediaContent is read_media_file's content item: an image or audio item
// with the base64 data, or an embedded resource (uri of the real path,
// application/octet-stream, base64 blob) for any other type.
func MediaContent(realPath string, data []byte) any {
	b64 := base64.StdEncoding.EncodeToString(data)
	mime := MediaType(realPath)
	switch {
	case strings.HasPrefix(mime, "image/"):
		return MediaItem{Type: "image", Data: b64, MIMEType: mime}
	case strings.HasPrefix(mime, "audio/"):
		return MediaItem{Type: "audio", Data: b64, MIMEType: mime}
	}
	return ResourceItem{Type: "resource", Resource: BlobResource{URI: FileURL(realPath), MIMEType: mime, Blob: b64}}
}

// MediaResult is read_media_file's result: the item as content and as
// structuredContent ({"content":[item]}).
func MediaResult(realPath string, data []byte) ToolResult {
	item := MediaContent(realPath, data)
	return ToolResult{Content: []any{item}, StructuredContent: map[string]any{"content": []any{item}}}
}

// MediaItem is an image or audio content item.
type MediaItem struct {
	Type     string `json:"type"`
	Data     string `json:"data"`
	MIMEType string `json:"mimeType"`
}

// ResourceItem is an embedded-resource content item.
type ResourceItem struct {
	Type     string       `json:"type"`
	Resource BlobResource `json:"resource"`
}

// BlobResource is the resource of a ResourceItem.
type BlobResource struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType"`
	Blob     string `json:"blob"`
}

// FileURL is Node's url.pathToFileURL(p).href for an absolute POSIX path:
// "file://" and the path with '%', '\\', newline, CR and TAB encoded first,
// then the WHATWG path percent-encode set (C0 controls, space, '"', '#',
// '<', '>', '?', '`', '{', '}', DEL and every non-ASCII byte).
func FileURL(p string) string {
	var b strings.Builder
	b.WriteString("file://")
	const hex = "0123456789ABCDEF"
	p = DecodeText([]byte(p)) // Node's path string: invalid bytes are U+FFFD
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c <= 0x20 || c >= 0x7f || strings.IndexByte("%\\\"#<>?`{}", c) >= 0 {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
