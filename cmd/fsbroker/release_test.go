// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux && amd64

package main

// The release tests. TestRelease builds fsbroker's release for linux/amd64
// exactly as `make release` builds every platform (`make
// release-linux-amd64`: GoReleaser, nfpm and cyclonedx-gomod in a fresh
// clone of HEAD; see docs/release.md), twice, and checks what a user
// downloading it would: the checksums, the archive, the binary's version,
// the SBOM, and the .deb installed with dpkg. TestGoInstall installs the
// module with go install, the install path for Go users. Both test the
// commit checked out: uncommitted changes are not in it.
//
// Without the release tools (no Go module proxy to install them from), or
// for the .deb without root and dpkg, TestRelease skips and says why; with
// FSBROKER_REQUIRE_RELEASE=1 (as CI sets it) it fails instead.

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// releaseRequireEnv, set to 1, turns the release test's skips into failures.
const releaseRequireEnv = "FSBROKER_REQUIRE_RELEASE"

// releaseSkip skips the test, saying why, or fails it when
// FSBROKER_REQUIRE_RELEASE=1.
func releaseSkip(t *testing.T, why string) {
	t.Helper()
	if os.Getenv(releaseRequireEnv) == "1" {
		t.Fatalf("%s=1, but %s", releaseRequireEnv, why)
	}
	t.Skipf("%s (set %s=1 to fail instead)", why, releaseRequireEnv)
}

// releaseTestTag is the tag TestRelease gives HEAD in a clone of its own.
const releaseTestTag = "v0.0.1-release.test"

// TestRelease: the linux/amd64 release is reproducible (two builds from
// two clones, at two paths and times, the second as another machine would,
// have the same checksums), every file
// matches its SHA-256 in the checksums file, the archive holds fsbroker,
// LICENSE and README.md dated at the commit, `fsbroker version` from it names
// the release's version (a Go pseudo-version of the commit, or its tag) and
// the commit, the SBOM lists the modules linked in, and the .deb installs
// /usr/bin/fsbroker, which reports the same.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the linux/amd64 release three times")
	}
	t.Parallel()
	root, head, commitTime := headCommit(t)
	if out, err := runMake(root, "release-tools"); err != nil {
		releaseSkip(t, "the release tools cannot be installed: "+err.Error()+"\n"+tsTail(out, 2000))
	}

	dist := buildRelease(t, root, false)
	_, againFile := readChecksums(t, buildRelease(t, root, true))
	version, deb := checkRelease(t, dist, head, commitTime)
	_, sumsFile := readChecksums(t, dist)
	if first, second := readFile(t, sumsFile), readFile(t, againFile); first != second {
		t.Errorf("two builds of the same commit differ: not reproducible\n%s\n%s", first, second)
	}
	// Untagged, the version is a Go pseudo-version: vX.Y.Z- (no tag before
	// the commit) or vX.Y.Z-0. (one before it), then the commit's time and
	// hash.
	pseudo := commitTime.Format("20060102150405") + "-" + head[:12]
	if gitOutput(t, root, "tag", "--points-at", "HEAD", "v*") == "" && !strings.HasSuffix(version, pseudo) {
		t.Errorf("untagged commit released as %s, want a Go pseudo-version ending in %s", version, pseudo)
	}

	t.Run("tagged", func(t *testing.T) {
		// A clone whose HEAD has one tag: the release is that version.
		clone := untaggedClone(t, root, head)
		gitOutput(t, clone, "tag", releaseTestTag)
		if version, _ := checkRelease(t, buildRelease(t, clone, false), head, commitTime); "v"+version != releaseTestTag {
			t.Errorf("HEAD tagged %s released as %s", releaseTestTag, version)
		}
	})
	t.Run("deb", func(t *testing.T) { installDeb(t, deb, version, head, commitTime) })
}

