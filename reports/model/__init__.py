"""The report format, owned here: what every reader and writer of a report shares.

- `report`: `Report`, the typed report every output renders, JSON (`audit.report/v1`) only at its edge
"""
