package inspect

// Discovery: PJRT_NAMES_AND_LIBRARY_PATHS and the JSON plugin configs it
// may name.
//
// JAX (jax/_src/xla_bridge.py, _get_pjrt_plugin_config) reads a ".json"
// entry as a config file whose "library_path" names the library and whose
// optional "create_options" maps option names to a string, an integer, a
// list of integers, a float or a bool. It uses library_path as written: a
// relative path is relative to the process's working directory, not to the
// config file.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/accelkit/accelkit/tfcompat"
)

// ErrConfig is returned (wrapped) for a malformed plugin config.
var ErrConfig = errors.New("inspect: invalid PJRT plugin config")

// maxConfigSize caps a config file read; real ones are a few hundred bytes.
const maxConfigSize = 1 << 20

// PluginConfig is a JSON plugin config as JAX reads it.
type PluginConfig struct {
	LibraryPath string `json:"library_path"`
	// CreateOptions are the options passed to PJRT_Client_Create, decoded
	// (numbers as json.Number).
	CreateOptions map[string]any `json:"create_options,omitempty"`
}

// ParseConfig parses a plugin config. Errors wrap ErrConfig and name what
// was wrong: not a JSON object, no or a non-string or empty library_path,
// create_options not an object of the value types JAX accepts.
func ParseConfig(data []byte) (PluginConfig, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return PluginConfig{}, fmt.Errorf("%w: not a JSON object (%v); expected {\"library_path\": \"/path/to/plugin.so\", \"create_options\": {...}}", ErrConfig, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return PluginConfig{}, fmt.Errorf("%w: data after the JSON object", ErrConfig)
	}
	lp, ok := raw["library_path"]
	if !ok {
		return PluginConfig{}, fmt.Errorf("%w: no \"library_path\" field (JAX requires it: the plugin's shared library)", ErrConfig)
	}
	var c PluginConfig
	if err := json.Unmarshal(lp, &c.LibraryPath); err != nil {
		return PluginConfig{}, fmt.Errorf("%w: \"library_path\" is %s, not a string", ErrConfig, jsonKind(lp))
	}
	if c.LibraryPath == "" {
		return PluginConfig{}, fmt.Errorf("%w: \"library_path\" is empty", ErrConfig)
	}
	if co, ok := raw["create_options"]; ok && string(co) != "null" {
		var opts map[string]json.RawMessage
		if err := json.Unmarshal(co, &opts); err != nil {
			return PluginConfig{}, fmt.Errorf("%w: \"create_options\" is %s, not an object", ErrConfig, jsonKind(co))
		}
		c.CreateOptions = make(map[string]any, len(opts))
		for k, v := range opts {
			val, err := optionValue(v)
			if err != nil {
				return PluginConfig{}, fmt.Errorf("%w: create_options %q: %v", ErrConfig, k, err)
			}
			c.CreateOptions[k] = val
		}
	}
	return c, nil
}

// optionValue decodes one create_options value: a string, a number, a
// bool or a list of integers (xla_client's _NameValueMapping).
func optionValue(v json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	switch t := x.(type) {
	case string, bool, json.Number:
		return t, nil
	case []any:
		for i, e := range t {
			n, ok := e.(json.Number)
			if !ok {
				return nil, fmt.Errorf("list element %d is %s; lists hold integers", i, jsonKind(mustRaw(e)))
			}
			if _, err := n.Int64(); err != nil {
				return nil, fmt.Errorf("list element %d (%s) is not a 64-bit integer", i, n)
			}
		}
		return t, nil
	}
	return nil, fmt.Errorf("%s is not a string, number, bool or list of integers", jsonKind(v))
}

func mustRaw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func jsonKind(v json.RawMessage) string {
	switch t := bytes.TrimSpace(v); {
	case len(t) == 0:
		return "empty"
	case t[0] == '{':
		return "an object"
	case t[0] == '[':
		return "a list"
	case t[0] == '"':
		return "a string"
	case t[0] == 't' || t[0] == 'f':
		return "a bool"
	case t[0] == 'n':
		return "null"
	}
	return "a number"
}

// ReadConfig reads and parses the plugin config at path (at most 1 MiB).
func ReadConfig(path string) (PluginConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return PluginConfig{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return PluginConfig{}, err
	}
	if len(data) > maxConfigSize {
		return PluginConfig{}, fmt.Errorf("%w: %s is over %d bytes", ErrConfig, path, maxConfigSize)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return PluginConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// InspectPlugins inspects every plugin of a PJRT_NAMES_AND_LIBRARY_PATHS
// value, one child at a time, reading ".json" entries as configs. A
// malformed value is an error (tfcompat.ParsePluginPaths's); a config that
// cannot be read or names a missing library, or two entries naming the
// same library, are findings in the reports. ctx cancels between and
// during plugins.
func InspectPlugins(ctx context.Context, env string, opts Options) ([]Report, error) {
	plugins, err := tfcompat.ParsePluginPaths(env)
	if err != nil {
		return nil, err
	}
	var out []Report
	seen := map[string]string{}
	for _, p := range plugins {
		r, err := inspectEntry(ctx, p.Name, p.Path, p.Config, seen, opts)
		if err != nil {
			return out, err
		}
		if r.Symbols != nil && !r.Symbols["GetPjrtApi"] {
			r.add(Fail, "pjrt.symbol", "GetPjrtApi is not exported, yet PJRT_NAMES_AND_LIBRARY_PATHS names %s as PJRT plugin %q: jax fails to load it", r.Path, p.Name)
		}
		out = append(out, r)
	}
	return out, nil
}

// InspectPath inspects one plugin: a shared library, or a JSON plugin
// config (a path ending in ".json", as JAX tells them apart) naming one.
func InspectPath(ctx context.Context, path string, opts Options) (Report, error) {
	return inspectEntry(ctx, "", path, strings.HasSuffix(path, ".json"), map[string]string{}, opts)
}

func inspectEntry(ctx context.Context, name, path string, config bool, seen map[string]string, opts Options) (Report, error) {
	pre := Report{Name: name, Path: path, Kind: KindUnknown, Verdict: OK}
	lib := path
	if config {
		pre.Config = path
		c, err := ReadConfig(path)
		if err != nil {
			pre.Path = ""
			pre.add(Fail, "config", "%v", err)
			return pre, nil
		}
		lib = c.LibraryPath
	}
	if abs, err := filepath.Abs(lib); err == nil {
		if first, dup := seen[abs]; dup {
			pre.add(Warn, "config", "library %s is also plugin %q's: the same library registered twice under two names", lib, first)
		} else {
			seen[abs] = name
		}
	}
	r, err := Inspect(ctx, lib, opts)
	if err != nil {
		return r, err
	}
	r.Name, r.Config = name, pre.Config
	for _, f := range pre.Findings {
		r.add(f.Severity, f.Check, "%s", f.Message)
	}
	return r, nil
}
