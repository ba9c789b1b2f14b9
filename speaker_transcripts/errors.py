"""The one error type a caller can fix by changing the request.

Inference Endpoints turns a ``ValueError`` raised by the handler into an HTTP 400 with the
message as the body, so everything the client got wrong (payload, audio, parameters) is a
subclass of it with a message that says what to change. Anything else is our fault and
surfaces as a 500. Messages quote what the client sent through ``shown``, so a 4 MB value or a
list nested a thousand deep makes a short message, not a 4 MB one or a ``RecursionError``.
"""

import reprlib

_SHOWN = reprlib.Repr()  # keyword arguments need Python 3.12
_SHOWN.maxlevel = 2
_SHOWN.maxstring = _SHOWN.maxother = 60
_SHOWN.maxlist = _SHOWN.maxdict = _SHOWN.maxtuple = _SHOWN.maxset = 4


class InvalidRequestError(ValueError):
    """The request cannot be served as sent; the message tells the client what to fix."""


class AudioTooLongError(InvalidRequestError):
    """The audio runs longer than the service's configured limit (HTTP 413 on the server)."""


def shown(value: object) -> str:
    """``repr(value)``, cut to a few dozen characters and two levels of nesting."""
    return _SHOWN.repr(value)


class RequestAbandoned(Exception):
    """The caller stopped waiting (client gone, deadline passed); the work was stopped early.
    Not an ``InvalidRequestError``: nobody is left to answer."""
