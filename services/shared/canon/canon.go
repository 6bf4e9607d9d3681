// Package canon gives tool-call arguments one canonical byte form and digest,
// so that an approval is bound to exactly the arguments that were approved.
package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"
)

// JSON returns the canonical JSON of args: object keys sorted, no
// insignificant whitespace, numbers as float64 (as protobuf Struct holds
// them). A nil Struct is the empty object.
func JSON(args *structpb.Struct) ([]byte, error) {
	m := map[string]any{}
	if args != nil {
		m = args.AsMap()
	}
	// encoding/json sorts map keys, which makes the output canonical.
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("canonical arguments: %w", err)
	}
	return b, nil
}

// Digest is the hex SHA-256 of JSON(args).
func Digest(args *structpb.Struct) (string, error) {
	b, err := JSON(args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
