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

// diffLine is one line of a diff: Op is " ", "-" or "+" (and "@" for a
// unified diff's headers on the call page).
type diffLine = preview.Line

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

// lineDiff is the line diff of a into b (preview.Lines: bounded, so a
// call whose arguments hold many long edits costs a page linear time).
func lineDiff(a, b string) []diffLine {
	return preview.Lines(strings.Split(a, "\n"), strings.Split(b, "\n"))
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
	v.Lines = preview.DiffLines(p.GetText())
	return v
}
