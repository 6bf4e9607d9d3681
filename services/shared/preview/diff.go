package preview

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/airlock-gate/airlock/services/shared/calls"
)

// maxDiffCells bounds the line-matching table of Diff (old lines × new
// lines of the part that differs); past it the differing part is shown
// removed and added whole, which is still a true diff, only not the
// shortest.
const maxDiffCells = 1 << 20

// contextLines is how many unchanged lines a hunk shows around a change.
const contextLines = 3

// Line is one line of a line diff: Op is " " (in both), "-" (only in the
// old text) or "+" (only in the new one).
type Line struct {
	Op, Text string
}

// Diff is the unified diff (3 lines of context) that turns old into new,
// with name in its headers ("/dev/null" stands for a file that does not
// exist when oldExists is false). It writes at most maxBytes (0: no bound)
// and reports whether it stopped there, so a huge file costs no more than
// the bound to show.
func Diff(name, old, new string, oldExists bool, maxBytes int) (string, bool) {
	from := quoteName("a/" + name)
	if !oldExists {
		from = "/dev/null"
	}
	w := &bounded{max: maxBytes}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", from, quoteName("b/"+name))
	ops := Lines(splitLines(old), splitLines(new))
	for i := 0; i < len(ops) && !w.full; {
		// Find the next change and the hunk around it.
		for i < len(ops) && ops[i].Op == " " {
			i++
		}
		if i == len(ops) {
			break
		}
		start := max(i-contextLines, 0)
		end := i
		for end < len(ops) {
			if ops[end].Op != " " {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].Op == " " {
				run++
			}
			if run == len(ops) || run-end > 2*contextLines {
				end = min(end+contextLines, len(ops))
				break
			}
			end = run
		}
		oldStart, newStart := position(ops, start)
		oldN, newN := 0, 0
		for _, o := range ops[start:end] {
			if o.Op != "+" {
				oldN++
			}
			if o.Op != "-" {
				newN++
			}
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", span(oldStart, oldN), span(newStart, newN))
		for _, o := range ops[start:end] {
			w.WriteString(o.Op + o.Text + "\n")
		}
		i = end
	}
	return w.String(), w.full
}

// quoteName is a file name for a diff header: as it is, or quoted with Go
// escapes (as git quotes one) when it holds a control character, a quote
// or a backslash, so a name with a line break cannot add header or hunk
// lines of its own.
func quoteName(name string) string {
	if strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '"' || r == '\\' }) < 0 {
		return name
	}
	return strconv.Quote(name)
}

// DiffLines reads a unified diff made by Diff as lines: the file headers
// and hunk headers have Op "@", every line of a hunk the Op of its first
// character. Only the lines before the first hunk are file headers, so a
// hunk line whose text starts with "++" or "--" stays an added or removed
// line (DiffStat counts it, the console colours it).
func DiffLines(diff string) []Line {
	var out []Line
	inHunk := false
	for _, l := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		op := " "
		switch {
		case strings.HasPrefix(l, "@@"):
			op, inHunk = "@", true
		case !inHunk:
			op = "@"
		case strings.HasPrefix(l, "+"), strings.HasPrefix(l, "-"):
			op = l[:1]
		}
		out = append(out, Line{Op: op, Text: l})
	}
	return out
}

// position is the 1-based line numbers in old and new where ops[i] is.
func position(ops []Line, i int) (int, int) {
	o, n := 1, 1
	for _, x := range ops[:i] {
		if x.Op != "+" {
			o++
		}
		if x.Op != "-" {
			n++
		}
	}
	return o, n
}

func span(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start-1)
	}
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// noNewline marks a last line without a line break (as diff(1) does), so
// that adding or removing the final line break is a change the diff shows.
const noNewline = "\n\\ No newline at end of file"

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if !strings.HasSuffix(s, "\n") {
		lines[len(lines)-1] += noNewline
	}
	return lines
}

// Lines is the line diff of a into b: the common start and end as they
// are, the middle by longest common subsequence when it is small enough
// (maxDiffCells), else removed and added whole.
func Lines(a, b []string) []Line {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []Line
	for _, l := range a[:pre] {
		ops = append(ops, Line{" ", l})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if len(ma)*len(mb) <= maxDiffCells {
		ops = append(ops, lcs(ma, mb)...)
	} else {
		for _, l := range ma {
			ops = append(ops, Line{"-", l})
		}
		for _, l := range mb {
			ops = append(ops, Line{"+", l})
		}
	}
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, Line{" ", l})
	}
	return ops
}

// lcs is the edit script of a into b by longest common subsequence.
func lcs(a, b []string) []Line {
	n, m := len(a), len(b)
	// t[i][j]: length of the LCS of a[i:] and b[j:].
	t := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return t[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i*(m+1)+j] = at(i+1, j+1) + 1
			} else {
				t[i*(m+1)+j] = max(at(i+1, j), at(i, j+1))
			}
		}
	}
	var ops []Line
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			ops = append(ops, Line{" ", a[i]})
			i++
			j++
		case at(i+1, j) >= at(i, j+1):
			ops = append(ops, Line{"-", a[i]})
			i++
		default:
			ops = append(ops, Line{"+", b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, Line{"-", a[i]})
	}
	for ; j < m; j++ {
		ops = append(ops, Line{"+", b[j]})
	}
	return ops
}

// bounded is a builder that stops taking text at max bytes (cut at a rune boundary).
type bounded struct {
	strings.Builder
	max  int
	full bool
}

func (w *bounded) Write(p []byte) (int, error) {
	w.WriteString(string(p))
	return len(p), nil
}

func (w *bounded) WriteString(s string) (int, error) {
	if w.full {
		return len(s), nil
	}
	if w.max > 0 && w.Len()+len(s) > w.max {
		w.Builder.WriteString(calls.Cut(s, w.max-w.Len()))
		w.full = true
		return len(s), nil
	}
	return w.Builder.WriteString(s)
}
