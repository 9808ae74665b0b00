package recipes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/omar-selfplay/omar/internal/strictyaml"
)

// ConfigFile is a recipe's config in its directory (cascade,
// distillation): what a resumed recipe continues with.
const ConfigFile = "recipe.yaml"

// Config returns the config of the recipe in dir. A resumed recipe
// reads dir's recipe.yaml onto def; a fresh one decodes the file at path
// (none: def unchanged) and records it in dir/recipe.yaml, and a
// directory that already holds a recipe is refused, so a finished or
// interrupted recipe is never mixed with another config. An invalid
// config is refused before anything is written.
func Config[T interface{ Validate() error }](dir, path string, resume bool, def T) (T, error) {
	file := filepath.Join(dir, ConfigFile)
	if resume {
		if path != "" {
			return def, errors.New("a resumed recipe continues with its own config: no config file")
		}
		if err := strictyaml.DecodeFile(file, &def); err != nil {
			return def, fmt.Errorf("resume: %w", err)
		}
		return def, nil
	}
	if _, err := os.Stat(file); err == nil {
		return def, fmt.Errorf("%s holds a recipe already: resume it, or choose another directory", dir)
	}
	if path != "" {
		if err := strictyaml.DecodeFile(path, &def); err != nil {
			return def, err
		}
	}
	if err := def.Validate(); err != nil {
		return def, err
	}
	b, err := yaml.Marshal(&def)
	if err != nil {
		return def, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return def, err
	}
	return def, os.WriteFile(file, b, 0o644)
}
