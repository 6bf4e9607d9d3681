package svc

import (
	"io/fs"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// A process running services collects garbage at runtime.gc_percent,
// unless the operator set GOGC or the setting leaves Go's own.
func TestTheGCTargetIsTheConfiguredOneUnlessGOGCIsSet(t *testing.T) {
	for _, tt := range []struct {
		name    string
		percent int
		gogcSet bool
		want    int
		set     bool
	}{
		{"the_default", config.Default().Runtime.GCPercent, false, 400, true},
		{"a_configured_target", 150, false, 150, true},
		{"gogc_set_wins", 150, true, 0, false},
		{"zero_leaves_gos_own", 0, false, 0, false},
		{"negative_leaves_gos_own", -1, false, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, set := gcPercent(config.Runtime{GCPercent: tt.percent}, tt.gogcSet)
			if got != tt.want || set != tt.set {
				t.Fatalf("gcPercent(%d, GOGC set %v) = %d, %v; want %d, %v", tt.percent, tt.gogcSet, got, set, tt.want, tt.set)
			}
		})
	}
}

// A process in a container with a memory limit, and no GOMEMLIMIT, gives
// the Go runtime a memory limit of 90% of the container's, so that the
// collector works harder before the container is killed.
func TestTheMemoryLimitIsNinetyPercentOfTheContainersUnlessGOMEMLIMITIsSet(t *testing.T) {
	for _, tt := range []struct {
		name          string
		files         map[string]string
		gomemlimitSet bool
		want          goMemoryLimit
		set           bool
	}{
		{"a_cgroup_v2_limit", map[string]string{cgroupV2MemoryMax: "1073741824\n"}, false,
			goMemoryLimit{limit: 966367642, cgroup: 1073741824, file: cgroupV2MemoryMax}, true},
		{"a_cgroup_v1_limit", map[string]string{cgroupV1MemoryMax: "536870912\n"}, false,
			goMemoryLimit{limit: 483183821, cgroup: 536870912, file: cgroupV1MemoryMax}, true},
		{"gomemlimit_set_wins", map[string]string{cgroupV2MemoryMax: "1073741824\n"}, true, goMemoryLimit{}, false},
		{"cgroup_v2_without_a_limit", map[string]string{cgroupV2MemoryMax: "max\n", cgroupV1MemoryMax: "536870912\n"}, false, goMemoryLimit{}, false},
		{"cgroup_v1_without_a_limit", map[string]string{cgroupV1MemoryMax: "9223372036854771712\n"}, false, goMemoryLimit{}, false},
		{"no_cgroup", map[string]string{}, false, goMemoryLimit{}, false},
		{"a_file_that_does_not_read_as_a_limit", map[string]string{cgroupV2MemoryMax: "lots\n"}, false, goMemoryLimit{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			read := func(name string) ([]byte, error) {
				data, ok := tt.files[name]
				if !ok {
					return nil, fs.ErrNotExist
				}
				return []byte(data), nil
			}
			got, set := memoryLimit(tt.gomemlimitSet, read)
			if got != tt.want || set != tt.set {
				t.Fatalf("memoryLimit(GOMEMLIMIT set %v, %v) = %+v, %v; want %+v, %v", tt.gomemlimitSet, tt.files, got, set, tt.want, tt.set)
			}
		})
	}
}
