"""The file layer: one suffix table, one CSV record definition, one "what leaves" plan.

* :mod:`.formats` -- :func:`~.formats.format_of`, the only suffix table;
* :mod:`.csv` -- the CSV record (RFC 4180, LF/CRLF) and its streaming reader
  :class:`~.csv.CsvReader`; the CSV format reads a whole file through it
  (:func:`~.formats.csv.scan_csv`: validate and count, :func:`~.formats.csv.read_csv`: a small
  file's rows);
* :mod:`.columns` -- :func:`~.columns.plan_columns`: which columns are released, kept
  unreleased (named) or dropped; :func:`~.header.table_header` reads the names it plans;
* :mod:`.leaks` -- :func:`~.leaks.check_names` and :class:`~.leaks.ContentScan`: a kept column
  that holds the released values under another name (by Unicode-normalised name, or by content
  within the release's scale) is refused, the one check of every release, made on the chunks
  the release reads.
"""

from __future__ import annotations

from .columns import ColumnPlan, look_alikes, plan_columns
from .csv import CsvReader, max_record_bytes
from .formats import FORMATS, TABLE_FORMATS, format_of
from .formats.csv import CsvScan, read_csv, scan_csv
from .header import table_header
from .leaks import ContentScan, LeakRule, check_names

__all__ = [
    "FORMATS", "TABLE_FORMATS", "ColumnPlan", "ContentScan", "CsvReader", "CsvScan", "LeakRule", "check_names",
    "format_of",
    "look_alikes",
    "max_record_bytes", "plan_columns", "read_csv", "scan_csv", "table_header",
]
