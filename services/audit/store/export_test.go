package store

import (
	"testing"
)

func TestCSVCellsNeverStartAFormula(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"an_equals_sign_is_quoted", `=HYPERLINK("http://evil.example","click")`, `'=HYPERLINK("http://evil.example","click")`},
		{"a_plus_is_quoted", "+1+1", "'+1+1"},
		{"a_minus_is_quoted", "-2+3", "'-2+3"},
		{"an_at_sign_is_quoted", "@SUM(A1)", "'@SUM(A1)"},
		{"a_leading_tab_is_quoted", "\t=1", "'\t=1"},
		{"a_leading_carriage_return_is_quoted", "\r=1", "'\r=1"},
		{"plain_text_is_kept", "writes need a person", "writes need a person"},
		{"a_formula_later_in_the_text_is_kept", "a=b", "a=b"},
		{"an_empty_cell_is_kept", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeutraliseCell(tt.in); got != tt.want {
				t.Errorf("NeutraliseCell(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	row := CSVRecord(Row{Seq: 7, Reason: "=cmd|' /C calc'!A0", Agent: "bot", Call: "@c"})
	for i, cell := range row {
		if cell != "" && (cell[0] == '=' || cell[0] == '@') {
			t.Errorf("column %s starts a formula: %q", CSVHeader[i], cell)
		}
	}
}
