package teams_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

const chromiumPath = "/usr/bin/chromium"

// cardPage draws an Adaptive Card as Teams lays it out, for the elements
// airlock uses: RichTextBlock/TextRun (text set with textContent: a TextRun
// draws no markdown), Input.Text, and the actions (a ShowCard's form shown
// open below its button). Anything else is drawn as a red "unsupported"
// box, so the screenshot shows it.
const cardPage = `<!doctype html><html><head><meta charset="utf-8"><style>
body{font:14px "Segoe UI",system-ui,sans-serif;background:#f5f5f5;margin:16px}
.show .card{width:auto;box-shadow:none}
.card{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:14px 16px;width:620px;box-shadow:0 1px 2px #0002}
.rtb{margin:6px 0;white-space:pre-wrap;overflow-wrap:anywhere}.sep{border-top:1px solid #e6e6e6;padding-top:6px}
.actions{display:flex;flex-wrap:wrap;gap:8px;margin-top:12px}
button{font:inherit;padding:5px 12px;border:1px solid #c8c8c8;border-radius:4px;background:#fff;color:#424242}
button.positive{background:#5b5fc7;color:#fff;border-color:#5b5fc7}
.show{border-left:3px solid #5b5fc7;margin:8px 0 0;padding:4px 10px;background:#fafafa}
label{display:block;font-weight:600;margin:4px 0}textarea{width:95%;height:44px}
.bad{border:2px solid red;color:red}
</style></head><body><div id="out"></div><script>
const card = CARD_JSON;
function runEl(r){const s=document.createElement('span');s.textContent=r.text;
 if(r.weight==='Bolder')s.style.fontWeight='600'; if(r.fontType==='Monospace'){s.style.fontFamily='Consolas,monospace';s.style.fontSize='12.5px'}
 if(r.size==='Large')s.style.fontSize='18px'; if(r.size==='Small')s.style.fontSize='12px'; if(r.isSubtle)s.style.color='#777'; return s}
function el(e){const d=document.createElement('div');
 switch(e.type){
 case 'RichTextBlock': d.className='rtb'+(e.separator?' sep':''); if(e.id)d.id=e.id; for(const r of e.inlines){d.appendChild(r.type==='TextRun'?runEl(r):bad(r))} return d;
 case 'Input.Text': {const l=document.createElement('label');l.textContent=e.label+(e.isRequired?' *':'');d.appendChild(l);d.appendChild(document.createElement('textarea'));return d}
 } return bad(e)}
function bad(e){const d=document.createElement('div');d.className='bad';d.textContent='unsupported: '+e.type;return d}
function draw(c,into){const box=document.createElement('div');box.className='card';
 for(const e of c.body||[])box.appendChild(el(e));
 const acts=document.createElement('div');acts.className='actions';const shows=[];
 for(const a of c.actions||[]){const b=document.createElement('button');b.textContent=a.title+(a.type==='Action.OpenUrl'?' ↗':'');
  if(a.style==='positive')b.className='positive'; b.dataset.type=a.type; acts.appendChild(b);
  if(a.type==='Action.ShowCard'){const s=document.createElement('div');s.className='show';draw(a.card,s);shows.push(s)}}
 box.appendChild(acts); for(const s of shows)box.appendChild(s); into.appendChild(box)}
draw(card, document.getElementById('out'));
document.body.dataset.drawn='yes';
</script></body></html>`

// TestCardRendersInChromium draws a pending and a decided card in headless
// Chromium, keeps screenshots (tests/artifacts/teams-card-*.png) and the
// card JSON (tests/artifacts/teams-card.json), and checks in the drawn page
// that the argument with markdown and a bidi override shows as written.
func TestCardRendersInChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("chromium not found at %s: run `go tool task test:deps` (Debian: apt-get install chromium)", chromiumPath)
	}
	artifacts := filepath.Join("..", "..", "tests", "artifacts")
	must(t, os.MkdirAll(artifacts, 0o755))
	rec := pendingRecord(t, "call_render")
	pending := airlockteams.Render(rec, publicURL)
	raw, err := json.MarshalIndent(pending, "", "  ")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(artifacts, "teams-card.json"), raw, 0o644))

	rec.State = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED
	rec.DecidedBy = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "teams"}
	rec.Reason = "write it to config.d/ instead"
	for name, card := range map[string]airlockteams.Card{"pending": pending, "rejected": airlockteams.Render(rec, publicURL)} {
		t.Run(name, func(t *testing.T) {
			js, err := json.Marshal(card)
			must(t, err)
			page := filepath.Join(t.TempDir(), "card.html")
			must(t, os.WriteFile(page, []byte(strings.Replace(cardPage, "CARD_JSON", string(js), 1)), 0o644))
			dom, _, _ := strings.Cut(chromium(t, "--dump-dom", "file://"+page), "<script>") // what was drawn, not the script
			if !strings.Contains(dom, `data-drawn="yes"`) || strings.Contains(dom, `class="bad"`) {
				t.Fatalf("the card was not drawn whole:\n%s", dom)
			}
			if want := `"**bold** [click](https://evil.example) \u202eevil"`; !strings.Contains(dom, want) {
				t.Errorf("the drawn card does not show the argument as written (%s)", want)
			}
			shot := filepath.Join(artifacts, "teams-card-"+name+".png")
			chromium(t, "--screenshot="+shot, "--window-size=680,900", "--hide-scrollbars", "file://"+page)
			if st, err := os.Stat(shot); err != nil || st.Size() < 5000 {
				t.Fatalf("no screenshot at %s: %v", shot, err)
			}
			t.Logf("screenshot %s", shot)
		})
	}
}

// chromium runs headless Debian Chromium with args and returns its output.
func chromium(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--user-data-dir=" + t.TempDir(), "--allow-file-access-from-files"}
	out, err := exec.CommandContext(ctx, chromiumPath, append(base, args...)...).Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return string(out)
}
