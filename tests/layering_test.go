package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// The pure parts of airlock — the approval state machine, the audit row
// builder, the event codec — depend on no broker, web framework or
// database client, so they are tested without one and cannot grow a hidden
// dependency on one (STYLE: the domain knows nothing of NATS, echo or
// ClickHouse; adapters implement its interfaces).
func TestPurePackagesDependOnNoBrokerWebOrDatabase(t *testing.T) {
	pure := []string{
		"github.com/airlock-gate/airlock/services/approval/internal/domain",
		"github.com/airlock-gate/airlock/services/audit/record",
		"github.com/airlock-gate/airlock/services/shared/envelope",
	}
	forbidden := []string{
		"github.com/nats-io/nats.go",
		"github.com/nats-io/nats-server",
		"github.com/labstack/echo",
		"github.com/ClickHouse/clickhouse-go",
		"net/http",
	}
	for _, pkg := range pure {
		t.Run(pkg[strings.LastIndex(pkg, "/")+1:], func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 5 {
				t.Fatalf("go list -deps %s listed only %v", pkg, deps)
			}
			for _, dep := range deps {
				for _, f := range forbidden {
					if dep == f || strings.HasPrefix(dep, f+"/") {
						t.Errorf("%s depends on %s", pkg, dep)
					}
				}
			}
		})
	}
}
