//go:build !linux

package executor

import "io"

// readBatch appends the next names of d (the broker's temporary files left
// out) to r. It reports done at the end of the directory.
func (d *dirFile) readBatch(_ []byte, r *rawNames) (done bool, err error) {
	names, err := d.f.Readdirnames(1024)
	for _, n := range names {
		if !IsTempName(n) {
			r.addString(n)
		}
	}
	if err == io.EOF {
		return true, nil
	}
	return false, err
}
