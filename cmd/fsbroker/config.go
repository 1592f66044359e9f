package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/go-hclog"
	"sigs.k8s.io/yaml"

	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/schema"
)

// fileConfig is the config file (schema/config.json is its contract).
type fileConfig struct {
	Version  int          `json:"version"`
	Roots    []rootConfig `json:"roots"`
	StateDir string       `json:"stateDir"`
	Policies string       `json:"policies"`
	Consent  string       `json:"consent"`
	ServerID string       `json:"serverId"`
	// OPA is OPA's own configuration (services, bundles, keys) for pulling the policy set
	// from a bundle server.
	OPA json.RawMessage `json:"opa"`
	// Remote is the MCP server that connect serves over Streamable HTTP.
	Remote *remoteConfig `json:"remote"`
	Audit  struct {
		Dir             string `json:"dir"`
		Sync            string `json:"sync"`
		RedactPaths     bool   `json:"redactPaths"`
		MaxSegmentBytes int64  `json:"maxSegmentBytes"`
		MaxSegmentAge   string `json:"maxSegmentAge"`
		RetentionAge    string `json:"retentionAge"`
		RetentionBytes  int64  `json:"retentionBytes"`
		// Witness is --audit-witness: where the trail's checkpoints are sent.
		Witness []string `json:"witness"`
	} `json:"audit"`
	Log struct {
		Level  string `json:"level"`
		Format string `json:"format"`
	} `json:"log"`
	Limits struct {
		MaxMessageBytes  int    `json:"maxMessageBytes"`
		MaxInFlight      int    `json:"maxInFlight"`
		InitTimeout      string `json:"initTimeout"`
		ShutdownTimeout  string `json:"shutdownTimeout"`
		MaxReadBytes     int64  `json:"maxReadBytes"`
		MaxWriteBytes    int64  `json:"maxWriteBytes"`
		OperationTimeout string `json:"operationTimeout"`
		LockWait         string `json:"lockWait"`
		MaxWatches       int    `json:"maxWatches"`
		// RateLimit is a pointer: 0 (no limit) is a value of its own.
		RateLimit            *float64 `json:"rateLimit"`
		RateBurst            int      `json:"rateBurst"`
		MaxInFlightPerServer int      `json:"maxInFlightPerServer"`
	} `json:"limits"`
	// Sandbox is --sandbox and the paths its rules add (see docs/sandbox.md).
	Sandbox *sandboxConfig `json:"sandbox"`
}

// rootConfig is one entry of the config file's roots.
type rootConfig struct {
	Path     string `json:"path"`
	Mount    string `json:"mount"`
	Name     string `json:"name"`
	Writable bool   `json:"writable"`
	Consent  string `json:"consent"`
}

// configError is a usage or configuration error: the command exits 2 with its
// message, which names the bad setting.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// loadConfig reads, schema-checks and decodes the config file at path.
func loadConfig(path string, v *schema.Validator) (*fileConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, configErrorf("--config %s: %v", path, err)
	}
	doc, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, configErrorf("config %s: not valid YAML: %v", path, err)
	}
	if t := bytes.TrimSpace(doc); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		doc = []byte("{}")
	}
	if err := v.ValidateConfig(doc); err != nil {
		var serr *schema.Error
		if errors.As(err, &serr) {
			parts := make([]string, 0, len(serr.Errors))
			for _, fe := range serr.Errors {
				ptr := fe.Pointer
				if ptr == "" {
					ptr = "/"
				}
				parts = append(parts, ptr+": "+fe.Message)
			}
			return nil, configErrorf("config %s: %s", path, strings.Join(parts, "; "))
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	var cfg fileConfig
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, configErrorf("config %s: %v", path, err)
	}
	return &cfg, nil
}