// TestGoInstall: `go install github.com/fsbroker/fsbroker/cmd/fsbroker@V`,
// the install path for Go users, works for the commit checked out, by its
// hash (its pseudo-version) and by a tag, and the binary's `fsbroker version`
// names that version. The go command fetches the module with git, as it
// would from GitHub, from a clone of this repository that git's
// url.insteadOf puts in GitHub's place, and makes the module's zip from it
// with the checks the module proxy applies (a file that could not be
// written on Windows fails it); every other module comes from this
// machine's module cache, served as a file:// proxy.
func TestGoInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fsbroker from its module twice")
	}
	t.Parallel()
	root, head, commitTime := headCommit(t)
	clone := untaggedClone(t, root, head)
	modcache, err := exec.Command(goTool(), "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	work := t.TempDir()
	env := append(os.Environ(),
		"GOBIN="+filepath.Join(work, "bin"),
		"GOMODCACHE="+filepath.Join(work, "modcache"),
		"GOPROXY=file://"+filepath.Join(strings.TrimSpace(string(modcache)), "cache", "download"),
		"GOPRIVATE="+modulePath,
		// The other modules were checked against the checksum database when
		// they entered the module cache; it is not reached here.
		"GOSUMDB=off",
		// -trimpath and no cgo, as the release builds: their compiled
		// packages serve this build too. -modcacherw: t.TempDir removes it.
		"GOFLAGS=-trimpath -modcacherw",
		"CGO_ENABLED=0",
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=url."+clone+".insteadOf",
		"GIT_CONFIG_VALUE_0=https://"+modulePath,
	)
	install := func(query, want string) {
		t.Helper()
		cmd := exec.Command(goTool(), "install", modulePath+"/cmd/fsbroker@"+query)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go install %s/cmd/fsbroker@%s: %v\n%s", modulePath, query, err, tsTail(string(out), 4000))
		}
		r := releasedVersion(t, filepath.Join(work, "bin", "fsbroker"))
		if r.Version != want || r.Platform != "linux/amd64" || !strings.HasPrefix(r.OPA, "v1.") {
			t.Errorf("go install ...@%s: version --json = %+v, want version %s", query, r, want)
		}
	}
	install(head, "v0.0.0-"+commitTime.Format("20060102150405")+"-"+head[:12])
	gitOutput(t, clone, "tag", releaseTestTag)
	install(releaseTestTag, releaseTestTag)
}

// headCommit returns the repository's top directory, the commit checked out
// and its time (UTC), which is what the release tests release; they say so
// when the work tree has changes, which are not in the release.
func headCommit(t *testing.T) (root, head string, commitTime time.Time) {
	t.Helper()
	root = gitOutput(t, "", "rev-parse", "--show-toplevel")
	head = gitOutput(t, root, "rev-parse", "HEAD")
	commitUnix, err := strconv.ParseInt(gitOutput(t, root, "log", "-1", "--format=%ct", "HEAD"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if out := gitOutput(t, root, "status", "--porcelain"); out != "" {
		t.Logf("uncommitted changes are not released; testing the release of %s", head)
	}
	return root, head, time.Unix(commitUnix, 0).UTC()
}

// untaggedClone clones the repository at root into a new directory, checks
// out commit head and deletes every tag, and returns the clone's path.
func untaggedClone(t *testing.T, root, head string) string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "src")
	gitOutput(t, "", "clone", "--quiet", "--no-checkout", root, clone)
	gitOutput(t, clone, "checkout", "--quiet", "--detach", head)
	if tags := gitOutput(t, clone, "tag", "--list"); tags != "" {
		gitOutput(t, clone, append([]string{"tag", "--delete"}, strings.Fields(tags)...)...)
	}
	return clone
}

// buildRelease runs make release-linux-amd64 in dir into a new directory,
// and returns that directory. elsewhere builds as another machine would:
// another umask and time zone, and, as root, another host name (in a UTS
// namespace of its own).
func buildRelease(t *testing.T, dir string, elsewhere bool) string {
	t.Helper()
	dist := filepath.Join(t.TempDir(), "dist")
	cmd := makeCommand(dir, "release-linux-amd64", "DIST="+dist)
	if elsewhere {
		setup := "umask 027"
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS}
			setup += " && hostname release-test-elsewhere"
		} else {
			t.Log("not root: the second build runs under this machine's host name")
		}
		cmd.Args = append([]string{"sh", "-c", setup + ` && exec "$@"`, "sh"}, cmd.Args...)
		cmd.Path = "/bin/sh"
		cmd.Env = append(cmd.Env, "TZ=Pacific/Kiritimati")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release-linux-amd64 in %s: %v\n%s", dir, err, tsTail(string(out), 6000))
	}
	return dist
}

