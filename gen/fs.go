package gen

import "github.com/idemgen/idemgen/gen/internal/genfs"

// FileSystem is where generated files go. [Dir] writes them; [Check] compares them with
// what is there and records the differences, for -check. Names are base names within the
// output directory.
type FileSystem = genfs.FileSystem

// Dir is a directory on disk. Files are written to a temporary name and renamed, so a
// reader never sees half a file; the directory is created when missing.
type Dir = genfs.Dir

// Check is the FileSystem of -check: it reads a directory, writes nothing, and records
// every file that would change.
type Check = genfs.Check

// Change is one file -check found out of date.
type Change = genfs.Change

// Emit writes files to fsys and removes the files idemgen wrote earlier that files no
// longer holds (oapi.gen.go after a switch to -base=external).
func Emit(fsys FileSystem, files []File) error {
	return genfs.Emit(fsys, files, BaseFile, IdempotentFile, SpecFile, ClientFile)
}

// Write emits files into the directory dir (created when missing).
func Write(dir string, files []File) error { return Emit(Dir(dir), files) }
