//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/urfave/cli/v2"
)

// The config file (--config) is TOML whose top-level keys are boxd's flag
// names without the dashes in front: every flag has a key, and a flag
// given on the command line (or through its environment variable) wins
// over the file. A list is allowed for the repeatable flags. Anything
// wrong (a syntax error, a key that is no flag, a value the flag does not
// take) stops boxd with the file, line and key named.

// loadConfig applies the file named by --config to the flags that were not
// set otherwise. It runs before run (cli.App.Before).
func loadConfig(cc *cli.Context) error {
	path := cc.String("config")
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var values map[string]any
	if err := toml.Unmarshal(data, &values); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			key := strings.Join(de.Key(), ".")
			if key != "" {
				return fmt.Errorf("config %s:%d:%d: key %s: %s", path, row, col, key, de.Error())
			}
			return fmt.Errorf("config %s:%d:%d: %s", path, row, col, de.Error())
		}
		return fmt.Errorf("config %s: %w", path, err)
	}
	flags := map[string]cli.Flag{}
	for _, f := range cc.App.Flags {
		for _, n := range f.Names() {
			flags[n] = f
		}
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if cc.App.Metadata == nil {
		cc.App.Metadata = map[string]any{}
	}
	origins := map[string]string{}
	for _, key := range keys {
		at := func(format string, args ...any) error {
			return fmt.Errorf("config %s:%d: key %s: %s", path, keyLine(data, key), key, fmt.Sprintf(format, args...))
		}
		f, ok := flags[key]
		if !ok || key == "config" {
			return at("not a boxd setting (the keys are boxd's flag names, e.g. socket-group; see boxd --help)")
		}
		name := f.Names()[0]
		if cc.IsSet(name) {
			continue // the command line wins
		}
		var vals []string
		switch v := values[key].(type) {
		case []any:
			if _, ok := f.(*cli.StringSliceFlag); !ok {
				return at("a list, but %s takes one value", key)
			}
			for _, e := range v {
				s, err := scalar(e)
				if err != nil {
					return at("%v", err)
				}
				vals = append(vals, s)
			}
		default:
			s, err := scalar(v)
			if err != nil {
				return at("%v", err)
			}
			vals = []string{s}
		}
		for _, s := range vals {
			if err := cc.Set(name, s); err != nil {
				return at("%q is not a valid value: %v", s, err)
			}
		}
		origins[name] = fmt.Sprintf("config %s:%d: key %s", path, keyLine(data, key), key)
	}
	cc.App.Metadata[configOrigins] = origins
	return nil
}

// configOrigins is the App.Metadata key of where each flag set from the
// config file was set: flag name to "config FILE:LINE: key KEY".
const configOrigins = "boxd.config-origins"

// flagInError matches the flag an error of boxd's checks starts with.
var flagInError = regexp.MustCompile(`^--([a-z0-9-]+)`)

// fromConfig names the file, line and key of a value refused after the
// flags were parsed (a size out of range, say) when the value came from
// the config file: boxd's checks name the flag, as on the command line.
func fromConfig(cc *cli.Context, err error) error {
	if err == nil {
		return nil
	}
	origins, _ := cc.App.Metadata[configOrigins].(map[string]string)
	if m := flagInError.FindStringSubmatch(err.Error()); m != nil && origins[m[1]] != "" {
		return fmt.Errorf("%s: %w", origins[m[1]], err)
	}
	return err
}

// scalar spells a TOML value the way the flag would read it on the
// command line.
func scalar(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case time.Duration:
		return v.String(), nil
	default:
		return "", fmt.Errorf("a %T is not a value boxd takes (use a string, number, boolean or, for repeatable flags, a list)", v)
	}
}

// keyLine finds the line a top-level key is set on (or its table header),
// for error messages.
func keyLine(data []byte, key string) int {
	k := regexp.QuoteMeta(key)
	re := regexp.MustCompile(`^\s*((` + k + `|"` + k + `"|'` + k + `')\s*=|\[+\s*(` + k + `|"` + k + `")\s*[\].])`)
	for i, line := range strings.Split(string(data), "\n") {
		if re.MatchString(line) {
			return i + 1
		}
	}
	return 0
}
