package corpus

// The generated packages this test builds import oapi-codegen's runtime; importing it here
// keeps the runtime's own dependencies in the module's go.sum (`go mod tidy` drops what no
// package of the module imports), so the go command can build them.
import _ "github.com/oapi-codegen/runtime"
