package calls

import (
	"iter"
	"strings"
)

// NameWords yields the words of a tool or argument name as airlock.rego's
// tool_words splits a tool name: at runs of _ . - and before an ASCII
// capital that follows a lower-case letter or digit, lower-cased, empty
// words dropped (delete_file, deleteFile: delete file). The policy matches
// rules' tool words with it and the suggestions read argument names with
// it, so both see the same words. (Hand-written: the policy runs it on
// every decision, and a regexp costs more than the rest of the input; an
// iterator, so that matching allocates no list of words.)
func NameWords(name string) iter.Seq[string] {
	return func(yield func(string) bool) {
		start := 0
		for i := 0; i <= len(name); i++ {
			end := -1 // where a word ends before i, if one does
			next := start
			switch {
			case i == len(name):
				end = i
			case name[i] == '_' || name[i] == '.' || name[i] == '-':
				end, next = i, i+1
			case name[i] >= 'A' && name[i] <= 'Z' && i > 0 && (name[i-1] >= 'a' && name[i-1] <= 'z' || name[i-1] >= '0' && name[i-1] <= '9'):
				end, next = i, i
			}
			if end < 0 {
				continue
			}
			if end > start && !yield(strings.ToLower(name[start:end])) {
				return
			}
			start = next
		}
	}
}
