package calls

import (
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func TestRiskWordsRoundTrip(t *testing.T) {
	for r := airlockv1.Risk_RISK_LOW; r <= airlockv1.Risk_RISK_CRITICAL; r++ {
		if got := ParseRisk(RiskName(r)); got != r {
			t.Errorf("ParseRisk(RiskName(%v)) = %v", r, got)
		}
	}
	tests := []struct {
		in   string
		want airlockv1.Risk
	}{{"HIGH", airlockv1.Risk_RISK_HIGH}, {"RISK_CRITICAL", airlockv1.Risk_RISK_CRITICAL}, {" low ", airlockv1.Risk_RISK_LOW}, {"severe", airlockv1.Risk_RISK_UNSPECIFIED}, {"", airlockv1.Risk_RISK_UNSPECIFIED}}
	for _, tt := range tests {
		if got := ParseRisk(tt.in); got != tt.want {
			t.Errorf("ParseRisk(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if RiskName(airlockv1.Risk_RISK_UNSPECIFIED) != "unrated" {
		t.Error("an unspecified risk should read unrated")
	}
}

func TestToolName(t *testing.T) {
	if ToolName("fs", "read_file") != "fs__read_file" || ToolName("", "read_file") != "read_file" {
		t.Fatal("ToolName")
	}
}