// checkRelease checks a linux/amd64 release of commit head made at
// commitTime: its files and checksums, its archive, the version of the
// binary in it and its SBOM. It returns the release's version (as GoReleaser
// writes it in file names: without the "v") and its .deb.
func checkRelease(t *testing.T, dist, head string, commitTime time.Time) (version, deb string) {
	t.Helper()
	sums, sumsFile := readChecksums(t, dist)
	version = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(sumsFile), "fsbroker_"), "_checksums.txt")
	checkReleaseFiles(t, dist, sums, version)

	bin := unpackArchive(t, filepath.Join(dist, "fsbroker_"+version+"_linux_amd64.tar.gz"), commitTime)
	r := releasedVersion(t, bin)
	checkReleasedVersion(t, r, version, head, commitTime)
	checkSBOM(t, filepath.Join(dist, "fsbroker_"+version+"_linux_amd64.cdx.json"), r)

	debs, _ := filepath.Glob(filepath.Join(dist, "*_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("want one .deb for amd64, got %v", debs)
	}
	return version, debs[0]
}

// runMake runs make TARGET VARS... in dir (see makeCommand) and returns its
// output.
func runMake(dir string, args ...string) (string, error) {
	out, err := makeCommand(dir, args...).CombinedOutput()
	return string(out), err
}

// makeCommand is make TARGET VARS... in dir, outside any make that runs the
// tests (its MAKEFLAGS would pass its variables on).
func makeCommand(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", dir}, args...)...)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains([]string{"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "TZ"}, name) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// gitOutput runs git in dir (this package's directory when empty) and
// returns its output, trimmed.
func gitOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = errors.New(err.Error() + ": " + string(ee.Stderr))
		}
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// readChecksums reads the one checksums file of a release: file name to
// SHA-256, as sha256sum writes them.
func readChecksums(t *testing.T, dist string) (map[string]string, string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dist, "fsbroker_*_checksums.txt"))
	if len(files) != 1 {
		t.Fatalf("want one checksums file in %s, got %v", dist, files)
	}
	sums := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, files[0])))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != sha256.Size*2 || strings.ContainsAny(name, "/\\") {
			t.Fatalf("checksums line %q is not SHA256 + two spaces + file name", sc.Text())
		}
		sums[name] = sum
	}
	return sums, files[0]
}

