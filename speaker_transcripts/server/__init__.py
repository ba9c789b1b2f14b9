"""The self-hosted server: FastAPI on Uvicorn, a router per API surface, guards in front of them."""
