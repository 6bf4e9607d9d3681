package calls

import (
	"path"
	"strings"
)

// CleanPath reports whether path has no "." or ".." segment, a backslash
// separating segments as a "/" does (a tool may read it so: the demo tools
// do, as Windows does): a\..\b is refused like a/../b. An argument glob (of
// an allowing rule or a standing grant) matches only a clean path, so what
// it allows is the path the tool uses (airlock.rego's clean).
func CleanPath(path string) bool {
	for s := range strings.SplitSeq(strings.ReplaceAll(path, `\`, "/"), "/") {
		if s == "." || s == ".." {
			return false
		}
	}
	return true
}

// EndsInSeparator reports whether path ends in / or \ (airlock.rego's
// trailing_separator): it names a directory, not something under it, so an
// allowing glob never matches it.
func EndsInSeparator(path string) bool {
	return strings.HasSuffix(path, "/") || strings.HasSuffix(path, `\`)
}

// LexicalPath is p resolved lexically, as a tool that joins or cleans it
// before opening it reads it: a backslash read as "/", then path.Clean (repeated separators collapsed,
// "." dropped, ".." resolved, no trailing separator; "" is "."). climbs
// reports a relative path whose ".." goes above where it starts: where it
// ends depends on the working directory, so a restricting glob matches it
// (airlock.rego's lexical and climbs_above_start). A path already in that
// form is returned as it is, without allocating.
func LexicalPath(p string) (clean string, climbs bool) {
	clean = path.Clean(strings.ReplaceAll(p, `\`, "/"))
	return clean, clean == ".." || strings.HasPrefix(clean, "../")
}
