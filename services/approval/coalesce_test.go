package approval

import (
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// Each channel announces notify_burst of an agent's calls at once and one
// more per notify_refill; the rest are counted for one digest, and other
// agents and channels have their own shares.
func TestAnAgentsAnnouncementsAreBoundedPerChannel(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name    string
		after   time.Duration // since start, of the take checked
		taken   int           // takes of bot on mail before it, at start
		channel string
		agent   string
		want    bool
	}{
		{"within the burst", 0, 2, "mail", "bot", true},
		{"past the burst", 0, 3, "mail", "bot", false},
		{"another agent has its own share", 0, 3, "mail", "victim", true},
		{"another channel has its own share", 0, 3, "slack", "bot", true},
		{"one more after a refill", 10 * time.Second, 3, "mail", "bot", true},
		{"not before the refill", 9 * time.Second, 3, "mail", "bot", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := start
			c := newCoalescer(3, 10*time.Second, func() time.Time { return now })
			for range tt.taken {
				c.take("mail", "bot")
			}
			now = start.Add(tt.after)
			if got := c.take(tt.channel, tt.agent); got != tt.want {
				t.Fatalf("take(%s, %s) = %v, want %v", tt.channel, tt.agent, got, tt.want)
			}
		})
	}
}

func TestCoalescedCallsMakeOneDigestUntilTaken(t *testing.T) {
	c := newCoalescer(1, time.Second, time.Now)
	rec := func(id string) *airlockv1.ApprovalRecord {
		return &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: id}}
	}
	if !c.coalesce("mail", rec("a")) || c.coalesce("mail", rec("b")) || c.coalesce("mail", rec("c")) {
		t.Fatal("only the first coalesced call since the last digest schedules one")
	}
	d, ok := c.digest("mail", "bot")
	if !ok || d.Calls != 3 || d.Agent != "bot" || d.Latest.GetCall().GetCallId() != "c" {
		t.Fatalf("digest %+v %v, want 3 calls of bot, the last c", d, ok)
	}
	if _, ok := c.digest("mail", "bot"); ok {
		t.Fatal("a digest was given twice")
	}
	if !c.coalesce("mail", rec("d")) {
		t.Fatal("the first call after a digest does not schedule the next")
	}
}
