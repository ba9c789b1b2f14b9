"""The one error type a caller can fix by changing the request.

Inference Endpoints turns a ``ValueError`` raised by the handler into an HTTP 400 with the
message as the body, so everything the client got wrong (payload, audio, parameters) is a
subclass of it with a message that says what to change. Anything else is our fault and
surfaces as a 500.
"""


class InvalidRequestError(ValueError):
    """The request cannot be served as sent; the message tells the client what to fix."""


class AudioTooLongError(InvalidRequestError):
    """The audio runs longer than the service's configured limit (HTTP 413 on the server)."""
