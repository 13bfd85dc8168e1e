package hxbundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Publish writes the archive to path atomically and exclusively
// (REFERENCE §5.7 steps 4–7, with the directory fsync DESIGN §3 adds):
// missing parent folders are created; the bytes go to a temporary file
// (mode 0600) in path's folder, which is fsynced and then hard-linked to
// path, so the file appears complete or not at all and an existing file
// is never replaced (the error then matches fs.ErrExist and the existing
// file is untouched); the folder is fsynced; the temporary name is
// removed. The published file keeps mode 0600.
//
// On any error no temporary file remains, and path exists only if it
// existed before. The destination's file system must support hard links.
func (a *Archive) Publish(path string) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fmt.Errorf("publish bundle: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".hx-publish-*.tmp")
	if err != nil {
		return fmt.Errorf("publish bundle: %w", err)
	}
	tmpName := tmp.Name()
	defer func() {
		if tmp != nil {
			_ = tmp.Close()
		}
		if rmErr := os.Remove(tmpName); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
			err = fmt.Errorf("publish bundle: remove temporary file: %w", rmErr)
		}
	}()
	if err := a.step("write"); err != nil {
		return fmt.Errorf("publish bundle: %w", err)
	}
	if _, err := a.WriteTo(tmp); err != nil {
		return fmt.Errorf("publish bundle: %w", err)
	}
	if err := a.step("sync"); err != nil {
		return fmt.Errorf("publish bundle: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("publish bundle: sync %s: %w", tmpName, err)
	}
	err = tmp.Close()
	tmp = nil
	if err != nil {
		return fmt.Errorf("publish bundle: close %s: %w", tmpName, err)
	}
	if err := a.step("link"); err != nil {
		return fmt.Errorf("publish bundle: %w", err)
	}
	if err := os.Link(tmpName, path); err != nil {
		return fmt.Errorf("publish bundle: %w", err) // *LinkError wrapping EEXIST matches fs.ErrExist
	}
	if err := publishSyncDir(dir, a.step); err != nil {
		// Not durable: take the new name back rather than report a
		// failure while leaving a file that may vanish on power loss.
		return errors.Join(fmt.Errorf("publish bundle: %w", err), os.Remove(path))
	}
	return nil
}

// publishSyncDir fsyncs a directory so that a new entry in it is durable.
func publishSyncDir(dir string, step func(string) error) error {
	if err := step("syncdir"); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync folder: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync folder %s: %w", dir, err)
	}
	return nil
}

// step runs the test hook for a publish step.
func (a *Archive) step(name string) error {
	if a.hook == nil {
		return nil
	}
	return a.hook(name)
}
