"""Render only: an analysed report (`ReportModel`) or an `audit diff` document as text, in every format.

- `model/`: the report format itself (`ReportModel`, its op rows and columns, its JSON schema and reader)
- `render`: `Format` and the `Renderer` interface `audit.outputs` writes through
- `sections/`: the one section list; each section renders itself for terminal, markdown and HTML
- `terminal`, `markdown`, `html`: the page around the sections; `csv_report`, `json_report`
- `diff_model`: `DiffModel`, the typed `audit diff` document, JSON (`audit.diff/v1`) only at its edge
- `diff_sections`: the diff's sections, through the same machinery and page as the report's
- `buffer_contents`: the report part listing what each command buffer (CUDA graph) ran
- `svg`, `timeline_svg`, `payload`: the HTML page's charts and the data its script reads
- `napkin_text`, `plan_text`, `hardware_text`: `audit calc`, `plan` and `hardware` as text
- `text`: markdown escaping and table helpers (numbers: `costmodel.units`)
"""