// checkReleaseFiles checks that the checksums file lists exactly the
// linux/amd64 release (archive, SBOM, one .deb, one .rpm: nfpm names the
// packages by each format's rules) and that each file in dist has the
// SHA-256 it lists.
func checkReleaseFiles(t *testing.T, dist string, sums map[string]string, version string) {
	t.Helper()
	var listed []string
	debs, rpms := 0, 0
	for name := range sums {
		listed = append(listed, name)
		switch {
		case name == "fsbroker_"+version+"_linux_amd64.tar.gz", name == "fsbroker_"+version+"_linux_amd64.cdx.json":
		case strings.HasPrefix(name, "fsbroker_") && strings.HasSuffix(name, "_amd64.deb"):
			debs++
		case strings.HasPrefix(name, "fsbroker-") && strings.HasSuffix(name, ".x86_64.rpm"):
			rpms++
		default:
			t.Errorf("the checksums file lists %s, not part of a linux/amd64 release", name)
		}
	}
	if len(listed) != 4 || debs != 1 || rpms != 1 {
		t.Errorf("the checksums file lists %v: want the archive, the SBOM, one .deb and one .rpm", listed)
	}
	for name, sum := range sums {
		f, err := os.Open(filepath.Join(dist, name))
		if err != nil {
			t.Error(err)
			continue
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != sum {
			t.Errorf("%s: SHA-256 %s, the checksums file says %s", name, got, sum)
		}
	}
}

// unpackArchive unpacks a release's .tar.gz into a new directory, checks
// that it holds fsbroker, LICENSE and README.md in one directory named like
// the archive, owned by root and dated at the commit, and returns the
// binary's path.
func unpackArchive(t *testing.T, archive string, commitTime time.Time) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", archive, err)
	}
	top := strings.TrimSuffix(filepath.Base(archive), ".tar.gz")
	dir := t.TempDir()
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		names = append(names, h.Name)
		base, ok := strings.CutPrefix(h.Name, top+"/")
		if !ok || h.Typeflag != tar.TypeReg || !fs.ValidPath(base) || strings.Contains(base, "/") {
			t.Fatalf("%s: entry %q (type %c) is not a file in %s/", archive, h.Name, h.Typeflag, top)
		}
		wantMode := int64(0o644)
		if base == "fsbroker" {
			wantMode = 0o755
		}
		if h.Mode != wantMode || h.Uname != "root" || h.Gname != "root" || !h.ModTime.Equal(commitTime) {
			t.Errorf("%s: %s is %o %s:%s at %s, want %o root:root at the commit's time %s",
				archive, h.Name, h.Mode, h.Uname, h.Gname, h.ModTime.UTC(), wantMode, commitTime)
		}
		out, err := os.OpenFile(filepath.Join(dir, base), os.O_CREATE|os.O_EXCL|os.O_WRONLY, fs.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(names)
	if want := []string{top + "/LICENSE", top + "/README.md", top + "/fsbroker"}; !slices.Equal(names, want) {
		t.Fatalf("%s holds %v, want %v", archive, names, want)
	}
	return filepath.Join(dir, "fsbroker")
}

// releasedVersion runs `BIN version --json` and `BIN version`, and returns
// the report.
func releasedVersion(t *testing.T, bin string) buildReport {
	t.Helper()
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("%s version --json: %v", bin, err)
	}
	var r buildReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%s version --json printed %q: %v", bin, out, err)
	}
	text, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(text), "fsbroker "+r.Version+"\n") || !strings.Contains(string(text), r.Revision) {
		t.Errorf("%s version: %v\n%s", bin, err, text)
	}
	return r
}

// checkReleasedVersion checks a released binary's version report: the
// release's version (a tag or Go pseudo-version, with its "v"), the commit
// and its time, no uncommitted changes, linux/amd64, and OPA.
func checkReleasedVersion(t *testing.T, r buildReport, version, head string, commitTime time.Time) {
	t.Helper()
	if r.Version != "v"+version || r.Revision != head || r.Time != commitTime.Format(time.RFC3339) ||
		r.Modified || r.Platform != "linux/amd64" || !strings.HasPrefix(r.OPA, "v1.") {
		t.Errorf("version --json = %+v, want version v%s, revision %s at %s, not modified, linux/amd64",
			r, version, head, commitTime.Format(time.RFC3339))
	}
}

// checkSBOM checks a release's CycloneDX SBOM: the binary's module at the
// release's version as its subject, and OPA among its components at the
// version built in.
func checkSBOM(t *testing.T, file string, r buildReport) {
	t.Helper()
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(readFile(t, file)), &bom); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != modulePath || bom.Metadata.Component.Version != r.Version {
		t.Errorf("%s: %s SBOM of %s %s, want CycloneDX of %s %s", file, bom.BOMFormat,
			bom.Metadata.Component.Name, bom.Metadata.Component.Version, modulePath, r.Version)
	}
	found := false
	for _, c := range bom.Components {
		found = found || (c.Name == opaModule && c.Version == r.OPA)
	}
	if !found {
		t.Errorf("%s: no component %s %s among %d", file, opaModule, r.OPA, len(bom.Components))
	}
}

