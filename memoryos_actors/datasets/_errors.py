"""The error raised for unreadable or malformed data set files."""

from __future__ import annotations

from ..errors import InvalidInput

__all__ = ["DatasetError"]


class DatasetError(InvalidInput):
    """A data set file is missing, not valid JSON, or not in the expected layout.

    The message names the file and, when known, the line (``path:line: reason``).
    """
