"""How a request about a document gets its answer: once the edits queued before it are processed,
from the document's newest state, built first if it is missing (the build queue puts it first).
A document that cannot have a state is answered at once, and what goes wrong becomes an LSP error."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInvalidParams

from ..documents.textsync import TextSyncError
from .protocol import DocumentPaused, RequestFailed

if TYPE_CHECKING:
    from .language_server import VQServer


async def ready(ls: VQServer, uri: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Run `fn(documents, uri, *args)` (documents/requests.py) on the engine thread for the
    document's newest state; errors become LSP error responses. A document that cannot have
    a state (out of sync, too long, over budget, not a prose file type, no model) is answered
    at once: nothing waits for a build that cannot help."""
    with ls.in_use(uri):
        await ls.coalescer.caught_up(uri)
        try:
            if (reason := ls.docs.eligibility.unavailable(uri)) is not None:
                st = ls.docs.states.get(uri)
                paused = st is not None and st.out_of_sync is not None
                raise (DocumentPaused if paused else RequestFailed)(f"no state for {uri}: {reason}")
            if (st := ls.docs.states.get(uri)) is not None and st.doc is None:
                if not await ls.builds.build(uri):  # it goes first, window by window
                    reason = ls.docs.eligibility.unavailable(uri)
                    paused = st.out_of_sync is not None
                    raise (DocumentPaused if paused else RequestFailed)(
                        f"no state for {uri}: {reason or 'it was closed'}"
                    )
            return await ls.on_engine(fn, ls.docs, uri, *args)
        except KeyError as e:
            raise JsonRpcInvalidParams(f"unknown document: {e.args[0]}") from None
        except LookupError as e:
            raise RequestFailed(str(e)) from None
        except TextSyncError as e:  # a position outside the document
            raise JsonRpcInvalidParams(str(e)) from None
