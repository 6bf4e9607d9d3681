// Package canon gives tool-call arguments one canonical byte form and digest,
// so that an approval is bound to exactly the arguments that were approved.
// Every digest of arguments in airlock comes from here.
package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
)

// JSON returns the canonical JSON of args: object keys sorted by their
// bytes, no insignificant whitespace, numbers as float64 (as protobuf Struct
// holds them), byte for byte what encoding/json writes for args.AsMap(). A
// nil Struct is the empty object; a NaN or infinity is an error.
func JSON(args *structpb.Struct) ([]byte, error) {
	return AppendJSON(make([]byte, 0, 256), args)
}

// AppendJSON appends JSON(args) to b. It writes straight from the Struct,
// without the detour through AsMap and reflection: a string it cannot vouch
// for (anything but printable ASCII without " \ < > &) is encoded by
// encoding/json itself, so escapes and invalid UTF-8 come out as there.
func AppendJSON(b []byte, args *structpb.Struct) ([]byte, error) {
	return appendStruct(b, args)
}

// Digest is the hex SHA-256 of JSON(args).
func Digest(args *structpb.Struct) (string, error) {
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	b, err := AppendJSON((*bp)[:0], args)
	if err != nil {
		return "", err
	}
	if cap(b) <= 64<<10 { // keep buffers of ordinary arguments, not of a huge one
		*bp = b
	}
	return hexSum(b), nil
}

// hexSum is the hex SHA-256 of b.
func hexSum(b []byte) string {
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// buffers hold the canonical JSON while it is hashed: Digest runs on every
// decision, approval and execution.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func appendStruct(b []byte, s *structpb.Struct) ([]byte, error) {
	fields := s.GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys) // encoding/json sorts map keys by their bytes, too
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendString(b, k); err != nil {
			return nil, err
		}
		b = append(b, ':')
		if b, err = appendValue(b, fields[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, v *structpb.Value) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue, nil:
		return append(b, "null"...), nil
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), nil
	case *structpb.Value_NumberValue:
		return appendFloat(b, k.NumberValue)
	case *structpb.Value_StringValue:
		return appendString(b, k.StringValue)
	case *structpb.Value_StructValue:
		return appendStruct(b, k.StructValue)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	default:
		return nil, fmt.Errorf("canonical arguments: value of unsupported kind %T", k)
	}
}

// appendFloat writes f as encoding/json writes a float64.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("canonical arguments: unsupported number %v: arguments must be finite", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// encoding/json writes e-07 as e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendString writes s as encoding/json does by default (AppendJSONString).
func appendString(b []byte, s string) ([]byte, error) {
	return AppendJSONString(b, s, false), nil
}

// AppendJSONString appends s as a JSON string without allocating: as
// encoding/json writes it by default — HTML-safe (<, > and & as \u003c …),
// \b and \f short forms, U+2028 and U+2029 escaped, invalid UTF-8 as
// \ufffd — or, with protoJSON, as protojson writes it: only ", \ and
// control characters escaped (\n \r \t short, others \u00XX), invalid
// UTF-8 as U+FFFD itself. Digests and audit payloads are written with it.
func AppendJSONString(b []byte, s string, protoJSON bool) []byte {
	b = append(b, '"')
	start := 0
	as := &verbatim[boolIndex(protoJSON)]
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if as[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case !protoJSON && c == '\b':
				b = append(b, '\\', 'b')
			case !protoJSON && c == '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1 && protoJSON:
			b = append(b, s[start:i]...)
			b = append(b, "\ufffd"...)
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case !protoJSON && (r == '\u2028' || r == '\u2029'):
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// verbatim marks the bytes AppendJSONString writes as they are, for each
// form (index boolIndex(protoJSON)): printable ASCII but ", \ and, in
// encoding/json's form, < > &. A table: most strings are nothing else.
var verbatim = func() (t [2][256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[1][c] = c != '"' && c != '\\'
		t[0][c] = t[1][c] && c != '<' && c != '>' && c != '&'
	}
	return t
}()

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Verbatim reports whether AppendJSONString writes s unchanged between its
// quotes (so s is also valid UTF-8).
func Verbatim(s []byte, protoJSON bool) bool {
	as := &verbatim[boolIndex(protoJSON)]
	for _, c := range s {
		if !as[c] {
			return false
		}
	}
	return true
}