// rootSpecs returns the config's roots as specs; relative paths are relative
// to the config file's directory.
func (c *fileConfig) rootSpecs(configPath string) []roots.Spec {
	base := filepath.Dir(configPath)
	specs := make([]roots.Spec, 0, len(c.Roots))
	for i, r := range c.Roots {
		p := r.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		specs = append(specs, roots.Spec{Path: p, Mount: r.Mount, Name: r.Name, Writable: r.Writable,
			Preapproved: r.Consent == "preapproved", Origin: fmt.Sprintf("config %s: /roots/%d", configPath, i)})
	}
	return specs
}

// configDuration parses a duration setting that the schema has already
// checked for shape.
func configDuration(path, pointer, value string) (time.Duration, error) {
	if value == "" {
		return 0, nil
	}
	d, err := parseDuration(value)
	switch {
	case err != nil:
		return 0, configErrorf("config %s: %s: %q: %v", path, pointer, value, err)
	case d <= 0:
		return 0, configErrorf("config %s: %s: %q is not a positive duration", path, pointer, value)
	}
	return d, nil
}

// watchConfig reloads the config file when it changes (debounced), and
// calls apply with each new version that loads. The file's directory is
// watched, because editors and orchestrators replace files in several ways
// (write in place, rename over, swap a symlinked "..data" directory as
// Kubernetes does): events on the file's name and on names starting with
// ".." trigger a reload; other files in the directory (a log file, say) do
// not. A reload that fails is logged and the last good version stays.
// It returns when ctx ends.
func watchConfig(ctx context.Context, path string, v *schema.Validator, debounce time.Duration,
	log hclog.Logger, apply func(*fileConfig)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config: %w", err)
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return fmt.Errorf("watch config directory %s: %w", dir, err)
	}
	go func() {
		defer w.Close()
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if name := filepath.Base(ev.Name); name != base && !strings.HasPrefix(name, "..") {
					continue
				}
				log.Trace("config file changed", "event", ev.String())
				timer.Reset(debounce)
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("config watcher error; reloading to be safe", "error", err)
				timer.Reset(debounce)
			case <-timer.C:
				cfg, err := loadConfig(path, v)
				if err != nil {
					log.Warn("config reload failed; keeping the previous configuration", "error", err)
					continue
				}
				apply(cfg)
			}
		}
	}()
	return nil
}

// ownPath is one of the broker's own files or directories (its state, audit
// trail, policies, configuration) and the setting that names it.
type ownPath struct {
	setting string // "--state-dir", "config FILE: /audit/dir", ...
	path    string
	fix     string // how to move it: "set --state-dir to ..."
}

// rootAt is a resolved root and the setting that names it.
type rootAt struct {
	setting string // "--root DIR:rw", "config FILE: /roots/0"
	root    roots.Root
}

// maxLinkHops bounds the links followed while resolving a path that does not
// exist yet (the kernel's own bound is 40).
const maxLinkHops = 40

