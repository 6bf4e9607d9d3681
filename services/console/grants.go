package console

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/grant"
)

// "Always allow" pins every argument of the call to its exact value by
// default: a grant made in a hurry allows exactly the call the reviewer
// saw, and nothing that merely resembles it. The reviewer widens it
// explicitly, argument by argument (a glob for a string, a range for a
// number, or any value), and
// sees the final scope in words before confirming. Pinned values are taken
// from the call itself on the server, never from the form.

// Argument modes of the form.
const (
	modeExact  = "exact"
	modeGlob   = "glob"
	modePrefix = "prefix"
	modeRange  = "range"
	modeAny    = "any"
)

// grantArgs lists the call's top-level arguments for the form, each pinned.
func grantArgs(rec *airlockv1.ApprovalRecord) []grantArg {
	fields := rec.GetCall().GetArguments().GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]grantArg, 0, len(keys))
	for i, k := range keys {
		v := fields[k]
		a := grantArg{Index: i, Pointer: "/" + calls.EscapePointer(k), Value: grant.ValueJSON(v), Mode: modeExact}
		if n, ok := v.GetKind().(*structpb.Value_NumberValue); ok {
			a.IsNumber, a.RangeMin, a.RangeMax = true, grant.Number(n.NumberValue), grant.Number(n.NumberValue)
		}
		if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			a.IsString, a.Multiline = true, strings.ContainsAny(s.StringValue, "\n\r")
			if p := calls.CommandPrefix(s.StringValue, 2); p != "" && k == "command" {
				a.Command, a.Prefix = true, p
			}
		}
		out = append(out, a)
	}
	return out
}

// grantFromForm reads the "always allow" form against the call's record:
// each argument exact (its value from the record), a glob, a command
// prefix, a numeric range, or any value;
// extra "pointer = glob" lines; no other arguments unless unticked.
func grantFromForm(c echo.Context, rec *airlockv1.ApprovalRecord) (grantInput, []grantArg, string, error) {
	in := grantInput{FromAgent: rec.GetCall().GetAgentId(), FromCall: rec.GetCall().GetCallId(), FromRevision: max(rec.GetCall().GetRevision(), 1),
		Values: map[string]*structpb.Value{}, Globs: map[string]string{}, Prefixes: map[string]string{}, OnlyListed: c.FormValue("only_listed") != ""}
	args := grantArgs(rec)
	fields := rec.GetCall().GetArguments().GetFields()
	for i := range args {
		a := &args[i]
		idx := strconv.Itoa(a.Index)
		a.Mode, a.Glob = c.FormValue("mode_"+idx), strings.TrimSpace(c.FormValue("glob_"+idx))
		if p := strings.TrimSpace(c.FormValue("prefix_" + idx)); p != "" {
			a.Prefix = p
		}
		if a.Mode == modeRange {
			a.RangeMin, a.RangeMax = strings.TrimSpace(c.FormValue("min_"+idx)), strings.TrimSpace(c.FormValue("max_"+idx))
		}
		key := calls.PointerTokens(a.Pointer)[0]
		switch a.Mode {
		case modeExact, "":
			a.Mode = modeExact
			in.Values[a.Pointer] = fields[key]
		case modeGlob:
			if !a.IsString {
				return in, args, "", apierr.New(apierr.InvalidRequest, "argument %s is not text, so no glob can match it: pin it exactly or allow any value", a.Pointer)
			}
			if a.Glob == "" {
				return in, args, "", apierr.New(apierr.InvalidRequest, "argument %s: give the glob its value must match, e.g. reports/*.txt", a.Pointer)
			}
			in.Globs[a.Pointer] = a.Glob
		case modePrefix:
			if !a.Command {
				return in, args, "", apierr.New(apierr.InvalidRequest, "argument %s is not a plain shell command, so no command prefix can match it: pin it exactly", a.Pointer)
			}
			in.Prefixes[a.Pointer] = a.Prefix
		case modeRange:
			if !a.IsNumber {
				return in, args, "", apierr.New(apierr.InvalidRequest, "argument %s is not a number, so no range can hold it: pin it exactly", a.Pointer)
			}
			lo, errLo := strconv.ParseFloat(a.RangeMin, 64)
			hi, errHi := strconv.ParseFloat(a.RangeMax, 64)
			if errLo != nil || errHi != nil {
				return in, args, "", apierr.New(apierr.InvalidRequest, "argument %s: give the range's two ends as numbers, e.g. from 1 to 10", a.Pointer)
			}
			if in.Ranges == nil {
				in.Ranges = map[string]*airlockv1.NumberRange{}
			}
			in.Ranges[a.Pointer] = &airlockv1.NumberRange{Min: lo, Max: hi}
		case modeAny:
			in.Any = append(in.Any, a.Pointer)
		default:
			return in, args, "", apierr.New(apierr.InvalidRequest, "argument %s: choose exactly, matching a glob, starting with a command prefix, within a range, or any value", a.Pointer)
		}
	}
	extra := c.FormValue("extra")
	more, err := parseGlobs(extra)
	if err != nil {
		return in, args, extra, err
	}
	for ptr, glob := range more {
		if _, pinned := in.Values[ptr]; pinned {
			return in, args, extra, apierr.New(apierr.InvalidRequest, "argument %s is pinned exactly above and matched by a glob below: keep one", ptr)
		}
		in.Globs[ptr] = glob
	}
	uses, err := strconv.Atoi(strings.TrimSpace(firstNonEmpty(c.FormValue("uses"), "0")))
	if err != nil || uses < 0 {
		return in, args, extra, apierr.New(apierr.InvalidRequest, "uses must be a whole number, 0 for unlimited")
	}
	hours, err := strconv.Atoi(strings.TrimSpace(firstNonEmpty(c.FormValue("expires_hours"), "0")))
	if err != nil || hours < 0 {
		return in, args, extra, apierr.New(apierr.InvalidRequest, "expiry must be a whole number of hours, 0 for none")
	}
	in.Uses, in.TTL = uses, time.Duration(hours)*time.Hour
	return in, args, extra, nil
}

