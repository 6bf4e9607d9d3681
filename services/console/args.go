package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
)

// encodeJSON keeps <, > and & as they are: the text is shown to a person
// (html/template escapes it for the page), and \u003c would hide what the
// agent actually sent. What would not show as itself (a bidi override, a
// zero-width space) is escaped (escape.Visible): JSON keeps it raw.
func encodeJSON(v any, indent string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("(cannot be shown as JSON: %v)", err)
	}
	return escape.Visible(strings.TrimSuffix(buf.String(), "\n"))
}

// argsText renders arguments pretty and on one line. A value JSON cannot
// hold is shown as a marker and named in problems (calls.Plain): the
// arguments always render.
func argsText(s *structpb.Struct) (pretty, compact string, problems []string) {
	if s == nil {
		return "{}", "{}", nil
	}
	m, problems := calls.Plain(s)
	for _, k := range slices.Sorted(maps.Keys(s.GetFields())) {
		if strings.IndexFunc(k, func(r rune) bool { return r > unicode.MaxASCII }) >= 0 {
			problems = append(problems, fmt.Sprintf("the argument name %s is not plain ASCII: it may look like another name (%s)", escape.Visible(strconv.Quote(k)), strconv.QuoteToASCII(k)))
		}
	}
	pretty, compact = encodeJSON(m, "  "), encodeJSON(m, "")
	if len(compact) > 160 {
		compact = calls.Cut(compact, 157) + "..."
	}
	return pretty, compact, problems
}
