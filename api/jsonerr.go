package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
)

// describeJSON says what is wrong with a JSON document in the request's
// own terms (the field's JSON path and the JSON type it wants), never in
// Go's (encoding/json names the Go struct and type: "Go struct field
// SearchRequest.limit of type int"). subject names the document when the
// fault is at its top ("body", "claim").
func describeJSON(err error, subject string) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return describeTypeError(te, subject)
	case errors.As(err, &se):
		return fmt.Sprintf("%s is not valid JSON: %s (at byte %d)", subject, se.Error(), se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return subject + " is not valid JSON: it ends too early"
	}
	return fmt.Sprintf("%s is not valid JSON: %v", subject, err)
}

func describeTypeError(te *json.UnmarshalTypeError, subject string) string {
	what := subject
	if te.Field != "" {
		what = fmt.Sprintf("field %q", te.Field)
	}
	// Value is "number <literal>" when a number did not fit the field.
	got, lit, isNumber := strings.Cut(te.Value, " ")
	if isNumber && got == "number" {
		if lo, hi, ok := intRange(te.Type); ok {
			if strings.ContainsAny(lit, ".eE") {
				return fmt.Sprintf("%s must be an integer, not %s", what, lit)
			}
			return fmt.Sprintf("%s: %s is out of range (%s to %s)", what, lit, lo, hi)
		}
	}
	return fmt.Sprintf("%s must be %s, not %s", what, jsonKind(te.Type), withArticle(got))
}

// intRange gives the bounds of an integer type as text.
func intRange(t reflect.Type) (lo, hi string, ok bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "", "", false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lo := int64(-1) << (t.Bits() - 1)
		return fmt.Sprint(lo), fmt.Sprint(^lo), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "0", fmt.Sprint(uint64(math.MaxUint64) >> (64 - t.Bits())), true
	}
	return "", "", false
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON value"
}

func withArticle(jsonType string) string {
	switch jsonType {
	case "array", "object":
		return "an " + jsonType
	case "bool":
		return "a boolean"
	case "":
		return "something else"
	}
	return "a " + jsonType
}
