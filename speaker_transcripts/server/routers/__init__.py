"""One router per API surface: the Endpoints payload, OpenAI's audio API, health and readiness."""
