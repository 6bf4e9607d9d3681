package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix starts every environment override.
const EnvPrefix = "AIRLOCK_"

// applyEnv sets every field whose AIRLOCK_<PATH> variable is present.
func applyEnv(cfg *Config, env []string) error {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, EnvPrefix) {
			vars[k] = v
		}
	}
	if len(vars) == 0 {
		return nil
	}
	if err := nearMisses(vars); err != nil {
		return err
	}
	return walk(reflect.ValueOf(cfg).Elem(), strings.TrimSuffix(EnvPrefix, "_"), vars)
}

// nearMisses refuses a variable whose name is not a setting's but is within
// two edits of one (AIRLOCK_CLICKHOUSE_DNS): as with an unknown key in the
// file, a typo must not leave the default silently in force. Other
// AIRLOCK_ names are left alone: clients and tools read some of their own
// (AIRLOCK_URL, AIRLOCK_TOKEN).
func nearMisses(vars map[string]string) error {
	known := EnvNames()
	set := make(map[string]bool, len(known))
	for _, n := range known {
		set[n] = true
	}
	var errs []error
	for name := range vars {
		if set[name] {
			continue
		}
		if best := Nearest(name, known, 2); best != "" {
			errs = append(errs, fmt.Errorf("environment %s is not a setting airlock knows: did you mean %s? Correct the name or unset it", name, best))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// EnvNames lists every AIRLOCK_<PATH> variable that sets a setting.
func EnvNames() []string {
	var names []string
	var list func(t reflect.Type, prefix string)
	list = func(t reflect.Type, prefix string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, ok := envName(prefix, f)
			if !ok {
				continue
			}
			if nested(f.Type) {
				list(f.Type, name)
				continue
			}
			names = append(names, name)
		}
	}
	list(reflect.TypeOf(Config{}), strings.TrimSuffix(EnvPrefix, "_"))
	return names
}

// envName is the variable that sets field f of the section named prefix
// (its yaml key upper-cased); false for a field the file cannot set.
func envName(prefix string, f reflect.StructField) (string, bool) {
	tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
	if tag == "" || tag == "-" {
		return "", false
	}
	return prefix + "_" + strings.ToUpper(tag), true
}

// nested reports a section of settings rather than a setting.
func nested(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t != reflect.TypeOf(time.Time{})
}

// Nearest is the name of known closest to name within edits edits (a typo
// of it: did you mean …?), "" when none is.
func Nearest(name string, known []string, edits int) string {
	best, dist := "", edits+1
	for _, n := range known {
		if d := editDistance(name, n, dist); d < dist {
			best, dist = n, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b
// (insertions, deletions, substitutions and swaps of neighbours), or limit
// when it is at least limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(b)], limit)
}

func walk(v reflect.Value, prefix string, vars map[string]string) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, ok := envName(prefix, f)
		if !ok {
			continue
		}
		fv := v.Field(i)
		if nested(f.Type) {
			if err := walk(fv, name, vars); err != nil {
				return err
			}
			continue
		}
		raw, ok := vars[name]
		if !ok {
			continue
		}
		if err := set(fv, raw); err != nil {
			return fmt.Errorf("environment %s=%q: %w", name, raw, err)
		}
	}
	return nil
}

func set(fv reflect.Value, raw string) error {
	if fv.Type() == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("not a duration (use e.g. 30s, 5m, 24h)")
		}
		fv.SetInt(int64(d))
		return nil
	}
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(raw)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("not a boolean (use true or false)")
		}
		fv.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, fv.Type().Bits())
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		fv.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(raw, 10, fv.Type().Bits())
		if err != nil {
			return fmt.Errorf("not a non-negative integer")
		}
		fv.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(raw, fv.Type().Bits())
		if err != nil {
			return fmt.Errorf("not a number")
		}
		fv.SetFloat(n)
	case reflect.Slice:
		if fv.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("this list can only be set in the config file")
		}
		var items []string
		for _, s := range strings.Split(raw, ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, s)
			}
		}
		fv.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("this setting can only be set in the config file")
	}
	return nil
}
