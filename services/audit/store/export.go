package store

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-gate/airlock/services/shared/escape"
)

// Formats Export writes.
const (
	FormatCSV   = "csv"
	FormatJSON  = "json"  // one JSON array
	FormatJSONL = "jsonl" // one JSON object per line
)

// CSVHeader is the first line of a CSV export; each row follows in this order.
var CSVHeader = []string{"seq", "time", "event_id", "type", "agent_id", "thread_id", "call_id", "revision",
	"server", "tool", "actor_type", "actor_id", "actor_channel", "decision", "reason", "risk", "rule_id",
	"policy_revision", "decision_id", "args_digest", "latency_ms", "payload", "decided_by", "grant_id", "prev_hash", "hash"}

// CSVRecord is r as a CSV line in CSVHeader order. Every cell is escaped
// for a spreadsheet (escape.CSV): agents write reasons, ids and arguments,
// and a spreadsheet must never run one as a formula nor show it reordered.
func CSVRecord(r Row) []string {
	lat := ""
	if r.LatencyMS != nil {
		lat = strconv.FormatFloat(*r.LatencyMS, 'f', -1, 64)
	}
	cells := []string{strconv.FormatUint(r.Seq, 10), r.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), r.EventID, r.Type,
		r.Agent, r.Thread, r.Call, strconv.FormatUint(uint64(r.Revision), 10), r.Server, r.Tool, r.ActorType,
		r.ActorID, r.ActorChannel, r.Decision, r.Reason, r.Risk, r.RuleID, r.PolicyRevision, r.DecisionID,
		r.ArgsDigest, lat, r.Payload, r.DecidedBy, r.GrantID, r.PrevHash, r.Hash}
	for i, c := range cells {
		cells[i] = escape.CSV(c)
	}
	return cells
}

// Export writes every row matching f to w in format (csv, json or jsonl),
// streaming: memory does not grow with the number of rows. It returns the
// number of rows written. JSON keeps an agent's text whole but writes its
// bidi and zero-width characters as \u escapes (escape.JSON): an export is
// data, and decodes to the same strings, yet a terminal or editor showing
// it shows nothing reordered or hidden.
func Export(ctx context.Context, rd Reader, w io.Writer, format string, f Filter) (int, error) {
	n := 0
	switch format {
	case FormatCSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(CSVHeader); err != nil {
			return 0, err
		}
		err := rd.Each(ctx, f, func(r Row) error {
			n++
			return cw.Write(CSVRecord(r))
		})
		cw.Flush()
		if err == nil {
			err = cw.Error()
		}
		return n, err
	case FormatJSON, FormatJSONL:
		if format == FormatJSON {
			if _, err := io.WriteString(w, "["); err != nil {
				return 0, err
			}
		}
		err := rd.Each(ctx, f, func(r Row) error {
			b, err := json.Marshal(exportRow(r))
			if err != nil {
				return err
			}
			sep := "\n"
			if format == FormatJSON {
				sep = ""
				if n > 0 {
					sep = ",\n"
				} else {
					sep = "\n"
				}
				_, err = io.WriteString(w, sep)
				sep = ""
			}
			n++
			if err == nil {
				_, err = w.Write(escape.JSON(b)) // bidi and zero-width characters as \u escapes: the same JSON, nothing hidden
			}
			if err == nil && format == FormatJSONL {
				_, err = io.WriteString(w, "\n")
			}
			return err
		})
		if err != nil {
			return n, err
		}
		if format == FormatJSON {
			_, err = io.WriteString(w, "\n]\n")
		}
		return n, err
	default:
		return 0, fmt.Errorf("export format %q: use csv, json or jsonl", format)
	}
}

// exportRow renders the payload as JSON rather than a string inside JSON.
type exportedRow struct {
	Row
	Time    string          `json:"time"`
	Payload json.RawMessage `json:"payload"`
}

func exportRow(r Row) exportedRow {
	// A payload is valid UTF-8 as the audit service writes it; whatever
	// else a database holds is made valid, so the export stays JSON.
	p := json.RawMessage(strings.ToValidUTF8(r.Payload, "\uFFFD"))
	if !json.Valid(p) {
		b, _ := json.Marshal(r.Payload)
		p = b
	}
	return exportedRow{Row: r, Time: r.Time.UTC().Format(time.RFC3339Nano), Payload: p}
}
