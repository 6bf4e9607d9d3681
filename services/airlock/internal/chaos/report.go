package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteText prints the report for people.
func (r Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "airlock chaos — seed %d, %s schedule: %d calls in %.0fs, %d events (run took %.0fs)\n", r.Seed, r.Profile, r.Calls, r.LoadS, r.Events, r.TotalS)
	fmt.Fprintf(w, "layout: %s\n", r.Topology)
	rerun := fmt.Sprintf("airlock chaos --seed %d", r.Seed)
	if r.Profile == shortProfile.name {
		rerun += " --short"
	}
	if r.ClickHouseReplicas > 1 {
		rerun += fmt.Sprintf(" --clickhouse-replicas %d", r.ClickHouseReplicas)
	}
	fmt.Fprintf(w, "rerun:  %s\n\n", rerun)

	fmt.Fprintln(w, "calls by outcome")
	names := make([]string, 0, len(r.Outcomes))
	for k := range r.Outcomes {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		return r.Outcomes[names[i]] > r.Outcomes[names[j]] || r.Outcomes[names[i]] == r.Outcomes[names[j]] && names[i] < names[j]
	})
	for _, k := range names {
		fmt.Fprintf(w, "  %-44s %6d\n", k, r.Outcomes[k])
	}

	fmt.Fprintln(w, "\nchecks (each must be 0 / OK)")
	for _, c := range r.Checks {
		mark := "ok  "
		if c.Violated {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s %-58s %6s\n", mark, c.Name, c.Value)
		for _, e := range c.Examples {
			fmt.Fprintf(w, "         %s\n", strings.ReplaceAll(e, "\n", "\n         "))
		}
	}
	if r.Verify != "" {
		fmt.Fprintf(w, "  audit verify said: %s\n", firstLine(r.Verify))
	}

	fmt.Fprintln(w, "\nfaults (recovered: from the fault until a call submitted then completed; ClickHouse: from its restart until it caught up)")
	fmt.Fprintf(w, "  %7s  %-16s %-10s %6s  %10s  %17s\n", "at", "fault", "target", "for", "recovered", "slowest in flight")
	for _, f := range r.Faults {
		rec := "never"
		if f.RecoveredS >= 0 {
			rec = fmt.Sprintf("%.2fs", f.RecoveredS)
		}
		fmt.Fprintf(w, "  %6.1fs  %-16s %-10s %5.1fs  %10s  %16.2fs", f.AtS, f.Kind, f.Target, f.ForS, rec, f.SlowestInFlightS)
		if f.ReplicaKill && f.FailoverS >= 0 {
			fmt.Fprintf(w, "  the other replicas caught up in %.2fs", f.FailoverS)
		} else if f.ReplicaKill {
			fmt.Fprint(w, "  the other replicas did not catch up")
		}
		if f.Error != "" {
			fmt.Fprintf(w, "  error: %s", f.Error)
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "\ndecision (allowed/approved) to completion")
	fmt.Fprintf(w, "  all          n=%-5d p50 %8.1f ms   p99 %9.1f ms   max %9.1f ms\n", r.Latency.N, r.Latency.P50MS, r.Latency.P99MS, r.Latency.MaxMS)
	fmt.Fprintf(w, "  under fault  n=%-5d p50 %8.1f ms   p99 %9.1f ms   max %9.1f ms\n", r.UnderFault.N, r.UnderFault.P50MS, r.UnderFault.P99MS, r.UnderFault.MaxMS)
	for _, s := range r.Slowest {
		fmt.Fprintf(w, "  slowest: %s\n", s)
	}

	fmt.Fprintln(w, "\nalso")
	for _, i := range r.Info {
		fmt.Fprintf(w, "  %-66s %6s\n", i.Name, i.Value)
		for _, e := range i.Examples {
			fmt.Fprintf(w, "         %s\n", e)
		}
	}
	fmt.Fprintln(w)
	if r.Violations == 0 {
		fmt.Fprintln(w, "PASS: no violations")
		return
	}
	fmt.Fprintf(w, "FAIL: %d violated checks; logs, stores and report.json are in %s\n", r.Violations, r.RunDir)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// JSON is the report for machines.
func (r Report) JSON() []byte { return marshalJSON(r) }
