"""The report format, owned here: what every writer and reader of a report shares.

- `report`: `Report`, the typed report every output renders, JSON (`audit.report/v1`) only at its edge
- `summary`: `Summary`, the headline numbers, with the step times and the overlapped step
- `record`: `OpRecord` and `CollectiveRow`, one row of the op and collectives tables
- `interference`: an op among its identical ops, and what ran beside it
- `columns`: every op column declared once (header, unit, origin) for CSV, HTML, text and the DataFrame
- `frame`: the op table as a pandas DataFrame, each column's unit and origin in its attrs
- `schema`: the JSON Schema of `audit.report/v1`, generated from these types into `report.schema.json`
- `read`: a JSON report read back and validated against that schema (`audit.load`, `audit diff`)
"""
