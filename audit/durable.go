package audit

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeAtomic replaces path with data through a temporary file in the same directory and a
// rename, fsyncing the temporary file first when sync is set.
func writeAtomic(path string, data []byte, mode os.FileMode, sync bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("audit: write %s: %w", filepath.Base(path), err)
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil && sync {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("audit: write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// syncDir fsyncs a directory so that a new file's name is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit: sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("audit: sync directory: %w", err)
	}
	return nil
}
