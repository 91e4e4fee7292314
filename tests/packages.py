"""ZIP packages (Office, OpenDocument) with parts replaced, as a tool that edits one part
leaves them: the tests' way to damage or change a file a real tool wrote."""

from __future__ import annotations

import io
import zipfile


def rewritten(data: bytes, changes: dict[str, bytes]) -> bytes:
    """The package ``data`` with the parts named in ``changes`` replaced, in their place."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, changes.get(info.filename, src.read(info)))
    return out.getvalue()
