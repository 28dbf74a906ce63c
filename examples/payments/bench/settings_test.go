package bench

import (
	"maps"
	"testing"
)

// -settings takes comma-separated name=value pairs, and a value that is a list.
func TestParseSettings(t *testing.T) {
	for in, want := range map[string]map[string]string{
		"":                                 {},
		"shared_buffers=1GB":               {"shared_buffers": "1GB"},
		" a = 1 , b=2":                     {"a": "1", "b": "2"},
		"shared_preload_libraries=x,y,z=3": {"shared_preload_libraries": "x,y", "z": "3"},
		"a=1,,b=2":                         {"a": "1", "b": "2"},
	} {
		if got := parseSettings(in); !maps.Equal(got, want) {
			t.Errorf("parseSettings(%q) = %v, want %v", in, got, want)
		}
	}
}
