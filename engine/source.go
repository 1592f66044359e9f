// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"
	"sigs.k8s.io/yaml"
)

// Source is where a policy set comes from. Set exactly one of Dir, FS, Bundle and Remote.
//
// A directory or file system holds Rego files (*.rego; *_test.rego are the set's tests) and data
// files named data.json, data.yaml or data.yml, found recursively. A data file's document is an
// object placed under data at its directory's path (a/b/data.json is data.a.b), as OPA's loader
// does; documents must not overlap. Other files, and every file or directory whose name starts
// with a dot, are ignored.
type Source struct {
	// Dir is a directory on disk. It is the only source Engine.Watch reloads on every change.
	Dir string
	// FS is a file system, such as the embedded default policies.
	FS fs.FS
	// Bundle is a bundle file (.tar.gz) as `opa build` makes it, optionally signed.
	Bundle string
	// BundleVerification, when set, requires Bundle to be signed with one of its keys and every
	// file to match the signature: an unsigned or tampered bundle is refused, even when the
	// configuration was made WithOptionalSignature (keys configured means a signature is
	// required). A signed bundle without BundleVerification is refused too, since its
	// signature cannot be checked.
	BundleVerification *bundle.VerificationConfig
	// Remote is a bundle server (see ParseRemote). New starts without a policy set (every
	// request is denied) unless a persisted copy of the bundle loads; Engine.Watch pulls.
	Remote *Remote
}

// String names the source for logs.
func (s Source) String() string {
	switch {
	case s.Dir != "":
		return "dir " + s.Dir
	case s.Bundle != "":
		return "bundle " + s.Bundle
	case s.FS != nil:
		return "embedded file system"
	case s.Remote != nil:
		return s.Remote.String()
	}
	return "empty source"
}

// check reports a source with none or more than one of its fields set.
func (s Source) check() error {
	n := 0
	if s.Dir != "" {
		n++
	}
	if s.FS != nil {
		n++
	}
	if s.Bundle != "" {
		n++
	}
	if s.Remote != nil {
		n++
	}
	if n != 1 {
		return newLoadError(nil, Problem{Message: "source: set exactly one of Dir, FS, Bundle and Remote"})
	}
	if s.BundleVerification != nil && s.Bundle == "" {
		return newLoadError(nil, Problem{Message: "source: BundleVerification is set but Bundle is not"})
	}
	return nil
}

// rawSet is a policy set as read from its source, before compilation.
type rawSet struct {
	modules   map[string]*ast.Module // by file name, policy files
	library   map[string]*ast.Module // the library modules added to them (libraryFor)
	tests     map[string]*ast.Module // by file name, *_test.rego files (when they were parsed)
	testFiles int                    // how many *_test.rego files the source has
	data      map[string]any
	revision  string
	files     int
}

// read loads and parses the source. Every failure is a *LoadError. Without withTests, the
// *_test.rego files of a directory or file system are not parsed (they still count in the
// revision): a set whose tests are not run does not pay for them. A bundle's are, by OPA's
// bundle reader.
func read(src Source, withTests bool) (*rawSet, error) {
	if err := src.check(); err != nil {
		return nil, err
	}
	if src.Bundle != "" {
		return readBundle(src.Bundle, src.BundleVerification)
	}
	if src.Remote != nil {
		return nil, newLoadError(nil, Problem{File: src.Remote.String(), Message: "a remote bundle is pulled by Engine.Watch"})
	}
	fsys, prefix := src.FS, ""
	if src.Dir != "" {
		info, err := os.Stat(src.Dir)
		if err != nil {
			return nil, fileError(src.Dir, err)
		}
		if !info.IsDir() {
			return nil, fileError(src.Dir, errors.New("not a directory"))
		}
		fsys, prefix = os.DirFS(src.Dir), src.Dir
	}
	return readFS(fsys, prefix, withTests)
}

// sourceFile is one file of a directory or file system source.
type sourceFile struct {
	rel     string // slash-separated, relative to the source
	name    string // as reported in errors and locations
	content []byte
}

// isPolicyFile reports whether a file name is loaded: Rego, or a data file.
func isPolicyFile(name string) bool {
	switch name {
	case "data.json", "data.yaml", "data.yml":
		return true
	}
	return strings.HasSuffix(name, ".rego")
}

