// Package canon gives tool-call arguments one canonical byte form and digest,
// so that an approval is bound to exactly the arguments that were approved.
// Every digest of arguments in airlock comes from here.
package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

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
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:]), nil
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

func appendString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil {
				return nil, fmt.Errorf("canonical arguments: %w", err)
			}
			return append(b, q...), nil
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}
