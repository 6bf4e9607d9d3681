package console

import (
	"cmp"
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

// argsText renders arguments pretty and on one line, each bounded
// (calls.JSONText): pretty past calls.ShownArgumentsBytes ends with a
// marker saying how much is shown and where the whole arguments are (raw,
// the call's JSON), so a page costs the same whatever an agent sent. A
// value JSON cannot hold is shown as a marker and named in problems
// (calls.Plain): the arguments always render.
func argsText(s *structpb.Struct, raw string) (pretty, compact string, problems []string, whole bool) {
	if s == nil {
		return "{}", "{}", nil, true
	}
	if !calls.Finite(s) {
		_, problems = calls.Plain(s)
	}
	for _, k := range slices.Sorted(maps.Keys(s.GetFields())) {
		if strings.IndexFunc(k, func(r rune) bool { return r > unicode.MaxASCII }) >= 0 {
			problems = append(problems, fmt.Sprintf("the argument name %s is not plain ASCII: it may look like another name (%s)", escape.Visible(strconv.Quote(k)), strconv.QuoteToASCII(k)))
		}
	}
	pretty, whole = calls.JSONText(s, "  ", calls.ShownArgumentsBytes)
	pretty = escape.Visible(pretty)
	if !whole {
		pretty += "\n" + calls.CutMarker(calls.ShownArgumentsBytes, s, cmp.Or(raw, "the call's JSON"))
	}
	compact, compactWhole := calls.JSONText(s, "", 160)
	compact = escape.Visible(compact)
	if !compactWhole || len(compact) > 160 {
		compact = calls.Cut(compact, 157) + "..."
	}
	return pretty, compact, problems, whole
}
