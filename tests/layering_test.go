package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// The pure parts of airlock — the approval state machine, the audit row
// builder, the policy evaluator, the event codec — depend on no broker, web framework or
// database client, so they are tested without one and cannot grow a hidden
// dependency on one (STYLE: the domain knows nothing of NATS, echo or
// ClickHouse; adapters implement its interfaces).
func TestPurePackagesDependOnNoBrokerWebOrDatabase(t *testing.T) {
	// OPA's evaluator itself imports net/http (for http.send), so the
	// policy evaluator is held only to no broker, web framework or database.
	const http = "net/http"
	pure := map[string][]string{
		"github.com/airlock-gate/airlock/services/approval/internal/domain": {http},
		"github.com/airlock-gate/airlock/services/audit/record":             {http},
		"github.com/airlock-gate/airlock/services/shared/envelope":          {http},
		"github.com/airlock-gate/airlock/services/policy/decide":            nil,
	}
	for pkg, also := range pure {
		forbidden := append([]string{
			"github.com/nats-io/nats.go",
			"github.com/nats-io/nats-server",
			"github.com/labstack/echo",
			"github.com/ClickHouse/clickhouse-go",
		}, also...)
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
