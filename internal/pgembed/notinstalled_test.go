package pgembed

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Without binaries on PATH or in /usr/lib/postgresql/*/bin, Start says how to install
// PostgreSQL (the message idemtest.Main and the tests print).
func TestStartWithoutBinariesSaysHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := debianBinGlob
	debianBinGlob = t.TempDir() + "/*/bin"
	defer func() { debianBinGlob = old }()
	_, err := Start(context.Background(), Options{})
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "apt-get install postgresql") || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Fatalf("Start without binaries: %v, want ErrNotInstalled with the install commands", err)
	}
}
