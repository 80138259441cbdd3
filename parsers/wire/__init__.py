"""Bytes in, shared by every reader: the protobuf wire format's varint and its C twin
(`_protowire.h`), message classes built from a compact declaration, compressed members expanded
within bounds, and input files read with a size cap."""
