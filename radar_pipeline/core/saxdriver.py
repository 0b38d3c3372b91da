"""The SAX driver feedparser's strict parser uses here: the standard library's expat reader with
character data buffered.

Plain expat hands text over in pieces, breaking at every entity reference and line end. An RSS
item's escaped HTML (`&lt;p&gt;...`) is thousands of pieces, and feedparser does a few dictionary
look-ups per piece in Python: over 400,000 calls for 50 feeds. Buffered, expat joins each
contiguous run of text into one call before any other event, so feedparser appends the same
text in fewer pieces and builds the same result (checked on every feed of the shared corpus,
`test_parse.py`) with about 30% less CPU.

`xml.sax.make_parser` imports the drivers feedparser names in `PREFERRED_XML_PARSERS` and calls
their `create_parser`; parse.py puts this module first in that list.
"""

from __future__ import annotations

from typing import Any
from xml.sax.expatreader import ExpatParser

# Text longer than this still arrives in more than one call (each at most this long).
BUFFER_SIZE = 1 << 16


class BufferedExpatParser(ExpatParser):
    """`ExpatParser` whose expat object buffers character data."""

    def reset(self) -> None:
        super().reset()
        expat = self._parser  # type: ignore[attr-defined]  # set by reset(); not in the stubs
        expat.buffer_text = True
        expat.buffer_size = BUFFER_SIZE


def create_parser(*args: Any, **kwargs: Any) -> BufferedExpatParser:
    return BufferedExpatParser(*args, **kwargs)
