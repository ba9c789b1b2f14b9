"""Models: the embedded registry (pull, verify, cache), the CTranslate2 -> transformers converter, the CPU fast path, CAM++ and the pyannote pipeline assembly."""
