package store

import "testing"

// TestValidJSONText: a JSON string literal decodes to valid UTF-8 as
// written only when its bytes are UTF-8 and each escaped surrogate is
// half of a pair.
func TestValidJSONText(t *testing.T) {
	for lit, want := range map[string]bool{
		`"Heat"`:               true,
		`"Straße 🎬"`:           true,
		`"\ud83c\udfac"`:       true,
		`"\uD83C\uDFAC x"`:     true,
		`"\u0041\\ud800\n"`:    true, // an escaped backslash, then text
		`"\\\ud83c\udfac"`:     true,
		`"\ud800"`:             false,
		`"\udc00\ud800"`:       false,
		`"\ud83c\u0041"`:       false,
		`"\ud83c\ud83c\udfac"`: false,
		`"x\ud83c"`:            false,
		"\"Heat\xff\"":         false,
		"\"\xed\xa0\x80\"":     false, // a surrogate encoded as UTF-8 bytes
		`"\u12"`:               true,  // not an escape json accepts: the decoder says so
	} {
		if _, got := validJSONText([]byte(lit)); got != want {
			t.Errorf("validJSONText(%s) = %v, want %v", lit, got, want)
		}
	}
}
