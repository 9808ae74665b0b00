package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/omar-selfplay/omar/model/builtin"
)

// builtinModelFile writes the built-in model into the user's cache
// directory once (named by its checksum) and returns its path: commands
// that play "the model" without --model play it.
func builtinModelFile() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "omar", "builtin-"+builtin.SHA256[:16]+".gguf")
	if st, err := os.Stat(path); err == nil && st.Size() == int64(len(builtin.Bytes())) {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("the built-in model: %w", err)
	}
	tmp := path + ".tmp"
	if err := builtin.WriteFile(tmp); err != nil {
		return "", fmt.Errorf("the built-in model: %w", err)
	}
	return path, os.Rename(tmp, path)
}
