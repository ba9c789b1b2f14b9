"""Real Uvicorn servers on 127.0.0.1 for the transport tests, in a thread of the test process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from speaker_transcripts.config import ServerSettings
from speaker_transcripts.server.connection_guard import GuardedServer, guarded_config


@contextmanager
def serving(
    app: Any, settings: ServerSettings | None = None, startup_timeout_s: float = 60.0, log_level: str = "warning", **options: Any
) -> Iterator[str]:
    """Run ``app`` under Uvicorn as ``speaker-transcripts serve`` does (connection guard from ``settings``)
    on a free port; yield its base URL (https:// with ``ssl_certfile``); stop it afterwards. ``options`` are more of Uvicorn's."""
    config = guarded_config(app, settings, host="127.0.0.1", port=0, log_level=log_level, lifespan="on", **options)
    server = GuardedServer(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"{'https' if options.get('ssl_certfile') else 'http'}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def certificate_files(folder: Path, host: str = "127.0.0.1") -> dict[str, str]:
    """A throwaway CA's certificate for ``host`` in ``folder``: ``serving``'s TLS options (``ssl_certfile``,
    ``ssl_keyfile``) and the CA a client must trust (``ca``), as ``serve --ssl-certfile`` with your own CA."""
    import trustme

    authority = trustme.CA()
    issued = authority.issue_cert(host)
    issued.cert_chain_pems[0].write_to_path(folder / "cert.pem")
    issued.private_key_pem.write_to_path(folder / "key.pem")
    authority.cert_pem.write_to_path(folder / "ca.pem")
    return {"ssl_certfile": str(folder / "cert.pem"), "ssl_keyfile": str(folder / "key.pem"), "ca": str(folder / "ca.pem")}
