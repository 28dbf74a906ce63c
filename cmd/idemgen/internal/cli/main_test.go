package cli

import (
	"testing"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// TestMain gives `idemgen purge` a real PostgreSQL (DATABASE_URL, or a throwaway cluster).
func TestMain(m *testing.M) { pgtest.Main(m) }
