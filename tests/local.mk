# tests: rules for this part of the tree (included by the top-level Makefile.am).
