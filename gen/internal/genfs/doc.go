// Package genfs is the last step of idemgen's generator (package gen): the file system
// generated files go through. FileSystem is small (read, write, remove, by base name);
// Dir writes a directory atomically, file by file; Check writes nothing and records what
// would change, for -check. Emit writes a run's files and removes the files of an earlier
// run that it no longer writes.
//
// It imports none of the other steps: gen passes it the names of the files idemgen owns.
// gen re-exports its types (gen.File, gen.FileSystem, gen.Dir, gen.Check, gen.Change).
package genfs
