package calls

import "strings"

// CleanPath reports whether path has no "." or ".." segment, a backslash
// separating segments as a "/" does (a tool may read it so: the demo tools
// do, as Windows does): a\..\b is refused like a/../b. An argument glob (of
// a rule or a standing grant) matches only a clean path, so what it allows
// is the path the tool uses (airlock.rego's clean).
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