// checkOutsideRoots refuses a configuration in which one of the broker's own
// paths lies inside a root, or a root inside one of them, read-only roots
// included (a server must neither change nor read the audit keys, the grants
// or the policies). Paths are compared symlink-resolved (a path not made yet
// by its deepest existing ancestor), and by identity: each own path's
// ancestors are compared, by device and inode, with every root's directory
// as it was resolved (roots.Root.ID), and each root's ancestors with every
// own path, so that a bind mount or a link cannot hide the overlap. The
// error is a configError naming both settings and paths, and how to fix it.
func checkOutsideRoots(own []ownPath, rs []rootAt) error {
	type resolvedOwn struct {
		ownPath
		real     string       // symlink-resolved
		existing string       // its deepest existing ancestor (itself when it exists)
		id       roots.FileID // its identity, when it exists
	}
	byID := make(map[roots.FileID]int, len(rs))
	for i, r := range rs {
		if r.root.ID.Known() {
			byID[r.root.ID] = i
		}
	}
	owns := make([]resolvedOwn, 0, len(own))
	for _, o := range own {
		real, existing, err := resolveExisting(o.path)
		if err != nil {
			return configErrorf("%s %s: %v", o.setting, o.path, err)
		}
		ro := resolvedOwn{ownPath: o, real: real, existing: existing}
		if real == existing {
			if fi, err := os.Stat(real); err == nil {
				ro.id = roots.FileIDOf(fi)
			}
		}
		owns = append(owns, ro)
	}
	for _, o := range owns {
		for _, r := range rs {
			switch {
			case within(o.real, r.root.Path):
				return ownInsideRoot(o.ownPath, o.real, r, "")
			case within(r.root.Path, o.real):
				return rootInsideOwn(r, o.ownPath, o.real, "")
			}
		}
	}
	// By identity: the same directories under other names.
	for _, o := range owns {
		for dir := o.existing; dir != ""; dir = parentDir(dir) {
			fi, err := os.Stat(dir)
			if err != nil {
				continue
			}
			if i, ok := byID[roots.FileIDOf(fi)]; ok {
				return ownInsideRoot(o.ownPath, o.real, rs[i], " ("+dir+" is that root's directory, by device and inode: a bind mount or a link)")
			}
		}
	}
	for _, r := range rs {
		for dir := r.root.Path; dir != ""; dir = parentDir(dir) {
			fi, err := os.Stat(dir)
			if err != nil {
				continue
			}
			id := roots.FileIDOf(fi)
			for _, o := range owns {
				if o.id.Known() && o.id == id {
					return rootInsideOwn(r, o.ownPath, o.real, " ("+dir+" is that directory, by device and inode: a bind mount or a link)")
				}
			}
		}
	}
	return nil
}

// ownInsideRoot is the error of an own path inside a root.
func ownInsideRoot(o ownPath, real string, r rootAt, how string) error {
	return configErrorf("%s %s lies inside the root %s (%s)%s: a server could read or change the broker's own "+
		"state through it (consent grants, audit trail and keys, policies, configuration); %s, outside every root",
		o.setting, spelled(o.path, real), r.setting, r.root.Path, how, o.fix)
}

// rootInsideOwn is the error of a root inside an own path.
func rootInsideOwn(r rootAt, o ownPath, real string, how string) error {
	return configErrorf("the root %s (%s) lies inside %s %s%s: a server could read or change the broker's own "+
		"state through it (consent grants, audit trail and keys, policies, configuration); %s, outside every root, "+
		"or give a root outside it", r.setting, r.root.Path, o.setting, spelled(o.path, real), how, o.fix)
}

// spelled is a path as written, with what it resolves to when that differs.
func spelled(written, real string) string {
	if abs, err := filepath.Abs(written); err == nil && abs == real {
		return real
	}
	return written + " (" + real + ")"
}

// within reports whether path is dir or lies beneath it (both clean and
// absolute), at a separator.
func within(path, dir string) bool {
	if path == dir {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(path, dir)
}

// parentDir is dir's parent, "" above the file system's root.
func parentDir(dir string) string {
	p := filepath.Dir(dir)
	if p == dir {
		return ""
	}
	return p
}

// resolveExisting returns path absolute and symlink-resolved, and its
// deepest existing ancestor (resolved; the path itself when it exists). The
// part that does not exist yet is kept as written; a dangling link on the
// way is followed to where it points, as creating the path would.
func resolveExisting(path string) (real, existing string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	var rest []string // the names below cur, innermost last
	cur := abs
	for hops := 0; ; {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), r, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("resolve: %w", err)
		}
		if target, lerr := os.Readlink(cur); lerr == nil {
			// A dangling link: what would be made is its target.
			if hops++; hops > maxLinkHops {
				return "", "", errors.New("resolve: too many links")
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(cur), target)
			}
			cur = filepath.Clean(target)
			continue
		}
		parent := parentDir(cur)
		if parent == "" {
			return abs, "", nil
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}