// isTestFile reports a Rego test file.
func isTestFile(name string) bool {
	return strings.HasSuffix(name, "_test.rego")
}

// hidden reports a name that starts with a dot (".", the root itself, excluded).
func hidden(name string) bool {
	return name != "." && strings.HasPrefix(name, ".")
}

// readFS reads, hashes and parses every policy file of fsys, the tests only withTests. prefix is
// joined to each relative name for messages (the directory on disk, or "" for an fs.FS).
func readFS(fsys fs.FS, prefix string, withTests bool) (*rawSet, error) {
	var files []sourceFile
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if hidden(d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isPolicyFile(d.Name()) {
			return nil
		}
		content, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		name := p
		if prefix != "" {
			name = filepath.Join(prefix, filepath.FromSlash(p))
		}
		files = append(files, sourceFile{rel: p, name: name, content: content})
		return nil
	})
	if err != nil {
		file := prefix
		var pe *fs.PathError
		if errors.As(err, &pe) {
			file = pe.Path
			if prefix != "" {
				file = filepath.Join(prefix, filepath.FromSlash(pe.Path))
			}
		}
		return nil, fileError(file, err)
	}

	raw := &rawSet{
		modules:  map[string]*ast.Module{},
		tests:    map[string]*ast.Module{},
		data:     map[string]any{},
		revision: digest(files),
		files:    len(files),
	}
	var problems []Problem
	var causes []error
	for _, f := range files {
		base := path.Base(f.rel)
		if !strings.HasSuffix(base, ".rego") {
			if p, err := addData(raw.data, f); err != nil {
				problems = append(problems, p)
				causes = append(causes, err)
			}
			continue
		}
		if isTestFile(base) {
			raw.testFiles++
			if !withTests {
				continue
			}
		}
		m, err := ast.ParseModuleWithOpts(f.name, string(f.content), parserOptions())
		if err != nil {
			le := astLoadError(err)
			problems = append(problems, le.Problems...)
			causes = append(causes, err)
			continue
		}
		if isTestFile(base) {
			raw.tests[f.name] = m
		} else {
			raw.modules[f.name] = m
		}
	}
	if len(problems) > 0 {
		return nil, newLoadError(errors.Join(causes...), problems...)
	}
	if raw.library, err = libraryFor(raw.modules); err != nil {
		return nil, err
	}
	return raw, nil
}

// parserOptions are the options every module is parsed with: Rego v1, annotations kept (for
// METADATA schema annotations).
func parserOptions() ast.ParserOptions {
	return ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true}
}