// installDeb installs the release's .deb with dpkg -i, checks what it put in
// /usr, runs /usr/bin/fsbroker version, and removes the package again. It
// needs root and dpkg, and a machine where no fsbroker is installed in
// /usr/bin (which it would replace).
func installDeb(t *testing.T, deb, version, head string, commitTime time.Time) {
	const installed = "/usr/bin/fsbroker"
	if os.Geteuid() != 0 {
		releaseSkip(t, "installing the .deb needs root")
	}
	if _, err := exec.LookPath("dpkg"); err != nil {
		releaseSkip(t, "installing the .deb needs dpkg: "+err.Error())
	}
	if _, err := os.Lstat(installed); err == nil {
		releaseSkip(t, installed+" exists already: the test will not replace it")
	}

	listing, err := exec.Command("dpkg-deb", "--contents", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --contents %s: %v", deb, err)
	}
	wantFiles := []string{"./usr/bin/fsbroker", "./usr/share/doc/fsbroker/copyright", "./usr/share/doc/fsbroker/README.md",
		"./" + strings.TrimPrefix(debBashCompletion, "/"), "./" + strings.TrimPrefix(debZshCompletion, "/"),
		"./" + strings.TrimPrefix(debFishCompletion, "/")}
	for _, c := range commandsOf(newRootCommand(nil, io.Discard, io.Discard)) {
		wantFiles = append(wantFiles, "./usr/share/man/man1/"+strings.ReplaceAll(c.CommandPath(), " ", "-")+".1.gz")
	}
	for _, want := range wantFiles {
		if !strings.Contains(string(listing), " "+want+"\n") {
			t.Errorf("%s lacks %s:\n%s", deb, want, listing)
		}
	}
	if n := len(regexp.MustCompile(`(?m) \./usr/share/man/man1/[^/\s]+\.1\.gz$`).FindAllString(string(listing), -1)); n != len(wantFiles)-6 {
		t.Errorf("%s holds %d man pages, want one for each of the %d commands:\n%s", deb, n, len(wantFiles)-6, listing)
	}

	if out, err := exec.Command("dpkg", "-i", deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -i %s: %v\n%s", deb, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("dpkg", "--purge", "fsbroker").CombinedOutput(); err != nil {
			t.Errorf("dpkg --purge fsbroker: %v\n%s", err, out)
		}
		if _, err := os.Lstat(installed); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there after dpkg --purge: %v", installed, err)
		}
	})
	status, err := exec.Command("dpkg-query", "--show", "--showformat=${Status} ${Version}", "fsbroker").Output()
	if err != nil || !strings.HasPrefix(string(status), "install ok installed ") {
		t.Errorf("dpkg-query fsbroker: %v %q", err, status)
	}
	checkReleasedVersion(t, releasedVersion(t, installed), version, head, commitTime)
	checkInstalledDocs(t, installed)
}

// Where the .deb puts the completion scripts.
const (
	debBashCompletion = "/usr/share/bash-completion/completions/fsbroker"
	debZshCompletion  = "/usr/share/zsh/vendor-completions/_fsbroker"
	debFishCompletion = "/usr/share/fish/vendor_completions.d/fsbroker.fish"
)

// checkInstalledDocs checks the man pages and completion scripts the .deb
// installed: man finds fsbroker-connect's page, and the bash script is valid
// bash, loads, and is the one the installed fsbroker prints.
func checkInstalledDocs(t *testing.T, installed string) {
	t.Helper()
	if _, err := exec.LookPath("man"); err == nil {
		cmd := exec.Command("man", "fsbroker-connect")
		cmd.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=100")
		out, err := cmd.CombinedOutput()
		if text := strings.Join(strings.Fields(string(out)), " "); err != nil || !strings.Contains(text, "fsbroker-connect - start an MCP server") {
			t.Errorf("man fsbroker-connect: %v\n%s", err, out)
		}
	}
	if out, err := exec.Command("bash", "-n", debBashCompletion).CombinedOutput(); err != nil {
		t.Errorf("bash -n %s: %v\n%s", debBashCompletion, err, out)
	}
	out, err := exec.Command("bash", "-c", `source "$1" && complete -p fsbroker`, "bash", debBashCompletion).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "__start_fsbroker") {
		t.Errorf("loading %s: %v\n%s", debBashCompletion, err, out)
	}
	printed, err := exec.Command(installed, "completion", "bash").Output()
	if err != nil || string(printed) != readFile(t, debBashCompletion) {
		t.Errorf("%s differs from what %s completion bash prints (%v)", debBashCompletion, installed, err)
	}
}
