package history

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile stores ops at path as gzipped JSON lines, one op per line in
// index order, atomically (a temporary file renamed into place). The
// directory is created if needed.
func WriteFile(path string, ops []Op) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".history-*")
	if err != nil {
		return err
	}
	err = encode(tmp, ops)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("history %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}

func encode(w io.Writer, ops []Op) error {
	zw := gzip.NewWriter(w)
	bw := bufio.NewWriter(zw)
	enc := json.NewEncoder(bw)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			return err
		}
	}
	return errors.Join(bw.Flush(), zw.Close())
}

// ReadFile loads a history written by WriteFile.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	var ops []Op
	dec := json.NewDecoder(bufio.NewReader(zr))
	for {
		var o Op
		err := dec.Decode(&o)
		if err == io.EOF {
			return ops, nil
		}
		if err != nil {
			return nil, fmt.Errorf("history %s: op %d: %w", path, len(ops), err)
		}
		ops = append(ops, o)
	}
}