// digest is the revision of a directory or file system source: sha256 over the sorted relative
// names and contents, each length-prefixed so that no two sets share a digest by shifting bytes.
func digest(files []sourceFile) string {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b sourceFile) int { return strings.Compare(a.rel, b.rel) })
	h := sha256.New()
	var n [8]byte
	for _, f := range sorted {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.rel)))
		h.Write(n[:])
		h.Write([]byte(f.rel))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.content)))
		h.Write(n[:])
		h.Write(f.content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// addData parses a data file and merges its document into data at its directory's path.
func addData(data map[string]any, f sourceFile) (Problem, error) {
	content := f.content
	if path.Ext(f.rel) == ".json" {
		// encoding/json first, for the byte offset of a syntax error.
		if err := json.Unmarshal(content, new(any)); err != nil {
			return jsonProblem(f.name, content, err), err
		}
	} else {
		j, err := yaml.YAMLToJSON(content)
		if err != nil {
			return Problem{File: f.name, Message: "invalid YAML: " + err.Error()}, err
		}
		content = j
	}
	var doc any
	if err := util.UnmarshalJSON(content, &doc); err != nil {
		return Problem{File: f.name, Message: "invalid data: " + err.Error()}, err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		err := errors.New("the document must be an object")
		return Problem{File: f.name, Message: err.Error()}, err
	}
	dir := path.Dir(f.rel)
	var at []string
	if dir != "." {
		at = strings.Split(dir, "/")
	}
	node := data
	for _, seg := range at {
		child, ok := node[seg]
		if !ok {
			m := map[string]any{}
			node[seg] = m
			node = m
			continue
		}
		m, ok := child.(map[string]any)
		if !ok {
			err := fmt.Errorf("data.%s is already set by another data file", strings.Join(at, "."))
			return Problem{File: f.name, Message: err.Error()}, err
		}
		node = m
	}
	if conflict := merge(node, obj, strings.Join(append([]string{"data"}, at...), ".")); conflict != "" {
		err := fmt.Errorf("%s is set by more than one data file", conflict)
		return Problem{File: f.name, Message: err.Error()}, err
	}
	return Problem{}, nil
}

// merge adds src into dst, recursing into objects both have; it returns the path of the first
// value both set, or "".
func merge(dst, src map[string]any, at string) string {
	for _, k := range slices.Sorted(maps.Keys(src)) {
		v := src[k]
		old, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		om, ok1 := old.(map[string]any)
		vm, ok2 := v.(map[string]any)
		if !ok1 || !ok2 {
			return at + "." + k
		}
		if c := merge(om, vm, at+"."+k); c != "" {
			return c
		}
	}
	return ""
}

// readBundle reads a bundle file, verifying its signature when vc is set.
func readBundle(file string, vc *bundle.VerificationConfig) (*rawSet, error) {
	content, err := os.ReadFile(file)
	if err != nil {
		return nil, fileError(file, err)
	}
	r := bundle.NewCustomReader(bundle.NewTarballLoaderWithBaseURL(bytes.NewReader(content), file)).
		WithRegoVersion(ast.RegoV1).
		WithProcessAnnotations(true).
		WithBundleVerificationConfig(requireSignature(vc)).
		WithSkipBundleVerification(false)
	b, err := r.Read()
	if err != nil {
		var errs ast.Errors
		if errors.As(err, &errs) {
			return nil, astLoadError(err)
		}
		return nil, fileError(file, fmt.Errorf("bundle: %w", err))
	}
	return rawFromBundle(&b, file, content)
}

// requireSignature returns vc requiring a signature: with keys configured, a bundle without
// .signatures.json is refused. OPA makes the configuration it injects for keys without a
// signing block signature-optional (WithOptionalSignature), which would let an unsigned bundle
// through a broker whose operator configured keys to have bundles checked. nil stays nil (no
// keys: nothing is verified).
func requireSignature(vc *bundle.VerificationConfig) *bundle.VerificationConfig {
	if vc == nil || vc.SignatureRequired() {
		return vc
	}
	required := bundle.NewVerificationConfig(vc.PublicKeys, vc.KeyID, vc.Scope, vc.Exclude)
	required.AllowUnsignedDeltaBundles = vc.AllowUnsignedDeltaBundles
	return required
}

// rawFromBundle makes a read (and verified) bundle a policy set named after file. The revision
// is the manifest's, or the sha256 of content (the bundle file) when the manifest has none.
func rawFromBundle(b *bundle.Bundle, file string, content []byte) (*rawSet, error) {
	if b.Type() == bundle.DeltaBundleType {
		return nil, fileError(file, errors.New("bundle: a delta bundle is not a policy set"))
	}
	raw := &rawSet{
		modules:  map[string]*ast.Module{},
		tests:    map[string]*ast.Module{},
		data:     b.Data,
		revision: b.Manifest.Revision,
		files:    len(b.Modules),
	}
	if raw.data == nil {
		raw.data = map[string]any{}
	}
	if raw.revision == "" {
		if content == nil {
			return nil, fileError(file, errors.New("bundle: no manifest revision and no content to digest"))
		}
		sum := sha256.Sum256(content)
		raw.revision = hex.EncodeToString(sum[:])
	}
	for _, m := range b.Modules {
		// Parse again under the bundle file's name, so that errors, test results and coverage
		// name bundle.tar.gz/dir/x.rego rather than /dir/x.rego; keep the Rego version the
		// bundle's manifest gave the file.
		name := file + "/" + strings.TrimPrefix(m.Path, "/")
		opts := parserOptions()
		if m.Parsed != nil {
			opts.RegoVersion = m.Parsed.RegoVersion()
		}
		parsed, err := ast.ParseModuleWithOpts(name, string(m.Raw), opts)
		if err != nil {
			return nil, astLoadError(err)
		}
		if isTestFile(m.Path) {
			raw.testFiles++
			raw.tests[name] = parsed
		} else {
			raw.modules[name] = parsed
		}
	}
	var err error
	if raw.library, err = libraryFor(raw.modules); err != nil {
		return nil, err
	}
	return raw, nil
}
