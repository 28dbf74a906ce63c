package marker

import "testing"

// TestMisspelledExt: a typo of a marker extension (case ignored, or one edit away) names
// it; the names themselves and other tools' extensions two edits away or more do not.
func TestMisspelledExt(t *testing.T) {
	for key, want := range map[string]string{
		"x-idempotant":          MarkerExt,
		"X-Idempotent":          MarkerExt,
		"X-IDEMPOTANT":          MarkerExt,
		"x-idempotnet":          MarkerExt,
		"x_idempotent":          MarkerExt,
		"x-idempotents":         MarkerExt,
		"x-idempotent-default":  DefaultsExt,
		"X-Idempotent-Defaults": DefaultsExt,
		"x-idempotent-defualts": DefaultsExt,
		"x-idempotent":          "",
		"x-idempotent-defaults": "",
		"x-idempotency":         "",
		"x-idempotency-key":     "",
		"x-idempotence":         "",
		"x-idempotent-key":      "",
		"operationId":           "",
	} {
		got, _, ok := misspelledExt(key)
		if got != want || ok != (want != "") {
			t.Errorf("misspelledExt(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
}
