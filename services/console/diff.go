package console

import (
	"strings"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/preview"

	"google.golang.org/protobuf/types/known/structpb"
)

// textDiff is an old/new comparison shown on the call page.
type textDiff struct {
	Label string
	Lines []diffLine
}

// diffLine is one line of a diff: Op is " ", "-" or "+".
type diffLine struct {
	Op, Text string
}

// Argument names edit-style tools use for the text they replace and its
// replacement: MCP filesystem's edit_file (edits[].oldText/newText), Claude
// Code's Edit (old_string/new_string), str_replace editors (old_str/new_str).
var editPairs = [][2]string{
	{"oldText", "newText"}, {"old_text", "new_text"}, {"old_string", "new_string"},
	{"old_str", "new_str"}, {"old", "new"}, {"before", "after"},
}

// editDiffs finds old/new text pairs in the arguments of an edit-style tool,
// at the top level and in an "edits" list, and diffs each.
func editDiffs(args *structpb.Struct) []textDiff {
	if args == nil {
		return nil
	}
	m := args.AsMap()
	var out []textDiff
	add := func(label string, obj map[string]any) {
		for _, p := range editPairs {
			oldV, ok1 := obj[p[0]].(string)
			newV, ok2 := obj[p[1]].(string)
			if ok1 && ok2 {
				out = append(out, textDiff{Label: label, Lines: lineDiff(oldV, newV)})
				return
			}
		}
	}
	label := "edit"
	if path, ok := m["path"].(string); ok {
		label = path
	} else if path, ok := m["file_path"].(string); ok {
		label = path
	}
	add(label, m)
	if edits, ok := m["edits"].([]any); ok {
		for _, e := range edits {
			if obj, ok := e.(map[string]any); ok {
				add(label, obj)
			}
		}
	}
	return out
}

// maxDiffCells bounds a line diff's table (lines of old × lines of new):
// past it the diff shows old then new, so that a call whose arguments hold
// many long edits costs a page linear, not quadratic, time.
const maxDiffCells = 1 << 20

// lineDiff is a longest-common-subsequence line diff; past maxDiffCells it
// shows old then new.
func lineDiff(a, b string) []diffLine {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(al)*len(bl) > maxDiffCells {
		var out []diffLine
		for _, l := range al {
			out = append(out, diffLine{"-", l})
		}
		for _, l := range bl {
			out = append(out, diffLine{"+", l})
		}
		return out
	}
	n, m := len(al), len(bl)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []diffLine
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case al[i] == bl[j]:
			out = append(out, diffLine{" ", al[i]})
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, diffLine{"-", al[i]})
			i++
		default:
			out = append(out, diffLine{"+", bl[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, diffLine{"-", al[i]})
	}
	for ; j < m; j++ {
		out = append(out, diffLine{"+", bl[j]})
	}
	return out
}

// previewView is a call's preview as the call page shows it: a unified
// diff as coloured lines, any other preview as text. html/template escapes
// every line, and HTMLPage makes every hidden character visible.
type previewView struct {
	Has                      bool
	Summary, Digest, Against string
	// Why there is none, when there is none.
	Why string
	// Lines of a diff; Text of any other preview.
	Lines     []diffLine
	Text      string
	Truncated bool
}

func newPreviewView(p *airlockv1.Preview) previewView {
	v := previewView{Has: preview.Has(p), Summary: preview.Summary(p), Why: p.GetUnavailable(), Digest: p.GetDigest(),
		Against: p.GetPrecondition(), Truncated: p.GetTruncated()}
	if !v.Has {
		return v
	}
	if p.GetKind() != preview.KindDiff {
		v.Text = p.GetText()
		return v
	}
	for _, l := range strings.Split(strings.TrimSuffix(p.GetText(), "\n"), "\n") {
		op := " "
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "@@"):
			op = "@"
		case strings.HasPrefix(l, "+"), strings.HasPrefix(l, "-"):
			op = l[:1]
		}
		v.Lines = append(v.Lines, diffLine{Op: op, Text: l})
	}
	return v
}
