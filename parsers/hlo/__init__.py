"""HLO modules, text or binary proto, into one module model (`model`), with the one lists of
opcodes (`opcodes`) and element types (`dtypes`), replica groups, buffer assignments, the GPU a
dump was compiled for and the platform it names."""
