"""The `peagle` command line: one small module per command, each parse -> core call -> render."""