// parseGlobs reads "pointer = glob" lines.
func parseGlobs(raw string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(raw, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !strings.HasPrefix(k, "/") || v == "" {
			return nil, apierr.New(apierr.InvalidRequest, "argument constraint on line %d must read \"/pointer = glob\", e.g. \"/path = /tmp/**\"", i+1)
		}
		out[k] = v
	}
	return out, nil
}

// grantRecord reads the call a grant form is about (query or form values).
func (con *Console) grantRecord(c echo.Context, agent, from, rev string) (*airlockv1.ApprovalRecord, error) {
	r, err := revisionParam(rev)
	if err != nil {
		return nil, err
	}
	return con.use.decidable(c.Request().Context(), principal(c), agent, from, r)
}

func (con *Console) newGrantPage(c echo.Context) error {
	rec, err := con.grantRecord(c, c.QueryParam("agent"), c.QueryParam("from"), c.QueryParam("rev"))
	if err != nil {
		return err
	}
	v := &grantFormView{layout: layout{Title: "Always allow", Nav: "grants"}, Call: newCallView(rec), Args: grantArgs(rec), OnlyListed: true, Uses: 10, Hours: 24}
	v.FromRevision = v.Call.Revision
	in := grantInput{Values: map[string]*structpb.Value{}, OnlyListed: true, Uses: v.Uses, TTL: time.Duration(v.Hours) * time.Hour}
	for k, val := range rec.GetCall().GetArguments().GetFields() {
		in.Values["/"+calls.EscapePointer(k)] = val
	}
	v.Scope = grant.Describe(con.use.grant(rec, in))
	return con.render(c, http.StatusOK, "grant_new", v)
}

// formGrant reads the form's call and what it would grant.
func (con *Console) formGrant(c echo.Context) (*airlockv1.ApprovalRecord, grantInput, *grantFormView, error) {
	rec, err := con.grantRecord(c, c.FormValue("agent"), c.FormValue("from"), c.FormValue("from_revision"))
	if err != nil {
		return nil, grantInput{}, nil, err
	}
	in, args, extra, err := grantFromForm(c, rec)
	v := &grantFormView{layout: layout{Title: "Always allow", Nav: "grants"}, Call: newCallView(rec), Args: args, OnlyListed: in.OnlyListed,
		Extra: extra, Uses: in.Uses, Hours: int(in.TTL / time.Hour)}
	v.FromRevision = v.Call.Revision
	if err == nil {
		v.Scope = grant.Describe(con.use.grant(rec, in))
	}
	return rec, in, v, err
}

// grantScope answers the scope in words of the form as it stands (the
// form's script shows it as the reviewer changes it); nothing is created.
func (con *Console) grantScope(c echo.Context) error {
	_, _, v, err := con.formGrant(c)
	if err != nil {
		return c.String(http.StatusOK, escape.Visible("Not a valid grant yet: "+apierr.MessageOf(err)))
	}
	return c.String(http.StatusOK, escape.Visible(v.Scope))
}

func (con *Console) createGrantForm(c echo.Context) error {
	_, in, v, err := con.formGrant(c)
	if err == nil {
		var g *airlockv1.StandingGrant
		if g, err = con.use.createGrant(c.Request().Context(), principal(c), channel(c), in); err == nil {
			return con.flashAndRedirect(c, "/grants", "standing grant "+g.GetId()+" created: "+grant.Describe(g))
		}
	}
	if v == nil || apierr.CodeOf(err) != apierr.InvalidRequest {
		return err
	}
	// Show the form again as it was filled in, with what to fix.
	v.Error = apierr.MessageOf(err)
	return con.render(c, http.StatusBadRequest, "grant_new", v)
}
