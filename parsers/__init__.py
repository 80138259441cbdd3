"""Readers of other tools' formats, into typed records: one folder per format (`xplane/`, `nsys/`,
`hlo/`), what every profile reader hands on (`profile/`), the shared byte-level helpers (`wire/`),
and here the registry of profile formats (`readers`) and what an input is (`inputs`).

Nothing here costs or renders; it imports only `audit.base` of the rest of the project.
"""
